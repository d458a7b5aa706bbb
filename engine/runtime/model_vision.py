"""A loaded model's images: prompts with pictures in them, and their rows in a step.

A chat message's content may hold image parts (``{"type": "image", "image": ImageInput}``,
as the API families and the front ends build them). ``ModelVision.chat_tokens`` renders the
messages with libmtmd's marker in each image's place, and ``VisionEncoder.tokenize`` splits
the result into text tokens and image chunks; each image's positions get placeholder ids
(``vision.placeholder_ids``), so the prompt stays a list of ints that the scheduler, the
prefix cache and the state files handle as before. The projector is found and loaded the
first time a prompt has an image (``projector.find_projector``: a text-only model answers
with ``InvalidRequest`` naming it), so a vision model used for text costs nothing more.

In a step, a prompt chunk that holds image positions is decoded as runs (``image_runs``):
text runs as tokens, image runs as vectors in an embeddings batch (``decode_image_rows``),
encoding the image first if its vectors are not held (the encoder runs on the scheduler's
thread at that point, once per image: a follow-up or a restored conversation whose image
is already in the cached prefix never encodes it).

``ModelVision`` is built on the model's ``LlamaContext`` (model_loading.py) and knows nothing
of ``LoadedModel``, which holds it and runs the step loop around it.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from typing import TYPE_CHECKING, Any

from ..base import ImageInput, InvalidRequest, ModelLoadError, ProjectorMismatch, find_projector
from .batch import NONE
from .model_loading import LlamaContext
from .vision import ImageTable, VisionEncoder, is_image_id

if TYPE_CHECKING:
    from .sequence import Sequence

log = logging.getLogger(__name__)


def message_images(messages: list[dict[str, Any]]) -> list[ImageInput]:
    """The images in ``messages``, in prompt order."""
    found: list[ImageInput] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            found.extend(part["image"] for part in content
                         if isinstance(part, dict) and part.get("type") == "image" and isinstance(part.get("image"), ImageInput))
    return found


def with_markers(messages: list[dict[str, Any]], marker: str) -> list[dict[str, Any]]:
    """``messages`` with every list content flattened to text, ``marker`` in each image's place."""
    flat = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            text = []
            for part in content:
                if isinstance(part, dict) and part.get("type") == "image":
                    text.append(marker)
                elif isinstance(part, dict) and isinstance(part.get("text"), str):
                    text.append(part["text"])
            message = {**message, "content": "\n".join(text)}
        flat.append(message)
    return flat


class ModelVision:
    """The images of one model's prompts: its projector (loaded on the first image), the
    image table of its encoded images, and the embeddings batch their rows are decoded in."""

    def __init__(self, context: LlamaContext) -> None:
        self.context = context
        self._images: ImageTable | None = None
        self._embd_batch: Any = None  # a llama_batch of vectors, made on the first image

    @property
    def active(self) -> bool:
        """Whether a prompt with images has loaded the projector (until then, no prompt holds
        image positions and the step loop skips every image check)."""
        return self._images is not None

    def table(self) -> ImageTable:
        """The model's image table, loading its projector on first use."""
        if self._images is None:
            context = self.context
            try:
                projector = find_projector(context.info)
            except ProjectorMismatch as exc:  # the person's files, not the server, are wrong
                raise InvalidRequest(f"{context.record.id} cannot read images: {exc}", param="model") from exc
            if projector is None:
                raise InvalidRequest(
                    f"{context.record.id} is a text-only model: it has no vision projector (an mmproj-*.gguf "
                    "beside it), so it cannot read images; pick a vision model", param="model")
            encoder = VisionEncoder(context.model, projector, context.threads, context.gpu_layers > 0)
            n_embd = int(context.lib.llama_model_n_embd(context.model))
            self._images = ImageTable(encoder, n_embd)
            log.info("%s reads images with %s (%s)", context.record.id, projector.path.name, projector.projector_type)
        return self._images

    def close(self) -> None:
        """Free the projector and the embeddings batch (before the model: libmtmd's context
        refers to it)."""
        if self._images is not None:
            self._images.close()
            self._images = None
        if self._embd_batch is not None:
            self.context.lib.llama_batch_free(self._embd_batch)
            self._embd_batch = None

    def chat_tokens(self, messages: list[dict[str, Any]], images: list[ImageInput], tools: list[dict] | None,
                    cancel: threading.Event | None, options: dict[str, Any] | None) -> list[int]:
        """``messages`` rendered with the model's template and tokenized, each image's
        positions as its placeholder ids (the caller checks the length against the context)."""
        context = self.context
        table = self.table()
        marker = table.encoder.marker
        text = context.chat_template.render(with_markers(messages, marker), add_generation_prompt=True, tools=tools,
                                            cancel=cancel, **(options or {}))
        bos = context.chat_template.bos_token
        add_special = context.add_bos and not (bos and text.startswith(bos))
        prompt: list[int] = []
        for piece in table.encoder.tokenize(text, images, add_special):
            if piece.image is not None:
                table.add(piece.image)
                prompt.extend(piece.image.ids)
            else:
                prompt.extend(piece.tokens or [])
        return prompt

    def valid_prompt_token(self, token: int) -> bool:
        if 0 <= token < self.context.n_vocab:
            return True
        return self._images is not None and is_image_id(token) and self._images.knows(token)

    def prefetch_images(self, readers: list["Sequence"]) -> None:
        """Start encoding the images that reading sequences' prompts hold (once each)."""
        table = self._images
        if table is None:
            return
        for sequence in readers:
            if sequence.images_prefetched:
                continue
            sequence.images_prefetched = True
            if any(is_image_id(t) for t in sequence.pending):
                table.prefetch(sequence.pending)

    def images_ready(self, chunk: list[int]) -> bool:
        """Whether ``chunk``'s image rows can be decoded without waiting for the encoder."""
        return self._images is None or self._images.ready(chunk)

    def has_image_rows(self, tokens: list[int]) -> bool:
        return self._images is not None and any(is_image_id(t) for t in tokens)

    def whole_images(self, sequence: "Sequence", chunk: list[int]) -> list[int]:
        """``chunk`` extended so that it does not end inside an image: an image's rows are
        decoded in one call (Gemma 3's projector wants full attention among them). A reused
        prefix may still end inside one: its rows there were read with all of the image in
        view, and the rows after them see those in the KV cache, as a full prefill does."""
        pending = sequence.pending
        taken = 0
        while (taken < len(pending) and chunk and is_image_id(chunk[-1]) and is_image_id(pending[taken])
               and pending[taken] == chunk[-1] + 1 + taken):
            taken += 1
        if taken:
            chunk = chunk + pending[:taken]
            sequence.pending = pending[taken:]
        return chunk

    def decode_image_rows(self, seq_id: int, first_pos: int, ids: list[int], logits: str) -> int:
        """Decode image positions ``ids`` from their vectors; the batch index of the last row
        when ``logits`` asks for it, else -1."""
        context = self.context
        lib = context.lib
        table = self.table()
        vectors = table.rows(ids)
        n_embd = table.n_embd
        batch = self._embd_batch
        if batch is None:
            batch = lib.llama_batch_init(context.batch_capacity, n_embd, 1)
            self._embd_batch = batch
        flat = vectors.reshape(-1)
        for i in range(len(ids)):
            batch.pos[i] = first_pos + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq_id
            batch.logits[i] = 0
        ctypes.memmove(batch.embd, flat.ctypes.data, flat.nbytes)
        if logits != NONE:
            batch.logits[len(ids) - 1] = 1
        batch.n_tokens = len(ids)
        non_causal = table.non_causal(ids[0])
        if non_causal:
            lib.llama_set_causal_attn(context.ctx, False)
        try:
            status = context.decode(batch)
        finally:
            if non_causal:
                lib.llama_set_causal_attn(context.ctx, True)
        if status != 0:
            raise ModelLoadError(f"llama.cpp failed to decode an image with {context.record.id} (status {status})")
        return len(ids) - 1 if logits != NONE else -1


def image_runs(tokens: list[int]) -> list[tuple[bool, list[int]]]:
    """``tokens`` cut into runs of text tokens and of image positions, in order."""
    found: list[tuple[bool, list[int]]] = []
    for token in tokens:
        image = is_image_id(token)
        if found and found[-1][0] == image:
            found[-1][1].append(token)
        else:
            found.append((image, [token]))
    return found

