"""Which kept flow ``vs_bench_harness.py --resume`` may reuse, and the
environment the bench's flow runs in under a runtime setting
(``bench_environment``).

A flow's figures depend on more than its draw (seed, problems, answers,
workers): on the project's commit, the HOL Light checkout and its native
build, the s2n-bignum tree, the bench's scripts and map, the host, and the
report's ``--min-secs``. Each flow, as it ends, is kept in
``WORK/flow-SEED-ROUND-FLOW.json`` and leaves a record (benchmarks/record.py,
script ``vs_bench_harness-flow``) of every one of these and the kept file's
digest; a later run reuses the file only when ``record.matching`` finds a
clean record of the same commit, host and settings whose digest is the
file's own (a run of other settings in the same ``--work`` overwrites it).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import on_path  # noqa: F401  (benchmarks/ and its groups on sys.path)
import record
from runner.provers.hol_light import runtime

FLOW_SCRIPT = "vs_bench_harness-flow"


def git_rev(path: Path) -> str | None:
    """The tree's commit, ``-dirty`` after it when a tracked file differs
    (a bare mirror has no work tree: its HEAD alone)."""
    def git(*a):
        r = subprocess.run(["git", "-C", str(path), *a], capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else None
    rev = git("rev-parse", "HEAD")
    if rev is None:
        return None
    if git("rev-parse", "--is-bare-repository") == "false" and \
            git("status", "--porcelain", "--untracked-files=no"):
        rev += "-dirty"
    return rev


def native_build_key(hol: Path) -> str:
    """The key ``proofbatch build-native`` caches the checkout's build under:
    it changes with the checkout's compiled library, the toolchain and the
    project's native sources."""
    from runner.provers.hol_light.install import find_hol_light
    from runner.provers.hol_light.native.native_build import build_key, toolchain_versions

    return build_key(find_hol_light(hol), toolchain_versions())


def settings(args, draw: dict) -> dict:
    """Everything of this run that changes a flow's figures, as a record's inputs."""
    answers = json.dumps(draw["answers"], sort_keys=True).encode()
    return {"seed": draw["seed"], "ids": draw["ids"],
            "answers_sha256": hashlib.sha256(answers).hexdigest(),
            "workers": draw["workers"], "min_secs": args.min_secs,
            "hol_light_rev": git_rev(args.hol_light),
            "native_build": native_build_key(args.hol_light),
            "s2n_bignum_rev": git_rev(args.s2n_bignum),
            "bench_rev": git_rev(args.bench_repo),
            "bench_map_sha256": record.digest(args.bench_map)}


def keys(inputs: dict, round_: int, flow: str) -> dict:
    """What ``record.matching`` compares: this commit, this host, every setting."""
    return {"commit": record.commit()[0], "host": record.host(),
            "inputs": {**inputs, "round": round_, "flow": flow}}


def keep(kept: Path, draw: dict, figures: dict, inputs: dict, round_: int, flow: str,
         directory: Path | None = None) -> Path:
    """Write the kept flow, then its record; the record's path."""
    tmp = kept.with_suffix(".tmp")
    tmp.write_text(json.dumps({"draw": draw, "figures": figures}))
    os.replace(tmp, kept)
    rec = record.Record(FLOW_SCRIPT, sys.argv)
    for name, value in keys(inputs, round_, flow)["inputs"].items():
        rec.input(name, value)
    rec.set("kept", {"path": str(kept), "sha256": record.digest(kept)})
    rec.figures({k: figures[k] for k in ("wall_s", "run_s", "cpu_s", "load", "ended")
                 if k in figures})
    return rec.finish([], directory=directory)


def kept_flow(kept: Path, inputs: dict, round_: int, flow: str,
              directory: Path | None = None) -> tuple[dict | None, str]:
    """The kept flow's figures and its record's path when they may be reused;
    else None and why not, in a phrase."""
    if not kept.is_file():
        return None, f"no {kept.name}"
    data = record.matching(FLOW_SCRIPT, keys(inputs, round_, flow), directory)
    if data is None:
        return None, (f"no clean record of {kept.name} at this commit, on this host, with these "
                      "builds and settings")
    if data.get("kept", {}).get("path") != str(kept) or \
            data["kept"].get("sha256") != record.digest(kept):
        return None, f"{kept.name} was rewritten since its record {data['path']}"
    return json.loads(kept.read_text())["figures"], data["path"]


def bench_environment(setting: runtime.Runtime) -> tuple[dict[str, str], str]:
    """The environment the bench's flow runs in under ``setting``, and what
    it says: OCAMLRUNPARAM of the setting's s, o and i (none: OCaml's
    defaults, whatever this process was given), read by every OCaml
    process of the flow, its proving program included. ``settle`` has no
    equivalent: the bench's program has no image to settle."""
    env = {k: v for k, v in setting.environment(dict(os.environ)).items()
           if k != runtime.ENV_SETTLE}
    said = f"OCAMLRUNPARAM={env['OCAMLRUNPARAM']}" if "OCAMLRUNPARAM" in env else "OCaml's defaults"
    return env, said
