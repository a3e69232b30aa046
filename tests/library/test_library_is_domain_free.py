"""The library holds no domain knowledge: no benchmark domain's words in python/kira outside its own package.

Domain vocabulary, concept banks, prompts and caption formats are the user's data (a
`kira.DomainProfile`). DomainVQA-R's live in kira/eval (its profiles beside its builder);
the demo's captions are the demo's data (kira/demo.py). Everything else is scanned,
docstrings and comments included: an example is where a reader learns what kira is for.
"""

from __future__ import annotations

import re
from pathlib import Path

import kira

BENCHMARK_WORDS = (
    "pneumonia", "cardiomegaly", "effusion", "pneumothorax", "atelectasis", "radiograph", "x-ray", "xray",
    "chest", "lung", "lobe", "consolidation", "op-amp", "amplifier", "resistor", "capacitor",
    "schematic", "shoreline", "satellite", "deforestation", "farmland", "carcinoma", "adenocarcinoma", "tumour",
    "tumor", "gleason", "histopath", "stroma", "mitotic", "patient", "slide",
)
"""DomainVQA-R's domains (chest x-ray, circuits, remote sensing, histopathology) in the words its data uses."""

ALLOWED = ("eval", "demo.py")


def _library_files() -> list[Path]:
    root = Path(kira.__file__).parent
    return [p for p in root.rglob("*.py") if p.relative_to(root).parts[0] not in ALLOWED]


def test_no_benchmark_domain_word_appears_in_the_library():
    pattern = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in BENCHMARK_WORDS) + r")\w*", re.I)
    found = []
    for path in _library_files():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for match in pattern.finditer(line):
                found.append(f"{path.name}:{n}: {match.group(0)}")
    assert not found, "domain words in library code (move them into a DomainProfile):\n" + "\n".join(found[:40])


def test_the_scan_sees_the_library_and_would_catch_a_word(tmp_path):
    files = _library_files()
    assert any(p.name == "kira.py" for p in files) and any(p.name == "template_generator.py" for p in files)
    assert not any("eval" in p.parts for p in files)
    pattern = re.compile(r"\b(?:" + "|".join(BENCHMARK_WORDS) + r")\w*", re.I)
    assert pattern.search("a pleural Effusion on the left") and not pattern.search("an orange cat")
