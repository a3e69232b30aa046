"""The paper's tables as markdown from a results dict (see kira.eval.runner.aggregate)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

TABLE_METRICS = ("precision@5", "recall@1", "recall@5", "recall@10", "faithfulness", "domain_correctness",
                 "grounding", "completeness")
SHORT = {"precision@5": "RP@5", "recall@1": "R@1", "recall@3": "R@3", "recall@5": "R@5", "recall@10": "R@10",
         "faithfulness": "RF", "domain_correctness": "DC", "grounding": "GS", "completeness": "EC"}


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    return "–" if v != v else f"{v:.3f}"


def _ci(ci: Any) -> str:
    if not ci or ci[0] is None or ci[0] != ci[0]:
        return ""
    return f" [{ci[0]:.2f}, {ci[1]:.2f}]"


def render_tables(results: dict[str, Any], variants: Sequence[str]) -> str:
    """Tables 1 to 6 (plus planted claims and adaptation) as one markdown document.

    `variants` are the ablation's variants in order, optionally followed by ADAPTED (the
    last one with the domain adapter); Table 2 is given for the last ablation variant and,
    when present, for ADAPTED.
    """
    from kira.eval.runner import ADAPTED, PAPER, VARIANT_TITLES

    lines: list[str] = ["# DomainVQA-R results", ""]
    n_q = {d: s["questions"] for d, s in results.get("dataset", {}).get("domains", {}).items()}
    lines.append(f"Seed {results.get('seed')}; questions per domain: {n_q}; "
                 "95% bootstrap confidence intervals in brackets. RP@5 = retrieval precision@5, R@k = recall@k "
                 "(capped), RF = reasoning faithfulness, DC = domain correctness (token F1), GS = grounding score, "
                 "EC = explainability completeness.")
    lines.append("")
    header = "| Variant | " + " | ".join(SHORT[m] for m in TABLE_METRICS) + " |"
    rule = "|---" * (len(TABLE_METRICS) + 1) + "|"
    lines += ["## Table 1: ablation, averaged over domains", "", header, rule]
    ci_all = results.get("intervals", {}).get("variants", {})
    for v in variants:
        row = results["variants"].get(v, {})
        cells = [_fmt(row.get(m)) + _ci(ci_all.get(v, {}).get(m)) for m in TABLE_METRICS]
        lines.append(f"| {VARIANT_TITLES.get(v, v)} | " + " | ".join(cells) + " |")
        paper = PAPER.get(v)
        if paper:
            lines.append(f"| *paper: {VARIANT_TITLES.get(v, v)}* | "
                         + " | ".join(_fmt(paper.get(m)) if m in paper else "" for m in TABLE_METRICS) + " |")
    lines.append("")
    ablation = [v for v in variants if v != ADAPTED]
    last = ablation[-1] if ablation else variants[-1]
    per_domain = [last] + ([ADAPTED] if ADAPTED in variants and last != ADAPTED else [])
    for letter, shown in zip(("", "b"), per_domain):
        lines += [f"## Table 2{letter}: {VARIANT_TITLES.get(shown, shown)} per domain", "",
                  header.replace("Variant", "Domain"), rule]
        for domain, per_variant in results["domains"].items():
            row = per_variant.get(shown, {})
            ci = results.get("intervals", {}).get("domains", {}).get(domain, {}).get(shown, {})
            lines.append(f"| {domain} | " + " | ".join(_fmt(row.get(m)) + _ci(ci.get(m)) for m in TABLE_METRICS)
                         + " |")
        lines.append("")
    for number, (domain, per_variant) in enumerate(results["domains"].items(), start=3):
        lines += [f"## Table {number}: ablation on {domain}", "", header, rule]
        for v in variants:
            row = per_variant.get(v, {})
            lines.append(f"| {VARIANT_TITLES.get(v, v)} | " + " | ".join(_fmt(row.get(m)) for m in TABLE_METRICS)
                         + " |")
        for shown in per_domain:
            kinds = results.get("per_kind", {}).get(domain, {}).get(shown, {})
            if kinds:
                lines += ["", f"{VARIANT_TITLES.get(shown, shown)} by question kind: " + "; ".join(
                    f"{k}: RP@5 {_fmt(m.get('precision@5'))}, R@5 {_fmt(m.get('recall@5'))}, "
                    f"DC {_fmt(m.get('domain_correctness'))}" for k, m in kinds.items())]
        lines.append("")
    lines += _ceiling_table(results, per_domain)
    planted = results.get("planted") or {}
    if planted:
        lines += ["## Verifier: planted unsupported claims", "",
                  "| Domain | planted | flagged | rate | supported | flagged | rate |", "|---|---|---|---|---|---|---|"]
        for domain, rep in planted.get("domains", {}).items():
            lines.append(f"| {domain} | {rep['planted']} | {rep['planted_flagged']} | {_fmt(rep['planted_flag_rate'])} "
                         f"| {rep['supported']} | {rep['supported_flagged']} | {_fmt(rep['supported_flag_rate'])} |")
        lines.append(f"| all | {planted['planted']} | {planted['planted_flagged']} | "
                     f"{_fmt(planted['planted_flag_rate'])} | {planted['supported']} | {planted['supported_flagged']} "
                     f"| {_fmt(planted['supported_flag_rate'])} |")
        lines.append("")
    adaptation = results.get("adaptation") or {}
    if adaptation:
        lines += ["## Domain adaptation (held-out documents, recall@1)", "",
                  "| Domain | frozen | projection head | ProtoNet 5-shot (proto acc.) | frozen 5-shot (proto acc.) "
                  "| feedback: failures / triplets / improved | full + adapter RP@5 | full + adapter DC |",
                  "|---|---|---|---|---|---|---|---|"]
        for domain, a in adaptation.items():
            fb = a.get("feedback", {})
            adapted = results["domains"].get(domain, {}).get(ADAPTED, {})
            lines.append(
                f"| {domain} | {_fmt(a.get('frozen_recall@1'))} | {_fmt(a.get('adapted_recall@1'))} | "
                f"{_fmt(a.get('protonet_accuracy'))} | {_fmt(a.get('frozen_prototype_accuracy'))} | "
                f"{fb.get('failures', '–')} / {fb.get('triplets', '–')} / {fb.get('improved', '–')} | "
                f"{_fmt(adapted.get('precision@5'))} | {_fmt(adapted.get('domain_correctness'))} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def _ceiling_table(results: dict[str, Any], shown: Sequence[str]) -> list[str]:
    """DC against what an answer from the relevant documents' own text can reach (kira.eval.ceiling)."""
    from kira.eval.runner import VARIANT_TITLES

    ceiling = results.get("ceiling") or {}
    if not ceiling:
        return []
    lines = ["## Domain correctness against its ceiling", "",
             "DC of an answer built only from the relevant documents' captions and tags: the clause oracle "
             "picks up to four whole clauses knowing the reference; the token bound keeps every reference word the "
             "text contains (kira.eval.ceiling).", "",
             "| Domain | kind | " + " | ".join(f"{VARIANT_TITLES.get(v, v)} DC" for v in shown)
             + " | clause oracle | token bound |", "|---" * (len(shown) + 4) + "|"]
    for domain, kinds in ceiling.items():
        for kind, bounds in kinds.items():
            if kind == "all":
                ours = [results["domains"].get(domain, {}).get(v, {}).get("domain_correctness") for v in shown]
            else:
                ours = [results.get("per_kind", {}).get(domain, {}).get(v, {}).get(kind, {}).get("domain_correctness")
                        for v in shown]
            lines.append(f"| {domain} | {kind} | " + " | ".join(_fmt(x) for x in ours)
                         + f" | {_fmt(bounds['clause_oracle'])} | {_fmt(bounds['token_bound'])} |")
    mean = [results["variants"].get(v, {}).get("domain_correctness") for v in shown]
    oracle = [k["all"]["clause_oracle"] for k in ceiling.values()]
    bound = [k["all"]["token_bound"] for k in ceiling.values()]
    lines.append("| mean | all | " + " | ".join(_fmt(x) for x in mean)
                 + f" | {_fmt(sum(oracle) / len(oracle))} | {_fmt(sum(bound) / len(bound))} |")
    return lines + [""]


def write_tables(path: str | os.PathLike[str], results: dict[str, Any], variants: Sequence[str]) -> Path:
    """Write `render_tables` atomically to `path`."""
    from kira.atomic import write_text_atomic

    return write_text_atomic(path, render_tables(results, variants))
