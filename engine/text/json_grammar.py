"""GBNF grammars that make a model write JSON: any object, or one that fits a JSON schema.

The converter is our own, written to behave as OpenAI documents structured outputs:

- an object's keys come in the schema's order (required ones first, then optional ones,
  each of which may be skipped); ``additionalProperties: false`` or strict mode admits no
  other key, otherwise extra keys may follow the declared ones;
- whitespace between tokens is bounded (one space, or a newline and up to 20 indentation
  characters), so a model cannot fill its budget with blanks;
- ``minLength``/``maxLength``, ``enum``, ``const``, ``format`` (date, time, date-time, uuid,
  email), ``pattern`` (see ``regex_grammar``) and ``minItems``/``maxItems`` are honoured;
- every answer a schema grammar admits is of bounded length, so a forced tool call or a
  structured answer ends by the grammar whatever the model does, not at the token cap with
  the JSON cut off: a string without ``maxLength`` holds at most ``STRING_CHARS`` characters,
  an array without ``maxItems`` at most ``ARRAY_ITEMS`` items, an object at most
  ``EXTRA_KEYS`` undeclared keys (names of at most ``KEY_CHARS`` characters), and a value the
  schema leaves free (``{}``, ``true``, no type) nests at most ``FREE_DEPTH`` containers deep;
  only a ``pattern`` with an unbounded repetition (``+``, ``*``) and a ``$ref`` that
  recurses are left to the token cap (capping a pattern's repetitions made common patterns
  too ambiguous for ``regex_grammar``'s limits; a recursive schema would need unrolling);
- the grammar's size is bounded: repetitions are written with counts that llama.cpp expands
  itself (never one nested group per character, which overflowed its parser's stack), long
  counts are decomposed into blocks, and a schema whose grammar would exceed
  MAX_GRAMMAR_SIZE is refused with a 400 rather than handed to llama.cpp.

Grammars are cached by schema text because clients send the same schema with every request.

Why one file of about 400 lines: the converter is one recursive walk over the schema whose
cases (objects, arrays, strings, numbers, combinators, references) share its rule table and
its size accounting; the character-level pieces already live in ``gbnf`` and ``regex_grammar``.
"""

from __future__ import annotations

import json
import logging
import re
from functools import lru_cache
from typing import Any

from ..base import InvalidRequest
from . import gbnf
from .regex_grammar import PatternError, parse_pattern, size as pattern_size, to_gbnf

log = logging.getLogger(__name__)

MAX_SCHEMA_CHARS = 64_000
MAX_SCHEMA_DEPTH = 48  # nested schemas (objects in arrays in objects …), $refs followed included
MAX_GRAMMAR_SIZE = 60_000  # grammar symbols once llama.cpp has expanded every repetition
# The bounds an answer is held to where the schema sets none (see the module docstring).
# Tool arguments and structured fields are names, queries, sentences, short paragraphs:
# 2,000 characters holds them and, should a small model never close a string, ends it in
# about 500 tokens rather than at the 2,048-token cap with the JSON cut off. A client that
# wants more says so with maxLength / maxItems.
STRING_CHARS = 2_000
ARRAY_ITEMS = 64
EXTRA_KEYS = 16
KEY_CHARS = 64
FREE_DEPTH = 3
# The longest string a grammar bounds; a larger maxLength is held to this.
MAX_BOUNDED_STRING = gbnf.MAX_DIRECT_REPEAT * gbnf.REPEAT_BLOCK

_PRIMITIVES = {
    "ws": r'| " " | "\n" [ \t]{0,20}',
    "char": r'[^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )',
    "string": r'"\"" char* "\"" ws',
    "integral": r'"0" | [1-9] [0-9]{0,15}',
    "integer": r'"-"? integral ws',
    "number": r'"-"? integral ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )? ws',
    "boolean": r'( "true" | "false" ) ws',
    "null": r'"null" ws',
    "value": r"object | array | string | number | boolean | null",
    "object": r'"{" ws ( string ":" ws value ( "," ws string ":" ws value )* )? "}" ws',
    "array": r'"[" ws ( value ( "," ws value )* )? "]" ws',
    "digit2": r"[0-9] [0-9]",
    "hex": r"[0-9a-fA-F]",
    "date": r'[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] )',
    "time": r'( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? '
    r'( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )',
    "uuid": r'hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12}',
    "email-label": r"[A-Za-z0-9] ( [A-Za-z0-9-]{0,61} [A-Za-z0-9] )?",
    "email": r'[A-Za-z0-9._%+-]{1,64} "@" email-label ( "." email-label ){1,6}',
}
# What each primitive needs defined beside it.
_NEEDS = {
    "string": ("char", "ws"), "integer": ("integral", "ws"), "number": ("integral", "ws"),
    "boolean": ("ws",), "null": ("ws",), "value": ("object", "array", "string", "number", "boolean", "null"),
    "object": ("ws", "string", "value"), "array": ("ws", "value"), "uuid": ("hex",), "email": ("email-label",),
}
_FORMATS = {"date": "date", "time": "time", "date-time": 'date "T" time', "uuid": "uuid", "email": "email"}
_FORMAT_NEEDS = {"date-time": ("date", "time")}

# Any JSON object, with whitespace bounded so a greedy model cannot pad forever.
JSON_OBJECT_GRAMMAR = "root ::= object\n" + "\n".join(
    f"{name} ::= {_PRIMITIVES[name]}"
    for name in ("value", "object", "array", "string", "char", "integral", "number", "boolean", "null", "ws")
) + "\n"


def grammar_for_schema(
    schema: dict[str, Any] | bool, param: str = "response_format", prop_order: tuple[str, ...] = (), strict: bool = False
) -> str:
    """A GBNF grammar for ``schema``; InvalidRequest (naming ``param``) if it cannot be converted.

    ``prop_order`` puts those properties first wherever they appear (the remaining ones keep
    the schema's order); ``strict`` (OpenAI's ``strict: true``) admits no undeclared keys.
    """
    try:
        text = json.dumps(schema)
    except (TypeError, ValueError):
        raise InvalidRequest("the JSON schema is not serialisable", param=param) from None
    if len(text) > MAX_SCHEMA_CHARS:
        raise InvalidRequest(f"the JSON schema is longer than {MAX_SCHEMA_CHARS} characters", param=param)
    return _convert(text, prop_order, strict, param)


@lru_cache(maxsize=64)
def _convert(schema_text: str, prop_order: tuple[str, ...], strict: bool, param: str) -> str:
    schema = json.loads(schema_text)
    try:
        return SchemaGrammar(schema, prop_order, strict).build()
    except SchemaError as exc:
        log.info("JSON schema refused: %s", exc)
        raise InvalidRequest(f"the JSON schema cannot be used: {exc}", param=param) from None
    except RecursionError:
        raise InvalidRequest("the JSON schema nests too deeply", param=param) from None


class SchemaError(ValueError):
    """A schema this converter cannot or will not turn into a grammar."""


class SchemaGrammar:
    """Builds the rules for one schema. Every visit returns a GBNF expression for a JSON
    value followed by bounded whitespace."""

    def __init__(self, schema: Any, prop_order: tuple[str, ...] = (), strict: bool = False) -> None:
        self.root = schema
        self.prop_order = prop_order
        self.strict = strict
        self.rules: dict[str, str] = {}
        self._by_body: dict[str, str] = {}
        self._refs: dict[str, str] = {}
        self.size = 0

    # -- rules ---------------------------------------------------------------------------

    def build(self) -> str:
        self.rules["root"] = ""  # reserved, so no other rule takes the name
        self.rules = {"root": self.visit(self.root, "json", 0), **{k: v for k, v in self.rules.items() if k != "root"}}
        return "".join(f"{name} ::= {body}\n" for name, body in self.rules.items())

    def define(self, hint: str, body: str) -> str:
        """A rule with ``body`` (the same body is defined once) and its name."""
        if body in self._by_body:
            return self._by_body[body]
        name = self._fresh(hint)
        self.rules[name] = body
        self._by_body[body] = name
        self.charge(_symbols(body))
        return name

    def primitive(self, name: str) -> str:
        if name not in self.rules:
            self.rules[name] = _PRIMITIVES[name]
            self._by_body.setdefault(_PRIMITIVES[name], name)
            self.charge(_symbols(_PRIMITIVES[name]))
            for needed in _NEEDS.get(name, ()):
                self.primitive(needed)
        return name

    def charge(self, symbols: int) -> None:
        self.size += symbols
        if self.size > MAX_GRAMMAR_SIZE:
            raise SchemaError(f"its grammar would be larger than {MAX_GRAMMAR_SIZE} symbols")

    def _fresh(self, hint: str) -> str:
        base = re.sub(r"[^A-Za-z0-9-]+", "-", hint).strip("-").lower()[:40] or "rule"
        name, n = base, 1
        while name in self.rules or name in _PRIMITIVES:
            n += 1
            name = f"{base}-{n}"
        return name

    # -- schemas -------------------------------------------------------------------------

    def visit(self, schema: Any, hint: str, depth: int) -> str:
        if depth > MAX_SCHEMA_DEPTH:
            raise SchemaError(f"it nests more than {MAX_SCHEMA_DEPTH} levels deep")
        if schema is True or schema == {}:
            return self.free_value()
        if schema is False:
            raise SchemaError("a 'false' schema allows no value")
        if not isinstance(schema, dict):
            raise SchemaError(f"a schema must be an object, not {type(schema).__name__}")
        if "$ref" in schema:
            return self.reference(schema["$ref"], depth)
        if "const" in schema:
            self.primitive("ws")
            return self.define(f"{hint}-const", f"{gbnf.json_literal(schema['const'])} ws")
        if "enum" in schema:
            return self.enum(schema["enum"], hint)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self.alternatives(schema[key], hint, depth)
        if "allOf" in schema:
            return self.visit(self.merge_all(schema), hint, depth + 1)
        kind = schema.get("type")
        if isinstance(kind, list):
            options = [{**schema, "type": k} for k in kind]
            return self.alternatives(options, hint, depth)
        if kind == "object" or (kind is None and ("properties" in schema or "additionalProperties" in schema)):
            return self.object(schema, hint, depth)
        if kind == "array" or (kind is None and ("items" in schema or "prefixItems" in schema)):
            return self.array(schema, hint, depth)
        if kind == "string" or (kind is None and ("pattern" in schema or "format" in schema)):
            return self.string(schema, hint)
        if kind in ("integer", "number", "boolean", "null"):
            if kind == "integer" and isinstance(schema.get("minimum"), (int, float)) and schema["minimum"] >= 0:
                self.primitive("integer")
                return self.define("natural", "integral ws")
            return self.primitive(kind)
        if kind is None:
            return self.free_value()
        raise SchemaError(f"the type {kind!r} is not a JSON schema type")

    def reference(self, ref: Any, depth: int) -> str:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise SchemaError(f"only local references ('#/...') are supported, not {ref!r}")
        if ref in self._refs:
            return self._refs[ref]
        target: Any = self.root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise SchemaError(f"the reference {ref!r} points at nothing")
            target = target[part]
        name = self._fresh(ref.rsplit("/", 1)[-1] or "root-ref")
        self._refs[ref] = name
        self.rules[name] = ""  # reserved now: the target may refer to itself
        self.rules[name] = self.visit(target, name, depth + 1)
        return name

    def enum(self, values: Any, hint: str) -> str:
        if not isinstance(values, list) or not values:
            raise SchemaError("'enum' must be a non-empty list")
        self.primitive("ws")
        options = " | ".join(gbnf.json_literal(v) for v in values)
        return self.define(f"{hint}-enum", f"( {options} ) ws")

    def alternatives(self, options: Any, hint: str, depth: int) -> str:
        if not isinstance(options, list) or not options:
            raise SchemaError("'anyOf'/'oneOf' must be a non-empty list")
        bodies = [self.visit(o, f"{hint}-{i}", depth + 1) for i, o in enumerate(options)]
        return self.define(f"{hint}-any", " | ".join(dict.fromkeys(bodies)))

    def merge_all(self, schema: dict[str, Any]) -> dict[str, Any]:
        """``allOf`` read as one object schema (what pydantic and hand-written schemas use it for)."""
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            if isinstance(part, dict) and "$ref" in part:
                part = self.resolve(part["$ref"])
            if not isinstance(part, dict):
                raise SchemaError("'allOf' must list schemas")
            for key, value in part.items():
                if key == "properties":
                    merged["properties"] = {**merged.get("properties", {}), **value}
                elif key == "required":
                    merged["required"] = list(dict.fromkeys([*merged.get("required", []), *value]))
                else:
                    merged.setdefault(key, value)
        return merged

    def resolve(self, ref: str) -> Any:
        target: Any = self.root
        for part in [p for p in ref.lstrip("#").split("/") if p]:
            if not isinstance(target, dict) or part not in target:
                raise SchemaError(f"the reference {ref!r} points at nothing")
            target = target[part]
        return target

    # -- objects -------------------------------------------------------------------------

    def object(self, schema: dict[str, Any], hint: str, depth: int) -> str:
        properties = schema.get("properties") or {}
        if not isinstance(properties, dict):
            raise SchemaError("'properties' must be an object")
        required = schema.get("required") or []
        if not isinstance(required, list):
            raise SchemaError("'required' must be a list")
        names = list(properties) + [r for r in required if r not in properties]
        first = [n for n in self.prop_order if n in names]
        names = first + [n for n in names if n not in first]
        self.primitive("ws")
        pairs = {n: self.pair(n, properties.get(n, True), f"{hint}-{n}", depth) for n in names}
        needed = [n for n in names if n in required]
        optional = [n for n in names if n not in required]

        extra = self.extra_pair(schema, hint, depth)
        tail = self.optional_tail(optional, pairs, extra, hint)
        if needed:
            body = ' "," ws '.join(pairs[n] for n in needed)
            return self.define(hint, f'"{{" ws {body} {tail} "}}" ws'.replace("  ", " "))
        # No key is required: the first key written has no comma before it.
        starts = [f"{pairs[n]} {self.optional_tail(optional[i + 1:], pairs, extra, hint)}".strip()
                  for i, n in enumerate(optional)]
        if extra:
            starts.append(f"{extra} {self.extras(hint, extra, EXTRA_KEYS - 1)}".strip())
        inner = f"( {' | '.join(starts)} )?" if starts else ""
        return self.define(hint, f'"{{" ws {inner} "}}" ws'.replace("  ", " "))

    def pair(self, name: str, schema: Any, hint: str, depth: int) -> str:
        value = self.visit(schema, hint, depth + 1)
        return self.define(f"{hint}-kv", f'{gbnf.json_literal(name)} ws ":" ws {value}')

    def extra_pair(self, schema: dict[str, Any], hint: str, depth: int) -> str | None:
        """The rule for one undeclared key and its value, or None when none is allowed."""
        additional = schema.get("additionalProperties")
        if additional is False or (self.strict and not isinstance(additional, dict)):
            return None
        value = self.visit(additional if isinstance(additional, dict) else True, f"{hint}-extra", depth + 1)
        key = self.bounded_string("key", 0, KEY_CHARS)
        return self.define(f"{hint}-extra-kv", f'{key} ":" ws {value}')

    def optional_tail(self, optional: list[str], pairs: dict[str, str], extra: str | None, hint: str) -> str:
        """What may follow written keys: each optional key in order (or not), then extras.

        One rule per position keeps this linear in the number of optional keys (the
        grammar for 20 optional properties stays small)."""
        tail = self.extras(hint, extra, EXTRA_KEYS) if extra else ""
        for name in reversed(optional):
            tail = self.define(f"{hint}-after-{name}", f'( "," ws {pairs[name]} )? {tail}'.strip())
        return tail

    def extras(self, hint: str, extra: str, most: int) -> str:
        """Up to ``most`` more undeclared keys, each after a comma (a rule; "" for none)."""
        if most <= 0:
            return ""
        following = self.define(f"{hint}-next-extra", f'"," ws {extra}')
        self.charge(2 * most)
        return self.define(f"{hint}-extras", _repeat(following, 0, most))

    # -- arrays and strings --------------------------------------------------------------

    def array(self, schema: dict[str, Any], hint: str, depth: int) -> str:
        self.primitive("ws")
        prefix = schema.get("prefixItems") or []
        low, high = _bounds(schema, "minItems", "maxItems")
        if high is None:  # bounded all the same, so the answer ends (module docstring)
            high = max(low, len(prefix), ARRAY_ITEMS)
        items = schema.get("items", True)
        if prefix:
            parts = [self.visit(p, f"{hint}-{i}", depth + 1) for i, p in enumerate(prefix)]
            body = ' "," ws '.join(parts)
            rest = "" if items is False else self._array_rest(items, hint, depth, 0, None if high is None else max(0, high - len(parts)))
            return self.define(hint, f'"[" ws {body} {rest} "]" ws'.replace("  ", " "))
        item = self.visit(items, f"{hint}-item", depth + 1)
        if high == 0:
            return self.define(hint, '"[" ws "]" ws')
        more = self._array_rest(items, hint, depth, max(0, low - 1), None if high is None else high - 1, item)
        inner = f"{item} {more}".strip()
        body = inner if low > 0 else f"( {inner} )?"
        return self.define(hint, f'"[" ws {body} "]" ws')

    def _array_rest(self, items: Any, hint: str, depth: int, low: int, high: int | None, item: str | None = None) -> str:
        item = item or self.visit(items, f"{hint}-item", depth + 1)
        following = self.define(f"{hint}-next", f'"," ws {item}')
        self.charge((high if high is not None else low) * 2)
        return _repeat(following, low, high)

    def string(self, schema: dict[str, Any], hint: str) -> str:
        self.primitive("ws")
        fmt = schema.get("format")
        if isinstance(fmt, str) and fmt in _FORMATS:
            for needed in (*_FORMAT_NEEDS.get(fmt, ()), _FORMATS[fmt]):
                if needed in _PRIMITIVES:
                    self.primitive(needed)
            return self.define(f"{hint}-{fmt}", f'"\\"" {_FORMATS[fmt]} "\\"" ws')
        if fmt is not None:
            log.debug("string format %r is not enforced by the grammar", fmt)
        pattern = schema.get("pattern")
        if pattern is not None:
            if not isinstance(pattern, str):
                raise SchemaError("'pattern' must be a string")
            try:
                node = parse_pattern(pattern)
                self.charge(pattern_size(node))
                body = to_gbnf(node, self.define)
            except PatternError as exc:
                raise SchemaError(f"its pattern {pattern[:60]!r} cannot be used: {exc}") from None
            return self.define(f"{hint}-pattern", f'"\\"" {body} "\\"" ws')
        low, high = _bounds(schema, "minLength", "maxLength")
        if low > MAX_BOUNDED_STRING:
            raise SchemaError(f"a minLength of {low} cannot be met")
        if high is not None and high > MAX_BOUNDED_STRING:
            log.info("maxLength %d is beyond what a grammar bounds; held to %d", high, MAX_BOUNDED_STRING)
            high = MAX_BOUNDED_STRING
        high = max(low, STRING_CHARS) if high is None else high
        return self.bounded_string(hint, low, high)

    def bounded_string(self, hint: str, low: int, high: int) -> str:
        self.primitive("char")
        self.primitive("ws")
        body = f'"\\"" {_repeat("char", low, high)} "\\"" ws'
        if body not in self._by_body:
            self.charge(_repeat_cost(low, high))
        return self.define(f"{hint}-string", body)

    def free_value(self, depth: int = FREE_DEPTH) -> str:
        """Any JSON value, held to the default bounds: strings of ``STRING_CHARS``, up to
        ``ARRAY_ITEMS`` items or ``EXTRA_KEYS`` keys per container, ``depth`` containers deep."""
        scalars = f"{self.bounded_string('free', 0, STRING_CHARS)} | {self.primitive('number')} | " \
                  f"{self.primitive('boolean')} | {self.primitive('null')}"
        if depth <= 0:
            return self.define("free-scalar", scalars)
        inner = self.free_value(depth - 1)
        key = self.bounded_string("key", 0, KEY_CHARS)
        pair = self.define(f"free-pair-{depth}", f'{key} ":" ws {inner}')
        more_pairs = _repeat(self.define(f"free-next-pair-{depth}", f'"," ws {pair}'), 0, EXTRA_KEYS - 1)
        more_items = _repeat(self.define(f"free-next-item-{depth}", f'"," ws {inner}'), 0, ARRAY_ITEMS - 1)
        self.charge(2 * (EXTRA_KEYS + ARRAY_ITEMS))
        obj = self.define(f"free-object-{depth}", f'"{{" ws ( {pair} {more_pairs} )? "}}" ws')
        arr = self.define(f"free-array-{depth}", f'"[" ws ( {inner} {more_items} )? "]" ws')
        return self.define(f"free-value-{depth}", f"{obj} | {arr} | {scalars}")


def _repeat(item: str, low: int, high: int | None) -> str:
    try:
        return gbnf.repeat(item, low, high)
    except ValueError as exc:
        raise SchemaError(str(exc)) from None


def _repeat_cost(low: int, high: int | None) -> int:
    """Symbols llama.cpp creates for a repetition written by gbnf.repeat."""
    count = high if high is not None else low
    if count <= gbnf.MAX_DIRECT_REPEAT:
        return count * 3
    return (count // gbnf.REPEAT_BLOCK + gbnf.REPEAT_BLOCK * 3) * 3


def _bounds(schema: dict[str, Any], low_key: str, high_key: str) -> tuple[int, int | None]:
    low, high = schema.get(low_key, 0), schema.get(high_key)
    for key, value in ((low_key, low), (high_key, high)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise SchemaError(f"'{key}' must be a non-negative integer")
    if high is not None and high < low:
        raise SchemaError(f"'{high_key}' is smaller than '{low_key}'")
    return low, high


def _symbols(body: str) -> int:
    """A rough count of the symbols in a rule body (llama.cpp stores one per element)."""
    return max(1, len(body) // 4)
