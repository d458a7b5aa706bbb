"""Tool calls in the formats models actually write, recognised while they stream.

Models fine-tuned for tools each have their own way of writing a call:

- Hermes / Qwen 2.5 / Qwen 3: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
- Qwen3-Coder: ``<tool_call><function=NAME><parameter=P>value</parameter></function></tool_call>``
- Llama 3.x: ``<|python_tag|>`` and/or a bare ``{"name": ..., "parameters": {...}}``
- Mistral: ``[TOOL_CALLS][{"name": ..., "arguments": {...}}]`` or ``[TOOL_CALLS]NAME[ARGS]{...}``,
  the latter with ``[CALL_ID]ID`` before ``[ARGS]`` in Mistral Small 3.2's template
- and, for models without a format of their own, the bare JSON object (or list) that
  Inglenook's tool instructions ask for, possibly in a ```json fence.

`ToolCallParser` takes the answer as it streams and turns it into events: text to show,
a call starting (once its name is known and is one of the offered functions), pieces of its
arguments as they are generated, and the call's end. Text before, between and after calls
stays text. Only what could still be the start of a call is held back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .textstream import longest_partial_match

if TYPE_CHECKING:
    from ..base import ResponseToolCall

# Markers that open a call anywhere in the answer, and what closes the call they open.
_TAG_OPEN, _TAG_CLOSE = "<tool_call>", "</tool_call>"
_FUNCTION_OPEN = "<function="
_MISTRAL, _MISTRAL_ARGS, _MISTRAL_CALL_ID = "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"
_PYTHON_TAG = "<|python_tag|>"
_FENCE_OPEN = "```json"
_MARKERS = (_TAG_OPEN, _FUNCTION_OPEN, _MISTRAL, _PYTHON_TAG, _FENCE_OPEN)
# Tokens a tool-calling template's model writes as control tokens; rendered, not dropped.
PRESERVED_MARKERS = (_TAG_OPEN, _TAG_CLOSE, _MISTRAL, _MISTRAL_ARGS, _MISTRAL_CALL_ID, _PYTHON_TAG)

_XML_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)(?:</function>|$)", re.DOTALL)
_XML_PARAMETER = re.compile(r"<parameter=([^>\s]+)>\n?(.*?)\n?(?:</parameter>|(?=<parameter=)|$)", re.DOTALL)


@dataclass(frozen=True)
class TextPiece:
    text: str


@dataclass(frozen=True)
class CallStarted:
    index: int
    id: str
    name: str


@dataclass(frozen=True)
class ArgumentsDelta:
    index: int
    text: str


@dataclass(frozen=True)
class CallDone:
    index: int
    call: ResponseToolCall


Event = TextPiece | CallStarted | ArgumentsDelta | CallDone


@dataclass
class _OpenCall:
    """A call being read: its raw text so far and what has been sent of it."""

    kind: str  # "tag", "xml", "mistral", "python", "fence", "bare"
    raw: str = ""
    started: CallStarted | None = None
    sent_arguments: str = ""
    calls_in_it: int = 0  # for formats holding several calls (a JSON list)


@dataclass
class ToolCallParser:
    """Feed the answer's text as it streams; read events back."""

    names: list[str]
    new_id: Callable[[], str]
    parameter_types: dict[str, dict[str, str]] = field(default_factory=dict)  # function -> parameter -> JSON type
    _held: str = ""
    _call: _OpenCall | None = None
    _count: int = 0
    _at_start: bool = True
    _after_json_call: bool = False

    def feed(self, text: str) -> list[Event]:
        self._held += text
        return self._drain(final=False)

    def finish(self) -> list[Event]:
        return self._drain(final=True)

    # -- the state machine -----------------------------------------------------------------

    def _drain(self, final: bool) -> list[Event]:
        events: list[Event] = []
        while True:
            if self._call is None:
                progressed = self._scan_text(events, final)
            else:
                progressed = self._read_call(events, final)
            if not progressed:
                break
        return events

    def _scan_text(self, events: list[Event], final: bool) -> bool:
        held = self._held
        if not held:
            return False
        if self._after_json_call:
            rest = held.lstrip(" \t\n;")
            if rest[:1] == "{":
                self._held = rest  # Llama 3 writes parallel calls one after another
                self._call = _OpenCall("bare")
                return True
            if not rest and not final:
                return False
            self._after_json_call = False
        if self._at_start:
            stripped = held.lstrip()
            if not stripped and not final:
                return False
            opens_marker = any(stripped.startswith(m) for m in _MARKERS)
            if not final and not opens_marker and any(m.startswith(stripped) for m in _MARKERS):
                return False
            if not opens_marker and stripped[:1] in ("{", "["):
                self._held = stripped
                self._call = _OpenCall("bare")
                self._at_start = False
                return True
        found = [(held.find(m), m) for m in _MARKERS if m in held]
        if found:
            at, marker = min(found)
            if at:
                events.append(TextPiece(held[:at]))
            self._held = held[at + len(marker):]
            kind = {_TAG_OPEN: "tag", _FUNCTION_OPEN: "xml", _MISTRAL: "mistral", _PYTHON_TAG: "python",
                    _FENCE_OPEN: "fence"}[marker]
            self._call = _OpenCall(kind, raw=_FUNCTION_OPEN if kind == "xml" else "")
            self._at_start = False
            return True
        keep = 0 if final else longest_partial_match(held, _MARKERS)
        if len(held) > keep:
            events.append(TextPiece(held[: len(held) - keep]))
            self._held = held[len(held) - keep:]
            if held[: len(held) - keep].strip():
                self._at_start = False
        return False

    def _read_call(self, events: list[Event], final: bool) -> bool:
        call = self._call
        assert call is not None
        call.raw += self._held
        self._held = ""
        close = {"tag": _TAG_CLOSE, "xml": "</function>", "fence": "```"}.get(call.kind)
        if close is not None and close in call.raw:
            body, rest = call.raw.split(close, 1)
            if call.kind == "xml":
                body += close
                rest = rest.lstrip()
                rest = rest[len(_TAG_CLOSE):] if rest.startswith(_TAG_CLOSE) else rest
            self._held = rest
            self._complete(events, body, close if call.kind in ("tag", "fence") else "")
            return True
        if call.kind in ("bare", "python", "mistral"):  # no closing marker: the JSON's end ends the call
            end = _json_value_end(call.raw.lstrip())
            if end is not None:
                offset = len(call.raw) - len(call.raw.lstrip())
                body, rest = call.raw[: offset + end], call.raw[offset + end:]
                if call.kind == "mistral" and rest.lstrip().startswith(_MISTRAL_ARGS):
                    pass  # NAME[ARGS]{...}: the JSON read was not the whole call
                else:
                    self._held = rest
                    self._complete(events, body)
                    return True
        if call.kind == "mistral" and _MISTRAL_ARGS in call.raw:
            name, args = call.raw.split(_MISTRAL_ARGS, 1)
            end = _json_value_end(args.lstrip())
            if end is not None:
                offset = len(args) - len(args.lstrip())
                self._held = args[offset + end:]
                self._complete(events, json.dumps({"name": _mistral_name(name), "arguments": _loads(args[: offset + end])}))
                return True
        if final:
            # The answer ended inside the call (the token limit): once its name and the start
            # of its arguments are written it is a call, cut, not text, read whole or streamed.
            self._stream_arguments(events)
            named = _JSON_CALL_NAME.match(call.raw.lstrip())
            if call.started is None and call.kind == "bare" and named and named.group(1) in self.names:
                call.started = self._start(events, named.group(1))  # cut before its arguments began
            self._complete(events, call.raw)
            return bool(self._held)
        self._stream_arguments(events)
        return False

    # -- calls -----------------------------------------------------------------------------

    def _complete(self, events: list[Event], body: str, closing: str = "") -> None:
        """A call's text is whole (or the answer ended inside it): emit what it holds."""
        call = self._call
        assert call is not None
        self._call = None
        self._after_json_call = call.kind in ("bare", "python")
        found = self._calls_in(call.kind, body)
        if found is None:
            if call.started is None:
                events.append(TextPiece(_opening(call) + body + closing))
                return
            found = [(call.started.name, call.sent_arguments)]  # cut short: what was written
        for position, (name, arguments) in enumerate(found):
            if position == 0 and call.started is not None:
                started = call.started
                # What was streamed is the model's own text of the arguments; keep to it.
                written = _streamed_arguments(call.kind, body)
                if written is not None and written.startswith(call.sent_arguments):
                    arguments = written
                rest = arguments[len(call.sent_arguments):] if arguments.startswith(call.sent_arguments) else ""
            else:
                started = self._start(events, name)
                rest = arguments
            if rest:
                events.append(ArgumentsDelta(started.index, rest))
            # The API's pydantic models are imported at the first call, not with this module: the
            # vocabulary needs PRESERVED_MARKERS for every answer, and a terminal chat never
            # needs pydantic (issue 27: start-up).
            from ..base import ResponseFunctionCall, ResponseToolCall  # noqa: PLC0415

            events.append(CallDone(started.index, ResponseToolCall(
                id=started.id, function=ResponseFunctionCall(name=name, arguments=arguments))))

    def _start(self, events: list[Event], name: str) -> CallStarted:
        started = CallStarted(self._count, self.new_id(), name)
        self._count += 1
        events.append(started)
        return started

    def _calls_in(self, kind: str, body: str) -> list[tuple[str, str]] | None:
        """(name, JSON arguments) for each call written in ``body``; None if it is not calls."""
        if kind == "xml" or (kind == "tag" and body.lstrip().startswith(_FUNCTION_OPEN)):
            calls = [(name, self._xml_arguments(name, params)) for name, params in _XML_FUNCTION.findall(body)]
        else:
            value = _loads(body.strip())
            if isinstance(value, dict) and isinstance(value.get("tool_calls"), list):
                value = value["tool_calls"]
            items = value if isinstance(value, list) else [value]
            calls = [c for c in (self._json_call(v) for v in items) if c is not None]
            if len(calls) != len(items):
                return None
        if not calls or any(name not in self.names for name, _ in calls):
            return None
        return calls

    def _json_call(self, value: Any) -> tuple[str, str] | None:
        if not isinstance(value, dict):
            return None
        if isinstance(value.get("function"), dict):  # the OpenAI shape, written out by the model
            value = value["function"]
        name = value.get("name")
        if not isinstance(name, str):
            return None
        arguments = value.get("arguments", value.get("parameters", {}))
        if isinstance(arguments, str):
            parsed = _loads(arguments)
            arguments = parsed if isinstance(parsed, dict) else arguments
        return name, arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)

    def _xml_arguments(self, name: str, params: str) -> str:
        types = self.parameter_types.get(name, {})
        values: dict[str, Any] = {}
        for key, raw in _XML_PARAMETER.findall(params):
            values[key] = _typed(raw, types.get(key))
        return json.dumps(values, ensure_ascii=False)

    def _stream_arguments(self, events: list[Event]) -> None:
        """Send the arguments of a JSON call as they are written, once its name is known."""
        call = self._call
        assert call is not None
        if call.kind == "xml":
            match = re.match(r"<function=([^>\s]+)>", call.raw)
            if match and call.started is None and match.group(1) in self.names:
                call.started = self._start(events, match.group(1))
            return
        found = _arguments_start(call.kind, call.raw)
        if found is None or found[0] not in self.names:
            return
        name, text = found
        if call.started is None:
            call.started = self._start(events, name)
        written = _json_prefix(text)
        if len(written) > len(call.sent_arguments) and written.startswith(call.sent_arguments):
            events.append(ArgumentsDelta(call.started.index, written[len(call.sent_arguments):]))
            call.sent_arguments = written


_JSON_CALL_NAME = re.compile(r'\{\s*"name"\s*:\s*"([^"\\]+)"')
_JSON_CALL_START = re.compile(r'\{\s*"name"\s*:\s*"([^"\\]+)"\s*,\s*"(?:arguments|parameters)"\s*:\s*')


def _arguments_start(kind: str, raw: str) -> tuple[str, str] | None:
    """(function name, the text from where its arguments begin) once both are written."""
    text = raw.lstrip()
    if kind == "mistral" and _MISTRAL_ARGS in text:
        name, rest = text.split(_MISTRAL_ARGS, 1)
        return _mistral_name(name), rest.lstrip()
    if kind == "mistral" and text.startswith("["):
        text = text[1:].lstrip()
    match = _JSON_CALL_START.match(text)
    return (match.group(1), text[match.end():]) if match else None


def _mistral_name(head: str) -> str:
    """The function name of ``NAME[ARGS]`` or ``NAME[CALL_ID]ID[ARGS]`` (the id is the model's;
    calls get ids of their own here, as in every other format)."""
    return head.split(_MISTRAL_CALL_ID, 1)[0].strip()


def _streamed_arguments(kind: str, body: str) -> str | None:
    found = _arguments_start(kind, body)
    if found is None:
        return None
    end = _json_value_end(found[1])
    return found[1][:end] if end is not None else None


def _opening(call: _OpenCall) -> str:
    return {"tag": _TAG_OPEN, "mistral": _MISTRAL, "python": _PYTHON_TAG, "fence": _FENCE_OPEN}.get(call.kind, "")



def _json_value_end(text: str) -> int | None:
    """Where the JSON object or array at the start of ``text`` ends, or None if it does not yet."""
    if not text or text[0] not in "{[":
        return None
    depth, in_string, escaped = 0, False, False
    for i, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def _json_prefix(text: str) -> str:
    """The part of a streaming JSON value that belongs to it (stops where the value ends)."""
    end = _json_value_end(text)
    return text[:end] if end is not None else text


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _typed(raw: str, json_type: str | None) -> Any:
    """An XML parameter's text as the JSON value its schema type asks for."""
    if json_type in (None, "string"):
        if json_type is None:
            value = _loads(raw)
            return value if isinstance(value, (dict, list, int, float, bool)) else raw
        return raw
    value = _loads(raw)
    return raw if value is None and raw != "null" else value


def implied_format(template: str | None) -> str | None:
    """The call format a chat template teaches its model, when it is one of the known ones."""
    source = template or ""
    if "<function=" in source and "<parameter=" in source:
        return "qwen3-coder"
    if "<tool_call>" in source:
        return "hermes"
    if "[TOOL_CALLS]" in source:
        return "mistral"
    if "<|python_tag|>" in source or "ipython" in source:
        return "llama3"
    return None


def parameter_types(tools: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> dict[str, dict[str, str]]:
    """function name -> parameter -> its JSON schema type (for the XML call format)."""
    out: dict[str, dict[str, str]] = {}
    for tool in tools:
        function = tool.get("function", tool)
        properties = (function.get("parameters") or {}).get("properties") or {}
        out[function.get("name", "")] = {
            k: kind for k, v in properties.items() if isinstance(v, dict) and isinstance(kind := v.get("type"), str)
        }
    return out
