"""Extracted ids as the bench's map keeps them (``extract --ids-from MAP``).

s2n-bignum-bench's collect-problems.py walks the whole tree, files loaded
first, and skips a statement seen before in any file before it numbers the
names; which copy it kept only its map says. Given the map, extract keeps
each statement under the map's id, skips the other copies as duplicates,
and says why each of the map's ids is missing, so a sweep of the extracted
tree compares with the bench row for row.
"""

from __future__ import annotations

import json
from pathlib import Path

from ....errors import InputError
from .extract_cut import (bench_prefix, cut_file, file_prefix, norm_goal, problem_ids,
                          safe_name)
from .extract_model import MapReport, Skipped


# collect-problems.py's categorize: theorems it drops by name (their ids take
# a .N slot but are in no map).
_BENCH_DROPS = (("_EQUIV", "the bench drops _EQUIV theorems (not functional correctness)"),
                ("SUBROUTINE_SAFE", "the bench drops SUBROUTINE_SAFE theorems (not functional "
                                    "correctness)"),
                ("SUBROUTINE_CORRECT", "the bench drops SUBROUTINE_CORRECT theorems (they just "
                                       "use the core's _CORRECT)"))


def _read_map(path: Path) -> list[str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(path, f"--ids-from cannot be read ({exc})", "pass the bench's "
                         "timeout-map.json") from None
    if isinstance(data, dict):
        data = list(data)
    ids = []
    for e in data if isinstance(data, list) else []:
        pid = e.get("problem_id") if isinstance(e, dict) else e
        if isinstance(pid, str):
            ids.append(pid)
    if not ids:
        raise InputError(path, "--ids-from holds no problem ids", "pass a JSON list of "
                         "{\"problem_id\": ...} entries, such as the bench's timeout-map.json")
    return ids


def follow_map(cfg, files, usable, refused, cut, kept, ids, skipped_of, graph, root,
               owner_of: dict[str, str]) -> MapReport:
    """Make the ids the bench's: skip what the map keeps under another id.

    collect-problems.py walks the whole tree, files loaded first, and skips
    a statement seen before (in any file) before it numbers the names: a
    name proved twice in a file whose first statement some other file
    proves is numbered once (``NAME``, not ``NAME.1``). Its order cannot be
    seen from here; the map says which copy it kept. So a problem whose id
    is not in the map is skipped when another problem (or a theorem of a
    loaded file under the context root, such as common/*.ml) holds its
    statement under a map id, and the file's ids are numbered again,
    until nothing changes.
    """
    map_ids = _read_map(cfg.ids_from)
    safe = {safe_name(m): m for m in map_ids}
    outside = _outside_owners(files, graph, root, safe)
    dropped = _skip_map_duplicates(cfg, usable, kept, ids, skipped_of, safe, outside, owner_of)
    prefixes = sorted({file_prefix(cfg, p) for p in files})
    wanted = [m for m in map_ids if m.split(".")[0] in prefixes]
    have = {pid: (path, item) for path in usable for pid, item in zip(ids[path], kept[path])}
    renamed = {pid: safe[pid] for pid in have if pid in safe and safe[pid] != pid}
    matched = [m for m in wanted if safe_name(m) in have]
    misses, missed_folders = _misses(cfg, files, refused, ids, skipped_of, root, wanted, have)
    not_in_map = _not_in_map(cfg, map_ids, safe, have)
    return MapReport(str(cfg.ids_from), tuple(prefixes), len(wanted), len(matched), renamed,
                     misses, not_in_map, dropped, missed_folders)


def _outside_owners(files, graph, root, safe: dict[str, str]) -> dict[str, str]:
    """Theorems of loaded files under the root that are not extracted, and
    whose id is the map's: their normal goal -> that map id."""
    outside: dict[str, str] = {}     # goal -> map id
    given = {p.resolve() for p in files}
    loaded = graph.loaded_files(given)
    for f in sorted(loaded - given):
        pre = bench_prefix(root, f)
        if pre is None:
            continue
        try:
            found, _ = cut_file(f, f.read_text(encoding="utf-8"), graph.phrases(f))
        except (OSError, UnicodeDecodeError):
            continue
        mine: dict[str, tuple] = {}
        for _, thm, _s in found:
            mine.setdefault(norm_goal(thm.query), thm)
        names = [t.name for t in mine.values()]
        for pid, (g, thm) in zip(problem_ids(pre, f, names), mine.items()):
            if pid in safe:
                outside.setdefault(g, pid)
    return outside


def _skip_map_duplicates(cfg, usable, kept, ids, skipped_of, safe: dict[str, str],
                         outside: dict[str, str], owner_of: dict[str, str]) -> int:
    """Skip each problem whose id is not the map's while a map id holds its
    statement, renumbering its file's ids (``kept``, ``ids``,
    ``skipped_of`` and ``owner_of`` updated), until nothing changes (at
    most 20 rounds); returns how many were skipped."""
    dropped = 0
    for _ in range(20):
        owners: dict[str, set[str]] = {}
        for path in usable:
            for pid, (_, thm, _s) in zip(ids[path], kept[path]):
                if pid in safe:
                    owners.setdefault(norm_goal(thm.query), set()).add(pid)
        changed = False
        for path in usable:
            keep, gone = [], []
            for pid, item in zip(ids[path], kept[path]):
                goal = norm_goal(item[1].query)
                owner = sorted(owners.get(goal, set()) - {pid}) or (
                    [outside[goal]] if goal in outside else [])
                if pid not in safe and owner:
                    gone.append((item, safe.get(owner[0], owner[0])))
                    owner_of[goal] = gone[-1][1]
                else:
                    keep.append(item)
            if gone:
                changed = True
                dropped += len(gone)
                kept[path] = keep
                ids[path] = problem_ids(file_prefix(cfg, path), path, [t.name for _, t, _ in keep])
                skipped_of[path] += [Skipped(str(path), line, thm.name,
                                             f"duplicate statement of {owner}, the id the bench's "
                                             "map keeps it under") for (line, thm, _), owner in gone]
        if not changed:
            break
    return dropped


def _misses(cfg, files, refused, ids, skipped_of, root, wanted: list[str],
            have: dict) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Why each of the map's ids is not here (id -> why), and the folders
    of files not given that hold some (folder -> those files)."""
    by_stem: dict[tuple[str, str], Path] = {(file_prefix(cfg, p), p.stem): p for p in files}
    elsewhere = _ml_files(root, files)
    misses: dict[str, str] = {}
    missed_folders: dict[str, list[str]] = {}
    for m in wanted:
        if safe_name(m) in have:
            continue
        parts = m.split(".")
        pre, stem, name = parts[0], parts[1], ".".join(parts[2:])
        path = by_stem.get((pre, stem))
        if path is None:
            where = elsewhere.get(stem, [])
            if where:
                misses[m] = f"its file {where[0]} was not given"
                missed_folders.setdefault(str(where[0].parent), [])
                if str(where[0]) not in missed_folders[str(where[0].parent)]:
                    missed_folders[str(where[0].parent)].append(str(where[0]))
            else:
                misses[m] = f"no file {stem}.ml was given or found under the context root"
            continue
        if path in refused:
            misses[m] = f"{path} is refused: {refused[path]}"
            continue
        misses[m] = _missed_in(path, pre, stem, name, ids[path], skipped_of[path])
    return misses, missed_folders


def _missed_in(path: Path, pre: str, stem: str, name: str, ids: list[str],
               skipped: list[Skipped]) -> str:
    """Why a given file has not the map's id ``<pre>.<stem>.<name>``."""
    base = name.rsplit(".", 1)[0] if name.rsplit(".", 1)[-1].isdigit() else name
    skips = [s for s in skipped if safe_name(s.theorem) in (name, base)]
    ours = [pid for pid in ids if pid.startswith(f"{pre}.{stem}.{safe_name(base)}")]
    if skips:
        s = skips[0]
        return f"{path}:{s.line} {s.theorem}: {s.reason}"
    if ours:
        return f"{path} numbers {base} differently: " + ", ".join(ours)
    return f"{path} proves no top-level theorem named {base}"


def _not_in_map(cfg, map_ids: list[str], safe: dict[str, str], have: dict) -> dict[str, str]:
    """Why each problem extracted is not in the map (id -> why)."""
    not_in_map = {}
    stems_in_map = {".".join(m.split(".")[:2]) for m in map_ids}
    for pid, (path, (line, thm, _)) in have.items():
        if pid in safe:
            continue
        why = next((w for key, w in _BENCH_DROPS if key in thm.name), None)
        key = f"{file_prefix(cfg, path)}.{path.stem}"
        if why is None and key not in stems_in_map:
            why = f"the map has no id of {path.name} ({key}.*): the bench did not collect that file"
        not_in_map[pid] = why or "not in the map"
    return not_in_map


def _ml_files(root: Path | None, files: list[Path]) -> dict[str, list[Path]]:
    """stem -> .ml files under the context root (or the given files' folders)."""
    tops = [root] if root is not None else sorted({p.resolve().parent for p in files})
    out: dict[str, list[Path]] = {}
    for top in tops:
        for p in sorted(top.rglob("*.ml")):
            out.setdefault(p.stem, []).append(p)
    return out
