"""Property-based tests for what MCP servers and their configs hand Inglenook (issue 45):
an ``mcpServers`` document of any shape or nesting is servers or one ``McpError``, never
another exception; a tool call's arguments cut anywhere close into an object or nothing.
A longer run: INGLENOOK_FUZZ_EXAMPLES=2000."""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from inglenook.engine.text import closed_object
from inglenook.engine.tools import McpError, parse_mcp_servers
from inglenook.engine.tools.config import mask_secrets, masked_url, public_url, url_credentials

EXAMPLES = int(os.environ.get("INGLENOOK_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None)

any_text = st.text(max_size=30)
json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), any_text),
                           lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                   st.dictionaries(any_text, inner, max_size=4)), max_leaves=16)
entry = st.fixed_dictionaries({}, optional={
    "command": st.one_of(any_text, json_values), "args": st.one_of(st.lists(any_text, max_size=3), json_values),
    "env": st.one_of(st.dictionaries(any_text, any_text, max_size=2), json_values),
    "url": st.one_of(any_text, st.just("https://u:p@h.example/mcp?token=t"), json_values),
    "headers": json_values, "timeout": st.one_of(st.integers(-5, 10**7), json_values),
    "type": st.one_of(st.sampled_from(["stdio", "http", "sse"]), json_values), "disabled": json_values})


@FUZZ
@given(document=st.one_of(json_values, st.fixed_dictionaries({"mcpServers": st.dictionaries(any_text, entry,
                                                                                           max_size=3)})),
       depth=st.integers(0, 3000))
def test_any_mcp_servers_document_is_servers_or_one_mcp_error(document: Any, depth: int) -> None:
    text = "[" * depth + json.dumps(document) + "]" * depth
    try:
        servers = parse_mcp_servers(text)
    except McpError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    for config in servers:
        for secret in url_credentials(config.url):
            assert secret not in public_url(config.url)
            assert len(secret) < 4 or secret not in masked_url(config.url).replace("***", "")


@FUZZ
@given(arguments=json_values.filter(lambda v: isinstance(v, dict)), cut=st.integers(0, 400))
def test_cut_arguments_close_into_an_object_of_whole_members(arguments: dict[str, Any], cut: int) -> None:
    text = json.dumps(arguments)
    closed = closed_object(text[:cut])
    if cut == 0:
        assert closed is None
        return
    assert isinstance(closed, dict)
    assert set(closed) <= set(arguments)
    if cut >= len(text):
        assert closed == arguments


@FUZZ
@given(text=any_text, secrets=st.lists(st.text(min_size=4, max_size=12), max_size=3))
def test_masked_text_holds_no_secret(text: str, secrets: list[str]) -> None:
    ordered = sorted(set(secrets), key=len, reverse=True)
    masked = mask_secrets(text + "".join(secrets), ordered)
    assert all(secret not in masked.replace("***", "\0") for secret in ordered if "*" not in secret)
