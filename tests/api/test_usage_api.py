"""GET /v1/usage after real calls through the official SDKs: every generation is counted under
its client with the tokens the responses reported; count_tokens is not; the key guards it."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from inglenook.engine.api.server import ApiServer
from inglenook.engine.core.engine import Engine
from tests.api.conftest import STARTER, serving

pytestmark = pytest.mark.api


def _usage(server: ApiServer, engine: Engine, **params: object) -> httpx.Response:
    assert engine.usage.flush()  # the writer batches; wait for what was queued
    return httpx.get(f"{server.url}/usage", params=params, timeout=60)


def test_real_calls_are_counted_per_client_and_model(engine: Engine, server: ApiServer, client: openai.OpenAI) -> None:
    chat = client.chat.completions.create(model=STARTER, messages=[{"role": "user", "content": "Say hello."}],
                                          max_tokens=6, temperature=0)
    responses = client.responses.create(model=STARTER, input="Name a colour.", max_output_tokens=6, temperature=0)
    messages = anthropic.Anthropic(base_url=server.url.removesuffix("/v1"), api_key="x", max_retries=0)
    message = messages.messages.create(model=STARTER, max_tokens=6,
                                       messages=[{"role": "user", "content": "Count to three."}])
    messages.messages.count_tokens(model=STARTER, messages=[{"role": "user", "content": "Free to count."}])
    raw = httpx.post(f"{server.url}/completions", headers={"User-Agent": "usage-test/1"},
                     json={"model": STARTER, "prompt": "Once upon", "max_tokens": 3, "temperature": 0}, timeout=300)
    assert raw.status_code == 200, raw.text

    found = _usage(server, engine, days=1)
    assert found.status_code == 200, found.text
    body = found.json()
    assert body["object"] == "usage" and body["days"] == 1 and body["from"] == body["to"]
    reported = [
        (chat.usage.prompt_tokens, chat.usage.completion_tokens),
        (responses.usage.input_tokens, responses.usage.output_tokens),
        # Anthropic's input_tokens leaves out the tokens read from the cache.
        (message.usage.input_tokens + (message.usage.cache_read_input_tokens or 0), message.usage.output_tokens),
        (raw.json()["usage"]["prompt_tokens"], raw.json()["usage"]["completion_tokens"]),
    ]
    totals = body["totals"]
    assert totals["requests"] == 4  # count_tokens' probe is not a generation anyone asked for
    assert totals["prompt_tokens"] == sum(p for p, _ in reported)
    # The Messages API applies max_tokens as a cap while it reads the stream, so the engine may
    # generate one token past it before the cancel lands: usage counts what the machine made.
    generated = sum(c for _, c in reported)
    assert generated <= totals["completion_tokens"] <= generated + 1
    clients = {row["client"]: row for row in body["by_client"]}
    assert clients["api:usage-test/1"]["requests"] == 1
    assert any(name.startswith("api:OpenAI/Python") and row["requests"] == 2 for name, row in clients.items())
    assert any(name.startswith("api:Anthropic/Python") for name in clients)
    assert [row["model"] for row in body["by_model"]] == [STARTER]
    assert body["by_day"][0]["by_model"][STARTER]["requests"] == 4
    priced = {api["name"]: api["cost"] for api in body["cost"]["apis"]}
    assert len(priced) >= 2 and all(cost > 0 for cost in priced.values())
    assert body["cost"]["machine"]["busy_s"] > 0


def test_bad_days_are_a_400_naming_the_param(engine: Engine, server: ApiServer) -> None:
    refused = _usage(server, engine, days="lots")
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "days"


def test_usage_needs_the_key_when_one_is_set(engine: Engine) -> None:
    with serving(engine, api_key="sekrit") as server:
        assert httpx.get(f"{server.url}/usage", timeout=30).status_code == 401
        allowed = httpx.get(f"{server.url}/usage", headers={"Authorization": "Bearer sekrit"}, timeout=30)
        assert allowed.status_code == 200 and allowed.json()["totals"]["requests"] == 0
