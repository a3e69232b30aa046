"""DomainProfile: the user's domain knowledge as data, validated, stored with the knowledge base."""

from __future__ import annotations

import json

import pytest
from pipeline_fakes import FakeStack, flat

from kira import DomainProfile
from kira.knowledge_base import KnowledgeBase
from kira.profile import as_profile
from kira.reasoning.sentences import sentences_of, vocabulary


def test_the_default_profile_is_empty_and_marks_nothing_as_bookkeeping():
    empty = DomainProfile()
    assert empty.empty and not DomainProfile(name="x").empty
    got = sentences_of("Reported by Dr. Osei. Case P001, study 12. Clear lungs.", vocabulary(empty))
    assert [meta for _, meta, _ in got] == [False, False, False]
    assert vocabulary(empty).comparison_stems == frozenset() and vocabulary(empty).position_axes == ()


def test_a_profile_marks_its_bookkeeping_and_cuts_its_heads():
    profile = DomainProfile(section_heads=("findings",), bookkeeping_patterns=(r"^reported by\b",),
                            identifier_pattern=r"[a-z]\d{3,}|\d+")
    got = sentences_of("Findings: clear lungs. Reported by Dr. Osei. Case P001, study 12.", vocabulary(profile))
    assert got == [("clear lungs", False, ""), ("Reported by Dr. Osei", True, ""), ("Case P001, study 12", True, "")]
    assert profile.is_bookkeeping("reported by someone") and not profile.is_bookkeeping("a crack")
    # a number is a value, not a record name, unless the profile says so: "score 7" stays content
    assert sentences_of("Gleason-like score 7", vocabulary(DomainProfile()))[0][1] is False


def test_profiles_round_trip_through_toml_and_json(tmp_path):
    toml = tmp_path / "p.toml"
    toml.write_text('name = "walls"\nconcepts = ["brick wall", "  brick wall ", "plaster"]\n'
                    'position_axes = [["left", "right"]]\n', encoding="utf-8")
    profile = DomainProfile.load(toml)
    assert profile.concepts == ("brick wall", "plaster") and profile.position_axes == (("left", "right"),)
    profile.save(tmp_path / "p.json")
    assert DomainProfile.load(tmp_path / "p.json") == profile
    assert json.loads((tmp_path / "p.json").read_text())["name"] == "walls"
    assert not list(tmp_path.glob(".*tmp*"))  # written atomically, nothing left behind
    assert as_profile(None) == DomainProfile() and as_profile({"name": "walls"}).name == "walls"
    assert as_profile(str(toml)) == profile and as_profile(profile) is profile


@pytest.mark.parametrize("data, message", [
    ({"concepts": "brick"}, "list of strings"),
    ({"concepts": ["ok", 3]}, "hold strings"),
    ({"colour": "red"}, "unknown profile keys"),
    ({"bookkeeping_patterns": ["("]}, "not a valid regular expression"),
    ({"identifier_pattern": "["}, "not a valid regular expression"),
    ({"position_axes": [["left"]]}, "at least two words"),
    ({"name": 3}, "must be a string"),
])
def test_bad_profiles_are_refused_naming_the_field(data, message):
    with pytest.raises((ValueError, TypeError), match=message):
        DomainProfile.from_dict(data)


def test_bad_files_are_refused_naming_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="bad.json"):
        DomainProfile.load(bad)
    with pytest.raises(ValueError, match="cannot read"):
        DomainProfile.load(tmp_path / "missing.toml")
    (tmp_path / "p.yaml").write_text("name: x", encoding="utf-8")
    with pytest.raises(ValueError, match=".toml or .json"):
        DomainProfile.load(tmp_path / "p.yaml")
    with pytest.raises(TypeError, match="DomainProfile"):
        as_profile(42)


def test_the_knowledge_base_stores_its_profile_and_a_reader_cannot_change_it(tmp_path):
    profile = DomainProfile(name="walls", concepts=("brick wall",))
    with KnowledgeBase.create(tmp_path / "kb", models=FakeStack(), profile=profile) as kb:
        kb.add_image(flat((1, 0, 0)), doc_id="a", caption="a red wall")
        assert kb.profile == profile
    reader = KnowledgeBase.open(tmp_path / "kb", models=FakeStack(), read_only=True)
    try:
        assert reader.profile == profile
        with pytest.raises(ValueError, match="read-only"):
            reader.set_profile(DomainProfile())
    finally:
        reader.close()
    with KnowledgeBase.open(tmp_path / "kb", models=FakeStack()) as writer:
        writer.set_profile({"name": "plain"})
    reopened = KnowledgeBase.open(tmp_path / "kb", models=FakeStack(), read_only=True)
    try:
        assert reopened.profile.name == "plain"
    finally:
        reopened.close()
    with pytest.raises(ValueError, match="unknown profile keys"):
        KnowledgeBase.create(tmp_path / "kb2", models=FakeStack(), profile={"colour": "red"})
    assert not (tmp_path / "kb2").exists()  # refused before anything was written
