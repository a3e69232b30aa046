"""The index file format: round trips, atomic saves, and every kind of bad file refused."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from kira import _core

HEADER = 32


def build(kind: str, dtype: str) -> _core.CosineIndex:
    rng = np.random.default_rng(11)
    x = rng.standard_normal((600, 24)).astype(np.float32)
    index = _core.FlatIndex(24, dtype=dtype) if kind == "flat" else _core.HNSWIndex(24, M=8, ef_construction=32, dtype=dtype)
    index.add(np.arange(600) * 2, x)
    index.remove([0, 10, 20])
    return index


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("files") / "flat.kira"
    build("flat", "f32").save(path)
    return path


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "i8"])
def test_round_trip_gives_identical_results(tmp_path, kind, dtype):
    index = build(kind, dtype)
    if kind == "hnsw":
        index.ef_search = 40
    path = tmp_path / "index.kira"
    index.save(str(path))
    loaded = type(index).load(path)
    q = np.random.default_rng(12).standard_normal((20, 24)).astype(np.float32)
    for a, b in zip(index.search(q, 7), loaded.search(q, 7)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(index.ids(), loaded.ids())
    np.testing.assert_array_equal(index.get_vectors([2, 4]), loaded.get_vectors([2, 4]))
    assert (loaded.dim, loaded.dtype, len(loaded)) == (24, dtype, 597)
    if kind == "hnsw":
        assert (loaded.ef_search, loaded.M, loaded.ef_construction) == (40, 8, 32)
        assert not loaded.contains(0)  # tombstones survive


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path):
    path = tmp_path / "index.kira"
    build("flat", "f32").save(path)
    first = path.read_bytes()
    small = _core.FlatIndex(24)
    small.add([1], np.ones((1, 24), np.float32))
    small.save(path)  # replaces the old file whole
    assert path.read_bytes() != first
    assert len(_core.FlatIndex.load(path)) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.kira"]
    with pytest.raises(OSError):
        small.save(tmp_path / "missing-dir" / "index.kira")


def rewrite(path: Path, out: Path, edit) -> Path:
    data = bytearray(path.read_bytes())
    edit(data)
    out.write_bytes(bytes(data))
    return out


def fix_header_crc(data: bytearray) -> None:
    data[28:32] = struct.pack("<I", zlib.crc32(bytes(data[:28])))


def test_header_matches_the_documented_layout(saved):
    data = saved.read_bytes()
    assert data[:8] == b"KIRAIDX\0"
    version, kind, length, payload_crc, header_crc = struct.unpack("<IIQII", data[8:32])
    assert (version, kind, length) == (1, 1, len(data) - HEADER)
    assert payload_crc == zlib.crc32(data[HEADER:]) and header_crc == zlib.crc32(data[:28])


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.__delitem__(slice(len(d) - 100, None)), "truncated"),
        (lambda d: d.__delitem__(slice(20, None)), "truncated"),
        (lambda d: d.__setitem__(len(d) - 5, d[len(d) - 5] ^ 0x40), "payload checksum"),
        (lambda d: d.__setitem__(17, d[17] ^ 1), "header checksum"),
        (lambda d: d.__setitem__(slice(0, 8), b"NOTKIRA!"), "not a kira index file"),
        (lambda d: (d.__setitem__(slice(8, 12), struct.pack("<I", 99)), fix_header_crc(d)), "version 99"),
        (lambda d: d.extend(b"junk"), "unexpected bytes"),
    ],
    ids=["truncated-payload", "truncated-header", "flipped-payload-bit", "flipped-header-bit", "foreign",
         "wrong-version", "trailing-bytes"],
)
def test_bad_files_are_refused(saved, tmp_path, edit, message):
    bad = rewrite(saved, tmp_path / "bad.kira", edit)
    with pytest.raises(ValueError, match=message):
        _core.FlatIndex.load(bad)


def test_foreign_and_mismatched_files(saved, tmp_path):
    npy = tmp_path / "x.npy"
    np.save(npy, np.ones(10))
    empty = tmp_path / "empty.kira"
    empty.write_bytes(b"")
    for path in (npy, empty):
        with pytest.raises(ValueError, match="not a kira index file"):
            _core.HNSWIndex.load(path)
    with pytest.raises(ValueError, match="holds a FlatIndex.*FlatIndex.load"):
        _core.HNSWIndex.load(saved)
    with pytest.raises(FileNotFoundError):
        _core.FlatIndex.load(tmp_path / "nope.kira")


def test_consistent_checksum_but_bad_structure_is_refused(saved, tmp_path):
    # A well-formed header over a payload whose counts lie must not be trusted.
    def lie(d: bytearray) -> None:
        d[HEADER + 16 : HEADER + 24] = struct.pack("<Q", 10**9)  # count
        d[24:28] = struct.pack("<I", zlib.crc32(bytes(d[HEADER:])))
        fix_header_crc(d)

    with pytest.raises(ValueError, match="corrupted"):
        _core.FlatIndex.load(rewrite(saved, tmp_path / "lie.kira", lie))
