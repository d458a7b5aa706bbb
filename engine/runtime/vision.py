"""Images into a loaded model through llama.cpp's multimodal library (libmtmd).

``VisionEncoder`` holds one libmtmd context beside a loaded text model: it splits a prompt
with image markers into text tokens and image chunks (``tokenize``) and turns an image
chunk into the vectors the text model reads in place of token embeddings (``encode``).
``ImageTable`` is the model's side of it: each image's positions in a prompt carry
placeholder ids above the vocabulary, derived from the image's content hash, so every token
list the engine already keeps (a slot's KV tokens, the prefix cache, state files on disk)
also names the images in it, and the same picture in a follow-up question or after a
restart matches the cached prefix like any text would. The step
(``LoadedModel._decode_images``) looks the placeholder ids up here and feeds the vectors.

Encoding is lazy: a chunk is kept until its rows are decoded, and the vectors of recent
images are kept too (bounded), so a prompt whose image is already in a restored prefix
never runs the encoder.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..base import ImageInput, InvalidRequest, ModelLoadError, ProjectorInfo
from .native import route_mtmd_log

log = logging.getLogger(__name__)

# Placeholder ids: 2^30 plus 30 bits from the image's hash, one id per position. Token ids of
# real vocabularies are far below, and the ids still fit the int32 of state files.
IMAGE_ID_BASE = 1 << 30
_ID_SPACE = 1 << 30
# Encoded images kept per model (their vectors: n_tokens x n_embd float32; a Gemma 3 image
# is 256 x 2560 x 4 = 2.6 MB) and chunks waiting to be encoded.
KEEP_ENCODED = 32
KEEP_PENDING = 16


def is_image_id(token: int) -> bool:
    return token >= IMAGE_ID_BASE


def mtmd_available() -> tuple[bool, str]:
    """Whether this llama.cpp build has libmtmd (``doctor``): (available, why not)."""
    try:
        import llama_cpp.mtmd_cpp  # noqa: F401, PLC0415 — loading the library is the check
    except (ImportError, OSError, AttributeError) as exc:
        return False, f"llama.cpp was built without its multimodal library (libmtmd): {exc}"
    return True, ""


@dataclass
class ImageSpan:
    """One image's positions in a prompt: its placeholder ids, and the chunk that encodes it."""

    digest: str
    ids: list[int]
    chunk: Any = field(default=None, repr=False)  # an owned mtmd_input_chunk until encoded


@dataclass
class Piece:
    """A prompt split by ``VisionEncoder.tokenize``: text tokens or one image."""

    tokens: list[int] | None = None
    image: ImageSpan | None = None


@dataclass
class EncoderTimings:
    images_encoded: int = 0
    encode_seconds: float = 0.0


class VisionEncoder:
    """A libmtmd context for ``projector`` beside the llama.cpp model ``model_pointer``."""

    def __init__(self, model_pointer: Any, projector: ProjectorInfo, threads: int, use_gpu: bool) -> None:
        ok, why = mtmd_available()
        if not ok:
            raise ModelLoadError(why)
        import llama_cpp.mtmd_cpp as mtmd  # noqa: PLC0415 — libmtmd loads with the first image

        route_mtmd_log(mtmd)  # before its first line: it logs each prompt piece it reads
        self._mtmd = mtmd
        self.projector = projector
        params = mtmd.mtmd_context_params_default()
        params.use_gpu = use_gpu
        params.n_threads = max(1, threads)
        params.print_timings = False
        params.warmup = False  # the first image pays for it; loading a model stays quick
        self._ctx = mtmd.mtmd_init_from_file(str(projector.path).encode(), model_pointer, params)
        if not self._ctx:
            raise ModelLoadError(f"llama.cpp could not load the vision projector {projector.path.name} "
                                 "(its log says why)")
        if not mtmd.mtmd_support_vision(self._ctx):
            self.close()
            raise ModelLoadError(f"{projector.path.name} is not an image projector")
        if mtmd.mtmd_decode_use_mrope(self._ctx):
            self.close()
            raise ModelLoadError(f"{projector.path.name} ({projector.projector_type}) places image tokens in "
                                 "2-D positions (M-RoPE), which Inglenook does not support yet")
        self.marker = (mtmd.mtmd_default_marker() or b"<__media__>").decode()
        self.timings = EncoderTimings()
        self._lock = threading.Lock()  # libmtmd's context is not thread-safe

    def close(self) -> None:
        if self._ctx:
            self._mtmd.mtmd_free(self._ctx)
            self._ctx = None

    def non_causal(self, chunk: Any) -> bool:
        """Whether the text model must read this image's rows with full attention among them
        (Gemma 3): then the whole image goes into one decode."""
        return bool(self._mtmd.mtmd_decode_use_non_causal(self._ctx, chunk))

    def tokenize(self, text: str, images: list[ImageInput], add_special: bool) -> list[Piece]:
        """``text`` with one ``marker`` per image, split into text tokens and image chunks
        (libmtmd adds the model's own image start/end tokens around each)."""
        mtmd = self._mtmd
        if text.count(self.marker) != len(images):
            raise InvalidRequest(f"the prompt has {text.count(self.marker)} image markers for {len(images)} images")
        bitmaps = []
        chunks = mtmd.mtmd_input_chunks_init()
        try:
            for image in images:
                buffer = (ctypes.c_uint8 * len(image.rgb)).from_buffer_copy(image.rgb)
                bitmap = mtmd.mtmd_bitmap_init(image.width, image.height, buffer)
                if not bitmap:
                    raise InvalidRequest(f"libmtmd refused the {image.label}", param="image")
                bitmaps.append(bitmap)
                mtmd.mtmd_bitmap_set_id(bitmap, image.digest.encode())
            encoded = text.encode()
            source = mtmd.mtmd_input_text(encoded, len(encoded), add_special, True)
            array = (mtmd.mtmd_bitmap_p_ctypes * max(1, len(bitmaps)))(*bitmaps)
            with self._lock:
                status = mtmd.mtmd_tokenize(self._ctx, chunks, ctypes.byref(source), array, len(bitmaps))
            if status != 0:
                raise InvalidRequest(f"libmtmd could not read the prompt with its images (status {status})")
            return [self._piece(mtmd.mtmd_input_chunks_get(chunks, i))
                    for i in range(mtmd.mtmd_input_chunks_size(chunks))]
        finally:
            mtmd.mtmd_input_chunks_free(chunks)
            for bitmap in bitmaps:
                mtmd.mtmd_bitmap_free(bitmap)

    def _piece(self, chunk: Any) -> Piece:
        mtmd = self._mtmd
        kind = mtmd.mtmd_input_chunk_get_type(chunk)
        if kind == mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
            count = ctypes.c_size_t(0)
            pointer = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(count))
            return Piece(tokens=[int(pointer[i]) for i in range(count.value)])
        if kind != mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE:
            raise InvalidRequest("only images are supported as media")
        digest = (mtmd.mtmd_input_chunk_get_id(chunk) or b"").decode()
        n_tokens = int(mtmd.mtmd_input_chunk_get_n_tokens(chunk))
        return Piece(image=ImageSpan(digest, placeholder_ids(digest, n_tokens), mtmd.mtmd_input_chunk_copy(chunk)))

    def encode(self, span: ImageSpan, n_embd: int) -> np.ndarray:
        """The image's vectors, one row per position: shape (len(span.ids), n_embd)."""
        mtmd = self._mtmd
        if span.chunk is None:
            raise ModelLoadError(f"image {span.digest[:12]} is no longer held for encoding; send it again")
        started = time.perf_counter()
        with self._lock:
            status = mtmd.mtmd_encode_chunk(self._ctx, span.chunk)
            if status != 0:
                raise ModelLoadError(f"the vision projector failed to encode image {span.digest[:12]} (status {status})")
            pointer = mtmd.mtmd_get_output_embd(self._ctx)
            rows = np.ctypeslib.as_array(pointer, shape=(len(span.ids) * n_embd,)).astype(np.float32, copy=True)
        self.timings.images_encoded += 1
        self.timings.encode_seconds += time.perf_counter() - started
        return rows.reshape(len(span.ids), n_embd)

    def free_chunk(self, span: ImageSpan) -> None:
        with self._lock:  # never while an encoding thread reads it
            if span.chunk is not None:
                self._mtmd.mtmd_input_chunk_free(span.chunk)
                span.chunk = None


def placeholder_ids(digest: str, n_tokens: int) -> list[int]:
    """The ids of an image's ``n_tokens`` positions: consecutive from a start its hash picks."""
    start = int(digest[:16] or "0", 16) % (_ID_SPACE - n_tokens)
    return [IMAGE_ID_BASE + start + i for i in range(n_tokens)]


class ImageTable:
    """The images a model has seen: placeholder id -> (image, row); their chunks until
    encoded and their vectors for a while after.

    Encoding runs on a thread of its own (``prefetch``), started when a prompt about to be
    read holds an image no cached prefix covered: the scheduler's steps go on feeding the
    other streams meanwhile (``ready`` tells the step whether the image's rows can be
    decoded without waiting). ``rows`` waits for an encoding in flight, or encodes at once.
    Called from the scheduler's thread only; the encoding thread touches ``_encoding``'s
    futures and the encoder (whose own lock keeps libmtmd's context to one caller)."""

    def __init__(self, encoder: VisionEncoder, n_embd: int) -> None:
        self.encoder = encoder
        self.n_embd = n_embd
        self._spans: OrderedDict[str, ImageSpan] = OrderedDict()
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._by_id: dict[int, tuple[str, int]] = {}
        self._encoding: dict[str, Future[np.ndarray]] = {}
        self._pool: ThreadPoolExecutor | None = None

    def prefetch(self, tokens: list[int]) -> None:
        """Start encoding, off the calling thread, the images whose rows ``tokens`` hold and
        that are neither encoded nor being encoded."""
        for digest in self._digests(tokens):
            if digest in self._vectors or digest in self._encoding or digest not in self._spans:
                continue
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="image-encoder")
            span = self._spans[digest]
            self._encoding[digest] = self._pool.submit(self.encoder.encode, span, self.n_embd)

    def ready(self, tokens: list[int]) -> bool:
        """Whether every image in ``tokens`` is encoded (or has failed: ``rows`` says why)."""
        return all(digest in self._vectors or (digest in self._encoding and self._encoding[digest].done())
                   for digest in self._digests(tokens))

    def _digests(self, tokens: list[int]) -> list[str]:
        found: list[str] = []
        for token in tokens:
            if is_image_id(token):
                where = self._by_id.get(token)
                if where is not None and where[0] not in found:
                    found.append(where[0])
        return found

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._encoding.clear()
        for span in self._spans.values():
            self.encoder.free_chunk(span)
        self._spans.clear()
        self._vectors.clear()
        self._by_id.clear()
        self.encoder.close()

    def add(self, span: ImageSpan) -> None:
        """Remember ``span`` (a newer chunk of a known image replaces the older one)."""
        old = self._spans.pop(span.digest, None)
        if old is not None and old is not span:
            self.encoder.free_chunk(old)
        for row, token in enumerate(span.ids):
            self._by_id[token] = (span.digest, row)
        self._spans[span.digest] = span
        while len(self._spans) > KEEP_PENDING:
            _, dropped = self._spans.popitem(last=False)
            self._forget(dropped)

    def _forget(self, span: ImageSpan) -> None:
        pending = self._encoding.pop(span.digest, None)
        if pending is not None:
            pending.cancel()  # a running one finishes first: free_chunk waits for the encoder's lock
        self.encoder.free_chunk(span)
        self._vectors.pop(span.digest, None)
        for token in span.ids:
            self._by_id.pop(token, None)

    def knows(self, token: int) -> bool:
        return token in self._by_id

    def rows(self, tokens: list[int]) -> np.ndarray:
        """The vectors of placeholder ids ``tokens`` (encoding their images if needed)."""
        out = np.empty((len(tokens), self.n_embd), dtype=np.float32)
        for i, token in enumerate(tokens):
            found = self._by_id.get(token)
            if found is None:
                raise InvalidRequest("the prompt names an image this model no longer holds; send the image again",
                                     param="image")
            digest, row = found
            out[i] = self._vectors_of(digest)[row]
        return out

    def _vectors_of(self, digest: str) -> np.ndarray:
        vectors = self._vectors.get(digest)
        if vectors is None:
            pending = self._encoding.pop(digest, None)
            if pending is not None and not pending.cancelled():
                vectors = pending.result()  # raises the encoding's error, if it failed
            else:
                vectors = self.encoder.encode(self._spans[digest], self.n_embd)
            self._vectors[digest] = vectors
            while len(self._vectors) > KEEP_ENCODED:
                self._vectors.popitem(last=False)
        self._vectors.move_to_end(digest)
        return vectors

    def non_causal(self, token: int) -> bool:
        found = self._by_id.get(token)
        span = self._spans.get(found[0]) if found else None
        return bool(span is not None and span.chunk is not None and self.encoder.non_causal(span.chunk))
