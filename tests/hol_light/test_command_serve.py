"""`proofbatch serve`: the served backend is a sweep's, with its logs kept.

A runner that checks through `run --server DIR` sees only its rows; the
output of each check and the log of an image that failed to load are kept
where the server runs, in DIR/logs, as a sweep keeps them in OUT/logs. (The
server itself, forked from a loaded image, is tests/test_faults.py's.)
"""

from __future__ import annotations

from pathlib import Path

from runner.cli import build_parser
from runner.provers.hol_light.command_serve import served_backend


def _args(argv: list[str]):
    return build_parser(argv).parse_args(argv)


def test_the_served_backend_keeps_its_logs_beside_the_socket(tmp_path):
    args = _args(["serve", str(tmp_path / "srv"), "--context-proofs", "trust", "--max-images", "3"])
    backend = served_backend(args)
    assert backend.log_dir == tmp_path / "srv" / "logs"
    assert str(backend.context_proofs) == "trust" and backend.max_images == 3
    assert backend.context_root == Path.cwd()
