"""Token counts of the Messages API on a real server: count_tokens tokenizes without a decode
and is never counted in usage (keyed or not); a stream's message_start carries the prompt."""

from __future__ import annotations

import anthropic
import httpx

from inglenook.engine.api.server import ApiServer
from inglenook.engine.api.shared.key_limits import request_client, stamp_client
from inglenook.engine.api.shared.keys import ApiKeys
from inglenook.engine.base.jobs import GenerateJob
from inglenook.engine.core.engine import Engine
from inglenook.engine.usage.usage import uncounted

from ..prefix_rule import LONG_INSTRUCTIONS
from .conftest import STARTER, serving
from .test_anthropic import HELLO, base_url, client_for, post_stream, sse_events

QUESTION = [{"role": "user", "content": "How many legs does a spider have? Answer in one word."}]


def test_count_tokens_runs_no_decode_and_matches_what_create_reads(engine: Engine, server: ApiServer) -> None:
    claude = client_for(server)
    claude.messages.create(model=STARTER, max_tokens=1, temperature=0, messages=HELLO)  # loads the model
    [model] = engine.scheduler.loaded_models()
    decoded = model.prompt_tokens_decoded  # type: ignore[attr-defined]  # the real LoadedModel counts it
    counted = claude.messages.count_tokens(model=STARTER, messages=QUESTION).input_tokens
    assert counted > 10
    assert model.prompt_tokens_decoded == decoded  # type: ignore[attr-defined]  # tokenized, never prefilled
    created = claude.messages.create(model=STARTER, max_tokens=1, temperature=0, messages=QUESTION)
    assert created.usage.input_tokens + (created.usage.cache_read_input_tokens or 0) == counted
    assert model.prompt_tokens_decoded > decoded  # type: ignore[attr-defined]  # the answer did prefill


def test_message_start_reports_the_prompt_that_message_delta_totals(server: ApiServer) -> None:
    # System text past the 64 tokens every prompt reads again (tests/prefix_rule.py).
    body = {"model": STARTER, "max_tokens": 3, "temperature": 0, "system": LONG_INSTRUCTIONS, "messages": QUESTION}
    for _ in range(2):  # the second time the prompt comes from the prefix cache
        events = sse_events(post_stream(server, body).text)
        start = events[0][1]["message"]["usage"]
        final = events[-2][1]["usage"]
        assert start["input_tokens"] + start["cache_read_input_tokens"] > 10
        assert (start["input_tokens"], start["cache_read_input_tokens"]) == \
            (final["input_tokens"], final["cache_read_input_tokens"])
        assert start["output_tokens"] == 0 and final["output_tokens"] == 3
    assert final["cache_read_input_tokens"] > 0


def test_a_keyed_count_tokens_is_not_counted_in_usage(engine: Engine) -> None:
    keys = ApiKeys(engine.store)
    _, key = keys.create("carol")
    with serving(engine, keys=keys) as server:
        claude = anthropic.Anthropic(base_url=base_url(server), api_key=key, max_retries=0, timeout=300)
        claude.messages.create(model=STARTER, max_tokens=2, temperature=0, messages=HELLO)
        assert claude.messages.count_tokens(model=STARTER, messages=QUESTION).input_tokens > 0
        assert engine.usage.flush()
        found = httpx.get(f"{server.url}/usage", params={"days": 1}, headers={"x-api-key": key}, timeout=60)
    assert found.status_code == 200, found.text
    clients = {row["client"]: row["requests"] for row in found.json()["by_client"]}
    assert clients == {"api:carol": 1}


def test_the_key_stamp_keeps_uncounted_work_uncounted() -> None:
    counted, probe = GenerateJob("m", client="api:curl"), GenerateJob("m", client=uncounted("api:curl"))
    token = request_client.set("api:carol")
    try:
        stamp_client([counted, probe])
    finally:
        request_client.reset(token)
    assert counted.client == "api:carol"
    assert probe.client == uncounted("api:carol")
