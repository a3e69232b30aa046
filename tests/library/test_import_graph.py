"""kira's import graph: no circle between its subpackages, and backends import nothing above them.

The graph is read from the source (ast), module-level and function-level imports alike: an import
inside a function is the same dependency, only later. A node is one of kira's subpackages
(``kira.knowledge_base``, ``kira.pipeline``, ...) or one of its top-level modules (``kira.cli``,
``kira.images``, ...); an import inside one node is not an edge.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "python"

BACKENDS = ("kira.knowledge_base.embedded", "kira.knowledge_base.milvus", "kira.backends")
"""Storage backends and the vector-index seam: the bottom of the knowledge-base wing."""

ABOVE_BACKENDS = ("kira.pipeline", "kira.query_state", "kira.retrieval", "kira.multihop", "kira.grounding",
                  "kira.reasoning", "kira.serve", "kira.cli", "kira.cli_ingest", "kira.cli_opening", "kira.eval",
                  "kira.explain", "kira.visual_rag", "kira.demo", "kira.ray_ingest", "kira.adapt",
                  "kira.knowledge_base.kb", "kira.knowledge_base.kb_reads", "kira.knowledge_base.opening",
                  "kira.knowledge_base.check", "kira.knowledge_base.ingest", "kira.knowledge_base.writing",
                  "kira.knowledge_base.views", "kira.knowledge_base.adaptation", "kira.knowledge_base.pieces",
                  "kira.knowledge_base.kb_fewshot")
"""What a backend may never import: the stages and applications above the knowledge base, and the knowledge
base that composes a backend (it hands a backend typed batches and reads typed rows: kira.knowledge_base.batch,
kira.knowledge_base.rows, kira.knowledge_base.storage)."""


def _modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's __init__) of every module under root/kira."""
    out = {}
    for file in (root / "kira").rglob("*.py"):
        parts = list(file.relative_to(root).with_suffix("").parts)
        package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if package else parts)] = (file, package)
    return out


def _known(name: str, modules: dict) -> str:
    """The module `name` names: itself, or (``kira.x.y.Thing``) the longest module it starts with."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def import_edges(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the kira modules it imports anywhere in its file (module level and inside functions)."""
    modules = _modules(root)
    edges: dict[str, set[str]] = defaultdict(set)
    for name, (file, package) in modules.items():
        here = name if package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"), str(file))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
            for target in targets:
                if target == "kira" or target.startswith("kira."):
                    found = _known(target, modules)
                    if found and found != "kira" and found != name:
                        edges[name].add(found)
    return edges


def node_of(module: str) -> str:
    """The graph node of `module`: ``kira.<first part>`` (a subpackage, or a top-level module)."""
    return ".".join(module.split(".")[:2])


def package_graph(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for source, targets in edges.items():
        for target in targets:
            if node_of(source) != node_of(target):
                graph[node_of(source)].add(node_of(target))
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(set(graph) | {t for ts in graph.values() for t in ts}):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


@pytest.fixture(scope="module")
def edges() -> dict[str, set[str]]:
    return import_edges()


def test_the_graph_is_read_from_module_and_function_level_imports(edges):
    assert "kira.knowledge_base.kb" in edges["kira.knowledge_base"]  # the package's own __init__ import
    assert "kira.knowledge_base.ingest" in edges["kira.knowledge_base.kb"]  # inside `KnowledgeBase.ingest`
    assert "kira.images" in edges["kira.knowledge_base.writing"]  # at module level
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_circle_between_kiras_subpackages(edges):
    graph = package_graph(edges)
    assert "kira.knowledge_base" in graph and "kira.pipeline" in graph  # the graph is not empty
    found = circles(graph)
    detail = [[f"{a} -> {b} ({sorted(t for s, ts in edges.items() if node_of(s) == a for t in ts if node_of(t) == b)})"
               for a in c for b in graph[a] if b in c] for c in found]
    assert found == [], f"import circles between subpackages: {detail}"


def test_the_knowledge_base_never_imports_the_stages_above_it(edges):
    stages = ("kira.pipeline", "kira.query_state", "kira.retrieval", "kira.multihop", "kira.grounding", "kira.reasoning",
              "kira.serve", "kira.eval", "kira.explain")
    wrong = sorted((s, t) for s, ts in edges.items() if node_of(s) == "kira.knowledge_base" for t in ts
                   if t.startswith(stages))
    assert wrong == [], f"stage 1 imports a later stage: {wrong}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_backend_imports_nothing_above_it(edges, backend):
    mine = [s for s in edges if s == backend or s.startswith(backend + ".")]
    assert mine, f"no modules under {backend}"
    wrong = sorted((s, t) for s in mine for t in edges[s] if any(t == a or t.startswith(a + ".") for a in ABOVE_BACKENDS))
    assert wrong == [], f"{backend} imports what is above it: {wrong}"


def test_ray_ingestion_is_above_the_knowledge_base(edges):
    wrong = sorted((s, t) for s, ts in edges.items() if node_of(s) == "kira.knowledge_base" for t in ts
                   if node_of(t) == "kira.ray_ingest")
    assert wrong == [], f"the knowledge base imports Ray ingestion: {wrong}"
    assert any(node_of(t) == "kira.knowledge_base" for s, ts in edges.items() if node_of(s) == "kira.ray_ingest" for t in ts)


def test_no_module_circle_runs_through_the_knowledge_base_wing(edges):
    """Inside kira.knowledge_base and kira.ray_ingest, module by module: the composed knowledge base imports its
    backends and they never import it back, not even inside a function."""
    wing = ("kira.knowledge_base", "kira.ray_ingest", "kira.backends")
    graph = {s: {t for t in ts if t.startswith(wing)} for s, ts in edges.items() if s.startswith(wing)}
    assert circles(graph) == []
