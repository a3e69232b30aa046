"""The DomainVQA-R runner end to end on a small slice: results.json schema, tables, figures, CLI.

The runner's contract (schema, ranges, tables, figures) is checked on the small fake model
stack (about 5 s); the same checks on the embedded default stack (about 40 s) are marked slow.
"""

from __future__ import annotations

import json

import pytest
from pipeline_fakes import FakeStack

from kira.eval.runner import run_domainvqa

TORCH = "torch is not installed: pip install 'kira[export]' (the CPU build: --index-url https://download.pytorch.org/whl/cpu)"


def _small(out, models, **kw):
    return run_domainvqa(out, small=True, domains=["satellite"], variants=["visual_only", "full"], seed=0,
                         adapt=False, planted=True, models=models, **kw)


@pytest.fixture(scope="session")
def small_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("domainvqa")
    return out, _small(out, FakeStack())


def test_results_json_schema(small_run):
    _check_results(*small_run)


@pytest.mark.slow
def test_results_json_schema_with_the_default_stack(tmp_path):
    _check_results(tmp_path, _small(tmp_path, None, figures=False))


def _check_results(out, summary):
    data = json.loads((out / "results.json").read_text())
    assert set(data["variants"]) == {"visual_only", "full"}
    assert set(data["domains"]) == {"satellite"}
    for metric in ("precision@5", "recall@1", "recall@3", "recall@5", "recall@10", "faithfulness",
                   "domain_correctness", "grounding", "completeness"):
        assert metric in data["variants"]["full"]
    assert data["seed"] == 0 and data["config"]["retrieval"]["visual_weight"] == 0.6
    full = data["variants"]["full"]
    assert 0.0 <= full["precision@5"] <= 1.0 and 0.0 <= full["domain_correctness"] <= 1.0
    # the verifier runs only from "grounded" on, so visual-only answers carry no grounding score
    assert data["variants"]["visual_only"]["grounding"] is None and full["grounding"] is not None
    # every answer that did not abstain explains itself fully; an abstention has no claims to ground (with the
    # fake stack's 64-d bag-of-words text encoder, relevance cannot tell much, so several abstain)
    answers = [q for q in data["questions"]["satellite"] if q["variant"] == "full"]
    assert all(q["scores"]["completeness"] == 1.0 or q["answer"].startswith("Nothing in this knowledge base matches")
               for q in answers)
    assert any(q["scores"]["completeness"] == 1.0 for q in answers)
    low, high = data["intervals"]["variants"]["full"]["precision@5"]
    assert low <= full["precision@5"] <= high
    assert len(data["questions"]["satellite"]) == 2 * 12
    planted = data["planted"]
    assert planted["planted"] > 0 and 0.0 <= planted["planted_flag_rate"] <= 1.0
    bounds = data["ceiling"]["satellite"]["all"]
    assert 0.0 < bounds["clause_oracle"] <= bounds["token_bound"] <= 1.0
    # averaged over one domain, the table value is that domain's value
    assert data["domains"]["satellite"]["full"]["recall@5"] == pytest.approx(full["recall@5"])


def test_tables_and_figures(small_run):
    out, _ = small_run
    tables = (out / "tables.md").read_text()
    assert "Table 1" in tables and "Table 2" in tables and "Table 3: ablation on satellite" in tables
    assert "*paper: Full Kira*" in tables
    assert "## Domain correctness against its ceiling" in tables and "| satellite | multihop |" in tables
    for name in ("cross_domain_heatmap", "recall_at_k", "component_contributions", "grounding_distribution",
                 "hop_confidence"):
        png = out / "figures" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unknown_variant(tmp_path):
    with pytest.raises(ValueError, match="unknown variants"):
        run_domainvqa(tmp_path, small=True, domains=["satellite"], variants=["everything"])


def test_cli_registers_eval(capsys):
    from kira.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["eval", "domainvqa", "--help"])
    assert exc.value.code == 0
    assert "--small" in capsys.readouterr().out


@pytest.mark.parametrize("stack", [pytest.param("fake", id="fake-stack"),
                                   pytest.param("default", id="default-stack", marks=pytest.mark.slow)])
def test_adapted_full_system_is_reported(tmp_path, stack):
    """With adaptation on, the full system is asked again with the trained head installed,
    and the tables carry it as its own row and per-domain table."""
    pytest.importorskip("torch", reason=TORCH)
    summary = run_domainvqa(tmp_path, small=True, domains=["xray"], variants=["full"], seed=0, adapt=True,
                            planted=False, figures=False, adapt_epochs=3,
                            models=FakeStack() if stack == "fake" else None)
    data = json.loads((tmp_path / "results.json").read_text())
    assert set(data["variants"]) == {"full", "full_adapted"}
    records = data["questions"]["xray"]
    plain = {r["qid"]: r["ranked"] for r in records if r["variant"] == "full"}
    adapted = {r["qid"]: r["ranked"] for r in records if r["variant"] == "full_adapted"}
    assert set(plain) == set(adapted) and len(adapted) == 12
    # the head re-projects the visual index, so some rankings move
    assert any(plain[q] != adapted[q] for q in plain)
    assert "adapted_recall@1" in data["adaptation"]["xray"]
    tables = (tmp_path / "tables.md").read_text()
    assert "| Full Kira + domain adapter |" in tables and "Table 2b: Full Kira + domain adapter per domain" in tables
    assert summary.results["variants"]["full_adapted"]["precision@5"] == pytest.approx(
        data["domains"]["xray"]["full_adapted"]["precision@5"])
