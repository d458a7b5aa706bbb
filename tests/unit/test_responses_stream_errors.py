"""A Responses stream whose job fails after the stream began ends with ``error`` and
``response.failed`` in OpenAI's shape, never a broken connection.

The server primes a stream before sending its status line, so ordinary failures become
HTTP errors; this drives ``response_stream`` over an unprimed run of a real scheduler job
that fails (its model does not exist), the same path a failure after the first token takes.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from inglenook.engine.api.responses.output import ResponseMeta, ResponseObject
from inglenook.engine.api.responses.protocol import ResponseCreateRequest
from inglenook.engine.api.responses.stream import response_stream
from inglenook.engine.api.shared.runs import Run, RunSet
from inglenook.engine.base.jobs import GenerateJob
from inglenook.engine.core.engine import Engine


def events_of(frames: list[str]) -> list[tuple[str, dict[str, Any]]]:
    parsed = []
    for frame in frames:
        name, data = frame.strip("\n").split("\n")
        parsed.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return parsed


def test_a_job_that_fails_mid_stream_ends_with_error_and_response_failed() -> None:
    stored: list[ResponseObject] = []

    async def keep(final: ResponseObject) -> None:
        stored.append(final)

    async def stream(engine: Engine) -> list[str]:
        handle = engine.scheduler.submit(GenerateJob(model_id="no-such-model", messages=[{"role": "user", "content": "Hi."}]))
        runs = RunSet()
        run = Run(handle, runs)
        meta = ResponseMeta(ResponseCreateRequest.model_validate({"input": "Hi.", "stream": True}), "no-such-model")
        frames = [frame async for frame in response_stream(meta, run, None, keep)]
        assert len(runs) == 0  # the run was closed
        return frames

    with Engine(scan=False) as engine:
        events = events_of(asyncio.run(stream(engine)))
    names = [name for name, _ in events]
    assert names == ["response.created", "response.in_progress", "error", "response.failed"]
    assert [data["sequence_number"] for _, data in events] == [0, 1, 2, 3]
    error = events[2][1]
    assert error["code"] == "model_not_found" and "no-such-model" in error["message"] and "param" in error
    failed = events[3][1]["response"]
    assert failed["status"] == "failed" and failed["error"] == {"code": "model_not_found", "message": error["message"]}
    assert stored == []  # a failed response is not kept
