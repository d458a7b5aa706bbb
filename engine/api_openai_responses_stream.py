"""A streamed Responses API answer: server-sent events in OpenAI's order.

``response.created`` and ``response.in_progress`` open it; the answer's text is one
assistant message (``output_item.added``, ``content_part.added``, ``output_text.delta``
..., ``output_text.done``, ``content_part.done``, ``output_item.done``); each function call
is an item of its own (``output_item.added``, ``function_call_arguments.delta``/``.done``,
``output_item.done``); ``response.completed`` (or ``response.incomplete`` when the token
budget ran out) closes it. Every event carries a ``sequence_number`` and is framed with
its ``event:`` line, as OpenAI sends them. Text that may be a function call is held back
by ``ToolCallFilter`` until it is known, exactly as chat completions stream it. A failure
after the first event is reported as an ``error`` event followed by ``response.failed``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from .api_errors import error_for
from .api_openai_responses_output import (
    OutputItem,
    OutputMessage,
    OutputText,
    ResponseError,
    TextLogprob,
    ResponseMeta,
    ResponseObject,
    call_item,
    final_status,
    message_item,
    new_id,
    text_logprobs,
    usage_of,
)
from .api_responses import ToolCallFilter
from .api_runs import Run
from .protocol import ResponseToolCall
from .tool_calls import ToolPlan

OnDone = Callable[[ResponseObject], Awaitable[None]]


class EventWriter:
    """Frames events and numbers them in the order they are sent."""

    def __init__(self) -> None:
        self.sequence = 0

    def __call__(self, kind: str, **fields: Any) -> str:
        data = {"type": kind, **fields, "sequence_number": self.sequence}
        self.sequence += 1
        return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


class MessageStream:
    """The assistant message being streamed: opened by its first text, closed at the end."""

    def __init__(self, event: EventWriter, output_index: int) -> None:
        self.event = event
        self.output_index = output_index
        self.id = new_id("msg")
        self.text = ""
        self.logprobs: list[TextLogprob] = []

    def open(self) -> list[str]:
        item = OutputMessage(id=self.id, status="in_progress", content=[])
        return [
            self.event("response.output_item.added", output_index=self.output_index, item=item.model_dump()),
            self.event("response.content_part.added", **self._where(), part=OutputText(text="").model_dump()),
        ]

    def delta(self, text: str, logprobs: list[TextLogprob] | None = None) -> str:
        self.text += text
        self.logprobs.extend(logprobs or [])
        dumped = [entry.model_dump() for entry in logprobs or []]
        return self.event("response.output_text.delta", **self._where(), delta=text, logprobs=dumped)

    def close(self, status: str) -> tuple[list[str], OutputMessage]:
        part = OutputText(text=self.text, logprobs=self.logprobs)
        item = message_item(self.text, "incomplete" if status == "incomplete" else "completed", self.id, self.logprobs)
        logprobs = [entry.model_dump() for entry in self.logprobs]
        events = [
            self.event("response.output_text.done", **self._where(), text=self.text, logprobs=logprobs),
            self.event("response.content_part.done", **self._where(), part=part.model_dump()),
            self.event("response.output_item.done", output_index=self.output_index, item=item.model_dump()),
        ]
        return events, item

    def _where(self) -> dict[str, Any]:
        return {"item_id": self.id, "output_index": self.output_index, "content_index": 0}


def call_events(event: EventWriter, call: ResponseToolCall, output_index: int) -> tuple[list[str], OutputItem]:
    opening = call_item(call, status="in_progress", arguments="")
    done = opening.model_copy(update={"status": "completed", "arguments": call.function.arguments})
    where = {"item_id": opening.id, "output_index": output_index}
    events = [
        event("response.output_item.added", output_index=output_index, item=opening.model_dump()),
        event("response.function_call_arguments.delta", **where, delta=call.function.arguments),
        event("response.function_call_arguments.done", **where, name=call.function.name, arguments=call.function.arguments),
        event("response.output_item.done", output_index=output_index, item=done.model_dump()),
    ]
    return events, done


async def response_stream(
    meta: ResponseMeta, run: Run, tools: ToolPlan | None, on_done: OnDone
) -> AsyncIterator[str]:
    """The events of one streamed response; ``on_done`` (storage) hears the final object."""
    event = EventWriter()
    output: list[OutputItem] = []
    try:
        opening = meta.snapshot("in_progress", []).model_dump(mode="json")
        yield event("response.created", response=opening)
        yield event("response.in_progress", response=opening)
        held = ToolCallFilter(tools, meta.request.parallel_tool_calls) if tools is not None else None
        message: MessageStream | None = None
        async for chunk in run.chunks():
            text = held.feed(chunk.text) if held is not None else chunk.text
            if not text:
                continue
            if message is None:
                message = MessageStream(event, len(output))
                for framed in message.open():
                    yield framed
            # As in a whole response, logprobs come only when no tools are offered.
            logprobs = text_logprobs(chunk.logprobs) if held is None and chunk.logprobs else None
            yield message.delta(text, logprobs)
        calls, rest = held.finish() if held is not None else ([], "")
        status = final_status(run)
        if message is None and (rest or not calls):
            message = MessageStream(event, len(output))
            for framed in message.open():
                yield framed
        if message is not None:
            if rest:
                yield message.delta(rest)
            events, item = message.close(status)
            for framed in events:
                yield framed
            output.append(item)
        for call in calls:
            events, call_done = call_events(event, call, len(output))
            for framed in events:
                yield framed
            output.append(call_done)
        final = meta.snapshot(status, output, usage_of(run))
        # Stored before the client hears the end, so a next request naming it finds it.
        await on_done(final)
        kind = "response.incomplete" if status == "incomplete" else "response.completed"
        yield event(kind, response=final.model_dump(mode="json"))
    except Exception as exc:  # noqa: BLE001 — the status line is sent: report in the stream
        error = error_for(exc)
        code = error.code or error.type
        yield event("error", code=code, message=error.message, param=error.param)
        failed = meta.snapshot("failed", output, error=ResponseError(code=code, message=error.message))
        yield event("response.failed", response=failed.model_dump(mode="json"))
    finally:
        run.close()
