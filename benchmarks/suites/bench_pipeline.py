"""pytest-benchmark suite for Kira.ask (CI runs it with --benchmark-disable as a correctness pass).

The full-size latency run (>= 100k chunks, p50/p99 per stage) is benchmarks/suites/latency_ask.py.
"""

from __future__ import annotations

import logging

import pytest
from benchmarks.suites.latency_ask import WORDS, build_synthetic_kb

from kira.pipeline import VARIANTS, Kira


@pytest.fixture(scope="module")
def kira(tmp_path_factory):
    logging.getLogger("kira.reasoning.critic").setLevel(logging.ERROR)
    kb, _ = build_synthetic_kb(tmp_path_factory.mktemp("bench") / "kb", docs=300, per_doc=10, index="flat")
    yield Kira(kb)
    kb.close()


@pytest.mark.parametrize("variant", VARIANTS)
def test_ask_latency(benchmark, kira, variant):
    question = " ".join(WORDS[:3])
    result = benchmark(kira.ask, question, top_k=5, variant=variant)
    assert len(result.evidence) >= 1
    assert set(result.answer.citations) <= set(result.evidence.numbers)
    assert result.timings["total"] > 0


def test_latency_run_reports_every_stage_and_the_text_search_recall():
    from benchmarks.suites.latency_ask import run

    logging.getLogger("kira.reasoning.critic").setLevel(logging.ERROR)
    out = run(docs=300, per_doc=4, index="hnsw", queries=6)
    assert out["chunks"] == 1200 and {"text_search", "fusion", "retrieval", "cpu_time"} <= set(out["stages"])
    assert all(s["p50"] <= s["p99"] for s in out["stages"].values())
    recall = out["text_recall@50"]
    assert 0.0 <= recall["asked"] <= 1.0
    assert recall["in_distribution"] >= 0.9  # 1,200 chunks: the graph search is all but exact


def test_latency_run_compares_search_ef_settings_on_one_knowledge_base():
    from benchmarks.suites.latency_ask import run

    from kira.config import KiraConfig

    default = KiraConfig().retrieval.search_ef
    logging.getLogger("kira.reasoning.critic").setLevel(logging.ERROR)
    out = run(docs=300, per_doc=4, index="hnsw", queries=4, efs=(None, 8))
    assert set(out["runs"]) == {default, 8}  # None is the config's default search_ef
    for ef, r in out["runs"].items():
        assert r["search_ef"] == ef and r["chunks"] == 1200 and "text_search" in r["stages"]
    # ef 8 < k = 50, so that search runs at 50: a weaker search than the default's
    assert out["runs"][8]["text_recall@50"]["asked"] <= out["runs"][default]["text_recall@50"]["asked"]


def test_first_ask_after_a_commit_is_measured_cold_and_warmed():
    from benchmarks.suites.latency_ask import first_ask_after_commit

    out = first_ask_after_commit(docs=300, per_doc=4, index="flat", rounds=2)
    assert out["chunks"] == 1204 and out["rounds"] == 2  # one document chunk per late document
    assert set(out["median_ms"]) == {"cold", "warm", "second", "warm_call", "commit", "reader_refresh"}
    assert all(v > 0 for v in out["median_ms"].values())
