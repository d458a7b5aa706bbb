"""The JSON-schema-to-grammar converter, checked with llama.cpp's own grammar engine.

Each test converts a schema and asks the real grammar sampler (tests/grammar_probe.py)
which texts it allows: the order of keys, whitespace, lengths, formats, patterns, array
sizes, and the bounds that keep untrusted schemas from costing the engine its stack or time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from inglenook.engine.base.errors import InvalidRequest
from inglenook.engine.text.json_grammar import JSON_OBJECT_GRAMMAR, MAX_GRAMMAR_SIZE, grammar_for_schema
from tests.grammar_probe import GrammarProbe


@pytest.fixture(scope="module")
def probe(smollm2_path: Path) -> Iterator[GrammarProbe]:
    probe = GrammarProbe(smollm2_path)
    yield probe
    probe.close()


def allowed(probe: GrammarProbe, schema: Any, texts: list[str], **options: Any) -> list[bool]:
    grammar = grammar_for_schema(schema, **options)
    assert probe.compiles(grammar), grammar
    return [probe.accepts(grammar, t) for t in texts]


JOKE = {
    "type": "object",
    "properties": {"setup": {"type": "string"}, "punchline": {"type": "string"}},
    "required": ["setup", "punchline"],
    "additionalProperties": False,
}


def test_required_keys_come_in_schema_order(probe: GrammarProbe) -> None:
    in_order, swapped = '{"setup": "a", "punchline": "b"}', '{"punchline": "b", "setup": "a"}'
    assert allowed(probe, JOKE, [in_order, swapped, '{"setup": "a"}']) == [True, False, False]


def test_optional_keys_follow_required_ones_in_order_and_may_be_skipped(probe: GrammarProbe) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
        "required": ["b"],
        "additionalProperties": False,
    }
    texts = ['{"b": 1}', '{"b": 1, "a": 2}', '{"b": 1, "a": 2, "c": 3}', '{"b": 1, "c": 3}', '{"a": 2, "b": 1}',
             '{"b": 1, "c": 3, "a": 2}']
    assert allowed(probe, schema, texts) == [True, True, True, True, False, False]


def test_undeclared_keys_only_outside_strict_mode(probe: GrammarProbe) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    texts = ['{"a": "x"}', '{"a": "x", "z": 1}', '{"z": 1}', "{}", '{"z": 1, "a": "x"}']
    assert allowed(probe, schema, texts) == [True, True, True, True, True]
    assert allowed(probe, schema, texts, strict=True) == [True, False, False, True, False]
    closed = {**schema, "additionalProperties": False}
    assert allowed(probe, closed, texts) == [True, False, False, True, False]
    typed = {**schema, "additionalProperties": {"type": "integer"}}
    assert allowed(probe, typed, ['{"a": "x", "z": 1}', '{"a": "x", "z": "y"}']) == [True, False]


def test_twenty_optional_properties_keep_the_grammar_small(probe: GrammarProbe) -> None:
    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(20)},
              "additionalProperties": False}
    grammar = grammar_for_schema(schema)
    assert grammar.count("\n") < 80, "one rule per property and position, not one per combination"
    texts = ["{}", '{"p19": 1}', '{"p0": 1, "p7": 2, "p19": 3}', '{"p7": 2, "p0": 1}']
    assert [probe.accepts(grammar, t) for t in texts] == [True, True, True, False]


def test_whitespace_between_tokens_is_bounded(probe: GrammarProbe) -> None:
    assert allowed(probe, JOKE, ['{\n  "setup":"a",\n  "punchline": "b"\n}']) == [True]
    padded = '{"setup":' + " " * 5 + '"a", "punchline": "b"}'
    deep = '{"setup": "a",\n' + " " * 21 + '"punchline": "b"}'
    assert allowed(probe, JOKE, [padded, deep]) == [False, False]
    assert probe.accepts(JSON_OBJECT_GRAMMAR, '{"a": 1}')
    assert not probe.accepts(JSON_OBJECT_GRAMMAR, '{"a":' + " " * 30 + "1}")


def test_string_lengths(probe: GrammarProbe) -> None:
    schema = {"type": "string", "minLength": 2, "maxLength": 4}
    assert allowed(probe, schema, ['"' + "a" * n + '"' for n in range(6)]) == [False, False, True, True, True, False]
    # An escape is one character.
    assert allowed(probe, schema, ['"\\n\\""', '"\\u00e9x"']) == [True, True]


def test_a_long_max_length_is_a_small_grammar_that_llama_cpp_parses(probe: GrammarProbe) -> None:
    for limit in (1_000, 30_000, 100_000, 10_000_000):
        grammar = grammar_for_schema({"type": "string", "maxLength": limit})
        assert len(grammar) < 2_000, "no rule or group per character"
        assert probe.compiles(grammar)
    grammar = grammar_for_schema({"type": "string", "maxLength": 1_234})
    assert [probe.accepts(grammar, '"' + "a" * n + '"') for n in (0, 99, 100, 101, 1_199, 1_234, 1_235)] == [
        True, True, True, True, True, True, False,
    ]


def test_enum_and_const(probe: GrammarProbe) -> None:
    assert allowed(probe, {"enum": ["red", 2, None, {"k": [1]}]}, ['"red"', "2", "null", '{"k":[1]}', '"blue"']) == [
        True, True, True, True, False,
    ]
    assert allowed(probe, {"const": "yes"}, ['"yes"', '"no"']) == [True, False]


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("date", "2026-12-01", "2026-13-01"),
        ("time", "23:59:08Z", "24:00:00Z"),
        ("date-time", "2026-12-01T11:25:57.5+01:00", "2026-12-01 11:25:57"),
        ("uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567e89b12d3a456426614174000"),
        ("email", "maria.lopez@example.com", "maria.lopez@"),
    ],
)
def test_string_formats(probe: GrammarProbe, fmt: str, good: str, bad: str) -> None:
    assert allowed(probe, {"type": "string", "format": fmt}, [f'"{good}"', f'"{bad}"']) == [True, False]


def test_patterns(probe: GrammarProbe) -> None:
    phone = {"type": "string", "pattern": r"^\d{3}-\d{4}$"}
    assert allowed(probe, phone, ['"555-1234"', '"55-1234"', '"555-12345"']) == [True, False, False]
    ipv4 = {"type": "string", "pattern": r"^(\d{1,3}\.){3}\d{1,3}$"}
    assert allowed(probe, ipv4, ['"10.0.0.255"', '"10.0.0"']) == [True, False]
    name = {"type": "string", "pattern": r"^[A-Z][a-z]+(?: [A-Z][a-z]+)*$"}
    assert allowed(probe, name, ['"Ada Lovelace"', '"ada"', '"Ada "']) == [True, False, False]
    # A quote in the pattern is written escaped in the JSON string.
    assert allowed(probe, {"type": "string", "pattern": '^a"b$'}, ['"a\\"b"', '"a"b"']) == [True, False]
    assert allowed(probe, {"type": "string", "pattern": "^[^a]$"}, ['"b"', '"a"', '"\\""']) == [True, False, True]


@pytest.mark.parametrize(
    "pattern", [r"^(a?){4000}$", r"^(a{1,10}){1,100}$", r"^a{5000}$", r"(?=a)b", r"^(a)\1$", r"^((a{30}){30}){30}$", "(" * 40 + "a" + ")" * 40, "[z-a]"]
)
def test_costly_or_unsupported_patterns_are_refused_with_a_400(pattern: str) -> None:
    with pytest.raises(InvalidRequest) as raised:
        grammar_for_schema({"type": "string", "pattern": pattern})
    assert raised.value.param == "response_format"


def test_a_repeated_optional_is_rewritten_without_ambiguity(probe: GrammarProbe) -> None:
    grammar = grammar_for_schema({"type": "string", "pattern": r"^(a?){100}$"})
    assert probe.accepts(grammar, '"' + "a" * 100 + '"') and not probe.accepts(grammar, '"' + "a" * 101 + '"')
    assert probe.accepts(grammar, '""')


def test_array_sizes(probe: GrammarProbe) -> None:
    schema = {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}
    texts = ["[" + ", ".join(["1"] * n) + "]" for n in range(5)]
    assert allowed(probe, schema, texts) == [False, True, True, True, False]
    assert allowed(probe, {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
                   ['["a", 1]', '["a"]', '["a", 1, 2]']) == [True, False, False]


class Address(BaseModel):
    street: str
    city: str


class Person(BaseModel):
    name: str = Field(max_length=20)
    nickname: str | None = None
    home: Address
    previous: list[Address] = Field(default_factory=list, max_length=2)


def test_a_pydantic_schema_with_defs_refs_and_nullables(probe: GrammarProbe) -> None:
    schema = Person.model_json_schema()
    # Required keys (name, home) first, then the optional ones, each in the schema's order.
    good = '{"name": "Ada", "home": {"street": "1 Main", "city": "X"}, "nickname": null, "previous": []}'
    minimal = '{"name": "Ada", "home": {"street": "1 Main", "city": "X"}}'
    bad_order = '{"home": {"street": "1 Main", "city": "X"}, "name": "Ada"}'
    assert allowed(probe, schema, [good, minimal, bad_order], strict=True) == [True, True, False]
    Person.model_validate_json(good)


def test_recursive_references(probe: GrammarProbe) -> None:
    tree = {
        "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                              "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                           "required": ["v", "kids"], "additionalProperties": False}},
        "$ref": "#/$defs/node",
    }
    assert allowed(probe, tree, ['{"v": 1, "kids": [{"v": 2, "kids": []}]}', '{"v": 1}']) == [True, False]


def test_all_of_merges_objects(probe: GrammarProbe) -> None:
    schema = {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                        {"properties": {"b": {"type": "integer"}}, "required": ["b"]}], "additionalProperties": False}
    assert allowed(probe, schema, ['{"a": 1, "b": 2}', '{"a": 1}']) == [True, False]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"x": {"$ref": "https://example.com/s.json"}}},
        {"$ref": "#/$defs/missing"},
        {"type": "string", "maxLength": 2, "minLength": 5},
        {"type": "array", "maxItems": -1},
        {"type": "strange"},
        {"enum": []},
        False,
    ],
)
def test_schemas_that_cannot_be_used_are_a_400(schema: Any) -> None:
    with pytest.raises(InvalidRequest):
        grammar_for_schema(schema)


def test_deep_nesting_and_huge_grammars_are_refused_before_llama_cpp_sees_them() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(60):
        deep = {"type": "array", "items": deep}
    with pytest.raises(InvalidRequest, match="nests"):
        grammar_for_schema(deep)
    # Each pattern is within its own bound; together they would make a huge grammar.
    wide = {"type": "object", "properties": {f"p{i}": {"type": "string", "pattern": f"^a{{1000}}b{i}$"} for i in range(100)}}
    with pytest.raises(InvalidRequest, match="larger than"):
        grammar_for_schema(wide)


# -- fuzzing: any schema gives a grammar llama.cpp parses, or a 400, never a crash ------------

# `make test` runs a few; a longer run: INGLENOOK_FUZZ_EXAMPLES=5000 pytest -k fuzz this file.
FUZZ_EXAMPLES = int(os.environ.get("INGLENOOK_FUZZ_EXAMPLES", "40"))

_leaf = st.sampled_from([
    {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"}, {},
    {"type": "string", "maxLength": 50_000}, {"type": "string", "pattern": r"^[a-z]{2,5}\d?$"},
    {"type": "string", "format": "date-time"}, {"enum": ["a", 1, None]}, {"const": {"k": "v"}},
])


def _schemas() -> st.SearchStrategy[Any]:
    return st.recursive(
        _leaf,
        lambda inner: st.one_of(
            st.builds(lambda props, req, extra: {"type": "object", "properties": props,
                                                 "required": [k for k in props if k in req],
                                                 **({"additionalProperties": extra} if extra is not None else {})},
                      st.dictionaries(st.text("abcxyz_", min_size=1, max_size=6), inner, max_size=6),
                      st.sets(st.text("abcxyz_", min_size=1, max_size=6)), st.sampled_from([None, True, False])),
            st.builds(lambda items, lo, hi: {"type": "array", "items": items, "minItems": lo, "maxItems": lo + hi},
                      inner, st.integers(0, 3), st.integers(0, 5)),
            st.builds(lambda opts: {"anyOf": opts}, st.lists(inner, min_size=1, max_size=3)),
            st.builds(lambda p: {"type": "string", "pattern": p}, st.text("ab?*+(){}|^$.[]-\\d,123", max_size=12)),
        ),
        max_leaves=12,
    )


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(schema=_schemas())
def test_fuzzed_schemas_give_a_bounded_grammar_llama_cpp_accepts_or_a_400(probe: GrammarProbe, schema: Any) -> None:
    try:
        grammar = grammar_for_schema(schema)
    except InvalidRequest:
        return
    assert len(grammar) < MAX_GRAMMAR_SIZE * 8
    assert probe.compiles(grammar), json.dumps(schema)
