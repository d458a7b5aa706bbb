"""Function calling for any model: describe the tools, constrain or parse the answer.

A chat template that renders ``tools`` itself (Qwen, Llama 3.1, Hermes, …) gets them as
they are. For other templates the tools are described in the system message, with the
instruction to answer a call as ``{"name": ..., "arguments": {...}}``. When the client
requires a call (``tool_choice`` "required" or a named function) a grammar makes the model
write exactly that; with "auto" the answer is parsed, and a call is recognised whether the
model wrote it as bare JSON or inside ``<tool_call>`` tags.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

from ..base import ChatMessage, InvalidRequest, NamedToolChoice, ResponseToolCall, Tool, image_from_data_url
from .chat_template import ChatTemplate
from .json_grammar import grammar_for_schema
from .reasoning import REASONING_MARKERS, opened_in_prompt
from .tool_call_parser import CallDone, Event, TextPiece, ToolCallParser, parameter_types



@dataclass(frozen=True)
class TemplateAbilities:
    """What a model's chat template renders by itself."""

    tools: bool = False  # a ``tools`` list
    tool_calls: bool = False  # assistant ``tool_calls`` and ``tool`` results in the history
    opens_reasoning: str | None = None  # the closing marker, when the prompt opens a reasoning block

    @classmethod
    def of(cls, source: str | None) -> "TemplateAbilities":
        text = source or ""
        return cls(tools="tools" in text, tool_calls="tool_calls" in text, opens_reasoning=_opens_reasoning(source))


def _opens_reasoning(source: str | None) -> str | None:
    """Whether the template's generation prompt ends inside a reasoning block (``<think>\n``)."""
    if not source or not any(m in source for m in REASONING_MARKERS):
        return None
    try:
        prompt = ChatTemplate(source).render([{"role": "user", "content": "Hello"}], add_generation_prompt=True)
    except Exception:  # noqa: BLE001 — a template that cannot render a greeting fails later, with its own error
        return None
    return opened_in_prompt(prompt)


@dataclass(frozen=True)
class ToolPlan:
    tools: tuple[dict[str, Any], ...]  # as the client sent them (OpenAI shape)
    required: bool  # the answer must be a call
    forced_name: str | None  # ...to this function
    native: bool  # the template renders the tools itself

    @property
    def names(self) -> list[str]:
        return [t["function"]["name"] for t in self.tools]

    def grammar(self) -> str | None:
        """A grammar for a forced call, or None when the model may answer in text.

        The arguments are held to the tool's schema as if ``strict`` were set, whether or not
        it is: its declared keys only (each of its type, the required ones present), since an
        undeclared key may hold anything, and a small model filled them until the token limit
        cut the call (which then came back as text, issue 45)."""
        if not self.required:
            return None
        functions = [t["function"] for t in self.tools if self.forced_name in (None, t["function"]["name"])]
        calls = [_call_schema(f) for f in functions]
        schema = calls[0] if len(calls) == 1 else {"anyOf": calls}
        return grammar_for_schema(schema, param="tools", prop_order=("name", "arguments"), strict=True)

    def instructions(self) -> str:
        """The system-message text describing the tools, for templates that do not."""
        described = "\n".join(json.dumps(t["function"], ensure_ascii=False) for t in self.tools)
        must = "You must call a function." if self.required else "If no function is needed, answer normally in text."
        if self.forced_name:
            must = f"You must call the function {self.forced_name}."
        return (
            "You can call these functions (described as JSON schemas):\n"
            f"{described}\n"
            'To call a function, reply with only a JSON object {"name": <function name>, "arguments": <arguments '
            f"object>}} and nothing else. {must}"
        )


def plan_tools(tools: list[Tool] | None, choice: str | NamedToolChoice | None, abilities: TemplateAbilities) -> ToolPlan | None:
    """How to offer ``tools`` to the model, or None when none are offered."""
    if not tools or choice == "none":
        return None
    dumped = tuple(t.model_dump(exclude_none=True, by_alias=True) for t in tools)
    forced = choice.function.name if isinstance(choice, NamedToolChoice) else None
    if forced is not None and forced not in [t.function.name for t in tools]:
        raise InvalidRequest(f"tool_choice names {forced!r}, which is not among the tools", param="tool_choice")
    required = choice == "required" or forced is not None
    return ToolPlan(dumped, required, forced, abilities.tools)


def _call_schema(function: dict[str, Any]) -> dict[str, Any]:
    arguments = function.get("parameters") or {"type": "object", "properties": {}}
    return {
        "type": "object",
        "properties": {"name": {"const": function["name"]}, "arguments": arguments},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


# -- messages in --------------------------------------------------------------------------


def message_text(message: ChatMessage, index: int) -> str:
    content = message.content
    if content is None:
        if message.role == "assistant" and message.tool_calls:
            return ""
        raise InvalidRequest(f"messages[{index}] has no content", param="messages")
    if isinstance(content, str):
        return content
    texts = []
    for part in content:
        if part.type == "image_url":
            continue  # read by message_content, for the user messages that may carry images
        if part.type != "text" or part.text is None:
            raise InvalidRequest(
                f"messages[{index}] has a {part.type!r} content part; only text and images are supported",
                param="messages",
            )
        texts.append(part.text)
    return "\n".join(texts)


def message_content(message: ChatMessage, index: int) -> str | list[dict[str, Any]]:
    """A message's content for the engine: its text, or, when it has images, its parts in
    order with each image decoded (``{"type": "image", "image": ImageInput}``), which the
    model reads through its vision projector (``runtime/model_vision``)."""
    content = message.content
    if not isinstance(content, list) or not any(part.type == "image_url" for part in content):
        return message_text(message, index)
    if message.role != "user":
        raise InvalidRequest(f"messages[{index}]: only user messages may carry images", param="messages")
    parts: list[dict[str, Any]] = []
    for n, part in enumerate(content):
        if part.type == "image_url":
            url = part.image_url.get("url") if isinstance(part.image_url, dict) else part.image_url
            parts.append({"type": "image", "image": image_from_data_url(
                url if isinstance(url, str) else "", what=f"messages[{index}].content[{n}]", param="messages")})
        elif part.type == "text" and part.text is not None:
            parts.append({"type": "text", "text": part.text})
        else:
            raise InvalidRequest(f"messages[{index}] has a {part.type!r} content part; only text and images are "
                                 "supported", param="messages")
    return parts


def engine_messages(
    messages: list[ChatMessage], abilities: TemplateAbilities, plan: ToolPlan | None
) -> list[dict[str, Any]]:
    """OpenAI messages -> what the chat template renders (roles and content as strings)."""
    call_names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        text = message_text(message, index)
        role = "system" if message.role == "developer" else message.role
        if role == "assistant" and message.tool_calls:
            for call in message.tool_calls:
                call_names[call.id] = call.function.name
            out.append(_assistant_with_calls(message, text, abilities))
        elif role in ("tool", "function"):
            name = message.name or call_names.get(message.tool_call_id or "", "the function")
            if abilities.tool_calls:
                out.append({"role": "tool", "content": text, "tool_call_id": message.tool_call_id, "name": name})
            else:
                out.append({"role": "user", "content": f"Result of calling {name}: {text}"})
        else:
            out.append({"role": role, "content": message_content(message, index)})
    if plan is not None and not plan.native:
        _add_system_text(out, plan.instructions())
    return out


def _assistant_with_calls(message: ChatMessage, text: str, abilities: TemplateAbilities) -> dict[str, Any]:
    calls = message.tool_calls or []
    if abilities.tool_calls:
        rendered = [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": _loads_or_keep(c.function.arguments)}}
            for c in calls
        ]
        return {"role": "assistant", "content": text, "tool_calls": rendered}
    written = [json.dumps({"name": c.function.name, "arguments": _loads_or_keep(c.function.arguments)}) for c in calls]
    return {"role": "assistant", "content": "\n".join([text, *written]).strip()}


def _add_system_text(messages: list[dict[str, Any]], text: str) -> None:
    if messages and messages[0]["role"] == "system":
        messages[0] = {**messages[0], "content": f"{messages[0]['content']}\n\n{text}".strip()}
    else:
        messages.insert(0, {"role": "system", "content": text})


def _loads_or_keep(arguments: str) -> Any:
    try:
        return json.loads(arguments) if arguments else {}
    except ValueError:
        return arguments


# -- answers out --------------------------------------------------------------------------


class ToolCallFilter:
    """Streams an answer's text while taking out the function calls written in it.

    ``feed`` returns the text that can be shown now (never the start of a call); ``finish``
    returns the calls found and the text still held. ``events`` keeps every call event
    (started, argument pieces, done) for front ends that stream arguments as they come."""

    def __init__(self, plan: ToolPlan, parallel: bool) -> None:
        self.plan = plan
        self.parallel = parallel
        self.parser = call_parser(plan)
        self.calls: list[ResponseToolCall] = []
        self.events: list[Event] = []

    def feed(self, text: str) -> str:
        return self._take(self.parser.feed(text))

    def finish(self) -> tuple[list[ResponseToolCall], str]:
        text = self._take(self.parser.finish())
        return (self.calls if self.parallel else self.calls[:1]), text

    def finish_text(self, text: str) -> tuple[list[ResponseToolCall], str]:
        """``feed`` and ``finish`` in one step, for a whole (not streamed) answer."""
        released = self.feed(text)
        calls, rest = self.finish()
        return calls, released + rest

    def _take(self, events: list[Event]) -> str:
        texts = []
        for event in events:
            if isinstance(event, TextPiece):
                texts.append(event.text)
            else:
                if isinstance(event, CallDone):
                    self.calls.append(event.call)
                if self.parallel or event.index == 0:
                    self.events.append(event)
        return "".join(texts)


def call_parser(plan: ToolPlan) -> ToolCallParser:
    return ToolCallParser(plan.names, new_call_id, parameter_types(plan.tools))


def parse_calls(text: str, plan: ToolPlan) -> list[ResponseToolCall]:
    """The calls written in a whole answer (empty when it is an ordinary answer)."""
    parser = call_parser(plan)
    events = parser.feed(text) + parser.finish()
    return [e.call for e in events if isinstance(e, CallDone)]


def new_call_id() -> str:
    return "call_" + secrets.token_hex(12)
