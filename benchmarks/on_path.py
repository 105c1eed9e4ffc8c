"""Puts benchmarks/ and each of its group folders on ``sys.path``.

``python benchmarks/limits/loaded_host.py`` puts only benchmarks/limits/ on
the path, and the scripts import ``common`` and ``record`` (benchmarks/) and
each other's helpers across groups (``s2n_readme_path`` from s2n/) by bare
name. Each group folder holds a symbolic link to this one file, so a script
begins with ``import on_path`` and finds them all; ``common`` then puts the
checkout's root on the path. The standard library only: scripts that time
their own start-up (scale/shards_scale.py's children) measure themselves.
"""

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent     # resolve(): through a group's link, to here
GROUPS = sorted(p for p in BENCHMARKS.iterdir()
                if p.is_dir() and (p / "on_path.py").is_symlink())

# Right after the script's own folder, ahead of site-packages: an installed
# package of the same name (record, planning) must not win.
for at, folder in enumerate((BENCHMARKS, *GROUPS), start=1):
    if str(folder) not in sys.path:
        sys.path.insert(at, str(folder))
