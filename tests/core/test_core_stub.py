"""The compiled module is really there, and python/kira/_core.pyi describes it honestly."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import kira
from kira import _core

STUB = Path(kira.__file__).with_name("_core.pyi")


def _stub_names() -> dict[str, set[str]]:
    """Top-level names in the stub -> public member names (for classes)."""
    tree = ast.parse(STUB.read_text())
    names: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            members = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    members.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    members.add(item.target.id)
            names[node.name] = {m for m in members if not m.startswith("_")}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = set()
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = set()
    return names


def test_extension_is_compiled():
    assert Path(_core.__file__).suffix in {".so", ".pyd"}, "kira._core must be the compiled module"


def test_stub_lists_exactly_the_module_names():
    stub = _stub_names()
    module = {n for n in dir(_core) if not n.startswith("_")}
    assert set(stub) == module, f"only in stub: {set(stub) - module}; only in module: {module - set(stub)}"


def test_stub_lists_exactly_the_class_members():
    for name, members in _stub_names().items():
        obj = getattr(_core, name)
        if not inspect.isclass(obj):
            continue
        actual = {m for m, _ in inspect.getmembers(obj) if not m.startswith("_")}
        # members inherited from the registered base are listed on the base only
        for base in obj.__mro__[1:]:
            if base.__module__ == _core.__name__ and base.__name__ in _stub_names():
                actual -= {m for m, _ in inspect.getmembers(base) if not m.startswith("_")}
        assert members == actual, f"{name}: only in stub {members - actual}; only in module {actual - members}"


def test_every_binding_has_a_docstring():
    for name in dir(_core):
        if name.startswith("_"):
            continue
        obj = getattr(_core, name)
        assert (obj.__doc__ or "").strip(), f"kira._core.{name} has no docstring"
