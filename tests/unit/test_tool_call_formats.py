"""Tool calls in each format models write, parsed whole and streamed a character at a time."""

from __future__ import annotations

import itertools
import json

import pytest

from inglenook.engine.text.tool_call_parser import (
    ArgumentsDelta, CallDone, CallStarted, Event, TextPiece, ToolCallParser, implied_format, parameter_types,
)

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {
        "a": {"type": "integer"}, "b": {"type": "integer"}}}}},
]


def parse(text: str, step: int) -> list[Event]:
    ids = (f"call_{i}" for i in itertools.count())
    parser = ToolCallParser(["get_weather", "add"], lambda: next(ids), parameter_types(TOOLS))
    events: list[Event] = []
    for i in range(0, len(text), step):
        events += parser.feed(text[i:i + step])
    return events + parser.finish()


def summary(events: list[Event]) -> tuple[str, list[tuple[str, dict]]]:
    text = "".join(e.text for e in events if isinstance(e, TextPiece))
    calls = [(e.call.function.name, json.loads(e.call.function.arguments)) for e in events if isinstance(e, CallDone)]
    return text, calls


WEATHER = ("get_weather", {"city": "Paris", "unit": "celsius"})
ADD = ("add", {"a": 2, "b": 3})


@pytest.mark.parametrize(
    ("written", "text", "calls"),
    [
        # Hermes / Qwen 2.5 / Qwen 3
        ('Let me check.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n'
         "</tool_call>", "Let me check.", [WEATHER]),
        ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>\n'
         '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>', "\n", [WEATHER, ADD]),
        # Qwen3-Coder's XML form; parameter values typed from the schema
        ("<tool_call>\n<function=add>\n<parameter=a>\n2\n</parameter>\n<parameter=b>\n3\n</parameter>\n</function>\n"
         "</tool_call> Done.", " Done.", [ADD]),
        # Llama 3.x
        ('<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}', "", [WEATHER]),
        ('{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}; '
         '{"name": "add", "parameters": {"a": 2, "b": 3}}', "", [WEATHER, ADD]),
        # Mistral, both generations of the format
        ('[TOOL_CALLS][{"name": "add", "arguments": {"a": 2, "b": 3}}, '
         '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}]', "", [ADD, WEATHER]),
        ('[TOOL_CALLS]add[ARGS]{"a": 2, "b": 3}[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "unit": "celsius"}',
         "", [ADD, WEATHER]),
        # What Inglenook's own tool instructions ask for, bare or fenced, and the OpenAI shape
        ('{"name": "add", "arguments": {"a": 2, "b": 3}}', "", [ADD]),
        ('Sure: ```json\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n```', "Sure: ", [ADD]),
        ('[{"type": "function", "function": {"name": "add", "arguments": "{\\"a\\": 2, \\"b\\": 3}"}}]', "", [ADD]),
    ],
)
@pytest.mark.parametrize("step", [1, 5, 10_000])
def test_each_format_is_recognised_streamed_or_whole(written: str, text: str, calls: list, step: int) -> None:
    assert summary(parse(written, step)) == (text, calls)


@pytest.mark.parametrize(
    "written",
    [
        "Plain answer with <b>html</b>, a { brace } and ```python\nprint(1)\n```",
        '{"not": "a call"}',
        '<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call>',
        "[1, 2, 3]",
        "A list: [TOOL] is not a marker",
        'Config:\n```json\n{"a": 1}\n```\nThat is all.',
    ],
)
def test_text_and_unknown_functions_stay_text(written: str) -> None:
    for step in (1, 7, 10_000):
        assert summary(parse(written, step)) == (written, [])


def test_arguments_stream_as_they_are_written_and_add_up_to_the_call() -> None:
    long_city = "Llanfairpwllgwyngyll " * 5
    written = f'<tool_call>{{"name": "get_weather", "arguments": {{"city": "{long_city}", "unit": "celsius"}}}}</tool_call>'
    events = parse(written, 3)
    started = [e for e in events if isinstance(e, CallStarted)]
    deltas = [e.text for e in events if isinstance(e, ArgumentsDelta)]
    [done] = [e for e in events if isinstance(e, CallDone)]
    assert [s.name for s in started] == ["get_weather"]
    assert len(deltas) > 10, "pieces as they are generated, not one at the end"
    assert "".join(deltas) == done.call.function.arguments
    assert json.loads(done.call.function.arguments)["city"] == long_city
    assert events.index(started[0]) < len(events) - len(deltas), "the call starts before its arguments end"


def test_an_answer_cut_inside_a_call_keeps_what_was_written() -> None:
    events = parse('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par', 4)
    [done] = [e for e in events if isinstance(e, CallDone)]
    assert done.call.function.name == "get_weather" and done.call.function.arguments == '{"city": "Par'


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{% for tool in tools %}{{ tool | tojson }}{% endfor %}<tool_call>\n{\"name\": <function-name>}</tool_call>", "hermes"),
        ("<tool_call>\n<function={{ tool_call.name }}>\n<parameter={{ name }}>\n", "qwen3-coder"),
        ("{{- '<|python_tag|>' }}{%- if builtin_tools is defined %}", "llama3"),
        ("{{- '[TOOL_CALLS]' }}{{ tool_call.name }}[ARGS]", "mistral"),
        ("{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}", None),
    ],
)
def test_the_format_a_template_implies(template: str, expected: str | None) -> None:
    assert implied_format(template) == expected
