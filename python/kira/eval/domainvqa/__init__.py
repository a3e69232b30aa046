"""The DomainVQA-R builder: seeded procedural generators for four specialised image domains.

`build_domainvqa(seed, small, domains)` (in kira.eval.dataset) calls one generator per
domain; each returns a DomainDataset of documents (image, caption, label, compound
groups) and questions (retrieval, visual, multi-hop) with their relevant documents.
Run the benchmark with `python -m kira.eval.domainvqa --out DIR [--small]`.
"""

from __future__ import annotations

import importlib
from typing import Callable

from kira.eval.dataset import BuildSize, DomainDataset, build_domainvqa

__all__ = ["GENERATORS", "build_domainvqa"]


def _lazy(module: str) -> Callable[[int, BuildSize], DomainDataset]:
    def build(seed: int, size: BuildSize) -> DomainDataset:
        return importlib.import_module(f"kira.eval.domainvqa.{module}").build(seed, size)

    build.__name__ = f"build_{module}"
    build.__doc__ = f"Build the {module} domain (see kira.eval.domainvqa.{module})."
    return build


# domain name -> generator(seed, BuildSize) -> DomainDataset
GENERATORS: dict[str, Callable[[int, BuildSize], DomainDataset]] = {
    "xray": _lazy("xray"),
    "circuits": _lazy("circuits"),
    "satellite": _lazy("satellite"),
    "histopathology": _lazy("histopathology"),
}
