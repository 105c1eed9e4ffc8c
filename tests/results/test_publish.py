"""publish_json: the one way proofbatch writes its JSON files (plans, ledgers,
manifests, heartbeats). Each file keeps the layout its writer gave it by hand
before, and a value JSON cannot hold leaves the file as it was."""

from __future__ import annotations

import json

import pytest

from runner.results.publish import publish_json

DATA = {"format": "x/1", "keys": [["p", 0]]}


@pytest.mark.parametrize("indent, newline, expected", [
    # plan.json, jobs.json, lock holder, calibrations, image records
    (1, True, '{\n "format": "x/1",\n "keys": [\n  [\n   "p",\n   0\n  ]\n ]\n}\n'),
    # sweep.json and a profile's JSON files
    (2, True, '{\n  "format": "x/1",\n  "keys": [\n    [\n      "p",\n      0\n    ]\n  ]\n}\n'),
    # the cost cache
    (None, True, '{"format": "x/1", "keys": [["p", 0]]}\n'),
    # status.json, running boards, Slurm pools: no newline, ever
    (None, False, '{"format": "x/1", "keys": [["p", 0]]}'),
])
def test_each_json_file_keeps_the_bytes_its_writer_gave_it(tmp_path, indent, newline, expected):
    path = tmp_path / "f.json"
    publish_json(path, DATA, indent=indent, newline=newline)
    assert path.read_bytes() == expected.encode()
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"], "a temp file was left"


def test_a_value_json_cannot_hold_leaves_the_file_as_it_was(tmp_path):
    path = tmp_path / "plan.json"
    publish_json(path, DATA, indent=1)
    with pytest.raises(TypeError):
        publish_json(path, {"format": "x/1", "when": object()}, indent=1)
    assert json.loads(path.read_text()) == DATA
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"], "a temp file was left"
