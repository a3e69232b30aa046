"""The library does not depend on the benchmark package: kira.adapt imports nothing from kira.eval (issue 32)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

import kira


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_adapt_imports_nothing_from_the_benchmark_package():
    root = Path(kira.__file__).parent / "adapt"
    offending = {p.name: sorted(m for m in _imported_modules(p) if m == "kira.eval" or m.startswith("kira.eval."))
                 for p in root.glob("*.py")}
    assert not {k: v for k, v in offending.items() if v}, offending


def test_training_curves_are_drawn_without_the_benchmark_package(tmp_path):
    from kira.adapt.projection import TrainingHistory, plot_training_curves

    history = TrainingHistory(loss=[0.5, 0.3, 0.2], train_recall_at_1=[0.6, 0.7, 0.8], val_recall_at_1=[0.5, 0.6, 0.6])
    out = tmp_path / "curves.png"
    plot_training_curves(history, str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob(".*.tmp")) and np.isfinite(history.loss).all()
