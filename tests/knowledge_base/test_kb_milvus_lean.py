"""A Milvus knowledge base reads nothing whole into the kira process (issue 33.2).

Lexical search, its question specificity and the names a question may use are answered by Milvus
over kira's own terms (kira.knowledge_base.milvus.lexical), compound groups are fetched per hit
(kira.knowledge_base.milvus.compounds), the text->image bridge is stored at commit and loaded by
readers (kira.knowledge_base.milvus.stored_views). Each is checked against what the embedded
knowledge base's in-process views give on the same real photos.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pymilvus", reason='needs pip install "kira[milvus]"')
pytest.importorskip("milvus_lite", reason='needs pip install "kira[milvus]"')

from kira.knowledge_base.milvus.lexical import lexical_field, names_field  # noqa: E402
from milvus_fixtures import release_lite  # noqa: E402

PHOTOS = {  # skimage.data photo -> (caption, metadata, sequence, multiview set)
    "astronaut": ("an astronaut in a white suit with the american flag", {"site": "S017", "mission": "sts-61"}, None,
                  None),
    "coffee": ("a cup of coffee on a saucer, no sugar", {"site": "S017"}, "breakfast", None),
    "chelsea": ("a ginger cat looking up", {"site": "S071"}, "breakfast", None),
    "rocket": ("a rocket on the launch pad at 2021-04-09", {"site": "S071", "mission": "sts-61"}, "launch", None),
    "camera": ("a man with a camera on a tripod", {"site": "S005"}, "launch", "greyscale"),
    "horse": ("a horse drawing in black and white", {"site": "S005"}, None, "greyscale"),
    "coins": ("old coins on a dark cloth", {"site": "S009"}, None, None),
    "page": ("a printed page of text", {"site": "S009"}, None, None),
}
QUESTIONS = ["a cup of coffee", "the rocket launch on 2021-04-09", "cat", "a man holding a camera at site S005",
             "coins without sugar", "no sugar in the coffee", "sts-61 mission photo", "white horse drawing",
             "what does S071 show?", "printed text page"]


def test_lexical_field_holds_kira_terms_as_whole_words_on_document_and_passage_chunks():
    text = lexical_field("document", "No crack on the wall, but rust on 2021-04-09. Cats", "IMG-1005",
                         {"site": "S017", "n": 3})
    assert text.split() == ["not_crack", "not_wall", "rust", "2021_04_09", "cat", "img", "1005", "s017", "3"]
    assert lexical_field("passage", "Rusty pipes", "doc", {}).split() == ["rusti", "pipe", "doc"]
    assert lexical_field("patch", "a patch repeats its caption", "doc", {}) == ""
    assert len(lexical_field("document", "word " * 40_000, "d", {}).encode()) <= 65_535


def test_names_field_holds_the_words_of_doc_id_group_ids_and_single_token_metadata():
    names = names_field("document", "IMG_1005", ["temporal:P017"], {"site": "S017", "note": "two words",
                                                                     "flag": True, "k": 3})
    assert names.split() == ["1005", "3", "img", "p017", "s017"]
    assert names_field("region", "IMG_1005", ["temporal:P017"], {}) == ""


def _build(kb, tmp_path):
    from PIL import Image
    from skimage import data

    for name, (caption, metadata, sequence, view) in PHOTOS.items():
        pixels = np.asarray(getattr(data, name)())
        path = tmp_path / f"{name}.png"
        Image.fromarray(pixels[::4, ::4]).save(path)
        kb.add_image(path, caption=caption, metadata=metadata, sequence=sequence, view=view)
    kb.add_document("manual", passages=["The launch pad is cleared before a rocket launch.",
                                        "Coffee is served at breakfast without sugar."], caption="site manual")
    kb.commit()


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """The same photos in an embedded and in a Milvus Lite knowledge base (one model stack)."""
    from kira.knowledge_base import KnowledgeBase
    from kira.models import load_default

    tmp = tmp_path_factory.mktemp("lean")
    models = load_default()
    embedded = KnowledgeBase.create(tmp / "embedded", models=models)
    milvus = KnowledgeBase.create(tmp / "milvus", models=models, backend="milvus")
    _build(embedded, tmp)
    _build(milvus, tmp)
    yield embedded, milvus
    embedded.close()
    milvus.close()
    release_lite(milvus.uri)


def _chunks(kb, ids) -> list[tuple[str, str]]:
    rows = kb.chunks([int(i) for i in ids])
    return [(rows[int(i)].doc_id, rows[int(i)].level) for i in ids]


def test_milvus_bm25_over_kira_terms_ranks_as_the_embedded_index(both):
    embedded, milvus = both
    ours, theirs = milvus.lexical(), embedded.lexical()
    assert type(ours).__name__ == "MilvusLexical" and len(ours) == len(theirs)
    for question in QUESTIONS:  # chunk ids differ between the backends: compare the chunks' documents and levels
        a, b = ours.search(question, 10), theirs.search(question, 10)
        assert _chunks(milvus, a.ids) == _chunks(embedded, b.ids), question
        np.testing.assert_allclose(a.scores, b.scores, rtol=1e-4, err_msg=question)
        assert ours.specificity(question) == pytest.approx(theirs.specificity(question), abs=1e-6)
    documents = milvus.level_ids(["document"])
    found = ours.search("coffee launch", 10, allow=documents)
    assert _chunks(milvus, found.ids) == _chunks(embedded, theirs.search(
        "coffee launch", 10, allow=embedded.level_ids(["document"])).ids)
    assert {level for _, level in _chunks(milvus, found.ids)} == {"document"}
    assert _chunks(milvus, ours.search("coffee", 10, allow=found.ids[:1]).ids) == _chunks(milvus, found.ids[:1])
    assert len(ours.search("", 5).ids) == 0 and len(ours.search("coffee", 5, allow=np.zeros(0, np.int64)).ids) == 0
    with pytest.raises(ValueError, match="k must be"):
        ours.search("coffee", 0)


def test_the_names_a_question_uses_are_found_in_milvus_as_in_the_embedded_index(both):
    embedded, milvus = both
    for question in QUESTIONS + ["breakfast and launch", "astronaut IMG", ""]:
        a, b = milvus.identifier_postings(question), embedded.identifier_postings(question)
        assert sorted(a) == sorted(b), question
        for word in a:  # chunk ids differ between the backends: compare the documents they name
            docs_a = {r.doc_id for r in milvus.chunks(a[word]).values()}
            docs_b = {r.doc_id for r in embedded.chunks(b[word]).values()}
            assert docs_a == docs_b, (question, word)


def test_compound_groups_are_fetched_per_hit_and_agree_with_every_group_read_whole(both):
    _, milvus = both
    whole = milvus.compounds()  # every group, read in one query (what the lean path avoids)
    chunk_of = milvus.document_chunk_ids(list(PHOTOS))
    for doc in PHOTOS:
        part = milvus.compounds_for(doc_ids=[doc])
        assert part.compound_of.get(doc) == whole.compound_of.get(doc), doc
        assert part.partners.get(chunk_of[doc], frozenset()) == whole.partners.get(chunk_of[doc], frozenset())
        by_chunk = milvus.compounds_for(chunk_ids=[chunk_of[doc]])
        assert by_chunk.compound_of == part.compound_of
        assert part.view_set_of.get(doc) == whole.view_set_of.get(doc), doc
    part = milvus.compounds_for(doc_ids=["coffee"])
    assert set(part.compound_of) == {"coffee", "chelsea"}
    # horse's multiview set shares camera with the launch sequence: one compound document, found from horse alone
    chained = milvus.compounds_for(doc_ids=["horse"])
    assert chained.compound_of == {"camera": "camera", "horse": "camera", "rocket": "camera"}
    assert chained.kinds[(chunk_of["horse"], chunk_of["camera"])] == "multiview"
    assert milvus.compounds_for().compound_of == {} and milvus.compounds_for(doc_ids=["page"]).compound_of == {}


def test_the_bridge_is_stored_at_commit_and_a_reader_loads_it_without_fitting(both, monkeypatch):
    from kira.knowledge_base import KnowledgeBase
    from kira.knowledge_base.milvus.stored_views import stored_bridge_info
    from kira.models.bridge import TextToImageBridge

    embedded, milvus = both
    info = stored_bridge_info(milvus.storage.records)
    assert info["fitted_on"] == 8 and info["parts"] >= 1  # the 8 captioned photos (the manual has no image)
    probe = np.random.default_rng(0).standard_normal((2, embedded.bridge().text_dim)).astype(np.float32)
    expected = embedded.bridge().encode_vectors(probe)  # fitted on the same pairs in the embedded knowledge base

    def no_fit(*args, **kwargs):
        raise AssertionError("a reader refitted the bridge")

    monkeypatch.setattr(TextToImageBridge, "fit", no_fit)
    reader = KnowledgeBase.open(milvus.path, read_only=True)
    try:
        np.testing.assert_allclose(reader.bridge().encode_vectors(probe), expected, atol=1e-5)
    finally:
        reader.close()


def test_a_damaged_stored_bridge_is_refused_naming_the_fix(both):
    from kira.knowledge_base.milvus.stored_views import BRIDGE_PART, load_bridge, stored_bridge_info

    _, milvus = both
    first = f"{BRIDGE_PART}{stored_bridge_info(milvus.storage.records)['fit']}:0"
    part = milvus.storage.records.get_one(first)
    milvus.storage.records.delete([first])
    try:
        with pytest.raises(ValueError, match="incomplete.*commit the knowledge base again"):
            load_bridge(milvus.storage.records)
    finally:
        milvus.storage.records.put({first: part})
    assert load_bridge(milvus.storage.records) is not None


def test_a_collection_without_kira_terms_keeps_the_in_process_views(tmp_path, monkeypatch):
    """A knowledge base made before kira stored its terms (format 1: no ``__terms`` collection) still opens and
    answers lexical questions, with kira's in-process index."""
    from kira.knowledge_base import KnowledgeBase
    from kira.knowledge_base.lexical import LexicalIndex
    from kira.models import load_default

    from kira.knowledge_base.milvus import schema

    made = schema.MilvusConfig
    monkeypatch.setattr(schema, "MilvusConfig", lambda **fields: made(**{**fields, "kira_terms": False}))
    kb = KnowledgeBase.create(tmp_path / "old", models=load_default(), backend="milvus")
    _build(kb, tmp_path)
    assert not kb.storage.client.has_collection(f"{kb.storage.name}__terms")
    kb.close()
    monkeypatch.undo()
    kb = KnowledgeBase.open(tmp_path / "old", read_only=True)
    try:
        assert not kb.storage.collection.config.kira_terms and isinstance(kb.lexical(), LexicalIndex)
        hits = kb.lexical().search("a cup of coffee", 5)
        assert _chunks(kb, hits.ids)[0] == ("coffee", "document")
        assert sorted(kb.identifier_postings("what does coffee show")) == ["coffee"]
    finally:
        kb.close()
        release_lite(kb.uri)


def test_server_gone_errors_are_recognised_through_their_causes():
    from kira.knowledge_base.milvus.faults import MilvusUnavailable, server_unavailable, writing_to

    class MilvusException(Exception):
        pass

    gone = MilvusException("<MilvusException: (code=2, message=Fail connecting to server on 127.0.0.1:1, illegal "
                           "connection params or server unavailable)>")
    try:
        try:
            raise gone
        except MilvusException as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as outer:
        assert server_unavailable(outer)
    assert not server_unavailable(MilvusException("collection not found")) and not server_unavailable(None)
    with pytest.raises(MilvusUnavailable, match=r"'http://h:1'.*'kb'.*generation 7 is kept"):
        with writing_to("http://h:1", "kb", 7, "adding images to"):
            raise gone
    with pytest.raises(ValueError, match="not the server"):
        with writing_to("http://h:1", "kb", 7, "adding images to"):
            raise ValueError("not the server")


class _Records:
    """The part of `KbRecords` the stored views use, in a dict."""

    def __init__(self) -> None:
        self.rows: dict[str, str] = {}

    def put(self, items):
        self.rows.update(items)

    def get(self, keys):
        return {k: self.rows[k] for k in keys if k in self.rows}

    def get_one(self, key, default=None):
        return self.rows.get(key, default)

    def delete(self, keys):
        for k in keys:
            self.rows.pop(k, None)


def test_a_smaller_bridge_stored_over_a_larger_one_leaves_no_stale_parts():
    from kira.knowledge_base.milvus.stored_views import BRIDGE_PART, load_bridge, store_bridge, store_no_bridge
    from kira.models.bridge import TextToImageBridge

    rng = np.random.default_rng(3)
    records = _Records()
    assert load_bridge(records) is None
    big, small = TextToImageBridge(), TextToImageBridge()
    big.fit(rng.standard_normal((40, 96)).astype(np.float32), rng.standard_normal((40, 400)).astype(np.float32))
    small.fit(rng.standard_normal((40, 8)).astype(np.float32), rng.standard_normal((40, 4)).astype(np.float32))
    assert store_bridge(records, big, 40, 3)["parts"] > 1
    info = store_bridge(records, small, 41, 4)
    assert info["parts"] == 1 and info["fitted_on"] == 41 and info["generation"] == 4
    assert sorted(k for k in records.rows if k.startswith(BRIDGE_PART)) == [f"{BRIDGE_PART}{info['fit']}:0"]
    probe = rng.standard_normal((3, 8)).astype(np.float32)
    np.testing.assert_allclose(load_bridge(records).encode_vectors(probe), small.encode_vectors(probe), atol=1e-6)
    assert store_no_bridge(records, 1, 5)["parts"] == 0 and load_bridge(records) is None
    assert not [k for k in records.rows if k.startswith(BRIDGE_PART)]
