"""kira.images: what a refusal says (issue 34.11). Each test failed before its fix."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest

from kira.images import ImageError, load_image


def test_a_side_over_the_limit_is_named_as_a_side_not_a_pixel_count():
    with pytest.raises(ImageError) as err:
        load_image(np.zeros((1, 100_000), np.uint8))
    message = str(err.value)
    assert "100,000 on a side" in message and "20,000 per side" in message
    assert "64,000,000" not in message  # 100,000 pixels is far under the pixel limit
    with pytest.raises(ImageError, match="over the limit of 1,000"):
        load_image(np.zeros((100, 100), np.uint8), max_pixels=1000)


def test_a_directory_or_a_device_is_named_as_such(tmp_path):
    with pytest.raises(ImageError, match="is a directory, not an image file"):
        load_image(tmp_path)
    if os.path.exists("/dev/zero"):
        with pytest.raises(ImageError, match="not a regular file"):
            load_image("/dev/zero")
    with pytest.raises(ImageError, match="no such image file"):
        load_image(tmp_path / "missing.png")


def test_messages_about_in_memory_images_show_no_python_reprs():
    import skimage.data
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(skimage.data.coffee()).save(buf, format="PNG")
    truncated = io.BytesIO(buf.getvalue()[: len(buf.getvalue()) // 3])
    with Image.open(truncated) as im:  # the header reads; the pixels do not
        with pytest.raises(ImageError) as err:
            load_image(im)
    assert "object at 0x" not in str(err.value) and "cannot decode the image" in str(err.value)


def test_an_upright_rgb_file_is_read_as_before_and_an_exif_turned_one_is_turned(tmp_path):
    import skimage.data
    from PIL import Image

    photo = skimage.data.astronaut()
    Image.fromarray(photo).save(tmp_path / "a.png")
    np.testing.assert_array_equal(load_image(tmp_path / "a.png"), photo)
    exif = Image.Exif()
    exif[0x0112] = 6  # rotated 90 degrees clockwise when displayed
    Image.fromarray(photo).save(tmp_path / "r.jpg", exif=exif, quality=95)
    assert load_image(tmp_path / "r.jpg").shape == (photo.shape[1], photo.shape[0], 3)
