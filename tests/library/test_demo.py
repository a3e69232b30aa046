"""The offline demo: builds from packaged images, answers, writes HTML cards (quick mode)."""

from __future__ import annotations

from kira.demo import demo_images, run_demo


def test_quick_demo_answers_and_writes_cards(tmp_path):
    lines: list[str] = []
    summary = run_demo(tmp_path / "out", quick=True, echo=lines.append)
    assert not summary.skipped, summary.skipped
    assert summary.documents == len(demo_images(quick=True))
    assert summary.chunks["region"] > 0 and summary.chunks["patch"] > 0
    answers = dict(summary.questions)
    assert "retina" in answers["Which image shows blood vessels of the eye?"].lower()
    assert "coffee" in answers["(image: coffee)"].lower()
    assert "stained" in answers["stained tissue with brown positive cells"].lower()
    assert len(summary.cards) == len(summary.questions) == 5
    for card in summary.cards:
        with open(card, encoding="utf-8") as fh:
            text = fh.read()
        assert "<html" in text.lower() and "data:image/png;base64" in text
    assert any("RATIONALE CARD" in line for line in lines)
    assert summary.seconds < 120
    # the closing summary keeps each answer's similar-case paragraph indented under it, not at the margin
    last = max(n for n, line in enumerate(lines) if line.startswith("kira demo:") and "questions" in line)
    closing = "\n".join(lines[last + 1:])
    assert "Similar cases" in closing, closing
    assert all(line.startswith("  ") for line in closing.splitlines()), closing


def test_full_demo_answers_the_battery_circuit_question_about_the_battery_circuit(tmp_path):
    """'circuit' is a word of led_circuit's id, but four captions speak of circuits: the question is about circuits
    (kira.knowledge_base.identifiers), and the answer comes from the divider with its battery, not from the LED."""
    summary = run_demo(tmp_path / "out", quick=False, echo=lambda line: None)
    answer = dict(summary.questions)["a circuit with a battery and resistors"]
    assert "battery" in answer.lower() and "led" not in answer.lower().split(), answer
    assert "similar cases" not in answer.lower(), answer
    # the two revisions of one design are one subject at two times: both stated, in order (sequence_answer)
    revised = dict(summary.questions)["Show me a low-pass filter schematic and how it was revised"]
    first, second = revised.index("rc_filter_rev1 (rc-filter-design, 1 of 2): "), revised.index("rc_filter_rev2 (")
    assert first < second and "100n capacitor" in revised[first:second] and "two-stage" in revised[second:], revised
