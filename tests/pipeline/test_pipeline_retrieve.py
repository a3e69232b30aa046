"""Kira.retrieve: the retrieval stages of a variant alone, by question, image or raw vector, inside levels
and document filters."""

from __future__ import annotations

import numpy as np
import pytest
from pipeline_fakes import FakeStack, photo

from kira.knowledge_base import KnowledgeBase
from kira.pipeline import Kira, VectorError
from kira.grounding.evidence import diverse
from kira.query_state import Fused

NAMES = ("astronaut", "cat", "coffee", "rocket")


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    path = tmp_path_factory.mktemp("retrieve") / "kb"
    with KnowledgeBase.create(path, models=FakeStack()) as kb:
        for n in range(8):
            name = NAMES[n % 4]
            kb.add_image(photo(n), doc_id=f"{name}-{n}", caption=f"a photo of a {name}, crop {n // 4}",
                         tags=[name, f"crop{n // 4}"], metadata={"subject": name, "crop": n // 4})
        kb.commit()
    kb = KnowledgeBase.open(path, models=FakeStack(), read_only=True)
    yield kb
    kb.close()


def test_an_exact_copy_of_a_stored_photo_finds_its_document_first(kb):
    kira = Kira(kb)
    for n in (1, 6):
        doc = f"{NAMES[n % 4]}-{n}"
        hits = kira.retrieve(image=photo(n), top_k=5, variant="dual_path").hits
        assert (hits[0].doc_id, hits[0].level, hits[0].box) == (doc, "document", None)
        assert hits[0].score == 1.0 and "visual" in hits[0].paths and hits[0].cosine == pytest.approx(1.0, abs=1e-4)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        full = kira.retrieve(image=photo(n), top_k=5).hits  # ReAG's fine crop may put a region of it first
        assert full[0].doc_id == doc and full[0].score == 1.0


def test_a_raw_vector_finds_the_chunk_it_was_stored_for_in_either_space(kb):
    kira = Kira(kb)
    region = int(kb.level_ids(["region"])[3])
    vector = kb.index("visual").get_vectors(np.array([region], np.int64))[0]
    hits = kira.retrieve(vector=vector, top_k=3, levels=["region"]).hits
    assert hits[0].chunk_id == region and hits[0].level == "region" and hits[0].box is not None
    document = kb.store.document_chunk_ids(["rocket-7"])["rocket-7"]
    vector = kb.index("text").get_vectors(np.array([document], np.int64))[0]
    hits = kira.retrieve(vector=vector, space="text", top_k=3, variant="dual_path").hits
    assert hits[0].chunk_id == document and hits[0].paths == ("text",) and hits[0].cosine == pytest.approx(1, abs=1e-4)
    coffee = kb.store.document_chunk_ids(["coffee-2"])["coffee-2"]
    vector = kb.index("text").get_vectors(np.array([coffee], np.int64))[0]
    both = kira.retrieve(image=photo(2), vector=vector, space="text", top_k=10)  # the vector stands for a question
    assert both.hits[0].doc_id == "coffee-2" and any("text" in h.paths for h in both.hits)
    by_text = kira.retrieve("a photo of a coffee", top_k=3)
    assert by_text.hits[0].doc_id.startswith("coffee") and by_text.timings["total"] > 0


def test_filters_and_levels_restrict_what_comes_back(kb):
    kira = Kira(kb)
    everything = kira.retrieve("a photo of a cat", top_k=200)
    assert {h.doc_id for h in everything.hits} - {"cat-1", "cat-5"}  # other documents show up unfiltered
    cats = kira.retrieve("a photo of a cat", top_k=200, metadata={"subject": "cat"})
    assert cats.hits and {h.doc_id for h in cats.hits} == {"cat-1", "cat-5"}
    tagged = kira.retrieve(image=photo(2), top_k=200, tags=["crop0", "coffee"])
    assert tagged.hits and {h.doc_id for h in tagged.hits} == {"coffee-2"}
    named = kira.retrieve(image=photo(2), top_k=200, doc_ids=["rocket-3", "astronaut-4"], levels=["patch"])
    assert {h.doc_id for h in named.hits} == {"rocket-3", "astronaut-4"} and {h.level for h in named.hits} == {"patch"}
    assert kira.retrieve("a photo of a cat", metadata={"subject": "dog"}).hits == ()
    second = kira.retrieve("a photo of a cat", top_k=200, metadata={"crop": 1}, levels=["document"])
    assert sorted(second.doc_ids) == ["astronaut-4", "cat-5", "coffee-6", "rocket-7"]
    assert {h.level for h in second.hits} == {"document"} and second.doc_ids[0] == "cat-5"


def test_retrieval_is_what_an_ask_draws_its_evidence_from(kb):
    kira = Kira(kb)
    for query in ({"question": "a photo of a rocket"}, {"image": photo(3)}, {"question": "coffee", "image": photo(2)}):
        found = kira.retrieve(**query, top_k=500, variant="multi_hop")
        asked = kira.ask(**query, top_k=5, variant="multi_hop")
        fused = Fused(np.array(found.chunk_ids, np.int64), np.array([h.score for h in found.hits], np.float32),
                      {h.chunk_id: list(h.paths) for h in found.hits}, {})  # paths: which chunks were found where they lie
        chosen, _ = diverse(kb, fused, kira.max_per_document, 5)
        # a question naming a subject ("rocket" is a metadata value) splits the evidence into its items and
        # similar cases; together they are what retrieval chose
        drawn = [i.chunk_id for i in (*asked.evidence.items, *asked.evidence.similar)]
        assert sorted(c for c, _ in chosen) == sorted(drawn)
        assert found.trace["stages"][-1] == "compound" and "critic" not in found.timings


def test_bad_queries_get_a_clear_error(kb):
    kira = Kira(kb)
    dim = kb.index("visual").dim
    with pytest.raises(VectorError, match=f"holds {dim}-d vectors"):
        kira.retrieve(vector=np.ones(dim + 1))
    with pytest.raises(ValueError, match="NaN or infinite"):
        kira.retrieve(vector=np.full(dim, np.nan))
    with pytest.raises(ValueError, match="all zeros"):
        kira.retrieve(vector=np.zeros(dim))
    with pytest.raises(ValueError, match="space must be"):
        kira.retrieve(vector=np.ones(dim), space="audio")
    with pytest.raises(ValueError, match="not both"):
        kira.retrieve(image=photo(0), vector=np.ones(dim))
    with pytest.raises(ValueError, match="needs a question, an image or a vector"):
        kira.retrieve("  ")
    with pytest.raises(ValueError, match="unknown levels"):
        kira.retrieve("cat", levels=["page"])
    with pytest.raises(ValueError, match="unknown variant"):
        kira.retrieve("cat", variant="fast")
    with pytest.raises(ValueError, match="top_k"):
        kira.retrieve("cat", top_k=0)
    with pytest.raises(TypeError, match="wrap it"):
        kira.retrieve("cat", tags="cat")
    with pytest.raises(TypeError, match="metadata must be a mapping"):
        kira.retrieve("cat", metadata=["subject", "cat"])


def test_an_empty_knowledge_base_retrieves_nothing(tmp_path):
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        assert Kira(kb).retrieve("anything").hits == () and Kira(kb).retrieve(vector=[1.0, 2.0]).hits == ()


def test_a_filter_keeps_compound_partners_out(tmp_path):
    """A sequence partner outside the query's filter is not pulled in by compound expansion."""
    from skimage import data

    from kira.knowledge_base import KnowledgeBase
    from kira.pipeline import Kira

    kb = KnowledgeBase.create(tmp_path / "kb")
    for n, name in enumerate(("astronaut", "rocket", "moon")):
        kb.add_image(getattr(data, name)(), doc_id=name, sequence=("mission", n), metadata={"site": "a" if n else "b"})
    kb.add_image(data.coffee(), doc_id="coffee", caption="a cup of coffee", metadata={"site": "a"})
    kb.commit()
    kira = Kira(kb)
    unfiltered = kira.retrieve(image=data.rocket(), top_k=50, variant="full")
    assert "astronaut" in {h.doc_id for h in unfiltered.hits}  # the sequence partner comes in without a filter
    for hits in (kira.retrieve(image=data.rocket(), top_k=50, variant="full", metadata={"site": "a"}).hits,
                 kira.retrieve(image=data.rocket(), top_k=50, variant="full", doc_ids=["rocket", "moon"]).hits):
        assert {h.doc_id for h in hits} <= {"rocket", "moon", "coffee"} and hits[0].doc_id == "rocket"
    kb.close()


def test_per_document_keeps_at_most_that_many_hits_of_one_image(kb):
    kira = Kira(kb)
    every = kira.retrieve(image=photo(2), top_k=6)
    assert len(set(every.doc_ids)) < len(every.hits)  # an image and its own regions, twice in the top k
    one = kira.retrieve(image=photo(2), top_k=4, per_document=1)
    assert [h.doc_id for h in one.hits] == one.doc_ids and len(one.hits) == 4
    assert one.hits[0] == every.hits[0]
    two = kira.retrieve(image=photo(2), top_k=6, per_document=2)
    assert max(two.doc_ids.count(d) for d in two.doc_ids) <= 2
    assert all([h.doc_id for h in two.hits].count(d) <= 2 for d in two.doc_ids)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="per_document"):
            kira.retrieve(image=photo(2), per_document=bad)
