"""Reading a sweep's ``OUT/sweep.json`` for the commands that only look
(``status``, ``report``): one line naming the file when it is missing,
unreadable or of the wrong shape, never a traceback (a ``sweep.json`` of
``[]`` gave ``AttributeError: 'list' object has no attribute 'get'``)."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import InputError

NAME = "sweep.json"
FIX = "restore it from a backup, or run the sweep again into a new --out"
# Fields that readers take apart, and the JSON type each must have when present.
SHAPES = {"config": dict, "attempts": dict, "checks": int}


def read_sweep_manifest(out: Path) -> dict:
    """``OUT/sweep.json`` as a dict; InputError if ``out`` is no sweep
    directory or its manifest cannot be read as one."""
    out = Path(out)
    path = out / NAME
    if not path.is_file():
        raise InputError(out, f"not a sweep directory (no {NAME})",
                         "pass the --out directory of a `proofbatch run`")
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(path, f"unreadable sweep manifest ({exc})", FIX) from None
    if not isinstance(manifest, dict):
        raise InputError(path, f"is not a sweep manifest (a JSON {type(manifest).__name__}, not an "
                         "object)", FIX)
    for field, kind in SHAPES.items():
        value = manifest.get(field)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            raise InputError(path, f"its {field} is {json.dumps(value)[:40]}, not a JSON "
                             f"{'object' if kind is dict else 'whole number'}", FIX)
    return manifest
