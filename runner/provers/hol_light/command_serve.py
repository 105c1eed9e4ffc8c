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

NAME = "serve"
HELP = ("keep HOL Light images loaded and serve checks to `proofbatch run --server DIR`, "
        "so a killed runner resumes without reloading HOL Light")


def add_arguments(p) -> None:
    p.add_argument("dir", type=Path, help="directory for the server's socket and key (made 0700)")
    p.add_argument("--hol-light", type=Path, help="HOL Light checkout built with make (has hol.sh)")
    p.add_argument("--context-root", type=Path,
                   help="directory that needs/loadt in setup.ml resolve against (default: cwd)")
    p.add_argument("--max-images", type=int, default=8, help="loaded contexts kept at once")
    p.add_argument("--grace", type=float, default=2.0,
                   help="seconds past the limit before the outside kill (default 2)")
    p.add_argument("--sandbox", choices=KINDS, default="auto", help="the box checks run in")
    p.add_argument("--context-proofs", choices=("replay", "trust"), default="replay",
                   help="contexts replay their proofs (default) or trust them (see `run`)")


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
