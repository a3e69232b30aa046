"""EfficientNet-Lite0 built as ONNX from the shipped checkpoint agrees with a plain-torch reference."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from skimage import data  # noqa: E402

from kira.models.cnn import weights as W  # noqa: E402
from kira.models.cnn.encoder import EFFICIENTNET_LITE0_224, CnnImageEncoder  # noqa: E402
from kira.models.torch_checkpoint import load_state_dict  # noqa: E402

F = torch.nn.functional
STRIDE2 = {1, 3, 5, 11}


def _same_conv(x, w, stride, groups):
    """TensorFlow 'SAME' padding: the extra row/column goes at the bottom/right."""
    k = w.shape[-1]
    pads = []
    for size in (x.shape[-1], x.shape[-2]):
        out = math.ceil(size / stride)
        total = max((out - 1) * stride + k - size, 0)
        pads += [total // 2, total - total // 2]
    return F.conv2d(F.pad(x, pads), w, stride=stride, groups=groups)


def _reference(sd, x):
    t = {k: torch.from_numpy(v) for k, v in sd.items()}

    def cbr(x, conv, bn, stride=1, act=True):
        w = t[f"{conv}.weight"]
        groups = w.shape[0] if w.shape[1] == 1 and w.shape[-1] > 1 else 1
        y = _same_conv(x, w, stride, groups)
        y = F.batch_norm(y, t[f"{bn}.running_mean"], t[f"{bn}.running_var"], t[f"{bn}.weight"], t[f"{bn}.bias"],
                         False, 0.0, 1e-3)
        return F.relu6(y) if act else y

    x = cbr(x, "_conv_stem", "_bn0", 2)
    for i in range(16):
        p, inp = f"_blocks.{i}", x
        if f"{p}._expand_conv.weight" in t:
            x = cbr(x, f"{p}._expand_conv", f"{p}._bn0")
        x = cbr(x, f"{p}._depthwise_conv", f"{p}._bn1", 2 if i in STRIDE2 else 1)
        x = cbr(x, f"{p}._project_conv", f"{p}._bn2", act=False)
        if i not in STRIDE2 and inp.shape == x.shape:
            x = x + inp
    fmap = cbr(x, "_conv_head", "_bn1")
    pooled = fmap.mean((2, 3))
    return fmap, pooled, pooled @ t["_fc.weight"].T + t["_fc.bias"]


def test_efficientnet_lite0_matches_torch_and_names_real_photos(tmp_path):
    enc = CnnImageEncoder(EFFICIENTNET_LITE0_224, cache=tmp_path, prefer_cuda=False, threads=2)
    images = [data.chelsea(), data.coffee(), data.camera(), data.rocket()]
    fwd = enc.forward(images)
    from kira.images import load_image

    x = torch.from_numpy(np.stack([enc.preprocess(load_image(im)) for im in images]))
    with torch.no_grad():
        fmap, pooled, logits = _reference(load_state_dict(W.weight_file(W.EFFICIENTNET_LITE0)), (x * 255 - 127) / 128)
    np.testing.assert_allclose(np.stack([f.feature_map for f in fwd]), fmap.numpy(), atol=1e-4, rtol=0)
    np.testing.assert_allclose(np.stack([f.pooled for f in fwd]), pooled.numpy(), atol=1e-4, rtol=0)
    top = [int(f.logits.argmax()) for f in fwd]
    assert top == [int(v) for v in logits.numpy().argmax(1)]
    assert 281 <= top[0] <= 285 and top[1] == 967  # a domestic cat; espresso
    assert enc.dim == 1280 and enc.config.name == "efficientnet_lite0-imagenet-224"
