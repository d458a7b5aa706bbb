"""Engine output -> Anthropic Messages: content blocks, stop reasons, usage.

``Answer`` reads one run for the Messages API. It watches for the request's stop
sequences itself (the engine's own stop strings do not say which one matched) and cancels
the job at the first one; it counts the tokens it kept. ``ToolCallFilter`` (shared with
chat completions) decides whether the text is a tool call.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from ...base import ResponseToolCall
from ...text import ToolCallFilter, closed_object, longest_partial_match
from ..shared import Run
from .thinking import ThinkSplit

log = logging.getLogger(__name__)


class StopWatch:
    """Text pieces in, text safe to show out; holds back what may start a stop sequence."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = tuple(s for s in stops if s)
        self.matched: str | None = None
        self._held = ""

    def feed(self, piece: str) -> str:
        if self.matched is not None:
            return ""
        text = self._held + piece
        if not self.stops:
            self._held = ""
            return text
        hits = [(found, stop) for stop in self.stops if (found := text.find(stop)) >= 0]
        if hits:
            cut, self.matched = min(hits)
            self._held = ""
            return text[:cut]
        keep = longest_partial_match(text, self.stops)
        self._held = text[len(text) - keep:]
        return text[: len(text) - keep]

    def flush(self) -> str:
        """What was held back, once the answer has ended without a stop sequence."""
        text, self._held = self._held, ""
        return text if self.matched is None else ""



@dataclass
class TokenCounts:
    prompt: int
    cached: int
    output: int

    def usage(self) -> dict[str, int]:
        """Anthropic counts cache reads apart: input_tokens are the ones read anew."""
        return {
            "input_tokens": max(self.prompt - self.cached, 0),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": self.cached,
            "output_tokens": self.output,
        }


class Answer:
    """One run as the Messages API reads it: text up to a stop sequence, then the totals."""

    def __init__(self, run: Run, stops: tuple[str, ...], reasoning_inside: str | None = None) -> None:
        self.run = run
        self.reasoning_inside = reasoning_inside  # the template opened a reasoning block in the prompt
        self.watch = StopWatch(stops)
        self.output_tokens = 0

    async def pieces(self) -> AsyncIterator[str]:
        """Text as it is generated, stop sequences cut out."""
        async for chunk in self.run.chunks():
            if self.watch.matched is not None:
                continue  # generated after the stop sequence, while the job was being cancelled
            self.output_tokens += len(chunk.token_ids)
            text = self.watch.feed(chunk.text)
            if self.watch.matched is not None:
                self.run.cancel()
            if text:
                yield text
        tail = self.watch.flush()
        if tail:
            yield tail

    @property
    def stop_sequence(self) -> str | None:
        return self.watch.matched

    def stop_reason(self, called_tools: bool) -> str:
        if called_tools and self.run.finish_reason != "length":
            return "tool_use"
        if self.watch.matched is not None:
            return "stop_sequence"
        return "max_tokens" if self.run.finish_reason == "length" else "end_turn"

    def counts(self) -> TokenCounts:
        usage = self.run.usage
        return TokenCounts(usage.prompt_tokens, usage.cached_tokens, self.output_tokens)


def new_message_id() -> str:
    return "msg_" + secrets.token_hex(12)


def tool_use_block(call: ResponseToolCall, cut: bool = False) -> dict[str, Any] | None:
    """A parsed call as a tool_use block; None when its arguments are not a JSON object. A
    call ``cut`` by max_tokens keeps its members written whole (``closed_object``): it is
    still a tool_use block, with stop_reason ``max_tokens``, as the Messages API answers."""
    try:
        arguments = json.loads(call.function.arguments or "{}")
    except ValueError:
        arguments = closed_object(call.function.arguments) if cut else None
    if not isinstance(arguments, dict):
        log.info("the model called %s with arguments that are not a JSON object; keeping it as text", call.function.name)
        return None
    return {"type": "tool_use", "id": "toolu_" + secrets.token_hex(12), "name": call.function.name, "input": arguments}


def split_calls(calls: list[ResponseToolCall], cut: bool = False) -> tuple[list[dict[str, Any]], str]:
    """Calls as tool_use blocks, and the text of any that cannot be one (``cut``: the answer
    ended at max_tokens, inside the last call)."""
    blocks, leftovers = [], []
    for call in calls:
        block = tool_use_block(call, cut)
        if block is None:
            leftovers.append(json.dumps({"name": call.function.name, "arguments": call.function.arguments}))
        else:
            blocks.append(block)
    return blocks, "\n".join(leftovers)


def message(message_id: str, model: str, content: list[dict[str, Any]], stop_reason: str | None,
            stop_sequence: str | None, usage: dict[str, int]) -> dict[str, Any]:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": usage,
    }


async def whole_message(answer: Answer, calls_filter: ToolCallFilter | None, model: str) -> dict[str, Any]:
    """Read the whole answer and build the Message object."""
    split = ThinkSplit(answer.reasoning_inside)
    pieces = [p async for piece in answer.pieces() for p in split.feed(piece)] + split.finish()
    thinking = "".join(text for kind, text in pieces if kind == "thinking")
    text = "".join(text for kind, text in pieces if kind == "text")
    calls: list[ResponseToolCall] = []
    if calls_filter is not None:
        calls, text = calls_filter.finish_text(text)
    blocks, leftover = split_calls(calls, cut=bool(calls) and answer.run.finish_reason == "length")
    text = "\n".join(t for t in (text, leftover) if t)
    content: list[dict[str, Any]] = [{"type": "thinking", "thinking": thinking, "signature": ""}] if thinking else []
    if text:
        content.append({"type": "text", "text": text})
    content.extend(blocks)
    reason = answer.stop_reason(called_tools=bool(blocks))
    stop_sequence = answer.stop_sequence if reason == "stop_sequence" else None
    return message(new_message_id(), model, content, reason, stop_sequence, answer.counts().usage())
