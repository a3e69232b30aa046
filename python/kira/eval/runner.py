"""Run DomainVQA-R: one knowledge base per domain, the six-variant ablation, metrics,
results.json, the paper's tables (markdown) and figures (PNG).

`run_domainvqa(out_dir, ...)` is what `kira eval domainvqa` calls. Per domain it builds
a knowledge base with `kira.KnowledgeBase` from the documents (image, the user's
caption and tags, and the temporal / multiview groups; never the ground-truth label),
asks every question once per variant with `kira.Kira.ask(..., variant=v)`, scores it
(kira.eval.metrics), then trains the domain adapter on the knowledge base's raw image
features and measures it, runs the feedback loop on the full system's failures, and
plants unsupported claims into the full system's answers to measure the verifier.
"""

from __future__ import annotations

import logging
import os
import platform
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from kira.config import KiraConfig
from kira.eval.dataset import DOMAINS, DomainDataset, Question, build_domainvqa
from kira.eval.metrics import (METRIC_NAMES, RECALL_KS, bootstrap_ci, bootstrap_mean_of_means, ranked_unique,
                               score_question)

log = logging.getLogger(__name__)

VARIANT_NAMES = ("visual_only", "dual_path", "query_expansion", "multi_hop", "grounded", "full")
# The last variant run again with the domain adapter (a projection head trained on the
# knowledge base's documents) installed in the knowledge base: KIRA's stage 2 switched on.
ADAPTED = "full_adapted"
VARIANT_TITLES = {
    "visual_only": "Visual only", "dual_path": "+ Dual path", "query_expansion": "+ Query expansion",
    "multi_hop": "+ Multi-hop", "grounded": "+ Grounded", "full": "Full Kira",
    ADAPTED: "Full Kira + domain adapter",
}
# The KIRA paper's reported figures (averaged over its four domains) that the tables sit next to.
PAPER = {
    "full": {"precision@5": 0.970, "recall@5": 0.727, "domain_correctness": 0.707, "grounding": 1.0},
    "visual_only": {"precision@5": 0.970},
    "dual_path": {"precision@5": 0.683},
    "multi_hop": {"domain_correctness": 0.961},
    "grounded": {"domain_correctness": 0.707},
}
TOP_K = 10  # evidence items asked for, so recall@10 can be measured from the evidence pack
BOOTSTRAP_RESAMPLES = 2000


@dataclass
class QuestionRecord:
    """One (question, variant) answer with its scores."""

    qid: str
    kind: str
    variant: str
    scores: dict[str, float]
    ranked: list[str]
    answer: str
    flagged: int
    seconds: float
    hop_confidences: list[float] = field(default_factory=list)


@dataclass
class DomainRun:
    """Everything measured on one domain."""

    name: str
    records: list[QuestionRecord]
    adaptation: dict[str, Any]
    planted: dict[str, Any]
    seconds: dict[str, float]
    grounding_values: dict[str, list[float]]


def _groups(ds: DomainDataset) -> tuple[dict[str, tuple[str, float]], dict[str, tuple[str, float]]]:
    sequence: dict[str, tuple[str, float]] = {}
    view: dict[str, tuple[str, float]] = {}
    for g in ds.temporal_groups:
        for i, doc_id in enumerate(g):
            sequence[doc_id] = (f"{g[0]}/sequence", float(i))
    for g in ds.multiview_groups:
        for i, doc_id in enumerate(g):
            view[doc_id] = (f"{g[0]}/views", float(i))
    return sequence, view


def build_knowledge_base(ds: DomainDataset, path: Path, *, config: KiraConfig, models: Any) -> Any:
    """A KnowledgeBase at `path` holding the domain's documents: image, caption, tags and groups.

    The ground-truth label and attributes are not stored; only the group (patient, design,
    tile, slide) goes into the metadata, as a user's archive would have it.
    """
    import kira

    from kira.eval.domainvqa.profiles import load_profile

    kb = kira.KnowledgeBase.create(path, config, models=models, profile=load_profile(ds.name, ds.concept_bank))
    sequence, view = _groups(ds)
    for doc in ds.documents:
        kb.add_image(doc.image, doc_id=doc.doc_id, caption=doc.caption, tags=doc.tags,
                     metadata={"group": doc.group or ""}, sequence=sequence.get(doc.doc_id),
                     view=view.get(doc.doc_id))
    kb.commit()
    return kb


def _hop_confidences(result: Any) -> list[float]:
    out = []
    for hop in result.trace.get("hops") or []:
        value = hop.get("confidence") if isinstance(hop, dict) else getattr(hop, "confidence", None)
        if value is not None:
            out.append(float(value))
    return out


def _retrieved(pack: Any) -> list[str]:
    """The documents retrieval handed to reasoning, best first: the subject's evidence and, after it, the
    similar cases (the subject stage splits one retrieved list in two for the answer, not for retrieval)."""
    return ranked_unique(item.doc_id for item in (*pack.items, *pack.similar))


def _score(q: Question, ds: DomainDataset, result: Any, subject: dict[str, tuple[str, ...]]) -> dict[str, float]:
    pack = result.evidence
    ranked = _retrieved(pack)
    cited = []
    for n in result.answer.citations:
        try:
            cited.append(pack.by_number(n).summary)
        except KeyError:
            pass
    scores = score_question(
        ranked=ranked, needed=q.relevant_doc_ids, subject=subject[q.label], answer_text=result.answer.text,
        reference=q.answer, cited_evidence=cited, grounding=result.answer.grounding,
        completeness=result.card.completeness())
    return scores.as_dict()


def _ask_all(engine: Any, ds: DomainDataset, variant: str, subject: dict[str, tuple[str, ...]],
             records: list[QuestionRecord], grounding_values: dict[str, list[float]], *,
             label: str | None = None) -> list[tuple[Question, Any]]:
    """Ask every question of `ds` in `variant`; append one QuestionRecord each (variant
    recorded as `label`, default the variant) and the claims' grounding scores; return the
    (question, result) pairs."""
    label = label or variant
    answered = []
    for q in ds.questions:
        start = time.perf_counter()
        result = engine.ask(q.text, image=q.query_image, top_k=TOP_K, variant=variant)
        elapsed = time.perf_counter() - start
        records.append(QuestionRecord(
            q.qid, q.kind, label, _score(q, ds, result, subject), _retrieved(result.evidence),
            result.answer.text, len(result.answer.flagged), elapsed, _hop_confidences(result)))
        grounding_values.setdefault(label, []).extend(
            c.grounding for c in result.answer.claims if c.grounding is not None)
        answered.append((q, result))
    log.info("%s/%s: %d questions", ds.name, label, len(ds.questions))
    return answered


def run_domain(ds: DomainDataset, workdir: Path, *, variants: Sequence[str], config: KiraConfig, models: Any,
               seed: int, adapt: bool = True, planted: bool = True, adapt_epochs: int | None = None) -> DomainRun:
    """Build the domain's knowledge base, ask every question in every variant, adapt and ask
    again in the last variant with the adapter installed (recorded as ADAPTED), plant claims."""
    import kira

    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    kb = build_knowledge_base(ds, workdir / ds.name, config=config, models=models)
    seconds["ingest"] = time.perf_counter() - t0
    subject = {lab: tuple(d.doc_id for d in ds.documents if d.label == lab) for lab in ds.labels}
    engine = kira.Kira(kb)  # answers with the domain's profile, stored with the knowledge base
    records: list[QuestionRecord] = []
    grounding_values: dict[str, list[float]] = {}
    full_results: list[tuple[Question, Any]] = []
    t1 = time.perf_counter()
    for variant in variants:
        full_results = _ask_all(engine, ds, variant, subject, records, grounding_values)
    seconds["ask"] = time.perf_counter() - t1
    adaptation: dict[str, Any] = {}
    if adapt:
        t2 = time.perf_counter()
        from kira.eval.adaptation import evaluate_adaptation

        adaptation, head = evaluate_adaptation(ds, records, full_results, models=models, config=config, seed=seed,
                                               epochs=adapt_epochs, variant=variants[-1])
        kb.set_adapter(head)
        try:
            _ask_all(engine, ds, variants[-1], subject, records, grounding_values, label=ADAPTED)
        finally:
            kb.set_adapter(None)
        seconds["adapt"] = time.perf_counter() - t2
    planted_report: dict[str, Any] = {}
    if planted:
        t3 = time.perf_counter()
        from kira.eval.planted import planted_claims_check

        planted_report = planted_claims_check(ds, full_results, engine.verifier, seed=seed).as_dict()
        seconds["planted"] = time.perf_counter() - t3
    kb.close()
    return DomainRun(ds.name, records, adaptation, planted_report, seconds, grounding_values)


def aggregate(runs: Sequence[DomainRun], variants: Sequence[str], seed: int) -> dict[str, Any]:
    """Per-domain and domain-averaged means with BCa bootstrap 95% CIs, per variant and metric
    (the averaged CI is stratified: each domain's questions resampled on their own)."""
    domains: dict[str, dict[str, dict[str, float]]] = {}
    domain_ci: dict[str, dict[str, dict[str, list[float]]]] = {}
    per_kind: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    averaged: dict[str, dict[str, float]] = {}
    averaged_ci: dict[str, dict[str, list[float]]] = {}
    for v in variants:
        averaged[v], averaged_ci[v] = {}, {}
        for metric in METRIC_NAMES:
            groups, means = [], []
            for run in runs:
                vals = np.array([r.scores[metric] for r in run.records if r.variant == v], dtype=np.float64)
                est = bootstrap_ci(vals, resamples=BOOTSTRAP_RESAMPLES, seed=seed)
                domains.setdefault(run.name, {}).setdefault(v, {})[metric] = est.mean
                domain_ci.setdefault(run.name, {}).setdefault(v, {})[metric] = [est.low, est.high]
                if est.n:
                    means.append(est.mean)
                    groups.append(vals)
                for kind in ("retrieval", "visual", "multihop"):
                    kv = [r.scores[metric] for r in run.records if r.variant == v and r.kind == kind]
                    kv = [x for x in kv if not np.isnan(x)]
                    per_kind.setdefault(run.name, {}).setdefault(v, {}).setdefault(kind, {})[metric] = (
                        float(np.mean(kv)) if kv else float("nan"))
            if means:
                # stratified BCa: each domain resampled on its own, the mean of domain means
                avg = bootstrap_mean_of_means(groups, resamples=BOOTSTRAP_RESAMPLES, seed=seed)
                averaged[v][metric] = float(np.mean(means))
                averaged_ci[v][metric] = [avg.low, avg.high]
            else:
                averaged[v][metric] = float("nan")
                averaged_ci[v][metric] = [float("nan"), float("nan")]
    return {"variants": averaged, "domains": domains,
            "intervals": {"variants": averaged_ci, "domains": domain_ci}, "per_kind": per_kind}


def _clean(obj: Any) -> Any:
    """JSON-safe: NaN -> None, numpy scalars -> Python."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        return None if np.isnan(obj) else float(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def write_json_atomic(path: Path, data: Any) -> None:
    """`data` (numpy values made plain) as JSON, written atomically; NaN is refused."""
    from kira.atomic import write_json_atomic as write

    write(path, _clean(data), sort_keys=False, allow_nan=False)


@dataclass
class RunSummary:
    """Where a run wrote its outputs and its headline numbers."""

    out_dir: Path
    results: dict[str, Any]
    seconds: float


def run_domainvqa(
    out_dir: str | os.PathLike[str],
    *,
    small: bool = False,
    domains: Sequence[str] | None = None,
    variants: Sequence[str] | None = None,
    seed: int = 0,
    models: Any = None,
    config: KiraConfig | None = None,
    adapt: bool = True,
    planted: bool = True,
    figures: bool = True,
    adapt_epochs: int | None = None,
    workdir: str | os.PathLike[str] | None = None,
) -> RunSummary:
    """Run DomainVQA-R and write DIR/results.json, DIR/tables.md and DIR/figures/*.png.

    Parameters: `small` (CI size), `domains` (subset of DOMAINS), `variants` (subset of
    the six, run in ablation order), `seed`, `models` (a ModelStack; load_default() when
    None), `config` (KiraConfig()), `adapt` / `planted` / `figures` to skip those parts,
    `adapt_epochs` to shorten adapter training (None: the config's 50), `workdir` for
    the knowledge bases (a temporary directory, removed afterwards, when None).
    Returns RunSummary(out_dir, results, seconds).
    Raises ValueError for unknown domains or variants.
    """
    import shutil

    from kira.pipeline import VARIANTS

    out = Path(out_dir)
    chosen_variants = tuple(v for v in VARIANTS if variants is None or v in variants)
    unknown = set(variants or ()) - set(VARIANTS)
    if unknown:
        raise ValueError(f"unknown variants {sorted(unknown)}; choose from {list(VARIANTS)}")
    config = config or KiraConfig(seed=seed)
    started = time.perf_counter()
    if models is None:
        from kira.models import load_default

        models = load_default()
    t = time.perf_counter()
    datasets = build_domainvqa(seed=seed, small=small, domains=domains)
    build_seconds = time.perf_counter() - t
    own_workdir = workdir is None
    base = Path(tempfile.mkdtemp(prefix="kira-domainvqa-")) if workdir is None else Path(workdir)
    runs: list[DomainRun] = []
    try:
        for name, ds in datasets.items():
            log.info("DomainVQA-R: %s (%d documents, %d questions)", name, len(ds.documents), len(ds.questions))
            runs.append(run_domain(ds, base, variants=chosen_variants, config=config, models=models, seed=seed,
                                   adapt=adapt, planted=planted, adapt_epochs=adapt_epochs))
    finally:
        if own_workdir:
            shutil.rmtree(base, ignore_errors=True)
    reported = chosen_variants + ((ADAPTED,) if adapt and chosen_variants else ())
    results = aggregate(runs, reported, seed)
    results["config"] = config.to_dict()
    results["seed"] = seed
    results["dataset"] = {"small": small, "build_seconds": build_seconds,
                          "domains": {n: ds.summary() for n, ds in datasets.items()}}
    from kira.eval.ceiling import answer_ceiling

    results["ceiling"] = {n: answer_ceiling(ds) for n, ds in datasets.items()}
    results["adaptation"] = {r.name: r.adaptation for r in runs if r.adaptation}
    results["planted"] = _planted_totals([r.planted for r in runs if r.planted], [r.name for r in runs if r.planted])
    results["timing"] = {r.name: r.seconds for r in runs}
    results["models"] = {"notes": list(getattr(models, "notes", []) or []),
                         "providers": dict(getattr(models, "providers", {}) or {}),
                         "image_encoder": type(getattr(models, "image", None)).__name__}
    results["machine"] = {"platform": platform.platform(), "processor": platform.processor(),
                          "cpus": os.cpu_count()}
    results["questions"] = {r.name: [_clean(rec.__dict__) for rec in r.records] for r in runs}
    results["seconds"] = time.perf_counter() - started
    out.mkdir(parents=True, exist_ok=True)
    from kira.eval.tables import write_tables

    write_tables(out / "tables.md", results, reported)
    if figures:
        from kira.eval.plots import write_figures

        write_figures(out / "figures", results, runs, chosen_variants)
    results["seconds"] = time.perf_counter() - started
    write_json_atomic(out / "results.json", results)
    return RunSummary(out, results, results["seconds"])


def _planted_totals(reports: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    if not reports:
        return {}
    planted = sum(r["planted"] for r in reports)
    planted_flagged = sum(r["planted_flagged"] for r in reports)
    supported = sum(r["supported"] for r in reports)
    supported_flagged = sum(r["supported_flagged"] for r in reports)
    return {
        "planted": planted, "planted_flagged": planted_flagged,
        "planted_flag_rate": planted_flagged / planted if planted else float("nan"),
        "supported": supported, "supported_flagged": supported_flagged,
        "supported_flag_rate": supported_flagged / supported if supported else float("nan"),
        "domains": dict(zip(names, reports)),
    }


__all__ = ["ADAPTED", "DOMAINS", "RECALL_KS", "RunSummary", "VARIANT_NAMES", "build_knowledge_base", "run_domainvqa"]
