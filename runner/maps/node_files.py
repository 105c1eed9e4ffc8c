"""Where a per-node sweep keeps what each node found (issue 47): its factor
(runner/maps/node_factor.py) and its canary (runner/maps/canary.py), under
``OUT/node-factors/``, one file per host or CPU model."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

NODE_DIR = "node-factors"


def node_dir(out: Path) -> Path:
    return Path(out) / NODE_DIR


def slug(text: str) -> str:
    """A file name for a host or CPU model: readable, and unique by a hash."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:40]
    return f"{readable}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"
