"""Server-sent events of the Messages API, framed as Anthropic frames them.

Every event is ``event: <type>`` then ``data: <json with the same type>`` and a blank
line. The sequence: ``message_start``, ``ping``, then per content block
``content_block_start``, its ``content_block_delta`` events (``thinking_delta``,
``text_delta`` or ``input_json_delta``) and ``content_block_stop``; then ``message_delta`` with the stop
reason and the usage, and ``message_stop``. The stream opens as soon as the prompt is
admitted; while it is read, a ``ping`` follows each progress event and every few seconds of
silence. More ``ping`` events come while text is held back. An error after the stream has
started is an ``error`` event, which the ``anthropic`` SDK raises.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from ...text import ToolCallFilter
from ..shared import KEEPALIVE_S, anthropic_error
from .out import Answer, TokenCounts, message, new_message_id, split_calls
from .thinking import Piece, ThinkSplit

# The arguments of a tool call go out in pieces of this many characters, as Anthropic
# streams them, so clients exercise their partial-JSON handling.
JSON_PIECE_CHARS = 64
# While the prompt is read, or text is held back (a tool call being written, an undecided
# opening), nothing else is sent; a ping at least this often shows the client that the
# answer is still coming.
PING_EVERY_S = KEEPALIVE_S


def event(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data}, ensure_ascii=False)}\n\n"


class _Blocks:
    """Numbers content blocks and opens and closes thinking and text blocks as they come."""

    _START = {"thinking": {"type": "thinking", "thinking": "", "signature": ""}, "text": {"type": "text", "text": ""}}
    _DELTA = {"thinking": "thinking_delta", "text": "text_delta"}

    def __init__(self) -> None:
        self.index = 0
        self.open_kind: str | None = None

    def delta(self, kind: str, text: str) -> list[str]:
        events = self.close() if self.open_kind not in (None, kind) else []
        if self.open_kind is None:
            events.append(event("content_block_start", {"index": self.index, "content_block": self._START[kind]}))
            self.open_kind = kind
        delta = {"type": self._DELTA[kind], kind: text}
        events.append(event("content_block_delta", {"index": self.index, "delta": delta}))
        return events

    def close(self) -> list[str]:
        if self.open_kind is None:
            return []
        self.open_kind = None
        self.index += 1
        return [event("content_block_stop", {"index": self.index - 1})]

    def tool_use(self, block: dict[str, Any]) -> list[str]:
        index = self.index
        self.index += 1
        opening = {**block, "input": {}}
        arguments = json.dumps(block["input"], ensure_ascii=False)
        pieces = [arguments[i:i + JSON_PIECE_CHARS] for i in range(0, len(arguments), JSON_PIECE_CHARS)]
        return [
            event("content_block_start", {"index": index, "content_block": opening}),
            *(event("content_block_delta", {"index": index, "delta": {"type": "input_json_delta", "partial_json": p}})
              for p in pieces),
            event("content_block_stop", {"index": index}),
        ]


async def message_stream(answer: Answer, calls_filter: ToolCallFilter | None, model: str) -> AsyncIterator[str]:
    # The route waited until the prompt was admitted, so its sequence is open and its size known;
    # message_delta carries the totals again with the output.
    prompt = answer.run.handle.prompt_usage
    start_usage = TokenCounts(prompt.prompt_tokens, prompt.cached_tokens, 0).usage() if prompt else \
        TokenCounts(0, 0, 0).usage()
    try:
        yield event("message_start", {"message": message(new_message_id(), model, [], None, None, start_usage)})
        yield event("ping", {})
        async for _progress in answer.run.reading(PING_EVERY_S):
            yield event("ping", {})  # the prompt is being read: the answer is coming
        blocks = _Blocks()
        split = ThinkSplit(answer.reasoning_inside)
        last_sent = time.monotonic()
        async for piece in answer.pieces():
            items = _deltas(blocks, split.feed(piece), calls_filter)
            now = time.monotonic()
            if items:
                last_sent = now
            elif now - last_sent >= PING_EVERY_S:
                items, last_sent = [event("ping", {})], now
            for item in items:
                yield item
        for item in _deltas(blocks, split.finish(), calls_filter):
            yield item
        calls, rest = calls_filter.finish() if calls_filter is not None else ([], "")
        tool_blocks, leftover = split_calls(calls, cut=bool(calls) and answer.run.finish_reason == "length")
        for text in (rest, leftover):
            if text:
                for item in blocks.delta("text", text):
                    yield item
        for item in blocks.close():
            yield item
        for block in tool_blocks:
            for item in blocks.tool_use(block):
                yield item
        reason = answer.stop_reason(called_tools=bool(tool_blocks))
        delta = {"stop_reason": reason, "stop_sequence": answer.stop_sequence if reason == "stop_sequence" else None}
        yield event("message_delta", {"delta": delta, "usage": answer.counts().usage()})
        yield event("message_stop", {})
    except Exception as exc:  # noqa: BLE001 — the status line is sent: report in the stream
        _status, body, _headers = anthropic_error(exc)
        yield f"event: error\ndata: {json.dumps(body, ensure_ascii=False)}\n\n"
    finally:
        answer.run.close()


def _deltas(blocks: _Blocks, pieces: list[Piece], calls_filter: ToolCallFilter | None) -> list[str]:
    """Events for split pieces; answer text goes through the tool-call filter first."""
    events = []
    for kind, text in pieces:
        if kind == "text" and calls_filter is not None:
            text = calls_filter.feed(text)
        if text:
            events.extend(blocks.delta(kind, text))
    return events
