"""Engine output -> OpenAI Responses objects: the response, its output items and usage.

The answer goes through the same ``answer_split`` as chat completions: what the model
thought becomes a ``reasoning`` item (its text as ``reasoning_text``), a call it wrote a
``function_call`` item, and the rest an assistant ``message`` with one ``output_text`` part.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from ...base import ResponseModel, ResponseToolCall, TokenLogprob
from ...text import ToolPlan, split_answer
from ..shared import Run
from .protocol import ResponseCreateRequest

Status = Literal["in_progress", "completed", "incomplete", "failed"]


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(16)}"


# -- output items -------------------------------------------------------------------------


class TopLogprob(ResponseModel):
    token: str
    logprob: float
    bytes: list[int]


class TextLogprob(ResponseModel):
    token: str
    logprob: float
    bytes: list[int]
    top_logprobs: list[TopLogprob]


class OutputText(ResponseModel):
    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list[Any] = Field(default_factory=list)
    logprobs: list[TextLogprob] = Field(default_factory=list)


def text_logprobs(entries: Sequence[TokenLogprob]) -> list[TextLogprob]:
    return [
        TextLogprob(
            token=e.token, logprob=e.logprob, bytes=list(e.token_bytes),
            top_logprobs=[TopLogprob(token=t, logprob=lp, bytes=list(b)) for t, b, lp in e.top],
        )
        for e in entries
    ]


class OutputMessage(ResponseModel):
    id: str
    type: Literal["message"] = "message"
    role: Literal["assistant"] = "assistant"
    status: Status
    content: list[OutputText]


class ReasoningText(ResponseModel):
    type: Literal["reasoning_text"] = "reasoning_text"
    text: str


class ReasoningItem(ResponseModel):
    id: str
    type: Literal["reasoning"] = "reasoning"
    status: Status
    summary: list[Any] = Field(default_factory=list)
    content: list[ReasoningText]


class FunctionCallItem(ResponseModel):
    id: str
    type: Literal["function_call"] = "function_call"
    status: Status
    call_id: str
    name: str
    arguments: str


class McpListedTool(ResponseModel):
    name: str
    description: str | None = None
    input_schema: dict[str, Any]
    annotations: dict[str, Any] | None = None


class McpListToolsItem(ResponseModel):
    """The tools of an MCP server this request named (once per chain: a continued response
    does not list them again)."""

    id: str
    type: Literal["mcp_list_tools"] = "mcp_list_tools"
    server_label: str
    tools: list[McpListedTool]
    error: str | None = None


class McpCallItem(ResponseModel):
    """A call this server ran on an MCP server, with its output or error."""

    id: str
    type: Literal["mcp_call"] = "mcp_call"
    status: Literal["in_progress", "calling", "completed", "failed"]
    server_label: str
    name: str
    arguments: str
    output: str | None = None
    error: str | None = None
    approval_request_id: str | None = None


class McpApprovalRequestItem(ResponseModel):
    """A call waiting for the client: answered by an ``mcp_approval_response`` input item in
    a request that continues this response (``previous_response_id``)."""

    id: str
    type: Literal["mcp_approval_request"] = "mcp_approval_request"
    server_label: str
    name: str
    arguments: str


OutputItem = OutputMessage | FunctionCallItem | ReasoningItem | McpListToolsItem | McpCallItem | McpApprovalRequestItem


def message_item(
    text: str, status: Status, item_id: str | None = None, logprobs: list[TextLogprob] | None = None,
) -> OutputMessage:
    part = OutputText(text=text, logprobs=logprobs or [])
    return OutputMessage(id=item_id or new_id("msg"), status=status, content=[part])


def call_item(call: ResponseToolCall, status: Status = "completed", arguments: str | None = None) -> FunctionCallItem:
    return FunctionCallItem(
        id=new_id("fc"), status=status, call_id=call.id, name=call.function.name,
        arguments=call.function.arguments if arguments is None else arguments,
    )


def reasoning_item(text: str, status: Status, item_id: str | None = None) -> ReasoningItem:
    return ReasoningItem(id=item_id or new_id("rs"), status=status, content=[ReasoningText(text=text)])


def output_items(
    run: Run, tools: ToolPlan | None, parallel: bool, status: Status, reasoning_inside: str | None = None,
) -> list[OutputItem]:
    """A whole answer's items: its reasoning, its text, then its calls."""
    reasoning, text, calls = split_answer(run.text, tools, parallel, reasoning_inside)
    items: list[OutputItem] = []
    if reasoning:
        items.append(reasoning_item(reasoning, status))
    if text or not calls:
        # Logprobs are the answer's tokens; they line up with the text only when nothing
        # was taken out of it (no tools offered, no reasoning), streamed or not.
        logprobs = text_logprobs(run.logprobs) if tools is None and not reasoning else []
        items.append(message_item(text, status, logprobs=logprobs))
    items.extend(call_item(call) for call in calls)
    return items


# -- the response -------------------------------------------------------------------------


class InputTokensDetails(ResponseModel):
    cached_tokens: int = 0


class OutputTokensDetails(ResponseModel):
    reasoning_tokens: int = 0


class ResponseUsage(ResponseModel):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails = Field(default_factory=OutputTokensDetails)
    total_tokens: int


class IncompleteDetails(ResponseModel):
    reason: Literal["max_output_tokens", "content_filter"]


class ResponseError(ResponseModel):
    code: str
    message: str


class ResponseObject(ResponseModel):
    id: str
    object: Literal["response"] = "response"
    created_at: int
    completed_at: int | None = None
    status: Status
    background: bool = False
    error: ResponseError | None = None
    incomplete_details: IncompleteDetails | None = None
    instructions: str | None
    max_output_tokens: int | None
    model: str
    output: list[OutputItem]
    parallel_tool_calls: bool
    previous_response_id: str | None
    reasoning: dict[str, Any]
    store: bool
    temperature: float | None
    text: dict[str, Any]
    tool_choice: str | dict[str, Any]
    tools: list[dict[str, Any]]
    top_p: float | None
    truncation: str
    usage: ResponseUsage | None = None
    user: str | None
    metadata: dict[str, str]


def usage_of(run: Run) -> ResponseUsage:
    usage = run.usage
    return ResponseUsage(
        input_tokens=usage.prompt_tokens,
        input_tokens_details=InputTokensDetails(cached_tokens=usage.cached_tokens),
        output_tokens=usage.completion_tokens,
        total_tokens=usage.prompt_tokens + usage.completion_tokens,
    )


def final_status(run: Run) -> Status:
    return "incomplete" if run.finish_reason == "length" else "completed"


@dataclass
class ResponseMeta:
    """What every snapshot of one response shares: the request it answers and its id."""

    request: ResponseCreateRequest
    model: str
    id: str = field(default_factory=lambda: new_id("resp"))
    created_at: int = field(default_factory=lambda: int(time.time()))

    def snapshot(
        self, status: Status, output: list[OutputItem], usage: ResponseUsage | None = None,
        error: ResponseError | None = None,
    ) -> ResponseObject:
        request = self.request
        text_format = request.text.format.model_dump(by_alias=True, exclude_none=True) if request.text and request.text.format else {"type": "text"}
        reasoning = request.reasoning.model_dump() if request.reasoning else {"effort": None, "summary": None}
        return ResponseObject(
            id=self.id, created_at=self.created_at, status=status, error=error,
            completed_at=int(time.time()) if status == "completed" else None,
            incomplete_details=IncompleteDetails(reason="max_output_tokens") if status == "incomplete" else None,
            instructions=request.instructions, max_output_tokens=request.max_output_tokens, model=self.model,
            output=output, parallel_tool_calls=request.parallel_tool_calls,
            previous_response_id=request.previous_response_id, reasoning=reasoning, store=request.store,
            temperature=request.temperature, text={"format": text_format}, tool_choice=request.tool_choice or "auto",
            tools=[t.model_dump(exclude_none=True) for t in request.tools or []], top_p=request.top_p,
            truncation=request.truncation or "disabled", usage=usage, user=request.user,
            metadata=request.metadata or {},
        )


def whole_response(
    meta: ResponseMeta, run: Run, tools: ToolPlan | None, reasoning_inside: str | None = None,
) -> ResponseObject:
    """The response of a finished (not streamed) run."""
    status = final_status(run)
    output = output_items(run, tools, meta.request.parallel_tool_calls, status, reasoning_inside)
    return meta.snapshot(status, output, usage_of(run))
