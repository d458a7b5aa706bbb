"""Images from untrusted bytes into RGB pixels a vision projector reads.

Every image a request or a person hands in goes through ``decode_image`` before anything
native sees it (rule 7): its encoded size, its pixel count (read from the header, before any
pixel is decoded, so a decompression bomb costs nothing), one frame only (the first of a
GIF or WebP animation), EXIF orientation applied, and the result downscaled so that its
longer side is at most ``max_side``. What comes out is plain RGB bytes and a content hash of
them: the prefix cache keys an image's tokens by that hash, so the same picture sent again
(as PNG or re-encoded, as long as its pixels are equal) reuses its prompt state.

Pillow is the decoder: it reads PNG, JPEG, WebP and GIF, and its errors for truncated or
malformed files become one ``InvalidRequest`` naming the image.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import logging
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from .bounded_files import read_bounded
from .errors import InvalidRequest

log = logging.getLogger(__name__)

# An encoded image larger than this is refused before it is opened (a screenshot of a 4K
# screen as PNG is 5-15 MB).
MAX_IMAGE_BYTES = 20 * 1024 * 1024
# Pixels in the image as its header declares them: 8K x 8K. Decoding allocates 3-4 bytes a
# pixel, so this bounds one image at ~256 MB of RAM before downscaling.
MAX_IMAGE_PIXELS = 8192 * 8192
# Projectors read at most ~1-2 K pixels a side (Gemma 3: 896, SmolVLM: 512 per tile, Qwen
# VL: a budget of ~1-2 M pixels); larger images are downscaled first.
DEFAULT_MAX_SIDE = 2048
FORMATS = ("PNG", "JPEG", "WEBP", "GIF")


@dataclass(frozen=True)
class ImageInput:
    """An image ready for a projector: RGB bytes, row-major, 3 bytes a pixel."""

    width: int
    height: int
    rgb: bytes = field(repr=False)
    # sha256 of the size and pixels: the key of its tokens in the prefix cache.
    digest: str

    @property
    def label(self) -> str:
        return f"{self.width}x{self.height} image {self.digest[:12]}"


def image_from_rgb(width: int, height: int, rgb: bytes) -> ImageInput:
    if width <= 0 or height <= 0 or len(rgb) != width * height * 3:
        raise InvalidRequest(f"an image of {width}x{height} pixels needs {width * height * 3} RGB bytes", param="image")
    digest = hashlib.sha256(f"{width}x{height}:".encode() + rgb).hexdigest()
    return ImageInput(width, height, rgb, digest)


def read_image_file(path: Path | str, what: str | None = None, max_bytes: int = MAX_IMAGE_BYTES) -> bytes:
    """The bytes of the image file ``path`` (not yet decoded): a regular file of at most
    ``max_bytes``, checked before it is read (``/dev/zero``, a FIFO or a 2 GB file is refused
    at once, with no memory spent)."""
    return read_bounded(path, max_bytes, what or f"the image {Path(path).name}")


def decode_image(data: bytes, *, max_side: int = DEFAULT_MAX_SIDE, max_bytes: int = MAX_IMAGE_BYTES,
                 max_pixels: int = MAX_IMAGE_PIXELS, what: str = "the image") -> ImageInput:
    """Decode ``data`` (PNG, JPEG, WebP or GIF) into an ``ImageInput``; ``InvalidRequest``
    naming ``what`` for anything that is not a readable image within the bounds."""
    from PIL import Image, ImageOps, UnidentifiedImageError  # noqa: PLC0415 — Pillow loads only when an image comes

    if not data:
        raise InvalidRequest(f"{what} is empty", param="image")
    if len(data) > max_bytes:
        raise InvalidRequest(f"{what} is {len(data) / 1e6:.1f} MB; images of up to {max_bytes // (1024 * 1024)} MB "
                             "are accepted", param="image")
    try:
        with warnings.catch_warnings():
            # Pillow warns, then raises, past its own bomb limit; ours is checked below.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            opened = Image.open(io.BytesIO(data), formats=FORMATS)
            width, height = opened.size
            if width <= 0 or height <= 0 or width * height > max_pixels:
                raise InvalidRequest(f"{what} declares {width}x{height} pixels; at most {max_pixels:,} pixels "
                                     "are accepted", param="image")
            opened.seek(0)  # the first frame of an animation; the others are never decoded
            opened.load()
            image = (ImageOps.exif_transpose(opened) or opened).convert("RGB")
    except InvalidRequest:
        raise
    except Image.DecompressionBombError as exc:  # past Pillow's own limit, before ours is read
        raise InvalidRequest(f"{what} declares too many pixels; at most {max_pixels:,} are accepted",
                             param="image") from exc
    except UnidentifiedImageError as exc:
        raise InvalidRequest(f"{what} is not a PNG, JPEG, WebP or GIF image", param="image") from exc
    except (OSError, ValueError, SyntaxError, EOFError) as exc:
        # Truncated data, bad chunks, a broken EXIF block: Pillow's own words say which.
        raise InvalidRequest(f"{what} could not be decoded: {exc}", param="image") from exc
    if max(image.size) > max_side:
        image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    return image_from_rgb(image.width, image.height, image.tobytes())


def image_from_data_url(url: str, *, what: str = "the image", param: str = "image",
                        max_bytes: int = MAX_IMAGE_BYTES) -> ImageInput:
    """A ``data:image/...;base64,...`` URL (what the OpenAI and Responses APIs send) decoded.

    http(s) URLs are refused here: the API fetches them first, into data: URLs, only when its
    settings allow it and only from public addresses (``api/shared/image_fetch``)."""
    if not isinstance(url, str) or not url.startswith("data:"):
        shown = url[:60] if isinstance(url, str) else type(url).__name__
        raise InvalidRequest(f"{what} must be a data: URL with base64 image data (fetching images from "
                             f"{shown!r} is off)", param=param)
    head, comma, body = url.partition(",")
    if not comma or not head.endswith(";base64"):
        raise InvalidRequest(f"{what} must be a base64 data: URL (data:image/png;base64,...)", param=param)
    return image_from_base64(body, what=what, param=param, max_bytes=max_bytes)


def image_from_base64(body: str, *, what: str = "the image", param: str = "image",
                      max_bytes: int = MAX_IMAGE_BYTES) -> ImageInput:
    """Base64 image bytes (the Anthropic API's ``source.data``) decoded; the size is checked
    on the text, before it is decoded."""
    if not isinstance(body, str) or not body:
        raise InvalidRequest(f"{what} has no data", param=param)
    if len(body) * 3 // 4 > max_bytes:
        raise InvalidRequest(f"{what} is larger than the {max_bytes // (1024 * 1024)} MB an image may be",
                             param=param)
    try:
        data = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidRequest(f"{what} is not valid base64", param=param) from exc
    try:
        return decode_image(data, what=what, max_bytes=max_bytes)
    except InvalidRequest as exc:
        raise InvalidRequest(str(exc), param=param) from exc
