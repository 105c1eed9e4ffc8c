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


def test_a_runner_on_another_clock_than_the_server_s_is_refused(tmp_path, capsys):
    """`serve --limit-clock wall` serves checks limited as s2n-bignum-bench
    limits them; a runner on the default CPU clock would record rows of the
    other clock, so it is refused in one line, naming the fix."""
    from runner import cli
    from runner.checks.image_server import ImageServer, RemoteSession
    from runner.prover import BackendInfo

    from ..helpers import DEMO

    class Session:
        info = BackendInfo(prover="hol-light", build="test", mode="bytecode", context_proofs="replay")

    assert _args(["serve", str(tmp_path / "s"), "--limit-clock", "wall"]).limit_clock == "wall"
    server = ImageServer(Session(), tmp_path / "srv", clock="wall").start()
    try:
        assert RemoteSession(tmp_path / "srv").clock() == "wall"
        code = cli.main(["run", str(DEMO), "--out", str(tmp_path / "out"), "--problems", "arith.add_comm",
                         "--server", str(tmp_path / "srv"), "--context-root", str(DEMO)])
    finally:
        server.close()
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "serves checks limited on the wall clock, not cpu" in err[0]
    assert "pass --limit-clock wall" in err[0]
    assert not (tmp_path / "out").exists()          # refused before anything was written
