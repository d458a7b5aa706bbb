"""``/v1/audio/*`` through the official ``openai`` SDK against a real server on a real engine:
the ten sentences in every response_format, streaming both ways, hostile requests, and a
text chat stream that keeps flowing while a transcription runs."""

from __future__ import annotations

import base64
import io
import json
import threading
import wave
from collections.abc import Iterator

import httpx
import openai
import pytest

from inglenook.engine.api.server import ApiServer
from inglenook.engine.core.engine import Engine

from ..api.conftest import serving
from .conftest import MAX_WER, SENTENCES, word_error_rate

# Not marked `api`: that mark means "runs llama.cpp" to tests/conftest.py, and only the last
# test here does (its smollm2_path fixture marks it `llama`, so test-portable runs it again).


@pytest.fixture
def engine(home) -> Iterator[Engine]:  # `home` sets INGLENOOK_HOME
    engine = Engine(scan=False)
    yield engine
    engine.close()


@pytest.fixture
def server(engine: Engine) -> Iterator[ApiServer]:
    with serving(engine) as server:
        yield server


@pytest.fixture
def client(server: ApiServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key="not-needed", max_retries=0, timeout=300)


def test_models_lists_speech_models_with_their_kind(client: openai.OpenAI) -> None:
    kinds = {m.id: getattr(m, "kind", None) for m in client.models.list().data}
    assert kinds["whisper-tiny.en"] == "speech-to-text"
    assert kinds["en_US-joe-medium"] == "text-to-speech"


def test_ten_sentences_round_trip_through_the_api(client: openai.OpenAI, tmp_path) -> None:
    heard = []
    for i, sentence in enumerate(SENTENCES):
        target = tmp_path / f"s{i}.wav"
        with client.audio.speech.with_streaming_response.create(
                model="tts-1", voice="alloy", input=sentence, response_format="wav") as response:
            response.stream_to_file(target)
        with target.open("rb") as audio:
            heard.append(client.audio.transcriptions.create(model="whisper-1", file=audio).text)
    wer = word_error_rate(list(SENTENCES), heard)
    print(f"API WER {wer:.3f}")
    assert wer <= MAX_WER, list(zip(SENTENCES, heard))


def test_every_transcription_format(client: openai.OpenAI, spoken) -> None:
    data = spoken[0].read_bytes()
    as_json = client.audio.transcriptions.create(model="whisper-1", file=("a.wav", data), response_format="json")
    assert word_error_rate([SENTENCES[0]], [as_json.text]) <= MAX_WER
    text = client.audio.transcriptions.create(model="whisper-1", file=("a.wav", data), response_format="text")
    assert isinstance(text, str) and word_error_rate([SENTENCES[0]], [text]) <= MAX_WER
    srt = client.audio.transcriptions.create(model="whisper-1", file=("a.wav", data), response_format="srt")
    assert isinstance(srt, str) and srt.startswith("1\n00:00:00,000 --> ")
    vtt = client.audio.transcriptions.create(model="whisper-1", file=("a.wav", data), response_format="vtt")
    assert isinstance(vtt, str) and vtt.startswith("WEBVTT")
    verbose = client.audio.transcriptions.create(
        model="whisper-1", file=("a.wav", data), response_format="verbose_json",
        timestamp_granularities=["word", "segment"])
    assert verbose.language == "english" and verbose.duration > 1
    assert verbose.words and verbose.words[0].word.lower() == "the"
    assert verbose.segments and verbose.segments[0].start == 0


def test_translation_of_english_is_its_transcript(client: openai.OpenAI, spoken) -> None:
    result = client.audio.translations.create(model="whisper-1", file=("a.wav", spoken[3].read_bytes()))
    assert word_error_rate([SENTENCES[3]], [result.text]) <= MAX_WER


def test_streamed_transcription(client: openai.OpenAI, spoken) -> None:
    events = list(client.audio.transcriptions.create(
        model="whisper-1", file=("a.wav", spoken[4].read_bytes()), stream=True))
    kinds = [e.type for e in events]
    assert kinds[-1] == "transcript.text.done" and kinds.count("transcript.text.delta") >= 1
    deltas = "".join(e.delta for e in events if e.type == "transcript.text.delta")
    assert deltas.strip() == events[-1].text
    assert word_error_rate([SENTENCES[4]], [events[-1].text]) <= MAX_WER


@pytest.mark.parametrize("fmt", ["wav", "pcm", "flac", "mp3", "opus", "aac"])
def test_speech_in_every_format_is_heard_back(client: openai.OpenAI, fmt: str) -> None:
    sentence = SENTENCES[5]
    speech = client.audio.speech.create(model="tts-1", voice="en_US-joe-medium", input=sentence,
                                        response_format=fmt)
    audio = speech.content
    if fmt == "pcm":  # raw: 16-bit mono at the voice's rate, wrapped here to send it back
        buffer = io.BytesIO()
        with wave.open(buffer, "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(22_050)
            out.writeframes(audio)
        audio = buffer.getvalue()
    heard = client.audio.transcriptions.create(model="whisper-1", file=(f"speech.{fmt}", audio)).text
    assert word_error_rate([sentence], [heard]) <= MAX_WER, heard


def test_speech_as_server_sent_events(server: ApiServer) -> None:
    body = {"model": "tts-1", "voice": "nova", "input": "Hello there. How are you today?",
            "response_format": "pcm", "stream_format": "sse"}
    events = []
    with httpx.stream("POST", f"{server.url}/audio/speech", json=body, timeout=120) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
    assert [e["type"] for e in events][-1] == "speech.audio.done"
    audio = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    assert len(audio) > 22_050  # more than half a second of 16-bit speech


def _error(response: httpx.Response) -> dict:
    return response.json()["error"]


def test_hostile_transcription_requests(server: ApiServer, spoken) -> None:
    url = f"{server.url}/audio/transcriptions"
    empty = httpx.post(url, files={"file": ("a.wav", b"")}, data={"model": "whisper-1"})
    assert empty.status_code == 400 and "empty" in _error(empty)["message"]
    not_audio = httpx.post(url, files={"file": ("a.mp3", b"hello " * 100)}, data={"model": "whisper-1"})
    assert not_audio.status_code == 400 and _error(not_audio)["param"] == "file"
    truncated = httpx.post(url, files={"file": ("a.wav", spoken[0].read_bytes()[:44])})
    assert truncated.status_code == 400
    misnamed = httpx.post(url, files={"file": ("notes.txt", spoken[0].read_bytes())}, timeout=120)
    assert misnamed.status_code == 200 and word_error_rate([SENTENCES[0]], [misnamed.json()["text"]]) <= MAX_WER
    no_file = httpx.post(url, data={"model": "whisper-1"})
    assert no_file.status_code == 400 and _error(no_file)["param"] == "file"
    unknown = httpx.post(url, files={"file": ("a.wav", spoken[0].read_bytes())}, data={"model": "whisper-huge"})
    assert unknown.status_code == 404 and _error(unknown)["type"] == "invalid_request_error"
    bad_format = httpx.post(url, files={"file": ("a.wav", spoken[0].read_bytes())}, data={"response_format": "doc"})
    assert bad_format.status_code == 400 and _error(bad_format)["param"] == "response_format"
    malformed = httpx.post(url, content=b"--xyz\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc",
                           headers={"content-type": "multipart/form-data; boundary=xyz"})
    assert malformed.status_code == 400 and "error" in malformed.json()
    no_boundary = httpx.post(url, content=b"abc", headers={"content-type": "multipart/form-data"})
    assert no_boundary.status_code == 400


def test_a_huge_upload_is_refused_before_it_is_read(engine: Engine) -> None:
    """A declared 500 MB upload is answered 413 from its headers alone: not a byte of the
    body is sent here, and the answer still comes."""
    import socket
    from urllib.parse import urlsplit

    with serving(engine) as server:
        where = urlsplit(server.url)
        with socket.create_connection((where.hostname, where.port), timeout=60) as sock:
            sock.sendall(
                b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: multipart/form-data; boundary=xyz\r\n"
                + f"Content-Length: {500 * 1024 * 1024}\r\n\r\n".encode())
            answer = b""
            while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
                piece = sock.recv(65_536)
                if not piece:
                    break
                answer += piece
    status_line, _, rest = answer.partition(b"\r\n")
    assert b" 413 " in status_line, answer
    assert json.loads(rest.partition(b"\r\n\r\n")[2])["error"]["code"] == "request_too_large"


def test_hostile_speech_requests(server: ApiServer) -> None:
    url = f"{server.url}/audio/speech"
    cases = [
        ({"model": "tts-1", "voice": "nobody", "input": "hi"}, 400, "voice"),
        ({"model": "tts-9", "voice": "alloy", "input": "hi"}, 404, None),
        ({"model": "tts-1", "voice": "alloy", "input": "x" * 4097}, 400, "input"),
        ({"model": "tts-1", "voice": "alloy", "input": ""}, 400, "input"),
        ({"model": "tts-1", "voice": "alloy", "input": "hi", "speed": 9}, 400, "speed"),
        ({"model": "tts-1", "voice": "alloy", "input": "hi", "response_format": "midi"}, 400, "response_format"),
        ({"model": "tts-1", "voice": "alloy", "input": "hi", "stream_format": "video"}, 400, "stream_format"),
    ]
    for body, status, param in cases:
        response = httpx.post(url, json=body, timeout=60)
        assert response.status_code == status, (body, response.text)
        if param:
            assert _error(response)["param"] == param, response.text


def test_the_audio_routes_keep_the_key_rule(engine: Engine, spoken) -> None:
    with serving(engine, api_key="secret") as server:
        refused = httpx.post(f"{server.url}/audio/transcriptions", files={"file": ("a.wav", spoken[0].read_bytes())})
        assert refused.status_code == 401
        speech = httpx.post(f"{server.url}/audio/speech", json={"input": "hi", "voice": "alloy"})
        assert speech.status_code == 401
        keyed = openai.OpenAI(base_url=server.url, api_key="secret", max_retries=0)
        assert keyed.audio.transcriptions.create(model="whisper-1", file=("a.wav", spoken[0].read_bytes())).text


def test_a_chat_stream_keeps_flowing_while_a_transcription_runs(home, smollm2_path, tmp_path) -> None:
    """Chunks of a text stream arrive while a long transcription is still running: the
    transcription is on the speech lane, not in the scheduler's step loop."""
    engine = Engine()
    try:
        with serving(engine) as server:
            long_audio = tmp_path / "long.wav"
            _long_speech(engine, long_audio)
            client = openai.OpenAI(base_url=server.url, api_key="x", max_retries=0, timeout=600)
            # Load the chat model first, so the stream's chunks are decode steps, not the load.
            client.chat.completions.create(model="smollm2-135m-instruct:q4_1", max_tokens=1,
                                           messages=[{"role": "user", "content": "Hi"}])
            done = threading.Event()
            result: dict = {}

            def transcribe() -> None:
                with long_audio.open("rb") as audio:
                    result["text"] = client.audio.transcriptions.create(model="whisper-1", file=audio).text
                done.set()

            worker = threading.Thread(target=transcribe)
            worker.start()
            chunks_while_transcribing = 0
            try:
                # Start the stream once the transcription has been accepted and is running.
                while not done.is_set() and not engine.speech.transcribing:
                    done.wait(0.05)
                stream = client.chat.completions.create(
                    model="smollm2-135m-instruct:q4_1", stream=True, max_tokens=400, temperature=0,
                    messages=[{"role": "user", "content": "Tell me a long story about a dog."}])
                for chunk in stream:
                    if chunk.choices and chunk.choices[0].delta.content and not done.is_set():
                        chunks_while_transcribing += 1
                    if chunks_while_transcribing >= 5 or done.is_set():
                        break  # seen flowing (or the transcription ended): the rest adds nothing
                stream.close()
            finally:
                worker.join()
            assert result["text"]
            assert chunks_while_transcribing >= 5, "the chat stream stalled behind the transcription"
    finally:
        engine.close()


def _long_speech(engine: Engine, path) -> None:
    """About two minutes of speech: the ten sentences, four times over (long enough that its
    transcription outlasts an answer's first chunks on a busy machine too)."""
    from inglenook.engine import encode_pcm

    rate, pcm = engine.speech.speak(" ".join(SENTENCES * 4))
    path.write_bytes(encode_pcm(b"".join(pcm), rate, "wav"))


def test_concurrent_speech_and_transcription_requests_all_finish(client: openai.OpenAI, spoken) -> None:
    """Speech requests share one helper process (taken in turn) and transcriptions one lane:
    several at once all get their whole answers."""
    from concurrent.futures import ThreadPoolExecutor

    def speak(i: int) -> bytes:
        return client.audio.speech.create(model="tts-1", voice="alloy", input=SENTENCES[i], response_format="wav").content

    def hear(i: int) -> str:
        return client.audio.transcriptions.create(model="whisper-1", file=("a.wav", spoken[i].read_bytes())).text

    with ThreadPoolExecutor(4) as pool:
        spoken_back = list(pool.map(speak, range(3)))
        heard = list(pool.map(hear, range(3)))
    assert all(audio[:4] == b"RIFF" and len(audio) > 22_050 for audio in spoken_back)
    assert word_error_rate(list(SENTENCES[:3]), heard) <= MAX_WER, heard
