"""Settings carry their help once: the command line reads each option's
help and default from the dataclass field it sets (runner/settings.py), and
reads memory sizes the way Slurm reads --mem."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from runner import cli
from runner.profile import ProfileConfig
from runner.settings import format_size, help_of, option, parse_size, setting
from runner.planning.sweep_config import SweepConfig


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
    assert check_reads_fields("run", SweepConfig) == 30


def test_profile_reads_every_option_from_the_profile_config():
    assert check_reads_fields("profile", ProfileConfig, {"ceiling": "ceiling_s"}) == 16


def test_calibrate_reads_every_option_from_its_config():
    from runner.commands.calibrate import CalibrateConfig

    assert check_reads_fields("calibrate", CalibrateConfig) == len(dataclasses.fields(CalibrateConfig))


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
