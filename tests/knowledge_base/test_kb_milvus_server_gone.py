"""A Milvus server killed mid-ingest: a clear error, nothing committed lost, a second ingest duplicates nothing.

The server is Milvus Lite run as its own process on 127.0.0.1 (``python -m milvus_lite server``), killed
with SIGKILL from inside the ingest: the `milvus` 2.3.5 standalone wheel, the only real server installed
here, is refused by kira (ServerTooOld: kira's schema needs Milvus 2.5), so Lite's server stands in.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

pytest.importorskip("pymilvus", reason='needs pip install "kira[milvus]"')
pytest.importorskip("milvus_lite", reason='needs pip install "kira[milvus]"')

from kira.knowledge_base.milvus.lite_server import serve_lite  # noqa: E402

PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "camera", "horse", "coins", "page")


def _start(data_dir) -> tuple[subprocess.Popen, str]:
    try:
        return serve_lite(data_dir)
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture()
def photo_folder(tmp_path):
    from PIL import Image
    from skimage import data

    folder = tmp_path / "photos"
    folder.mkdir()
    for name in PHOTOS:
        Image.fromarray(np.asarray(getattr(data, name)())[::4, ::4]).save(folder / f"{name}.png")
    return folder


@pytest.mark.parametrize("when", ["before a batch", "between a batch's chunks and its records"])
def test_a_server_killed_mid_ingest_gives_a_clear_error_and_loses_nothing_committed(tmp_path, photo_folder, when):
    from kira.knowledge_base import KnowledgeBase
    from kira.knowledge_base.milvus.faults import MilvusUnavailable
    from kira.models import load_default

    models = load_default()
    proc, uri = _start(tmp_path / "data")
    try:
        kb = KnowledgeBase.create("gone", models=models, backend="milvus", uri=uri)
        batches = []
        add_items, put = kb.add_items, kb.storage.records.put

        def third_batch_kills(items):
            batches.append([item["doc_id"] for item in items])
            if len(batches) == 3 and when == "before a batch":
                proc.kill()
                proc.wait()
            return add_items(items)

        def kill_before_records(values):
            if len(batches) == 3 and when != "before a batch" and any(k.startswith("doc:") for k in values):
                proc.kill()
                proc.wait()
            return put(values)

        kb.add_items = third_batch_kills
        kb.storage.records.put = kill_before_records
        with pytest.raises(MilvusUnavailable, match=r"stopped answering.*committed up to generation 2 is kept") as err:
            kb.ingest(photo_folder, batch_size=2, progress=False)
        assert uri in str(err.value) and "ingest the same files again" in str(err.value)
        assert isinstance(err.value, ConnectionError)
        committed = sorted(d for batch in batches[:2] for d in batch)
        # not closed: its server is gone, so there is nothing to close cleanly
    finally:
        proc.kill()
        proc.wait()

    proc, uri = _start(tmp_path / "data")  # the same data directory, served again
    try:
        kb = KnowledgeBase.open("gone", models=models, backend="milvus", uri=uri)
        try:
            assert sorted(kb.documents()) == committed  # every committed document, whole
            per_doc = {d: kb.storage.rows.query_all(f'doc_id == "{d}"', ["id"]) for d in committed}
            assert all(len(rows) > 1 for rows in per_doc.values())
            assert kb.storage.rows.count_documents() == len(committed)
            summary = kb.ingest(photo_folder, batch_size=2, progress=False)  # the same files again
            assert sorted(summary.added) == sorted(set(PHOTOS) - set(committed))
            assert sorted(kb.documents()) == sorted(PHOTOS)
            rows = kb.storage.rows.query_all("id >= 0", ["id", "doc_id"])
            assert len({r["id"] for r in rows}) == len(rows)
            again = {d: kb.storage.rows.query_all(f'doc_id == "{d}"', ["id"]) for d in committed}
            assert {d: sorted(r["id"] for r in v) for d, v in again.items()} == \
                {d: sorted(r["id"] for r in v) for d, v in per_doc.items()}  # committed chunks untouched
        finally:
            kb.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
