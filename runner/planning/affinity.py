"""The dispatcher's choices between the priority order and the images a
node holds (``runner.planning.dispatch.Dispatcher.take``): when the next
problem in priority order needs images its node lacks, keep it, or take the
longest problem of an image the node holds, else of an image no node holds
yet, or a later problem no other node is better placed for; or wait, when
other nodes hold its chain and will finish its problems sooner than this
node could load it.

``Dispatcher`` mixes ``ImageAffinity`` in and keeps the state below in its
``__init__``.
"""

from __future__ import annotations

import heapq
from typing import Callable

from .node_images import NodeImages
from .planner import Plan


class ImageAffinity:
    # State the dispatcher sets up in __init__ (runner/planning/dispatch.py):
    plan: Plan
    lookahead: int
    cores: int
    workers: int
    image: list[str]                         # each unit's image
    cost: list[float]
    mem: list[int]
    taken: bytearray
    work_left: float
    chains: dict
    stems: dict
    pending: dict[str, int]
    node_images: list[NodeImages]
    unheld: list[tuple[int, str]]
    held: set[str]
    holders: dict[str, int]
    image_work: dict[str, float]
    tree_work: dict[str, float]
    running: list[int]
    waiting: list[int]
    on_node: list[set[int]]
    heaps: list[list]
    retry_s: float
    _queue_head: Callable[[str], int | None]

    def _best_warm(self, node: int, free: int) -> int | None:
        """The longest check whose image this node holds and that fits ``free``."""
        heap, skipped, found = self.heaps[node], [], None
        while heap and len(skipped) < self.lookahead:
            _, i, key, anchor = heap[0]
            if anchor not in self.node_images[node]:     # evicted: pushed again when reloaded
                heapq.heappop(heap)
                continue
            actual = self._queue_head(key)
            if actual != i:                # its check was taken: refresh the entry
                heapq.heappop(heap)
                if actual is not None:
                    heapq.heappush(heap, (-self.cost[actual], actual, key, anchor))
                continue
            if self.mem[i] <= free:
                found = i
                break
            skipped.append(heapq.heappop(heap))
        for entry in skipped:
            heapq.heappush(heap, entry)
        return found

    def _elsewhere(self, i: int, node: int) -> bool:
        """``i`` continues a chain another node holds: its image's ancestors
        below the chain's last branch point (a proof file's earlier contexts,
        each extending the last), held there and not here, and that node
        finishes the work under them sooner than this one could load them.
        Above a branch point (a library many files start from) each node
        loads what it needs."""
        have = self.node_images[node]
        foreign = [k for k in self.stems[self.image[i]] if k not in have and self.holders.get(k)]
        if not foreign:
            return False
        deepest = foreign[-1]
        load = sum(self.plan.build_s(k) for k in foreign)
        delay = self._holders_free_in(deepest)
        return delay is not None and \
            delay + self.tree_work[deepest] / (self.holders[deepest] * self.cores) < load

    def _holders_free_in(self, key: str) -> float | None:
        """How soon a node that holds ``key`` has a core free for its work:
        0 with an idle core, else the shortest expected time of the problems
        it runs (an upper bound: they began earlier); None if no node holds
        it. A holder whose cores all run long proofs takes nothing before
        they end, so a node that waits for it pays that wait (replay contexts
        of x86 proofs at 512 workers: a file's small problems waited 4,500 s
        for a holder busy with 5,000 s proofs, and the sweep took 1.8x the
        naive order)."""
        if not self.holders.get(key):
            return None
        best = None
        for n, images in enumerate(self.node_images):
            if key not in images:
                continue
            if self.running[n] + self.waiting[n] < self.cores:
                return 0.0
            if self.running[n] < self.cores:
                continue           # its idle workers wait for others in turn
            soonest = min((self.cost[i] for i in self.on_node[n]), default=0.0)
            best = soonest if best is None else min(best, soonest)
        return best

    def _first_unheld(self, free: int, node: int) -> int | None:
        """The next check of the first image no node holds, if it fits
        ``free``, passing over (up to ``lookahead``) images better built
        where part of their chain is (``_elsewhere``)."""
        heap, skipped, found = self.unheld, [], None
        while heap and len(skipped) < self.lookahead:
            i, key = heap[0]
            actual = self._queue_head(key) if key not in self.held else None
            if actual != i:
                heapq.heappop(heap)
                if actual is not None:
                    heapq.heappush(heap, (actual, key))
                continue
            if self._elsewhere(i, node):
                skipped.append(heapq.heappop(heap))
                continue
            found = i if self.mem[i] <= free else None
            break
        for entry in skipped:
            heapq.heappush(heap, entry)
        return found

    def _affine(self, pick: int, node: int, free: int) -> int | None:
        """``pick`` needs an image this node lacks: keep it, or take a check
        of an image the node holds (or one nobody holds yet); None when the
        worker had better wait."""
        cfg, key = self.plan.config, self.image[pick]
        have = self.node_images[node]
        missing = sum(self.plan.build_s(k) for k in self.chains[key] if k not in have)
        # Loading here evicts idle images (a node keeps images_per_node): one
        # with work left would be built again, so that build counts too.
        rebuild = sum(self.plan.images[k].build_s for k in have.victims(self.chains[key])
                      if self.pending.get(k))
        if self.cost[pick] >= cfg.affinity_factor * (missing + rebuild):
            return pick                 # long next to the loads: longest first wins
        critical = cfg.critical_share * self.work_left / self.workers
        # Other nodes hold the image, or part of its chain, and finish the
        # work there before this one could load it.
        soon = self._soon(pick, node, missing)
        # Images no node holds must be loaded somewhere: their load is part
        # of the problem's length. A pick that would evict work is never
        # critical: warm work comes first.
        length = self.cost[pick] + sum(self.plan.build_s(k) for k in self.chains[key]
                                       if not self.holders.get(k))
        if length >= critical and not soon and not rebuild:
            return pick
        other = self._best_warm(node, free)
        if other is None:
            other = self._first_unheld(free, node)
        if other is None and soon:
            other = self._next_here(pick, node, free)
        if other is not None:
            return other
        if soon and any(self.running):
            # Waiting on other nodes: by this time the load would have been
            # done here, so the worker asks again then, whatever its node
            # does. With nothing running anywhere, nobody is waited for.
            self.retry_s = missing
            return None
        return pick

    def _soon(self, i: int, node: int, missing: float) -> bool:
        """Other nodes hold ``i``'s image, or part of its chain, and finish
        the work there before this one could load it (``missing`` s)."""
        key = self.image[i]
        delay = self._holders_free_in(key)
        return (delay is not None and
                delay + self.image_work[key] / (self.holders[key] * self.cores) < missing) or \
            self._elsewhere(i, node)

    def _next_here(self, pick: int, node: int, free: int) -> int | None:
        """``pick`` is better done where its chain is: the next problem in
        priority order that fits ``free``, is not, and evicts nothing a
        pending problem needs. Without it a worker waited whenever the first
        problem left was another node's, though later ones were nobody's to
        wait for (x86 proofs, replay, 512 workers: a proof file's 41 small
        problems started only when the slowest chain was done, 1.8x the
        naive makespan)."""
        have = self.node_images[node]
        seen, looked = {self.image[pick]}, 0
        i = pick + 1
        while i < len(self.taken) and len(seen) <= self.lookahead and looked < 4 * self.lookahead:
            key = self.image[i]
            if not self.taken[i] and key not in seen and self.mem[i] <= free:
                seen.add(key)
                chain = self.chains[key]
                missing = sum(self.plan.build_s(k) for k in chain if k not in have)
                if not self._soon(i, node, missing) and \
                        not any(self.pending.get(k) for k in have.victims(chain)):
                    return i
            looked += 1
            i += 1
        return None
