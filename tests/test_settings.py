"""Settings carry their help once: the command line reads each option's
help and default from the dataclass field it sets (runner/settings.py)."""

from __future__ import annotations

import argparse
import dataclasses

from runner import cli
from runner.profile import ProfileConfig
from runner.settings import help_of, option, setting
from runner.sweep import SweepConfig


def subcommand(name: str) -> argparse.ArgumentParser:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def check_reads_fields(command: str, cls, renamed: dict[str, str] = {}) -> int:
    """Every option of ``command`` that sets a field of ``cls`` shows that
    field's help and has its default; returns how many there are."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    seen = 0
    for action in subcommand(command)._actions:
        name = renamed.get(action.dest, action.dest)
        if name not in fields:
            continue
        f = fields[name]
        assert (action.help % {}).startswith(f.metadata["help"]), (command, name)
        if f.default is not dataclasses.MISSING:
            assert action.default == f.default, (command, name, action.default, f.default)
        seen += 1
    return seen


def test_run_reads_every_option_from_the_sweep_config():
    # All of run's options but --server and the executors' set a SweepConfig field.
    assert check_reads_fields("run", SweepConfig) == 25


def test_profile_reads_every_option_from_the_profile_config():
    assert check_reads_fields("profile", ProfileConfig, {"ceiling": "ceiling_s"}) == 14


def test_help_says_the_default_and_survives_argparse():
    @dataclasses.dataclass(frozen=True)
    class Example:
        share: float = setting("share of 80% of RAM", default=0.5)
        where: str | None = setting("a path; default: here", default=None)
        quiet: bool = setting("say less", default=False)

    assert help_of(Example, "share") == "share of 80%% of RAM (default 0.5)"
    assert help_of(Example, "where") == "a path; default: here"      # None is not said
    assert help_of(Example, "quiet") == "say less"
    assert option(Example, "share") == {"help": "share of 80%% of RAM (default 0.5)", "default": 0.5}
    parser = argparse.ArgumentParser(prog="x")
    parser.add_argument("--share", type=float, **option(Example, "share"))
    assert "share of 80% of RAM (default 0.5)" in " ".join(parser.format_help().split())
