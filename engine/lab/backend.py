"""Two array backends, one code path: numpy always, torch (on the GPU when present) if installed.

The lab's math (``metrics.py``) is written once against the few operations below. Each
backend maps them onto its library; torch is imported only when it is asked for.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import numpy as np

log = logging.getLogger(__name__)

Array = Any  # a numpy.ndarray or a torch.Tensor, depending on the backend


class ArrayBackend(Protocol):
    name: str
    device: str

    def from_numpy(self, array: np.ndarray) -> Array: ...
    def to_numpy(self, array: Array) -> np.ndarray: ...
    def to_float64(self, array: Array) -> Array: ...
    def log_softmax(self, logits: Array) -> Array: ...
    def exp(self, array: Array) -> Array: ...
    def log(self, array: Array) -> Array: ...
    def sum(self, array: Array, axis: int) -> Array: ...
    def clip(self, array: Array, low: float, high: float) -> Array: ...
    def where(self, condition: Array, a: Array, b: Array) -> Array: ...
    def gather(self, array: Array, index: Array) -> Array: ...
    def topk(self, array: Array, k: int) -> tuple[Array, Array]: ...
    def argmax(self, array: Array) -> Array: ...


class NumpyBackend:
    name = "numpy"
    device = "cpu"

    def from_numpy(self, array: np.ndarray) -> np.ndarray:
        return np.asarray(array)

    def to_numpy(self, array: np.ndarray) -> np.ndarray:
        return np.asarray(array)

    def to_float64(self, array: np.ndarray) -> np.ndarray:
        return array.astype(np.float64)

    def log_softmax(self, logits: np.ndarray) -> np.ndarray:
        shifted = logits - logits.max(axis=-1, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))

    def exp(self, array: np.ndarray) -> np.ndarray:
        return np.exp(array)

    def log(self, array: np.ndarray) -> np.ndarray:
        return np.log(array)

    def sum(self, array: np.ndarray, axis: int) -> np.ndarray:
        return array.sum(axis=axis)

    def clip(self, array: np.ndarray, low: float, high: float) -> np.ndarray:
        return np.clip(array, low, high)

    def where(self, condition: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.where(condition, a, b)

    def gather(self, array: np.ndarray, index: np.ndarray) -> np.ndarray:
        return np.take_along_axis(array, index.astype(np.int64), axis=-1)

    def topk(self, array: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(k, array.shape[-1])
        # argpartition finds the k largest in linear time; only those k are then sorted.
        index = np.argpartition(-array, k - 1, axis=-1)[..., :k]
        values = np.take_along_axis(array, index, axis=-1)
        order = np.argsort(-values, axis=-1, kind="stable")
        return np.take_along_axis(values, order, axis=-1), np.take_along_axis(index, order, axis=-1)

    def argmax(self, array: np.ndarray) -> np.ndarray:
        return array.argmax(axis=-1)


class TorchBackend:
    name = "torch"

    def __init__(self, device: str | None = None) -> None:
        import torch  # noqa: PLC0415 — optional and heavy: only imported when chosen

        self._torch = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")

    def from_numpy(self, array: np.ndarray) -> Any:
        return self._torch.from_numpy(np.ascontiguousarray(array)).to(self.device)

    def to_numpy(self, array: Any) -> np.ndarray:
        return array.detach().cpu().numpy()

    def to_float64(self, array: Any) -> Any:
        return array.to(self._torch.float64)

    def log_softmax(self, logits: Any) -> Any:
        return self._torch.log_softmax(logits, dim=-1)

    def exp(self, array: Any) -> Any:
        return self._torch.exp(array)

    def log(self, array: Any) -> Any:
        return self._torch.log(array)

    def sum(self, array: Any, axis: int) -> Any:
        return array.sum(dim=axis)

    def clip(self, array: Any, low: float, high: float) -> Any:
        return self._torch.clamp(array, low, high)

    def where(self, condition: Any, a: Any, b: Any) -> Any:
        return self._torch.where(condition, a, b)

    def gather(self, array: Any, index: Any) -> Any:
        return self._torch.gather(array, -1, index.to(self._torch.int64))

    def topk(self, array: Any, k: int) -> tuple[Any, Any]:
        values, index = self._torch.topk(array, min(k, array.shape[-1]), dim=-1, largest=True, sorted=True)
        return values, index

    def argmax(self, array: Any) -> Any:
        return array.argmax(dim=-1)


def select_backend(preference: str = "auto") -> ArrayBackend:
    """``numpy``, ``torch`` (an error if it is missing) or ``auto`` (torch when installed)."""
    if preference == "numpy":
        return NumpyBackend()
    if preference not in ("auto", "torch"):
        raise ValueError(f"unknown array backend {preference!r}; use auto, numpy or torch")
    try:
        backend = TorchBackend()
    except ImportError:
        if preference == "torch":
            raise
        return NumpyBackend()
    log.info("lab math runs on torch (%s)", backend.device)
    return backend
