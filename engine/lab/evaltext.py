"""The evaluation text and how it is cut into scored windows.

Follows llama.cpp's perplexity tool: the text is tokenized once, cut into windows of the
context size (each starting with BOS when the model wants one), and only the second half of
each window is scored, so every scored token has at least half a window of context.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from ..base import InvalidRequest

BUNDLED_EVAL = "hearth-essays.txt"


def bundled_eval_path() -> Path:
    """The evaluation text that ships with Inglenook (``resources/eval``)."""
    here = Path(__file__).resolve().parents[2] / "resources" / "eval" / BUNDLED_EVAL
    if here.is_file():
        return here
    # Installed (non-editable) layouts carry resources as package data.
    return Path(str(resources.files("inglenook").joinpath("resources", "eval", BUNDLED_EVAL)))


@dataclass(frozen=True)
class EvalText:
    text: str
    source: str  # "bundled" or the user's file name

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()[:16]

    @classmethod
    def load(cls, path: Path | str | None = None) -> "EvalText":
        if path is None:
            return cls(bundled_eval_path().read_text(encoding="utf-8"), "bundled")
        path = Path(path).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidRequest(f"cannot read the evaluation text {path}: {exc}", param="eval_file") from exc
        if len(text.strip()) < 200:
            raise InvalidRequest("the evaluation text is too short; give it at least a few paragraphs", param="eval_file")
        return cls(text, path.name)


@dataclass(frozen=True)
class Window:
    tokens: list[int]
    first_scored: int  # logits rows first_scored .. len-2 predict tokens first_scored+1 .. len-1

    @property
    def targets(self) -> np.ndarray:
        return np.asarray(self.tokens[self.first_scored + 1 :], dtype=np.int64)


def make_windows(tokens: list[int], window: int, bos: int | None, max_tokens: int | None = None) -> list[Window]:
    """Cut ``tokens`` into windows of ``window`` tokens (a shorter last one only if it is alone)."""
    if max_tokens is not None:
        tokens = tokens[:max_tokens]
    body = window - (1 if bos is not None else 0)
    if body < 8:
        raise InvalidRequest("the evaluation window is too small", param="window")
    windows: list[Window] = []
    for start in range(0, len(tokens), body):
        piece = tokens[start : start + body]
        if len(piece) < body and windows:
            break  # a short tail would be scored with less context than the rest
        if len(piece) < 16:
            break
        full = ([bos] if bos is not None else []) + piece
        windows.append(Window(full, first_scored=len(full) // 2))
    if not windows:
        raise InvalidRequest("the evaluation text is too short for even one window", param="eval_file")
    return windows


def tokens_digest(windows: list[Window]) -> str:
    digest = hashlib.sha256()
    for w in windows:
        digest.update(np.asarray(w.tokens, dtype=np.int64).tobytes())
        digest.update(w.first_scored.to_bytes(4, "little"))
    return digest.hexdigest()[:16]
