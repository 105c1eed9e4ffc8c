"""Settings carry their help once: the command line reads each option's
help and default from the dataclass field it sets (runner/settings.py), and
reads memory sizes the way Slurm reads --mem."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
from pathlib import Path

import pytest

from runner import cli
from runner.profile import ProfileConfig
import cluster
from runner.settings import (add_flags, config_from, flags, format_size, help_of, option,
                             parse_size, setting)
from runner.planning.sweep_config import SweepConfig
from runner.sweep_dir import resume_command


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
    assert check_reads_fields("run", SweepConfig) == 38


def test_profile_reads_every_option_from_the_profile_config():
    assert check_reads_fields("profile", ProfileConfig) == 18


def test_calibrate_reads_every_option_from_its_config():
    from runner.commands.calibrate import CalibrateConfig

    assert check_reads_fields("calibrate", CalibrateConfig) == len(dataclasses.fields(CalibrateConfig))


# A sweep's settings are declared once (runner/planning/sweep_config.py):
# run's flags, the config it builds and the command that resumes a sweep
# are read off the declaration, so none can lack a setting the others have.

# Settings of a sweep that library callers set and `run` does not.
LIBRARY_ONLY = {"expected_mem", "max_images", "only", "command"}


def unflagged(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)} - {f.name for f, _ in flags(cls)}


def test_every_setting_of_a_sweep_is_a_flag_of_run_unless_said_otherwise():
    assert unflagged(SweepConfig) == LIBRARY_ONLY, ("a setting of SweepConfig without flag=...: give it its "
                                       "flag, or add it to LIBRARY_ONLY if run must not set it")


def test_run_has_no_flag_beside_the_declaration():
    """Every option of `run` is a setting's flag, --server's or an executor's:
    a flag added by hand would reach neither the config nor a resume."""
    executors = argparse.ArgumentParser()
    cluster.add_arguments(executors)
    declared = {f.name for f, _ in flags(SweepConfig)}
    run = {a.dest for a in subcommand("run")._actions}
    others = {"help", "server", "server_timeout"} | {a.dest for a in executors._actions}
    assert run - declared == others
    assert declared <= run


@dataclasses.dataclass(frozen=True, kw_only=True)
class WiderSweep(SweepConfig):
    # Settings added later, each declared in one place only.
    retries: int = setting("times a check is tried", default=1, flag="--retries", type=int)
    journal: Path | None = setting("where checks are logged", default=None, flag="--journal",
                                   type=Path)
    loud: bool = setting("say more", default=False, flag="--loud", action="store_true")


def test_a_setting_declared_once_is_a_flag_a_config_field_and_in_the_resume_command(tmp_path):
    parser = argparse.ArgumentParser(prog="run")
    add_flags(parser, WiderSweep)
    assert "times a check is tried (default 1)" in " ".join(parser.format_help().split())
    argv = ["corpus", "--out", "out", "--retries", "4", "--journal", "logs/j.txt", "--loud"]
    config = config_from(WiderSweep, parser.parse_args(argv))
    assert (config.retries, str(config.journal), config.loud) == (4, "logs/j.txt", True)
    recorded = json.loads(json.dumps({k: str(v) if isinstance(v, Path) else v
                                      for k, v in dataclasses.asdict(config).items()}))
    manifest = {"corpus": str(tmp_path / "corpus"), "config": recorded, "cwd": str(tmp_path),
                "prover": "isabelle"}
    resume = shlex.split(resume_command(manifest, tmp_path / "out", WiderSweep))
    assert resume[:2] == ["proofbatch", "run"]
    again = config_from(WiderSweep, parser.parse_args(resume[2:]))
    assert (again.retries, again.journal, again.loud) == (4, tmp_path / "logs/j.txt", True)
    # At their defaults, they are not said.
    defaults = config_from(WiderSweep, parser.parse_args(["corpus", "--out", "out"]))
    manifest["config"] = json.loads(json.dumps({k: str(v) if isinstance(v, Path) else v
                                                for k, v in dataclasses.asdict(defaults).items()}))
    assert shlex.split(resume_command(manifest, tmp_path / "out", WiderSweep))[5:] == []


def test_a_setting_of_run_declared_without_a_flag_is_caught():
    """The first test above fails on a setting added without its flag."""
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Forgotten(SweepConfig):
        retries: int = setting("times a check is tried", default=1)

    assert unflagged(Forgotten) - LIBRARY_ONLY == {"retries"}


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


# Memory sizes, read the way Slurm reads --mem.

KiB, MiB, GiB, TiB = 1024, 1024**2, 1024**3, 1024**4


@pytest.mark.parametrize("text, expected", [
    ("512M", 512 * MiB),
    ("4G", 4 * GiB),
    ("4GiB", 4 * GiB),
    ("4 GiB", 4 * GiB),
    ("1.5g", 3 * GiB // 2),
    ("800MB", 800 * MiB),   # MB is 1024**2, as in Slurm, not 10**6
    ("64k", 64 * KiB),
    ("1T", TiB),
    ("4096B", 4096),
    (" 2G ", 2 * GiB),
])
def test_suffixes_are_powers_of_1024(text, expected):
    assert parse_size(text) == expected


def test_plain_number_is_mib():
    assert parse_size("2048") == 2 * GiB
    assert parse_size("0.5") == MiB // 2


def test_fractions_round_down_to_whole_bytes():
    assert parse_size("0.1K") == 102  # 102.4 bytes


@pytest.mark.parametrize("text", ["", "G", "4X", "4 G B", "-1G", "1e3M", "four", "4GG", "1,5G",
                                  "nan", "inf"])
def test_bad_sizes_say_what_was_wrong(text):
    with pytest.raises(ValueError) as e:
        parse_size(text)
    assert repr(text) in str(e.value)
    assert "512M" in str(e.value)  # shows an example of what works


@pytest.mark.parametrize("text", ["0", "0G", "0.0000001K"])
def test_zero_is_rejected(text):
    with pytest.raises(ValueError, match="zero"):
        parse_size(text)


@pytest.mark.parametrize("n, expected", [
    (0, "0 B"),
    (1023, "1023 B"),
    (1024, "1 KiB"),
    (3 * GiB // 2, "1.5 GiB"),
    (512 * MiB, "512 MiB"),
    (4 * GiB, "4 GiB"),
    (GiB - 1, "1 GiB"),          # 1023.99... MiB rounds into the next unit
    (5 * TiB, "5 TiB"),
])
def test_format_size(n, expected):
    assert format_size(n) == expected


@pytest.mark.parametrize("text", ["512M", "1.5G", "4G", "3T"])
def test_format_reads_back(text):
    assert parse_size(format_size(parse_size(text)).replace(" ", "")) == parse_size(text)


@pytest.mark.parametrize("bad", [-1, 1.5, "1G", True])
def test_format_size_rejects_non_byte_counts(bad):
    with pytest.raises(ValueError):
        format_size(bad)
