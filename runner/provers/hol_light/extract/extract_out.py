"""What `proofbatch extract` writes: the corpus's problem folders and
extract.json, replacing an earlier extract of the same files whole and
atomically (a temp directory, then os.replace), and never anything else."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

from ....errors import InputError
from .extract_model import FORMAT, MANIFEST, Extract, ExtractConfig
from ..load_graph import DROPPED_NOTE

def check_out(cfg: ExtractConfig, files: list[Path]) -> None:
    out = cfg.out
    if not out.exists():
        return
    if not out.is_dir():
        raise InputError(out, "--out exists and is not a directory", "pass a new directory")
    if not any(out.iterdir()):
        return
    fix = "pass a new --out directory, or remove this one"
    try:
        earlier = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
        old = sorted(s["path"] for s in earlier["sources"])
    except (OSError, ValueError, KeyError, TypeError):
        raise InputError(out, f"--out is not empty and is not a corpus made by proofbatch extract "
                         f"(no readable {MANIFEST})", fix) from None
    if old != sorted(str(p.resolve()) for p in files):
        raise InputError(out, "--out holds an extract of other files (" + ", ".join(old) + ")", fix)


def manifest(result: Extract, cfg: ExtractConfig) -> dict:
    reasons: dict[str, int] = {}
    for s in result.skipped:
        key = "duplicate statement" if s.reason.startswith("duplicate statement") else s.reason
        reasons[key] = reasons.get(key, 0) + 1
    libs = {p for p, _ in result.library_files}
    prefix = {s.path: s.context_prefix for s in result.sources}
    return {
        "format": FORMAT,
        "made_by": "proofbatch extract",
        "prefix": cfg.prefix,
        "category": cfg.category,
        "hol_light_dir": None if cfg.hol_dir is None else str(cfg.hol_dir),
        "context_root": None if result.context_root is None else str(result.context_root),
        "context_root_note": result.context_note,
        "unresolved_loads": list(result.unresolved),
        "missing_loads": list(result.missing_loads),
        "dropped_loads": list(result.dropped_loads),
        "dropped_loads_note": f"not followed: {DROPPED_NOTE}" if result.dropped_loads else "",
        "refused": [asdict(r) for r in result.refused],
        "skipped_links": [asdict(r) for r in result.skipped_links],
        "library_files": [{"path": p, "why": why, "context_prefix": list(prefix.get(p, ()))}
                          for p, why in result.library_files],
        "ids_from": None if result.ids is None else {
            k: v for k, v in asdict(result.ids).items()},
        "sources": [dict(asdict(s), path=str(Path(s.path).resolve()), given=s.path)
                    for s in result.sources],
        "counts": {"theorems": sum(s.theorems for s in result.sources),
                   "problems": len(result.problems), "skipped": len(result.skipped),
                   "skipped_by_reason": reasons},
        "problems": [{"problem_id": p.problem_id, "source": p.source, "line": p.line,
                      "theorem": p.theorem, "form": p.form,
                      **({"bench_id": result.ids.renamed[p.problem_id]}
                         if result.ids and p.problem_id in result.ids.renamed else {}),
                      **({"library_file": True} if p.source in libs else {}),
                      **({"same_statement_as": result.same_statement_as[p.problem_id]}
                         if p.problem_id in result.same_statement_as else {})}
                     for p in result.problems],
        "skipped": [asdict(s) for s in result.skipped],
    }


def publish(cfg: ExtractConfig, result: Extract, tell=lambda done: None) -> None:
    """Build the corpus beside ``out`` and move it into place whole;
    ``tell(done)`` hears how many problems are written."""
    out = cfg.out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.extract-", dir=out.parent))
    try:
        for k, p in enumerate(result.problems):
            tell(k)
            d = tmp / p.problem_id
            d.mkdir()
            (d / "setup.ml").write_text(p.setup, encoding="utf-8")
            (d / "query.txt").write_text(p.query, encoding="utf-8")
            (d / "answer.txt").write_text(p.answer, encoding="utf-8")
            (d / "category.txt").write_text(cfg.category, encoding="utf-8")
        tell(len(result.problems))
        (tmp / MANIFEST).write_text(json.dumps(manifest(result, cfg), indent=2) + "\n",
                                    encoding="utf-8")
        os.chmod(tmp, 0o755)
        if out.exists():
            # A directory cannot replace a non-empty one in one rename: move
            # the earlier extract aside first, then drop it.
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            os.replace(out, old / "corpus")
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
