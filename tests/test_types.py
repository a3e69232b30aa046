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
    raise FileNotFoundError("no pyproject.toml with python/kira above tests/test_types.py")


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
