"""kira.models.vector_cache: a fixed list of texts' vectors kept on disk, used only when it fits the encoder."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from kira.models import vector_cache
from kira.models.vector_cache import cache_path, cached_unit_vectors, encoder_identity


class HashEncoder:
    """Deterministic vectors from each text's hash; counts what it encodes; named by `onnx_path` like MiniLM."""

    dim = 8

    def __init__(self, name: str = "minilm-abc123.onnx", salt: str = "") -> None:
        self.onnx_path = f"/somewhere/{name}"
        self.salt = salt
        self.encoded: list[str] = []

    def encode(self, texts):
        self.encoded.extend(texts)
        rows = [np.frombuffer(hashlib.sha256((self.salt + t).encode()).digest()[:32], np.uint8)[: self.dim]
                for t in texts]
        return np.asarray(rows, dtype=np.float32) + 1.0


LABELS = ["tabby", "espresso", "tripod", "obelisk", "bubble"]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KIRA_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_second_process_reads_what_the_first_kept():
    first = HashEncoder()
    vectors = cached_unit_vectors(first, LABELS, kind="labels")
    assert first.encoded == LABELS
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    path = cache_path(first, LABELS, "labels")
    assert path is not None and path.is_file() and path.parent.name == "vectors"
    second = HashEncoder()
    again = cached_unit_vectors(second, LABELS, kind="labels")
    assert second.encoded == LABELS[: vector_cache.SPOT_CHECK_ROWS]  # only the spot check is encoded
    np.testing.assert_array_equal(again, vectors)


def test_a_file_from_other_weights_or_damaged_is_encoded_again(cache):
    kept = HashEncoder()
    cached_unit_vectors(kept, LABELS, kind="labels")
    path = cache_path(kept, LABELS, "labels")
    changed = HashEncoder(salt="other weights, same file name")  # the spot check catches it
    vectors = cached_unit_vectors(changed, LABELS, kind="labels")
    assert changed.encoded[-len(LABELS):] == LABELS
    np.testing.assert_array_equal(np.load(path), vectors)  # rewritten with the right vectors
    for damage in (b"not a numpy file", None):
        if damage is None:
            np.save(path, np.zeros((2, 8), np.float32))  # the wrong number of rows
        else:
            path.write_bytes(damage)
        fresh = HashEncoder(salt="other weights, same file name")
        np.testing.assert_array_equal(cached_unit_vectors(fresh, LABELS, kind="labels"), vectors)
        assert fresh.encoded == LABELS


def test_the_key_follows_the_encoder_and_the_texts():
    a = cache_path(HashEncoder("m-1.onnx"), LABELS, "labels")
    assert a != cache_path(HashEncoder("m-2.onnx"), LABELS, "labels")
    assert a != cache_path(HashEncoder("m-1.onnx"), LABELS[::-1], "labels")
    assert a != cache_path(HashEncoder("m-1.onnx"), LABELS, "probes")


def test_an_encoder_without_identity_or_an_unwritable_cache_still_encodes(cache, monkeypatch):
    class Plain:
        def encode(self, texts):
            return np.ones((len(texts), 4), np.float32)

    assert encoder_identity(Plain()) is None
    assert cached_unit_vectors(Plain(), LABELS, kind="labels").shape == (5, 4)
    assert not cache.exists()
    blocker = cache.parent / "a file"
    blocker.write_text("x")
    monkeypatch.setenv("KIRA_CACHE_DIR", str(blocker))  # a file where the directory should be
    assert cached_unit_vectors(HashEncoder(), LABELS, kind="labels").shape == (5, 8)
    assert cached_unit_vectors(HashEncoder(), [], kind="labels").shape[0] == 0


def test_the_relevance_judge_keeps_the_label_vocabulary_on_disk(minilm, cache, monkeypatch):
    from kira.reasoning import relevance

    monkeypatch.setattr(relevance, "_VOCABULARY_VECTORS", {})  # as a new process
    judge = relevance.RelevanceJudge(minilm, vocabulary=LABELS)
    vectors = judge._vocabulary_unit()
    path = cache_path(minilm, LABELS, "labels")
    assert path is not None and path.is_file()
    np.testing.assert_allclose(vectors, minilm.encode(LABELS), atol=1e-5)
    monkeypatch.setattr(relevance, "_VOCABULARY_VECTORS", {})
    np.testing.assert_array_equal(relevance.RelevanceJudge(minilm, vocabulary=LABELS)._vocabulary_unit(), vectors)
