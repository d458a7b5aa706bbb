"""Vision projectors (``mmproj-*.gguf``): what one is, and which model it belongs to.

A vision model in GGUF is two files: the language model and its projector, a CLIP-style
image encoder whose output vectors the language model reads in place of token embeddings.
llama.cpp's converters name the projector ``mmproj-<model>-<type>.gguf`` and put it beside
the model in the same repository; Inglenook pairs them the same way: a projector in the
model's folder whose header says it encodes images (``clip.has_vision_encoder``) into
vectors of the model's embedding size. Two models in one folder (sizes of one family) each
take the projector whose size matches theirs, and a name match breaks a tie.

The embedding size is read from the projector's tensors, where libmtmd reads it
(``clip_n_mmproj_embd`` in ``tools/mtmd/clip.cpp``), for the projector types people use;
for others from ``clip.vision.projection_dim``. A projector whose size does not match the
model is refused with both sizes named, before libmtmd would refuse it at load.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import ModelLoadError
from .gguf import GGUFInfo, read_gguf

log = logging.getLogger(__name__)

PROJECTOR_PREFIX = "mmproj"

# projector type -> (tensor, which ggml dimension is the output width), as clip_n_mmproj_embd.
_OUTPUT_TENSORS: dict[str, tuple[str, int]] = {
    "gemma3": ("mm.input_projection.weight", 0),
    "gemma3nv": ("mm.input_projection.weight", 0),
    "gemma4v": ("mm.input_projection.weight", 1),
    "idefics3": ("mm.model.fc.weight", 1),
    "mlp": ("mm.2.weight", 1),
    "mlp_norm": ("mm.3.weight", 1),
    "lfm2": ("mm.2.weight", 1),
    "pixtral": ("mm.2.weight", 1),
    "qwen2vl_merger": ("mm.2.weight", 1),
    "qwen2.5vl_merger": ("mm.2.weight", 1),
    "internvl": ("mm.3.weight", 1),
}


def is_projector_name(path: Path | str) -> bool:
    return Path(path).name.lower().startswith(PROJECTOR_PREFIX) and str(path).lower().endswith(".gguf")


@dataclass(frozen=True)
class ProjectorInfo:
    """What pairing needs of a projector file."""

    path: Path
    projector_type: str
    embedding: int | None  # the width of its output vectors: the text model's embedding size
    image_size: int | None  # the side of the square it reads (before tiling), when it says

    def matches(self, model_embedding: int | None) -> bool:
        return self.embedding is None or model_embedding is None or self.embedding == model_embedding


def projector_info(info: GGUFInfo) -> ProjectorInfo | None:
    """The projector described by a parsed header; None when the file is not an image projector."""
    meta = info.metadata
    if info.architecture != "clip" or not meta.get("clip.has_vision_encoder"):
        return None
    kind = str(meta.get("clip.projector_type") or meta.get("clip.vision.projector_type") or "")
    embedding: int | None = None
    tensor_name, dim = _OUTPUT_TENSORS.get(kind, ("", 0))
    for tensor in info.tensors:
        if tensor.name == tensor_name and len(tensor.shape) > dim:
            embedding = int(tensor.shape[dim])
    if embedding is None and isinstance(meta.get("clip.vision.projection_dim"), int):
        embedding = int(meta["clip.vision.projection_dim"])
    size = meta.get("clip.vision.image_size")
    return ProjectorInfo(info.path, kind, embedding, int(size) if isinstance(size, int) else None)


def read_projector(path: Path) -> ProjectorInfo | None:
    """``path``'s projector header, or None when it is not one (or cannot be read)."""
    try:
        return projector_info(read_gguf(path))
    except (ModelLoadError, OSError) as exc:
        log.warning("cannot read the projector %s: %s", path, exc)
        return None


def model_embedding(info: GGUFInfo) -> int | None:
    value = info.arch_value("embedding_length")
    return int(value) if isinstance(value, int) else None


def _name_words(name: str) -> set[str]:
    stem = name.lower().removesuffix(".gguf").removeprefix(PROJECTOR_PREFIX)
    return {w for w in re.split(r"[^a-z0-9.]+", stem) if w}


def find_projector(model: GGUFInfo) -> ProjectorInfo | None:
    """The projector paired with ``model``: an ``mmproj*.gguf`` in its folder whose output
    width is the model's embedding size (the best name match among several); None if none.

    ``ProjectorMismatch`` when the folder's only projectors are for another embedding size,
    so that the person hears why a model they expected to see images is text-only."""
    folder = model.path.parent
    try:
        names = sorted(n for n in os.listdir(folder) if is_projector_name(n))
    except OSError:
        return None
    found = [p for p in (read_projector(folder / n) for n in names) if p is not None]
    if not found:
        return None
    width = model_embedding(model)
    fitting = [p for p in found if p.matches(width)]
    if not fitting:
        raise ProjectorMismatch(model, found[0])
    words = _name_words(model.path.name)
    return max(fitting, key=lambda p: (len(words & _name_words(p.path.name)), p.embedding is not None))


class ProjectorMismatch(ModelLoadError):
    """A projector beside a model encodes images for another embedding size."""

    def __init__(self, model: GGUFInfo, projector: ProjectorInfo) -> None:
        super().__init__(
            f"the vision projector {projector.path.name} makes vectors of {projector.embedding} values, "
            f"but {model.path.name} reads vectors of {model_embedding(model)}: it belongs to another model. "
            "Put the projector of this model beside it (an mmproj-*.gguf from the same repository)")
        self.projector = projector


def check_pair(model: GGUFInfo, projector: ProjectorInfo) -> None:
    """Refuse a projector chosen by hand (``--mmproj``) for a model of another size."""
    if not projector.matches(model_embedding(model)):
        raise ProjectorMismatch(model, projector)
