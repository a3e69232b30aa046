"""The prompt LM generators send and the parser for what they send back.

The model is asked for a reasoning section, then an answer with one claim per sentence,
each ending with ``[Evidence N]`` markers of the evidence it is drawn from. The parser
is lenient about layout ("Reasoning:" / "Answer:" headings optional, bullets allowed)
and strict about citations: numbers not in the pack are removed from the answer text
and recorded on the claim as ``invalid_citations``, and a reasoning step says so.
"""

from __future__ import annotations

import re

from kira.reasoning.citations import CITATION_PATTERN, _safe_numbers, format_citation, split_claims
from kira.reasoning.types import Answer, Claim, EvidenceItem, EvidencePack, strip_citation_marks

SYSTEM_PROMPT = (
    "You answer questions about images using only the numbered evidence you are given. "
    "First write 'Reasoning:' followed by short steps: which evidence you use and why, what agrees and what "
    "conflicts. Then write 'Answer:' followed by the answer, one claim per sentence. End every sentence with "
    "the evidence it comes from, written exactly as [Evidence N] or [Evidence N, M]. Cite only the evidence "
    "numbers listed. If the evidence does not answer the question, say so."
)


def evidence_block(item: EvidenceItem, *, appearance: bool) -> str:
    """One evidence item as a model reads it: what it shows (caption, tags, text read, classifier labels,
    metadata: kira.reasoning.shown), its measured looks only when the question asks about appearance;
    never the describer's statistics as if they were content. An item of a temporal sequence names its place."""
    from kira.reasoning.field_answer import item_sentence
    from kira.reasoning.sequence_answer import sequence_label
    from kira.reasoning.shown import shown

    if "described_by" not in (item.provenance or {}):
        return item.render()
    view = shown(item)
    if view.human_text:
        text = view.human_text
        if appearance and view.looks:
            text += f" (measured: {', '.join(view.looks)})"
    else:
        text = item_sentence(item, appearance=appearance, lead="{doc}")
    place = sequence_label(item)  # "rc-filter-design, 2 of 2": the model can tell a revision from a rival reading
    return f"[Evidence {item.number}] {item.doc_id}" + (f" ({place})" if place else "") + f": {' '.join(text.split())}"


def user_prompt(question: str, pack: EvidencePack) -> str:
    """The user message: the question and the evidence blocks (`evidence_block`)."""
    from kira.reasoning.shown import asks_about_appearance

    appearance = asks_about_appearance(question)
    blocks = "\n".join(evidence_block(item, appearance=appearance) for item in pack.items)
    return f"Question: {question or '(image query; describe what the evidence shows)'}\n\nEvidence:\n{blocks}\n"


def build_messages(question: str, pack: EvidencePack) -> list[dict[str, str]]:
    """Chat messages (system + user) for an OpenAI-compatible chat endpoint."""
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user_prompt(question, pack)}]


SHORT_PROMPT = (
    "Answer the question using only the numbered evidence. Write one or two sentences in your own words, "
    "each ending with the evidence it comes from, written exactly as [Evidence N]. If no evidence answers "
    "the question, say so."
)
"""What a small local model is asked: the answer only, no reasoning section (SmolLM2-class models loop
on the reasoning request; kira writes its own reasoning trace)."""


def short_prompt(question: str, pack: EvidencePack) -> str:
    """The `SHORT_PROMPT` request as one user message, ending with "Answer:"."""
    return f"{SHORT_PROMPT}\n\n{user_prompt(question, pack)}\nAnswer:"


def completion_prompt(question: str, pack: EvidencePack) -> str:
    """The same request as one plain-text prompt for completion-style language models."""
    return f"{SYSTEM_PROMPT}\n\n{user_prompt(question, pack)}\nReasoning:"


_ANSWER_HEAD = re.compile(r"^\s*(?:\*\*)?\s*(?:final\s+)?answer\s*(?:\*\*)?\s*:\s*(?:\*\*)?", re.IGNORECASE | re.MULTILINE)
_REASONING_HEAD = re.compile(r"^\s*(?:\*\*)?\s*reasoning\s*(?:\*\*)?\s*:\s*(?:\*\*)?", re.IGNORECASE)


def _clean_markers(text: str, valid: set[int]) -> str:
    def repl(match: re.Match[str]) -> str:
        kept = tuple(n for n in _safe_numbers(match.group(1)) if n in valid)
        return format_citation(kept)

    cleaned = CITATION_PATTERN.sub(repl, text)
    cleaned = re.sub(r"\s+([.,;:!?])", r"\1", cleaned)
    return " ".join(cleaned.split())


def parse_reply(reply: str, pack: EvidencePack, *, generator: str) -> Answer:
    """An `Answer` from a model's reply.

    The text after the last "Answer:" heading is the answer (the whole reply if there is
    none); the text before it, minus a "Reasoning:" heading, is the reasoning, one step
    per non-empty line. Claims are the answer's sentences, each said once (a repeated sentence is
    left out, and a reasoning step says so); citations to numbers not in `pack` are removed from
    the text and kept on the claim as ``invalid_citations``.
    """
    reply = reply.strip()
    heads = list(_ANSWER_HEAD.finditer(reply))
    if heads:
        reasoning_text, answer_text = reply[: heads[-1].start()], reply[heads[-1].end():]
    else:  # no answer heading: the reply is the answer, less a reasoning heading it may open with
        reasoning_text, answer_text = "", _REASONING_HEAD.sub("", reply, count=1)
    reasoning_text = _REASONING_HEAD.sub("", reasoning_text.strip(), count=1)
    steps = [re.sub(r"^\s*(?:[-*•]|\d+[.)])\s+", "", line).strip() for line in reasoning_text.splitlines()]
    steps = [s for s in steps if s]
    valid = set(pack.numbers)
    parsed = split_claims(answer_text.strip(), valid)
    said: set[str] = set()
    repeated = 0
    claims: list[Claim] = []
    invalid_all: list[int] = []
    for claim in parsed:
        key = " ".join(strip_citation_marks(claim.text).lower().split())
        if key in said:  # a small model looping on one sentence says it once
            repeated += 1
            continue
        said.add(key)
        invalid_all.extend(claim.invalid_citations)
        claims.append(Claim(text=_clean_markers(claim.text, valid), citations=claim.citations,
                            invalid_citations=claim.invalid_citations))
    if invalid_all:
        steps.append(
            "Removed citations to evidence that is not in the pack: "
            + ", ".join(f"[Evidence {n}]" for n in dict.fromkeys(invalid_all))
            + "."
        )
    if repeated:
        steps.append(f"Left out {repeated} sentence(s) the model repeated.")
    text = " ".join(c.text for c in claims) if claims else _clean_markers(answer_text, valid)
    return Answer(text=text, reasoning=tuple(steps), claims=tuple(claims), generator=generator)
