"""A small ONNX graph writer for convolutional nets: conv + folded batch norm, activations, pooling.

Batch norm in inference mode is an affine map per channel, so it folds into the
convolution before it: w' = w * g / sqrt(v + eps), b' = b0 * g / sqrt(v + eps) + beta - m * g / sqrt(v + eps)
(g, beta, m, v: the BN weight, bias, running mean and variance). The folded graph has one
Conv node per conv + BN pair.
"""

from __future__ import annotations

from typing import Any

import numpy as np

OPSET = 17


def fold_batch_norm(weight: np.ndarray, bias: np.ndarray | None, bn: dict[str, np.ndarray],
                    eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Conv weight (out, in/groups, kh, kw) and bias folded with a BN's weight/bias/running_mean/running_var.

    Returns float32 (weight, bias). Raises ValueError when the BN's size differs from the conv's outputs.
    """
    out = weight.shape[0]
    for key in ("weight", "bias", "running_mean", "running_var"):
        if bn[key].shape != (out,):
            raise ValueError(f"batch norm {key} has shape {bn[key].shape}, the conv has {out} outputs")
    scale = bn["weight"].astype(np.float64) / np.sqrt(bn["running_var"].astype(np.float64) + eps)
    b0 = np.zeros(out) if bias is None else bias.astype(np.float64)
    w = weight.astype(np.float64) * scale[:, None, None, None]
    b = (b0 - bn["running_mean"]) * scale + bn["bias"]
    return w.astype(np.float32), b.astype(np.float32)


class GraphWriter:
    """Collects ONNX nodes and initializers; `model()` returns a checked ModelProto."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._n = 0

    def const(self, name: str, array: np.ndarray) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(self, op: str, inputs: list[str], output: str | None = None, **attrs: Any) -> str:
        from onnx import helper

        if output is None:
            self._n += 1
            output = f"{op.lower()}_{self._n}"
        self.nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def conv(self, x: str, name: str, weight: np.ndarray, bias: np.ndarray, *, stride: int = 1,
             pads: tuple[int, int, int, int] | str | None = None, groups: int = 1) -> str:
        """A Conv with explicit pads (top, left, bottom, right), default (k - 1) // 2 on every side, or
        pads="SAME_UPPER" for TensorFlow's 'SAME' padding (the extra row/column at the bottom/right)."""
        k = weight.shape[2]
        w = self.const(f"{name}.w", weight)
        b = self.const(f"{name}.b", bias)
        attrs: dict[str, Any] = {"kernel_shape": [k, weight.shape[3]], "strides": [stride, stride], "group": groups}
        if isinstance(pads, str):
            attrs["auto_pad"] = pads
        else:
            p = (k - 1) // 2
            attrs["pads"] = list(pads if pads is not None else (p, p, p, p))
        return self.node("Conv", [x, w, b], name, **attrs)

    def relu6(self, x: str) -> str:
        if "zero_f" not in {t.name for t in self.inits}:
            self.const("zero_f", np.array(0.0, np.float32))
            self.const("six_f", np.array(6.0, np.float32))
        return self.node("Clip", [x, "zero_f", "six_f"], f"{x}/relu6")

    def model(self, graph_name: str, inputs: list[Any], outputs: list[Any]) -> Any:
        import onnx
        from onnx import helper

        graph = helper.make_graph(self.nodes, graph_name, inputs, outputs, initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="kira")
        model.ir_version = 8  # readable by onnxruntime >= 1.14
        onnx.checker.check_model(model)
        return model


def image_head(g: GraphWriter, mean: tuple[float, float, float], std: tuple[float, float, float]) -> str:
    """Normalise the input `pixels` (N, 3, H, W) RGB in [0, 1]: (x - mean) / std per channel."""
    m = g.const("pixel_mean", np.array(mean, np.float32).reshape(1, 3, 1, 1))
    s = g.const("pixel_std", np.array(std, np.float32).reshape(1, 3, 1, 1))
    return g.node("Div", [g.node("Sub", ["pixels", m], "pixels/centred"), s], "pixels/normalised")


def pooled_outputs(g: GraphWriter, feature: str, fc_weight: np.ndarray, fc_bias: np.ndarray) -> None:
    """From the last feature map: `feature_map` (N, C, h, w), `pooled` (N, C) mean and `logits` (N, classes)."""
    g.node("Identity", [feature], "feature_map")
    pooled = g.node("GlobalAveragePool", ["feature_map"], "gap")
    g.const("flat_shape", np.array([0, -1], np.int64))
    g.node("Reshape", [pooled, "flat_shape"], "pooled")
    w = g.const("fc.w", fc_weight.astype(np.float32).T.copy())
    b = g.const("fc.b", fc_bias.astype(np.float32))
    g.node("Add", [g.node("MatMul", ["pooled", w], "fc/mm"), b], "logits")


def io_values(channels: int, classes: int) -> tuple[list[Any], list[Any]]:
    """Graph inputs/outputs shared by the image CNNs (dynamic batch and size)."""
    from onnx import TensorProto, helper

    inputs = [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["batch", 3, "height", "width"])]
    outputs = [
        helper.make_tensor_value_info("feature_map", TensorProto.FLOAT, ["batch", channels, "fh", "fw"]),
        helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", channels]),
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes]),
    ]
    return inputs, outputs
