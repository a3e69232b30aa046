"""kira.eval.ceiling: the DC bounds of answers drawn from the evidence's own text."""

from __future__ import annotations

import numpy as np
import pytest

from kira.eval.ceiling import answer_ceiling, clause_oracle, document_clauses, token_bound
from kira.eval.dataset import Document, DomainDataset, Question
from kira.eval.metrics import token_f1

_IMG = np.zeros((4, 4, 3), np.uint8)


def _doc(doc_id, caption, label, tags=()):
    return Document(doc_id, "toy", _IMG, caption, label, {}, tuple(tags), group=doc_id)


def test_document_clauses_split_caption_and_keep_tags():
    doc = _doc("a", "Tile T1, acquired 2020. Shows open water; shoreline visible: calm.", "water", ["coast"])
    assert document_clauses(doc) == ["Tile T1,", "acquired 2020.", "Shows open water;", "shoreline visible:",
                                     "calm.", "coast"]


def test_token_bound():
    # every reference word available -> 1; half of them -> 2r/(1+r) with r = 1/2
    assert token_bound("enlarged cardiac silhouette", ["the cardiac silhouette is enlarged"]) == pytest.approx(1.0)
    assert token_bound("fluid decreased", ["fluid level"]) == pytest.approx(2 * 0.5 / 1.5)
    assert token_bound("deforestation", ["closed canopy"]) == 0.0


def test_clause_oracle_picks_the_clauses_that_match():
    clauses = ["Schematic C1 rev B,", "drawn by K. Adeyemi.", "RC phase-shift oscillator,", "timing R1 = 10k."]
    reference = "An RC phase-shift oscillator with R1 = 10k"
    got = clause_oracle(reference, clauses)
    assert got == pytest.approx(token_f1("RC phase-shift oscillator, timing R1 = 10k.", reference))
    assert got > token_f1(" ".join(clauses), reference)  # dropping the bookkeeping clauses pays
    assert clause_oracle(reference, clauses, max_clauses=1) < got
    assert clause_oracle("unrelated words entirely", clauses) == 0.0
    # a clause that is the reference verbatim reaches 1
    assert clause_oracle("Blunting of the left costophrenic angle.", ["Lungs clear.",
                                                                       "Blunting of the left costophrenic angle."]) == 1.0


def test_answer_ceiling_uses_the_right_documents():
    docs = (_doc("p1-t0", "Study 1. Enlarged cardiac silhouette.", "cardiomegaly"),
            _doc("p1-t1", "Study 2. Enlarged cardiac silhouette.", "cardiomegaly"),
            _doc("p2-t1", "Study 2. Enlarged cardiac silhouette, increased since prior.", "cardiomegaly"),
            _doc("p3", "Clear lungs.", "normal"))
    questions = (
        Question("q1", "toy", "retrieval", "find cardiomegaly", "Enlarged cardiac silhouette", ("p1-t0", "p1-t1", "p2-t1"),
                 "cardiomegaly"),
        # multi-hop: the class's documents count too (p2 says "increased"); the normal one does not
        Question("q2", "toy", "multihop", "how did p1 change?", "Cardiac silhouette increased, lungs clear",
                 ("p1-t0", "p1-t1"), "cardiomegaly"),
    )
    ds = DomainDataset("toy", docs, questions, ("heart",), ("cardiomegaly", "normal"))
    got = answer_ceiling(ds)
    assert got["retrieval"] == {"token_bound": pytest.approx(1.0), "clause_oracle": pytest.approx(1.0)}
    r = 3 / 5  # "lungs" and "clear" are only in the normal document
    assert got["multihop"]["token_bound"] == pytest.approx(2 * r / (1 + r))
    assert got["all"]["token_bound"] == pytest.approx((1.0 + 2 * r / (1 + r)) / 2)
    assert set(got) == {"retrieval", "multihop", "all"}
