"""Request models -> engine jobs: model names, sampling parameters, grammars, tools.

Everything a client sends is checked here or by ``SamplingParams.validated`` before a
job is submitted; nothing unchecked reaches native code.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from ...base import (
    ChatCompletionRequest, CompletionRequest, GenerateJob, InglenookError, InvalidRequest, ModelNotFound,
    ModelRecord, SamplingFields, SamplingParams,
)
from ...documents import with_documents
from ...models import resolve_alias
from ...runtime import header_of
from ...scheduling import Router
from ...text import (
    JSON_OBJECT_GRAMMAR, VOLATILE_LINES, TemplateAbilities, ToolPlan, engine_messages, grammar_for_schema,
    plan_tools,
)
from .api_engine import ApiEngine
from .documents import hoist_documents
from .image_fetch import fetched_images
from .lora import requested_lora
from .part_limits import check_part_counts

log = logging.getLogger(__name__)

MAX_PROMPTS = 64


class ModelNames:
    """Turns the ``model`` of a request into a local model, with aliasing to the default."""

    def __init__(self, engine: ApiEngine, strict: bool, default_model: str | None = None) -> None:
        self.engine = engine
        self.strict = strict
        self.default_model = default_model
        self._abilities: dict[str, TemplateAbilities] = {}
        self._lock = threading.Lock()
        # One parse at a time: requests arriving together for a model not read yet would each
        # parse its whole header (the vocabulary too: 0.25 s of CPU for SmolLM2), taking the
        # CPU from the answers being decoded.
        self._parsing = threading.Lock()
        # The "auto" alias: a small model for short prompts without tools (routing.py).
        self.router = Router(lambda: engine.settings, engine.chat_models,
                             lambda: default_model or engine.default_model_id())

    def resolve(self, name: str) -> ModelRecord:
        name = resolve_alias(self.engine.settings, (name or "").strip())  # aliases.py: "fast" → a model id
        # A remote client names models, never files: path-like names are not looked up on disk.
        if name and not looks_like_path(name):
            try:
                return self.engine.resolve_model(name)
            except ModelNotFound:
                if self.strict:
                    raise ModelNotFound(f"the model {name!r} does not exist") from None
        elif self.strict:
            raise ModelNotFound(f"the model {name!r} does not exist")
        record = self.engine.resolve_model(self.default_model or self.engine.default_model_id())
        log.debug("model %r is served by the default model %s", name, record.id)
        return record

    def abilities(self, record: ModelRecord) -> TemplateAbilities:
        """What the model's chat template renders itself (read from the file once per version)."""
        key = f"{record.id}@{record.fingerprint}"
        with self._lock:
            found = self._abilities.get(key)
        if found is not None:
            return found
        with self._parsing:
            with self._lock:
                found = self._abilities.get(key)
            if found is None:
                # The header a load has already parsed (gguf_headers caches it by fingerprint).
                found = TemplateAbilities.of(header_of(record).chat_template)
                with self._lock:
                    self._abilities[key] = found
        return found


def looks_like_path(name: str) -> bool:
    # Local ids never hold a slash (registry ids are slugs), so "org/model" names alias too.
    return name.lower().endswith(".gguf") or "/" in name or "\\" in name or name.startswith(".")


@dataclass
class GenerationPlan:
    """What one HTTP request runs: ``jobs`` in order, and how to present their output."""

    record: ModelRecord
    jobs: list[GenerateJob]
    n: int
    capped: bool  # the client set no max_tokens: the server's default cap applies
    tools: ToolPlan | None = None
    echo_prompts: list[str] = field(default_factory=list)
    reasoning_inside: str | None = None  # the prompt opened a reasoning block this marker closes


def sampling_for(request: SamplingFields, max_tokens: int | None, logprobs: int | None, grammar: str | None) -> SamplingParams:
    stop = request.stop
    changes: dict[str, Any] = {
        "temperature": request.temperature,
        "top_p": request.top_p,
        "top_k": request.top_k,
        "min_p": request.min_p,
        "repeat_penalty": request.repeat_penalty,
        "presence_penalty": request.presence_penalty,
        "frequency_penalty": request.frequency_penalty,
        "seed": request.seed,
        "max_tokens": max_tokens,
        "logprobs": logprobs,
        "grammar": grammar,
        "stop": ((stop,) if isinstance(stop, str) else tuple(stop)) if stop is not None else None,
        "logit_bias": _logit_bias(request.logit_bias),
    }
    return SamplingParams().with_overrides(**changes)


def _logit_bias(raw: dict[str, float] | None) -> dict[int, float] | None:
    if not raw:
        return None
    if len(raw) > 1024:
        raise InvalidRequest("logit_bias may name at most 1024 tokens", param="logit_bias")
    biases: dict[int, float] = {}
    for key, value in raw.items():
        try:
            biases[int(key)] = value
        except ValueError:
            raise InvalidRequest(f"logit_bias keys must be token ids, got {key!r}", param="logit_bias") from None
    return biases


def _max_tokens(*values: int | None) -> int | None:
    for value in values:
        if value is not None:
            return value
    return None


def _seeded(sampling: SamplingParams, i: int) -> SamplingParams:
    """Choices of one request differ when seeded: each gets the next seed."""
    if i == 0 or sampling.seed is None:
        return sampling
    return sampling.with_overrides(seed=(sampling.seed + i) % 2**64)


def chat_plan(request: ChatCompletionRequest, names: ModelNames) -> GenerationPlan:
    record = names.resolve(names.router.model_for(request))
    needs_template = bool(request.tools) or any(m.role in ("tool", "function") or m.tool_calls for m in request.messages)
    abilities = names.abilities(record) if needs_template else TemplateAbilities()
    tools = plan_tools(request.tools, request.tool_choice, abilities)
    # Files in the request (documents) come out of the messages and go first, whole, in
    # their stable block: a client sending the same file again reuses its cached prefill.
    # Images named by http(s) URL: fetched (public addresses only) when the settings allow, else refused.
    check_part_counts(request.messages)  # before any file is converted or image fetched
    messages_in = fetched_images(request.messages, bool(names.engine.settings.api_fetch_image_urls))
    # Recordings among the files are transcribed on the speech lane (the room is asked for only then).
    request_messages, documents = hoist_documents(
        messages_in, lambda path, stop: names.engine.speech.transcribe(path, cancelled=stop))
    # A line that changes every request near the top would defeat the prefix cache.
    messages = VOLATILE_LINES.steady(record.id, engine_messages(request_messages, abilities, tools))
    messages, _ = with_documents(messages, documents)
    grammar = tools.grammar() if tools is not None else None
    if grammar is None:
        grammar = _response_grammar(request)
    if request.top_logprobs is not None and not request.logprobs:
        raise InvalidRequest("top_logprobs needs logprobs set to true", param="top_logprobs")
    logprobs = (request.top_logprobs or 0) if request.logprobs else None
    max_tokens = _max_tokens(request.max_completion_tokens, request.max_tokens)
    sampling = sampling_for(request, max_tokens, logprobs, grammar)
    native_tools = list(tools.tools) if tools is not None and tools.native else None
    lora = requested_lora(request.lora, names.engine.adapters, record)
    jobs = [
        GenerateJob(model_id=record.id, sampling=_seeded(sampling, i), messages=messages, tools=native_tools,
                    use_cache=request.cache_prompt, template_options=template_options(request), lora=lora)
        for i in range(request.n)
    ]
    return GenerationPlan(record, jobs, request.n, max_tokens is None, tools,
                          reasoning_inside=_reasoning_inside(names, record))


# Template variables a request may set; others could change a template's behaviour in ways
# nobody tested (and are a way into the sandbox), so they are refused.
TEMPLATE_OPTIONS = frozenset({"enable_thinking", "thinking", "reasoning_effort"})


def template_options(request: ChatCompletionRequest) -> dict[str, Any]:
    """What the chat template is told besides the messages: reasoning on or off."""
    options = dict(request.chat_template_kwargs or {})
    unknown = set(options) - TEMPLATE_OPTIONS
    if unknown:
        raise InvalidRequest(f"chat_template_kwargs may set only {', '.join(sorted(TEMPLATE_OPTIONS))}",
                             param="chat_template_kwargs")
    if request.reasoning_effort == "none":
        options.setdefault("enable_thinking", False)  # Qwen 3's and most reasoning templates' switch
    if request.reasoning_effort is not None:
        options.setdefault("reasoning_effort", request.reasoning_effort)
    return options


def _reasoning_inside(names: ModelNames, record: ModelRecord) -> str | None:
    try:
        return names.abilities(record).opens_reasoning
    except InglenookError:  # an unreadable file fails the job itself, with its own error
        return None


def _response_grammar(request: ChatCompletionRequest) -> str | None:
    fmt = request.response_format
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return JSON_OBJECT_GRAMMAR
    if fmt.json_schema is None or fmt.json_schema.schema_ is None:
        raise InvalidRequest("response_format json_schema needs a schema", param="response_format")
    return grammar_for_schema(fmt.json_schema.schema_, strict=bool(fmt.json_schema.strict))


def completion_plan(request: CompletionRequest, names: ModelNames) -> GenerationPlan:
    record = names.resolve(names.router.model_for(request))
    if request.best_of is not None and request.best_of != request.n:
        raise InvalidRequest("best_of is not supported; use n", param="best_of")
    if request.suffix:
        raise InvalidRequest("suffix (fill-in-the-middle) is not supported", param="suffix")
    if request.logprobs is not None and not 0 <= request.logprobs <= 5:
        raise InvalidRequest("logprobs must be between 0 and 5", param="logprobs")
    prompts = _prompts(request.prompt)
    if request.echo and any(not isinstance(p, str) for p in prompts):
        raise InvalidRequest("echo works with text prompts only", param="echo")
    sampling = sampling_for(request, request.max_tokens, request.logprobs, None)
    lora = requested_lora(request.lora, names.engine.adapters, record)
    jobs = []
    for prompt in prompts:
        for i in range(request.n):
            seeded = _seeded(sampling, i)
            if isinstance(prompt, str):
                jobs.append(GenerateJob(model_id=record.id, sampling=seeded, text=prompt,
                                        use_cache=request.cache_prompt, lora=lora))
            else:
                jobs.append(GenerateJob(model_id=record.id, sampling=seeded, tokens=prompt,
                                        use_cache=request.cache_prompt, lora=lora))
    echo = [p if isinstance(p, str) else "" for p in prompts] if request.echo else []
    return GenerationPlan(record, jobs, request.n, request.max_tokens is None, echo_prompts=echo)


def _prompts(prompt: str | list[str] | list[int] | list[list[int]]) -> list[str | list[int]]:
    if isinstance(prompt, str):
        prompts: list[str | list[int]] = [prompt]
    elif prompt and all(isinstance(p, int) for p in prompt):
        # Every item is an int (checked just above); the filter only lets the type checker see it.
        prompts = [[p for p in prompt if isinstance(p, int)]]
    else:
        prompts = []
        for p in prompt:
            if isinstance(p, int):  # the request model admits no such mix; say so if one gets through
                raise InvalidRequest("prompt mixes token ids with texts or token lists", param="prompt")
            prompts.append(p)
    if not prompts or len(prompts) > MAX_PROMPTS:
        raise InvalidRequest(f"prompt must hold between 1 and {MAX_PROMPTS} prompts", param="prompt")
    for p in prompts:
        if not p:
            raise InvalidRequest("a prompt is empty", param="prompt")
        if not isinstance(p, str) and any(t < 0 or t > 2**31 - 1 for t in p):
            raise InvalidRequest("prompt token ids must be non-negative 32-bit integers", param="prompt")
    return prompts
