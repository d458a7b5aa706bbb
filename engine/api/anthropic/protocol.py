"""Anthropic Messages API requests -> the chat plan every other endpoint uses.

Claude Code and the ``anthropic`` SDK send ``POST /v1/messages``. Rather than a second
generation path, a Messages request is rewritten as a ``ChatCompletionRequest`` (system
text first, ``tool_use`` blocks as assistant tool calls, ``tool_result`` blocks as tool
messages) and handed to ``api/shared/requests.chat_plan``, so tools, grammars, the prefix cache and
the scheduler behave exactly as for chat completions. Results go back in
``api/anthropic/out``; the event stream is in ``api/anthropic/stream``.

Two things are kept out of the engine on purpose:
- ``max_tokens`` is the job's ``token_cap``, not ``SamplingParams.max_tokens``. Anthropic
  requires it and clients send large values (Claude Code asks for tens of thousands); as a
  max_tokens that does not fit the local context it would fail the request, as a cap (clipped
  to the context left) it only stops early.
- ``stop_sequences`` are watched here, so the answer can say which one ended it.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Literal

from pydantic import Field

from ...base import (
    ChatCompletionRequest, ChatMessage, ContentPart, FunctionCall, FunctionDefinition, InvalidRequest, NamedFunction,
    NamedToolChoice, RequestModel, Tool, ToolCall,
)
from ..shared import file_part

log = logging.getLogger(__name__)

MAX_STOP_SEQUENCES = 16
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,128}")
MAX_STOP_SEQUENCE_CHARS = 1000
# Tool types that are plain client tools described by ``input_schema``; every other type
# (web_search_…, bash_…, text_editor_…, computer_…, code_execution_…) runs on Anthropic's
# servers, which this one is not.
CLIENT_TOOL_TYPES = (None, "custom")
MEDIA_BLOCKS = frozenset({"image", "document"})
# Blocks an assistant turn may carry that mean nothing to a local model: Claude's signed
# reasoning, and the calls and results of Anthropic's own server tools.
SKIPPED_BLOCKS = frozenset({
    "thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result",
    "web_fetch_tool_result", "code_execution_tool_result", "mcp_tool_use", "mcp_tool_result",
    "container_upload",
})


# -- request models, in the order of Anthropic's reference ------------------------------


class ContentBlock(RequestModel):
    """Any content block; which fields matter depends on ``type`` (checked in translation)."""

    type: str
    text: str | None = None
    # tool_use
    id: str | None = None
    name: str | None = None
    input: Any = None
    # tool_result
    tool_use_id: str | None = None
    content: str | list[ContentBlock] | None = None
    is_error: bool | None = None
    # known, and meaningless here
    cache_control: dict[str, Any] | None = None
    citations: Any = None
    thinking: str | None = None
    signature: str | None = None
    data: str | None = None
    source: Any = None
    title: str | None = None  # a document block's name


class InputMessage(RequestModel):
    # Claude Code also sends "system" messages between turns (e.g. the list of its agents).
    role: Literal["user", "assistant", "system"]
    content: str | list[ContentBlock]


class ToolDefinition(RequestModel):
    name: str = Field(min_length=1, max_length=128)
    type: str | None = None
    description: str | None = None
    input_schema: dict[str, Any] | None = None
    cache_control: dict[str, Any] | None = None


class ToolChoice(RequestModel):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class MessagesInput(RequestModel):
    """What ``/v1/messages`` and ``/v1/messages/count_tokens`` both take."""

    model: str = ""
    messages: list[InputMessage] = Field(min_length=1)
    system: str | list[ContentBlock] | None = None
    tools: list[ToolDefinition] | None = None
    tool_choice: ToolChoice | None = None
    # Accepted so clients that ask for reasoning work; splitting it out is the template's job.
    thinking: dict[str, Any] | None = None


class MessagesRequest(MessagesInput):
    max_tokens: int = Field(ge=1)
    metadata: dict[str, Any] | None = None
    stop_sequences: list[str] | None = None
    stream: bool = False
    temperature: float | None = Field(default=None, ge=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, ge=0.0, le=1.0)
    service_tier: str | None = None


# -- translation -------------------------------------------------------------------------


def chat_request(body: MessagesInput) -> ChatCompletionRequest:
    """The chat completion request that asks the engine for the same answer."""
    fields: dict[str, Any] = {
        "model": body.model,
        "messages": chat_messages(body),
        "tools": chat_tools(body.tools),
        "tool_choice": chat_tool_choice(body.tool_choice),
        "parallel_tool_calls": not (body.tool_choice and body.tool_choice.disable_parallel_tool_use),
    }
    if isinstance(body, MessagesRequest):
        fields.update(temperature=body.temperature, top_p=body.top_p, top_k=body.top_k)
        if isinstance(body.thinking, dict) and body.thinking.get("type") == "disabled":
            fields["reasoning_effort"] = "none"
    return ChatCompletionRequest(**fields)


def stop_sequences(body: MessagesRequest) -> tuple[str, ...]:
    stops = tuple(body.stop_sequences or ())
    if len(stops) > MAX_STOP_SEQUENCES:
        raise InvalidRequest(f"stop_sequences may hold at most {MAX_STOP_SEQUENCES} strings", param="stop_sequences")
    if any(not s or len(s) > MAX_STOP_SEQUENCE_CHARS for s in stops):
        raise InvalidRequest(
            f"each stop sequence must be between 1 and {MAX_STOP_SEQUENCE_CHARS} characters", param="stop_sequences"
        )
    return stops


def system_text(system: str | list[ContentBlock] | None) -> str:
    if system is None or isinstance(system, str):
        return system or ""
    return _text_blocks(system, "system", "system")


def _system_message_text(message: InputMessage, index: int) -> str:
    if isinstance(message.content, str):
        return message.content
    return _text_blocks(message.content, f"messages[{index}].content", "messages")


def _text_blocks(blocks: list[ContentBlock], where: str, param: str) -> str:
    """Text blocks of a system prompt or system message, joined; any other block is refused."""
    texts = []
    for i, block in enumerate(blocks):
        if block.type != "text" or block.text is None:
            raise InvalidRequest(f"{where}[{i}] is a {block.type!r} block; the system prompt takes text blocks", param=param)
        texts.append(block.text)
    return "\n\n".join(texts)


def chat_messages(body: MessagesInput) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    system = system_text(body.system)
    # System messages before the first answer join the system prompt: every template takes
    # a system prompt, not all take a system message between turns, and the prompt's start
    # stays the same from one request to the next (the prefix cache keeps it).
    answered = False
    for index, message in enumerate(body.messages):
        answered = answered or message.role == "assistant"
        if message.role == "system" and not answered:
            text = _system_message_text(message, index)
            system = f"{system}\n\n{text}".strip() if text else system
    if system:
        out.append(ChatMessage(role="system", content=system))
    answered = False
    for index, message in enumerate(body.messages):
        answered = answered or message.role == "assistant"
        if message.role == "system":
            if answered:
                text = _system_message_text(message, index)
                out.append(ChatMessage(role="system", content=text))
            continue
        if isinstance(message.content, str):
            out.append(ChatMessage(role=message.role, content=message.content))
        elif message.role == "assistant":
            out.extend(_assistant_turn(message.content, index))
        else:
            out.extend(_user_turn(message.content, index))
    if len(out) == (1 if system else 0):
        raise InvalidRequest("messages hold no content", param="messages")
    return out



def _assistant_turn(blocks: list[ContentBlock], index: int) -> list[ChatMessage]:
    """Text and tool_use blocks -> one assistant message with its tool calls."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for n, block in enumerate(blocks):
        where = f"messages[{index}].content[{n}]"
        if block.type == "text":
            texts.append(_text_of(block, where))
        elif block.type == "tool_use":
            if not block.id or not block.name:
                raise InvalidRequest(f"{where}: a tool_use block needs an id and a name", param="messages")
            arguments = json.dumps(block.input if block.input is not None else {}, ensure_ascii=False)
            calls.append(ToolCall(id=block.id, function=FunctionCall(name=block.name, arguments=arguments)))
        elif block.type in SKIPPED_BLOCKS:
            log.debug("%s: leaving out a %s block", where, block.type)
        else:
            raise _unsupported(block, where)
    if not texts and not calls:
        return []  # e.g. a turn of thinking blocks only
    return [ChatMessage(role="assistant", content="\n".join(texts), tool_calls=calls or None)]


def _user_turn(blocks: list[ContentBlock], index: int) -> list[ChatMessage]:
    """tool_result blocks -> tool messages; text between them -> user messages, in order."""
    out: list[ChatMessage] = []
    texts: list[str] = []
    images: list[ContentPart] = []  # the turn's parts in order, once it has an image

    def flush() -> None:
        if images:
            out.append(ChatMessage(role="user", content=list(images)))
        elif texts:
            out.append(ChatMessage(role="user", content="\n".join(texts)))
        texts.clear()
        images.clear()

    for n, block in enumerate(blocks):
        where = f"messages[{index}].content[{n}]"
        if block.type == "text":
            texts.append(_text_of(block, where))
            if images:
                images.append(ContentPart(type="text", text=texts[-1]))
        elif block.type == "document" and _base64_source(block) is not None:
            # A file: the shared plan takes it out of the turn and places it first, whole.
            flush()
            out.append(ChatMessage(role="user", content=[file_part(block.title, _base64_source(block), where)]))
        elif block.type == "image" and (_base64_source(block) or _url_source(block)) is not None:
            # Read by the model's vision projector; a text-only model answers 400 naming itself.
            # A URL source is fetched by the shared plan when the settings allow it (else a 400).
            if not images:
                images.extend(ContentPart(type="text", text=text) for text in texts)
            images.append(ContentPart(type="image_url", image_url={"url": _base64_source(block) or _url_source(block)}))
        elif block.type in MEDIA_BLOCKS:
            texts.append(_media_text(block, where))
            if images:
                images.append(ContentPart(type="text", text=texts[-1]))
        elif block.type == "tool_result":
            flush()
            if not block.tool_use_id:
                raise InvalidRequest(f"{where}: a tool_result block needs a tool_use_id", param="messages")
            result = _result_text(block, where)
            if block.is_error:
                result = f"Error: {result}"
            out.append(ChatMessage(role="tool", content=result, tool_call_id=block.tool_use_id))
        elif block.type in SKIPPED_BLOCKS:
            log.debug("%s: leaving out a %s block", where, block.type)
        else:
            raise _unsupported(block, where)
    flush()
    return out


def _result_text(block: ContentBlock, where: str) -> str:
    content = block.content
    if content is None or isinstance(content, str):
        return content or ""
    texts = []
    for i, part in enumerate(content):
        if part.type == "text":
            texts.append(_text_of(part, f"{where}.content[{i}]"))
        elif part.type in MEDIA_BLOCKS:
            texts.append(_media_text(part, f"{where}.content[{i}]"))
        else:
            raise _unsupported(part, f"{where}.content[{i}]")
    return "\n".join(texts)


def _text_of(block: ContentBlock, where: str) -> str:
    if block.text is None:
        raise InvalidRequest(f"{where}: a text block needs text", param="messages")
    return block.text


def _base64_source(block: ContentBlock) -> str | None:
    """An image or document block's base64 source as a data: URL (an image is decoded, and
    checked, with the chat API's images; a document converted like an attached file); None
    for other sources (a URL, a file id), which are left out with a note."""
    source = block.source if isinstance(block.source, dict) else {}
    if source.get("type") != "base64" or not isinstance(source.get("data"), str):
        return None
    default = "image/png" if block.type == "image" else "application/octet-stream"
    media = source.get("media_type") if isinstance(source.get("media_type"), str) and source.get("media_type") else default
    return f"data:{media};base64,{source['data']}"


def _url_source(block: ContentBlock) -> str | None:
    """An image block's ``{"type": "url", "url": ...}`` source, when it is an http(s) URL."""
    source = block.source if isinstance(block.source, dict) else {}
    url = source.get("url")
    if source.get("type") == "url" and isinstance(url, str) and url[:8].lower().startswith(("http://", "https://")):
        return url
    return None


def _media_text(block: ContentBlock, where: str) -> str:
    """A plain-text document's text; for anything else a note that it was left out.

    Not an error: an image a tool returned (or a person pasted) stays in an agent's history,
    so refusing it would fail every later turn of the conversation too.
    """
    source = block.source if isinstance(block.source, dict) else {}
    if block.type == "document":
        return _document_text(block, source, where)
    log.info("%s: this server reads text only; a %s block is left out and the model is told so", where, block.type)
    return f"[{block.type} left out: this model reads text only]"


def _document_text(block: ContentBlock, source: dict[str, Any], where: str) -> str:
    """A document block that is not base64 (which is converted as a file): a ``text`` source's
    data, a ``content`` source's text blocks, headed by its title; a ``url`` or ``file`` source
    is a 400 saying what to send instead (it was left out with a note, which the client never
    saw: issue 45)."""
    kind = source.get("type")
    text: str | None = None
    if kind == "text" and isinstance(source.get("data"), str):
        text = source["data"]
    elif kind == "content":
        parts = source.get("content")
        if isinstance(parts, str):
            text = parts
        elif isinstance(parts, list) and all(isinstance(p, dict) and p.get("type") == "text"
                                             and isinstance(p.get("text"), str) for p in parts):
            text = "\n".join(p["text"] for p in parts)
    elif kind == "url":
        raise InvalidRequest(f"{where}: this server does not fetch documents by URL; send the document's bytes "
                             "(source type base64) or its text (source type text)", param="messages")
    elif kind == "file":
        raise InvalidRequest(f"{where}: this server keeps no uploaded files; send the document's bytes "
                             "(source type base64) or its text (source type text)", param="messages")
    if text is None:
        raise InvalidRequest(f"{where}: a document's source must be base64, text or content (with text blocks)",
                             param="messages")
    return f"{block.title}\n\n{text}" if block.title else text


def _unsupported(block: ContentBlock, where: str) -> InvalidRequest:
    return InvalidRequest(f"{where}: unknown content block type {block.type!r}", param="messages")


def chat_tools(tools: list[ToolDefinition] | None) -> list[Tool] | None:
    """Client tools as function tools; Anthropic's server tools are left out, with a log line."""
    if not tools:
        return None
    functions: list[Tool] = []
    for i, tool in enumerate(tools):
        if tool.type not in CLIENT_TOOL_TYPES:
            log.info("tools[%d]: %r is an Anthropic server tool (%s); leaving it out of the prompt", i, tool.name, tool.type)
            continue
        if tool.input_schema is None:
            raise InvalidRequest(f"tools[{i}] ({tool.name!r}) needs an input_schema", param="tools")
        if not TOOL_NAME.fullmatch(tool.name):
            raise InvalidRequest(f"tools[{i}]: the name {tool.name!r} must match {TOOL_NAME.pattern}", param="tools")
        # Checked above by Anthropic's rule, which allows longer names (MCP tools) than OpenAI's.
        definition = FunctionDefinition.model_construct(
            name=tool.name, description=tool.description, parameters=tool.input_schema, strict=None
        )
        functions.append(Tool.model_construct(type="function", function=definition))
    return functions or None


def chat_tool_choice(choice: ToolChoice | None) -> str | NamedToolChoice | None:
    if choice is None or choice.type == "auto":
        return None
    if choice.type == "any":
        return "required"
    if choice.type == "none":
        return "none"
    if not choice.name:
        raise InvalidRequest("tool_choice of type 'tool' needs the tool's name", param="tool_choice")
    return NamedToolChoice(function=NamedFunction(name=choice.name))
