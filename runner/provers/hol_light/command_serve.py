"""proofbatch serve: keep HOL Light images loaded for runners on this host."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from .backend import HolLightBackend
from .install import find_hol_light
from ...image_server import ImageServer
from ...sandbox import KINDS, SandboxConfig
from ...settings import option
from ...sweep import SweepConfig

NAME = "serve"
HELP = ("keep HOL Light images loaded and serve checks to `proofbatch run --server DIR`, "
        "so a killed runner resumes without reloading HOL Light")


def add_arguments(p) -> None:
    p.add_argument("dir", type=Path, help="directory for the server's socket and key (made 0700)")
    # Help and defaults as for `proofbatch run` (SweepConfig, SandboxConfig).
    p.add_argument("--hol-light", type=Path, **option(SweepConfig, "hol_light"))
    p.add_argument("--context-root", type=Path, **option(SweepConfig, "context_root"))
    p.add_argument("--max-images", type=int, **option(SweepConfig, "max_images"))
    p.add_argument("--grace", type=float, **option(SweepConfig, "grace"))
    p.add_argument("--sandbox", choices=KINDS, **option(SandboxConfig, "kind"))
    p.add_argument("--context-proofs", choices=("replay", "trust"),
                   **option(SweepConfig, "context_proofs"))


def run(args) -> int:
    backend = HolLightBackend(find_hol_light(args.hol_light), args.context_root or Path.cwd(),
                              max_images=args.max_images, grace_s=args.grace,
                              sandbox_config=SandboxConfig(kind=args.sandbox),
                              context_proofs=args.context_proofs)
    workdir = Path(tempfile.mkdtemp(prefix="proofbatch-serve-"))
    try:
        with backend.start(workdir) as session:
            server = ImageServer(session, args.dir)
            print(f"proofbatch: serving HOL Light images on {args.dir}", file=sys.stderr, flush=True)
            try:
                server.serve_forever()
            finally:
                server.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0
