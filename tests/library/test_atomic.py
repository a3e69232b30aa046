"""kira.atomic: a file is replaced whole or left as it was, and nothing is left beside it."""

from __future__ import annotations

import json
import math

import pytest

from kira.atomic import write_atomic, write_json_atomic, write_text_atomic


def test_writes_replace_the_file_and_create_its_folder(tmp_path):
    target = tmp_path / "new" / "data.bin"
    assert write_atomic(target, b"one") == target and target.read_bytes() == b"one"
    write_atomic(target, b"two")
    assert target.read_bytes() == b"two" and sorted(p.name for p in target.parent.iterdir()) == ["data.bin"]
    write_text_atomic(target, "drei ü")
    assert target.read_text(encoding="utf-8") == "drei ü"


def test_json_is_sorted_unless_asked_and_nan_refused_when_asked(tmp_path):
    target = tmp_path / "x.json"
    write_json_atomic(target, {"b": 1, "a": 2})
    assert list(json.loads(target.read_text())) == ["a", "b"]
    write_json_atomic(target, {"b": 1, "a": 2}, sort_keys=False)
    assert list(json.loads(target.read_text())) == ["b", "a"]
    with pytest.raises(ValueError):
        write_json_atomic(target, {"x": math.nan}, allow_nan=False)
    assert list(json.loads(target.read_text())) == ["b", "a"]  # the refused write left the old file


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "data.bin"
    write_atomic(target, b"old")

    def crash(*_args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("kira.atomic.os.replace", crash)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["data.bin"]
