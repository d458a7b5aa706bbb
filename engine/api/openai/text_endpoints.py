"""What /v1/chat/completions and /v1/completions do differently, as data: ``server.py`` has
one handler for both (parse, plan, run, then stream or answer whole), fed one of these."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from ...base import ChatCompletionRequest, CompletionRequest, ResponseModel, SamplingFields
from ..shared import (
    GenerationPlan, Meta, ModelNames, Run, chat_completion, chat_plan, chat_stream, completion,
    completion_plan, completion_stream,
)

TextRequestT = TypeVar("TextRequestT", bound=SamplingFields)


@dataclass(frozen=True)
class TextEndpoint(Generic[TextRequestT]):
    """What /v1/chat/completions and /v1/completions do differently; the handler is one."""

    request: type[TextRequestT]
    prompt_param: str  # the field an error about the prompt names
    plan: Callable[[TextRequestT, ModelNames], GenerationPlan]
    id_prefix: str
    stream: Callable[[GenerationPlan, list[Run], Meta, bool, TextRequestT], AsyncIterator[str]]
    whole: Callable[[GenerationPlan, list[Run], Meta, TextRequestT], ResponseModel]


CHAT_COMPLETIONS = TextEndpoint(
    ChatCompletionRequest, "messages", chat_plan, "chatcmpl",
    stream=lambda plan, runs, meta, usage, body: chat_stream(plan, runs, meta, usage, body.parallel_tool_calls,
                                                             body.return_progress),
    whole=lambda plan, runs, meta, body: chat_completion(plan, runs, meta, body.parallel_tool_calls),
)
COMPLETIONS = TextEndpoint(
    CompletionRequest, "prompt", completion_plan, "cmpl",
    stream=lambda plan, runs, meta, usage, body: completion_stream(plan, runs, meta, usage, body.return_progress),
    whole=lambda plan, runs, meta, _body: completion(plan, runs, meta),
)
