"""What the scheduler needs of a loaded model and of a sequence it steps.

``runtime.LoadedModel`` and ``runtime.Sequence`` provide them, and so do the unit tests'
fakes: the scheduler is written against these protocols, not the runtime's classes.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from ..base import GenerationEvent, LoraSet, ModelRecord, SamplingParams
from ..runtime import KvSlot, LoadOptions


class SteppedSequence(Protocol):
    """What the step loop reads of a sequence (``sequence.Sequence``, or a test's fake)."""

    state: str
    slot: KvSlot
    model: BatchedModel

    @property
    def done(self) -> bool: ...

    def drain(self) -> list[GenerationEvent]: ...


class BatchedModel(Protocol):
    """What the scheduler needs of a loaded model: ``runtime.LoadedModel`` provides it, and
    so does the fake model of the unit tests. What it reads of the load, it only reads (the
    runtime's are the context's facts, properties)."""

    @property
    def record(self) -> ModelRecord: ...

    @property
    def options(self) -> LoadOptions: ...

    @property
    def n_ctx(self) -> int: ...

    @property
    def slots(self) -> list[KvSlot]: ...

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]: ...

    def chat_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                    cancel: threading.Event | None = None, options: dict[str, Any] | None = None) -> list[int]: ...

    def prompt_tokens(self, text: str, cancel: threading.Event | None = None) -> list[int]: ...

    def pick_slot(self, prompt: list[int]) -> KvSlot | None: ...

    def open_sequence(self, prompt: list[int], sampling: SamplingParams, cancel: threading.Event, started: float,
                      reuse_kv: bool = True, slot: KvSlot | None = None, shared: int = 0,
                      template_stops: tuple[str, ...] = ()) -> Any: ...

    @property
    def chat_stops(self) -> tuple[str, ...]:
        """Stop strings the chat template's format implies (a fallback template's markers)."""
        ...

    def step(self, sequences: list[Any], prefill_budget: int) -> int: ...

    def release(self, sequence: Any) -> None: ...

    def free_slot(self, slot: KvSlot) -> None: ...

    def slot_view(self, slot: KvSlot) -> Any: ...

    @property
    def lora_key(self) -> str: ...

    def use_lora(self, lora: LoraSet) -> None: ...

    def embed(self, text: str) -> list[float]: ...

    def close(self) -> None: ...
