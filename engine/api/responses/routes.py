"""The Responses API's routes: ``POST /v1/responses``, ``GET`` and ``DELETE`` by id, and a
stored response's input items.

Handlers only translate: the request becomes a chat request (``api/responses/protocol``),
runs as a chat plan through the shared submit and wait (``api/shared/service.run_plan``), and
comes back as a response object (``api/responses/output``) or an event stream
(``api/responses/stream``). Errors keep OpenAI's shape through the server's one
mapper; parameter names are given in this API's terms (``input``, ``text.format``,
``max_output_tokens``) rather than chat completions'.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Literal

import anyio
from fastapi import APIRouter, Request

from ...base import InglenookError, StoreError
from ..shared import ApiError, ApiService, chat_plan, error_for, event_stream, read_request, run_plan
from .mcp_rounds import McpAnswer, mcp_stream, mcp_whole
from .mcp_tools import McpRequest, approved_calls, mcp_request
from .output import ResponseMeta, ResponseObject, whole_response
from .protocol import ResponseCreateRequest, Translated, translate
from .store import ResponseStore
from .stream import response_stream

log = logging.getLogger(__name__)

# Chat completions' parameter names -> this API's, for error bodies.
PARAM_NAMES = {
    "messages": "input",
    "response_format": "text.format",
    "max_tokens": "max_output_tokens",
    "max_completion_tokens": "max_output_tokens",
}
MAX_LISTED_ITEMS = 100


@contextlib.contextmanager
def in_responses_terms() -> Iterator[None]:
    """Engine errors raised inside name the Responses API's parameters."""
    try:
        yield
    except InglenookError as exc:
        error = error_for(exc)
        error.param = PARAM_NAMES.get(error.param or "", error.param)
        raise error from exc


def not_found(response_id: str) -> ApiError:
    return ApiError(404, f"no response with id {response_id!r} is stored here", code="not_found", param="response_id")


async def _finish(stored: ResponseStore, response: ResponseObject, input_items: list[dict[str, Any]]) -> None:
    """Log the usage (agents' cached share shows here) and store the response if asked."""
    usage = response.usage
    if usage is not None:
        log.info(
            "responses: %s %s: %d input tokens (%d cached), %d output", response.id, response.status,
            usage.input_tokens, usage.input_tokens_details.cached_tokens, usage.output_tokens,
        )
    if not response.store:
        return
    try:
        await anyio.to_thread.run_sync(stored.save, response.model_dump(mode="json"), input_items)
    except StoreError:
        # The client has its answer; only a later previous_response_id will miss it.
        log.exception("could not store response %s", response.id)


async def _with_mcp_tools(service: "ApiService", body: ResponseCreateRequest, translated: Translated,
                          history: list[dict[str, Any]]) -> McpRequest | None:
    """The request's MCP servers (started, listed), their tools added to the chat request
    and a ``tool_choice`` naming one of them narrowed to it; None when it names none."""
    engine = service.engine
    mcp = await anyio.to_thread.run_sync(mcp_request, body.tools, history, engine.tools, engine.store)
    if mcp is None:
        if approved_calls(translated.input_items, history):
            raise ApiError(400, "this request approves an MCP call but names no mcp tool: send the same mcp "
                           "tool (server_label) again with the approval", code="invalid_value", param="tools")
        return None
    chat = translated.chat
    chat.tools = [*(chat.tools or []), *mcp.functions({t.function.name for t in chat.tools or []})] or None
    if isinstance(body.tool_choice, dict) and body.tool_choice.get("type") == "mcp":
        chat.tool_choice = mcp.choice(body.tool_choice)
    return mcp


async def _answer_with_mcp(answer: McpAnswer, stream: bool, finish: Callable[[ResponseObject], Awaitable[None]]) -> Any:
    """Rounds of model and calls, each planned and run in turn: streamed, or the whole response."""
    if stream:
        return event_stream(mcp_stream(answer, finish))
    response = await mcp_whole(answer)
    await finish(response)
    return response.model_dump(mode="json")


def responses_router(service: "ApiService") -> APIRouter:
    """The routes, bound to ``service`` (the server's engine, model names and runs)."""

    router = APIRouter()
    stored = ResponseStore(service.engine.store)

    @router.post("/v1/responses")
    async def create_response(request: Request) -> Any:
        service.ensure_open()
        body = await read_request(request, ResponseCreateRequest)
        with in_responses_terms():
            history = []
            if body.previous_response_id:
                history = await anyio.to_thread.run_sync(stored.history, body.previous_response_id)
            translated = await anyio.to_thread.run_sync(translate, body, history, stored.find_item)
            mcp = await _with_mcp_tools(service, body, translated, history)
            plan = await anyio.to_thread.run_sync(chat_plan, translated.chat, service.names)

            async def on_done(final: ResponseObject) -> None:
                await _finish(stored, final, translated.input_items)

            if mcp is not None:
                answer = McpAnswer(request, service, ResponseMeta(body, plan.record.id), translated.chat, mcp,
                                   approved_calls(translated.input_items, history))
                return await _answer_with_mcp(answer, body.stream, on_done)
            runs = await run_plan(request, service, plan, body.stream)
        meta = ResponseMeta(body, plan.record.id)
        if body.stream:
            return event_stream(response_stream(meta, runs[0], plan.tools, on_done, plan.reasoning_inside))
        response = whole_response(meta, runs[0], plan.tools, plan.reasoning_inside)
        await on_done(response)
        return response.model_dump(mode="json")

    @router.get("/v1/responses/{response_id}")
    async def retrieve_response(response_id: str) -> Any:
        found = await anyio.to_thread.run_sync(stored.get, response_id)
        if found is None:
            raise not_found(response_id)
        return found.response

    @router.delete("/v1/responses/{response_id}")
    async def delete_response(response_id: str) -> Any:
        if not await anyio.to_thread.run_sync(stored.delete, response_id):
            raise not_found(response_id)
        return {"id": response_id, "object": "response", "deleted": True}

    @router.get("/v1/responses/{response_id}/input_items")
    async def list_input_items(response_id: str, order: Literal["asc", "desc"] = "desc", limit: int = 20) -> Any:
        if not 1 <= limit <= MAX_LISTED_ITEMS:
            raise ApiError(400, f"limit must be between 1 and {MAX_LISTED_ITEMS}", code="invalid_value", param="limit")
        found = await anyio.to_thread.run_sync(stored.get, response_id)
        if found is None:
            raise not_found(response_id)
        items = [{"id": item.get("id") or f"item_{response_id}_{n}", **item} for n, item in enumerate(found.input_items)]
        if order == "desc":
            items.reverse()
        page = items[:limit]
        return {
            "object": "list", "data": page, "has_more": len(items) > limit,
            "first_id": page[0]["id"] if page else None, "last_id": page[-1]["id"] if page else None,
        }

    return router
