"""A fake loaded model that streams canned words: fast engine tests without a GGUF.

It offers what the scheduler uses of a real ``LoadedModel``: sequences in slots, advanced
together one ``step`` at a time (one word per sequence per step).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from inglenook.engine.base.errors import ContextLengthExceeded
from inglenook.engine.base.generation_events import Chunk, Finished, GenerationEvent, Timings, Usage
from inglenook.engine.base.model_record import ModelRecord
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.runtime.model_loading import LoadOptions
from inglenook.engine.runtime.slots import DECODE, DONE, PREFILL, KvSlot


class FakeSequence:
    def __init__(self, model: "FakeModel", slot: KvSlot, prompt: list[int], sampling: SamplingParams,
                 cancel: threading.Event, started: float) -> None:
        self.model = model
        self.slot = slot
        self.cancel = cancel
        self.started = started
        self.words = model.reply.split(" ")
        self.limit = sampling.max_tokens or len(self.words)
        self.usage = Usage(prompt_tokens=len(prompt))
        self.state = PREFILL
        self.events: list[GenerationEvent] = []

    @property
    def done(self) -> bool:
        return self.state == DONE

    def drain(self) -> list[GenerationEvent]:
        events, self.events = self.events, []
        return events

    def advance(self) -> None:
        self.state = DECODE
        index = self.usage.completion_tokens
        if self.cancel.is_set():
            return self._finish("cancelled")
        if index >= len(self.words):
            return self._finish("stop")
        if index >= self.limit:
            return self._finish("length")
        self.usage.completion_tokens += 1
        word = self.words[index]
        self.events.append(Chunk(word if index == 0 else " " + word, [index]))

    def _finish(self, reason: str) -> None:
        self.events.append(Finished(reason, self.usage, Timings(ttft_s=0.001, decode_s=0.01), self.model.record.id))
        self.state = DONE


class FakeModel:
    """Answers every prompt with ``reply`` one word at a time; one token per character of prompt."""

    reply = "The quick brown fox jumps over the lazy dog ."
    step_delay_s = 0.0
    loads: list[str] = []

    def __init__(self, record: ModelRecord, options: LoadOptions, progress=None) -> None:
        self.record = record
        self.options = options
        self.n_ctx = options.context_size
        self.closed = False
        self.slots = [KvSlot(i) for i in range(max(1, options.parallel))]
        self.steps: list[list[int]] = []  # which slots each step advanced
        self.lora_key = ""  # the LoRA set applied (fakes only record it)
        self.step_loras: list[str] = []  # the set of each step
        FakeModel.loads.append(record.id)
        if progress:
            progress(0.5)
            progress(1.0)

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        return [ord(c) % 256 for c in text]

    def chat_tokens(self, messages: list[dict], tools=None, cancel=None, options=None) -> list[int]:
        text = "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"
        return self.tokenize(text)

    def prompt_tokens(self, text: str, cancel=None) -> list[int]:
        return self.tokenize(text)

    def pick_slot(self, prompt: list[int]) -> KvSlot | None:
        return next((s for s in self.slots if not s.busy), None)

    chat_stops: tuple[str, ...] = ()

    def open_sequence(self, prompt: list[int], sampling: SamplingParams, cancel: threading.Event, started: float,
                      reuse_kv: bool = True, slot: KvSlot | None = None, shared: int = 0,
                      template_stops: tuple[str, ...] = ()) -> FakeSequence:
        if len(prompt) + (sampling.max_tokens or 1) > self.n_ctx:
            raise ContextLengthExceeded("too long", len(prompt), self.n_ctx)
        slot = slot or self.pick_slot(prompt)
        assert slot is not None and not slot.busy
        slot.busy = True
        return FakeSequence(self, slot, prompt, sampling, cancel, started)

    def step(self, sequences: list[FakeSequence], prefill_budget: int) -> int:
        if self.step_delay_s:
            time.sleep(self.step_delay_s)
        self.steps.append([s.slot.seq_id for s in sequences if not s.done])
        self.step_loras.append(self.lora_key)
        for sequence in sequences:
            if not sequence.done:
                sequence.advance()
        return 0

    def use_lora(self, lora) -> None:  # a lora.LoraSet
        self.lora_key = lora.key

    def release(self, sequence: FakeSequence) -> None:
        sequence.slot.busy = False

    def free_slot(self, slot: KvSlot) -> None:
        slot.kv_tokens = []

    def generate(
        self, prompt: list[int], sampling: SamplingParams, cancel: threading.Event | None = None, reuse_kv: bool = True
    ) -> Iterator[Chunk | Finished]:
        sequence = self.open_sequence(prompt, sampling, cancel or threading.Event(), time.perf_counter())
        while not sequence.done:
            self.step([sequence], self.options.batch_size)
            yield from sequence.drain()
        self.release(sequence)

    def embed(self, text: str) -> list[float]:
        return [float(len(text)), 1.0]

    def close(self) -> None:
        self.closed = True
