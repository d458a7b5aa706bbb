"""``/v1/models`` and ``/v1/models/{id}`` for every kind of model (issue 42, item 5): each card
says its ``kind``; a speech model is retrieved by its id like a GGUF, and an unknown id is 404
in OpenAI's error shape (the SDK raises ``NotFoundError``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from inglenook.engine.core.engine import Engine
from tests.gguf_writer import write_gguf

from ..api.conftest import serving


@pytest.fixture
def engine(home, tmp_path: Path) -> Iterator[Engine]:  # `home` sets INGLENOOK_HOME
    engine = Engine(scan=False)
    engine.registry.register_file(write_gguf(tmp_path / "writer-f32.gguf", {}))
    engine.registry.register_file(write_gguf(tmp_path / "embedder-f32.gguf", {
        "general.architecture": "bert", "bert.context_length": 512, "bert.block_count": 1, "bert.pooling_type": 1,
    }))
    yield engine
    engine.close()


def test_every_card_has_its_kind_and_speech_ids_are_retrieved(engine: Engine) -> None:
    with serving(engine) as server:
        client = openai.OpenAI(base_url=server.url, api_key="not-needed", max_retries=0, timeout=120)
        kinds = {m.id: m.model_extra["kind"] for m in client.models.list()}
        assert kinds["writer:f32"] == "text-generation" and kinds["embedder:f32"] == "embedding"
        assert kinds["whisper-tiny.en"] == "speech-to-text" and kinds["en_US-joe-medium"] == "text-to-speech"

        whisper = client.models.retrieve("whisper-tiny.en")
        assert whisper.id == "whisper-tiny.en" and whisper.object == "model" and whisper.owned_by == "local"
        assert whisper.model_extra["kind"] == "speech-to-text" and whisper.model_extra["engine"] == "faster-whisper"
        assert client.models.retrieve("en_US-joe-medium").model_extra["kind"] == "text-to-speech"
        assert client.models.retrieve("writer:f32").model_extra["kind"] == "text-generation"

        one = client.models.retrieve("whisper-1")  # OpenAI's name: the installed model it stands for
        assert one.id == "whisper-1" and one.model_extra["alias_of"] == "whisper-tiny.en"
        assert client.models.retrieve("tts-1").model_extra["alias_of"] == "en_US-joe-medium"

        with pytest.raises(openai.NotFoundError):
            client.models.retrieve("whisper-huge-nowhere")
        raw = httpx.get(f"{server.url}/models/whisper-huge-nowhere", timeout=30)
        assert raw.status_code == 404
        error = raw.json()["error"]
        assert set(error) >= {"message", "type", "code"} and "whisper-huge-nowhere" in error["message"]
