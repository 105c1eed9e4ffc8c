"""Publishing a file atomically: it appears whole, with its content, or not at all."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable


def _fsync_dir(directory: Path) -> None:
    # POSIX: a rename is only durable once the directory holding the entry is
    # fsynced; without it a power loss can bring back the old directory state.
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(path: Path, write: Callable[[Path], None]) -> None:
    """Make ``path`` appear with the content ``write`` produces, or not at all.

    As submitit's ``temporary_save_path``: ``write`` fills a temp file in the
    same directory (``os.replace`` is atomic only within one filesystem), the
    temp file is fsynced (otherwise the rename can reach the disk before the
    data and a crash leaves a complete-looking empty file), renamed over
    ``path``, and the directory is fsynced. On failure the temp is removed.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def publish_json(path: Path, data: Any, *, indent: int | None = None, newline: bool = True) -> None:
    """Publish ``data`` as ``json.dumps(data, indent=indent)`` at ``path``, as
    ``publish`` does, ending in a newline unless ``newline`` is False (for
    the files written without one before: their bytes stay as they were)."""
    text = json.dumps(data, indent=indent) + ("\n" if newline else "")
    publish(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
