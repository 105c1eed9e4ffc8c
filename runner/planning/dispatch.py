"""The planner's dispatcher: the scheduling policy every executor drives
(through ``runner.planning.live_queue.LiveQueue``) and the simulator drives
on a virtual clock (``runner.planning.simulate``). See
``runner.planning.planner`` for the policies.

Per node it tracks free memory, running checks and the images the node
holds; per image, its remaining problems in priority order. A free worker
gets, in this order of preference: the first problem in priority order
that fits its node's memory (packed so no idle core is stranded); if that
one needs an image the node lacks and is not long, the longest problem of
an image the node holds, else of an image no node holds yet; or nothing,
when other nodes hold that image and will finish its problems sooner than
this node could load it. Those choices between the priority order and a
node's images are ``runner.planning.affinity``'s; this module keeps the
dispatcher's state, the priority order, the waits for images a node is
loading (``_sooner``) and the bookkeeping of a take and a finish.
"""

from __future__ import annotations

import heapq
from collections import defaultdict, deque
from dataclasses import dataclass

from .affinity import ImageAffinity
from .chains import chain_shapes
from .mem_classes import MemoryClasses
from .node_images import NodeImages
from .planner import Plan, PlanCheck, Policy, units_of

WAIT = "wait"   # take(): nothing fits this node's free memory until a check ends


@dataclass(frozen=True)
class Take:
    index: int                      # the problem's unit (Dispatcher.units)
    checks: tuple[PlanCheck, ...]   # its attempts, drained in this order by one worker
    new_images: tuple[str, ...]     # images its node gains (again, if evicted), base first:
                                    # this worker loads them


class Dispatcher(ImageAffinity):
    """The scheduling policy: gives a free worker its next problem (all its
    attempts; ``make_plan`` keeps them together).

    Not thread-safe; the local executor holds a lock around it. Workers are
    numbered 0 .. count-1; worker w runs on node w // cores_per_node. Each
    node starts with its base image and the plan's prebuilt images.
    """

    def __init__(self, plan: Plan):
        self.plan = plan
        cfg, workers = plan.config, plan.workers
        checks = plan.checks
        self.units = units_of(checks)
        self.image = [checks[a].image_key for a, _ in self.units]
        self.affinity = cfg.policy == Policy.PLANNED and not cfg.submission_order
        self.lookahead = cfg.lookahead if self.affinity else 1
        self.cores = workers.cores_per_node
        self.workers = workers.count
        self.cost = [sum(plan.cost(c) for c in checks[a:b]) for a, b in self.units]
        # A check larger than a whole node runs alone rather than never.
        self.mem = [min(max(c.mem_bytes for c in checks[a:b]), workers.mem_per_node)
                    for a, b in self.units]
        self.taken = bytearray(len(self.units))
        self.left = len(self.units)
        self.work_left = sum(self.cost)
        self.head = 0
        self.classes = MemoryClasses(self.mem, self.taken)
        self.chains, self.stems, self.next_context = chain_shapes(plan, set(self.image))
        self.by_image: dict[str, deque[int]] = {}
        for i, key in enumerate(self.image):
            self.by_image.setdefault(key, deque()).append(i)
        for key in self.chains:    # an image holds the checks of the images below it too
            for ancestor in self.chains[key][:-1]:
                self.by_image.setdefault(ancestor, deque())
        # Problems not yet taken whose chain has each image, as a session
        # counts its pending checks (runner/provers/hol_light/session/image_tree.py).
        self.pending: dict[str, int] = defaultdict(int)
        for key in self.image:
            for ancestor in self.chains[key]:
                self.pending[ancestor] += 1
        start = {plan.base} | set(plan.prebuilt)
        self.node_images = [NodeImages(workers.images_per_node, start, plan.base,
                                       needed=lambda key: self.pending.get(key, 0),
                                       rebuild_s=lambda key: plan.images[key].build_s)
                            for _ in range(workers.nodes)]
        # Images no node holds yet, by their next check: where a node with
        # nothing warm left goes, rather than after the images others hold.
        self.unheld = [(q[0], key) for key, q in self.by_image.items() if q and key not in start]
        heapq.heapify(self.unheld)
        self.held = set(start)
        self.holders: dict[str, int] = {key: workers.nodes for key in start}
        self.image_work: dict[str, float] = defaultdict(float)
        # Work left under each image: its problems' and its descendants'.
        self.tree_work: dict[str, float] = defaultdict(float)
        for i, key in enumerate(self.image):
            self.image_work[key] += self.cost[i]
            for ancestor in self.chains[key]:
                self.tree_work[ancestor] += self.cost[i]
        # Per node, the images a worker is loading for its problem, until that
        # problem ends: another worker that needs one waits for it.
        self.building: list[dict[str, int]] = [{} for _ in range(workers.nodes)]
        self.builds_of: dict[int, tuple[str, ...]] = {}
        self.free_mem = [workers.mem_per_node] * workers.nodes
        self.running = [0] * workers.nodes
        # Set by take() when it says WAIT for other nodes' work rather than
        # for this node's memory: ask again after this many seconds.
        self.retry_s = 0.0
        self.on_node: list[set[int]] = [set() for _ in range(workers.nodes)]   # problems running
        # Workers waiting for other nodes' work, per node: their cores are
        # idle but take nothing, so no other node waits for them.
        self.waiters: set[int] = set()
        self.waiting = [0] * workers.nodes
        # Per node, a lazy max-heap of (-expected, index, image, held image)
        # over the next checks of its images and of their next contexts.
        self.heaps: list[list] = [[] for _ in range(workers.nodes)]
        for node in range(workers.nodes):
            for key in start:
                self._push(node, key)

    def _queue_head(self, key: str) -> int | None:
        q = self.by_image.get(key)
        while q and self.taken[q[0]]:
            q.popleft()
        return q[0] if q else None

    def _push(self, node: int, key: str) -> None:
        """Offer this node the next problem of ``key`` and, down a chain,
        of the image next below it (``next_context``), held through ``key``."""
        for image in (key, self.next_context.get(key)):
            i = None if image is None else self._queue_head(image)
            if i is not None:
                heapq.heappush(self.heaps[node], (-self.cost[i], i, image, key))

    def _first_fitting(self, free: int) -> int | None:
        """The first check in priority order that fits ``free``; for the naive
        and shuffle policies only the very next one (submission order waits)."""
        taken = self.taken
        while self.head < len(taken) and taken[self.head]:
            self.head += 1
        if self.head == len(taken) or self.mem[self.head] <= free:
            return self.head if self.head < len(taken) else None
        return self.classes.first_fitting(free) if self.affinity else None

    def take(self, worker: int) -> Take | str | None:
        """The next problem for ``worker``; WAIT when none fits its node's
        free memory yet, or when only problems of images other nodes hold and
        will soon finish are left; None when nothing is left for it."""
        self.retry_s = 0.0
        node = worker // self.cores
        if worker in self.waiters:
            self.waiters.discard(worker)
            self.waiting[node] -= 1
        if self.left == 0:
            return None
        free = self.free_mem[node]
        if self.affinity:
            # Pack memory so that no core is stranded: leave room for the
            # smallest remaining check on each other idle core of the node.
            smallest = self.classes.smallest()
            packed = free - (self.cores - self.running[node] - 1) * smallest
            if packed >= smallest:
                free = packed
        pick = self._first_fitting(free)
        if pick is None and free < self.free_mem[node]:
            free = self.free_mem[node]
            pick = self._first_fitting(free)
        if (self.affinity and pick is not None
                and self.image[pick] not in self.node_images[node]):
            pick = self._affine(pick, node, free)
            if pick is None:
                # Other nodes' work, still running: ask again (retry_s). A
                # worker told None here before retired for good when its own
                # node ran nothing, though problems were left for it later
                # (x86 proofs, replay, 512 workers: 480 of 512 workers retired
                # and the sweep took 1.8x the naive order).
                self.waiters.add(worker)
                self.waiting[node] += 1
                return WAIT
        if pick is None:
            if self.running[node]:
                return WAIT
            pick = self.head       # nothing runs here and nothing fits: it runs alone
        elif self.affinity and self.building[node]:
            pick = self._sooner(pick, node, free)
        return self._assign(pick, node, worker)

    def _waits(self, i: int, node: int) -> float:
        """Seconds of ``i``'s chain that other workers of the node are loading."""
        building = self.building[node]
        return sum(self.plan.build_s(k) for k in self.chains[self.image[i]] if k in building)

    def _sooner(self, pick: int, node: int, free: int) -> int:
        """``pick``, unless it would wait for images another worker of this
        node is still loading: then a check that waits less and is done
        (its wait and its time, its own loads aside) before ``pick`` could
        start, the first in priority order that waits least. Only one whose
        loads are work no other node has done (no image loaded twice across
        the cluster) and evict nothing a pending check needs. A session
        builds images of separate chains at once, but one chain only in
        order (each image is forked from its parent): two workers sent down
        one chain (a proof file's problems, each context extending the last)
        took turns waiting for each other, while the next file needed only
        the library (benchmarks/images/bench_prefix.py)."""
        best, least = pick, self._waits(pick, node)
        deadline = least
        seen, looked = {self.image[pick]}, 0
        have = self.node_images[node]
        i = self.head
        while least and i < len(self.taken) and len(seen) <= self.lookahead \
                and looked < 4 * self.lookahead:
            key = self.image[i]
            if not self.taken[i] and key not in seen and self.mem[i] <= free:
                seen.add(key)
                wait = self._waits(i, node)
                chain = self.chains[key]
                if (wait < least and wait + self.cost[i] <= deadline
                        and not any(self.holders.get(k) for k in chain if k not in have)
                        and not any(self.pending.get(k) for k in have.victims(chain))):
                    best, least = i, wait
            looked += 1
            i += 1
        return best

    def _assign(self, i: int, node: int, worker: int) -> Take:
        self.taken[i] = 1
        self.left -= 1
        self.work_left -= self.cost[i]
        self.image_work[self.image[i]] -= self.cost[i]
        self.free_mem[node] -= self.mem[i]
        self.running[node] += 1
        self.on_node[node].add(i)
        for key in self.chains[self.image[i]]:
            self.pending[key] -= 1
            self.tree_work[key] -= self.cost[i]
        new, evicted = self.node_images[node].take(self.chains[self.image[i]])
        for key in evicted:
            self.holders[key] -= 1
            if not self.holders[key]:       # no node holds it now
                self.held.discard(key)
                head = self._queue_head(key)
                if head is not None:
                    heapq.heappush(self.unheld, (head, key))
        self.builds_of[worker] = new
        for key in new:
            self.building[node][key] = worker
            self.held.add(key)
            self.holders[key] = self.holders.get(key, 0) + 1
            self._push(node, key)
        a, b = self.units[i]
        return Take(i, self.plan.checks[a:b], new)

    def finish(self, worker: int, index: int) -> None:
        """``worker`` is done with unit ``index``: its memory is free again."""
        node = worker // self.cores
        for key in self.builds_of.pop(worker, ()):
            if self.building[node].get(key) == worker:
                del self.building[node][key]
        self.free_mem[node] += self.mem[index]
        self.running[node] -= 1
        self.on_node[node].discard(index)
        self.node_images[node].release(self.chains[self.image[index]])
