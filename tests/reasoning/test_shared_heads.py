"""Inside a domain every record shares words: a shared head is no claim, and a shared word answers nothing.

An archive's captions open alike ("PA chest radiograph: ..."). The head was a statement of its own that
every film states, so it outvoted every finding and, joined to the one finding chosen, cited every film for it:
"PA chest radiograph: cardiomegaly [Evidence 1, 2, 3, 4, 5]" where one film shows cardiomegaly.
"""

from __future__ import annotations

from kira.reasoning.template_generator import TemplateGenerator
from kira.reasoning.types import EvidenceItem, EvidencePack

FILMS = [
    "PA chest radiograph: right lower lobe airspace opacity, pneumonia",
    "PA chest radiograph: clear lungs, no effusion",
    "PA chest radiograph: left lower zone consolidation, pneumonia",
    "PA chest radiograph: enlarged cardiac silhouette, cardiomegaly",
    "PA chest radiograph: small right pleural effusion",
]


def _pack(question: str, order: list[int], matches: float = 0.99, shared: frozenset[str] = frozenset()) -> EvidencePack:
    items = [EvidenceItem(number=0, chunk_id=k, doc_id=f"film_{k}", level="document", score=1.0 - 0.1 * n,
                          paths=("text",), summary=FILMS[k], provenance={"caption": FILMS[k]})
             for n, k in enumerate(order)]
    pack = EvidencePack.from_items(question, items)
    return EvidencePack(question, pack.items, matches={i.number: matches for i in pack.items}, shared=shared)


def _cited_captions(answer, pack):
    return [(c.text, [pack.by_number(n).summary for n in c.citations]) for c in answer.claims]


def test_a_claim_cites_only_the_films_that_state_its_finding_not_every_film_stating_its_head():
    pack = _pack("which films show cardiomegaly?", [3, 1, 4, 0, 2])
    answer = TemplateGenerator().generate(pack.question, pack)
    assert answer.claims[0].text == "PA chest radiograph: enlarged cardiac silhouette, cardiomegaly [Evidence 1]."
    for text, captions in _cited_captions(answer, pack):
        body = text.split(" [")[0].split(": ", 1)[1]
        assert all(body in caption for caption in captions), (text, captions)


def test_every_film_that_shows_what_was_asked_is_said_each_with_its_head():
    pack = _pack("which films show pneumonia?", [0, 1, 2, 3, 4])
    answer = TemplateGenerator().generate(pack.question, pack)
    assert [c.text for c in answer.claims] == [
        "PA chest radiograph: right lower lobe airspace opacity, pneumonia [Evidence 1].",
        "PA chest radiograph: left lower zone consolidation, pneumonia [Evidence 3].",
    ]


def test_a_word_most_records_hold_makes_no_finding_an_answer():
    """"which chest films show pneumonia?": every film's head holds 'chest'; both pneumonia films are said, each
    with its head. For a finding no film shows, no other film's finding is said as a further answer for holding
    'chest' once 'chest' is known to be shared (`EvidencePack.shared`, set from the knowledge base's counts)."""
    question = "which chest films show pneumonia?"
    shared = TemplateGenerator().generate(question, _pack(question, [0, 1, 2, 3, 4], shared=frozenset({"chest"})))
    assert [c.text for c in shared.claims] == [
        "PA chest radiograph: right lower lobe airspace opacity, pneumonia [Evidence 1].",
        "PA chest radiograph: left lower zone consolidation, pneumonia [Evidence 3].",
    ]
    question = "a chest X-ray with a pneumothorax"
    alone = TemplateGenerator().generate(question, _pack(question, [4, 1, 3, 0, 2], shared=frozenset({"chest"})))
    assert [c.text for c in alone.claims] == ["PA chest radiograph: small right pleural effusion [Evidence 1]."]
    unshared = TemplateGenerator().generate(question, _pack(question, [4, 1, 3, 0, 2]))
    assert len(unshared.claims) > 1  # 'chest' counted as asked: another film's finding said as an answer


def test_a_head_is_written_only_when_every_cited_item_states_it():
    items = [EvidenceItem(number=0, chunk_id=1, doc_id="a", level="document", score=1.0, paths=("text",),
                         summary="Breakfast table: two cups and a teapot", provenance={}),
             EvidenceItem(number=0, chunk_id=2, doc_id="b", level="document", score=0.9, paths=("text",),
                          summary="Two cups and a teapot", provenance={})]
    pack = EvidencePack.from_items("two cups and a teapot?", items)
    answer = TemplateGenerator().generate(pack.question, pack)
    assert answer.claims[0].text == "Two cups and a teapot [Evidence 1, 2]."
