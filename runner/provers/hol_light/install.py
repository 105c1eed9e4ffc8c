"""Finding HOL Light: Debian's package by default, or a checkout with hol.sh.

Users of s2n-bignum-bench build HOL Light from source, because Debian's
20230128 package is too old for s2n-bignum; both kinds start the same way:
a toplevel that has loaded hol.ml and reads phrases on stdin.

A checkout comes in two builds. Plain ``make`` gives hol.sh loading the core
from source; ``make HOLLIGHT_USE_MODULE=1 hol_lib.cma hol.sh`` (what the
bench's setup.sh does) gives a hol.sh that loads the compiled module
``Hol_lib`` instead, and only there do setups that begin with
``open Hol_lib;;`` (the bench's, written by HOL Light's inline_load.ml)
load. ``make HOLLIGHT_USE_MODULE=1 hol_lib.cmxa`` adds the native library
the native mode links.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ... import subproc
from ...errors import CommandError, InputError

DEBIAN_DIR = Path("/usr/share/hol-light")
APT_FIX = "run: apt-get update && apt-get install -y hol-light libnum-ocaml-dev"


@dataclass(frozen=True)
class HolLightInstall:
    kind: str                 # "debian" or "checkout"
    hol_dir: Path             # where hol.ml and Library/ live
    argv: tuple[str, ...]     # starts a toplevel that loads hol.ml, then reads stdin
    build: str                # identifies the build; profiles and maps are valid per build
    module: bool = False      # hol.sh loads the compiled Hol_lib (HOLLIGHT_USE_MODULE=1)


def find_hol_light(checkout: Path | None = None) -> HolLightInstall:
    """Resolve the HOL Light to use, or raise InputError saying how to get one."""
    if checkout is not None:
        return _checkout(Path(checkout))
    return _debian()


def _debian() -> HolLightInstall:
    toplevel, hol_ml = DEBIAN_DIR / "ocaml", DEBIAN_DIR / "hol.ml"
    if not (toplevel.exists() and hol_ml.exists()):
        raise InputError("hol-light", "HOL Light not found (no /usr/share/hol-light)",
                         f"{APT_FIX}, or pass --hol-light DIR")
    # The package forgets this dependency; without it hol.ml stops at
    # "Cannot find file nums.cma" followed by hundreds of Unbound errors.
    if not Path("/usr/lib/ocaml/nums.cma").exists():
        raise InputError("/usr/lib/ocaml/nums.cma", "missing, so HOL Light cannot load",
                         "apt-get install -y libnum-ocaml-dev")
    # The version names the build that sweeps, profiles and maps record: a
    # PATH without dpkg-query recorded "unknown", and the same HOL Light was
    # then refused on resume as another build.
    dpkg = shutil.which("dpkg-query") or "/usr/bin/dpkg-query"
    try:
        version = subproc.run([dpkg, "-W", "-f", "${Version}", "hol-light"]).strip()
    except CommandError as exc:
        raise InputError("hol-light", f"cannot tell which build of Debian's HOL Light this is "
                         f"({exc})", f"put dpkg-query on PATH (it is in /usr/bin), or {APT_FIX}, "
                         "or pass --hol-light DIR") from None
    ocaml = subproc.run([str(toplevel), "-vnum"]).strip()
    # /usr/bin/hol-light wraps this same command in readline-editor when that
    # is installed, which expects a terminal: run the toplevel directly.
    return HolLightInstall(kind="debian", hol_dir=DEBIAN_DIR,
                           argv=(str(toplevel), "-init", str(hol_ml)),
                           build=f"debian-hol-light-{version}/ocaml-{ocaml}")


def _checkout(directory: Path) -> HolLightInstall:
    hol_sh = directory / "hol.sh"
    if not directory.is_dir():
        raise InputError(directory, "HOL Light not found: no such directory",
                         "pass --hol-light the directory of a HOL Light checkout")
    if not hol_sh.is_file():
        raise InputError(hol_sh, "HOL Light not found: the checkout has no hol.sh",
                         f"build it with `make` in {directory}, or omit --hol-light to use Debian's")
    if not os.access(hol_sh, os.X_OK):
        raise InputError(hol_sh, "hol.sh is not executable", f"chmod +x {hol_sh}")
    module = uses_module(directory)
    if module and not (directory / "hol_lib.cmo").is_file():
        raise InputError(directory / "hol_lib.cmo", "missing, but hol.sh was made with "
                         "HOLLIGHT_USE_MODULE=1 and loads it",
                         f"run `make HOLLIGHT_USE_MODULE=1 hol_lib.cma hol.sh` in {directory}")
    # hol.sh starts the toplevel under ${LINE_EDITOR:-ledit}, a line editor
    # that expects a terminal and is often not installed; `env` runs it bare.
    return HolLightInstall(kind="checkout", hol_dir=directory.resolve(),
                           argv=("env", "LINE_EDITOR=env", str(hol_sh.resolve())),
                           build=f"checkout-{_checkout_revision(directory)}"
                                 f"-{'module' if module else 'plain'}",
                           module=module)


def uses_module(directory: Path) -> bool:
    """Whether the checkout's hol.sh loads the compiled Hol_lib: the Makefile
    writes HOLLIGHT_USE_MODULE=1 into it, and hol.ml then loads hol_lib.cmo."""
    try:
        text = (directory / "hol.sh").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "HOLLIGHT_USE_MODULE=1" in text.replace("export ", "")


def _checkout_revision(directory: Path) -> str:
    if (directory / ".git").exists():
        # A checkout's build is its commit; without git the files' hash would
        # name the same build otherwise, and a resume would be refused.
        git = shutil.which("git") or ("/usr/bin/git" if Path("/usr/bin/git").exists() else None)
        if git is None:
            raise InputError(directory, "is a git checkout, but git is not on PATH to name its "
                             "commit (the build sweeps record)", "put git on PATH")
        try:
            rev = subproc.run([git, "-C", str(directory), "rev-parse", "--short=12", "HEAD"])
            return rev.strip()
        except CommandError:
            pass
    digest = hashlib.sha256()
    for name in ("hol.sh", "hol.ml", "hol_lib.ml"):
        path = directory / name
        if path.is_file():
            digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]
