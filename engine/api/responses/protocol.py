"""OpenAI Responses API requests -> the chat request the engine already plans and runs.

A Responses request is a conversation written as items (messages, function calls and
their outputs) plus ``instructions``, tools and text format. It is translated into a
``ChatCompletionRequest`` and then follows the chat completions path (``chat_plan``,
``tool_calls``, ``json_grammar``), so both APIs prompt, sample and parse tool calls the
same way. Tool types this server cannot run (web search, shells, custom tools) are
accepted and left out of the prompt with a log line: agents such as Codex send them with
every request, and refusing them would refuse the agent. MCP tools naming a server the person
added are run here (``responses/mcp_tools``); their items (``mcp_call``, an answered
``mcp_approval_request``) replay as calls and results.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, ValidationError

from ...base import (
    ChatCompletionRequest, ChatMessage, ContentPart, FunctionCall, FunctionDefinition, InvalidRequest, JsonSchemaFormat,
    NamedFunction, NamedToolChoice, RequestModel, ResponseFormat, Tool, ToolCall,
)
from ..shared import file_part

log = logging.getLogger(__name__)

LOGPROBS_INCLUDE = "message.output_text.logprobs"
TEXT_PART_TYPES = ("input_text", "output_text", "text", "summary_text", "reasoning_text")
MESSAGE_ROLES = ("user", "assistant", "system", "developer")
ITEM_REFERENCE = "item_reference"
CALL_TYPES = ("function_call", "custom_tool_call")
OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output")
MCP_LIST_TOOLS, MCP_CALL = "mcp_list_tools", "mcp_call"
MCP_APPROVAL_REQUEST, MCP_APPROVAL_RESPONSE = "mcp_approval_request", "mcp_approval_response"
ChoiceName = Literal["none", "auto", "required"]
SIMPLE_CHOICES: tuple[ChoiceName, ...] = ("none", "auto", "required")


# -- request models (ordered like OpenAI's CreateResponse) ---------------------------------


class InputPart(RequestModel):
    type: str
    text: str | None = None
    refusal: str | None = None


class InputItem(RequestModel):
    """Any input item; which fields matter depends on ``type`` (a message may omit it)."""

    type: str = "message"
    id: str | None = None
    status: str | None = None
    # messages
    role: str | None = None
    content: str | list[InputPart] | None = None
    # function_call / custom_tool_call and their outputs
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    input: str | None = None
    output: str | list[InputPart] | None = None
    # MCP items: mcp_call, mcp_approval_request and the client's mcp_approval_response
    server_label: str | None = None
    error: str | None = None
    approval_request_id: str | None = None
    approve: bool | None = None
    reason: str | None = None


class ResponsesTool(RequestModel):
    """A tool: ``function`` tools reach the model as they are, ``mcp`` ones as the tools of the
    server they name (``responses/mcp_tools``); other types are left out."""

    type: str
    name: str | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    # mcp
    server_label: str | None = None
    server_url: str | None = None
    connector_id: str | None = None
    tunnel_id: str | None = None
    allowed_tools: list[str] | dict[str, Any] | None = None
    require_approval: str | dict[str, Any] | None = None


class TextFormat(RequestModel):
    type: Literal["text", "json_object", "json_schema"] = "text"
    name: str | None = None
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class TextConfig(RequestModel):
    format: TextFormat | None = None
    verbosity: str | None = None


class ReasoningConfig(RequestModel):
    effort: str | None = None
    summary: str | None = None


class ResponseCreateRequest(RequestModel):
    model: str = ""
    input: str | list[InputItem] = ""
    instructions: str | None = None
    tools: list[ResponsesTool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool = True
    text: TextConfig | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = None
    top_p: float | None = None
    reasoning: ReasoningConfig | None = None
    store: bool = True
    previous_response_id: str | None = None
    stream: bool = False
    metadata: dict[str, str] | None = None
    user: str | None = None
    background: bool | None = None
    include: list[str] | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    max_tool_calls: int | None = Field(default=None, ge=0)  # MCP calls run here, in all rounds
    truncation: str | None = None
    prompt_cache_key: str | None = None
    service_tier: str | None = None
    # llama.cpp extras, as chat completions accept them
    seed: int | None = None
    top_k: int | None = None
    min_p: float | None = None
    cache_prompt: bool = True


# -- translation --------------------------------------------------------------------------


@dataclass
class Translated:
    """The chat request to plan, and this request's own input items (what a store keeps)."""

    chat: ChatCompletionRequest
    input_items: list[dict[str, Any]]


ItemLookup = Callable[[str], "dict[str, Any] | None"]


def translate(request: ResponseCreateRequest, history: list[dict[str, Any]],
              lookup: ItemLookup = lambda _id: None) -> Translated:
    """``request`` (continuing ``history``, the stored items of its chain) as a chat request;
    ``lookup`` finds the stored items that ``item_reference`` inputs name."""
    if request.background:
        raise InvalidRequest("background responses are not supported by this server", param="background")
    items = resolve_references(input_items(request.input), history, lookup)
    messages: list[ChatMessage] = []
    if request.instructions:
        # Instructions belong to this request only: a chain does not carry them forward.
        messages.append(ChatMessage(role="system", content=request.instructions))
    requests = {item["id"]: item for item in [*history, *items]
                if item.get("type") == MCP_APPROVAL_REQUEST and isinstance(item.get("id"), str)}
    add_items(messages, history, "a previous response", requests)
    add_items(messages, items, "input", requests)
    if not any(m.role != "system" for m in messages):
        raise InvalidRequest("input is empty: send a message or continue a previous response", param="input")
    tools = function_tools(request.tools)
    choice = tool_choice(request.tool_choice, tools)  # may narrow ``tools`` (allowed_tools)
    chat = ChatCompletionRequest(
        model=request.model,
        messages=messages,
        max_tokens=request.max_output_tokens,
        temperature=request.temperature,
        top_p=request.top_p,
        seed=request.seed,
        top_k=request.top_k,
        min_p=request.min_p,
        cache_prompt=request.cache_prompt,
        logprobs=wants_logprobs(request),
        top_logprobs=request.top_logprobs if wants_logprobs(request) else None,
        parallel_tool_calls=request.parallel_tool_calls,
        response_format=response_format(request.text),
        tools=tools or None,
        tool_choice=choice,
    )
    return Translated(chat, items)


def wants_logprobs(request: ResponseCreateRequest) -> bool:
    """Logprobs are computed only when the client asks for them back (``include``)."""
    return LOGPROBS_INCLUDE in (request.include or [])


def input_items(value: str | list[InputItem]) -> list[dict[str, Any]]:
    """The input as plain item dicts (a string is one user message), as stored and echoed."""
    if isinstance(value, str):
        if not value:
            return []
        return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": value}]}]
    return [_reference(item) or item.model_dump(exclude_none=True, by_alias=True) for item in value]


def _reference(item: InputItem) -> dict[str, Any] | None:
    """An ``item_reference``, also in its short form: an id alone, with no type or role."""
    if item.type == ITEM_REFERENCE or ("type" not in item.model_fields_set and item.role is None and item.id):
        return {"type": ITEM_REFERENCE, "id": item.id}
    return None


def resolve_references(items: list[dict[str, Any]], history: list[dict[str, Any]],
                       lookup: ItemLookup) -> list[dict[str, Any]]:
    """Each ``item_reference`` replaced by the item it names: one of the chain's (``history``),
    else a stored one. The resolved items are what is stored, so a later chain never depends
    on the referenced response still being there."""
    in_chain = {item["id"]: item for item in history if isinstance(item.get("id"), str)}
    resolved = []
    for index, item in enumerate(items):
        if item.get("type") != ITEM_REFERENCE:
            resolved.append(item)
            continue
        item_id = item.get("id")
        if not isinstance(item_id, str) or not item_id:
            raise InvalidRequest(f"input[{index}] is an item_reference without an id", param="input")
        found = in_chain.get(item_id) or lookup(item_id)
        if found is None:
            raise InvalidRequest(
                f"input[{index}] refers to the item {item_id!r}, which this server does not hold: it was never "
                "stored (store: false), or its response was deleted", param="input")
        resolved.append(dict(found))
    return resolved


def add_items(messages: list[ChatMessage], items: list[dict[str, Any]], where: str,
              approval_requests: dict[str, dict[str, Any]] | None = None) -> None:
    """Append ``items`` to ``messages`` as chat messages; ``where`` names them in errors.
    ``approval_requests`` (by id) are the MCP calls that ``mcp_approval_response`` items answer."""
    for index, item in enumerate(items):
        label = f"{where}[{index}]"
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in MESSAGE_ROLES:
                raise InvalidRequest(f"{label} has the role {role!r}; expected one of {', '.join(MESSAGE_ROLES)}", param="input")
            content = item.get("content")
            files: list[tuple[int, dict[str, Any]]] = []
            if isinstance(content, list):  # documents: the shared plan takes them out and places them first
                files = [(n, p) for n, p in enumerate(content) if isinstance(p, dict) and p.get("type") == "input_file"]
                content = [p for p in content if not (isinstance(p, dict) and p.get("type") == "input_file")]
            if role == "user" and isinstance(content, list) and any(
                    isinstance(p, dict) and p.get("type") == "input_image" for p in content):
                messages.append(ChatMessage(role=role, content=image_parts(content, label)))
            else:
                messages.append(ChatMessage(role=role, content=part_text(content, label)))
            if files:
                messages.append(ChatMessage(role=role, content=[
                    file_part(f.get("filename"), f.get("file_data"), f"{label}.content[{n}]") for n, f in files]))
        elif kind in CALL_TYPES:
            call = ToolCall(id=_required(item, "call_id", label), function=FunctionCall(
                name=_required(item, "name", label), arguments=item.get("arguments", item.get("input")) or "",
            ))
            last = messages[-1] if messages else None
            if last is not None and last.role == "assistant":
                # An answer's text and the calls after it are one assistant turn.
                last.tool_calls = [*(last.tool_calls or []), call]
            else:
                messages.append(ChatMessage(role="assistant", content=None, tool_calls=[call]))
        elif kind in OUTPUT_TYPES:
            messages.append(ChatMessage(
                role="tool", tool_call_id=_required(item, "call_id", label), content=part_text(item.get("output"), label),
            ))
        elif kind == "reasoning":
            log.debug("%s: a reasoning item is not part of the prompt", label)
        elif kind == MCP_CALL:
            result = item.get("output") if item.get("error") is None else f"Error: {item.get('error')}"
            add_call(messages, ToolCall(id=_required(item, "id", label), function=FunctionCall(
                name=_required(item, "name", label), arguments=item.get("arguments") or "{}")), str(result or ""))
        elif kind == MCP_APPROVAL_RESPONSE:
            asked = (approval_requests or {}).get(item.get("approval_request_id") or "")
            if asked is None:
                raise InvalidRequest(f"{label} answers the approval request {item.get('approval_request_id')!r}, "
                                     "which is not in this response's chain (previous_response_id)", param="input")
            if not item.get("approve"):
                # An approved call runs now and its mcp_call item says so; a declined one is a refusal.
                reason = f": {item['reason']}" if item.get("reason") else "."
                add_call(messages, ToolCall(id=asked["id"], function=FunctionCall(
                    name=asked.get("name") or "", arguments=asked.get("arguments") or "{}")),
                    f"The user declined this call{reason}")
        elif kind in (MCP_LIST_TOOLS, MCP_APPROVAL_REQUEST):
            log.debug("%s: %s is not part of the prompt (a pending call replays with its answer)", label, kind)
        else:
            log.info("%s: leaving out a %r item, which this server does not run", label, kind)


def add_call(messages: list[ChatMessage], call: ToolCall, result: str) -> None:
    """A call and its result, the call joining the assistant turn it follows."""
    last = messages[-1] if messages else None
    if last is not None and last.role == "assistant":
        last.tool_calls = [*(last.tool_calls or []), call]
    else:
        messages.append(ChatMessage(role="assistant", content=None, tool_calls=[call]))
    messages.append(ChatMessage(role="tool", tool_call_id=call.id, content=result))


def image_parts(content: list[Any], label: str) -> list[ContentPart]:
    """A user message with ``input_image`` parts in the chat shape (``image_url`` parts, decoded
    with the chat API's images). Base64 data URLs, or http(s) URLs that the shared plan fetches
    when the settings allow it (``api/shared/image_fetch``); ``file_id`` is not supported."""
    parts: list[ContentPart] = []
    for n, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "input_image":
            url = part.get("image_url")
            if not isinstance(url, str) or not url[:8].lower().startswith(("data:", "http://", "https://")):
                raise InvalidRequest(f"{label}.content[{n}]: an input_image needs image_url as a base64 data: URL "
                                     "or an http(s) URL (file ids are not supported)", param="input")
            parts.append(ContentPart(type="image_url", image_url={"url": url}))
        else:
            parts.append(ContentPart(type="text", text=part_text([part], f"{label}.content[{n}]")))
    return parts


def part_text(content: Any, label: str) -> str:
    """Text of a message's content or a call's output: a string, or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for part in content:
        kind = part.get("type")
        if kind in TEXT_PART_TYPES and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            texts.append(part["refusal"])
        else:
            raise InvalidRequest(f"{label} has a {kind!r} content part; only text is supported", param="input")
    return "\n".join(texts)


def _required(item: dict[str, Any], key: str, label: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise InvalidRequest(f"{label} ({item.get('type')}) needs {key}", param="input")
    return value


def function_tools(tools: list[ResponsesTool] | None) -> list[Tool]:
    """The function tools, in the chat shape; other tool types are logged and left out."""
    chosen: list[Tool] = []
    left_out: list[str] = []
    for index, tool in enumerate(tools or []):
        if tool.type != "function":
            left_out.append(tool.type)
            continue
        if not tool.name:
            raise InvalidRequest(f"tools[{index}] is a function tool without a name", param="tools")
        try:
            definition = FunctionDefinition.model_validate(
                {"name": tool.name, "description": tool.description, "parameters": tool.parameters, "strict": tool.strict}
            )
        except ValidationError as exc:
            reason = exc.errors(include_url=False, include_input=False)[0].get("msg", "invalid")
            raise InvalidRequest(f"tools[{index}] ({tool.name!r}): {reason}", param="tools") from None
        chosen.append(Tool(function=definition))
    if left_out:
        log.info("responses: leaving out tools this server cannot run: %s", ", ".join(left_out))
    return chosen


def tool_choice(choice: str | dict[str, Any] | None, tools: list[Tool]) -> ChoiceName | NamedToolChoice | None:
    """The chat tool_choice; ``allowed_tools`` narrows ``tools`` in place to the ones it allows."""
    if choice is None:
        return None
    if isinstance(choice, str):
        for simple in SIMPLE_CHOICES:
            if choice == simple:
                return simple
        raise InvalidRequest(f"tool_choice must be one of {', '.join(SIMPLE_CHOICES)} or a tool", param="tool_choice")
    kind = choice.get("type")
    if kind == "function":
        name = choice.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidRequest("tool_choice of type function needs a name", param="tool_choice")
        return NamedToolChoice(function=NamedFunction(name=name))
    if kind == "allowed_tools":
        mode = choice.get("mode", "auto")
        allowed = {t.get("name") for t in choice.get("tools", []) if isinstance(t, dict)}
        tools[:] = [t for t in tools if t.function.name in allowed]
        return "required" if mode == "required" else "auto"
    if kind == "mcp":  # the MCP tools' own module narrows this to the named tool
        return "auto"
    # A built-in tool (web search, file search, ...) that is not offered: let the model choose.
    log.info("responses: tool_choice names a %r tool, which this server does not run; using auto", kind)
    return "auto"


def response_format(text: TextConfig | None) -> ResponseFormat | None:
    fmt = text.format if text is not None else None
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return ResponseFormat(type="json_object")
    if fmt.schema_ is None:
        raise InvalidRequest("text.format of type json_schema needs a schema", param="text.format")
    schema = JsonSchemaFormat.model_validate(
        {"name": fmt.name or "response", "description": fmt.description, "schema": fmt.schema_, "strict": fmt.strict}
    )
    return ResponseFormat(type="json_schema", json_schema=schema)
