"""A fake loaded model that streams canned words: fast engine tests without a GGUF."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from inglenook.engine.errors import ContextLengthExceeded
from inglenook.engine.registry import ModelRecord
from inglenook.engine.runtime import Chunk, Finished, LoadOptions, Timings, Usage
from inglenook.engine.sampling import SamplingParams


class FakeModel:
    """Answers every prompt with ``reply`` one word at a time; one token per character of prompt."""

    reply = "The quick brown fox jumps over the lazy dog ."
    step_delay_s = 0.0
    loads: list[str] = []

    def __init__(self, record: ModelRecord, options: LoadOptions, progress=None) -> None:  # noqa: ANN001
        self.record = record
        self.options = options
        self.n_ctx = options.context_size
        self.closed = False
        FakeModel.loads.append(record.id)
        if progress:
            progress(0.5)
            progress(1.0)

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        return [ord(c) % 256 for c in text]

    def chat_tokens(self, messages: list[dict], tools=None) -> list[int]:  # noqa: ANN001
        text = "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"
        return self.tokenize(text)

    def generate(
        self, prompt: list[int], sampling: SamplingParams, cancel: threading.Event | None = None, reuse_kv: bool = True
    ) -> Iterator[Chunk | Finished]:
        if len(prompt) + (sampling.max_tokens or 1) > self.n_ctx:
            raise ContextLengthExceeded("too long", len(prompt), self.n_ctx)
        usage = Usage(prompt_tokens=len(prompt))
        words = self.reply.split(" ")
        limit = sampling.max_tokens or len(words)
        reason = "stop"
        for i, word in enumerate(words):
            if cancel is not None and cancel.is_set():
                reason = "cancelled"
                break
            if i >= limit:
                reason = "length"
                break
            if self.step_delay_s:
                time.sleep(self.step_delay_s)
            usage.completion_tokens += 1
            yield Chunk(word if i == 0 else " " + word, [i])
        yield Finished(reason, usage, Timings(ttft_s=0.001, decode_s=0.01), self.record.id)

    def embed(self, text: str) -> list[float]:
        return [float(len(text)), 1.0]

    def close(self) -> None:
        self.closed = True
