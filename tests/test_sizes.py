"""Memory sizes, read the way Slurm reads --mem."""

from __future__ import annotations

import pytest

from runner.sizes import format_size, parse_size

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
