"""The typed query state and the stage packages: rankings per path, what leads the fused list, one switch per
behaviour, one validation and loop for ask and retrieve, and the import direction between the packages."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from pipeline_fakes import FakeStack, photo

from kira.config import RETIRED_FIELDS, KiraConfig
from kira.grounding.stages import SelectEvidence
from kira.knowledge_base import KnowledgeBase
from kira.pipeline import Kira, variant_stages
from kira.pipeline.request import check_request, retrieval_part
from kira.query_state import Fused, QueryState, Ranking, Rankings, RetrievalPath
from kira.retrieval.anchoring import lead_with_named
from kira.retrieval.stages import EncodeQuery, FineGrained, TextSearch

ROOT = Path(__file__).resolve().parents[2] / "python" / "kira"
NAMES = ("astronaut", "cat", "coffee", "rocket")


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    base = KnowledgeBase.create(tmp_path_factory.mktemp("state") / "kb", models=FakeStack())
    for n, name in enumerate(NAMES):
        base.add_image(photo(n), doc_id=name, caption=f"a photo of the {name}")
    base.commit()
    yield base
    base.close()


def _ranking(path: RetrievalPath, *ids: int, hop: int = 0) -> Ranking:
    return Ranking(path, np.array(ids, np.int64), np.ones(len(ids), np.float32), 0.5, hop=hop)


def test_rankings_fuse_in_one_order_whatever_order_the_stages_filled_them():
    hop2, hop3 = _ranking(RetrievalPath.HOP, 7, hop=2), _ranking(RetrievalPath.HOP, 8, hop=3)
    filled = Rankings(hops=(hop2, hop3), feedback=_ranking(RetrievalPath.FEEDBACK, 6),
                      lexical=_ranking(RetrievalPath.LEXICAL, 4), text=(_ranking(RetrievalPath.TEXT, 3),),
                      image=_ranking(RetrievalPath.VISUAL, 1),
                      fine=_ranking(RetrievalPath.FINE, 5))
    assert [r.label for r in filled.in_fusion_order()] == ["visual", "text", "lexical", "fine", "feedback", "hop2",
                                                          "hop3"]
    assert not Rankings() and filled
    assert RetrievalPath.LEXICAL == "lexical" and f"{RetrievalPath.CLEAR_MATCH}" == "clear_match"


def test_the_fused_list_records_what_leads_it_and_copies_keep_it():
    fused = Fused(np.array([5, 9, 2], np.int64), np.array([1.0, 0.8, 0.5], np.float32), {5: ["text"], 9: [], 2: []}, {})
    led = lead_with_named(fused, np.array([2, 11], np.int64))
    assert led.ids.tolist() == [2, 11, 5, 9]
    assert led.led_by(RetrievalPath.IDENTIFIER).tolist() == [2, 11]
    assert len(led.led_by(RetrievalPath.CLEAR_MATCH)) == 0 and len(fused.led_by(RetrievalPath.IDENTIFIER)) == 0
    shown = lead_with_named(led, np.array([9], np.int64), RetrievalPath.CLEAR_MATCH)
    copy = shown.copy()
    assert copy.led_by(RetrievalPath.CLEAR_MATCH).tolist() == [9] and copy.led_by(RetrievalPath.IDENTIFIER).tolist() == [2, 11]
    assert "identifier" in copy.paths[2] and "clear_match" in copy.paths[9]


def test_a_stage_list_splits_at_evidence_selection_by_type_not_by_name():
    stages = variant_stages("grounded")
    assert [type(s) for s in retrieval_part(stages)] == [type(s) for s in stages[: len(retrieval_part(stages))]]
    assert not any(isinstance(s, SelectEvidence) for s in retrieval_part(stages))
    renamed = [EncodeQuery(), SelectEvidence(name="pick"), TextSearch()]
    assert retrieval_part(renamed) == renamed[:1]


def test_the_variant_alone_decides_fine_grained_retrieval_and_old_config_files_still_load():
    fine = {v: any(isinstance(s, FineGrained) for s in variant_stages(v)) for v in ("grounded", "full")}
    assert fine == {"grounded": False, "full": True}
    old = KiraConfig.from_dict({"retrieval": {"fine_grained": False, "anchor_by_specificity": True, "candidates": 40}})
    assert old.retrieval.candidates == 40 and not hasattr(old.retrieval, "fine_grained")
    assert {("retrieval", "fine_grained"), ("retrieval", "anchor_by_specificity")} <= set(RETIRED_FIELDS)


def test_describing_an_image_only_query_is_the_encode_stage_s_switch(kb):
    kira = Kira(kb)
    ctx = kira._context(grounding=False)
    state = QueryState(question="", pixels=photo(1), top_k=3, levels=None, allow=None)
    plain = EncodeQuery().run(state, ctx).query
    described = EncodeQuery(describe_image=True).run(state, ctx).query
    assert plain.text_vector is None and not plain.text_from_caption
    assert described.text_from_caption and described.text_vector is not None and described.text_query
    assert variant_stages("full", describe_image=True)[0] == EncodeQuery(describe_image=True)


def test_ask_and_retrieve_refuse_bad_input_with_the_same_words(kb):
    kira = Kira(kb)
    for bad, words in (({"top_k": 0}, "top_k must be an integer >= 1"), ({"variant": "best"}, "unknown variant"),
                       ({"levels": ["pages"]}, "pages")):
        with pytest.raises(ValueError, match=words):
            kira.ask("the cat", **bad)
        with pytest.raises(ValueError, match=words):
            kira.retrieve("the cat", **bad)
    with pytest.raises(ValueError, match="ask needs a question, an image, or both"):
        kira.ask("  ")
    with pytest.raises(ValueError, match="retrieve needs a question, an image or a vector"):
        kira.retrieve(None)
    request = check_request(" the cat ", None, top_k=np.int64(2), variant="full", levels="region", missing="-")
    assert (request.question, request.top_k, request.levels) == ("the cat", 2, ("region",))


def test_ask_and_retrieve_run_the_same_retrieval_stages(kb):
    kira = Kira(kb)
    asked = kira.ask("a photo of the coffee", variant="multi_hop", top_k=2)
    found = kira.retrieve("a photo of the coffee", variant="multi_hop", top_k=2)
    retrieval_names = [s.name for s in retrieval_part(kira.stage_list("multi_hop"))]
    assert found.trace["stages"] == retrieval_names == asked.trace["stages"][: len(retrieval_names)]
    assert set(retrieval_names) <= set(asked.timings) and set(retrieval_names) <= set(found.timings)
    assert found.doc_ids[0] == asked.evidence.items[0].doc_id == "coffee"


def _imports(package: str) -> set[str]:
    found: set[str] = set()
    for file in (ROOT / package).glob("*.py"):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
    return found


@pytest.mark.parametrize("package, never", [
    ("query_state", ("kira.pipeline", "kira.retrieval", "kira.multihop", "kira.grounding")),
    ("retrieval", ("kira.pipeline", "kira.multihop")),  # Feedback asks grounding's relevance judge for its seeds
    ("multihop", ("kira.pipeline", "kira.grounding")),
    ("grounding", ("kira.pipeline",)),
])
def test_stage_packages_never_import_the_pipeline_or_a_later_stage(package, never):
    bad = sorted(m for m in _imports(package) if m.startswith(never))
    assert not bad, f"kira.{package} imports {bad}"
    assert any(m.startswith("kira.query_state") for m in _imports(package)) or package == "query_state"
