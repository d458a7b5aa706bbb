"""Remote engines: any OpenAI-compatible server (another Inglenook, llama-server, vLLM, a
hosted endpoint) as a source of models for the window.

``RemoteEngine.chat`` returns a ``RemoteAnswer`` that behaves like a scheduler job handle:
``events()`` yields the same ``Chunk``/``Finished`` events and ``cancel()`` stops it, so
``ChatService`` streams, stops and saves remote answers exactly like local ones. Every way a
remote can fail (refused connection, timeout, 401, an HTML error page, malformed JSON, a
stream cut short) becomes one ``RemoteEngineError`` with a sentence a person can act on.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..base import Chunk, Finished, GenerationEvent, InglenookError, SamplingParams, Timings, Usage

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)

SEPARATOR = "/"  # the window names a remote model "<engine name>/<its model id>"
CONNECT_TIMEOUT_S = 10.0
# Between two pieces of an answer; a remote's long prefill comes before the first one.
READ_TIMEOUT_S = 120.0
LIST_TIMEOUT_S = 10.0


class RemoteEngineError(InglenookError):
    """A remote engine could not be reached or did not answer as the API says it should."""

    code = "remote_engine_error"


@dataclass(frozen=True)
class RemoteEndpoint:
    name: str
    base_url: str  # e.g. http://office-box:8484/v1
    api_key: str | None = None
    failure_hint: str = ""  # added to connection failures: what this engine's failing usually means

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/")

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}


# httpx is imported where a remote engine is used, not with this module: every chat imports
# it (a model id may name a remote engine), and the terminal's `run` answers from a local
# model without it (issue 27: start-up).


def timeouts(read_s: float = READ_TIMEOUT_S) -> httpx.Timeout:
    import httpx  # noqa: PLC0415 — see above

    return httpx.Timeout(connect=CONNECT_TIMEOUT_S, read=read_s, write=30.0, pool=CONNECT_TIMEOUT_S)


def transport_failure(endpoint: RemoteEndpoint, exc: httpx.HTTPError) -> RemoteEngineError:
    """A connection-level failure as a sentence naming the engine and what to check."""
    import httpx  # noqa: PLC0415 — see timeouts()

    where = f"the remote engine {endpoint.name!r} at {endpoint.url}"
    hint = f" ({endpoint.failure_hint})" if endpoint.failure_hint else ""
    if isinstance(exc, httpx.TimeoutException):
        message = f"{where} did not answer in time ({type(exc).__name__}); it may be busy or down"
    elif isinstance(exc, httpx.ConnectError):
        message = f"cannot connect to {where}: {exc or 'connection refused'}; is it running?"
    elif isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
        message = f"{where} closed the connection before the answer was complete"
    else:
        message = f"{where} failed: {exc or type(exc).__name__}"
    return RemoteEngineError(message + hint)


def status_failure(endpoint: RemoteEndpoint, status: int, content_type: str, body: bytes) -> RemoteEngineError:
    """A non-2xx answer: the server's own error message when it sent one in JSON."""
    where = f"the remote engine {endpoint.name!r}"
    if status in (401, 403):
        return RemoteEngineError(f"{where} refused the API key (HTTP {status}); check its key in Settings → Engines")
    text = body.decode("utf-8", "replace").strip()
    if "html" in content_type or text.startswith("<"):
        return RemoteEngineError(
            f"{where} answered with a web page (HTTP {status}), not the API; is the base URL right? "
            "It usually ends in /v1"
        )
    message = _error_message(text)
    return RemoteEngineError(f"{where} answered HTTP {status}: {message or text[:200] or 'no detail'}")


def _error_message(text: str) -> str:
    try:
        data = json.loads(text)
    except ValueError:
        return ""
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or "")
    return str(error or (data.get("message") if isinstance(data, dict) else "") or "")


class RemoteEngine:
    """One OpenAI-compatible endpoint."""

    def __init__(self, endpoint: RemoteEndpoint, read_timeout_s: float = READ_TIMEOUT_S) -> None:
        self.endpoint = endpoint
        self.read_timeout_s = read_timeout_s

    def model_ids(self) -> list[str]:
        """The ids ``GET /models`` lists, in its order."""
        import httpx  # noqa: PLC0415 — see timeouts()

        endpoint = self.endpoint
        try:
            response = httpx.get(endpoint.url + "/models", headers=endpoint.headers(), timeout=timeouts(LIST_TIMEOUT_S))
        except httpx.HTTPError as exc:
            raise transport_failure(endpoint, exc) from None
        if response.status_code != 200:
            raise status_failure(endpoint, response.status_code, response.headers.get("content-type", ""),
                                 response.content)
        try:
            data = response.json()["data"]
            # Another Inglenook lists its speech models too, with their kind: they cannot chat.
            ids = [str(item["id"]) for item in data
                   if not (isinstance(item, dict) and item.get("kind") in ("speech-to-text", "text-to-speech"))]
        except (ValueError, KeyError, TypeError):
            raise RemoteEngineError(
                f"the remote engine {endpoint.name!r} sent a model list that is not the OpenAI shape"
            ) from None
        return ids

    def chat(self, model: str, messages: list[dict[str, Any]], sampling: SamplingParams) -> "RemoteAnswer":
        body: dict[str, Any] = {
            "model": model, "messages": messages, "stream": True, "stream_options": {"include_usage": True},
            "temperature": sampling.temperature, "top_p": sampling.top_p,
        }
        optional = {"max_tokens": sampling.max_tokens, "seed": sampling.seed,
                    "stop": list(sampling.stop) or None,
                    "presence_penalty": sampling.presence_penalty or None,
                    "frequency_penalty": sampling.frequency_penalty or None}
        body.update({k: v for k, v in optional.items() if v is not None})
        return RemoteAnswer(self.endpoint, body, self.read_timeout_s)


class RemoteAnswer:
    """A streaming chat completion from a remote engine, shaped like a ``JobHandle``."""

    def __init__(self, endpoint: RemoteEndpoint, body: dict[str, Any], read_timeout_s: float) -> None:
        self.endpoint = endpoint
        self.body = body
        self.read_timeout_s = read_timeout_s
        self.asked_at = time.perf_counter()  # TTFT counts from the ask, connection included
        self._cancelled = threading.Event()
        self._response: httpx.Response | None = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return f"{self.endpoint.name}{SEPARATOR}{self.body['model']}"

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self) -> None:
        self._cancelled.set()
        with self._lock:
            response = self._response
        if response is not None:
            response.close()  # unblocks a read waiting on the network

    def events(self) -> Iterator[GenerationEvent]:
        import httpx  # noqa: PLC0415 — see timeouts()

        stream = _AnswerStream(self)
        try:
            with httpx.Client(timeout=timeouts(self.read_timeout_s)) as client:
                url = self.endpoint.url + "/chat/completions"
                with client.stream("POST", url, json=self.body, headers=self.endpoint.headers()) as response:
                    with self._lock:
                        self._response = response
                    if response.status_code != 200:
                        raise status_failure(self.endpoint, response.status_code,
                                             response.headers.get("content-type", ""), response.read())
                    yield from stream.read(response.iter_lines())
        except httpx.HTTPError as exc:
            if not self._cancelled.is_set():  # after a cancel, the closed stream is expected
                raise transport_failure(self.endpoint, exc) from None
        except httpx.StreamError:
            if not self._cancelled.is_set():
                raise RemoteEngineError(f"the answer from {self.endpoint.name!r} ended unexpectedly") from None
        except RemoteEngineError:
            if not self._cancelled.is_set():
                raise
        yield stream.finished("cancelled" if self._cancelled.is_set() else None)


class _AnswerStream:
    """Server-sent events of a chat completion stream into Chunk events and the totals."""

    def __init__(self, answer: RemoteAnswer) -> None:
        self.answer = answer
        self.first_at: float | None = None
        self.last_at: float | None = None
        self.pieces = 0
        self.reason: str | None = None
        self.usage: Usage | None = None
        self.done = False

    def read(self, lines: Iterator[str]) -> Iterator[Chunk]:
        for line in lines:
            if self.answer.cancelled:
                return
            if not line.startswith("data:"):
                continue  # comments, event names, keep-alives
            payload = line[5:].strip()
            if payload == "[DONE]":
                self.done = True
                return
            text = self._event(payload)
            if text:
                self.last_at = time.perf_counter()
                self.first_at = self.first_at or self.last_at
                self.pieces += 1
                yield Chunk(text, [])
        if not self.done and not self.answer.cancelled and self.reason is None:
            hint = f" ({self.answer.endpoint.failure_hint})" if self.answer.endpoint.failure_hint else ""
            raise RemoteEngineError(f"the answer from {self.answer.endpoint.name!r} ended before it was complete{hint}")

    def _event(self, payload: str) -> str:
        name = self.answer.endpoint.name
        try:
            event = json.loads(payload)
        except ValueError:
            raise RemoteEngineError(f"the remote engine {name!r} sent a malformed event (not JSON)") from None
        if not isinstance(event, dict):
            raise RemoteEngineError(f"the remote engine {name!r} sent a malformed event")
        if "error" in event:
            raise RemoteEngineError(f"the remote engine {name!r} stopped with an error: "
                                    f"{_error_message(json.dumps(event)) or 'no detail'}")
        usage = event.get("usage")
        if isinstance(usage, dict):
            details = usage.get("prompt_tokens_details") or {}
            self.usage = Usage(int(usage.get("prompt_tokens") or 0), int(details.get("cached_tokens") or 0),
                               int(usage.get("completion_tokens") or 0))
        choices = event.get("choices") or []
        if not choices or not isinstance(choices[0], dict):
            return ""
        choice = choices[0]
        self.reason = choice.get("finish_reason") or self.reason
        delta = choice.get("delta") or {}
        content = delta.get("content") if isinstance(delta, dict) else None
        return content if isinstance(content, str) else ""

    def finished(self, override: str | None) -> Finished:
        now = time.perf_counter()
        asked = self.answer.asked_at
        first = self.first_at or now
        timings = Timings(ttft_s=first - asked, prompt_s=first - asked, decode_s=(self.last_at or first) - first)
        usage = self.usage or Usage(completion_tokens=self.pieces)
        reason = override or self.reason or "stop"
        return Finished(reason if reason in ("stop", "length", "cancelled") else "stop", usage, timings,
                        self.answer.model_id)
