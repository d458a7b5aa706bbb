"""A streamed Responses API answer: server-sent events in OpenAI's order.

``response.created`` and ``response.in_progress`` open it, as soon as the prompt is admitted;
while the prompt is read, SSE comment lines (which clients skip) keep it alive, one per
progress event and one after every few seconds of silence. The answer then streams as
output items, one open at a time, in the order the model wrote them: its reasoning
(``output_item.added``, ``content_part.added``, ``reasoning_text.delta`` ...,
``reasoning_text.done``, ``content_part.done``, ``output_item.done``), its text as an
assistant message (the same with ``output_text.delta``/``.done``), and each function call
(``output_item.added``, ``function_call_arguments.delta`` as the arguments are written,
``function_call_arguments.done``, ``output_item.done``). ``response.completed`` (or
``response.incomplete`` when the token budget ran out) closes it. Every event carries a
``sequence_number`` and is framed with its ``event:`` line, as OpenAI sends them. The
answer is sorted by ``answer_split`` exactly as chat completions stream it. A failure
after the first event is reported as an ``error`` event followed by ``response.failed``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ...base import ResponseToolCall
from ...text import AnswerPiece, AnswerSplitter, ArgumentsDelta, CallDone, CallStarted, ToolPlan
from ..shared import Run, error_for, keepalive
from .output import (
    FunctionCallItem, OutputItem, OutputMessage, OutputText, ReasoningItem, ReasoningText, ResponseError,
    ResponseMeta, ResponseObject, Status, TextLogprob, final_status, message_item, new_id, reasoning_item,
    text_logprobs, usage_of,
)

OnDone = Callable[[ResponseObject], Awaitable[None]]


class EventWriter:
    """Frames events and numbers them in the order they are sent."""

    def __init__(self) -> None:
        self.sequence = 0

    def __call__(self, kind: str, **fields: Any) -> str:
        data = {"type": kind, **fields, "sequence_number": self.sequence}
        self.sequence += 1
        return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


class TextItemStream:
    """A message or reasoning item being streamed: one text part, growing by deltas."""

    def __init__(self, event: EventWriter, output_index: int, reasoning: bool) -> None:
        self.event = event
        self.output_index = output_index
        self.reasoning = reasoning
        self.id = new_id("rs" if reasoning else "msg")
        self.text = ""
        self.logprobs: list[TextLogprob] = []
        self.kind = "reasoning_text" if reasoning else "output_text"

    def open(self) -> list[str]:
        empty: OutputItem = (
            ReasoningItem(id=self.id, status="in_progress", content=[]) if self.reasoning
            else OutputMessage(id=self.id, status="in_progress", content=[])
        )
        return [
            self.event("response.output_item.added", output_index=self.output_index, item=empty.model_dump()),
            self.event("response.content_part.added", **self._where(), part=self._part("").model_dump()),
        ]

    def delta(self, text: str, logprobs: list[TextLogprob]) -> str:
        self.text += text
        fields: dict[str, Any] = {"delta": text}
        if not self.reasoning:
            self.logprobs.extend(logprobs)
            fields["logprobs"] = [entry.model_dump() for entry in logprobs]
        return self.event(f"response.{self.kind}.delta", **self._where(), **fields)

    def close(self, status: Status) -> tuple[list[str], OutputItem]:
        item: OutputItem = (
            reasoning_item(self.text, status, self.id) if self.reasoning
            else message_item(self.text, status, self.id, self.logprobs)
        )
        done: dict[str, Any] = {"text": self.text}
        if not self.reasoning:
            done["logprobs"] = [entry.model_dump() for entry in self.logprobs]
        events = [
            self.event(f"response.{self.kind}.done", **self._where(), **done),
            self.event("response.content_part.done", **self._where(), part=self._part(self.text).model_dump()),
            self.event("response.output_item.done", output_index=self.output_index, item=item.model_dump()),
        ]
        return events, item

    def _part(self, text: str) -> OutputText | ReasoningText:
        return ReasoningText(text=text) if self.reasoning else OutputText(text=text, logprobs=self.logprobs)

    def _where(self) -> dict[str, Any]:
        return {"item_id": self.id, "output_index": self.output_index, "content_index": 0}


class CallItemStream:
    """A function call being streamed: opened by its name, its arguments as they come."""

    def __init__(self, event: EventWriter, output_index: int, call_id: str, name: str) -> None:
        self.event = event
        self.output_index = output_index
        self.item = FunctionCallItem(id=new_id("fc"), status="in_progress", call_id=call_id, name=name, arguments="")

    def open(self) -> list[str]:
        return [self.event("response.output_item.added", output_index=self.output_index, item=self.item.model_dump())]

    def delta(self, text: str) -> str:
        self.item = self.item.model_copy(update={"arguments": self.item.arguments + text})
        return self.event("response.function_call_arguments.delta", **self._where(), delta=text)

    def close(self, status: Status, call: ResponseToolCall | None = None) -> tuple[list[str], OutputItem]:
        arguments = call.function.arguments if call is not None else self.item.arguments
        done = self.item.model_copy(update={"status": status, "arguments": arguments})
        events = [
            self.event("response.function_call_arguments.done", **self._where(), name=done.name, arguments=arguments),
            self.event("response.output_item.done", output_index=self.output_index, item=done.model_dump()),
        ]
        return events, done

    def _where(self) -> dict[str, Any]:
        return {"item_id": self.item.id, "output_index": self.output_index}


class OutputStreams:
    """The response's output items as they stream: at most one open, the closed ones kept."""

    def __init__(self, event: EventWriter, held: frozenset[str] = frozenset()) -> None:
        self.event = event
        self.items: list[OutputItem] = []
        self.current: TextItemStream | CallItemStream | None = None
        self.calls: dict[int, CallItemStream] = {}
        # Calls of these names are not streamed as function calls: this server runs them (MCP
        # tools) and adds their own items once each call is decided.
        self.held = held
        self._held_calls: set[int] = set()

    def piece(self, piece: AnswerPiece, logprobs: list[TextLogprob]) -> list[str]:
        frames: list[str] = []
        if piece.reasoning:
            frames += self._text(piece.reasoning, reasoning=True, logprobs=[])
        if piece.text:
            frames += self._text(piece.text, reasoning=False, logprobs=logprobs)
        for call_event in piece.call_events:
            if self._is_held(call_event):
                continue
            if isinstance(call_event, CallStarted):
                frames += self._start_call(call_event.index, call_event.id, call_event.name)
            elif isinstance(call_event, ArgumentsDelta):
                stream = self.calls.get(call_event.index)
                if stream is not None:
                    frames.append(stream.delta(call_event.text))
            elif isinstance(call_event, CallDone):
                if call_event.index not in self.calls:
                    frames += self._start_call(call_event.index, call_event.call.id, call_event.call.function.name)
                frames += self._close(self.calls.pop(call_event.index), "completed", call_event.call)
        return frames

    def _is_held(self, call_event: object) -> bool:
        if isinstance(call_event, CallStarted) and call_event.name in self.held:
            self._held_calls.add(call_event.index)
        elif isinstance(call_event, CallDone) and call_event.call.function.name in self.held:
            self._held_calls.discard(call_event.index)
            return True
        index = getattr(call_event, "index", None)
        return index is not None and index in self._held_calls

    def close_open(self, status: Status) -> list[str]:
        """Close the item being streamed, if any (a round of a longer response ends)."""
        return self._close(self.current, status) if self.current is not None else []

    def finish(self, status: Status) -> list[str]:
        """Close what is open; an answer with no items at all is still one (empty) message."""
        frames = self._close(self.current, status) if self.current is not None else []
        if not self.items:
            empty = self.current = TextItemStream(self.event, 0, reasoning=False)
            frames += empty.open() + self._close(empty, status)
        return frames

    def _text(self, text: str, reasoning: bool, logprobs: list[TextLogprob]) -> list[str]:
        frames: list[str] = []
        current = self.current
        if not (isinstance(current, TextItemStream) and current.reasoning == reasoning):
            if current is not None:
                frames += self._close(current, "completed")
            current = self.current = TextItemStream(self.event, len(self.items), reasoning)
            frames += current.open()
        frames.append(current.delta(text, logprobs))
        return frames

    def _start_call(self, index: int, call_id: str, name: str) -> list[str]:
        frames = self._close(self.current, "completed") if self.current is not None else []
        stream = self.current = self.calls[index] = CallItemStream(self.event, len(self.items), call_id, name)
        return frames + stream.open()

    def _close(
        self, stream: TextItemStream | CallItemStream, status: Status, call: ResponseToolCall | None = None,
    ) -> list[str]:
        if isinstance(stream, CallItemStream):
            frames, item = stream.close(status, call)
            self.calls = {i: s for i, s in self.calls.items() if s is not stream}
        else:
            frames, item = stream.close(status)
        self.items.append(item)
        if self.current is stream:
            self.current = None
        return frames


async def response_stream(
    meta: ResponseMeta, run: Run, tools: ToolPlan | None, on_done: OnDone, reasoning_inside: str | None = None,
) -> AsyncIterator[str]:
    """The events of one streamed response; ``on_done`` (storage) hears the final object."""
    event = EventWriter()
    streams = OutputStreams(event)
    try:
        opening = meta.snapshot("in_progress", []).model_dump(mode="json")
        yield event("response.created", response=opening)
        yield event("response.in_progress", response=opening)
        async for progress in run.reading():
            yield keepalive(progress)  # a comment: not an event, so it takes no sequence number
        splitter = AnswerSplitter(tools, meta.request.parallel_tool_calls, reasoning_inside)
        pending: list[TextLogprob] = []  # logprobs of tokens whose text has not been sent yet
        async for chunk in run.chunks():
            piece = splitter.feed(chunk.text)
            if tools is None and chunk.logprobs:  # as in a whole response: only without tools
                pending += text_logprobs(chunk.logprobs)
            if piece.reasoning:
                pending = []  # reasoning tokens: their logprobs do not belong to the answer
            for framed in streams.piece(piece, pending if piece.text else []):
                yield framed
            if piece.text:
                pending = []
        status = final_status(run)
        for framed in streams.piece(splitter.finish(), []) + streams.finish(status):
            yield framed
        final = meta.snapshot(status, streams.items, usage_of(run))
        # Stored before the client hears the end, so a next request naming it finds it.
        await on_done(final)
        kind = "response.incomplete" if status == "incomplete" else "response.completed"
        yield event(kind, response=final.model_dump(mode="json"))
    except Exception as exc:  # noqa: BLE001 — the status line is sent: report in the stream
        error = error_for(exc)
        code = error.code or error.type
        yield event("error", code=code, message=error.message, param=error.param)
        failed = meta.snapshot("failed", streams.items, error=ResponseError(code=code, message=error.message))
        yield event("response.failed", response=failed.model_dump(mode="json"))
    finally:
        run.close()
