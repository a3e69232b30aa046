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
