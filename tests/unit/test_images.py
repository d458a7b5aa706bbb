"""Images from untrusted bytes (engine/runtime/images.py): what is read, what is refused.

Real Pillow on real encoded files made here; the hostile ones are the issue's list: a
truncated PNG, a decompression bomb (huge declared dimensions), a JPEG with a huge EXIF
block, a GIF with thousands of frames, and bytes past the size limit.
"""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from PIL import Image

from inglenook.engine.base import InvalidRequest
from inglenook.engine.base import decode_image


def encode(image: Image.Image, fmt: str, **options: object) -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt, **options)
    return out.getvalue()


def gradient(width: int, height: int) -> Image.Image:
    image = Image.new("RGB", (width, height))
    image.putdata([(x * 255 // max(1, width - 1), y * 255 // max(1, height - 1), 40)
                   for y in range(height) for x in range(width)])
    return image


def png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def test_png_jpeg_webp_decode_to_the_same_pixels_count_and_a_content_hash():
    picture = gradient(32, 16)
    png = decode_image(encode(picture, "PNG"))
    assert (png.width, png.height) == (32, 16) and len(png.rgb) == 32 * 16 * 3
    assert decode_image(encode(picture, "PNG", optimize=True)).digest == png.digest  # same pixels, same key
    assert decode_image(encode(gradient(32, 17), "PNG")).digest != png.digest
    for fmt in ("JPEG", "WEBP"):
        other = decode_image(encode(picture, fmt))
        assert (other.width, other.height) == (32, 16)


def test_exif_orientation_is_applied():
    picture = gradient(40, 20)
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise to display
    rotated = decode_image(encode(picture, "JPEG", exif=exif.tobytes()))
    assert (rotated.width, rotated.height) == (20, 40)


def test_only_the_first_frame_of_a_gif_is_read_even_with_thousands_of_frames():
    frames = [Image.new("P", (8, 8), i % 256) for i in range(3000)]
    data = encode(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=10, loop=0)
    first = decode_image(data)
    alone = decode_image(encode(frames[0], "GIF"))
    assert (first.width, first.height) == (8, 8)
    assert first.digest == alone.digest


def test_large_images_are_downscaled_keeping_their_shape():
    image = decode_image(encode(gradient(300, 150), "PNG"), max_side=100)
    assert (image.width, image.height) == (100, 50)


def test_a_truncated_png_is_a_clear_invalid_request():
    data = encode(gradient(64, 64), "PNG")
    with pytest.raises(InvalidRequest, match="could not be decoded") as caught:
        decode_image(data[: len(data) // 2])
    assert caught.value.param == "image"


def test_a_decompression_bomb_is_refused_before_any_pixel_is_decoded():
    # A valid PNG header declaring 100,000 x 100,000 pixels and a tiny body.
    header = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0)
    data = (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header) + png_chunk(b"IDAT", zlib.compress(b"\0" * 64))
            + png_chunk(b"IEND", b""))
    with pytest.raises(InvalidRequest, match="pixels"):
        decode_image(data)
    # Under Pillow's own limit but over ours: still refused, by our message.
    header = struct.pack(">IIBBBBB", 9000, 9000, 8, 2, 0, 0, 0)
    data = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header) + png_chunk(b"IEND", b"")
    with pytest.raises(InvalidRequest, match="declares 9000x9000 pixels"):
        decode_image(data)


def test_a_jpeg_with_a_huge_exif_block_still_decodes():
    exif = Image.Exif()
    exif[0x010E] = "x" * 60_000  # ImageDescription: close to the 64 KB an APP1 segment holds
    data = encode(gradient(16, 16), "JPEG", exif=exif.tobytes())
    assert len(data) > 60_000
    assert decode_image(data).width == 16


def test_oversized_empty_and_non_image_bytes_are_refused():
    with pytest.raises(InvalidRequest, match="MB"):
        decode_image(b"\0" * 2048, max_bytes=1024)
    with pytest.raises(InvalidRequest, match="empty"):
        decode_image(b"")
    with pytest.raises(InvalidRequest, match="not a PNG, JPEG, WebP or GIF"):
        decode_image(b"hello, this is text")
