"""CLIP's two towers, the sentence encoder and the cross-encoder, run by onnxruntime.

Only onnxruntime, numpy and tokenizers are imported: a query never imports torch.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from kira.images import ImageLike
from kira.models.manifest import Manifest, load_manifest
from kira.models.onnx._run import l2_normalise, run, run_chunked
from kira.models.onnx.tokenize import ManifestTokenizer
from kira.models.preprocess import preprocess_batch
from kira.models.runtime import OnnxSession, open_session


def _manifest(source: Manifest | str | os.PathLike, kind: str) -> Manifest:
    m = source if isinstance(source, Manifest) else load_manifest(source)
    if m.kind != kind:
        raise ValueError(f"{m.root}: this is a {m.kind} export, not {kind}")
    return m


class OnnxClipImageEncoder:
    """CLIP's vision tower: images -> unit vectors in CLIP's joint space (ImageEncoder).

    batch_size: images per onnxruntime call; halved automatically on out-of-memory.
    Thread safety: encode may be called from several threads (onnxruntime sessions are).
    """

    def __init__(self, source: Manifest | str | os.PathLike, *, prefer_cuda: bool = True,
                 batch_size: int = 32, threads: int | None = None) -> None:
        self.manifest = _manifest(source, "clip")
        self.session: OnnxSession = open_session(self.manifest.path("vision"), prefer_cuda=prefer_cuda,
                                                 threads=threads)
        self.provider = self.session.provider
        self.dim = int(self.manifest.dims["embed"])
        self.batch_size = batch_size
        if self.manifest.preprocess is None:
            raise ValueError(f"{self.manifest.root}: CLIP manifest has no preprocessing section")
        self.preprocess = self.manifest.preprocess

    def encode(self, images: Sequence[ImageLike]) -> np.ndarray:
        """float32 (n, dim) unit rows. Accepts arrays, PIL images or paths; raises ValueError if empty."""
        images = list(images)

        def one(s: slice) -> np.ndarray:
            pixels = preprocess_batch(images[s], self.preprocess)
            return run(self.session, {"pixel_values": pixels})[0]

        out, self.batch_size = run_chunked(one, len(images), self.batch_size)
        return l2_normalise(out)


class _TextModel:
    kind = ""
    role = "model"

    def __init__(self, source: Manifest | str | os.PathLike, *, prefer_cuda: bool = True,
                 batch_size: int = 64, threads: int | None = None) -> None:
        self.manifest = _manifest(source, self.kind)
        self.session = open_session(self.manifest.path(self.role), prefer_cuda=prefer_cuda, threads=threads)
        self.provider = self.session.provider
        self.tokenizer = ManifestTokenizer(self.manifest)
        self.batch_size = batch_size

    def _run_texts(self, texts: Sequence[str], pairs: Sequence[str] | None = None) -> np.ndarray:
        if isinstance(texts, str):
            raise ValueError("pass a list of strings, not a single string")
        texts = list(texts)
        # sort by length so each chunk pads little, then restore the order
        order = np.argsort([len(t) for t in texts], kind="stable")
        sorted_texts = [texts[i] for i in order]
        sorted_pairs = None if pairs is None else [list(pairs)[i] for i in order]

        def one(s: slice) -> np.ndarray:
            feeds = self.tokenizer.batch(sorted_texts[s], None if sorted_pairs is None else sorted_pairs[s])
            return run(self.session, feeds)[0]

        out, self.batch_size = run_chunked(one, len(texts), self.batch_size)
        result = np.empty_like(out)
        result[order] = out
        return result


class OnnxClipTextEncoder(_TextModel):
    """CLIP's text tower: texts -> unit vectors in the IMAGE space (ModelStack.image_text)."""

    kind = "clip"
    role = "text"

    def __init__(self, source: Manifest | str | os.PathLike, **kwargs: object) -> None:
        super().__init__(source, **kwargs)  # type: ignore[arg-type]
        self.dim = int(self.manifest.dims["embed"])

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (n, dim) unit rows; raises ValueError for an empty list or a bare string."""
        return l2_normalise(self._run_texts(texts))


class OnnxSentenceEncoder(_TextModel):
    """A sentence encoder (mean- or CLS-pooled BERT family): texts -> unit vectors (TextEncoder)."""

    kind = "sentence"

    def __init__(self, source: Manifest | str | os.PathLike, **kwargs: object) -> None:
        super().__init__(source, **kwargs)  # type: ignore[arg-type]
        self.dim = int(self.manifest.dims["embed"])

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (n, dim) unit rows; raises ValueError for an empty list or a bare string."""
        return l2_normalise(self._run_texts(texts))


class OnnxCrossEncoder(_TextModel):
    """A cross-encoder re-ranker (Reranker): relevance of each passage to the query in [0, 1].

    One logit: sigmoid(logit), as sentence-transformers' CrossEncoder reports it.
    Several labels: softmax probability of the last label ("relevant").
    """

    kind = "cross-encoder"

    def logits(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Raw float32 logits (len(texts), num_labels)."""
        return self._run_texts([query] * len(texts), list(texts))

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """float32 (len(texts),) relevance in [0, 1]; an empty list gives an empty array."""
        if len(texts) == 0:
            return np.zeros(0, dtype=np.float32)
        logits = self.logits(query, texts).astype(np.float64)
        if logits.shape[1] == 1:
            return (1.0 / (1.0 + np.exp(-logits[:, 0]))).astype(np.float32)
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        return (e[:, -1] / e.sum(axis=1)).astype(np.float32)
