"""Server-sent events of the Messages API, framed as Anthropic frames them.

Every event is ``event: <type>`` then ``data: <json with the same type>`` and a blank
line. The sequence: ``message_start``, ``ping``, then per content block
``content_block_start``, its ``content_block_delta`` events (``text_delta`` or
``input_json_delta``) and ``content_block_stop``; then ``message_delta`` with the stop
reason and the usage, and ``message_stop``. An error after the stream has started is an
``error`` event, which the ``anthropic`` SDK raises.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from .api_anthropic_errors import anthropic_error
from .api_anthropic_out import Answer, TokenCounts, message, new_message_id, split_calls
from .api_responses import ToolCallFilter

# The arguments of a tool call go out in pieces of this many characters, as Anthropic
# streams them, so clients exercise their partial-JSON handling.
JSON_PIECE_CHARS = 64


def event(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data}, ensure_ascii=False)}\n\n"


class _Blocks:
    """Numbers content blocks and opens and closes the text block as text comes and goes."""

    def __init__(self) -> None:
        self.index = 0
        self.text_open = False

    def text(self, text: str) -> list[str]:
        events = []
        if not self.text_open:
            events.append(event("content_block_start", {"index": self.index, "content_block": {"type": "text", "text": ""}}))
            self.text_open = True
        events.append(event("content_block_delta", {"index": self.index, "delta": {"type": "text_delta", "text": text}}))
        return events

    def close_text(self) -> list[str]:
        if not self.text_open:
            return []
        self.text_open = False
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
    # The prompt's size is known when the job finishes; message_delta carries the totals.
    start_usage = TokenCounts(0, 0, 0).usage()
    try:
        yield event("message_start", {"message": message(new_message_id(), model, [], None, None, start_usage)})
        yield event("ping", {})
        blocks = _Blocks()
        async for piece in answer.pieces():
            text = calls_filter.feed(piece) if calls_filter is not None else piece
            if text:
                for item in blocks.text(text):
                    yield item
        calls, rest = calls_filter.finish() if calls_filter is not None else ([], "")
        tool_blocks, leftover = split_calls(calls)
        for text in (rest, leftover):
            if text:
                for item in blocks.text(text):
                    yield item
        for item in blocks.close_text():
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
