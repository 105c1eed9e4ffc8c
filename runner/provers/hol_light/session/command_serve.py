"""proofbatch serve: keep HOL Light images loaded for runners on this host."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ....checks.context_proofs import ContextProofs
from ....checks.sandbox import KINDS, SandboxConfig
from ....settings import option, setting

NAME = "serve"
HELP = ("keep HOL Light images loaded and serve checks to `proofbatch run --server DIR`, "
        "so a killed runner resumes without reloading HOL Light")
# While HOL Light boots (minutes on a loaded host), how often serve says it still does.
STILL_EVERY_S = 30.0


@dataclass(frozen=True)
class ServeSettings:
    """The settings serve shares with `proofbatch run`, with run's help and
    defaults. Run's are SweepConfig's, in runner/planning/, a stage above
    this package (which planning reaches through the registry), so serve
    says them here; tests/hol_light/test_command_serve.py holds the two to
    the same words."""

    hol_light: Path | None = setting("a HOL Light checkout built with make (has hol.sh); default: "
                                     "Debian's package", default=None)
    context_root: Path | None = setting("where needs/loadt in setup.ml resolve; default: the "
                                        "current directory", default=None)
    max_images: int = setting("loaded contexts kept alive at once on a host", default=8)
    grace: float = setting("seconds past the limit before the outside kill", default=2.0)
    context_proofs: str = setting(
        "HOL Light: replay (a context runs its proofs as written) or trust (while a context "
        "loads, its top-level prove returns the stated theorem unproved; answers still prove for "
        "real); part of every image key, recorded in rows and sweep.json; see docs/trust.md",
        default=str(ContextProofs.REPLAY))
    no_fallback: bool = setting(
        "with --mode native or auto: a check whose context cannot be compiled natively (a "
        "toplevel directive, a computed load, a compile error) is ERROR with the reason, instead "
        "of running in bytecode 4-7x slower under a converted limit; the other checks still run. "
        "Recorded in sweep.json; a resume must keep it when such checks exist", default=False)
    runtime: str | None = setting(
        "HOL Light: the OCaml runtime setting checks run under: default "
        "(OCaml's, as the bench's program runs), or e.g. s=4M,o=120,settle=compact "
        "(OCAMLRUNPARAM's minor heap s, space_overhead o and major increment i, and "
        "whether an image collects, compacts or neither before it serves); recorded "
        "in rows, sweep.json and maps, and a resume must keep it (default: "
        "the setting measured best in the mode: s=16M,o=200 with --mode native or "
        "auto, s=4M,o=200 in bytecode); see docs/native.md", default=None)


def add_arguments(p) -> None:
    p.add_argument("dir", type=Path, help="directory for the server's socket and key (made 0700)")
    # Help and defaults as for `proofbatch run` (ServeSettings, SandboxConfig).
    p.add_argument("--hol-light", type=Path, **option(ServeSettings, "hol_light"))
    p.add_argument("--context-root", type=Path, **option(ServeSettings, "context_root"))
    p.add_argument("--max-images", type=int, **option(ServeSettings, "max_images"))
    p.add_argument("--grace", type=float, **option(ServeSettings, "grace"))
    p.add_argument("--sandbox", choices=KINDS, **option(SandboxConfig, "kind"))
    p.add_argument("--context-proofs", choices=("replay", "trust"),
                   **option(ServeSettings, "context_proofs"))
    # Not auto: auto routes each check by the runner's map, which the server
    # does not have, so the server and the runner could disagree on a mode.
    p.add_argument("--mode", choices=("bytecode", "native"), default="bytecode",
                   help="the images served: bytecode (HOL Light's toplevel) or native (compiled; "
                   "runners pass the same --mode; docs/native.md)")
    p.add_argument("--no-fallback", action="store_true", **option(ServeSettings, "no_fallback"))
    # The images start under it; a runner's check sets its own s, o and i
    # (`run --server --runtime`), so only its settle must be the server's.
    p.add_argument("--runtime", metavar="SETTING", **option(ServeSettings, "runtime"))
    p.add_argument("--limit-clock", choices=("cpu", "wall"), default=None,
                   help="the one clock this server's checks may be limited on (runners on another "
                   "are refused); default: each runner's own (docs/limits.md)")


def say(line: str) -> None:
    print(f"proofbatch serve: {line}", file=sys.stderr, flush=True)


class BootNews:
    """Says what the session is doing while it starts and loads images: a
    boot of HOL Light takes minutes, and silence looked like a hang."""

    def __init__(self):
        self._started: dict[str, float] = {}
        self._booting: str | None = None
        self._boot_at = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._still, daemon=True, name="serve-news")

    def event(self, e) -> None:
        if e.kind == "prepare":             # e.g. the native build, before the boot
            say(e.name)
        elif e.kind in ("boot", "image"):
            self._started[e.key] = e.at
            if e.kind == "boot":
                self._booting, self._boot_at = e.name, e.at
                say(f"booting {e.name} (this takes minutes: 70-90 s of CPU, more on a busy host)")
            else:
                say(f"loading {e.name} (image {e.key[:12]})")
        elif e.kind in ("booted", "imaged"):
            secs = e.at - self._started.pop(e.key, e.at)
            if e.kind == "booted":
                self._booting = None
            what = "booted" if e.kind == "booted" else ("loaded" if e.ok else "failed to load")
            say(f"{e.name} {what} in {secs:.0f} s")

    def _still(self) -> None:
        # A native server boots when the first runner prepares, not when
        # serve starts: the time is counted from the boot's own start.
        while not self._done.wait(STILL_EVERY_S):
            if self._booting:
                say(f"still booting {self._booting} ({time.monotonic() - self._boot_at:.0f} s so far)")

    def __enter__(self) -> "BootNews":
        from .... import events

        self._unlisten = events.listen(self.event)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._unlisten()


def served_backend(args):
    """The backend the server runs: as a sweep's, with the logs a sweep keeps
    in OUT/logs (each check's output, a failed image's log) kept in
    ``DIR/logs``, beside the socket, since runners see only their rows."""
    from .backend import HolLightBackend
    from ..install import find_hol_light
    from .native_auto import mode_backend
    from ..runtime import of_config

    install, root = find_hol_light(args.hol_light), args.context_root or Path.cwd()
    common = dict(max_images=args.max_images, grace_s=args.grace, context_proofs=args.context_proofs,
                  sandbox_config=SandboxConfig(kind=args.sandbox), log_dir=Path(args.dir) / "logs",
                  runtime=of_config(args))
    if args.mode == "native":
        return mode_backend("native", install, root, no_fallback=args.no_fallback, **common)
    return HolLightBackend(install, root, **common)


def run(args) -> int:
    from ....checks.image_server import hold

    # Before HOL Light boots (minutes): a folder another server holds is
    # refused at once, naming its pid (InputError, exit 2).
    held = hold(args.dir)
    try:
        return _serve(args)
    finally:
        os.close(held)


def _serve(args) -> int:
    from ....checks.image_server import ImageServer

    with BootNews():            # a native server's build is said as it goes
        backend = served_backend(args)
    workdir = Path(tempfile.mkdtemp(prefix="proofbatch-serve-"))
    say(f"starting an image server for {args.dir}: HOL Light boots first; runners can use it "
        "once this says it serves")
    try:
        with BootNews():
            session = backend.start(workdir)
        with session:
            server = ImageServer(session, args.dir, clock=args.limit_clock, held=True)
            flags = "".join(f" --{k} {v}" for k, v in (("mode", args.mode),
                                                          ("context-proofs", args.context_proofs))
                            if v not in ("bytecode", "replay"))
            say(f"serving HOL Light images on {args.dir}: run `proofbatch run CORPUS --out OUT{flags} "
                f"--server {args.dir}`; logs in {Path(args.dir) / 'logs'}; Ctrl-C or SIGTERM stops it")
            try:
                with BootNews():         # images loaded for runners, as they load
                    server.serve_forever()
            finally:
                server.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0
