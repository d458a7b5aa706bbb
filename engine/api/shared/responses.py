"""Engine output -> OpenAI responses: whole completions and server-sent event streams.

Jobs of one request run one after another on the scheduler, so a stream sends choice 0
to its end, then choice 1, and so on; every chunk carries its choice's index. Errors that
happen after a stream has started are sent as an ``error`` event, which the OpenAI SDKs
raise as an exception.

A stream opens when its prompt is admitted, with an SSE comment line (clients skip it); while
the prompt is read it sends another on each progress event and after every few seconds of
silence, or, for a client that sent llama-server's ``return_progress``, chunks with
``prompt_progress`` in llama-server's field names.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

from .errors import error_body, error_for
from .requests import GenerationPlan
from .runs import Run, interleaved
from ...base import (
    AssistantMessage, ChatChoice, ChatCompletion, ChatCompletionChunk, ChatCompletionProgressChunk,
    ChoiceDelta, ChoiceLogprobs, ChunkChoice, Completion, CompletionChoice, CompletionLogprobs,
    CompletionProgressChunk, DeltaFunctionCall, DeltaToolCall, PromptProgressInfo, PromptTokensDetails,
    ResponseModel, ServerTimings, TokenLogprobInfo, TopLogprob, UsageInfo,
)
from ...base import PromptProgress, TokenLogprob
from ...text import AnswerPiece, AnswerSplitter, split_answer
from ...text import ArgumentsDelta, CallStarted

DONE = "data: [DONE]\n\n"


@dataclass
class Meta:
    """What every object of one response shares."""

    id: str
    model: str
    fingerprint: str
    created: int = field(default_factory=lambda: int(time.time()))

    @classmethod
    def new(cls, prefix: str, plan: GenerationPlan) -> "Meta":
        return cls(f"{prefix}-{secrets.token_hex(12)}", plan.record.id, f"fp_{plan.record.fingerprint[:12]}")


def sse(item: ResponseModel | dict) -> str:
    data = item.model_dump_json() if isinstance(item, ResponseModel) else json.dumps(item, ensure_ascii=False)
    return f"data: {data}\n\n"


def keepalive(progress: PromptProgress | None) -> str:
    """An SSE comment line: clients skip it, but it shows them (and any proxy between) that
    the stream is alive while the prompt is read."""
    if progress is None:
        return ": keep-alive\n\n"
    return f": read {progress.read} of {progress.total} prompt tokens\n\n"


def progress_info(progress: PromptProgress) -> PromptProgressInfo:
    """llama-server's ``prompt_progress``: ``processed`` counts cached tokens too, as its does."""
    return PromptProgressInfo(total=progress.total, cache=progress.cached, processed=progress.read,
                              time_ms=round(progress.elapsed_s * 1000))


async def reading_frames(run: Run, progress_frame: Callable[[PromptProgress], str] | None) -> AsyncIterator[str]:
    """The frames while ``run``'s prompt is read: with ``progress_frame`` (the client sent
    ``return_progress``) one for the admission and each progress event, as llama-server
    sends them; otherwise a comment for each. A comment after every few seconds of silence."""
    if progress_frame is not None and run.progress is not None:
        yield progress_frame(run.progress)  # the admission: llama-server's first, 0% frame
    async for progress in run.reading():
        yield keepalive(progress) if progress is None or progress_frame is None else progress_frame(progress)


def usage_of(runs: Sequence[Run], per_prompt: int) -> UsageInfo:
    """Prompt tokens count once per prompt (not per choice); completion tokens add up."""
    first_of_each = runs[::per_prompt]
    prompt = sum(r.usage.prompt_tokens for r in first_of_each)
    cached = sum(r.usage.cached_tokens for r in first_of_each)
    completion = sum(r.usage.completion_tokens for r in runs)
    return UsageInfo(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=cached),
    )


def timings_of(runs: Sequence[Run]) -> ServerTimings | None:
    """llama-server's ``timings`` for ``runs``: counts add up, times are the longest."""
    done = [r.finished for r in runs if r.finished is not None]
    if not done:
        return None
    predicted = sum(f.usage.completion_tokens for f in done)
    decode_s = max(f.timings.decode_s for f in done)
    return ServerTimings(
        prompt_n=done[0].usage.prompt_tokens - done[0].usage.cached_tokens,
        prompt_ms=round(max(f.timings.prompt_s for f in done) * 1000, 3),
        predicted_n=predicted, predicted_ms=round(decode_s * 1000, 3),
        predicted_per_second=round(sum(f.tokens_per_s for f in done), 3),
        draft_n=sum(f.timings.draft_n for f in done),
        draft_n_accepted=sum(f.timings.draft_n_accepted for f in done),
    )


def chat_logprobs(entries: Sequence[TokenLogprob]) -> ChoiceLogprobs:
    return ChoiceLogprobs(
        content=[
            TokenLogprobInfo(
                token=e.token,
                logprob=e.logprob,
                bytes=list(e.token_bytes),
                top_logprobs=[TopLogprob(token=t, logprob=lp, bytes=list(b)) for t, b, lp in e.top],
            )
            for e in entries
        ]
    )


# -- chat ---------------------------------------------------------------------------------


def _finish_reason(called: bool, finished: str) -> str:
    """``tool_calls`` for an answer that called, unless the token limit cut it: then
    ``length``, as OpenAI says, with the call's arguments as far as they were written."""
    if finished == "length":
        return "length"
    return "tool_calls" if called else finished


def chat_completion(plan: GenerationPlan, runs: Sequence[Run], meta: Meta, parallel_calls: bool) -> ChatCompletion:
    choices = []
    for index, run in enumerate(runs):
        reasoning, content, calls = split_answer(run.text, plan.tools, parallel_calls, plan.reasoning_inside)
        reason = _finish_reason(bool(calls), run.finish_reason)
        logprobs = chat_logprobs(run.logprobs) if plan.jobs[index].sampling.logprobs is not None else None
        message = AssistantMessage(content=content if content or not calls else None, tool_calls=calls or None,
                                   reasoning_content=reasoning or None)
        choices.append(ChatChoice(index=index, message=message, logprobs=logprobs, finish_reason=reason))
    return ChatCompletion(
        id=meta.id, created=meta.created, model=meta.model, choices=choices,
        usage=usage_of(runs, len(runs)), system_fingerprint=meta.fingerprint, timings=timings_of(runs),
    )


async def chat_stream(
    plan: GenerationPlan, runs: Sequence[Run], meta: Meta, include_usage: bool, parallel_calls: bool,
    return_progress: bool = False,
) -> AsyncIterator[str]:
    def chunk(index: int, delta: ChoiceDelta, reason: str | None = None, logprobs: ChoiceLogprobs | None = None) -> str:
        choice = ChunkChoice(index=index, delta=delta, logprobs=logprobs, finish_reason=reason)
        return sse(ChatCompletionChunk(
            id=meta.id, created=meta.created, model=meta.model, choices=[choice], system_fingerprint=meta.fingerprint,
            timings=timings_of(runs[index:index + 1]) if reason else None,
        ))

    def progress_chunk(progress: PromptProgress) -> str:
        # As llama-server sends it: a role delta with no content, and the progress beside it.
        choice = ChunkChoice(index=0, delta=ChoiceDelta(role="assistant"))
        return sse(ChatCompletionProgressChunk(
            id=meta.id, created=meta.created, model=meta.model, choices=[choice], system_fingerprint=meta.fingerprint,
            prompt_progress=progress_info(progress),
        ))

    try:
        yield keepalive(runs[0].progress)  # at once: the status line and headers go out with it
        splitters = [AnswerSplitter(plan.tools, parallel_calls, plan.reasoning_inside) for _ in runs]
        for index in range(len(runs)):
            yield chunk(index, ChoiceDelta(role="assistant", content=""))
        async for frame in reading_frames(runs[0], progress_chunk if return_progress else None):
            yield frame
        async for index, piece in interleaved(runs):
            splitter = splitters[index]
            if piece is not None:
                want_logprobs = plan.jobs[index].sampling.logprobs is not None
                part = splitter.feed(piece.text)
                logprobs = chat_logprobs(piece.logprobs) if want_logprobs and piece.logprobs else None
                for delta in _answer_deltas(part):
                    yield chunk(index, delta, logprobs=logprobs)
                    logprobs = None
                if logprobs is not None:
                    yield chunk(index, ChoiceDelta(content=""), logprobs=logprobs)
                continue
            for delta in _answer_deltas(splitter.finish()):
                yield chunk(index, delta)
            yield chunk(index, ChoiceDelta(), reason=_finish_reason(bool(splitter.calls), runs[index].finish_reason))
        if include_usage:
            yield sse(ChatCompletionChunk(
                id=meta.id, created=meta.created, model=meta.model, choices=[],
                usage=usage_of(runs, len(runs)), system_fingerprint=meta.fingerprint,
            ))
        yield DONE
    except Exception as exc:  # noqa: BLE001 — the status line is sent: report in the stream
        yield sse(error_body(error_for(exc)))
    finally:
        for run in runs:
            run.close()


def _answer_deltas(part: AnswerPiece) -> list[ChoiceDelta]:
    """A streamed piece of an answer as chat deltas: reasoning, text, then call pieces as
    they are written (a call's id and name first, its arguments in the pieces that follow)."""
    deltas = []
    if part.reasoning:
        deltas.append(ChoiceDelta(reasoning_content=part.reasoning))
    if part.text:
        deltas.append(ChoiceDelta(content=part.text))
    for event in part.call_events:
        if isinstance(event, CallStarted):
            opening = DeltaToolCall(index=event.index, id=event.id, type="function",
                                    function=DeltaFunctionCall(name=event.name, arguments=""))
            deltas.append(ChoiceDelta(tool_calls=[opening]))
        elif isinstance(event, ArgumentsDelta):
            piece = DeltaToolCall(index=event.index, function=DeltaFunctionCall(arguments=event.text))
            deltas.append(ChoiceDelta(tool_calls=[piece]))
    return deltas


# -- text completions ---------------------------------------------------------------------


class OffsetLogprobs:
    """Legacy completion logprobs; text offsets continue across a stream's chunks."""

    def __init__(self, start: int) -> None:
        self.offset = start

    def convert(self, entries: Sequence[TokenLogprob]) -> CompletionLogprobs:
        result = CompletionLogprobs()
        for e in entries:
            result.tokens.append(e.token)
            result.token_logprobs.append(e.logprob)
            result.top_logprobs.append({t: lp for t, _, lp in e.top})
            result.text_offset.append(self.offset)
            self.offset += len(e.token)
        return result


def completion(plan: GenerationPlan, runs: Sequence[Run], meta: Meta) -> Completion:
    choices = []
    for index, run in enumerate(runs):
        echo = plan.echo_prompts[index // plan.n] if plan.echo_prompts else ""
        logprobs = None
        if plan.jobs[index].sampling.logprobs is not None:
            logprobs = OffsetLogprobs(len(echo)).convert(run.logprobs)
        choices.append(CompletionChoice(index=index, text=echo + run.text, logprobs=logprobs, finish_reason=run.finish_reason))
    return Completion(
        id=meta.id, created=meta.created, model=meta.model, choices=choices,
        usage=usage_of(runs, plan.n), system_fingerprint=meta.fingerprint, timings=timings_of(runs),
    )


async def completion_stream(plan: GenerationPlan, runs: Sequence[Run], meta: Meta, include_usage: bool,
                            return_progress: bool = False) -> AsyncIterator[str]:
    def chunk(index: int, text: str, reason: str | None = None, logprobs: CompletionLogprobs | None = None) -> str:
        choice = CompletionChoice(index=index, text=text, logprobs=logprobs, finish_reason=reason)
        return sse(Completion(id=meta.id, created=meta.created, model=meta.model, choices=[choice], system_fingerprint=meta.fingerprint))

    def progress_chunk(progress: PromptProgress) -> str:
        choice = CompletionChoice(index=0, text="", finish_reason=None)
        return sse(CompletionProgressChunk(id=meta.id, created=meta.created, model=meta.model, choices=[choice],
                                           system_fingerprint=meta.fingerprint, prompt_progress=progress_info(progress)))

    try:
        yield keepalive(runs[0].progress)  # at once: the status line and headers go out with it
        offsets: list[OffsetLogprobs | None] = []  # None: that choice asked for no logprobs
        for index in range(len(runs)):
            echo = plan.echo_prompts[index // plan.n] if plan.echo_prompts else ""
            offsets.append(OffsetLogprobs(len(echo)) if plan.jobs[index].sampling.logprobs is not None else None)
            if echo:
                yield chunk(index, echo)
        async for frame in reading_frames(runs[0], progress_chunk if return_progress else None):
            yield frame
        async for index, piece in interleaved(runs):
            if piece is None:
                yield chunk(index, "", reason=runs[index].finish_reason)
                continue
            offset = offsets[index]
            logprobs = offset.convert(piece.logprobs or []) if offset is not None else None
            yield chunk(index, piece.text, logprobs=logprobs)
        if include_usage:
            yield sse(Completion(
                id=meta.id, created=meta.created, model=meta.model, choices=[],
                usage=usage_of(runs, plan.n), system_fingerprint=meta.fingerprint,
            ))
        yield DONE
    except Exception as exc:  # noqa: BLE001
        yield sse(error_body(error_for(exc)))
    finally:
        for run in runs:
            run.close()
