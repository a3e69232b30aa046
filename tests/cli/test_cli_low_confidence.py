"""`kira ask` without --card prints a low-confidence answer under its warning, as every card opens with it."""

from __future__ import annotations

import pytest

from kira.cli import main
from scan_archive import scan_archive

pytest.importorskip("pydicom")


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("archive") / "kb"
    scan_archive(path).close()
    return path


def test_a_low_confidence_answer_is_printed_under_its_warning(archive, capsys):
    assert main(["ask", str(archive), "a scan of a fractured wrist"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Low confidence (0.49): no record in this knowledge base mentions 'fractured' or "
                             "'wrist'"), out
    assert out[1].startswith("No record in this knowledge base mentions 'fractured' or 'wrist'; what follows"), out


def test_a_sure_answer_is_printed_alone(archive, capsys):
    assert main(["ask", str(archive), "a scan with a liver lesion"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("MR scan: abdomen, a marked lesion in the liver [Evidence 1]"), out
