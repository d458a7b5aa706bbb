"""GBNF grammars that make a model write JSON: any object, or one that fits a JSON schema.

The schema-to-grammar conversion is llama-cpp-python's (``llama_cpp.llama_grammar``),
imported lazily; it follows llama.cpp's own converter. Grammars are cached by schema text
because clients send the same schema with every request.
"""

from __future__ import annotations

import json
import logging
from functools import lru_cache
from typing import Any

from .errors import InvalidRequest

log = logging.getLogger(__name__)

# Any JSON object, with whitespace bounded so a greedy model cannot pad forever.
JSON_OBJECT_GRAMMAR = r"""
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ( "," ws string ":" ws value )* )? "}" ws
array  ::= "[" ws ( value ( "," ws value )* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\"" ws
number ::= "-"? ( [0-9] | [1-9] [0-9]{0,15} ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]{1,3} )? ws
ws     ::= | " " | "\n" [ \t]{0,20}
"""

MAX_SCHEMA_CHARS = 64_000


def grammar_for_schema(schema: dict[str, Any], param: str = "response_format", prop_order: tuple[str, ...] = ()) -> str:
    """A GBNF grammar for ``schema``; InvalidRequest (naming ``param``) if it cannot be converted."""
    try:
        text = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):
        raise InvalidRequest("the JSON schema is not serialisable", param=param) from None
    if len(text) > MAX_SCHEMA_CHARS:
        raise InvalidRequest(f"the JSON schema is longer than {MAX_SCHEMA_CHARS} characters", param=param)
    return _convert(text, prop_order, param)


@lru_cache(maxsize=64)
def _convert(schema_text: str, prop_order: tuple[str, ...], param: str) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf  # noqa: PLC0415 — heavy, only when asked

    try:
        return json_schema_to_gbnf(schema_text, list(prop_order))
    except RecursionError:
        raise InvalidRequest("the JSON schema nests too deeply", param=param) from None
    except Exception as exc:  # the converter raises plain exceptions for unsupported schemas
        log.info("JSON schema conversion failed: %s", exc)
        raise InvalidRequest(f"the JSON schema cannot be turned into a grammar: {exc}", param=param) from None
