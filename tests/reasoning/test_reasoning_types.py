"""Evidence packs, claims, answers and citation parsing."""

from __future__ import annotations

import numpy as np
import pytest

from kira.reasoning.citations import find_citations, format_citation, parse_numbers, split_claims, split_sentences
from kira.reasoning.types import Answer, Claim, EvidenceItem, EvidencePack, strip_citation_marks


def _item(number: int = 1, **kw) -> EvidenceItem:
    base = dict(number=number, chunk_id=10 + number, doc_id=f"doc{number}", level="region", score=0.5,
                paths=("visual", "text"), summary="an orange cat indoors")
    base.update(kw)
    return EvidenceItem(**base)


def test_render_gives_the_ordered_blocks_a_generator_reads() -> None:
    pack = EvidencePack.from_items("q", [_item(summary="a cat\n on a mat"), _item(score=0.25, paths=())])
    assert pack.numbers == (1, 2)
    assert pack.render().splitlines() == [
        "[Evidence 1] (doc=doc1, level=region, score=0.500, paths=visual+text) a cat on a mat",
        "[Evidence 2] (doc=doc1, level=region, score=0.250, paths=-) an orange cat indoors",
    ]
    assert EvidencePack("q").render() == ""


def test_by_number_and_has() -> None:
    pack = EvidencePack("q", (_item(3), _item(5)))
    assert pack.by_number(5).chunk_id == 15 and pack.has(3) and not pack.has(1)
    with pytest.raises(KeyError, match="Evidence 4"):
        pack.by_number(4)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"number": -1}, "number"),
        ({"level": "page"}, "level"),
        ({"box": (5, 5, 1, 9)}, "box"),
        ({"box": (1, 2, 3)}, "box"),
        ({"thumbnail": np.zeros((4, 4), np.uint8)}, "thumbnail"),
        ({"thumbnail": np.zeros((4, 4, 3), np.float32)}, "thumbnail"),
    ],
)
def test_bad_items_are_refused_with_the_field_named(kw, message) -> None:
    with pytest.raises(ValueError, match=message):
        _item(**kw)


def test_duplicate_or_missing_numbers_are_refused() -> None:
    with pytest.raises(ValueError, match="unique"):
        EvidencePack("q", (_item(1), _item(1)))
    with pytest.raises(ValueError, match="from_items"):
        EvidencePack("q", (_item(0),))
    assert EvidencePack.from_items(None, [_item(0), _item(0)], dropped=[_item(0)]).numbers == (1, 2)


def test_items_with_thumbnails_and_provenance_compare_without_error() -> None:
    a = _item(thumbnail=np.zeros((4, 4, 3), np.uint8), provenance={"tags": ["cat"]})
    b = _item(thumbnail=np.ones((4, 4, 3), np.uint8), provenance={"tags": ["cat"]})
    assert a == b  # thumbnails don't take part in equality


def test_answer_citations_are_sorted_unique() -> None:
    answer = Answer("t", claims=(Claim("a", (3, 1)), Claim("b", (1, 2))))
    assert answer.citations == (1, 2, 3)


@pytest.mark.parametrize(
    ("inner", "numbers"),
    [("1", (1,)), ("1, 3", (1, 3)), ("1,3 and 4", (1, 3, 4)), ("2-4", (2, 3, 4)), ("3, 3, 1", (3, 1)), ("1 & 2", (1, 2))],
)
def test_parse_numbers(inner, numbers) -> None:
    assert parse_numbers(inner) == numbers


def test_parse_numbers_refuses_runaway_ranges() -> None:
    with pytest.raises(ValueError, match="range"):
        parse_numbers("1-1000")


def test_find_citations_in_all_forms() -> None:
    text = "A [Evidence 2]. B [evidence 1, 3][Evidence 4]. C [ Evidence 5 ] and [Evidence 2-3]."
    assert find_citations(text) == (2, 1, 3, 4, 5)
    assert find_citations("no citations (Evidence 2) here") == ()


def test_split_claims_attaches_trailing_markers_and_flags_unknown_numbers() -> None:
    text = "- Pneumonia is present. [Evidence 1, 3]\n- The heart is normal [Evidence 2]. It cites [Evidence 9]."
    claims = split_claims(text, {1, 2, 3})
    assert [c.citations for c in claims] == [(1, 3), (2,), ()]
    assert claims[0].text == "Pneumonia is present. [Evidence 1, 3]"
    assert claims[2].invalid_citations == (9,)
    assert split_claims("[Evidence 1].") == ()


def test_split_sentences_keeps_decimals_together() -> None:
    assert split_sentences("Ratio is 0.55 here. Next one!") == ["Ratio is 0.55 here.", "Next one!"]


def test_strip_and_format() -> None:
    assert strip_citation_marks("A cat [Evidence 1, 2]. A dog [Evidence 3].") == "A cat. A dog."
    assert format_citation((1, 3)) == "[Evidence 1, 3]" and format_citation(()) == ""
    assert Claim("A cat [Evidence 1].", (1,)).plain_text == "A cat."


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_fragments = st.sampled_from(
    ["A cat", " sits.", " [Evidence 1]", "[Evidence 2, 9]", "[evidence 1-1000]", "[Evidence 3-1]", ". ", "\n- ",
     "Answer:", "[Evidence ]", "[Evidence 0]", "1.", " and [Evidence 4 and 5]", "?", ";"]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_fragments, max_size=20).map("".join), st.sets(st.integers(1, 5)))
def test_parsing_untrusted_text_never_raises_and_keeps_only_valid_numbers(text, valid) -> None:
    from kira.reasoning.prompting import parse_reply

    claims = split_claims(text, valid)
    assert all(set(c.citations) <= valid for c in claims)
    pack = EvidencePack.from_items("q", [_item(0) for _ in range(3)])
    answer = parse_reply(text, pack, generator="x")
    assert set(answer.citations) <= {1, 2, 3}
    assert not any(n not in (1, 2, 3) for n in find_citations(answer.text))
