"""Milvus Lite hand-off (issue 33.5): a knowledge base closed in one process can be opened by another; and its
ingest stores the text pieces the embedded one stores (store_text_pieces on both: tests/knowledge_base/test_kb_every_backend.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pymilvus", reason='needs pip install "kira[milvus]"')
pytest.importorskip("milvus_lite", reason='needs pip install "kira[milvus]"')

from pipeline_fakes import FakeStack  # noqa: E402

from kira.knowledge_base import KnowledgeBase  # noqa: E402


def _photo(path: Path, n: int) -> Path:
    from PIL import Image
    from skimage import data

    source = (data.astronaut, data.chelsea, data.coffee, data.rocket)[n % 4]()
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.ascontiguousarray(source[::8, ::8])).save(path)
    return path


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
    return env


_OTHER = textwrap.dedent("""
    import sys
    from pipeline_fakes import FakeStack
    from kira.knowledge_base import KnowledgeBase
    with KnowledgeBase.open(sys.argv[1], models=FakeStack()) as kb:
        kb.ingest(sys.argv[2])
        print(len(kb))
""")


def test_closing_releases_the_lite_file_for_another_process(tmp_path):
    path = tmp_path / "kb"
    with KnowledgeBase.create(path, models=FakeStack(), backend="milvus") as kb:
        kb.add_image(_photo(tmp_path / "first" / "a.png", 0))
    reader = KnowledgeBase.open(path, models=FakeStack(), read_only=True)  # a second open and close, same process
    reader.close()
    _photo(tmp_path / "more" / "b.png", 1)
    proc = subprocess.run([sys.executable, "-c", _OTHER, str(path), str(tmp_path / "more")], capture_output=True,
                          text=True, timeout=300, env=_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "2"
    with KnowledgeBase.open(path, models=FakeStack()) as kb:  # and back in this process: the other one's writes
        assert sorted(kb.documents()) == ["a", "b"]


def test_an_open_knowledge_base_keeps_the_file_while_another_client_of_it_closes(tmp_path):
    path = tmp_path / "kb"
    with KnowledgeBase.create(path, models=FakeStack(), backend="milvus") as kb:
        kb.add_image(_photo(tmp_path / "a.png", 0))
        other = KnowledgeBase.open(path, models=FakeStack(), read_only=True)
        other.close()  # not the last client of the file: the server keeps serving `kb`
        kb.add_image(_photo(tmp_path / "b.png", 1))
        assert len(kb) == 2


def test_cli_ingest_with_milvus_after_a_python_process_created_and_closed_it(tmp_path):
    path = tmp_path / "kb"
    with KnowledgeBase.create(path, backend="milvus") as kb:
        kb.add_image(_photo(tmp_path / "first" / "a.png", 0))
    _photo(tmp_path / "more" / "b.png", 1)
    proc = subprocess.run([sys.executable, "-m", "kira", "ingest", str(path), str(tmp_path / "more"), "--backend",
                           "milvus", "--quiet"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "2 document(s)" in proc.stdout


def test_milvus_ingest_stores_the_text_pieces_the_embedded_one_stores(tmp_path):
    """The local Milvus ingest (and the Ray actors, which write with the same prepare_batch) store each document's
    text pieces, equal to the embedded knowledge base's; the grounding stage reads them (issue 33 gaps)."""
    from kira.grounding.pieces import stored_piece_vectors

    folder = tmp_path / "photos"
    for n in range(3):
        _photo(folder / f"p{n}.png", n)
    with KnowledgeBase.create(tmp_path / "emb", models=FakeStack()) as emb, \
            KnowledgeBase.create(tmp_path / "mil", models=FakeStack(), backend="milvus") as mil:
        emb.ingest(folder)
        mil.ingest(folder)
        dim = FakeStack().text.dim
        keys = [(d, t) for d in ("p0", "p1", "p2") for t in emb.store.descriptions([d])[d]]
        keys += [(d, t) for (d, t) in emb.store.piece_vectors(keys, dim)]
        want, got = emb.store.piece_vectors(keys, dim), mil.store.piece_vectors(keys, dim)
        assert want and sorted(want) == sorted(got)
        assert all(np.allclose(want[k], got[k], atol=1e-6) for k in want)
        mil.remove("p0")
        assert not mil.storage.records.get(["piece:p0"])
        class Item:
            doc_id, summary = "p1", emb.store.descriptions(["p1"])["p1"][0]
        assert stored_piece_vectors(mil, [Item()], dim)
