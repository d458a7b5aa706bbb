"""LoRA adapters: what a GGUF adapter is, whether it fits a model, and which set a job uses.

An adapter is a GGUF file with ``general.type = "adapter"`` and ``adapter.type = "lora"``:
pairs of low-rank tensors ``<weight>.lora_a`` / ``<weight>.lora_b`` for some of a base
model's weights (llama.cpp's ``llama-adapter.cpp``). In ggml's dimension order a weight
``W`` of shape ``[n_in, n_out]`` gets ``A = [n_in, r]`` and ``B = [r, n_out]``; the token
embedding is the exception (``A = [r, n_vocab]``, ``B = [n_embd, r]``).

llama.cpp only logs why it refuses an adapter, so every refusal is decided here first, from
the two headers, and worded with both names. ``LoraSet`` is what a job asks for: adapters
with scales, normalised (zero scales dropped, as llama.cpp drops them; one entry per
adapter; sorted), so equal requests have equal keys — the key goes into the prefix cache's
state key and decides which jobs may share a step.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import InvalidRequest
from .gguf import GGUFInfo, TensorInfo

#: The most adapters one job may stack, and the scale bounds (llama-server has none; a scale
#: far outside this range only produces noise, and a bound keeps keys short).
MAX_ADAPTERS = 8
MAX_SCALE = 16.0
_SUFFIXES = (".lora_a", ".lora_b")


class AdapterError(InvalidRequest):
    """An adapter that is not a LoRA GGUF, or that does not fit the model (HTTP 400)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, param="lora")


@dataclass(frozen=True)
class AdapterHeader:
    """What an adapter's header says: its base architecture and its A/B tensor pairs."""

    architecture: str
    alpha: float
    # weight name -> (A shape, B shape), in ggml's dimension order.
    pairs: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = field(hash=False)

    @property
    def rank(self) -> int:
        ranks = {b[0] for _a, b in self.pairs.values() if b}
        return max(ranks) if ranks else 0


def adapter_header(info: GGUFInfo, name: str) -> AdapterHeader:
    """The adapter in ``info``; ``AdapterError`` naming ``name`` when it is not a LoRA GGUF."""
    general_type = info.metadata.get("general.type")
    if general_type != "adapter":
        what = "a model" if general_type in (None, "model") else f"of type {general_type!r}"
        raise AdapterError(f"{name} is not a LoRA adapter: its GGUF header says it is {what} "
                           "(general.type is not 'adapter')")
    adapter_type = info.metadata.get("adapter.type")
    if adapter_type != "lora":
        raise AdapterError(f"{name} is an adapter of type {adapter_type!r}, not a LoRA (adapter.type 'lora')")
    if "general.architecture" not in info.metadata:
        raise AdapterError(f"{name} does not name the architecture of its base model")
    alpha = info.metadata.get("adapter.lora.alpha", 0.0)
    pairs = _pairs(info.tensors, name)
    if not pairs:
        raise AdapterError(f"{name} holds no LoRA tensor pairs")
    return AdapterHeader(info.architecture, float(alpha) if isinstance(alpha, (int, float)) else 0.0, pairs)


def _pairs(tensors: list[TensorInfo], name: str) -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]]:
    halves: dict[str, dict[str, tuple[int, ...]]] = {}
    for tensor in tensors:
        suffix = next((s for s in _SUFFIXES if tensor.name.endswith(s)), None)
        if suffix is None:
            if tensor.name.endswith("_norm.weight"):
                continue  # llama.cpp skips norm vectors in adapters too
            raise AdapterError(f"{name}: tensor {tensor.name!r} is not a LoRA A/B tensor")
        halves.setdefault(tensor.name.removesuffix(suffix), {})[suffix] = tensor.shape
    pairs = {}
    for weight, found in halves.items():
        if len(found) != 2:
            raise AdapterError(f"{name}: the LoRA pair for {weight!r} is missing one of its tensors")
        pairs[weight] = (found[".lora_a"], found[".lora_b"])
    return pairs


def check_compatible(adapter: AdapterHeader, adapter_name: str, model: GGUFInfo, model_name: str) -> None:
    """Refuse (``AdapterError``, both named) an adapter made for another base model."""
    if adapter.architecture != model.architecture:
        raise AdapterError(
            f"the adapter {adapter_name} was made for the {adapter.architecture} architecture, "
            f"but {model_name} is {model.architecture}")
    weights = {t.name: t.shape for t in model.tensors}
    for weight, (a, b) in sorted(adapter.pairs.items()):
        shape = weights.get(weight)
        if shape is None:
            raise AdapterError(f"the adapter {adapter_name} changes {weight}, which {model_name} does not have "
                               "(it was made for another base model)")
        if not _shapes_fit(weight, shape, a, b):
            raise AdapterError(
                f"the adapter {adapter_name} does not fit {model_name}: {weight} is {_dims(shape)} in the model, "
                f"the adapter's A is {_dims(a)} and B is {_dims(b)} (it was made for another base model)")


def _shapes_fit(weight: str, w: tuple[int, ...], a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    if len(w) != 2 or len(a) != 2 or len(b) != 2:
        return False
    if weight.endswith("token_embd.weight"):  # llama.cpp flips A and B for the embedding
        return w[0] == b[1] and w[1] == a[1]
    return w[0] == a[0] and w[1] == b[1] and a[1] == b[0]


def _dims(shape: tuple[int, ...]) -> str:
    return "×".join(str(d) for d in shape)


# -- what a job asks for -------------------------------------------------------------------


@dataclass(frozen=True)
class LoraUse:
    """One adapter applied with ``scale``: its id (for people), file and content fingerprint."""

    adapter_id: str
    path: Path
    fingerprint: str
    scale: float


@dataclass(frozen=True)
class LoraSet:
    """The adapters a job runs with; empty for the base model."""

    uses: tuple[LoraUse, ...] = ()

    @classmethod
    def of(cls, uses: list[LoraUse]) -> "LoraSet":
        """Normalised: scales checked, zero scales dropped, one entry per adapter (the last
        one named wins, as a repeated key would), sorted by fingerprint."""
        if len(uses) > MAX_ADAPTERS:
            raise AdapterError(f"at most {MAX_ADAPTERS} adapters may be applied at once")
        by_content: dict[str, LoraUse] = {}
        for use in uses:
            check_scale(use.scale)
            by_content[use.fingerprint] = use
        kept = [u for u in by_content.values() if u.scale != 0.0]
        return cls(tuple(sorted(kept, key=lambda u: u.fingerprint)))

    @property
    def key(self) -> str:
        """Equal for equal sets; "" for none. Scales as float32, as llama.cpp compares them."""
        return ",".join(f"{u.fingerprint}*{_f32(u.scale)!r}" for u in self.uses)

    def __bool__(self) -> bool:
        return bool(self.uses)

    def describe(self) -> str:
        return ", ".join(f"{u.adapter_id}×{u.scale:g}" for u in self.uses) or "no adapters"


NO_LORA = LoraSet()


def check_scale(scale: Any) -> float:
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
        raise AdapterError("a LoRA scale must be a finite number")
    if not -MAX_SCALE <= scale <= MAX_SCALE:
        raise AdapterError(f"a LoRA scale must be between {-MAX_SCALE:g} and {MAX_SCALE:g}, got {scale:g}")
    return float(scale)


def _f32(value: float) -> float:
    rounded: float = struct.unpack("<f", struct.pack("<f", value))[0]
    return rounded
