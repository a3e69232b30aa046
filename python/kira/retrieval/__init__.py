"""Stage 2 of the KIRA paper, cross-modal retrieval: query encoding (`encode`), the retrieval paths
(`search`: path A over the visual index, path B over the description index and BM25), query
expansion (`expansion`, `concepts`), ReAG's fine-grained crops (`fine`), weighted RRF fusion and
re-ranking (`fusion`), how an image query's rankings meet and feedback (`anchoring`), and the
stage objects over them (`stages`)."""

from __future__ import annotations

from kira.retrieval.concepts import ConceptBank
from kira.retrieval.stages import (EncodeQuery, ExpandQuery, Feedback, FineGrained, Fuse, Rerank, TextSearch,
                                   VisualSearch)

__all__ = ["ConceptBank", "EncodeQuery", "ExpandQuery", "Feedback", "FineGrained", "Fuse", "Rerank", "TextSearch",
           "VisualSearch"]
