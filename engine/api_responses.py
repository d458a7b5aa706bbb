"""Engine output -> OpenAI responses: whole completions and server-sent event streams.

Jobs of one request run one after another on the scheduler, so a stream sends choice 0
to its end, then choice 1, and so on; every chunk carries its choice's index. Errors that
happen after a stream has started are sent as an ``error`` event, which the OpenAI SDKs
raise as an exception.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from .api_errors import error_body, error_for
from .api_requests import GenerationPlan
from .api_runs import Run, interleaved
from .protocol import (
    AssistantMessage,
    ChatChoice,
    ChatCompletion,
    ChatCompletionChunk,
    ChoiceDelta,
    ChoiceLogprobs,
    ChunkChoice,
    Completion,
    CompletionChoice,
    CompletionLogprobs,
    DeltaFunctionCall,
    DeltaToolCall,
    PromptTokensDetails,
    ResponseModel,
    ResponseToolCall,
    TokenLogprobInfo,
    TopLogprob,
    UsageInfo,
)
from .runtime import TokenLogprob
from .tool_calls import ToolCallFilter, ToolPlan

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


def chat_completion(plan: GenerationPlan, runs: Sequence[Run], meta: Meta, parallel_calls: bool) -> ChatCompletion:
    choices = []
    for index, run in enumerate(runs):
        content: str | None = run.text
        calls: list[ResponseToolCall] = []
        if plan.tools is not None:
            calls, rest = ToolCallFilter(plan.tools, parallel_calls).finish_text(run.text)
            content = rest if not calls else (rest or None)
        reason = "tool_calls" if calls else run.finish_reason
        logprobs = chat_logprobs(run.logprobs) if plan.jobs[index].sampling.logprobs is not None else None
        message = AssistantMessage(content=content, tool_calls=calls or None)
        choices.append(ChatChoice(index=index, message=message, logprobs=logprobs, finish_reason=reason))
    return ChatCompletion(
        id=meta.id, created=meta.created, model=meta.model, choices=choices,
        usage=usage_of(runs, len(runs)), system_fingerprint=meta.fingerprint,
    )


async def chat_stream(
    plan: GenerationPlan, runs: Sequence[Run], meta: Meta, include_usage: bool, parallel_calls: bool
) -> AsyncIterator[str]:
    def chunk(index: int, delta: ChoiceDelta, reason: str | None = None, logprobs: ChoiceLogprobs | None = None) -> str:
        choice = ChunkChoice(index=index, delta=delta, logprobs=logprobs, finish_reason=reason)
        return sse(ChatCompletionChunk(
            id=meta.id, created=meta.created, model=meta.model, choices=[choice], system_fingerprint=meta.fingerprint,
        ))

    try:
        holds = [ToolCallFilter(plan.tools, parallel_calls) if plan.tools is not None else None for _ in runs]
        for index in range(len(runs)):
            yield chunk(index, ChoiceDelta(role="assistant", content=""))
        async for index, piece in interleaved(runs):
            held = holds[index]
            if piece is not None:
                want_logprobs = plan.jobs[index].sampling.logprobs is not None
                text = held.feed(piece.text) if held is not None else piece.text
                logprobs = chat_logprobs(piece.logprobs) if want_logprobs and piece.logprobs else None
                if text or logprobs is not None:
                    yield chunk(index, ChoiceDelta(content=text), logprobs=logprobs)
                continue
            calls, rest = held.finish() if held is not None else ([], "")
            if rest:
                yield chunk(index, ChoiceDelta(content=rest))
            for n, call in enumerate(calls):
                opening = DeltaToolCall(index=n, id=call.id, type="function", function=DeltaFunctionCall(name=call.function.name, arguments=""))
                yield chunk(index, ChoiceDelta(tool_calls=[opening]))
                arguments = DeltaToolCall(index=n, function=DeltaFunctionCall(arguments=call.function.arguments))
                yield chunk(index, ChoiceDelta(tool_calls=[arguments]))
            yield chunk(index, ChoiceDelta(), reason="tool_calls" if calls else runs[index].finish_reason)
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
        usage=usage_of(runs, plan.n), system_fingerprint=meta.fingerprint,
    )


async def completion_stream(plan: GenerationPlan, runs: Sequence[Run], meta: Meta, include_usage: bool) -> AsyncIterator[str]:
    def chunk(index: int, text: str, reason: str | None = None, logprobs: CompletionLogprobs | None = None) -> str:
        choice = CompletionChoice(index=index, text=text, logprobs=logprobs, finish_reason=reason)
        return sse(Completion(id=meta.id, created=meta.created, model=meta.model, choices=[choice], system_fingerprint=meta.fingerprint))

    try:
        offsets = []
        for index in range(len(runs)):
            echo = plan.echo_prompts[index // plan.n] if plan.echo_prompts else ""
            offsets.append(OffsetLogprobs(len(echo)) if plan.jobs[index].sampling.logprobs is not None else None)
            if echo:
                yield chunk(index, echo)
        async for index, piece in interleaved(runs):
            if piece is None:
                yield chunk(index, "", reason=runs[index].finish_reason)
                continue
            logprobs = offsets[index].convert(piece.logprobs or []) if offsets[index] is not None else None
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
