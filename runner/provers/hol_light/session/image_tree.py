"""The loaded images of a HOL Light session, bytecode or native: each built
once by forking its parent, shared by the session's workers, held while in
use, and evicted beyond the session's ``max_images``: first those no pending
check needs, then those cheapest to build again (``_evict_if_full``).

A session mixes ``ImageTree`` in beside ProverSession, keeps the state below
in its ``__init__`` and says how one image is forked (``_fork_image``).
"""

from __future__ import annotations

import threading
import time
from typing import Iterable

from .. import contexts
from .fork_server import ImageFailed, ImageProcess
from ....prover import ImageBuild


class ImageTree:
    # State the session sets up in __init__:
    _lock: threading.Lock
    _nodes: dict[str, contexts.ImageNode]
    _images: dict[str, ImageProcess]
    _failed: dict[str, str]                  # the context failed to load: ERROR setup
    _in_use: dict[str, int]
    _build_locks: dict[str, threading.Lock]
    image_builds: list[ImageBuild]
    image_build_secs: dict[str, float]       # latest build of each key
    base_key: str
    _image_of: dict[str, str]                # problem id -> its context's image
    _pending: dict[str, int]                 # problem id -> its checks prepared, not yet done

    def _fork_image(self, parent: ImageProcess, node: contexts.ImageNode) -> ImageProcess:
        """Fork ``node``'s image from its loaded ``parent``; raises ImageFailed."""
        raise NotImplementedError

    def _acquire(self, key: str) -> ImageProcess:
        """The live image for ``key``, held (never evicted) until _release.

        Builds the image and its ancestors as needed; a second worker that
        needs the same image waits for the first one's build.
        """
        with self._lock:
            if key in self._failed:
                raise ImageFailed(key, self._failed[key])
            if key in self._images:
                self._in_use[key] = self._in_use.get(key, 0) + 1
                return self._images[key]
            build_lock = self._build_locks.setdefault("image:" + key, threading.Lock())
            node = self._nodes[key]
        with build_lock:
            with self._lock:
                built = key in self._images or key in self._failed
            if not built:
                parent = self._acquire(node.parent)
                try:
                    self._evict_if_full()
                    image = self._fork_image(parent, node)
                except ImageFailed as failed:
                    with self._lock:
                        self._failed[key] = failed.reason
                    raise
                finally:
                    self._release(parent.key)
                with self._lock:
                    self._images[key] = image
            return self._acquire(key)

    def _expect(self, problem_ids: Iterable[str]) -> None:
        """One check to come per id given (a problem's attempts: its id once each)."""
        with self._lock:
            for pid in problem_ids:
                self._pending[pid] = self._pending.get(pid, 0) + 1

    def _settled(self, problem_id: str) -> None:
        """A check of ``problem_id`` is done (or will not run): its images
        are needed by one pending check less. Once per check, however often
        it was retried; a check never announced changes nothing."""
        with self._lock:
            if self._pending.get(problem_id, 0) <= 0:
                return
            self._pending[problem_id] -= 1

    def withdraw(self, problem) -> None:
        """A prepared check that will not run (its verdict was reused, or it
        was skipped): see ProverSession.withdraw."""
        self._settled(problem.problem_id)

    def _release(self, key: str) -> None:
        with self._lock:
            self._in_use[key] -= 1

    def _built(self, key: str, parent: str | None, secs: float) -> None:
        with self._lock:
            self.image_build_secs[key] = secs
            self.image_builds.append(ImageBuild(key, parent, secs, time.time()))

    def _needed_now(self) -> set[str]:
        """The loaded images a pending check would fork from, or build its
        image from: for each, the nearest loaded image on its chain (its own,
        else the closest ancestor). An ancestor with a loaded image below it
        on every pending path is not needed: nothing forks from it again. A
        proof file cut theorem by theorem is one long chain, every image an
        ancestor of every later problem; counting ancestors as needed made
        the chain's tip as evictable as its ancestors, and the tip went,
        to be rebuilt down the chain (tests/hol_light/test_extract.py)."""
        wanted = {self._image_of.get(pid) for pid, n in self._pending.items() if n > 0}
        needed = set()
        for key in wanted:
            while key is not None and key not in self._images:
                key = self._nodes[key].parent
            if key is not None:
                needed.add(key)
        return needed

    def _evict_if_full(self) -> None:
        """Quit idle images beyond ``max_images``, in this order: those no
        pending check needs (``_needed_now``), least recently used first;
        then, if more must go, those cheapest to build again (their last
        measured build), least recently used first among equals. An image a
        pending check needs is built again before that check runs, so losing
        it costs its build once more (a 35,000-line bench context: minutes),
        while one no check needs costs nothing; runner/planning/node_images.py
        (NodeImages) plans with the same order, counting every image on a
        pending check's chain as needed."""
        with self._lock:
            if len(self._images) < self.backend.max_images:
                return
            needed_now = self._needed_now()

            def order(k: str):
                needed = k in needed_now
                return (needed, self.image_build_secs.get(k, 0.0) if needed else 0.0,
                        self._images[k].last_used, k)
            idle = sorted((order(k), k) for k in self._images
                          if k != self.base_key and not self._in_use.get(k))
            excess = len(self._images) - self.backend.max_images
            victims = [self._images.pop(k) for _, k in idle[:max(0, excess + 1)]]
        for image in victims:
            image.close()
