"""The routing alias ``auto`` through the real server: a short prompt without tools is answered
by the small model (SmolLM2, the smallest installed chat model), a long one or one with tools by
the large one (gemma-3-270m here, a stand-in); the response's model and the usage table say which."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest

from inglenook.engine.core import Engine
from inglenook.engine.errors import InvalidRequest
from inglenook.engine.registry import ModelRecord
from inglenook.engine.server import ApiServer
from inglenook.engine.aliases import validated_name
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
