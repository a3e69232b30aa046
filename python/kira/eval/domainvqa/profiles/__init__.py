"""DomainVQA-R's four domain profiles: the benchmark's own knowledge, passed to kira as user data.

Each ``<domain>.toml`` holds the domain's captioner prompt, question words and position
axes; ``_reports.toml`` the report conventions its captions share (bookkeeping, heads,
identifiers, comparison and change words); the concept bank is the one each domain's
builder defines (`DomainDataset.concept_bank`). `load_profile` merges them.
"""

from __future__ import annotations

from pathlib import Path

from kira.profile import DomainProfile, _toml

HERE = Path(__file__).parent
DOMAIN_FILES = {"xray": "xray.toml", "circuits": "circuits.toml", "satellite": "satellite.toml",
                "histopathology": "histopathology.toml"}


def load_profile(domain: str, concepts: tuple[str, ...] = ()) -> DomainProfile:
    """The `DomainProfile` of one DomainVQA-R domain, with `concepts` as its concept bank.
    Raises ValueError for an unknown domain."""
    if domain not in DOMAIN_FILES:
        raise ValueError(f"unknown DomainVQA-R domain {domain!r}; choose from {sorted(DOMAIN_FILES)}")
    toml = _toml()
    shared = toml.loads((HERE / "_reports.toml").read_text(encoding="utf-8"))
    own = toml.loads((HERE / DOMAIN_FILES[domain]).read_text(encoding="utf-8"))
    return DomainProfile.from_dict({**shared, **own, "concepts": list(concepts)})
