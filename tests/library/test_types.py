"""kira's type annotations hold: mypy over python/kira, with the configuration in pyproject.toml.

The strict packages and the modules still checked leniently are listed in `[tool.mypy]`; this
test runs mypy in-process and fails with mypy's report. mypy's cache lives under the temporary
folder, so a second run in the same place takes about a second instead of about twenty CPU seconds.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api", reason="the type check needs mypy: pip install '.[test]'")


def _repository_root() -> Path:
    """The folder holding pyproject.toml above this file (tests may live in a subfolder)."""
    for folder in Path(__file__).resolve().parents:
        if (folder / "pyproject.toml").is_file() and (folder / "python" / "kira").is_dir():
            return folder
    raise FileNotFoundError("no pyproject.toml with python/kira above tests/library/test_types.py")


def test_mypy_finds_no_errors_in_kira():
    root = _repository_root()
    cache = Path(tempfile.gettempdir()) / "kira-mypy-cache"
    stdout, stderr, status = mypy_api.run([
        "--config-file", str(root / "pyproject.toml"),
        "--cache-dir", str(cache),
        str(root / "python" / "kira"),
    ])
    assert status == 0, f"mypy found type errors (fix them, or see [tool.mypy] in pyproject.toml):\n{stdout}{stderr}"
    assert "Success: no issues found" in stdout, stdout + stderr
    # an override naming a package that moved would quietly stop checking it strictly
    assert "unused section" not in stdout + stderr, f"[tool.mypy] names modules that do not exist:\n{stdout}{stderr}"


def test_count_any_counts_each_spelling_per_package_and_skips_comments(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("count_any", _repository_root() / "tools" / "count_any.py")
    count_any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(count_any)
    root = tmp_path / "kira"
    (root / "stage").mkdir(parents=True)
    (root / "top.py").write_text("def f(x: Any) -> Any:  # x: Any in a comment\n    return x\n")
    (root / "stage" / "a.py").write_text("rows: dict[str, Any] = {}\nAnyThing: int = 1\nn: Anyhow = 2\n")
    counts = count_any.count_any(root)
    assert dict(counts["(top level)"]) == {": Any": 1, "-> Any": 1, "Any]": 0}
    assert dict(counts["stage"]) == {": Any": 0, "-> Any": 0, "Any]": 1}
    assert count_any.table(counts).splitlines()[-1] == "| **all** | 1 | 1 | 1 | 3 |"
