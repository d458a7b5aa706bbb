"""Embeddings of inputs longer than the prefill chunk (issue 45: refused past 512 tokens):
through the official openai SDK on a real server, an input of about 1,500 tokens is embedded
whole in the model's 2,048-token context; one past the context is a 400 that says the limit."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from inglenook.engine.api.server import ApiServer
from inglenook.engine.core.engine import Engine

from .conftest import STARTER, serving

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def long_server(home: Path, smollm2_path: Path) -> Iterator[ApiServer]:
    engine = Engine()
    engine.update_settings(context_size=2048)
    try:
        with serving(engine) as server:
            yield server
    finally:
        engine.close()


def test_an_input_longer_than_the_prefill_chunk_is_embedded_whole(long_server: ApiServer) -> None:
    client = openai.OpenAI(base_url=long_server.url, api_key="x", max_retries=0, timeout=300)
    text = "The river bends past the mill and the old stone bridge. " * 110  # ~1,400 tokens
    result = client.embeddings.create(model=STARTER, input=text)
    assert result.usage.prompt_tokens > 1000
    vector = result.data[0].embedding
    assert math.isclose(math.sqrt(sum(v * v for v in vector)), 1.0, rel_tol=1e-3)

    with pytest.raises(openai.BadRequestError, match="2048 tokens of this model's context"):
        client.embeddings.create(model=STARTER, input=text * 2)
