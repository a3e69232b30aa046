"""kira.images.load_image on real files: 16-bit PNGs, EXIF-rotated JPEGs and DICOM (pydicom's test files)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kira.images import ImageError, load_image

Image = pytest.importorskip("PIL.Image")


def _mr_pixels() -> np.ndarray:
    """Real 16-bit MR pixels from pydicom's test data (64 x 64, stored range 0..4000 or so)."""
    pydicom = pytest.importorskip("pydicom")
    from pydicom.data import get_testdata_file

    return pydicom.dcmread(get_testdata_file("MR_small.dcm")).pixel_array


def test_16bit_png_from_a_path_keeps_its_range(tmp_path):
    raw = _mr_pixels().astype(np.uint16)
    assert raw.max() > 255  # really needs more than 8 bits
    path = tmp_path / "mr16.png"
    Image.fromarray(raw).save(path)
    with Image.open(path) as im:
        assert im.mode.startswith("I")  # Pillow reads it as 16-bit
    got = load_image(path)
    assert got.shape == (*raw.shape, 3) and got.dtype == np.uint8
    want = ((raw.astype(np.int64) - raw.min()) * 255 // (int(raw.max()) - int(raw.min()))).astype(np.uint8)
    np.testing.assert_array_equal(got[..., 0], want)  # min..max rescale, as the docstring says
    assert (got == 255).mean() < 0.01  # not saturated white
    np.testing.assert_array_equal(got, load_image(raw))  # path and array agree
    with Image.open(path) as im:
        np.testing.assert_array_equal(load_image(im), got)  # and a PIL image too


def test_12bit_photo_in_a_16bit_png_is_rescaled_not_clipped(tmp_path):
    camera = pytest.importorskip("skimage.data").camera()
    raw = (camera.astype(np.uint16) * 16 + 5)  # a 12-bit sensor's range
    path = tmp_path / "camera12.png"
    Image.fromarray(raw).save(path)
    got = load_image(path)[..., 0].astype(np.int64)
    # the rescaled image is the original photo again, to within rounding
    assert np.abs(got - camera.astype(np.int64)).max() <= 1
    assert np.corrcoef(got.ravel(), camera.ravel())[0, 1] > 0.999


@pytest.mark.parametrize("orientation, stored", [(6, "ROTATE_90"), (8, "ROTATE_270"), (3, "ROTATE_180")])
def test_exif_rotated_jpeg_loads_upright(tmp_path, orientation, stored):
    from sklearn.datasets import load_sample_image

    photo = load_sample_image("china.jpg")  # (427, 640, 3), a real photo
    upright = tmp_path / "upright.jpg"
    Image.fromarray(photo).save(upright, quality=95)
    # store the pixels turned, and say in EXIF how to turn them back (as a phone camera does)
    turned = Image.fromarray(photo).transpose(getattr(Image.Transpose, stored))
    exif = Image.Exif()
    exif[0x0112] = orientation  # Orientation
    rotated = tmp_path / f"rotated{orientation}.jpg"
    turned.save(rotated, quality=95, exif=exif.tobytes())
    with Image.open(rotated) as im:
        assert im.getexif()[0x0112] == orientation and im.size == turned.size
    got = load_image(rotated).astype(np.int64)
    want = load_image(upright).astype(np.int64)
    assert got.shape == want.shape == photo.shape
    assert np.abs(got - want).mean() < 3.0  # the same picture up to JPEG noise
    assert np.abs(np.rot90(got, 2) - want).mean() > 20  # and not the turned one


def _dicom(name: str):
    pydicom = pytest.importorskip("pydicom")
    from pydicom.data import get_testdata_file

    path = get_testdata_file(name)
    return path, pydicom.dcmread(path)


def test_dicom_window_is_applied():
    path, ds = _dicom("MR_small.dcm")
    c, w = float(ds.WindowCenter), float(ds.WindowWidth)
    x = ds.pixel_array.astype(np.float64)
    # DICOM PS3.3 C.11.2.1.2 linear window, to 0..255
    want = np.clip(((x - (c - 0.5)) / (w - 1) + 0.5) * 255.0, 0, 255)
    got = load_image(path)
    assert got.shape == (ds.Rows, ds.Columns, 3)
    assert np.abs(got[..., 0].astype(np.float64) - want).max() <= 1.0
    # and this is not the plain min..max rescale
    plain = (x - x.min()) * 255 / (x.max() - x.min())
    assert np.abs(got[..., 0] - plain).mean() > 5


def test_dicom_modality_lut_without_window_gives_a_rescaled_ct():
    path, ds = _dicom("CT_small.dcm")
    assert ds.get("WindowCenter") is None and float(ds.RescaleIntercept) != 0
    hu = ds.pixel_array * float(ds.RescaleSlope) + float(ds.RescaleIntercept)
    got = load_image(path)[..., 0].astype(np.float64)
    want = (hu - hu.min()) * 255 / (hu.max() - hu.min())
    assert np.abs(got - want).max() <= 1.0


def test_dicom_monochrome1_is_inverted(tmp_path):
    path, ds = _dicom("MR_small.dcm")
    normal = load_image(path)
    ds.PhotometricInterpretation = "MONOCHROME1"
    inverted = tmp_path / "mono1.dcm"
    ds.save_as(inverted)
    np.testing.assert_array_equal(load_image(inverted), 255 - normal)


def test_dicom_without_suffix_is_recognised_by_its_preamble(tmp_path):
    path, _ = _dicom("MR_small.dcm")
    copy = tmp_path / "scan_without_suffix"
    copy.write_bytes(Path(path).read_bytes())
    np.testing.assert_array_equal(load_image(copy), load_image(path))


def test_dicom_errors_name_the_problem(tmp_path):
    bad = tmp_path / "broken.dcm"
    bad.write_bytes(b"not a dicom file at all")
    with pytest.raises(ImageError, match="cannot read DICOM"):
        load_image(bad)
    path, _ = _dicom("MR_small.dcm")
    with pytest.raises(ImageError, match="over the limit"):
        load_image(path, max_pixels=100)


def test_a_raised_max_pixels_overrides_pillows_own_bomb_limit(tmp_path, monkeypatch):
    from skimage import data

    photo = data.astronaut()  # read before the limit is lowered: skimage decodes with Pillow too
    path = tmp_path / "astronaut.png"
    Image.fromarray(photo).save(path)  # 512 x 512 = 262,144 pixels
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100_000)  # Pillow alone refuses > 200,000 and warns > 100,000
    with pytest.raises(Image.DecompressionBombError), Image.open(path):
        pass
    pixels = load_image(path, max_pixels=300_000)  # kira's limit, raised by the caller, is the one that applies
    np.testing.assert_array_equal(pixels, photo)
    assert Image.MAX_IMAGE_PIXELS == 100_000  # restored after the decode
    with pytest.raises(ImageError, match="over the limit"):
        load_image(path, max_pixels=200_000)  # still refused by kira's own check when over its limit
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)  # an application's own "no limit" is left alone
    assert load_image(path, max_pixels=300_000).shape == (512, 512, 3)
    assert Image.MAX_IMAGE_PIXELS is None
