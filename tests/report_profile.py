"""A domain profile for the reasoning tests: the report conventions their ward, design and site
fixtures are written in. In kira this knowledge is the user's data, never the library's."""

from __future__ import annotations

from kira.profile import DomainProfile

REPORT_PROFILE = DomainProfile(
    name="reports",
    section_heads=("findings", "finding", "impression", "impressions", "diagnosis", "conclusion"),
    bookkeeping_patterns=(r"^(?:reported|drawn|signed|dictated|read|prepared|acquired)\b.*\bby\b",),
    identifier_pattern=r"[a-z]{1,2}\d{3,}|\d+",
    question_words=("radiograph", "radiographs", "film", "films", "schematic", "schematics", "tile", "tiles",
                    "field", "fields"),
    comparison_words=("change", "differ", "compare", "between", "evolve", "progress", "revise"),
    change_words=("change", "increase", "decrease", "raise", "grew", "new", "built", "remove", "replace", "worse",
                  "improve", "resolve", "progress", "unchanged", "stable", "harvest", "shrank", "expand"),
    position_axes=(("left", "right"), ("upper", "lower"), ("anterior", "posterior"), ("north", "south"),
                   ("east", "west")),
)
