"""`kira check KB`: verify a knowledge base, whichever backend holds it, and repair what can be.

An embedded knowledge base is checked by `kira.knowledge_base.embedded.check` (its database, index
files and their agreement), a Milvus-backed one by `kira.knowledge_base.milvus.check`.
`database_problem` is the quick look `kira ask` takes before it answers.
"""

from __future__ import annotations

import os

from kira.knowledge_base.check_report import CheckReport, Finding
from kira.knowledge_base.embedded.check import check_embedded, database_problem
from kira.knowledge_base.milvus.check import check_milvus
from kira.knowledge_base.opening import is_milvus_directory

__all__ = ["CheckReport", "Finding", "check", "database_problem"]


def check(path: str | os.PathLike[str], *, repair: bool = False, uri: str | None = None, token: str = "") -> CheckReport:
    """Verify the knowledge base at `path` (see the module doc); with `repair`, fix what disagreed
    (the index files are rebuilt from the database), then check again: what repair could not fix is
    in `CheckReport.remaining`.

    uri / token: a Milvus-backed knowledge base named `path` there (`kira.knowledge_base.milvus.check`);
    a directory holding a Milvus Lite file is found without them.
    Returns a `CheckReport`. Raises ValueError when `path` is not a knowledge base, and (with
    `repair`) when another process has it open for writing.
    """
    if uri is not None or is_milvus_directory(path):
        return check_milvus(path, repair=repair, uri=uri, token=token)
    return check_embedded(path, repair=repair)
