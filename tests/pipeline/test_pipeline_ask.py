"""Kira.ask: every variant, image / text / both, empty and one-image KBs, granularity, groups, re-rank, cards."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from pipeline_fakes import FakeStack, flat

from kira.knowledge_base import KnowledgeBase
from kira.pipeline import VARIANTS, Kira

RED, GREEN, BLUE, YELLOW = (1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0)


@pytest.fixture(scope="session")
def kb(tmp_path_factory, kb_factory):
    path = tmp_path_factory.mktemp("pipeline") / "kb"
    base = kb_factory(path, models=FakeStack())
    base.add_image(flat(RED, spot=(BLUE, 8, 8, 20)), doc_id="red_t0", caption="red card scan", tags=["red"],
                   sequence=("patient-1", 0))
    base.add_image(flat(RED), doc_id="red_t1", caption="red card follow-up", tags=["red"], sequence=("patient-1", 1))
    base.add_image(flat(GREEN), doc_id="green_front", caption="green lawn", view=("lawn", 0))
    base.add_image(flat(GREEN, spot=(YELLOW, 30, 10, 16)), doc_id="green_side", caption="green lawn with a yellow flower",
                   view=("lawn", 1))
    base.add_image(flat(BLUE), doc_id="blue", caption="blue sky")
    base.add_image(flat(YELLOW), doc_id="yellow", caption="yellow wall")
    base.commit()
    yield base
    base.close()


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_answers_with_citations_inside_the_pack(kb, variant):
    result = Kira(kb).ask("show me the blue sky", variant=variant)
    assert result.evidence.items, variant
    assert result.evidence.items[0].doc_id == "blue"
    # "blue" is a document id, so the question names that document: the others are similar cases, cited apart
    assert set(result.answer.citations) <= set(result.evidence.numbers) | {i.number for i in result.evidence.similar}
    assert "blue sky" in result.answer.text.lower()
    assert result.card.variant == variant and result.timings["total"] > 0
    level = VARIANTS.index(variant)
    paths = {p for item in result.evidence.items for p in item.paths}
    assert ("text" in paths) == (level >= 1)
    assert (result.card.critic is not None) == (level >= 4)
    assert (result.card.hops != []) == (level >= 3)
    assert all(c.grounding is not None for c in result.answer.claims) == (level >= 4)
    assert bool(result.card.expansions) == (level >= 2)


def test_image_query_finds_the_same_image_and_runs_fine_grained(kb):
    result = Kira(kb).ask(image=flat(GREEN, spot=(YELLOW, 30, 10, 16)), variant="full")
    visual = [r for r in result.trace["rankings"] if r["path"] == "visual"][0]
    fine = [r for r in result.trace["rankings"] if r["path"] == "fine"][0]
    rows = kb.store.chunks([visual["top"][0], fine["top"][0]])
    assert rows[visual["top"][0]].doc_id == "green_side" and rows[visual["top"][0]].level == "document"
    # the crop is the yellow flower: it finds green_side's flower region, not a plain green patch
    assert rows[fine["top"][0]].doc_id == "green_side" and rows[fine["top"][0]].level in ("region", "patch")
    assert "green_side" in [i.doc_id for i in result.evidence.items[:3]]
    assert "fine_box" in result.trace
    assert result.card.query_image is not None and result.card.query_image.dtype == np.uint8


def test_text_and_image_together(kb):
    result = Kira(kb).ask("a red card", image=flat(RED, spot=(BLUE, 8, 8, 20)), variant="full")
    assert result.evidence.items[0].doc_id.startswith("red")
    assert {r["path"] for r in result.trace["rankings"]} >= {"visual", "text", "fine"}


def test_compound_groups_pull_in_the_rest_of_the_sequence(kb):
    result = Kira(kb).ask("red card scan", variant="multi_hop", top_k=6)
    by_doc = {item.doc_id: item for item in result.evidence.items}
    assert {"red_t0", "red_t1"} <= set(by_doc)
    assert result.card.stop_reason in ("confidence", "max_hops", "no_new", "zero_residual")
    assert result.trace["hops"][0]["hop"] == 1


def test_compound_expansion_adds_group_members_with_decayed_scores(kb):
    from kira.multihop.compound import expand_groups
    from kira.query_state import Fused

    doc_chunks = kb.store.document_chunk_ids(["green_front", "green_side", "red_t0", "red_t1"])
    fused = Fused(np.array([doc_chunks["green_front"], doc_chunks["red_t0"]], np.int64), np.array([1.0, 0.5], np.float32),
                  {}, {})
    added = expand_groups(kb, fused, kb.config)
    assert added == 2
    score = dict(zip(fused.ids.tolist(), fused.scores.tolist()))
    assert score[doc_chunks["green_side"]] == pytest.approx(0.7)
    assert score[doc_chunks["red_t1"]] == pytest.approx(0.4)
    assert fused.paths[doc_chunks["green_side"]] == ["multiview"]
    assert fused.paths[doc_chunks["red_t1"]] == ["temporal"]


def test_compound_of_joins_groups_that_share_a_document(tmp_path):
    """A patient's follow-ups (temporal) and views (multiview) share the baseline film: one compound
    document keyed by its smallest doc id; documents in no group are absent; evidence carries the key."""
    base = KnowledgeBase.create(tmp_path / "kb", models=FakeStack())
    base.add_image(flat(RED), doc_id="p1-pa-t0", caption="red", sequence=("p1", 0), view=("p1-views", 0))
    base.add_image(flat(RED), doc_id="p1-pa-t1", caption="red", sequence=("p1", 1))
    base.add_image(flat(RED), doc_id="p1-lat-t0", caption="red", view=("p1-views", 1))
    base.add_image(flat(GREEN), doc_id="p2-a", caption="green", sequence=("p2", 0))
    base.add_image(flat(GREEN), doc_id="p2-b", caption="green", sequence=("p2", 1))
    base.add_image(flat(BLUE), doc_id="alone", caption="blue")
    base.commit()
    try:
        assert base.compound_of() == {"p1-pa-t0": "p1-lat-t0", "p1-pa-t1": "p1-lat-t0", "p1-lat-t0": "p1-lat-t0",
                                      "p2-a": "p2-a", "p2-b": "p2-a"}
        from kira.grounding.evidence import build_items

        chunk = base.store.document_chunk_ids(["p1-pa-t1", "alone"])
        items = build_items(base, [chunk["p1-pa-t1"], chunk["alone"]], [1.0, 0.5], {}, {}, thumbnails=False)
        assert items[0].provenance["compound"] == "p1-lat-t0"
        assert "compound" not in items[1].provenance
        # the views of one moment, without the subject's other times
        assert base.view_set_of() == {"p1-pa-t0": "p1-views", "p1-lat-t0": "p1-views"}
        assert "views" not in items[0].provenance
        (baseline,) = build_items(base, [base.store.document_chunk_ids(["p1-pa-t0"])["p1-pa-t0"]], [1.0], {}, {},
                                  thumbnails=False)
        assert baseline.provenance["views"] == "p1-views"
    finally:
        base.close()


def test_fine_grained_ranking_weighs_visual_weight_times_its_scale(kb):
    import dataclasses

    config = kb.config
    for scale in (1.0, 0.25):
        cfg = dataclasses.replace(config, retrieval=dataclasses.replace(config.retrieval, fine_weight_scale=scale))
        result = Kira(kb, config=cfg).ask(image=flat(GREEN, spot=(YELLOW, 30, 10, 16)), variant="full")
        fine = [r for r in result.trace["rankings"] if r["path"] == "fine"][0]
        assert fine["weight"] == pytest.approx(round(cfg.retrieval.visual_weight * scale, 4))


def test_granularity_selection_restricts_levels(kb):
    for levels in (("document",), ("patch",), ("region", "patch")):
        result = Kira(kb).ask("yellow wall", levels=levels, variant="dual_path", top_k=4)
        assert result.evidence.items and {i.level for i in result.evidence.items} <= set(levels)
    with pytest.raises(ValueError, match="unknown levels"):
        Kira(kb).ask("x", levels=("pixel",))


def test_evidence_carries_provenance_box_and_thumbnail(kb):
    result = Kira(kb).ask("green lawn with a yellow flower", variant="full", top_k=5)
    item = result.evidence.items[0]
    assert item.provenance["caption"].startswith("green lawn")
    assert item.provenance["image_size"] == (64, 48)
    assert item.thumbnail is not None and item.thumbnail.shape[2] == 3
    assert any(i.box is not None for i in result.evidence.items)
    assert max(i.doc_id == j.doc_id for i in result.evidence.items for j in result.evidence.items) <= 1  # per-doc cap
    counts = {}
    for i in result.evidence.items:
        counts[i.doc_id] = counts.get(i.doc_id, 0) + 1
    assert max(counts.values()) <= 2
    bare = Kira(kb).ask("green lawn with a yellow flower", variant="full", top_k=5, thumbnails=False)
    assert all(i.thumbnail is None for i in (*bare.evidence.items, *bare.evidence.dropped))
    assert bare.answer.text == result.answer.text and bare.answer.grounding == result.answer.grounding
    assert [i.chunk_id for i in bare.evidence.items] == [i.chunk_id for i in result.evidence.items]


def test_card_renders_text_json_html(kb):
    result = Kira(kb).ask("blue sky", image=flat(BLUE), variant="full")
    data = json.loads(result.card.to_json())
    assert data["variant"] == "full" and data["schema_version"]
    assert "<html" in result.card.to_html().lower()
    assert "blue sky" in result.card.to_text().lower()
    assert result.card.critic["threshold"] == pytest.approx(0.1)
    assert set(result.card.timings) >= {"encode", "visual_search", "text_search", "fusion", "critic", "verify"}


def test_reranker_blends_scores(kb):
    class PreferCorner:  # a cross-encoder that loves the bottom-right patch
        def score(self, query, texts):
            return np.array([1.0 if "x 48-64, y 36-48" in t else 0.0 for t in texts], np.float32)

    class KeepAll:
        def relevance(self, question, texts):
            return np.full(len(texts), 0.9, np.float32)

    plain = Kira(kb, models=FakeStack(critic=KeepAll())).ask("blue sky", variant="full", top_k=3)
    assert plain.evidence.items[0].box != (48, 36, 64, 48)
    stack = FakeStack(reranker=PreferCorner(), critic=KeepAll())
    # fusion counts each document once per ranking, so blue's 17 chunks share its score and interleave with the
    # runner-up's (red_t0, blue spot): a head of 5 x top_k = 50 = every fused candidate holds the corner patch
    retrieval = dataclasses.replace(kb.config.retrieval, rerank_candidates_per_result=5)
    config = dataclasses.replace(kb.config, retrieval=retrieval)
    assert retrieval.rerank_candidates_per_result * 10 >= retrieval.candidates
    result = Kira(kb, models=stack, config=config).ask("blue sky", variant="full", top_k=10)
    assert result.trace["reranked"] is True
    top = result.evidence.items[0]
    assert top.box == (48, 36, 64, 48) and "rerank" in top.paths
    # blended = 0.4 * fused (top-normalised) + 0.6 * cross, so the winner scores in [0.6, 1.0]
    assert 0.6 <= top.score <= 1.0


def test_critic_drops_are_reported(kb):
    class OnlyBlue:
        def relevance(self, question, texts):
            return np.array([0.9 if "blue" in t else 0.01 for t in texts], np.float32)

    result = Kira(kb, models=FakeStack(critic=OnlyBlue())).ask("blue sky", variant="grounded", top_k=4)
    assert all("blue" in i.summary for i in result.evidence.items)
    assert result.evidence.dropped and len(result.card.critic["dropped"]) == len(result.evidence.dropped)
    assert result.card.critic["kept"] == [i.chunk_id for i in result.evidence.items]
    assert result.card.critic["candidates"] == len(result.evidence.items) + len(result.evidence.dropped) + (
        result.card.critic["beyond_top_k"])


def test_profile_concepts_feed_expansion_and_the_empty_profile_adds_none(kb):
    from kira import DomainProfile

    profile = DomainProfile(name="walls", concepts=("painted yellow wall", "brick wall"))
    result = Kira(kb, profile=profile).ask("yellow wall", variant="query_expansion")
    assert "painted yellow wall" in result.card.expansions
    plain = Kira(kb).ask("yellow wall", variant="query_expansion")  # the knowledge base's (empty) profile
    assert kb.profile.empty
    assert not set(plain.card.expansions) & set(profile.concepts)
    assert all(e not in profile.concepts for e in plain.card.expansions)


def test_custom_generator_is_used(kb):
    from kira.reasoning import Answer, Claim

    class Echo:
        def generate(self, question, pack):
            return Answer(text=f"{pack.items[0].doc_id} [Evidence 1].", claims=(Claim("x [Evidence 1].", (1,)),))

    assert Kira(kb, generator=Echo()).ask("blue sky", variant="dual_path").answer.text == "blue [Evidence 1]."


def test_empty_kb_gives_an_honest_empty_result(tmp_path):
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        for variant in VARIANTS:
            result = Kira(kb).ask("anything?", image=flat(RED), variant=variant)
            assert len(result.evidence) == 0 and result.answer.citations == ()
            assert "knowledge base is empty" in result.answer.text.lower()
            assert result.card.to_text()


def test_one_image_kb(tmp_path):
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        kb.add_image(flat(BLUE), doc_id="only", caption="a blue square")
        for variant in VARIANTS:
            result = Kira(kb).ask("blue square", variant=variant)
            assert result.evidence.items[0].doc_id == "only"
        assert Kira(kb).ask(image=flat(RED)).evidence.items[0].doc_id == "only"


def test_bad_input(kb):
    kira = Kira(kb)
    with pytest.raises(ValueError, match="question, an image"):
        kira.ask()
    with pytest.raises(ValueError, match="unknown variant"):
        kira.ask("x", variant="best")
    with pytest.raises(ValueError, match="top_k"):
        kira.ask("x", top_k=0)
    with pytest.raises(ValueError):
        kira.ask(image=np.zeros((0, 4, 3), np.uint8))


def test_every_hnsw_search_of_an_ask_uses_the_configured_ef(tmp_path, monkeypatch):
    import dataclasses

    from kira import _core

    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack(), index="hnsw") as base:
        base.add_image(flat(RED, spot=(BLUE, 8, 8, 20)), doc_id="red", caption="red card scan")
        base.add_image(flat(GREEN, spot=(YELLOW, 30, 10, 16)), doc_id="green", caption="green lawn with a flower")
        base.add_image(flat(BLUE), doc_id="blue", caption="blue sky")
        base.commit()
        seen: list[tuple[str, object]] = []
        search, hops = _core.HNSWIndex.search, _core.residual_hops

        def spy_search(self, *args, **kwargs):
            seen.append(("search", kwargs.get("ef")))
            return search(self, *args, **kwargs)

        def spy_hops(*args, **kwargs):
            seen.append(("hops", kwargs.get("ef")))
            return hops(*args, **kwargs)

        monkeypatch.setattr(_core.HNSWIndex, "search", spy_search)
        monkeypatch.setattr(_core, "residual_hops", spy_hops)
        config = base.config.replace(retrieval=dataclasses.replace(base.config.retrieval, search_ef=77))
        result = Kira(base, config=config).ask("the green lawn", image=flat(GREEN, spot=(YELLOW, 30, 10, 16)))
        assert result.evidence.items[0].doc_id == "green"
    kinds = {kind for kind, _ in seen}
    assert kinds == {"search", "hops"} and len(seen) >= 4  # visual, text, fine, feedback searches and the hops
    assert all(ef == 77 for _, ef in seen), seen


def test_bad_question_and_top_k_get_clear_errors_and_undecodable_bytes_are_replaced(kb):
    with pytest.raises(ValueError, match="top_k must be an integer"):
        Kira(kb).ask("blue", top_k=1.5)
    with pytest.raises(TypeError, match="question must be a str"):
        Kira(kb).ask(b"blue sky")
    result = Kira(kb).ask("blue sky \udcff", variant="dual_path")  # a lone surrogate from a non-UTF-8 argv
    assert result.evidence.items[0].doc_id == "blue"
    assert "\udcff" not in (result.question or "")


def test_a_huge_caption_reaches_reasoning_bounded(tmp_path):
    from kira.knowledge_base.rows import MAX_DESCRIPTION_CHARS

    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack()) as kb:
        kb.add_image(flat(BLUE), doc_id="big", caption="blue sky " * 200_000)
        kb.commit()
        result = Kira(kb).ask("blue sky", variant="grounded")
        assert all(len(i.provenance.get("caption", "")) <= MAX_DESCRIPTION_CHARS for i in result.evidence.items)
        assert len(result.answer.text) < 3 * MAX_DESCRIPTION_CHARS


def test_a_model_stack_with_another_image_encoder_is_refused_naming_the_one_it_was_built_with(kb):
    from pipeline_fakes import GridColourEncoder

    class OtherEncoder(GridColourEncoder):
        pass

    with pytest.raises(ValueError, match="built with the image encoder"):
        Kira(kb, models=FakeStack(image=OtherEncoder()))
    assert Kira(kb, models=FakeStack()).ask("blue sky").evidence.items  # the same encoder is fine
