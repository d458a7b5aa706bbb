"""The context a person asks for is served past the model's training context, with a warning;
"auto" stays within it and an over-long prompt gets the 400 naming both numbers (issue 33).

SmolLM2 was trained for 8,192 tokens; a copy whose header says 256 makes a prompt past the
training context a few hundred tokens, quick to read on two cores.
"""

from __future__ import annotations

import logging
import re
import shutil
import struct
from pathlib import Path

import httpx
import pytest

from inglenook.engine.api.server import ApiServer
from inglenook.engine.base import ModelRecord
from inglenook.engine.core.engine import Engine
from tests.api.conftest import serving

TRAINED = 256
KEY = b"llama.context_length"


@pytest.fixture(scope="module")
def short_trained_path(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2 with ``llama.context_length`` rewritten in place (a u32 after its key)."""
    copy = tmp_path_factory.mktemp("short-trained") / "smollm2-trained-256.gguf"
    shutil.copyfile(smollm2_path, copy)
    with copy.open("r+b") as f:
        head = f.read(1 << 20)
        at = head.index(KEY) + len(KEY)
        value_type, value = struct.unpack_from("<II", head, at)
        assert (value_type, value) == (4, 8192), "expected a u32 context length of 8,192"
        f.seek(at + 4)
        f.write(struct.pack("<I", TRAINED))
    return copy


@pytest.fixture
def short_trained(engine: Engine, short_trained_path: Path) -> ModelRecord:
    return engine.registry.register_file(short_trained_path)


def _ask(server: ApiServer, model_id: str, words: int) -> httpx.Response:
    body = {"model": model_id, "messages": [{"role": "user", "content": "word " * words}],
            "max_tokens": 2, "temperature": 0}
    return httpx.post(f"{server.url}/chat/completions", json=body, timeout=300)


def _card(server: ApiServer, model_id: str) -> dict:
    return httpx.get(f"{server.url}/models/{model_id}", timeout=60).json()


def test_an_explicit_context_past_training_is_served_with_a_warning(
    engine: Engine, short_trained: ModelRecord, caplog: pytest.LogCaptureFixture,
) -> None:
    engine.update_settings(model_context={short_trained.id: 2 * TRAINED})
    with serving(engine) as server, caplog.at_level(logging.WARNING):
        reply = _ask(server, short_trained.id, 300)
        assert reply.status_code == 200, reply.text
        assert reply.json()["usage"]["prompt_tokens"] > TRAINED
        assert _card(server, short_trained.id)["context_in_use"] == 2 * TRAINED
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(f"trained for {TRAINED}" in m and f"{2 * TRAINED}" in m for m in warned), warned


def test_the_automatic_context_stays_within_training(engine: Engine, short_trained: ModelRecord) -> None:
    engine.update_settings(context_size=0, model_context={})  # "auto"
    with serving(engine) as server:
        reply = _ask(server, short_trained.id, 300)
        assert reply.status_code == 400, reply.text
        message = reply.json()["error"]["message"]
        numbers = [int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*", message)]
        assert TRAINED in numbers and any(n > TRAINED for n in numbers), message  # the context and the prompt
        assert _card(server, short_trained.id)["context_in_use"] == TRAINED
