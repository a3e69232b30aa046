"""MobileNetV2 built as ONNX from the shipped checkpoint agrees with a plain-torch reference on real images."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from skimage import data  # noqa: E402

from kira.models.cnn import weights as W  # noqa: E402
from kira.models.cnn.encoder import CnnImageEncoder  # noqa: E402
from kira.models.torch_checkpoint import load_state_dict  # noqa: E402

nn = torch.nn

# The paper's (t, c, n, s) table, as torchvision's MobileNetV2 uses it.
SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


def _cbr(inp: int, out: int, k: int = 3, stride: int = 1, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(inp, out, k, stride, (k - 1) // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(out), nn.ReLU6(inplace=False))


class _Inverted(nn.Module):
    def __init__(self, inp: int, out: int, stride: int, t: int) -> None:
        super().__init__()
        hidden = inp * t
        self.skip = stride == 1 and inp == out
        layers = [] if t == 1 else [_cbr(inp, hidden, k=1)]
        layers += [_cbr(hidden, hidden, stride=stride, groups=hidden), nn.Conv2d(hidden, out, 1, bias=False),
                   nn.BatchNorm2d(out)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.skip else self.conv(x)


class _ReferenceMobileNetV2(nn.Module):
    """torchvision's MobileNetV2 layout in plain torch (torchvision itself is not installable here)."""

    def __init__(self) -> None:
        super().__init__()
        feats: list[nn.Module] = [_cbr(3, 32, stride=2)]
        inp = 32
        for t, c, n, s in SETTINGS:
            for i in range(n):
                feats.append(_Inverted(inp, c, s if i == 0 else 1, t))
                inp = c
        feats.append(_cbr(inp, 1280, k=1))
        self.features = nn.Sequential(*feats)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, 1000))

    def forward(self, x):
        f = self.features(x)
        pooled = f.mean((2, 3))
        return f, pooled, self.classifier(pooled)


@pytest.fixture(scope="module")
def reference():
    model = _ReferenceMobileNetV2()
    sd = load_state_dict(W.weight_file(W.MOBILENET_V2))
    model.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()}, strict=True)
    return model.eval()


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    return CnnImageEncoder(cache=tmp_path_factory.mktemp("cnn"), prefer_cuda=False, threads=2)


IMAGES = {"chelsea": data.chelsea, "coffee": data.coffee, "astronaut": data.astronaut, "rocket": data.rocket,
          "camera": data.camera, "hubble": data.hubble_deep_field}


def test_onnx_matches_torch_reference_on_real_images(reference, encoder):
    images = [fn() for fn in IMAGES.values()]
    fwd = encoder.forward(images)
    ours_logits = np.stack([f.logits for f in fwd])
    ours_pooled = np.stack([f.pooled for f in fwd])
    ours_map = np.stack([f.feature_map for f in fwd])
    from kira.images import load_image

    x = torch.from_numpy(np.stack([encoder.preprocess(load_image(im)) for im in images]))
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    with torch.no_grad():
        fmap, pooled, logits = reference((x - mean) / std)
    np.testing.assert_allclose(ours_map, fmap.numpy(), atol=1e-4, rtol=0)
    np.testing.assert_allclose(ours_pooled, pooled.numpy(), atol=1e-4, rtol=0)
    np.testing.assert_allclose(ours_logits, logits.numpy(), atol=2e-4, rtol=0)
    assert list(ours_logits.argmax(1)) == list(logits.numpy().argmax(1))


def test_top1_on_real_photos_is_the_right_kind_of_thing(encoder):
    from kira.models.cnn.labels import imagenet_labels

    labels = imagenet_labels()
    top = {name: int(encoder.probabilities(fn()).argmax()) for name, fn in IMAGES.items()}
    assert 281 <= top["chelsea"] <= 285, labels[top["chelsea"]]  # the domestic cat classes
    assert labels[top["coffee"]].name in ("espresso", "cup", "coffee mug"), labels[top["coffee"]]


def test_one_pass_gives_document_and_box_vectors(encoder):
    image = data.chelsea()
    h, w = image.shape[:2]
    boxes = [None, (0, 0, w, h), (0, 0, w // 2, h // 2), (w // 2, h // 2, w, h)]
    vecs = encoder.encode_boxes(image, boxes)
    assert vecs.shape == (4, encoder.dim) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    whole = encoder.encode([image])[0]
    np.testing.assert_allclose(vecs[0], whole, atol=1e-6)  # None is the document vector
    np.testing.assert_allclose(vecs[1], whole, atol=1e-5)  # the full box pools the same cells
    # two different quarters are different vectors, each closer to the whole than to nothing
    assert float(vecs[2] @ vecs[3]) < 0.99
    # a box's vector is the overlap-weighted mean of the grid: check one cell exactly
    f = encoder.forward([image])[0]
    _, fh, fw = f.feature_map.shape
    v = f.box_vector((0, 0, w / fw, h / fh))
    np.testing.assert_allclose(v, f.feature_map[:, 0, 0], atol=1e-5)
    # a zero-area box falls back to the cell holding its centre
    np.testing.assert_allclose(f.box_vector((w - 1, h - 1, w - 1, h - 1)), f.feature_map[:, -1, -1], atol=1e-6)


def test_odd_inputs_are_converted_not_refused(encoder):
    grey = data.camera()  # (512, 512) uint8
    tiny = data.chelsea()[:9, :13]  # smaller than the network input: upsampled
    rgba = np.dstack([data.coffee(), np.full(data.coffee().shape[:2], 255, np.uint8)])
    from PIL import Image

    deep = data.camera().astype(np.uint16) * 257  # 16-bit
    palette = Image.fromarray(data.coffee()).convert("P")
    v = encoder.encode([grey, tiny, rgba, deep, palette])
    assert v.shape == (5, encoder.dim) and np.isfinite(v).all()
    assert float(v[3] @ v[0]) > 0.99  # the 16-bit copy is rescaled to the same picture
    assert float(v[4] @ encoder.encode([data.coffee()])[0]) > 0.9  # palette -> RGB
    np.testing.assert_allclose(v[2], encoder.encode([data.coffee()])[0], atol=1e-6)
    with pytest.raises(ValueError, match="sequence"):
        encoder.encode(data.camera()[..., None].repeat(3, 2))
