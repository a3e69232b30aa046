"""torchvision's MobileNetV2 (Sandler et al. 2018) as an ONNX graph built from its state dict.

Layout of torchvision's `mobilenet_v2` state dict (the ImageNet weights
`mobilenet_v2-b0353104.pth`): `features.0` is a 3x3 stride-2 conv + BN + ReLU6 (3 -> 32);
`features.1` .. `features.17` are inverted residual blocks (an optional 1x1 expansion conv
+ BN + ReLU6, a 3x3 depthwise conv + BN + ReLU6, a 1x1 linear projection conv + BN, and a
skip connection when the stride is 1 and the channel count is kept); `features.18` is
a 1x1 conv + BN + ReLU6 to 1280 channels; `classifier.1` is the 1280 -> 1000 linear
layer after global average pooling. BN eps is 1e-5. The strides are the paper's
(t, c, n, s) table: blocks 2, 4, 7 and 14 have stride 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kira.models.cnn.graph import GraphWriter, fold_batch_norm, image_head, io_values, pooled_outputs

STRIDE2_BLOCKS = frozenset({2, 4, 7, 14})


@dataclass(frozen=True)
class MobileNetV2Spec:
    """What the builder needs to know beyond the arrays."""

    name: str = "torchvision-mobilenet_v2-imagenet"
    eps: float = 1e-5  # torchvision's BatchNorm2d default
    mean: tuple[float, float, float] = (0.485, 0.456, 0.406)  # ImageNet normalisation, RGB in [0, 1]
    std: tuple[float, float, float] = (0.229, 0.224, 0.225)
    channels: int = 1280  # last feature map
    classes: int = 1000


def _bn(sd: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    try:
        return {k: sd[f"{prefix}.{k}"] for k in ("weight", "bias", "running_mean", "running_var")}
    except KeyError as exc:
        raise ValueError(f"the state dict lacks batch norm {prefix} ({exc}); is this torchvision's MobileNetV2?") from None


def _conv_bn(g: GraphWriter, sd: dict[str, np.ndarray], x: str, conv: str, bn: str, spec: MobileNetV2Spec,
             *, stride: int = 1, act: bool = True) -> str:
    try:
        w = sd[f"{conv}.weight"]
    except KeyError:
        raise ValueError(f"the state dict lacks {conv}.weight; is this torchvision's MobileNetV2?") from None
    wf, bf = fold_batch_norm(w, None, _bn(sd, bn), spec.eps)
    groups = w.shape[0] if w.shape[1] == 1 and w.shape[2] > 1 else 1
    y = g.conv(x, conv, wf, bf, stride=stride, groups=groups)
    return g.relu6(y) if act else y


def build_graph(sd: dict[str, np.ndarray], spec: MobileNetV2Spec | None = None) -> Any:
    """The ONNX ModelProto of MobileNetV2 from a torchvision state dict (BN folded into the convs).

    Input `pixels` float32 (N, 3, H, W), RGB in [0, 1], any H, W >= 32. Outputs
    `feature_map` (N, 1280, ceil(H/32), ceil(W/32)) after the last ReLU6, `pooled`
    (N, 1280) its global mean and `logits` (N, 1000). Raises ValueError when the state
    dict is not torchvision's MobileNetV2 layout.
    """
    spec = spec or MobileNetV2Spec()
    g = GraphWriter()
    x = image_head(g, spec.mean, spec.std)
    x = _conv_bn(g, sd, x, "features.0.0", "features.0.1", spec, stride=2)
    blocks = sorted({int(k.split(".")[1]) for k in sd if k.startswith("features.")})
    if blocks != list(range(19)):
        raise ValueError(f"expected features.0 .. features.18 in a MobileNetV2 state dict, found {blocks[:3]}...")
    for i in range(1, 18):
        p = f"features.{i}.conv"
        stride = 2 if i in STRIDE2_BLOCKS else 1
        inp = x
        expand = f"{p}.0.0.weight" in sd and sd[f"{p}.0.0.weight"].shape[2] == 1 and f"{p}.3.weight" in sd
        if expand:  # 1x1 expansion, 3x3 depthwise, 1x1 projection + BN
            y = _conv_bn(g, sd, x, f"{p}.0.0", f"{p}.0.1", spec)
            y = _conv_bn(g, sd, y, f"{p}.1.0", f"{p}.1.1", spec, stride=stride)
            y = _conv_bn(g, sd, y, f"{p}.2", f"{p}.3", spec, act=False)
        else:  # block 1: depthwise, projection + BN
            y = _conv_bn(g, sd, x, f"{p}.0.0", f"{p}.0.1", spec, stride=stride)
            y = _conv_bn(g, sd, y, f"{p}.1", f"{p}.2", spec, act=False)
        in_ch = sd[f"{p}.0.0.weight"].shape[1] if expand else sd[f"{p}.0.0.weight"].shape[0]
        out_ch = sd[f"{p}.2.weight" if expand else f"{p}.1.weight"].shape[0]
        x = g.node("Add", [inp, y], f"block{i}/residual") if stride == 1 and in_ch == out_ch else y
    x = _conv_bn(g, sd, x, "features.18.0", "features.18.1", spec)
    pooled_outputs(g, x, sd["classifier.1.weight"], sd["classifier.1.bias"])
    inputs, outputs = io_values(spec.channels, spec.classes)
    return g.model(spec.name, inputs, outputs)
