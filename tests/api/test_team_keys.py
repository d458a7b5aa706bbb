"""Named API keys on a real server: hashed storage, limits only when set, revocation."""

from __future__ import annotations

import json
import sqlite3
import threading
import time

import anthropic
import httpx
import openai
import pytest

from inglenook.engine.api.server import ApiServer
from inglenook.engine.api.shared.keys import ApiKeys, KeyLimits
from inglenook.engine.base.errors import InvalidRequest, ServerError
from inglenook.engine.core.engine import Engine

from .conftest import STARTER, chat_body, serving
from tests.polling import wait_until

pytestmark = pytest.mark.api


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_keys_are_stored_hashed_and_shown_once(engine: Engine) -> None:
    keys = ApiKeys(engine.store)
    record, key = keys.create("alice", KeyLimits(requests_per_minute=10, models=("a", "b")))
    assert key.startswith("ink-") and len(key) > 40
    assert record.prefix == key[:10]
    with sqlite3.connect(engine.paths.database) as conn:
        stored = json.dumps(conn.execute("SELECT * FROM api_keys").fetchall())
    assert key not in stored and key[10:] not in stored
    assert keys.find(key) == keys.get("alice")
    assert keys.find(key + "x") is None
    listed = keys.list()
    assert [k.name for k in listed] == ["alice"] and listed[0].limits.models == ("a", "b")
    with pytest.raises(InvalidRequest):
        keys.create("alice")
    with pytest.raises(InvalidRequest):
        keys.create("bad name!")
    keys.revoke("alice")
    assert keys.find(key) is None and keys.list() == []
    assert [k.name for k in keys.list(include_revoked=True)] == ["alice"]
    with pytest.raises(InvalidRequest):
        keys.revoke("alice")
    _, again = keys.create("alice")  # a revoked key's name can be used again, with a new key
    assert again != key and keys.find(again) is not None


def test_named_keys_and_the_single_key_both_open_the_server(engine: Engine) -> None:
    keys = ApiKeys(engine.store)
    with serving(engine, keys=keys, api_key="the-old-key") as server:
        models = server.url + "/models"
        assert httpx.get(models).status_code == 401  # the single key is set: a key is needed
        _, key = keys.create("bob")  # created while the server runs: takes effect at once
        assert httpx.get(models, headers=bearer(key)).status_code == 200
        assert httpx.get(models, headers=bearer("the-old-key")).status_code == 200
        assert httpx.get(models, headers={"x-api-key": key}).status_code == 200
        refused = httpx.get(models, headers=bearer("ink-guess"))
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
        assert httpx.get(models).status_code == 401
        keys.revoke("bob")
        assert httpx.get(models, headers=bearer(key)).status_code == 401


def test_a_server_with_no_keys_stays_open_on_loopback(engine: Engine) -> None:
    with serving(engine, keys=ApiKeys(engine.store)) as server:
        assert httpx.get(server.url + "/models").status_code == 200


def test_no_rate_limit_unless_one_is_set(engine: Engine) -> None:
    keys = ApiKeys(engine.store)
    _, free = keys.create("free")
    _, limited = keys.create("limited", KeyLimits(requests_per_minute=3))
    with serving(engine, keys=keys) as server:
        statuses = [httpx.get(server.url + "/models", headers=bearer(free)).status_code for _ in range(40)]
        assert statuses == [200] * 40
        statuses = [httpx.get(server.url + "/models", headers=bearer(limited)).status_code for _ in range(3)]
        assert statuses == [200] * 3
        refused = httpx.get(server.url + "/models", headers=bearer(limited))
        assert refused.status_code == 429
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        error = refused.json()["error"]
        assert error["code"] == "rate_limit_exceeded" and error["type"] == "rate_limit_error"
        # The Messages API gets its own error shape, the official SDK sees a RateLimitError.
        claude = anthropic.Anthropic(base_url=server.url.removesuffix("/v1"), api_key=limited, max_retries=0)
        with pytest.raises(anthropic.RateLimitError):
            claude.messages.create(model=STARTER, max_tokens=4, messages=[{"role": "user", "content": "Hi"}])
        assert keys.get("limited").requests == 3 and keys.get("free").requests == 40


def test_a_key_limited_to_models_may_use_only_those(engine: Engine) -> None:
    keys = ApiKeys(engine.store)
    _, narrow = keys.create("narrow", KeyLimits(models=("some-other-model",)))
    _, starter = keys.create("starter", KeyLimits(models=(STARTER,)))
    with serving(engine, keys=keys) as server:
        refused = httpx.post(server.url + "/chat/completions", json=chat_body(), headers=bearer(narrow))
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "model_not_allowed"
        allowed = httpx.post(server.url + "/chat/completions", json=chat_body(), headers=bearer(starter), timeout=300)
        assert allowed.status_code == 200, allowed.text


def test_streams_per_key_are_limited_counted_and_named_as_the_client(engine: Engine) -> None:
    keys = ApiKeys(engine.store)
    _, key = keys.create("carol", KeyLimits(max_streams=1))
    clients: list[str] = []
    engine.scheduler.add_finished_observer(lambda job, _finished: clients.append(job.client))
    with serving(engine, keys=keys) as server:
        client = openai.OpenAI(base_url=server.url, api_key=key, max_retries=0, timeout=300)
        stream = client.chat.completions.create(**chat_body("Count to fifty.", max_tokens=64), stream=True)
        first = next(iter(stream))
        assert first is not None
        assert server.active_streams_by_key() == {"carol": 1}
        with pytest.raises(openai.RateLimitError) as refused:
            client.chat.completions.create(**chat_body())
        assert refused.value.code == "too_many_streams"
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        assert text
        # The server lets go of the stream once its body is sent, a moment after the client read it.
        wait_until(lambda: server.active_streams_by_key() == {})
        assert client.chat.completions.create(**chat_body()).choices[0].message.content is not None
        wait_until(lambda: len(clients) == 2)  # observers run on the worker, after the answer's last event
    assert clients == ["api:carol", "api:carol"]


def test_revoking_a_key_ends_its_open_stream(engine: Engine) -> None:
    keys = ApiKeys(engine.store)
    _, key = keys.create("dave")
    with serving(engine, keys=keys) as server:
        # SmolLM2's end tokens banned, so the answer runs until something stops it.
        body = chat_body("Count from 1 to 1000.", max_tokens=900, stream=True, logit_bias={"0": -100, "2": -100})
        lines: list[str] = []
        with httpx.stream("POST", server.url + "/chat/completions", json=body, headers=bearer(key), timeout=300) as r:
            assert r.status_code == 200
            iterator = r.iter_lines()
            lines.append(next(line for line in iterator if line.startswith("data:")))
            threading.Thread(target=keys.revoke, args=("dave",)).start()
            lines.extend(iterator)
        events = [json.loads(line[5:]) for line in lines if line.startswith("data: {")]
        assert events[-1]["error"]["code"] == "invalid_api_key"
        assert "revoked" in events[-1]["error"]["message"]
        assert sum(1 for e in events if "choices" in e) < 900  # cut short, not run to the end
        deadline = time.monotonic() + 30
        while engine.scheduler.queue_depth or server.active_requests:  # the job was cancelled
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert httpx.get(server.url + "/models", headers=bearer(key)).status_code == 401


def test_a_network_address_needs_a_key_of_some_kind(engine: Engine) -> None:
    keys = ApiKeys(engine.store)
    with pytest.raises(ServerError, match="without an API key"):
        ApiServer(engine, host="0.0.0.0", port=0, keys=keys).start()
    _, key = keys.create("erin")
    with serving(engine, host="0.0.0.0", keys=keys) as server:
        assert httpx.get(server.url + "/models").status_code == 401
        assert httpx.get(server.url + "/models", headers=bearer(key)).status_code == 200


def test_revoking_every_key_never_opens_a_network_server(engine: Engine) -> None:
    keys = ApiKeys(engine.store)
    _, key = keys.create("frank")
    with serving(engine, host="0.0.0.0", keys=keys) as server:
        keys.revoke("frank")
        assert httpx.get(server.url + "/models").status_code == 401
        refused = httpx.get(server.url + "/models", headers=bearer(key))
        assert refused.status_code == 401 and "revoked" in refused.json()["error"]["message"]


def test_the_keys_command_creates_lists_and_revokes(home, capsys) -> None:
    from inglenook.cli import main

    assert main(["keys", "create", "gina", "--rpm", "30", "--max-streams", "2", "--models", "a,b"]) == 0
    created = capsys.readouterr().out
    key = next(word for word in created.split() if word.startswith("ink-"))
    assert main(["keys", "list"]) == 0
    listed = capsys.readouterr().out
    assert "gina" in listed and "30" in listed and "a,b" in listed and key not in listed
    assert main(["keys", "create", "gina"]) == 1  # the name is taken: one line, no traceback
    assert "already exists" in capsys.readouterr().err
    assert main(["keys", "revoke", "gina"]) == 0
    assert main(["keys", "list"]) == 0
    assert "No named keys" in capsys.readouterr().out
