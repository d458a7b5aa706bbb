"""The Messages API's routes: ``POST /v1/messages`` and ``POST /v1/messages/count_tokens``.

Handlers only translate: the request becomes a chat plan (``api/anthropic/protocol``), the plan's
job runs through the same scheduler and ``Run`` machinery as chat completions, and the
run's output becomes a Message or its event stream. Errors raised here reach the server's
error handler, which writes them in Anthropic's shape for these paths.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

import anyio
from fastapi import APIRouter, Request

from ...base import ContextLengthExceeded
from ...text import ToolCallFilter
from ..shared import (
    GenerationPlan, cancelled_on_disconnect, chat_plan, event_stream, read_request, submitted, tag_jobs,
)
from .out import Answer, whole_message
from .protocol import MessagesInput, MessagesRequest, chat_request, stop_sequences
from .stream import message_stream

if TYPE_CHECKING:
    from ..shared import ApiService

log = logging.getLogger(__name__)


def messages_router(service: "ApiService") -> APIRouter:
    router = APIRouter()
    names = service.names

    @router.post("/v1/messages")
    async def create_message(request: Request) -> Any:
        service.ensure_open()
        body = await read_request(request, MessagesRequest)
        stops = stop_sequences(body)
        plan = await anyio.to_thread.run_sync(chat_plan, chat_request(body), names)
        # The one job ends after max_tokens (required here, so never the server's default), or
        # sooner when the context is full (the scheduler clips the cap to the room left).
        async with submitted(request, service, plan, token_cap=body.max_tokens) as runs:
            answer = Answer(runs[0], stops, plan.reasoning_inside)
            calls = ToolCallFilter(plan.tools, parallel=_parallel(body)) if plan.tools else None
            if body.stream:
                # Errors such as an over-long prompt become HTTP errors; the prefill
                # itself is waited for inside the stream, with pings. Not until the
                # first token: a long prompt's prefill takes minutes on a CPU, and
                # clients give up on a response whose headers have not come (Node's
                # fetch after 300 s, so Claude Code retried a 20,000-token prompt from
                # scratch every five minutes).
                await runs[0].until_admitted()
                return event_stream(message_stream(answer, calls, plan.record.id))
            # Read here rather than drained first: the answer cancels the job at the first
            # stop sequence, so nothing is decoded past it.
            return await whole_message(answer, calls, plan.record.id)

    @router.post("/v1/messages/count_tokens")
    async def count_tokens(request: Request) -> Any:
        service.ensure_open()
        body = await read_request(request, MessagesInput)
        plan = await anyio.to_thread.run_sync(chat_plan, chat_request(body), names)
        tag_jobs(plan.jobs, request, counted=False)  # counting tokens is free on the API it imitates
        return {"input_tokens": await prompt_tokens(request, service, plan)}

    return router


def _parallel(body: MessagesRequest) -> bool:
    return not (body.tool_choice and body.tool_choice.disable_parallel_tool_use)


async def prompt_tokens(request: Request, service: "ApiService", plan: GenerationPlan) -> int:
    """The prompt's length as the model reads it (template and tool text included).

    A count-only job: the scheduler tokenizes the prompt with the model's vocabulary between
    steps and ends it there, so no decode runs and no usage row is written.
    """
    run = service.submit_uncounted(dataclasses.replace(plan.jobs[0], count_only=True))
    try:
        async with cancelled_on_disconnect(request, [run]):
            await run.drain()
    except ContextLengthExceeded as exc:
        return exc.prompt_tokens  # too long to answer, but counted
    finally:
        run.close()
    return run.usage.prompt_tokens
