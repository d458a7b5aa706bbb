"""A recording sent to the API as a file part (issue 42, item 4): transcribed on the speech
lane into the same document a chat in the window gets, headed by times, with the citation by
time offered in its block; the block is the same for the same recording, so a second request
reads it from the prompt cache. The official ``openai`` SDK against a real server, the
starter model and a recording spoken at test time by the starter voice."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from inglenook.engine.core.engine import Engine

from ..api.conftest import STARTER, serving
from .conftest import SENTENCES
from .recordings import speak_recording


@pytest.fixture
def engine(home, smollm2_path) -> Iterator[Engine]:  # smollm2_path marks the test `llama`
    engine = Engine()
    engine.update_settings(context_size=2048)
    yield engine
    engine.close()


@pytest.fixture
def recording(speech_room, tmp_path: Path) -> Path:
    return speak_recording(speech_room, tmp_path / "standup.wav", SENTENCES[:3], gap_s=1.0)


def test_the_document_a_file_part_becomes(engine: Engine, recording: Path) -> None:
    from inglenook.engine.api.shared import file_part, hoist_documents
    from inglenook.engine.base import ChatMessage
    from inglenook.engine.documents import documents_block

    data = base64.b64encode(recording.read_bytes()).decode()
    message = ChatMessage.model_validate({"role": "user", "content": [
        file_part("standup.wav", f"data:audio/wav;base64,{data}").model_dump(), {"type": "text", "text": "When?"}]})
    rest, [document] = hoist_documents([message], lambda path, stop: engine.speech.transcribe(path, cancelled=stop))
    assert document.kind == "audio" and document.name == "standup.wav" and document.text.startswith("## 00:00\n\n")
    assert "[standup.wav, 00:00]" in documents_block([document])
    assert [part.type for part in rest[0].content] == ["text"]
    assert not (engine.paths.data / "recordings").exists()  # an API request's recording is not kept


def test_a_recording_in_a_chat_request_is_read_and_cached(engine: Engine, recording: Path) -> None:
    data = base64.b64encode(recording.read_bytes()).decode()

    def ask(question: str) -> openai.types.CompletionUsage:
        answer = client.chat.completions.create(model=STARTER, temperature=0, max_tokens=4, messages=[
            {"role": "user", "content": [
                {"type": "file", "file": {"filename": "standup.wav", "file_data": f"data:audio/wav;base64,{data}"}},
                {"type": "text", "text": question}]}])
        assert answer.usage is not None
        return answer.usage

    with serving(engine) as server:
        client = openai.OpenAI(base_url=server.url, api_key="not-needed", max_retries=0, timeout=300)
        first = ask("What did they say about the weather?")
        assert first.prompt_tokens > 60  # the transcript was read with the question
        second = ask("Where is the book?")
        assert second.prompt_tokens_details is not None and second.prompt_tokens_details.cached_tokens >= 32
        broken = {"type": "file", "file": {"filename": "standup.wav", "file_data": base64.b64encode(b"RIFF junk").decode()}}
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model=STARTER, max_tokens=2, messages=[
                {"role": "user", "content": [broken, {"type": "text", "text": "Hi"}]}])
