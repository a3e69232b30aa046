"""`VisualRAG`: the visual-rag reference repository's API, unchanged, on top of kira.

    rag = VisualRAG()
    rag.add_image("img_cat", pixels, tags=["cat"], caption="an orange cat on a sofa")
    rag.build()
    out = rag.answer("an orange cat indoors", top_k=2)
    out.results[0].image_id        # "img_cat"
    out.answer.text                # an answer citing [img_cat]
    out.answer.citations           # ("img_cat", ...): the cited image ids, in rank order
    out.context.render()           # one evidence block per retrieved image: id, score, tags, caption

Its four seams map onto kira's: embedder -> the model stack (`models=`), index -> the
knowledge base's core indexes, context builder -> `Context` over kira's evidence pack,
generator -> `generator=` (deterministic template generator by default). As visual-rag
documents it, the answer cites image ids (``[img_cat]``) and may cite only images in the
context; kira's own answer (``[Evidence N]``, claims, grounding) stays at ``out.answer.kira``. `answer` also takes a probe
image (array or path) instead of text. In memory by default (a temporary directory that
is removed on `close()`); pass `path=` to keep the knowledge base.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from kira.images import ImageLike
from kira.reasoning.types import Answer, EvidencePack


@dataclass(frozen=True)
class SearchResult:
    """One retrieved image: its id, best score, caption and tags."""

    image_id: str
    score: float
    caption: str | None
    tags: tuple[str, ...]


@dataclass(frozen=True)
class Context:
    """The retrieved images as an ordered, citable context (visual-rag's context builder).

    ``results``: one block per image, in rank order; ``pack``: kira's evidence pack behind it.
    """

    results: tuple[SearchResult, ...]
    pack: EvidencePack

    @property
    def image_ids(self) -> tuple[str, ...]:
        return tuple(r.image_id for r in self.results)

    def render(self) -> str:
        """One block per image: ``[id] score=... tags=... caption=...``, best first ("" when empty)."""
        return "\n".join(
            f"[{r.image_id}] score={r.score:.3f} tags={', '.join(r.tags) or '-'} caption={r.caption or '-'}"
            for r in self.results)


@dataclass(frozen=True)
class GroundedAnswer:
    """visual-rag's answer: text citing image ids (``[img_cat]``), and the cited ids in rank order.

    ``kira``: kira's own `Answer` (``[Evidence N]`` citations, claims, grounding, reasoning).
    """

    text: str
    citations: tuple[str, ...]
    kira: Answer


@dataclass(frozen=True)
class RAGOutput:
    """What `VisualRAG.answer` returns: results (per image, best first), the context, the answer."""

    query: str | None
    results: list[SearchResult]
    context: Context
    answer: GroundedAnswer


class VisualRAG:
    """Add images, build, answer. See the module docstring.

    Parameters
    ----------
    models: a model stack (default `kira.models.load_default()`).
    generator: a `kira.reasoning.Generator` (default TemplateGenerator).
    path: where to keep the knowledge base (default: a temporary directory).
    variant: the `Kira` variant answers use (default "full").
    """

    def __init__(self, models: Any = None, generator: Any = None, *, path: str | os.PathLike | None = None,
                 variant: str = "full", config: Any = None) -> None:
        from kira.knowledge_base import KnowledgeBase
        from kira.knowledge_base.opening import is_embedded_directory

        self._tmp = Path(tempfile.mkdtemp(prefix="kira-visualrag-")) if path is None else None
        self.path = self._tmp / "kb" if self._tmp is not None else Path(path)  # type: ignore[arg-type]
        if is_embedded_directory(self.path):
            self.kb = KnowledgeBase.open(self.path, models=models)
        else:
            self.kb = KnowledgeBase.create(self.path, config=config, models=models)
        # visual-rag's API has no close(): a VisualRAG dropped without one closes its knowledge base, and
        # deletes a temporary one, when it is collected or at exit
        self._finalizer = weakref.finalize(self, _release, self.kb, self._tmp)
        self._generator = generator
        self._variant = variant
        self._pending: list[dict[str, Any]] = []
        self._kira: Any = None

    def add_image(self, image_id: str, pixels: ImageLike, *, tags: Sequence[str] = (), caption: str | None = None,
                  metadata: dict[str, Any] | None = None) -> None:
        """Queue an image (array, PIL image or path); it is indexed by `build()`.

        Raises ValueError for a duplicate id or an unusable image.
        """
        from kira.images import load_image

        image_id = str(image_id)
        if any(p["doc_id"] == image_id for p in self._pending) or self.kb.has_document(image_id):
            raise ValueError(f"image id {image_id!r} was already added")
        self._pending.append(dict(
            pixels=load_image(pixels), doc_id=image_id, caption=caption, tags=tuple(tags), metadata=dict(metadata or {}),
            source=str(pixels) if isinstance(pixels, (str, os.PathLike)) else None, sequence=None, view=None,
        ))

    def build(self) -> None:
        """Chunk, embed and index every queued image (one batch), and commit."""
        if self._pending:
            self.kb.add_items(self._pending)
            self._pending = []
        self.kb.commit()

    def answer(self, query: str | ImageLike | None = None, *, top_k: int = 3, image: ImageLike | None = None) -> RAGOutput:
        """Retrieve the `top_k` best images for a text query or a probe image (or both) and answer.

        `query` may be text, or an image (array, PIL image or path to an existing file)
        in place of the text. Citations are evidence numbers in `out.context`, never
        outside it. Raises ValueError before `build()` was called on queued images.
        """
        if self._pending:
            raise ValueError("call build() after add_image() before answer()")
        question: str | None = None
        if isinstance(query, str) and not (os.path.isfile(query) and image is None and _looks_like_image(query)):
            question = query
        elif query is not None:
            image = query
        if self._kira is None:
            from kira.pipeline import Kira

            self._kira = Kira(self.kb, generator=self._generator)
        result = self._kira.ask(question, image=image, top_k=top_k, variant=self._variant)
        best: dict[str, float] = {}
        for item in result.evidence.items:
            best[item.doc_id] = max(best.get(item.doc_id, -np.inf), item.score)
        docs = self.kb.documents(best)
        ranked = sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[:top_k]
        results = [SearchResult(d, float(s), docs[d].caption if d in docs else None, docs[d].tags if d in docs else ())
                   for d, s in ranked]
        context = Context(tuple(results), result.evidence)
        return RAGOutput(question, results, context, _with_image_ids(result.answer, result.evidence, context))

    def close(self) -> None:
        """Commit and close the knowledge base; a temporary one is deleted. Called when the VisualRAG is
        collected or at interpreter exit if not before."""
        self._finalizer()

    def __enter__(self) -> VisualRAG:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _release(kb: Any, tmp: Path | None) -> None:
    """Close `kb` and delete the temporary directory `tmp` holding it (None: a user's path, kept)."""
    kb.close()
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)


def _with_image_ids(answer: Answer, pack: EvidencePack, context: Context) -> GroundedAnswer:
    """`answer` with each ``[Evidence N]`` mark replaced by the cited images' ids (``[img_cat, img_dog]``),
    only ids in `context`; citations are the cited ids in the context's rank order."""
    import re

    doc_of = {item.number: item.doc_id for item in (*pack.items, *pack.similar)}
    allowed = set(context.image_ids)

    def ids(numbers: str) -> list[str]:
        found = [doc_of.get(int(n)) for n in re.findall(r"\d+", numbers)]
        return list(dict.fromkeys(d for d in found if d in allowed))

    def replace(match: re.Match[str]) -> str:
        cited = ids(match.group(1))
        return f"[{', '.join(cited)}]" if cited else ""

    text = re.sub(r"\s*\[Evidence ([\d,\s]+)\]", lambda m: (" " + replace(m)) if replace(m) else "", answer.text)
    cited = {d for n in answer.citations for d in ([doc_of[n]] if n in doc_of else [])}
    return GroundedAnswer(text=text, citations=tuple(i for i in context.image_ids if i in cited), kira=answer)


def _looks_like_image(path: str) -> bool:
    from kira.knowledge_base.ingest import IMAGE_SUFFIXES

    return Path(path).suffix.lower() in IMAGE_SUFFIXES
