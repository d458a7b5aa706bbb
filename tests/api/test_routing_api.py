"""The routing alias ``auto`` through the real server: a short prompt without tools is answered
by the small model (SmolLM2, the smallest installed chat model), a long one or one with tools by
the large one (gemma-3-270m here, a stand-in); the response's model and the usage table say which."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest

from inglenook.engine.api.server import ApiServer
from inglenook.engine.base.errors import InvalidRequest
from inglenook.engine.base.model_record import ModelRecord
from inglenook.engine.core.engine import Engine
from inglenook.engine.models.aliases import validated_name
from tests.api.conftest import STARTER

pytestmark = pytest.mark.api

WEATHER = {"type": "function", "function": {"name": "weather", "description": "The weather in a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}


@pytest.fixture
def large(engine: Engine, gemma_path: Path) -> ModelRecord:
    record = engine.registry.register_file(gemma_path)
    engine.update_settings(route_large_model=record.id, route_short_prompt_chars=200)
    return record


def _ask(client: openai.OpenAI, content: str, **extra: object) -> str:
    answer = client.chat.completions.create(model="auto", messages=[{"role": "user", "content": content}],
                                            max_tokens=3, temperature=0, **extra)
    return answer.model


def test_short_prompts_go_to_the_small_model_and_others_to_the_large(
        engine: Engine, server: ApiServer, client: openai.OpenAI, large: ModelRecord) -> None:
    assert _ask(client, "Hi!") == STARTER  # smallest chat model (gemma-3-270m base has no chat template)
    assert _ask(client, "Tell me about the sea. " * 20) == large.id  # 460 characters > 200
    assert _ask(client, "Hi!", tools=[WEATHER]) == large.id  # tools need the large model
    assert engine.usage.flush()
    body = httpx.get(f"{server.url}/usage", params={"days": 1}, timeout=60).json()
    requests = {row["model"]: row["requests"] for row in body["by_model"]}
    assert requests == {STARTER: 1, large.id: 2}


def test_a_named_small_model_and_the_alias_name_is_reserved(
        engine: Engine, client: openai.OpenAI, large: ModelRecord) -> None:
    engine.update_settings(route_small_model=large.id, route_large_model=STARTER)
    assert _ask(client, "Hi!") == large.id
    assert _ask(client, "x" * 300) == STARTER
    with pytest.raises(InvalidRequest):
        validated_name("AUTO")


def _auto_cards(server: ApiServer) -> list[dict]:
    listed = httpx.get(f"{server.url}/models", timeout=60)
    assert listed.status_code == 200, listed.text
    return [card for card in listed.json()["data"] if card["id"] == "auto"]


def test_auto_is_listed_in_models_with_its_two_routes_once_it_has_a_choice(
        engine: Engine, server: ApiServer, client: openai.OpenAI, gemma_path: Path) -> None:
    assert _auto_cards(server) == []  # one chat model is small and large at once: nothing to route
    record = engine.registry.register_file(gemma_path)
    engine.update_settings(route_large_model=record.id, route_short_prompt_chars=200)
    [card] = _auto_cards(server)
    assert card["routes"] == {"small": STARTER, "large": record.id, "short_prompt_chars": 200}
    assert card["object"] == "model" and card["context_length"] == record.context_length  # sized by the large model
    assert "alias_of" not in card and "aliases" not in card
    assert [m.id for m in client.models.list()].count("auto") == 1  # the SDK reads it as a model
