"""A Milvus Lite file open in another process is reported as that, not as "cannot reach Milvus" (issue 34, item 11)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("pymilvus", reason='needs pip install "kira[milvus]"')
pytest.importorskip("milvus_lite", reason='needs pip install "kira[milvus]"')

from milvus_fixtures import release_lite  # noqa: E402
from pipeline_fakes import FakeStack, photo  # noqa: E402

from kira.cli import main  # noqa: E402
from kira.knowledge_base import KnowledgeBase  # noqa: E402

HOLD = """
import sys
from kira.knowledge_base import KnowledgeBase
kb = KnowledgeBase.open(sys.argv[1], read_only=True)
print("open", flush=True)
sys.stdin.read()
"""


def test_a_lite_file_held_by_another_process_says_so(tmp_path, capfd):
    path = tmp_path / "kb"
    with KnowledgeBase.create(path, models=FakeStack(), backend="milvus") as kb:
        kb.add_image(photo(0), doc_id="a")
    release_lite(path / "milvus.db")  # this process lets go of it
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(ConnectionError, match="is open in another process") as caught:
            KnowledgeBase.open(path, read_only=True)
        assert "cannot reach" not in str(caught.value)
        capfd.readouterr()
        assert main(["info", str(path)]) == 2
        err = capfd.readouterr().err
        assert "is open in another process" in err and "Traceback" not in err
    finally:
        holder.communicate("", timeout=60)
