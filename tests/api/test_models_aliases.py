"""Issue 13, point 6: the model listing's fields, aliases, and the context each model runs with.

A real server on loopback with the official ``openai`` client; models are the real starter
and Gemma 3 GGUFs, plus small synthetic GGUFs (never loaded) whose headers carry a tools
template or an embedding architecture.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest

from inglenook.engine.base.model_record import ModelRecord
from inglenook.engine.core.engine import Engine
from tests.api.conftest import STARTER, serving
from tests.gguf_writer import write_gguf

pytestmark = pytest.mark.api

HELLO = [{"role": "user", "content": "Say hello."}]
TOOLS_TEMPLATE = "{% if tools %}{{ tools | tojson }}{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}"


@pytest.fixture
def gemma(engine: Engine, gemma_path: Path) -> ModelRecord:
    return engine.registry.register_file(gemma_path)


def _client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key="not-needed", max_retries=0, timeout=300)


def _synthetic(engine: Engine, tmp_path: Path, name: str, **metadata: object) -> ModelRecord:
    return engine.registry.register_file(write_gguf(tmp_path / f"{name}.gguf", metadata))


def test_the_listing_has_context_capabilities_and_the_context_in_use(engine: Engine, gemma: ModelRecord,
                                                                    tmp_path: Path) -> None:
    tooled = _synthetic(engine, tmp_path, "tooled-f32", **{"tokenizer.chat_template": TOOLS_TEMPLATE})
    embedder = _synthetic(engine, tmp_path, "embedder-f32", **{
        "general.architecture": "bert", "bert.context_length": 512, "bert.block_count": 1, "bert.pooling_type": 1,
    })
    broken = _synthetic(engine, tmp_path, "broken-f32")
    engine.registry.mark_problem(broken.id, "llama.cpp could not load it")
    engine.update_settings(model_context={gemma.id: 1536})
    with serving(engine) as server:
        client = _client(server)
        client.chat.completions.create(model=gemma.id, messages=HELLO, max_tokens=2)  # loads just in time
        cards = {m.id: m for m in client.models.list()}
        assert broken.id not in cards  # llama.cpp refused it: not offered to clients
        loaded, idle = cards[gemma.id].model_extra, cards[STARTER].model_extra
        assert cards[gemma.id].owned_by == "local" and cards[gemma.id].created == int(gemma.added_at)
        assert loaded["context_length"] == 32768 and loaded["context_setting"] == 1536
        assert loaded["loaded"] is True and loaded["context_in_use"] == 1536
        assert idle["context_length"] == 8192 and idle["context_setting"] == 1024
        assert idle["loaded"] is False and idle["context_in_use"] is None
        assert idle["capabilities"] == ["completion"]  # SmolLM2's template renders no tools
        assert cards[tooled.id].model_extra["capabilities"] == ["completion", "tools"]
        assert cards[embedder.id].model_extra["capabilities"] == ["embedding"]
        one = client.models.retrieve(gemma.id)
        assert one.model_extra["context_in_use"] == 1536
        flagged = client.models.retrieve(broken.id)  # asked for by id, it is shown with its problem
        assert flagged.model_extra["problem"] == "llama.cpp could not load it"


def test_auto_context_is_the_trained_context_when_memory_allows(engine: Engine) -> None:
    engine.update_settings(context_size=0)  # "auto", the default of a fresh installation
    with serving(engine) as server:
        client = _client(server)
        assert client.models.retrieve(STARTER).model_extra["context_setting"] == "auto"
        client.chat.completions.create(model=STARTER, messages=HELLO, max_tokens=2)
        # SmolLM2 was trained for 8192 tokens; 4 sequences of it need ~0.7 GiB of KV cache.
        assert client.models.retrieve(STARTER).model_extra["context_in_use"] == 8192


def test_an_alias_answers_from_its_model_and_unknown_names_keep_the_default(engine: Engine,
                                                                           gemma: ModelRecord) -> None:
    engine.update_settings(model_aliases={"claude-sonnet-4-5": gemma.id, "fast": STARTER})
    with serving(engine) as server:
        client = _client(server)
        listed = {m.id: m.model_extra for m in client.models.list()}
        assert listed["claude-sonnet-4-5"]["alias_of"] == gemma.id
        assert listed[gemma.id]["aliases"] == ["claude-sonnet-4-5"]
        assert client.models.retrieve("fast").model_extra["alias_of"] == STARTER
        aliased = client.chat.completions.create(model="Claude-Sonnet-4-5", messages=HELLO, max_tokens=2)
        assert aliased.model == gemma.id
        unknown = client.chat.completions.create(model="gpt-5-codex", messages=HELLO, max_tokens=2)
        assert unknown.model == STARTER  # no alias: the default model, as before
    with serving(engine, strict_model_names=True) as server:
        client = _client(server)
        assert client.chat.completions.create(model="fast", messages=HELLO, max_tokens=2).model == STARTER
        with pytest.raises(openai.NotFoundError) as caught:
            client.chat.completions.create(model="gpt-5-codex", messages=HELLO, max_tokens=2)
        assert caught.value.code == "model_not_found"
        with pytest.raises(openai.NotFoundError):
            client.models.retrieve("gpt-5-codex")


def test_an_overflow_names_the_prompt_and_the_per_model_context(engine: Engine) -> None:
    engine.update_settings(model_context={STARTER: 512})
    with serving(engine) as server:
        with pytest.raises(openai.BadRequestError) as caught:
            _client(server).chat.completions.create(
                model="fast-or-not", messages=[{"role": "user", "content": "word " * 700}], max_tokens=4,
            )
    assert caught.value.code == "context_length_exceeded"
    message = caught.value.body["message"]  # type: ignore[index]
    assert "512" in message and any(int(word) > 512 for word in message.split() if word.isdigit())


def test_the_other_front_ends_name_both_numbers_too(engine: Engine) -> None:
    engine.update_settings(model_context={STARTER: 512}, model_aliases={"claude-sonnet-4-5": STARTER})
    long_text = "word " * 700
    with serving(engine) as server:
        root = server.url.removesuffix("/v1")
        messages = httpx.post(root + "/v1/messages", timeout=300, json={
            "model": "claude-sonnet-4-5", "max_tokens": 4, "messages": [{"role": "user", "content": long_text}]})
        responses = httpx.post(server.url + "/responses", timeout=300, json={"model": "gpt-5-codex", "input": long_text})
    assert messages.status_code == 400 and messages.json()["error"]["type"] == "invalid_request_error"
    assert responses.status_code == 400 and responses.json()["error"]["code"] == "context_length_exceeded"
    for message in (messages.json()["error"]["message"], responses.json()["error"]["message"]):
        assert "512" in message and any(int(word) > 512 for word in message.split() if word.isdigit()), message
