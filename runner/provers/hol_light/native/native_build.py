"""Building HOL Light as native code: a core library, a server, a front end.

Debian ships HOL Light as source loaded into a bytecode toplevel; proofs run
2.5-5 times slower there than in native code and loading takes about 90 s
against about 17 s. ``build_native`` compiles the installed HOL Light into:

- ``hol_core.cmx``: hol.ml with its ``loads``/``needs`` resolved into one
  file, preprocessed by camlp5 with HOL Light's own pa_j.cmo (plus the
  backquote expander that system.ml would install at run time);
- ``hol-native-server``: the core, linked with Dynlink and proofbatch's
  native driver, which serves FORK/CHECK/REAP commands with the bytecode
  driver's own fork server, jail and verdict (hol_check.ml);
- ``hol-native-front``: a bytecode tool with camlp5, pa_j and compiler-libs
  that parses, screens (with the bytecode driver's hol_screen.ml) and
  typechecks answers in batches.

A checkout built with ``HOLLIGHT_USE_MODULE=1`` already has ``hol_lib.cmxa``
and is linked as is. The result lives in a cache directory keyed by the HOL
Light build, the OCaml and camlp5 versions and proofbatch's native sources;
it is built in a temporary directory and renamed into place, so a build is
all or nothing and two builds never see each other's half-written files.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .... import subproc
from ....errors import CommandError, InputError, ProverError
from ..install import HolLightInstall
from ..load_graph import resolve
from ..ocaml_lexer import classify, split_phrases, strip_phrase

# The OCaml driver files live in the package's ml/, beside this subpackage.
HERE = Path(__file__).parents[1] / "ml"
QUOT_ML = HERE / "hol_native_quot.ml"
SLOT_ML = HERE / "hol_native_slot.ml"
SERVER_ML = HERE / "hol_native_server.ml"
FRONT_ML = HERE / "hol_native_front.ml"
# The bytecode driver's modules that the server and the front end compile in.
TEXT_ML, SCREEN_ML, CHECK_ML = (HERE / n for n in ("hol_text.ml", "hol_screen.ml", "hol_check.ml"))
# --context-proofs trust: the switchable prove (Hol_check clears its flag).
TRUST_ML = HERE / "hol_trust.ml"
SOURCES = (QUOT_ML, TEXT_ML, SCREEN_ML, TRUST_ML, CHECK_ML, SLOT_ML, SERVER_ML, FRONT_ML)
RECIPE = "proofbatch-native/1"
CAMLP5_DIR = Path("/usr/lib/ocaml/camlp5")
STREAMS_CMA = Path("/usr/lib/ocaml/camlp-streams/camlp_streams.cma")
APT_FIX = "apt-get install -y ocaml ocaml-findlib camlp5 libcamlp-streams-ocaml-dev libnum-ocaml-dev"
# Compiling the 55k-line core recurses deeply in the compiler.
UNLIMITED_STACK = ["prlimit", "--stack=unlimited", "--"]
COMPILE_TIMEOUT_S = 1800.0
# Two phrases of Debian's HOL Light fail OCaml's value restriction once they
# are compiled rather than typed into the toplevel; eta-expansion fixes both.
_ETA = re.compile(r"^let (print_fpf|pp_print_matrix_ni) = ([^\n;]+?)\s*(;;)?\s*$", re.M)


def default_cache_root() -> Path:
    env = os.environ.get("PROOFBATCH_CACHE")
    base = Path(env) if env else Path.home() / ".cache" / "proofbatch"
    return base / "native"


@dataclass(frozen=True)
class NativeBuild:
    """A finished native build in the cache."""

    dir: Path
    key: str
    core_module: str               # "Hol_core", or "Hol_lib" for a checkout's own
    hol_build: str
    ocaml: str
    include_dirs: tuple[Path, ...]  # where plugins find the core's .cmi/.cmx
    build_secs: float = field(default=0.0, compare=False)
    cached: bool = field(default=False, compare=False)

    @property
    def server(self) -> Path:
        return self.dir / "hol-native-server"

    @property
    def front(self) -> Path:
        return self.dir / "hol-native-front"

    @property
    def core_opens(self) -> tuple[str, ...]:
        """What code loaded after hol.ml sees, in order. A module build's
        hol.ml does `include Hol_loader;; include Hol_lib;; open Hol_loader;;`
        (hol_lib_use_module.ml): needs, loaded_files and load_path live in
        Hol_loader, outside Hol_lib."""
        return ("Hol_lib", "Hol_loader") if self.core_module == "Hol_lib" else (self.core_module,)

    def ocamlopt(self) -> list[str]:
        argv = ["ocamlfind", "ocamlopt", "-package", "num,unix", "-w", "-a"]
        for d in self.include_dirs:
            argv += ["-I", str(d)]
        return argv


# -- sources -----------------------------------------------------------------

def inline_core(hol_dir: Path) -> tuple[str, list[Path]]:
    """hol.ml as one compilable file: every loads/needs replaced by the file.

    hol.ml's header loads camlp5 and pa_j into the toplevel and defines
    use_file with Toploop; compiled code has neither, so those phrases are
    replaced by definitions that fail clearly if a proof calls them.
    """
    seen: list[Path] = []
    out: list[str] = []

    def include(path: Path, top: bool) -> None:
        if path in seen:
            return
        seen.append(path)
        out.append(f"\n(* ---- {path} ---- *)\n")
        text = path.read_text(encoding="utf-8", errors="replace")
        text = _ETA.sub(lambda m: f"let {m.group(1)} x = ({m.group(2)}) x;;", text)
        for phrase in split_phrases(text):
            kind, arg = classify(phrase)
            body = strip_phrase(phrase)
            if kind in ("loads", "loadt", "needs"):
                found = resolve(arg, [hol_dir])
                if found is None:
                    raise InputError(path, f"{kind} \"{arg}\": no such file under {hol_dir}",
                                     "use a complete HOL Light installation")
                include(found, False)
            elif kind == "directive":
                continue       # #load "nums.cma", #install_printer: toplevel only
            elif top and ("Topdirs." in body or body.startswith("#")):
                continue       # loading camlp5 and pa_j into the toplevel
            elif top and body.startswith("let use_file"):
                out.append('let use_file s = failwith ("use_file " ^ s ^ '
                           '": not available in native HOL Light (proofbatch)");;\n')
            elif "Quotation.add" in body:
                continue       # the expander is installed at preprocessing instead
            else:
                out.append(phrase)

    include(hol_dir / "hol.ml", True)
    return "".join(out), seen


# -- the build -----------------------------------------------------------------

def toolchain_versions() -> dict[str, str]:
    """Versions that change what the build produces; raises InputError with
    the apt command when a tool is missing."""
    versions = {}
    for name, argv in (("ocaml", ["ocamlfind", "ocamlopt", "-version"]),
                       ("camlp5", ["camlp5o", "-v"])):
        try:
            versions[name] = subproc.run(argv).strip().splitlines()[0]
        except CommandError as exc:
            raise InputError(argv[0], f"not usable for the native build ({exc.stderr.strip()[:120]})",
                             APT_FIX) from None
    for required in (STREAMS_CMA, CAMLP5_DIR / "camlp5.cma", Path("/usr/lib/ocaml/dynlink.cmxa"),
                     Path("/usr/lib/ocaml/nums.cmxa")):
        if not required.exists():
            raise InputError(required, "missing, so HOL Light cannot be compiled natively", APT_FIX)
    return versions


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(hashlib.sha256(p).digest())
    return h.hexdigest()[:16]


# What a rebuild of a checkout changes and the native build depends on: its
# syntax extension and, for a module build, the compiled library it links
# (the .cmxa lists each unit's implementation digest; the .cmi are its types).
BUILT_FILES = ("pa_j.cmo", "hol_lib.cmxa", "hol_lib.cmi", "hol_loader.cmi", "bignum.cmi")


def build_key(install: HolLightInstall, versions: dict[str, str]) -> str:
    ours = b"".join(hashlib.sha256(p.name.encode() + b"\0" + p.read_bytes()).digest() for p in SOURCES)
    built = b"".join(hashlib.sha256(name.encode() + b"\0" + (install.hol_dir / name).read_bytes()).digest()
                     for name in BUILT_FILES if (install.hol_dir / name).is_file())
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", install.build).strip("-")[:60]
    return f"{slug}-ocaml{versions['ocaml']}-" + _digest(
        RECIPE.encode(), install.build.encode(), json.dumps(versions, sort_keys=True).encode(),
        built, ours, Path(__file__).read_bytes())


def pa_j_cmo(install: HolLightInstall) -> Path:
    for candidate in (install.hol_dir / "pa_j.cmo",):
        if candidate.exists():
            return candidate
    raise InputError(install.hol_dir, "no pa_j.cmo (HOL Light's camlp5 syntax extension)",
                     "build the checkout with `make`, or use Debian's hol-light package")


def camlp5_argv(install: HolLightInstall, quot_cmo: Path) -> list[str]:
    """camlp5o with HOL Light's syntax. It prints a banner on stdout, so its
    output always goes to a file with -o."""
    return ["camlp5o", str(STREAMS_CMA), str(pa_j_cmo(install)), str(quot_cmo)]


def load_build(directory: Path) -> NativeBuild | None:
    """The build in ``directory`` if it is complete and intact, else None."""
    manifest = directory / "build.json"
    try:
        data = json.loads(manifest.read_text())
        for name, digest in data["files"].items():
            if hashlib.sha256((directory / name).read_bytes()).hexdigest() != digest:
                return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return NativeBuild(dir=directory, key=data["key"], core_module=data["core_module"],
                       hol_build=data["hol_build"], ocaml=data["ocaml"],
                       include_dirs=tuple(Path(p) for p in data["include_dirs"]),
                       build_secs=data.get("build_secs", 0.0), cached=True)


def build_native(install: HolLightInstall, cache_root: Path | None = None, *,
                 log: Callable[[str], None] = lambda line: None, force: bool = False) -> NativeBuild:
    """The native build of ``install``: from the cache, or built now.

    Raises InputError when a tool or file is missing (one line, with the fix)
    and ProverError when a compile step fails (naming its log file).
    """
    versions = toolchain_versions()
    root = Path(cache_root or default_cache_root())
    key = build_key(install, versions)
    final = root / key
    if not force:
        cached = load_build(final)
        if cached is not None:
            log(f"native build cached in {final}")
            return cached
    root.mkdir(parents=True, exist_ok=True)
    work = root / f".{key}.build-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    started = time.monotonic()
    try:
        _build_into(work, final, install, versions, key, log)
        secs = time.monotonic() - started
        manifest = json.loads((work / "build.json").read_text())
        manifest["build_secs"] = round(secs, 1)
        (work / "build.json").write_text(json.dumps(manifest, indent=1) + "\n")
        if final.exists():         # stale or broken: replace it whole
            stale = root / f".{key}.stale-{os.getpid()}"
            os.replace(final, stale)
            shutil.rmtree(stale, ignore_errors=True)
        os.replace(work, final)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    log(f"native build done in {secs:.0f} s: {final}")
    built = load_build(final)
    if built is None:
        raise ProverError(f"native build in {final} is incomplete right after building it")
    return NativeBuild(**{**built.__dict__, "cached": False, "build_secs": secs})


def _step(argv: list[str], what: str, logdir: Path, *, cwd: Path,
          timeout: float = COMPILE_TIMEOUT_S) -> None:
    try:
        subproc.run(argv, cwd=cwd, timeout=timeout)
    except CommandError as exc:
        log = logdir / f"{what.replace(' ', '_')}.log"
        log.write_text(f"$ {' '.join(argv)}\n{exc.stderr}")
        first = next((line.strip() for line in exc.stderr.splitlines() if "rror" in line),
                     exc.stderr.strip().splitlines()[-1] if exc.stderr.strip() else f"exit {exc.returncode}")
        raise ProverError(f"native build: {what} failed: {first[:200]} (full log: {log})") from None


def _build_into(work: Path, final: Path, install: HolLightInstall, versions: dict[str, str],
                key: str, log: Callable[[str], None]) -> None:
    logs = final.parent / "logs"
    logs.mkdir(exist_ok=True)
    src = work / "src"
    src.mkdir()
    for path in SOURCES:
        shutil.copy(path, src / path.name)
    log("compiling the quotation expander")
    _step(["ocamlfind", "ocamlc", "-package", "camlp5", "-c", "-o", str(work / "hol_native_quot.cmo"),
           str(src / QUOT_ML.name)], "quotation expander", logs, cwd=work)
    quot = work / "hol_native_quot.cmo"

    lib_cmxa = install.hol_dir / "hol_lib.cmxa"
    if install.kind == "checkout" and lib_cmxa.exists():
        # HOLLIGHT_USE_MODULE=1 builds the core as module Hol_lib: use it as is.
        core_module, include_dirs, core_link = "Hol_lib", (install.hol_dir, work), [str(lib_cmxa)]
        log(f"using the checkout's own {lib_cmxa}")
    elif (install.hol_dir / "hol_loader.ml").exists():
        # HOL Light since 2024: hol.ml loads the core through hol_lib.ml from
        # inside conditionals, which only its own Makefile rule compiles.
        raise InputError(lib_cmxa, "missing: this HOL Light compiles natively only as the "
                         "module Hol_lib", f"run `make HOLLIGHT_USE_MODULE=1 hol_lib.cmxa` in "
                         f"{install.hol_dir} (several minutes; scripts/build-hol-light-checkout.sh does it)")
    else:
        core_module, include_dirs, core_link = "Hol_core", (work,), ["hol_core.cmx"]
        text, files = inline_core(install.hol_dir)
        (src / "hol_core.ml").write_text(text, encoding="utf-8")
        log(f"preprocessing hol.ml and {len(files) - 1} files it loads ({text.count(chr(10))} lines)")
        _step(camlp5_argv(install, quot) + [str(src / "hol_core.ml"), "-o", str(work / "hol_core.ml")],
              "camlp5 on the core", logs, cwd=work)
        log("compiling the core natively (about 30 s and 1 GB)")
        _step(UNLIMITED_STACK + ["ocamlfind", "ocamlopt", "-package", "num,unix", "-w", "-a",
                                 "-c", "hol_core.ml"], "compiling the core", logs, cwd=work)
        (work / "hol_core.ml").unlink()
    opens = ["-open", core_module]     # the kernel names hol_check.ml uses
    incs = [a for d in include_dirs for a in ("-I", str(d))]
    log("compiling the server")
    # Hol_check names HOL Light's kernel, as the bytecode toplevel does.
    for unit, unit_opens in ((TEXT_ML, []), (TRUST_ML, opens), (CHECK_ML, opens), (SLOT_ML, opens)):
        _step(["ocamlfind", "ocamlopt", "-package", "num,unix", "-w", "-a", *incs, *unit_opens, "-c",
               "-o", str(work / f"{unit.stem}.cmx"), str(src / unit.name)],
              f"compiling {unit.name}", logs, cwd=work)
    _step(UNLIMITED_STACK + ["ocamlfind", "ocamlopt", "-package", "num,unix,dynlink", "-linkpkg",
                             "-linkall", "-w", "-a", *incs, *core_link,
                             *(f"{unit.stem}.cmx" for unit in (TEXT_ML, TRUST_ML, CHECK_ML, SLOT_ML)),
                             "-o", "hol-native-server", str(src / SERVER_ML.name)],
          "linking the server", logs, cwd=work)
    log("building the answer front end")
    # In src, so that the bytecode units it compiles there (hol_text.cmi)
    # are not mixed up with the server's native ones in the build directory.
    _step(["ocamlfind", "ocamlc", "-package", "camlp5,camlp-streams,compiler-libs.common", "-linkpkg",
           "-w", "-a", str(CAMLP5_DIR / "camlp5.cma"), str(CAMLP5_DIR / "pa_o.cmo"),
           str(CAMLP5_DIR / "pa_op.cmo"), str(pa_j_cmo(install).resolve()), str(quot.resolve()),
           "-o", str((work / "hol-native-front").resolve()), TEXT_ML.name, SCREEN_ML.name,
           FRONT_ML.name],
          "building the front end", logs, cwd=src)
    for junk in work.glob("hol_native_server.*"):
        junk.unlink()
    files = sorted(p.name for p in work.iterdir() if p.is_file())
    manifest = {
        "format": RECIPE, "key": key, "core_module": core_module, "hol_build": install.build,
        "hol_dir": str(install.hol_dir), "ocaml": versions["ocaml"], "camlp5": versions["camlp5"],
        "include_dirs": [str(final if d == work else d) for d in include_dirs],
        "files": {n: hashlib.sha256((work / n).read_bytes()).hexdigest() for n in files},
    }
    (work / "build.json").write_text(json.dumps(manifest, indent=1) + "\n")
