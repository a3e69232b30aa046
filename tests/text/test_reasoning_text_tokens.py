"""kira.text.tokens: Snowball stems make inflections of one word meet, and only those."""

from __future__ import annotations

import threading

import pytest

from kira.text.tokens import content_tokens, stem

PAIRS = [
    ("lesion", "lesions"), ("effusion", "effusions"), ("region", "regions"), ("mass", "masses"),
    ("opacity", "opacities"), ("nodule", "nodules"), ("study", "studies"), ("capacitor", "capacitors"),
    ("enlarged", "enlargement"), ("increase", "increasing"), ("compare", "compared"), ("change", "changes"),
]


@pytest.mark.parametrize("singular, plural", PAIRS)
def test_inflections_of_one_word_share_a_stem(singular, plural):
    assert stem(singular) == stem(plural)


@pytest.mark.parametrize("a, b", [("lesion", "less"), ("mass", "mast"), ("region", "regime"), ("left", "lift"),
                                  ("increase", "decrease"), ("stable", "unstable"), ("new", "news")])
def test_different_words_keep_different_stems(a, b):
    assert stem(a) != stem(b)


def test_numbers_and_short_tokens_are_kept_whole():
    assert [stem(t) for t in ("0.5", "3d", "12mm", "ct", "x")] == ["0.5", "3d", "12mm", "ct", "x"]


def test_content_tokens_then_stems_match_across_singular_and_plural_sentences():
    a = {stem(t) for t in content_tokens("The image shows two lesions and masses in both regions.")}
    b = {stem(t) for t in content_tokens("A lesion with a mass in one region.")}
    assert {"lesion", "mass", "region"} <= a & b


def test_stem_is_safe_across_threads():
    rng_words = [w for pair in PAIRS for w in pair] * 50
    want = [stem(w) for w in rng_words]
    stem.cache_clear()
    got: list[list[str]] = [[] for _ in range(4)]

    def work(i: int) -> None:
        got[i] = [stem(w) for w in rng_words]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(g == want for g in got)
