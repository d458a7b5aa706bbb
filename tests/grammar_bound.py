"""The most bytes a structured answer can hold under a schema's grammar: a ``max_tokens`` at
least this large makes finishing the only way an answer can end, on every CPU.

A test that asserts ``finish_reason == "stop"`` for a schema-constrained answer must not
depend on the small model choosing to close its strings soon (a change of CPU changes its
greedy path: issue 39). The grammar (``engine/text/json_grammar.py``) admits only answers of
bounded length, every token it admits writes at least one byte (llama.cpp's grammar refuses
empty pieces), and the end-of-answer token is admitted only once the JSON is complete; so an
answer given ``most_bytes(schema)`` tokens ends by the grammar, not at the cap.

Upper bounds, written generously from the grammar's rules; only the parts of JSON Schema that
these tests use are covered, and a schema that leaves a string or an array unbounded, or lets
a model add keys, is refused so that no test relies on the engine's defaults being small.
"""

from __future__ import annotations

import json
from typing import Any

from inglenook.engine.text import json_grammar

WS = 21  # the grammar's whitespace: nothing, a space, or a newline and up to 20 indentation characters
CHAR = 6  # one character of a string, at most: an escape such as \u00e9
INTEGER = 1 + 16  # "-"? then at most 16 digits
FORMATS = {"date": 10, "time": 21, "date-time": 32, "uuid": 36}


def most_bytes(schema: dict[str, Any], *, strict: bool = True) -> int:
    return _most(schema, schema, strict)


def _most(schema: Any, root: dict[str, Any], strict: bool) -> int:
    if not isinstance(schema, dict):
        raise ValueError(f"unbounded value {schema!r}")
    if "$ref" in schema:
        target: Any = root
        for part in [p for p in schema["$ref"].lstrip("#").split("/") if p]:
            target = target[part]
        return _most(target, root, strict)
    if "enum" in schema:
        return max(len(json.dumps(v)) for v in schema["enum"]) + WS
    if "const" in schema:
        return len(json.dumps(schema["const"])) + WS
    kind = schema.get("type")
    if kind == "string":
        if schema.get("format") in FORMATS:
            return 2 + FORMATS[schema["format"]] + WS
        if "maxLength" not in schema:
            raise ValueError(f"a string with no maxLength: {schema}")
        return 2 + CHAR * min(schema["maxLength"], json_grammar.MAX_BOUNDED_STRING) + WS
    if kind == "integer":
        return INTEGER + WS
    if kind == "boolean":
        return 5 + WS
    if kind == "array":
        if "maxItems" not in schema:
            raise ValueError(f"an array with no maxItems: {schema}")
        item = _most(schema.get("items", True), root, strict)
        return 2 + 2 * WS + schema["maxItems"] * (1 + WS + item)
    if kind == "object":
        if schema.get("additionalProperties") is not False and not strict:
            raise ValueError(f"an object that admits undeclared keys: {schema}")
        pairs = sum(len(json.dumps(name)) + 2 * WS + 2 + WS + _most(value, root, strict)
                    for name, value in schema.get("properties", {}).items())
        return 2 + 2 * WS + pairs
    raise ValueError(f"a part these bounds do not cover: {schema}")
