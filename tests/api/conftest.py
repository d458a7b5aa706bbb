"""A real API server on a free loopback port, over a real engine with the starter model."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from inglenook.engine.api.server import ApiServer
from inglenook.engine.core.engine import Engine

pytestmark = pytest.mark.api

STARTER = "smollm2-135m-instruct:q4_1"


@pytest.fixture
def engine(home, smollm2_path) -> Iterator[Engine]:  # `home` sets INGLENOOK_HOME
    engine = Engine()
    # A small context loads fast on two cores and is easy to overflow on purpose.
    engine.update_settings(context_size=1024)
    yield engine
    engine.close()


@contextlib.contextmanager
def serving(engine: Engine, **options: Any) -> Iterator[ApiServer]:
    server = ApiServer(engine, port=0, **options)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def server(engine: Engine) -> Iterator[ApiServer]:
    with serving(engine) as server:
        yield server


@pytest.fixture
def client(server: ApiServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key="not-needed", max_retries=0, timeout=300)


def chat_body(content: str = "Say hello.", **extra: Any) -> dict[str, Any]:
    return {"model": STARTER, "messages": [{"role": "user", "content": content}], "temperature": 0, "max_tokens": 4, **extra}
