"""Which question words name documents: the knowledge base's own ids, group ids and one-token metadata values
decide, never the spelling of a word (kira.knowledge_base.identifiers, issue 32 item 5)."""

from __future__ import annotations

import numpy as np
import pytest
from pipeline_fakes import FakeStack, flat

from kira.knowledge_base import KnowledgeBase
from kira.knowledge_base.identifiers import IdentifierIndex, name_words
from kira.pipeline import Kira


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    base = KnowledgeBase.create(tmp_path_factory.mktemp("names") / "kb", models=FakeStack())
    shades = [(1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0), (0, 1, 1), (1, 0, 1)]
    # Captions speak of covid19, x86, h100, mp4 and 4k: words shaped like identifiers that name nothing here.
    captions = ["a covid19 ward photo on an x86 laptop", "an h100 board in a server", "a frame of an mp4 clip in 4k",
                "a chest film", "a circuit board", "a street at night"]
    for n, (shade, caption) in enumerate(zip(shades, captions)):
        base.add_image(flat(shade), doc_id=f"IMG_{1000 + n}", caption=caption,
                       metadata={"ward": "3" if n < 2 else "5", "note": "seen by the night team"},
                       sequence=("P017", n) if n in (3, 4) else None)
    base.commit()
    yield base
    base.close()


def _docs(kb, postings) -> dict[str, list[str]]:
    chunk_doc = {c: d for d, c in kb.store.document_chunk_ids(list(kb.documents())).items()}
    return {w: sorted(chunk_doc[int(c)] for c in ids) for w, ids in postings.items()}


def test_identifier_shaped_words_in_captions_name_nothing(kb):
    for question in ("covid19 cases", "an x86 machine", "the h100", "an mp4 file", "a 4k frame"):
        assert dict(kb.identifier_postings(question)) == {}, question


def test_ids_group_ids_and_one_token_metadata_values_name_documents(kb):
    assert _docs(kb, kb.identifier_postings("what does P017 show?")) == {"p017": ["IMG_1003", "IMG_1004"]}
    assert _docs(kb, kb.identifier_postings("describe IMG_1005")) == {"1005": ["IMG_1005"]}  # "img" is every id
    assert _docs(kb, kb.identifier_postings("films from ward 3")) == {"3": ["IMG_1000", "IMG_1001"]}
    assert dict(kb.identifier_postings("films from ward 5")) == {}  # held by 4 of 6 documents: no subject
    assert dict(kb.identifier_postings("the night team")) == {}  # free-text metadata is not a name
    only = kb.store.document_chunk_ids(["IMG_1003"])["IMG_1003"]
    assert _docs(kb, kb.identifier_postings("P017", allow=np.array([only]))) == {"p017": ["IMG_1003"]}


def test_a_question_naming_a_sequence_id_makes_it_the_subject(kb):
    result = Kira(kb).ask("what does P017 show?", top_k=4, variant="full")
    assert {i.doc_id for i in result.evidence.items} <= {"IMG_1003", "IMG_1004"} and result.evidence.items
    plain = Kira(kb).ask("covid19 on an x86 laptop", top_k=4, variant="full")
    assert result.trace.get("subject") and not plain.trace.get("subject")  # a spelling names no subject


def test_identifier_index_build_and_share_limit():
    index = IdentifierIndex.build([(10, ["a-1"], []), (11, ["a-2"], []), (12, ["a-3"], [])])
    assert sorted(index.postings) == ["1", "2", "3"]  # "a" is held by all three documents
    assert index.named("show a-2 please")["2"].tolist() == [11]
    assert name_words("Scan_001.PNG on 2021-04-09") == {"scan", "001", "png", "2021-04-09"}
