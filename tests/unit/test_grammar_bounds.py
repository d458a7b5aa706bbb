"""Every schema grammar admits only answers of bounded length (issue 33): forced tool calls
and json_schema answers end by the grammar, not at the token cap with the JSON cut off.

A grammar's language is finite when no rule reaches itself and no repetition is unbounded;
both are read off the GBNF text here, without llama.cpp (tests/integration/test_json_grammar.py
checks what the grammars accept with llama.cpp's own engine).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from inglenook.engine.base import NamedToolChoice, Tool
from inglenook.engine.text import TemplateAbilities, grammar_for_schema, plan_tools
from inglenook.engine.text.json_grammar import ARRAY_ITEMS, EXTRA_KEYS, FREE_DEPTH, KEY_CHARS, STRING_CHARS

_LITERAL_OR_CLASS = re.compile(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]')
_UNBOUNDED = re.compile(r"[*+]|\{\d+,\}")


def _rules(grammar: str) -> dict[str, str]:
    rules = {}
    for line in grammar.splitlines():
        name, _, body = line.partition(" ::= ")
        rules[name] = _LITERAL_OR_CLASS.sub(" ", body)
    return rules


def assert_finite(grammar: str) -> None:
    rules = _rules(grammar)
    for name, body in rules.items():
        assert not _UNBOUNDED.search(body), f"{name} repeats without bound: {body}"
    graph = {name: {w for w in re.findall(r"[A-Za-z0-9-]+", body) if w in rules} for name, body in rules.items()}
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"{' -> '.join(path + (name,))} recurses"
        if name in done:
            return
        for used in graph[name]:
            visit(used, path + (name,))
        done.add(name)

    visit("root", ())


FREE_ARGUMENTS = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "extra": {},
        "anything": {"description": "no type at all"},
        "long": {"type": "string", "minLength": 5000},
    },
    "required": ["text"],
}


def _tool(parameters: dict[str, Any], strict: bool | None = None) -> Tool:
    function: dict[str, Any] = {"name": "f", "parameters": parameters}
    if strict is not None:
        function["strict"] = strict
    return Tool.model_validate({"type": "function", "function": function})


@pytest.mark.parametrize("strict", [None, True])
def test_a_forced_call_with_free_arguments_is_bounded(strict: bool | None) -> None:
    named = NamedToolChoice.model_validate({"type": "function", "function": {"name": "f"}})
    for choice in ("required", named):
        plan = plan_tools([_tool(FREE_ARGUMENTS, strict)], choice, TemplateAbilities())
        assert plan is not None
        grammar = plan.grammar()
        assert grammar is not None
        assert_finite(grammar)


@pytest.mark.parametrize("schema", [
    FREE_ARGUMENTS,
    True,
    {},
    {"type": "object"},
    {"type": "array"},
    {"type": "string"},
    {"type": "object", "additionalProperties": {"type": "string"}},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": True},
    {"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "string"}},
    {"type": "string", "maxLength": 10_000_000},
])
@pytest.mark.parametrize("strict", [False, True])
def test_json_schema_grammars_are_bounded(schema: Any, strict: bool) -> None:
    assert_finite(grammar_for_schema(schema, strict=strict))


def test_the_bounds_are_the_documented_ones() -> None:
    # README.md ("What it speaks") states these numbers.
    assert (STRING_CHARS, ARRAY_ITEMS, EXTRA_KEYS, KEY_CHARS, FREE_DEPTH) == (2_000, 64, 16, 64, 3)
    grammar = grammar_for_schema({"type": "string"})
    assert "char{100}){20}" in grammar  # 2,000 characters, as blocks of 100


def test_a_schemas_own_bounds_win() -> None:
    grammar = grammar_for_schema({"type": "object", "properties": {
        "short": {"type": "string", "maxLength": 7}, "few": {"type": "array", "maxItems": 3}}})
    assert "char{0,7}" in grammar
    assert "{0,2}" in grammar  # the items after the first of at most 3


def test_the_finiteness_check_catches_unbounded_grammars() -> None:
    with pytest.raises(AssertionError):
        assert_finite('root ::= "a" x*\nx ::= "b"\n')
    with pytest.raises(AssertionError):
        assert_finite('root ::= x\nx ::= "[" x? "]"\n')
