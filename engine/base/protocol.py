"""Request and response models of the OpenAI-compatible API, ordered like OpenAI's reference.

Requests accept (and log) fields they do not know: OpenAI clients add new ones often, and
refusing them would break tools that work with OpenAI itself. Floats reject NaN and
infinity here, before anything reaches the engine. Range checks that the engine already
makes (temperature, top_p, penalties, logit_bias ids) stay in ``SamplingParams``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer

# -- shared -------------------------------------------------------------------------------


class RequestModel(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    def unknown_fields(self) -> list[str]:
        """Names the client sent that this model does not know, nested ones included."""
        names = list(self.model_extra or {})
        for value in self.__dict__.values():
            items = value if isinstance(value, list) else [value]
            for item in items:
                if isinstance(item, RequestModel):
                    names.extend(item.unknown_fields())
        return names


class ResponseModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CompactModel(ResponseModel):
    """A response part whose unset (None) fields are left out, as OpenAI does in deltas."""

    @model_serializer(mode="wrap")
    def _drop_none(self, handler: Any) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None}


class StreamOptions(RequestModel):
    include_usage: bool = False


class PromptTokensDetails(ResponseModel):
    cached_tokens: int = 0


class UsageInfo(ResponseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    prompt_tokens_details: PromptTokensDetails = Field(default_factory=PromptTokensDetails)


# -- chat completions: request ------------------------------------------------------------


class ContentPart(RequestModel):
    type: str
    text: str | None = None
    # "image_url" parts: {"url": "data:image/png;base64,...", "detail": ...} (or the URL alone).
    image_url: dict[str, Any] | str | None = None


class FunctionCall(RequestModel):
    name: str
    arguments: str = ""


class ToolCall(RequestModel):
    id: str = ""
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(RequestModel):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None


class FunctionDefinition(RequestModel):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(RequestModel):
    type: Literal["function"] = "function"
    function: FunctionDefinition


class NamedFunction(RequestModel):
    name: str


class NamedToolChoice(RequestModel):
    type: Literal["function"] = "function"
    function: NamedFunction


class JsonSchemaFormat(RequestModel):
    name: str = "response"
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(RequestModel):
    type: Literal["text", "json_object", "json_schema"] = "text"
    json_schema: JsonSchemaFormat | None = None


class LoraRequest(RequestModel):
    """One adapter of ``lora``: its index in ``GET /lora-adapters`` (or its name) and scale."""

    id: int | str
    scale: float = 1.0


class SamplingFields(RequestModel):
    """Sampling fields shared by chat and text completions, plus llama.cpp's extras."""

    model: str = ""
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    max_tokens: int | None = None
    n: int = Field(default=1, ge=1, le=16)
    presence_penalty: float | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = None
    top_p: float | None = None
    user: str | None = None
    # llama.cpp extras
    top_k: int | None = None
    min_p: float | None = None
    repeat_penalty: float | None = None
    # llama-server's switch: false prefills the whole prompt, bypassing every prompt cache.
    cache_prompt: bool = True
    # llama-server's LoRA adapters for this request: [{"id": index or name, "scale": float}].
    lora: list[LoraRequest] | None = Field(default=None, max_length=8)
    # llama-server's switch: a stream also sends chunks with ``prompt_progress`` while the
    # prompt is read.
    return_progress: bool = False


class ChatCompletionRequest(SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    logprobs: bool = False
    max_completion_tokens: int | None = None
    parallel_tool_calls: bool = True
    response_format: ResponseFormat | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    tools: list[Tool] | None = None
    top_logprobs: int | None = None
    # "none" turns a reasoning model's thinking off where its template supports that.
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] | None = None
    # Values the chat template reads besides the messages (llama-server's and vLLM's field).
    chat_template_kwargs: dict[str, Any] | None = None


# -- chat completions: response -----------------------------------------------------------


class TopLogprob(ResponseModel):
    token: str
    logprob: float
    bytes: list[int] | None = None


class TokenLogprobInfo(ResponseModel):
    token: str
    logprob: float
    bytes: list[int] | None = None
    top_logprobs: list[TopLogprob] = Field(default_factory=list)


class ChoiceLogprobs(ResponseModel):
    content: list[TokenLogprobInfo] | None = None


class ResponseFunctionCall(ResponseModel):
    name: str
    arguments: str


class ResponseToolCall(ResponseModel):
    id: str
    type: Literal["function"] = "function"
    function: ResponseFunctionCall


class AssistantMessage(ResponseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None
    refusal: str | None = None
    tool_calls: list[ResponseToolCall] | None = None
    reasoning_content: str | None = None  # what a reasoning model thought (llama-server's and DeepSeek's field)

    @model_serializer(mode="wrap")
    def _drop_absent_reasoning(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        if data.get("reasoning_content") is None:
            data.pop("reasoning_content", None)
        return data


class ChatChoice(ResponseModel):
    index: int
    message: AssistantMessage
    logprobs: ChoiceLogprobs | None = None
    finish_reason: str


class ServerTimings(ResponseModel):
    """llama-server's ``timings`` object (the names its clients read), with speculative
    decoding's drafted and accepted token counts."""

    prompt_n: int
    prompt_ms: float
    predicted_n: int
    predicted_ms: float
    predicted_per_second: float
    draft_n: int = 0
    draft_n_accepted: int = 0


class PromptProgressInfo(ResponseModel):
    """llama-server's ``prompt_progress`` (asked for with ``return_progress``): the prompt's
    tokens, those restored from a cache, those read so far (cached ones included), and
    milliseconds since the reading began."""

    total: int
    cache: int
    processed: int
    time_ms: int


class ChatCompletion(ResponseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: UsageInfo
    system_fingerprint: str | None = None
    timings: ServerTimings | None = None


class DeltaFunctionCall(CompactModel):
    name: str | None = None
    arguments: str | None = None


class DeltaToolCall(CompactModel):
    index: int
    id: str | None = None
    type: Literal["function"] | None = None
    function: DeltaFunctionCall | None = None


class ChoiceDelta(CompactModel):
    role: Literal["assistant"] | None = None
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[DeltaToolCall] | None = None


class ChunkChoice(ResponseModel):
    index: int
    delta: ChoiceDelta
    logprobs: ChoiceLogprobs | None = None
    finish_reason: str | None = None


class ChatCompletionChunk(ResponseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: UsageInfo | None = None
    system_fingerprint: str | None = None
    timings: ServerTimings | None = None  # on a choice's last chunk


class ChatCompletionProgressChunk(ChatCompletionChunk):
    """A chunk that says how far the prompt's reading has come (``return_progress``)."""

    prompt_progress: PromptProgressInfo


# -- completions (legacy text) ------------------------------------------------------------


class CompletionRequest(SamplingFields):
    prompt: str | list[str] | list[int] | list[list[int]]
    best_of: int | None = None
    echo: bool = False
    logprobs: int | None = None
    suffix: str | None = None


class CompletionLogprobs(ResponseModel):
    tokens: list[str] = Field(default_factory=list)
    token_logprobs: list[float] = Field(default_factory=list)
    top_logprobs: list[dict[str, float]] = Field(default_factory=list)
    text_offset: list[int] = Field(default_factory=list)


class CompletionChoice(ResponseModel):
    index: int
    text: str
    logprobs: CompletionLogprobs | None = None
    finish_reason: str | None


class Completion(ResponseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: UsageInfo | None = None
    system_fingerprint: str | None = None
    timings: ServerTimings | None = None


class CompletionProgressChunk(Completion):
    """A text completion chunk that says how far the prompt's reading has come (``return_progress``)."""

    prompt_progress: PromptProgressInfo


# -- embeddings ---------------------------------------------------------------------------


class EmbeddingRequest(RequestModel):
    input: str | list[str] | list[int] | list[list[int]]
    model: str = ""
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = None
    user: str | None = None


class EmbeddingData(ResponseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class EmbeddingUsage(ResponseModel):
    prompt_tokens: int
    total_tokens: int


class EmbeddingList(ResponseModel):
    object: Literal["list"] = "list"
    data: list[EmbeddingData]
    model: str
    usage: EmbeddingUsage


# -- models -------------------------------------------------------------------------------


class ModelCard(ResponseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "local"


class ModelList(ResponseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


# -- errors -------------------------------------------------------------------------------


class ErrorDetail(ResponseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(ResponseModel):
    error: ErrorDetail
