"""Text pieces stored at ingest: every chunk description's sentence pieces are encoded once, kept with
their document in the same commit and removed with it, and the verifier reads them instead of encoding
evidence on every ask, with the same grounding scores as fresh encodings. The pieces that only say how an
image looks (the describer's measurements; FakeStack's captioner writes "mean colour R G B"), the whole of a
description that says how it looks besides what it shows (not the chunk's embedded text) and a region's or
patch's own pieces are left for the verifier to encode when an ask cites them."""

from __future__ import annotations

import shutil
import sqlite3

import numpy as np
import pytest
from pipeline_fakes import FakeStack, HashingTextEncoder, photo

from kira.knowledge_base import KnowledgeBase
from kira.knowledge_base.embedded.store import SCHEMA_VERSION
from kira.pipeline import Kira
from kira.reasoning.shown import shows_text
from kira.reasoning.verifier import GroundingVerifier, about_looks, summary_pieces

CAPTIONS = {
    "astronaut": "An astronaut in a white space suit. A flag stands behind her; she holds a helmet.",
    "cat": "A ginger cat lies on a rug. Its eyes are half closed; the fur is striped.",
    "coffee": "A cup of coffee on a saucer. Foam forms a leaf pattern; a spoon rests beside it.",
    "rocket": "A rocket on the launch pad. Smoke rises from its base; the sky is clear blue.",
}
QUESTIONS = ("an astronaut holding a helmet", "a striped cat on a rug", "coffee with foam", "a rocket launch")


class Recording:
    """A text encoder that records every text it is asked to encode."""

    def __init__(self, inner) -> None:
        self.inner, self.dim, self.texts = inner, inner.dim, []

    def encode(self, texts):
        self.texts += list(texts)
        return self.inner.encode(texts)


def _looks(piece: str) -> bool:
    """Whether `piece` is FakeStack's describer's measurement of how the image looks (left for ask time)."""
    return piece.startswith("mean colour ")


def _looks_besides(piece: str) -> bool:
    """Whether `piece` is an image's whole description that says how it looks besides what it shows (left for
    ask time: its chunk's text vector embeds what it shows, so storing it would cost an encoding at ingest)."""
    return "; mean colour " in piece


def _pieces(kb: KnowledgeBase, doc_id: str) -> dict[str, np.ndarray]:
    rows = kb.store.conn.execute("SELECT text, vector FROM text_pieces WHERE doc_id = ?", (doc_id,))
    return {text: np.frombuffer(blob, "<f4") for text, blob in rows}


def _descriptions(kb: KnowledgeBase, doc_id: str, levels: tuple[str, ...] = ("document", "passage")) -> list[str]:
    rows = kb.store.conn.execute(f"SELECT description FROM chunks WHERE doc_id = ? AND level IN "
                                 f"({','.join('?' * len(levels))})", (doc_id, *levels))
    return [r[0] for r in rows]


def _own(piece: str) -> bool:
    """Whether `piece` is a region's or patch's own (its description or location: left for ask time)."""
    return "region at x" in piece or "patch at x" in piece


def _build(path, stack) -> None:
    with KnowledgeBase.create(path, models=stack) as kb:
        for n, (name, caption) in enumerate(CAPTIONS.items()):
            kb.add_image(photo(n), doc_id=name, caption=caption, tags=[name])
        kb.commit()


def test_each_piece_is_stored_once_per_document_with_its_encoding_and_removed_with_it(tmp_path):
    encoder = HashingTextEncoder()
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack(text=encoder)) as kb:
        kb.add_image(photo(0), doc_id="astronaut", caption=CAPTIONS["astronaut"])
        kb.add_document("manual", passages=["The suit weighs 120 kg. It keeps the astronaut alive; it has a visor."])
        kb.commit()
        for doc in ("astronaut", "manual"):
            stored = _pieces(kb, doc)
            every = {p for d in _descriptions(kb, doc) for p in summary_pieces(d)}
            wanted = {p for p in every if not _looks(p) and not _looks_besides(p)}
            shown = {CAPTIONS["astronaut"].rstrip(".")} if doc == "astronaut" else set()  # what the image shows
            assert set(stored) == wanted | shown and len(wanted) > len(_descriptions(kb, doc))
            held = {"mean colour 86 77 95", f"{CAPTIONS['astronaut']}; mean colour 86 77 95"}
            assert (every - wanted) == (held if doc == "astronaut" else set())
            texts = sorted(stored)
            np.testing.assert_allclose(np.stack([stored[t] for t in texts]), encoder.encode(texts), atol=1e-6)
        assert "An astronaut in a white space suit." in _pieces(kb, "astronaut")
        kept = set(_pieces(kb, "astronaut"))
        children = {p for d in _descriptions(kb, "astronaut", ("region", "patch")) for p in summary_pieces(d)} - kept
        assert any("region at x" in p for p in children) and any("patch at x" in p for p in children)
        assert all(map(_own, children))  # regions' and patches' own pieces: encoded when cited
        kb.remove("astronaut")
        kb.commit()
        assert _pieces(kb, "astronaut") == {} and _pieces(kb, "manual")


def test_patch_pieces_are_stored_too_when_the_config_asks(tmp_path):
    from kira.config import GroundingConfig, KiraConfig

    config = KiraConfig().replace(grounding=GroundingConfig(patch_pieces_at_ingest=True))
    with KnowledgeBase.create(tmp_path / "kb", config, models=FakeStack(text=HashingTextEncoder())) as kb:
        kb.add_image(photo(0), doc_id="astronaut", caption=CAPTIONS["astronaut"])
        kb.commit()
        every = {p for d in _descriptions(kb, "astronaut", ("document", "patch")) for p in summary_pieces(d)
                 if not _looks(p) and not _looks_besides(p)}
        every |= {CAPTIONS["astronaut"].rstrip(".")}  # and what the image shows, as one text
        assert set(_pieces(kb, "astronaut")) == every and any("patch at x" in p for p in every)
        assert not any("region at x" in p for p in every)
        kb.store.conn.execute("DELETE FROM text_pieces")  # the backfill stores what ingest stored
        assert kb.store_text_pieces() == 1 and set(_pieces(kb, "astronaut")) == every


@pytest.mark.parametrize("rule", [{}, {"regions": True}, {"patches": True}, {"appearance": True},
                                  {"regions": True, "patches": True, "appearance": True}])
def test_stored_pieces_holds_back_what_its_rule_says(rule):
    from kira.config import ChunkingConfig
    from kira.knowledge_base.batch_encode import encode_batch
    from kira.knowledge_base.pieces import piece_levels, stored_pieces

    stack = FakeStack(text=HashingTextEncoder())
    items = [dict(pixels=photo(0), doc_id="astronaut", caption=CAPTIONS["astronaut"], tags=(), metadata={},
                  passages=("The suit weighs 120 kg. Its visor is gold-coated; it has mean colour 86 77 95.",)),
             dict(pixels=None, doc_id="note", caption=None, tags=("mean colour 1 2 3", "launch pad"), metadata={})]
    levels = piece_levels(regions=bool(rule.get("regions")), patches=bool(rule.get("patches")))
    batch = encode_batch(stack, items, ChunkingConfig(), ("document", "region", "patch"))
    image, note = stored_pieces(items, batch.plans, batch.texts, **rule)
    chunks = [c.description for c in batch.plans[0].chunks if c.level in levels]
    every = {p for d in chunks for p in summary_pieces(d)}
    passage = set(summary_pieces(items[0]["passages"][0]))
    assert "it has mean colour 86 77 95." in passage  # a passage's words are content, never held back
    looks = {p for p in every if _looks(p) or _looks_besides(p)}
    assert looks and set(image) == (every - (set() if rule.get("appearance") else looks)) | passage
    assert set(note) == set(summary_pieces("mean colour 1 2 3; launch pad"))  # no image: nothing held back


def test_a_piece_another_document_holds_is_reused_not_encoded_again(tmp_path):
    encoder = Recording(HashingTextEncoder())
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack(text=encoder)) as kb:
        kb.add_image(photo(0), doc_id="first", caption=CAPTIONS["astronaut"], tags=["suit"])
        encoder.texts = []
        kb.add_image(photo(4), doc_id="second", caption=CAPTIONS["astronaut"], tags=["suit"])  # same size and text
        first, second = _pieces(kb, "first"), _pieces(kb, "second")
        shared = set(first) & set(second)
        assert "A flag stands behind her;" in shared and "tags: suit;" in shared
        assert not shared & set(encoder.texts) and set(second) - shared <= set(encoder.texts) | set(first)
        for text in shared:
            np.testing.assert_array_equal(first[text], second[text])
        kb.remove("first")
        kb.commit()
        assert _pieces(kb, "first") == {} and set(_pieces(kb, "second")) == set(second)


def test_a_failed_batch_stores_no_pieces(tmp_path, monkeypatch):
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        kb.add_image(photo(1), doc_id="cat", caption=CAPTIONS["cat"])
        kb.commit()

        def broken(*args, **kwargs):
            raise RuntimeError("disk full")

        monkeypatch.setattr(kb.store, "add_to_group", broken)  # fails after the pieces were inserted
        with pytest.raises(RuntimeError, match="disk full"):
            kb.add_image(photo(2), doc_id="coffee", caption=CAPTIONS["coffee"], sequence="cups")
        count = kb.store.conn.execute("SELECT COUNT(*), COUNT(DISTINCT doc_id) FROM text_pieces").fetchone()
        assert count[1] == 1 and _pieces(kb, "coffee") == {} and count[0] == len(_pieces(kb, "cat"))


def test_the_verifier_scores_the_same_with_stored_pieces_and_encodes_only_the_claims(tmp_path, minilm):
    encoder = Recording(minilm)
    _build(tmp_path / "kb", FakeStack(text=encoder))
    fresh = GroundingVerifier(minilm)
    with KnowledgeBase.open(tmp_path / "kb", models=FakeStack(text=encoder), read_only=True) as kb:
        kira = Kira(kb)
        claims = 0
        for question in QUESTIONS:
            encoder.texts = []
            result = kira.ask(question)
            pieces = {p for item in result.evidence.items for p in summary_pieces(item.summary)}
            stored = {p for item in result.evidence.items if item.level in ("document", "passage")
                      for p in summary_pieces(item.summary) if not _looks(p) and not _looks_besides(p)}
            said = {c.plain_text for c in result.answer.claims}
            encoded = set(encoder.texts) & (pieces - said)
            assert stored and not encoded & stored  # no piece of a document / passage encoded at ask time
            # but a cited region's or patch's own pieces (config: not at ingest) and a cited image's whole description
            # (it says how the image looks besides what it shows) are, and its looks only for a question or claim about
            # looks ("striped")
            looks = about_looks(question, result.answer.claims)
            assert all(_own(p) or _looks(p) or _looks_besides(p) for p in encoded) and any(map(_looks, encoded)) == looks
            assert encoder.texts.count(question) == 1  # the critic reads the question's vector from its encoding
            judged = {shows_text(i) for i in (*result.evidence.items, *result.evidence.dropped)} - {""}
            assert judged and not judged & set(encoder.texts)  # and what each candidate shows, stored at ingest
            again = fresh.verify(result.answer, result.evidence, question=question)  # every piece encoded now
            assert again.grounding == pytest.approx(result.answer.grounding, abs=1e-5)
            for mine, theirs in zip(result.answer.claims, again.claims):
                assert (mine.s_sim, mine.s_attn) == pytest.approx((theirs.s_sim, theirs.s_attn), abs=1e-5)
                assert mine.hallucination_risk == theirs.hallucination_risk
            claims += len(result.answer.claims)
        assert claims >= len(QUESTIONS)


def test_a_knowledge_base_built_before_gets_its_pieces_once_asked_to(tmp_path):
    encoder = HashingTextEncoder()
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack(text=encoder)) as kb:
        for n, name in enumerate(("cat", "coffee", "rocket")):
            kb.add_image(photo(n + 1), doc_id=name, caption=CAPTIONS[name])
        kb.add_document("manual", passages=["The pad is cleared at T-10. Crews wait; the tower retracts."])
        kb.commit()
        before = {doc: _pieces(kb, doc) for doc in ("cat", "coffee", "rocket", "manual")}
        generation = kb.store.generation()
        kb.store.conn.execute("DELETE FROM text_pieces WHERE doc_id IN ('coffee', 'manual')")  # as if never stored
        kb.add_image(photo(5), doc_id="cat2", caption=CAPTIONS["cat"])
        with pytest.raises(ValueError, match="commit"):
            kb.store_text_pieces()
        kb.commit()
        with pytest.raises(ValueError, match="batch must be an integer"):
            kb.store_text_pieces(batch=0)
        assert kb.store_text_pieces(batch=1) == 2 and kb.store_text_pieces() == 0
        for doc, pieces in before.items():
            after = _pieces(kb, doc)
            assert set(after) == set(pieces)
            for text in pieces:
                np.testing.assert_allclose(after[text], pieces[text], atol=1e-6)
        assert kb.store.generation() == generation + 1  # only the commit of cat2
    with KnowledgeBase.open(tmp_path / "kb", models=FakeStack(text=encoder), read_only=True) as kb, \
            pytest.raises(ValueError, match="read-only"):
        kb.store_text_pieces()


def test_pieces_stored_by_another_text_encoder_are_not_used(tmp_path, minilm):
    _build(tmp_path / "kb", FakeStack(text=minilm))
    other = Recording(minilm)  # the same vectors, but not the encoder the knowledge base records: trust nothing
    with KnowledgeBase.open(tmp_path / "kb", models=FakeStack(text=other), read_only=True) as kb:
        result = Kira(kb).ask(QUESTIONS[2])
        cited = {n for claim in result.answer.claims for n in claim.citations}
        pieces = {p for item in result.evidence.items if item.number in cited for p in summary_pieces(item.summary)}
        assert pieces and pieces <= set(other.texts)  # every piece the verifier read, it encoded


def test_the_critic_judges_the_same_with_the_question_vector_given(minilm):
    from kira.reasoning.critic import SimilarityCritic
    from kira.reasoning.types import EvidenceItem

    critic = SimilarityCritic(minilm)
    items = [EvidenceItem(n, n, name, "document", 1.0, ("text",), caption)
             for n, (name, caption) in enumerate(CAPTIONS.items(), start=1)]
    for question in QUESTIONS:
        given = 2.5 * minilm.encode([question])[0]  # any length: the critic normalises it
        assert critic.probabilities(question, items, question_vector=given) == pytest.approx(
            SimilarityCritic(minilm).probabilities(question, items), abs=1e-6)
    decision = critic.filter(QUESTIONS[1], items, question_vector=minilm.encode([QUESTIONS[1]])[0])
    assert [i.doc_id for i in decision.kept][:1] == ["cat"]


def test_a_knowledge_base_from_before_stored_pieces_opens_and_answers_the_same(tmp_path, minilm):
    encoder = Recording(minilm)
    _build(tmp_path / "new", FakeStack(text=encoder))
    shutil.copytree(tmp_path / "new", tmp_path / "old")
    conn = sqlite3.connect(tmp_path / "old" / "kira.sqlite")  # as schema 2 left it: no text pieces
    conn.execute("DROP TABLE text_pieces")
    conn.execute("UPDATE schema_version SET version = 2")
    conn.commit()
    conn.close()
    answers = {}
    for name in ("new", "old"):
        with KnowledgeBase.open(tmp_path / name, models=FakeStack(text=encoder), read_only=True) as kb:
            assert kb.store.schema_version() == (SCHEMA_VERSION if name == "new" else 2)
            encoder.texts = []
            result = Kira(kb).ask(QUESTIONS[0])
            pieces = {p for item in result.evidence.items for p in summary_pieces(item.summary)}
            pieces -= {c.plain_text for c in result.answer.claims}
            answers[name] = (result.answer.text, result.answer.grounding, pieces & set(encoder.texts))
    assert answers["old"][:2] == (answers["new"][0], pytest.approx(answers["new"][1], abs=1e-5))
    assert len(answers["old"][2]) > len(answers["new"][2])  # the old one encodes all its evidence,
    assert all(_own(p) or _looks(p) or _looks_besides(p) for p in answers["new"][2])  # a cited chunk's own, looks
    with KnowledgeBase.open(tmp_path / "old", models=FakeStack(text=encoder)) as kb:  # a writer migrates it
        assert kb.store.schema_version() == SCHEMA_VERSION and _pieces(kb, "cat") == {}
        kb.add_image(photo(5), doc_id="cat2", caption=CAPTIONS["cat"])
        kb.commit()
        assert _pieces(kb, "cat2") and Kira(kb).ask(QUESTIONS[1]).answer.claims
        assert kb.store_text_pieces() == len(CAPTIONS) and _pieces(kb, "cat")  # the old documents, filled
        encoder.texts = []
        result = Kira(kb).ask(QUESTIONS[0])
        pieces = {p for item in result.evidence.items for p in summary_pieces(item.summary)}
        encoded = (pieces - {c.plain_text for c in result.answer.claims}) & set(encoder.texts)
        assert pieces and all(_own(p) or _looks(p) or _looks_besides(p) for p in encoded)


def test_a_bulk_ingest_without_pieces_answers_the_same_and_fills_them_later(tmp_path):
    from kira.config import GroundingConfig, KiraConfig

    encoder = HashingTextEncoder()
    config = KiraConfig().replace(grounding=GroundingConfig(pieces_at_ingest=False))
    _build(tmp_path / "with", FakeStack(text=encoder))
    with KnowledgeBase.create(tmp_path / "without", config, models=FakeStack(text=encoder)) as kb:
        for n, (name, caption) in enumerate(CAPTIONS.items()):
            kb.add_image(photo(n), doc_id=name, caption=caption, tags=[name])
        kb.commit()
        assert kb.store.conn.execute("SELECT COUNT(*) FROM text_pieces").fetchone()[0] == 0
        bare = Kira(kb).ask(QUESTIONS[2])
        assert kb.store_text_pieces() == len(CAPTIONS)
        filled_pieces = set(_pieces(kb, "coffee"))
        filled = Kira(kb).ask(QUESTIONS[2])
    with KnowledgeBase.open(tmp_path / "with", models=FakeStack(text=encoder), read_only=True) as kb:
        stored = Kira(kb).ask(QUESTIONS[2])
        assert filled_pieces == set(_pieces(kb, "coffee")) and filled_pieces  # the backfill stores what ingest would
    for other in (bare, filled):
        assert other.answer.text == stored.answer.text
        assert other.answer.grounding == pytest.approx(stored.answer.grounding, abs=1e-6)
