"""A Responses answer with MCP tools: rounds of model → calls run here → results → model.

The response holds, in order: an ``mcp_list_tools`` item per server the chain had not listed,
an ``mcp_call`` per call the client approved in this request (``mcp_approval_response``),
then each round's reasoning and text, and an ``mcp_call`` per call run (or an
``mcp_approval_request`` per call that must wait for the client, which ends the response, as a
call of one of the client's own function tools does). Each round is an ordinary chat plan; its
calls and results join the chat request's messages for the next. Rounds stop when the model
answers without calling, at ``max_tool_calls`` (the next round may not call) or after
``DEFAULT_MAX_ROUNDS``. ``max_output_tokens`` holds for the whole response, as OpenAI's does:
each round may write what the rounds before it left, and a response whose rounds spent it all
ends ``incomplete`` (``max_output_tokens``).

One generator serves both modes: it yields the stream's events (the same events and order as
``stream.response_stream``, plus OpenAI's ``response.mcp_list_tools.*`` and
``response.mcp_call.*``) and, last, the final response object; a whole response reads only that.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import anyio
from fastapi import Request

from ...base import (
    ChatCompletionRequest, ChatMessage, FunctionCall, GenerateJob, ResponseToolCall, ToolCall, Usage,
)
from ...text import AnswerPiece, AnswerSplitter
from ...tools import ANSWER_ONLY_GRAMMAR, DEFAULT_MAX_ROUNDS
from ..shared import ApiError, ApiService, chat_plan, error_for, keepalive, run_plan
from .mcp_tools import McpRequest
from .output import (
    InputTokensDetails, McpCallItem, ResponseError, ResponseMeta, ResponseObject, ResponseUsage, Status, new_id,
)
from .protocol import add_call
from .stream import EventWriter, OutputStreams

log = logging.getLogger(__name__)

OnDone = Callable[[ResponseObject], Awaitable[None]]

#: While a tool runs, a streamed response sends an SSE comment this often (as prompt reading
#: does): 75 s without a byte looked like a dead server to clients and proxies.
CALL_KEEPALIVE_S = 5.0


@dataclass
class McpAnswer:
    """What one response with MCP tools needs besides the chat request."""

    request: Request
    service: ApiService
    meta: ResponseMeta
    chat: ChatCompletionRequest
    mcp: McpRequest
    approved: list[dict[str, object]]  # approval requests the client approved now


@dataclass
class _Progress:
    """What the rounds have come to so far: tokens, calls still allowed, how the response ends."""

    calls_left: int
    usage: Usage = field(default_factory=Usage)
    status: Status = "completed"
    waiting: bool = False  # a call waits for the client's approval: the response ends


@dataclass
class _Round:
    """One model round's outcome: its text and the calls it made."""

    text: str = ""
    calls: list[ResponseToolCall] = field(default_factory=list)


async def mcp_events(answer: McpAnswer, streams: OutputStreams) -> AsyncIterator[str | ResponseObject]:
    """The response's events, then the response; errors are raised (``mcp_stream`` reports
    them in the stream)."""
    async for framed in _opening(answer, streams):
        yield framed
    async for framed in _approved_calls(answer, streams):
        yield framed
    progress = _Progress(calls_left=chat_calls_limit(answer))
    async for framed in _rounds(answer, streams, progress):
        yield framed
    for framed in streams.finish(progress.status):
        yield framed
    usage = progress.usage
    yield answer.meta.snapshot(progress.status, streams.items, ResponseUsage(
        input_tokens=usage.prompt_tokens, input_tokens_details=InputTokensDetails(cached_tokens=usage.cached_tokens),
        output_tokens=usage.completion_tokens, total_tokens=usage.prompt_tokens + usage.completion_tokens))


async def _opening(answer: McpAnswer, streams: OutputStreams) -> AsyncIterator[str]:
    """The response opens, with an ``mcp_list_tools`` item per server not listed before."""
    event = streams.event
    opening = answer.meta.snapshot("in_progress", []).model_dump(mode="json")
    yield event("response.created", response=opening)
    yield event("response.in_progress", response=opening)
    for listing in answer.mcp.listing_items():
        where = {"item_id": listing.id, "output_index": len(streams.items)}
        yield event("response.output_item.added", output_index=where["output_index"],
                    item=listing.model_copy(update={"tools": []}).model_dump())
        yield event("response.mcp_list_tools.in_progress", **where)
        yield event("response.mcp_list_tools.completed", **where)
        yield event("response.output_item.done", output_index=where["output_index"], item=listing.model_dump())
        streams.items.append(listing)


async def _approved_calls(answer: McpAnswer, streams: OutputStreams) -> AsyncIterator[str]:
    """Run the calls the client approved in this request, before any round."""
    mcp = answer.mcp
    for asked in answer.approved:
        label, name, arguments = str(asked.get("server_label")), str(asked.get("name")), str(asked.get("arguments"))
        use = mcp.server_of(label, f"the approval of {asked.get('id')!r}")
        if name not in {t.name for t in use.tools}:
            raise ApiError(400, f"the approved call names {label}/{name}, which this request does not offer "
                           "(allowed_tools, or the tool was switched off)", code="invalid_value", param="input")
        async for framed in _call(answer, streams, streams.event, label, name, arguments, str(asked.get("id"))):
            yield framed


async def _rounds(answer: McpAnswer, streams: OutputStreams, progress: _Progress) -> AsyncIterator[str]:
    """Model rounds, each followed by its calls, until the model answers, the client must
    act (its own function, an approval), the budget is spent or the rounds run out."""
    chat, mcp = answer.chat, answer.mcp
    budget = chat.max_tokens  # the response's max_output_tokens, for all rounds together
    for index in range(DEFAULT_MAX_ROUNDS):
        if (index > 0 or answer.approved) and chat.tool_choice != "none":
            chat.tool_choice = "auto"  # a forced tool is the first round's only (an approved call was one)
        if budget is not None:
            left = budget - progress.usage.completion_tokens
            if left <= 0:
                progress.status = "incomplete"
                break
            chat.max_tokens = left
        last_round = progress.calls_left <= 0 or index == DEFAULT_MAX_ROUNDS - 1
        outcome = _Round()
        async for framed in _model_round(answer, streams, progress, last_round, outcome):
            yield framed
        ours = [c for c in outcome.calls if c.function.name in mcp.by_name]
        theirs = [c for c in outcome.calls if c.function.name not in mcp.by_name]
        if not ours or theirs or progress.status == "incomplete" or last_round:
            break  # an answer, or a call of the client's own functions: the client's turn
        chat.messages.append(ChatMessage(role="assistant", content=outcome.text.strip() or None))
        async for framed in _round_calls(answer, streams, progress, ours):
            yield framed
        if progress.waiting:
            break


async def _model_round(answer: McpAnswer, streams: OutputStreams, progress: _Progress, last_round: bool,
                       outcome: _Round) -> AsyncIterator[str]:
    """One round of the model, streamed; its text and calls go into ``outcome``."""
    chat = answer.chat
    plan = await anyio.to_thread.run_sync(chat_plan, chat, answer.service.names)
    if last_round:
        words_only(plan.jobs)
    run = (await run_plan(answer.request, answer.service, plan, True))[0]
    splitter = AnswerSplitter(plan.tools, chat.parallel_tool_calls is not False, plan.reasoning_inside)
    text = ""
    try:
        async for reading in run.reading():
            yield keepalive(reading)
        async for chunk in run.chunks():
            piece = splitter.feed(chunk.text)
            piece, text = _after_blank(piece, text)
            for framed in streams.piece(piece, []):
                yield framed
        last, text = _after_blank(splitter.finish(), text)
        for framed in streams.piece(last, []):
            yield framed
    finally:
        run.close()
    usage = progress.usage
    progress.usage = Usage(usage.prompt_tokens + run.usage.prompt_tokens, usage.cached_tokens + run.usage.cached_tokens,
                           usage.completion_tokens + run.usage.completion_tokens)
    progress.status = "incomplete" if run.finish_reason == "length" else "completed"
    for framed in streams.close_open("completed"):
        yield framed
    outcome.text, outcome.calls = text, list(splitter.calls)


async def _round_calls(answer: McpAnswer, streams: OutputStreams, progress: _Progress,
                       calls: list[ResponseToolCall]) -> AsyncIterator[str]:
    """Run a round's calls of MCP tools that may run unasked (within ``max_tool_calls``);
    the others become approval requests, and the response waits for the client."""
    mcp, event = answer.mcp, streams.event
    for call in calls:
        tool = mcp.by_name[call.function.name]
        arguments = call.function.arguments or "{}"
        if progress.calls_left > 0 and mcp.runs_unasked(tool):
            progress.calls_left -= 1
            async for framed in _call(answer, streams, event, tool.server, tool.name, arguments, None,
                                      call_id=call.id, shown_as=call.function.name):
                yield framed
        else:
            waits = mcp.approval_request(tool, arguments)
            yield event("response.output_item.added", output_index=len(streams.items), item=waits.model_dump())
            yield event("response.output_item.done", output_index=len(streams.items), item=waits.model_dump())
            streams.items.append(waits)
            progress.waiting = True


def words_only(jobs: list[GenerateJob]) -> None:
    """This round answers in words: the same tools are offered (the prompt's prefix is the
    cached one) but the answer may not open a call. A client's own grammar (a JSON format) stays."""
    for job in jobs:
        if job.sampling.grammar is None:
            job.sampling = job.sampling.with_overrides(grammar=ANSWER_ONLY_GRAMMAR)


def _after_blank(piece: AnswerPiece, text: str) -> tuple[AnswerPiece, str]:
    """``piece`` with its text held back while the round's text is only blank (a model often
    writes a newline before a call: no message item for that); the round's text so far."""
    if not text.strip():
        pending = text + piece.text
        shown = pending if pending.strip() else ""
        return AnswerPiece(piece.reasoning, shown.lstrip(), piece.call_events), pending
    return piece, text + piece.text


def chat_calls_limit(answer: McpAnswer) -> int:
    """Calls the rounds may still run: ``max_tool_calls`` less the approved ones run first."""
    limit = answer.meta.request.max_tool_calls
    return DEFAULT_MAX_ROUNDS if limit is None else max(0, limit - len(answer.approved))


async def _call(answer: McpAnswer, streams: OutputStreams, event: EventWriter, server: str, tool: str,
                arguments: str, approval_request_id: str | None, call_id: str | None = None,
                shown_as: str | None = None) -> AsyncIterator[str]:
    """Run one call on a worker thread, streaming its item; its call and result join the chat
    request. While it runs, keep-alive comments go out every ``CALL_KEEPALIVE_S`` and a client
    that went away stops the call (it ran to its timeout before)."""
    mcp, chat = answer.mcp, answer.chat
    index = len(streams.items)
    running = McpCallItem(id=new_id("mcp"), status="in_progress", server_label=server, name=tool, arguments=arguments,
                          approval_request_id=approval_request_id)
    where = {"item_id": running.id, "output_index": index}
    yield event("response.output_item.added", output_index=index, item=running.model_dump())
    yield event("response.mcp_call_arguments.done", **where, arguments=arguments)
    yield event("response.mcp_call.in_progress", **where)
    cancel = threading.Event()
    pending = asyncio.get_running_loop().run_in_executor(None, functools.partial(mcp.call, running, cancel))
    try:
        while True:
            finished, _ = await asyncio.wait({pending}, timeout=CALL_KEEPALIVE_S)
            if finished:
                break
            if await answer.request.is_disconnected():
                cancel.set()
            yield keepalive(None)
    finally:
        cancel.set()  # the response was abandoned (the client left, the generator closed)
    done = pending.result()
    yield event("response.mcp_call.failed" if done.status == "failed" else "response.mcp_call.completed", **where)
    yield event("response.output_item.done", output_index=index, item=done.model_dump())
    streams.items.append(done)
    result = done.output if done.error is None else f"Error: {done.error}"
    add_call(chat.messages, ToolCall(id=call_id or done.id, function=FunctionCall(
        name=shown_as or tool, arguments=arguments)), result or "")


async def mcp_stream(answer: McpAnswer, on_done: OnDone) -> AsyncIterator[str]:
    """The streamed response: events as they come, a failure as ``error`` + ``response.failed``."""
    streams = OutputStreams(EventWriter(), held=answer.mcp.names)
    event = streams.event
    try:
        async for framed in mcp_events(answer, streams):
            if isinstance(framed, ResponseObject):
                await on_done(framed)  # stored before the client hears the end
                kind = "response.incomplete" if framed.status == "incomplete" else "response.completed"
                yield event(kind, response=framed.model_dump(mode="json"))
            else:
                yield framed
    except Exception as exc:  # noqa: BLE001 — the status line is sent: report in the stream
        error = error_for(exc)
        code = error.code or error.type
        yield event("error", code=code, message=error.message, param=error.param)
        failed = answer.meta.snapshot("failed", streams.items, error=ResponseError(code=code, message=error.message))
        yield event("response.failed", response=failed.model_dump(mode="json"))


async def mcp_whole(answer: McpAnswer) -> ResponseObject:
    """The whole response (not streamed); an error is raised as the HTTP error it is."""
    final: ResponseObject | None = None
    async for framed in mcp_events(answer, OutputStreams(EventWriter(), held=answer.mcp.names)):
        if isinstance(framed, ResponseObject):
            final = framed
    if final is None:  # the generator always ends with the response
        raise RuntimeError("the MCP rounds ended without a response")
    return final
