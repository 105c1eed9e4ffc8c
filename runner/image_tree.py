"""The loaded images of a HOL Light session, bytecode or native: each built
once by forking its parent, shared by the session's workers, held while in
use and evicted least recently used beyond the session's ``max_images``.

A session mixes ``ImageTree`` in beside ProverSession, keeps the state below
in its ``__init__`` and says how one image is forked (``_fork_image``).
"""

from __future__ import annotations

import threading
import time

from . import contexts
from .fork_server import ImageFailed, ImageProcess
from .prover import ImageBuild


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

    def _release(self, key: str) -> None:
        with self._lock:
            self._in_use[key] -= 1

    def _built(self, key: str, parent: str | None, secs: float) -> None:
        with self._lock:
            self.image_build_secs[key] = secs
            self.image_builds.append(ImageBuild(key, parent, secs, time.time()))

    def _evict_if_full(self) -> None:
        """Quit the least recently used idle images beyond ``max_images``."""
        with self._lock:
            idle = sorted((img.last_used, k) for k, img in self._images.items()
                          if k != self.base_key and not self._in_use.get(k))
            excess = len(self._images) - self.backend.max_images
            victims = [self._images.pop(k) for _, k in idle[:max(0, excess + 1)]]
        for image in victims:
            image.close()
