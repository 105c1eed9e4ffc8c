"""A bad --scheduler-address is refused before anything is made: one line
naming the flag and the form it takes, exit 2, no sweep or profile folder.
It used to pass until the run connected, after the folder was made, and end
in distributed's traceback (ValueError: missing port number), exit 1."""

from __future__ import annotations

import pytest

from cluster.dask import DaskExecutor
from runner import cli
from runner.errors import InputError

from ..helpers import DEMO

BAD = ["notanaddress", "tcp://127.0.0.1", "tcp://127.0.0.1:99999", "tcp://:8786", "foo://host:1"]


@pytest.mark.parametrize("command", ["profile", "run"])
@pytest.mark.parametrize("address", BAD)
def test_a_bad_scheduler_address_is_refused_in_one_line_before_anything_is_made(
        command, address, tmp_path, capsys):
    out = tmp_path / "out"
    code = cli.main([command, str(DEMO), "--out", str(out), "--problems", "arith.add_comm",
                     "--cluster", "dask", "--scheduler-address", address])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and err[0].startswith("proofbatch: error: --scheduler-address: "), err
    assert "tcp://HOST:PORT" in err[0]
    assert not out.exists(), "bad input must make nothing"


def test_the_executor_refuses_a_bad_address_too():
    with pytest.raises(InputError, match="missing port number.*tcp://HOST:PORT"):
        DaskExecutor("notanaddress")
    assert DaskExecutor("tcp://127.0.0.1:8786").scheduler_address == "tcp://127.0.0.1:8786"
