"""What every API family's handlers share: the ``ApiService`` and the way a request is read,
tagged with its client, submitted and streamed.

The OpenAI, Responses and Anthropic routers and the server all import this module; it
imports none of them, so the server (which assembles the routers) sits above it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
from fastapi import Request
from fastapi.responses import StreamingResponse

from ...base import GenerateJob, RequestModel, ServerError
from ...usage import ReasoningCount, api_client, uncounted
from .api_engine import ApiEngine
from .bodies import parse_json_body
from .key_limits import stamp_client
from .requests import GenerationPlan, ModelNames
from .runs import Run, RunSet, cancelled_on_disconnect

log = logging.getLogger(__name__)

# One unit of the engine's work (a step, a prompt's preparation, a load) running longer than
# this makes /health report the engine stuck: a healthy step takes seconds at most.
DEFAULT_STUCK_AFTER_S = 120.0
ModelT = TypeVar("ModelT", bound=RequestModel)


class ApiService:
    """What the handlers share: the engine, model naming, and the jobs in flight."""

    def __init__(self, engine: ApiEngine, names: ModelNames, default_max_tokens: int,
                 stuck_after_s: float = DEFAULT_STUCK_AFTER_S) -> None:
        self.engine = engine
        self.names = names
        self.default_max_tokens = default_max_tokens
        self.stuck_after_s = stuck_after_s
        # Threads that wait on job events; sized above the scheduler's queue so waiting
        # streams never starve other requests of threads.
        self.limiter = anyio.CapacityLimiter(256)
        self.runs = RunSet()
        self.closing = False

    def ensure_open(self) -> None:
        if self.closing:
            raise ServerError("the server is shutting down")

    def submit(self, plan: GenerationPlan, token_cap: int | None = None) -> list[Run]:
        """Queue the plan's jobs. ``token_cap``: where the family's own request carries the
        limit outside the chat plan (the Messages API's required ``max_tokens``); otherwise a
        plan without the client's ``max_tokens`` gets the server's default. Either cap is
        clipped by the scheduler to the context left after the prompt."""
        stamp_client(plan.jobs)  # a named key's requests count as "api:<name>"
        if token_cap is not None:
            for job in plan.jobs:
                job.token_cap = token_cap
        elif plan.capped:  # no max_tokens from the client: the default, clipped to the context left
            for job in plan.jobs:
                job.token_cap = self.default_max_tokens
        # All of a request's choices are queued at once, so they start in the same step.
        handles = self.engine.submit_many(plan.jobs)
        return [self.counted(Run(handle, self.runs), job, plan) for handle, job in zip(handles, plan.jobs)]

    def submit_uncounted(self, job: GenerateJob) -> Run:
        """Queue one job whose output no client reads as an answer (count_tokens' probe): no
        reasoning count, no token cap."""
        stamp_client([job])
        return Run(self.engine.submit_many([job])[0], self.runs)

    def counted(self, run: Run, job: GenerateJob, plan: GenerationPlan) -> Run:
        """``run`` with its reasoning tokens counted for usage as its chunks are read."""
        run.reasoning = ReasoningCount(self.engine.usage, job, plan.reasoning_inside)
        return run

    def cancel_all(self) -> None:
        self.runs.cancel_all()


async def read_request(request: Request, model: type[ModelT]) -> ModelT:
    data = parse_json_body(await request.body())
    parsed = model.model_validate(data)
    unknown = parsed.unknown_fields()
    if unknown:
        log.info("%s: ignoring fields this server does not know: %s", request.url.path, ", ".join(sorted(set(unknown))))
    return parsed


def event_stream(body: Any) -> StreamingResponse:
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(body, media_type="text/event-stream", headers=headers)


@asynccontextmanager
async def submitted(request: Request, service: ApiService, plan: GenerationPlan,
                    token_cap: int | None = None) -> AsyncIterator[list[Run]]:
    """The plan's runs, submitted for this request's client. Inside the block a client that
    goes away cancels them, and an error closes them (a job nobody reads is not left running).
    ``run_plan`` is the usual wait; a family that reads the answer its own way (the Messages
    API cuts it at its stop sequences) reads it inside this block."""
    tag_jobs(plan.jobs, request)  # usage is counted per client
    runs = service.submit(plan, token_cap)
    try:
        async with cancelled_on_disconnect(request, runs):
            yield runs
    except BaseException:
        for run in runs:
            run.close()
        raise


async def run_plan(request: Request, service: ApiService, plan: GenerationPlan, stream: bool) -> list[Run]:
    """Submit the plan; wait for all of it, or (streaming) until its prompt is admitted."""
    async with submitted(request, service, plan) as runs:
        if stream:
            # Errors such as an over-long prompt become HTTP errors; the prompt's reading
            # (minutes on a CPU) is waited for inside the stream, with keep-alives.
            await runs[0].until_admitted()
        else:
            for run in runs:
                await run.drain()
    return runs


def request_client_tag(request: Request) -> str:
    """The usage client of an API request, from its User-Agent. A request made with a named
    key is stamped with the key's name afterwards (``api/shared/key_limits.stamp_client``)."""
    return api_client(request.headers.get("user-agent"))


def tag_jobs(jobs: Iterable[GenerateJob], request: Request, counted: bool = True) -> None:
    """Mark a request's jobs with its client; ``counted=False`` for work that is free on the
    API it imitates (count_tokens' one-token probe)."""
    client = request_client_tag(request)
    for job in jobs:
        job.client = client if counted else uncounted(client)
