"""The Messages API's routes: ``POST /v1/messages`` and ``POST /v1/messages/count_tokens``.

Handlers only translate: the request becomes a chat plan (``api/anthropic/protocol``), the plan's
job runs through the same scheduler and ``Run`` machinery as chat completions, and the
run's output becomes a Message or its event stream. Errors raised here reach the server's
error handler, which writes them in Anthropic's shape for these paths.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from ...base import ContextLengthExceeded, RequestModel
from ...text import ToolCallFilter
from ..shared import (
    ApiError, GenerationPlan, Run, cancelled_on_disconnect, chat_plan, check_json_value, stamp_client,
    tag_jobs,
)
from .out import Answer, whole_message
from .protocol import MessagesInput, MessagesRequest, chat_request, stop_sequences
from .stream import message_stream

if TYPE_CHECKING:
    from ..shared import ApiService

log = logging.getLogger(__name__)

BodyT = TypeVar("BodyT", bound=RequestModel)


async def read_body(request: Request, model: type[BodyT]) -> BodyT:
    try:
        data = json.loads(await request.body())
    except (ValueError, RecursionError):
        raise ApiError(400, "the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    check_json_value(data)  # lone surrogates, nesting too deep: 400 (api_bodies)
    parsed = model.model_validate(data)
    unknown = parsed.unknown_fields()
    if unknown:
        log.info("%s: ignoring fields this server does not know: %s", request.url.path, ", ".join(sorted(set(unknown))))
    return parsed


def start_run(service: "ApiService", plan: GenerationPlan, cap: int | None) -> Run:
    """Queue the plan's one job; it ends after ``cap`` tokens (``max_tokens``), or sooner when
    the context is full (the scheduler clips the cap to the room after the prompt)."""
    stamp_client(plan.jobs)  # a named key's requests count as "api:<name>"
    plan.jobs[0].token_cap = cap
    handle = service.engine.scheduler.submit(plan.jobs[0])
    return service.counted(Run(handle, service.runs), plan.jobs[0], plan)


def messages_router(service: "ApiService") -> APIRouter:
    router = APIRouter()
    names = service.names

    @router.post("/v1/messages")
    async def create_message(request: Request) -> Any:
        service.ensure_open()
        body = await read_body(request, MessagesRequest)
        stops = stop_sequences(body)
        plan = await anyio.to_thread.run_sync(chat_plan, chat_request(body), names)
        tag_jobs(plan.jobs, request)  # usage is counted per client
        run = start_run(service, plan, cap=body.max_tokens)
        answer = Answer(run, stops, plan.reasoning_inside)
        calls = ToolCallFilter(plan.tools, parallel=_parallel(body)) if plan.tools else None
        try:
            async with cancelled_on_disconnect(request, [run]):
                if body.stream:
                    # Errors such as an over-long prompt become HTTP errors; the prefill
                    # itself is waited for inside the stream, with pings. Not until the
                    # first token: a long prompt's prefill takes minutes on a CPU, and
                    # clients give up on a response whose headers have not come (Node's
                    # fetch after 300 s, so Claude Code retried a 20,000-token prompt from
                    # scratch every five minutes).
                    await run.until_admitted()
                    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
                    return StreamingResponse(message_stream(answer, calls, plan.record.id),
                                             media_type="text/event-stream", headers=headers)
                return await whole_message(answer, calls, plan.record.id)
        except BaseException:
            run.close()
            raise

    @router.post("/v1/messages/count_tokens")
    async def count_tokens(request: Request) -> Any:
        service.ensure_open()
        body = await read_body(request, MessagesInput)
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
    job = dataclasses.replace(plan.jobs[0], count_only=True)
    stamp_client([job])
    run = Run(service.engine.scheduler.submit(job), service.runs)
    try:
        async with cancelled_on_disconnect(request, [run]):
            await run.drain()
    except ContextLengthExceeded as exc:
        return exc.prompt_tokens  # too long to answer, but counted
    finally:
        run.close()
    return run.usage.prompt_tokens
