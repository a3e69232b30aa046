"""Bad data on disk and bad input (issue 25): each case a fault injector or a new user hit."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import zlib
from pathlib import Path

import numpy as np
import pytest
from pipeline_fakes import FakeStack, photo, photo_kb

from kira import _core
from kira.knowledge_base import KnowledgeBase


def _save(path: Path, n: int) -> Path:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(photo(n)).save(path)
    return path


@pytest.fixture()
def kb_path(tmp_path):
    return photo_kb(tmp_path, checkpoint=True)


# 1 -------------------------------------------------------------------------------------
@pytest.mark.parametrize("read_only", [False, True])
def test_a_zero_byte_database_is_refused_not_recreated(kb_path, read_only):
    (kb_path / "kira.sqlite").write_bytes(b"")
    for side in ("kira.sqlite-wal", "kira.sqlite-shm"):
        (kb_path / side).unlink(missing_ok=True)
    with pytest.raises(ValueError, match="holds no knowledge base.*Restore kira.sqlite"):
        KnowledgeBase.open(kb_path, models=FakeStack(), read_only=read_only)
    assert (kb_path / "kira.sqlite").stat().st_size == 0  # nothing written over it


def test_a_database_that_is_not_sqlite_is_a_value_error(kb_path):
    (kb_path / "kira.sqlite").write_bytes(b"this is not a database file at all" * 200)
    for side in ("kira.sqlite-wal", "kira.sqlite-shm"):
        (kb_path / side).unlink(missing_ok=True)
    with pytest.raises(ValueError, match="damaged or not a kira database"):
        KnowledgeBase.open(kb_path, models=FakeStack())
    KnowledgeBase.create(kb_path.parent / "again", models=FakeStack()).close()  # the lock was released
    with pytest.raises(ValueError, match="damaged"):
        KnowledgeBase.open(kb_path, models=FakeStack())  # and can be taken again


# 2 -------------------------------------------------------------------------------------
def test_a_huge_caption_is_stored_whole_but_encoded_bounded(tmp_path):
    from kira.knowledge_base.kb import MAX_ENCODED_CHARS
    from kira.knowledge_base.rows import MAX_DESCRIPTION_CHARS

    seen: list[int] = []

    class Spy(type(FakeStack().text)):
        def encode(self, texts):
            seen.extend(len(t) for t in texts)
            return super().encode(texts)

    caption = "sunlit harbour " * 70_000  # ~1 MB
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack(text=Spy())) as kb:
        kb.add_image(photo(0), doc_id="big", caption=caption)
        kb.commit()
        assert kb.documents(["big"])["big"].caption == caption
        assert seen and max(seen) <= MAX_ENCODED_CHARS
        rows = kb.store.chunks(kb.store.chunk_ids()).values()
        assert max(len(r.description) for r in rows) == MAX_DESCRIPTION_CHARS  # what reasoning reads is bounded
        assert kb.lexical() is not None


# 3 -------------------------------------------------------------------------------------
def test_a_file_name_that_is_not_utf8_is_skipped_with_a_reason(tmp_path):
    folder = tmp_path / "imgs"
    _save(folder / "good.png", 0)
    bad = os.path.join(os.fsencode(folder), b"caf\xe9.png")
    with open(bad, "wb") as fh:
        fh.write((folder / "good.png").read_bytes())
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        summary = kb.ingest(folder)
        assert summary.added == ["good"]
        [(path, reason)] = summary.skipped
        assert "not valid UTF-8" in reason and "\\xe9" in str(summary)
        str(summary).encode("utf-8")  # printable on any terminal


def test_a_knowledge_base_whose_path_is_not_utf8_saves_and_reopens(tmp_path):
    path = Path(os.fsdecode(os.path.join(os.fsencode(tmp_path), b"kb-\xff")))
    with KnowledgeBase.create(path, models=FakeStack()) as kb:
        kb.add_image(photo(1), doc_id="cat")
        kb.commit(checkpoint=True)
    with KnowledgeBase.open(path, models=FakeStack(), read_only=True) as kb:
        assert kb.storage.repair.clean and len(kb.index("visual")) == len(kb.store.chunk_ids(space="visual"))


def test_caption_text_that_is_not_valid_unicode_is_cleaned_and_bytes_refused(tmp_path):
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        kb.add_image(photo(2), doc_id="coffee", caption="caf\udce9 au lait", tags=["dr\udcffnk"])
        row = kb.documents(["coffee"])["coffee"]
        assert row.caption == "caf\ufffd au lait" and row.tags == ("dr\ufffdnk",)
        with pytest.raises(TypeError, match="decode it first"):
            kb.add_image(photo(3), doc_id="rocket", caption=b"bytes")


# 4 -------------------------------------------------------------------------------------
def test_a_corrupt_bridge_file_is_refitted_not_raised(kb_path):
    with KnowledgeBase.open(kb_path, models=FakeStack(image_text=None)) as kb:
        assert kb.bridge() is not None
        name = kb.store.get_meta("bridge_file")
    (kb_path / name).write_bytes(b"PK\x03\x04 truncated zip")
    with KnowledgeBase.open(kb_path, models=FakeStack(image_text=None), read_only=True) as kb:
        assert kb.bridge() is not None


# 5 -------------------------------------------------------------------------------------
def _patch_u64(path: Path, payload_offset: int, value: int) -> None:
    """Overwrite a u64 of an index file's payload and fix both checksums (a mutation that
    still parses)."""
    raw = bytearray(path.read_bytes())
    raw[32 + payload_offset : 40 + payload_offset] = value.to_bytes(8, "little")
    raw[24:28] = zlib.crc32(bytes(raw[32:])).to_bytes(4, "little")
    raw[28:32] = zlib.crc32(bytes(raw[:28])).to_bytes(4, "little")
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("field,offset", [("ef_construction", 24), ("ef_search", 40)])
def test_hnsw_ef_is_bounded_in_a_file(tmp_path, field, offset):
    rng = np.random.default_rng(0)
    index = _core.HNSWIndex(16)
    index.add(np.arange(20), rng.standard_normal((20, 16)).astype(np.float32))
    path = tmp_path / "g.index"
    index.save(path)
    _core.HNSWIndex.load(path)  # the untouched file loads
    _patch_u64(path, offset, 1 << 60)
    with pytest.raises(ValueError, match=f"bad HNSW parameters.*{field} {1 << 60}"):
        _core.HNSWIndex.load(path)


def test_hnsw_ef_is_bounded_when_set_and_per_call():
    index = _core.HNSWIndex(8)
    index.add(np.arange(3), np.eye(3, 8, dtype=np.float32))
    with pytest.raises(ValueError, match="at most 1048576"):
        index.ef_search = 1 << 40
    with pytest.raises(ValueError, match="at most 1048576"):
        index.search(np.ones(8, np.float32), 1, ef=1 << 30)
    with pytest.raises(ValueError, match="at most 1048576"):
        _core.HNSWIndex(8, ef_construction=1 << 21)
    assert index.search(np.ones(8, np.float32), 1, ef=1 << 20)[0].shape == (1, 1)  # the bound itself is fine


# 6 -------------------------------------------------------------------------------------
def test_a_nan_vector_in_the_database_is_left_out_and_named(kb_path, caplog):
    conn = sqlite3.connect(kb_path / "kira.sqlite")
    chunk = conn.execute("SELECT id FROM chunks WHERE doc_id = 'cat' AND level = 'document'").fetchone()[0]
    conn.execute("UPDATE chunks SET visual = ? WHERE id = ?", (np.full(48, np.nan, "<f4").tobytes(), chunk))
    conn.commit()
    conn.close()
    for space in ("visual", "text"):
        (kb_path / f"{space}.index").unlink()  # the index is rebuilt from the database
    with caplog.at_level("WARNING"), KnowledgeBase.open(kb_path, models=FakeStack(), read_only=True) as kb:
        assert not kb.index("visual").contains(chunk)
        assert kb.storage.spaces.damaged["visual"] == {chunk: "NaN or inf values"}
        assert len(kb.index("visual")) == len(kb.store.chunk_ids(space="visual")) - 1
    assert f"chunk {chunk} (NaN" in caplog.text


# 7 -------------------------------------------------------------------------------------
def test_an_adapter_class_outside_the_registry_is_refused_without_importing(kb_path):
    conn = sqlite3.connect(kb_path / "kira.sqlite")
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('adapter_class', 'kira.__main__:main')")
    conn.commit()
    conn.close()
    with pytest.raises(ValueError, match="not a registered adapter.*kira.adapt.io:ProjectionHead"):
        KnowledgeBase.open(kb_path, models=FakeStack(), read_only=True)
    with pytest.raises(ValueError, match="not a registered adapter"):
        KnowledgeBase.open(kb_path, models=FakeStack())  # and the writer lock is released again
    with pytest.raises(ValueError, match="not a registered adapter"):
        KnowledgeBase.open(kb_path, models=FakeStack())


def test_set_adapter_refuses_an_unregistered_class(kb_path):
    from kira.adapt.io import ProjectionHead

    class Lookalike(ProjectionHead):
        pass

    Lookalike.__module__ = "kira.adapt.io"
    Lookalike.__qualname__ = "ProjectionHead"  # a namesake is not the registered class
    with KnowledgeBase.open(kb_path, models=FakeStack()) as kb:
        head = Lookalike.__new__(Lookalike)
        with pytest.raises(ValueError, match="not a registered adapter"):
            kb.set_adapter(head)


# 8 -------------------------------------------------------------------------------------
def test_temporaries_of_an_interrupted_save_are_removed_by_the_next_writer(kb_path):
    leftovers = [kb_path / "visual.index.tmp-4242-0", kb_path / "text.index.tmp-4242-1", kb_path / "manifest.jsonab12.tmp"]
    for p in leftovers:
        p.write_bytes(b"half written")
    KnowledgeBase.open(kb_path, models=FakeStack(), read_only=True).close()
    assert all(p.exists() for p in leftovers)  # a reader never deletes (a writer may be saving)
    KnowledgeBase.open(kb_path, models=FakeStack()).close()
    assert not any(p.exists() for p in leftovers)


# 9 -------------------------------------------------------------------------------------
def test_an_older_index_file_with_the_same_row_count_is_not_taken_as_current(kb_path, tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    for space in ("visual", "text"):
        shutil.copy(kb_path / f"{space}.index", old)
    with KnowledgeBase.open(kb_path, models=FakeStack()) as kb:
        kb.remove("coffee")
        kb.add_image(photo(2), doc_id="coffee again")  # same picture: the same number of chunks
        kb.commit(checkpoint=True)
        sizes = {s: len(kb.index(s)) for s in ("visual", "text")}
    for space in ("visual", "text"):
        shutil.copy(old / f"{space}.index", kb_path)  # the manifest still names the current generation
    assert {s: len(_core.FlatIndex.load(kb_path / f"{s}.index")) for s in sizes} == sizes
    with KnowledgeBase.open(kb_path, models=FakeStack(), read_only=True) as kb:
        assert not kb.storage.repair.clean
        for space in ("visual", "text"):
            assert set(kb.index(space).ids().tolist()) == set(kb.store.chunk_ids(space=space).tolist())


# 10 ------------------------------------------------------------------------------------
@pytest.mark.parametrize("manifest", ["[1, 2]", '{"generation": 3, "spaces": [1]}', '{"generation": "x", "spaces": {}}',
                                      '{"generation": 3, "spaces": {"visual": 7}}'])
def test_a_manifest_of_the_wrong_shape_means_verify_not_crash(kb_path, manifest):
    (kb_path / "manifest.json").write_text(manifest)
    with KnowledgeBase.open(kb_path, models=FakeStack(), read_only=True) as kb:
        assert set(kb.index("visual").ids().tolist()) == set(kb.store.chunk_ids(space="visual").tolist())


@pytest.mark.parametrize("text,match", [("{not json", "config.json is not valid JSON"),
                                        ("[1, 2]", "config.json holds a JSON list"),
                                        ('{"retrieval": 5}', "config.json does not hold a kira configuration")])
def test_a_bad_config_file_is_a_value_error_naming_it(kb_path, text, match):
    (kb_path / "config.json").write_text(text)
    with pytest.raises(ValueError, match=match):
        KnowledgeBase.open(kb_path, models=FakeStack(), read_only=True)


def test_core_file_and_size_errors_are_value_errors(tmp_path):
    with pytest.raises(ValueError, match="is a directory"):
        _core.FlatIndex.load(tmp_path)
    with pytest.raises(ValueError, match="NUL"):
        _core.FlatIndex(4).save(str(tmp_path / "a\0b.index"))
    assert not list(tmp_path.iterdir())  # nothing written under the truncated name
    with pytest.raises(ValueError, match="dim must be between 1 and 1048576"):
        _core.FlatIndex((1 << 20) + 1)
    with pytest.raises(ValueError, match="dim must be between 1 and 1048576"):
        _core.HNSWIndex((1 << 20) + 1)


def test_tags_given_as_one_string_are_refused(tmp_path):
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        with pytest.raises(TypeError, match=r"wrap it: tags=\['xray'\]"):
            kb.add_image(photo(0), doc_id="a", tags="xray")
        with pytest.raises(TypeError, match="passages=\\[text\\]"):
            kb.add_document("b", passages="one long passage")
        assert len(kb) == 0


def test_a_manifest_without_id_digests_is_verified_once_then_upgraded(kb_path):
    manifest = json.loads((kb_path / "manifest.json").read_text())
    for entry in manifest["spaces"].values():
        del entry["ids"]  # as an older kira wrote it
    (kb_path / "manifest.json").write_text(json.dumps(manifest))
    with KnowledgeBase.open(kb_path, models=FakeStack()) as kb:
        assert kb.storage.repair.clean and kb.storage.spaces.manifest_outdated
    assert all("ids" in e for e in json.loads((kb_path / "manifest.json").read_text())["spaces"].values())
    with KnowledgeBase.open(kb_path, models=FakeStack(), read_only=True) as kb:
        assert not kb.storage.spaces.manifest_outdated


class _Halve:
    """A registered test adapter: halves every vector (cosine search is unchanged by it)."""

    def apply(self, vectors):
        return np.asarray(vectors, np.float32) * 0.5

    def save(self, path):
        np.savez(path, scale=np.float32(0.5))
        return path

    @classmethod
    def load(cls, path):
        with np.load(path) as data:
            assert float(data["scale"]) == 0.5
        return cls()


def test_a_registered_adapter_is_stored_and_resolved_on_open(kb_path):
    from kira.knowledge_base.adapters import adapter_name, register_adapter, registered_adapters, resolve_adapter

    with pytest.raises(TypeError, match="no apply, save, load"):
        register_adapter(type("Nothing", (), {}))
    assert register_adapter(_Halve) is _Halve and adapter_name(_Halve) in registered_adapters()
    assert resolve_adapter(adapter_name(_Halve)) is _Halve
    with KnowledgeBase.open(kb_path, models=FakeStack()) as kb:
        kb.set_adapter(_Halve())
    with KnowledgeBase.open(kb_path, models=FakeStack(), read_only=True) as kb:
        assert type(kb.adapter).__name__ == "_Halve" and kb.stats()["adapter"] == adapter_name(_Halve)
