"""OpenAI's audio endpoints: ``/v1/audio/transcriptions``, ``/v1/audio/translations`` and
``/v1/audio/speech``, on the engine's ``Speech`` room.

Behind the same gate as every route (Host, Origin, key, body size: an upload larger than
the server's body limit is refused with 413 from its Content-Length, before it is read).
Transcriptions run on the speech lane, never on the scheduler's step thread, so text streams
keep flowing while one runs; this handler only waits for it on a worker thread.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.datastructures import UploadFile

from ..base import InvalidRequest, RequestModel
from ..speech import (
    MEDIA_TYPES, OPENAI_SPEAKERS, OPENAI_TRANSCRIBERS, SPEECH_FORMATS, TRANSCRIPT_FORMATS, TranscriptionOptions, VoiceUnavailable, encode_pcm,
    render_transcript, wav_header,
)
from .shared import ApiError, event_stream, read_request

if TYPE_CHECKING:
    from ..speech import Segment, Speech, Transcript
    from .shared import ApiEngine, ApiService

log = logging.getLogger(__name__)

_TEXT_FIELDS = ("model", "language", "prompt", "temperature", "response_format", "stream")


class SpeechRequest(RequestModel):
    """``CreateSpeechRequest``: ``input`` and ``speed`` are checked by ``Speech.speak``."""

    model: str = "tts-1"
    input: str
    voice: str | dict[str, Any] = "alloy"
    instructions: str | None = None
    response_format: str = "mp3"
    speed: float = 1.0
    stream_format: str = "audio"


def audio_router(service: ApiService) -> APIRouter:
    router = APIRouter()
    speech = lambda: service.engine.speech  # noqa: E731 — made on first use, by the engine

    @router.post("/v1/audio/transcriptions")
    async def transcriptions(request: Request) -> Any:
        service.ensure_open()
        return await _transcribe(request, speech(), translate=False)

    @router.post("/v1/audio/translations")
    async def translations(request: Request) -> Any:
        service.ensure_open()
        return await _transcribe(request, speech(), translate=True)

    @router.post("/v1/audio/speech")
    async def create_speech(request: Request) -> Any:
        service.ensure_open()
        return await _speak(request, speech())

    return router


async def _speak(request: Request, room: Speech) -> Any:
    request.state.prompt_param = "input"
    body = await read_request(request, SpeechRequest)
    fmt = body.response_format
    if fmt not in SPEECH_FORMATS:
        raise InvalidRequest(f"response_format must be one of {', '.join(SPEECH_FORMATS)}", param="response_format")
    if body.stream_format not in ("audio", "sse"):
        raise InvalidRequest("stream_format must be audio or sse", param="stream_format")
    voice = body.voice if isinstance(body.voice, str) else str(body.voice.get("id", ""))
    try:
        rate, pcm = await anyio.to_thread.run_sync(
            lambda: room.speak(body.input, voice=voice, model=body.model, speed=body.speed))
    except VoiceUnavailable as exc:
        raise ApiError(400, str(exc), code="voice_unavailable", param="voice") from None
    if body.stream_format == "sse":
        return event_stream(_speech_events(pcm, rate, fmt, len(body.input)))
    if fmt in ("wav", "pcm"):
        # Each sentence goes out as Piper finishes it: the first audio does not wait for the last.
        return StreamingResponse(_pcm_stream(pcm, rate, fmt), media_type=MEDIA_TYPES[fmt])
    whole = await anyio.to_thread.run_sync(lambda: b"".join(pcm))
    encoded = await anyio.to_thread.run_sync(encode_pcm, whole, rate, fmt)
    return Response(encoded, media_type=MEDIA_TYPES[fmt])


async def _transcription_form(request: Request) -> tuple[bytes, dict[str, Any], list[str]]:
    """The multipart body's file, its text fields and its timestamp granularities."""
    form = await request.form(max_files=1, max_fields=32)
    try:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise InvalidRequest("a file is required (multipart/form-data field 'file')", param="file")
        fields = {name: form.get(name) for name in _TEXT_FIELDS}
        if any(value is not None and not isinstance(value, str) for value in fields.values()):
            raise InvalidRequest("only 'file' may be a file", param="file")
        granularities = [str(v) for v in form.getlist("timestamp_granularities[]") + form.getlist(
            "timestamp_granularities")]
        data = await upload.read()
    finally:
        await form.close()
    return data, fields, granularities


def _transcription_options(fields: dict[str, Any], fmt: str, granularities: list[str],
                           translate: bool) -> TranscriptionOptions:
    if fmt not in TRANSCRIPT_FORMATS:
        raise InvalidRequest(f"response_format must be one of {', '.join(TRANSCRIPT_FORMATS)}",
                             param="response_format")
    if any(g not in ("word", "segment") for g in granularities):
        raise InvalidRequest("timestamp_granularities may hold word and segment", param="timestamp_granularities")
    if granularities and fmt != "verbose_json":
        raise InvalidRequest("timestamp_granularities needs response_format verbose_json",
                             param="timestamp_granularities")
    return TranscriptionOptions(
        language=(str(fields["language"]) or None) if fields["language"] else None,
        prompt=str(fields["prompt"]) if fields["prompt"] else None,
        temperature=_number(fields["temperature"], "temperature", 0.0, 1.0),
        words="word" in granularities, translate=translate,
    )


async def _transcribe(request: Request, room: Speech, *, translate: bool) -> Any:
    request.state.prompt_param = "file"
    data, fields, granularities = await _transcription_form(request)
    fmt = str(fields["response_format"] or "json")
    options = _transcription_options(fields, fmt, granularities, translate)
    stream = str(fields["stream"] or "false").lower() == "true"
    model = str(fields["model"]) if fields["model"] else None
    if not data:
        raise InvalidRequest("the audio file is empty", param="file")
    if stream:
        return event_stream(_transcript_events(request, room, data, options, model))
    stop = False
    future = room.transcribe(data, options, model=model, cancelled=lambda: stop)
    try:
        transcript = await _wait(request, future)
    finally:
        stop = True  # a client that left stops the work at the next segment
    rendered = render_transcript(transcript, fmt, words=options.words,
                                 segments=not granularities or "segment" in granularities)
    if isinstance(rendered, dict):
        return JSONResponse(rendered)
    return PlainTextResponse(rendered, media_type="text/vtt" if fmt == "vtt" else "text/plain")


async def _wait(request: Request, future: Future[Transcript]) -> Transcript:
    """The transcript, waited for without blocking the event loop; a client that goes away
    cancels a transcription still queued."""
    wrapped = asyncio.wrap_future(future)
    while True:
        done, _ = await asyncio.wait({wrapped}, timeout=0.5)
        if done:
            return wrapped.result()
        if await request.is_disconnected():
            future.cancel()
            raise asyncio.CancelledError


async def _transcript_events(request: Request, room: Speech, data: bytes, options: TranscriptionOptions,
                             model: str | None) -> AsyncIterator[str]:
    """``transcript.text.delta`` per recognised segment, then ``transcript.text.done``."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str] = asyncio.Queue()
    stop = False

    def heard(segment: Segment) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, segment.text)

    future = room.transcribe(data, options, model=model, cancelled=lambda: stop, on_segment=heard)
    wrapped: asyncio.Future[Transcript] = asyncio.wrap_future(future)
    first = True
    try:
        while True:
            getter = asyncio.ensure_future(queue.get())
            waiting: list[asyncio.Future[Any]] = [getter, wrapped]
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                delta = getter.result()
                yield _sse({"type": "transcript.text.delta", "delta": delta.lstrip() if first else delta})
                first = False
                continue
            getter.cancel()
            while not queue.empty():  # segments that came with the end
                delta = queue.get_nowait()
                yield _sse({"type": "transcript.text.delta", "delta": delta.lstrip() if first else delta})
                first = False
            try:
                transcript = wrapped.result()
            except Exception as exc:  # noqa: BLE001 — told to the client as an error event
                from .shared import error_body, error_for  # noqa: PLC0415 — only on this rare path

                yield _sse({"type": "error", **error_body(error_for(exc))})
                return
            yield _sse({"type": "transcript.text.done", "text": transcript.text,
                        "usage": {"type": "duration", "seconds": round(transcript.duration)}})
            return
    finally:
        stop = True
        future.cancel()
        if await request.is_disconnected():
            log.info("a transcription stream's client went away")


async def _pcm_stream(pcm: Iterator[bytes], rate: int, fmt: str) -> AsyncIterator[bytes]:
    try:
        if fmt == "wav":
            yield wav_header(rate)  # sizes unknown until the end: a streaming header
        while True:
            chunk = await anyio.to_thread.run_sync(next, pcm, None)
            if chunk is None:
                return
            yield chunk
    finally:
        await anyio.to_thread.run_sync(_close, pcm)  # a client that left: the helper drops the rest


async def _speech_events(pcm: Iterator[bytes], rate: int, fmt: str, characters: int) -> AsyncIterator[str]:
    """``speech.audio.delta`` events, each a sentence in ``fmt`` (wav: a header on the first
    only), then ``speech.audio.done``."""
    first = True
    try:
        while True:
            chunk = await anyio.to_thread.run_sync(next, pcm, None)
            if chunk is None:
                break
            if fmt == "wav":
                audio = (wav_header(rate) if first else b"") + chunk
            else:
                audio = await anyio.to_thread.run_sync(encode_pcm, chunk, rate, fmt)
            first = False
            yield _sse({"type": "speech.audio.delta", "audio": base64.b64encode(audio).decode("ascii")})
    finally:
        await anyio.to_thread.run_sync(_close, pcm)
    # Piper counts no tokens; characters in and none out is what can be said honestly.
    yield _sse({"type": "speech.audio.done", "usage": {"input_tokens": characters, "output_tokens": 0,
                                                       "total_tokens": characters}})


def _close(pcm: Iterator[bytes]) -> None:
    close = getattr(pcm, "close", None)
    if close is not None:
        close()


def _sse(event: dict[str, Any]) -> str:
    return f"data: {json.dumps(event)}\n\n"


def _number(value: object, name: str, low: float, high: float) -> float:
    if value is None or value == "":
        return low
    try:
        number = float(str(value))
    except ValueError:
        raise InvalidRequest(f"{name} must be a number", param=name) from None
    if not low <= number <= high:
        raise InvalidRequest(f"{name} must be between {low} and {high}", param=name)
    return number


def speech_card(engine: ApiEngine, model_id: str) -> dict[str, Any] | None:
    """``/v1/models/{id}`` for a speech model's id, or for one of OpenAI's model names
    (``whisper-1``, ``tts-1``…), which answers with the installed model it stands for."""
    cards = speech_cards(engine)
    found = next((card for card in cards if card["id"] == model_id), None)
    if found is not None:
        return found
    kind = "speech-to-text" if model_id in OPENAI_TRANSCRIBERS else "text-to-speech" if model_id in OPENAI_SPEAKERS else None
    served = next((card for card in cards if card["kind"] == kind), None)
    return None if served is None else {**served, "id": model_id, "alias_of": served["id"]}


def speech_cards(engine: ApiEngine) -> list[dict[str, Any]]:
    """``/v1/models`` entries for the installed speech models, ``kind`` telling what each does."""
    return [{"id": m.id, "object": "model", "created": 0, "owned_by": "local", "kind": m.kind,
             "engine": m.engine, **({"licence": m.licence} if m.licence else {})} for m in engine.speech.models()]
