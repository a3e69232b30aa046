"""The benchmark's PNG figures (matplotlib Agg): cross-domain heatmap, recall@k curves per
variant, component-contribution bars, grounding-score distribution, hop confidence, and
the adapters' training curves."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from kira.eval.figures import atomic_savefig, pyplot
from kira.eval.metrics import RECALL_KS


def write_figures(out_dir: Path, results: dict[str, Any], runs: Sequence[Any], variants: Sequence[str]) -> list[Path]:
    """Write every figure into `out_dir`; returns the paths written."""
    from kira.eval.runner import VARIANT_TITLES
    from kira.eval.tables import SHORT

    plt = pyplot()
    out_dir = Path(out_dir)
    written: list[Path] = []
    domains = list(results["domains"])
    last = variants[-1]
    metrics = ("precision@5", "recall@1", "recall@5", "recall@10", "faithfulness", "domain_correctness", "grounding",
               "completeness")
    # 1. cross-domain heatmap of the full system
    grid = np.array([[results["domains"][d][last].get(m) if results["domains"][d][last].get(m) is not None
                      else np.nan for m in metrics] for d in domains], dtype=float)
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(domains) + 1.6))
    im = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(metrics)), [SHORT[m] for m in metrics])
    ax.set_yticks(range(len(domains)), domains)
    for i in range(len(domains)):
        for j in range(len(metrics)):
            if not np.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center",
                        color="white" if grid[i, j] < 0.6 else "black", fontsize=8)
    fig.colorbar(im, ax=ax)
    ax.set_title(f"DomainVQA-R: {VARIANT_TITLES.get(last, last)} per domain")
    fig.tight_layout()
    written.append(atomic_savefig(fig, out_dir / "cross_domain_heatmap.png"))
    plt.close(fig)
    # 2. recall@k curves per variant (averaged over domains)
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for v in variants:
        ys = [results["variants"][v].get(f"recall@{k}") for k in RECALL_KS]
        ax.plot(RECALL_KS, [np.nan if y is None else y for y in ys], marker="o", label=VARIANT_TITLES.get(v, v))
    ax.set_xlabel("k")
    ax.set_ylabel("recall@k (capped), mean over domains")
    ax.set_xticks(RECALL_KS)
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8)
    ax.set_title("Recall@k per variant")
    fig.tight_layout()
    written.append(atomic_savefig(fig, out_dir / "recall_at_k.png"))
    plt.close(fig)
    # 3. component contributions: change from the previous variant
    shown = ("precision@5", "recall@5", "domain_correctness", "faithfulness")
    fig, ax = plt.subplots(figsize=(7.5, 4))
    width = 0.8 / len(shown)
    xs = np.arange(1, len(variants))
    for i, m in enumerate(shown):
        deltas = []
        for a, b in zip(variants[:-1], variants[1:]):
            va, vb = results["variants"][a].get(m), results["variants"][b].get(m)
            deltas.append(np.nan if va is None or vb is None else vb - va)
        ax.bar(xs + (i - len(shown) / 2 + 0.5) * width, deltas, width, label=SHORT[m])
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(xs, [VARIANT_TITLES.get(v, v) for v in variants[1:]], rotation=20, fontsize=8)
    ax.set_ylabel("change vs previous variant")
    ax.legend(fontsize=8)
    ax.set_title("Component contributions (mean over domains)")
    fig.tight_layout()
    written.append(atomic_savefig(fig, out_dir / "component_contributions.png"))
    plt.close(fig)
    # 4. grounding-score distribution of verified claims
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for v in variants:
        vals = [g for run in runs for g in run.grounding_values.get(v, [])]
        if vals:
            ax.hist(vals, bins=20, range=(0, 1), alpha=0.5, label=f"{VARIANT_TITLES.get(v, v)} (n={len(vals)})")
    ax.axvline(0.3, color="red", linestyle="--", label="flag threshold 0.3")
    ax.set_xlabel("claim grounding score s")
    ax.set_ylabel("claims")
    ax.legend(fontsize=8)
    ax.set_title("Grounding-score distribution")
    fig.tight_layout()
    written.append(atomic_savefig(fig, out_dir / "grounding_distribution.png"))
    plt.close(fig)
    # 5. hop confidence by hop index
    per_hop: dict[int, list[float]] = {}
    for run in runs:
        for rec in run.records:
            if rec.variant == last:
                for i, c in enumerate(rec.hop_confidences, start=1):
                    per_hop.setdefault(i, []).append(c)
    fig, ax = plt.subplots(figsize=(5.5, 4))
    if per_hop:
        keys = sorted(per_hop)
        ax.boxplot([per_hop[k] for k in keys])
        ax.set_xticks(range(1, len(keys) + 1), [f"hop {k} (n={len(per_hop[k])})" for k in keys])
    ax.axhline(0.85, color="red", linestyle="--", label="stop at 0.85")
    ax.set_ylabel("hop confidence")
    ax.legend(fontsize=8)
    ax.set_title(f"Hop confidence ({VARIANT_TITLES.get(last, last)})")
    fig.tight_layout()
    written.append(atomic_savefig(fig, out_dir / "hop_confidence.png"))
    plt.close(fig)
    # 6. adapter training curves per domain
    from kira.adapt.projection import TrainingHistory, plot_training_curves

    for name, a in (results.get("adaptation") or {}).items():
        hist = a.get("history")
        if hist:
            h = TrainingHistory(list(hist["loss"]), list(hist["train_recall@1"]), list(hist["val_recall@1"]))
            path = out_dir / f"adapter_curves_{name}.png"
            plot_training_curves(h, str(path), title=f"{name} projection head")
            written.append(path)
    return written
