"""The machines simulate models (issue 33, point 5): refused past what it
can simulate in seconds, named by what gave them. The flags' refusals
through the command line are in tests/cli/test_bad_inputs.py."""

from __future__ import annotations

import argparse

import pytest

from runner import cli
from runner.errors import InputError
from runner.planning.planner import Workers, write_plan
from runner.planning.sizes import MAX_NODES, MAX_WORKERS, check_machines, node_memory

from .test_simulate import GIB, plan_of


def test_a_recorded_plan_of_too_many_nodes_names_the_plan(tmp_path, capsys, monkeypatch):
    """A plan.json edited by hand reached the dispatcher, whose time grows
    with the square of the node count."""
    plan = tmp_path / "plan.json"
    write_plan(plan, plan_of([1.0, 2.0], Workers(MAX_NODES + 1, 1, 8 * GIB)))

    def refuse(self, plan):
        raise AssertionError("dispatched instead of refusing")

    monkeypatch.setattr("runner.planning.dispatch.Dispatcher.__init__", refuse)
    assert cli.main(["simulate", "--plan", str(plan)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"proofbatch: error: {plan}: 1,001 nodes are more than simulate models (1,000 at "
                   "most: its time grows with the square of the node count); pass 1000 nodes or "
                   "fewer, with more cores per node"]


def test_the_bounds_themselves_are_accepted():
    check_machines(MAX_NODES, MAX_WORKERS // MAX_NODES, "--workers")
    check_machines(1, MAX_WORKERS, "--workers")
    with pytest.raises(InputError, match="1,000,001 workers"):
        check_machines(1, MAX_WORKERS + 1, "--workers")


@pytest.mark.parametrize("text, accepted", [("1G", 2**30), ("192G", 192 * 2**30), ("64T", 64 * 2**40),
                                            ("1023M", None), ("65T", None), ("banana", None)])
def test_a_node_memory(text, accepted):
    if accepted is not None:
        assert node_memory(text) == accepted
    else:
        with pytest.raises(argparse.ArgumentTypeError):
            node_memory(text)
