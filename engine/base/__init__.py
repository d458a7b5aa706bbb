"""The engine's shared vocabulary: errors, jobs and their handles, generation events, sampling
parameters, model records and GGUF headers, images and vision projectors, LoRA sets, the OpenAI wire types, units, atomic writes.

Imports nothing from the rest of the engine (a test holds it to that); every package may import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .door import lazy_door as lazy_door

# Which module defines each name other packages (or the front door) use. Keep in step with
# the TYPE_CHECKING block below, which is what type checkers read (a test compares them).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "bounded_files": ("blocks_bounded", "open_bounded", "read_bounded"),
    "cancel_event": ("CancelEvent",),
    "atomic": (
        "atomic_write_bytes", "atomic_write_text", "atomic_writer", "fsync_directory",
        "remove_stale_temporaries",
    ),
    "errors": (
        "ContextLengthExceeded", "ConversationNotFound", "DocumentError", "DownloadError", "InglenookError",
        "InvalidRequest", "JobCancelled", "ModelLoadError", "ModelNotFound", "ModelTooLarge", "PortInUse",
        "QueueFull", "ServerError", "StateFileInvalid", "StorageUnavailable", "StoreError",
        "UnsupportedCpu",
    ),
    "generation_events": (
        "Chunk", "Finished", "GenerationEvent", "PromptProgress", "Timings", "TokenLogprob", "Usage",
    ),
    "gguf": ("FILE_TYPES", "GGUFInfo", "GGUF_MAGIC", "parse_gguf_header", "read_gguf"),
    "gguf_vocabulary": ("check_vocabulary",),
    "images": (
        "ImageInput", "MAX_IMAGE_BYTES", "decode_image", "image_from_base64", "image_from_data_url", "image_from_rgb",
        "read_image_file",
    ),
    "jobs": (
        "API", "BACKGROUND", "EMPTY", "ENDED", "EmbedJob", "Embeddings", "ExclusiveJob", "ExclusiveResult",
        "FinishedObserver", "GenerateJob", "JOB_DONE", "Job", "JobHandle", "ModelListener", "describe_job",
    ),
    "lora": (
        "AdapterError", "AdapterHeader", "LoraSet", "LoraUse", "MAX_SCALE", "NO_LORA", "adapter_header",
        "check_compatible",
    ),
    "model_record": ("ModelRecord", "fingerprint_file"),
    "projector": (
        "ProjectorInfo", "ProjectorMismatch", "check_pair", "find_projector", "is_projector_name",
        "read_projector",
    ),
    "protocol": (
        "AssistantMessage", "ChatChoice", "ChatCompletion", "ChatCompletionChunk",
        "ChatCompletionProgressChunk", "ChatCompletionRequest", "ChatMessage", "ChoiceDelta",
        "ChoiceLogprobs", "ChunkChoice", "Completion", "ContentPart", "CompletionChoice", "CompletionLogprobs",
        "CompletionProgressChunk", "CompletionRequest", "DeltaFunctionCall", "DeltaToolCall",
        "EmbeddingData", "EmbeddingList", "EmbeddingRequest", "EmbeddingUsage", "ErrorDetail",
        "ErrorResponse", "FunctionCall", "FunctionDefinition", "JsonSchemaFormat", "LoraRequest",
        "NamedFunction", "NamedToolChoice", "PromptProgressInfo", "PromptTokensDetails", "RequestModel",
        "ResponseFormat", "ResponseFunctionCall", "ResponseModel", "ResponseToolCall", "SamplingFields",
        "ServerTimings", "TokenLogprobInfo", "Tool", "ToolCall", "TopLogprob", "UsageInfo",
    ),
    "sampling": ("SamplingParams",),
    "units": ("human_count", "human_duration", "human_size"),
}

__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .atomic import (
        atomic_write_bytes as atomic_write_bytes, atomic_write_text as atomic_write_text,
        atomic_writer as atomic_writer, fsync_directory as fsync_directory,
        remove_stale_temporaries as remove_stale_temporaries,
    )
    from .bounded_files import (
        blocks_bounded as blocks_bounded, open_bounded as open_bounded, read_bounded as read_bounded,
    )
    from .cancel_event import CancelEvent as CancelEvent
    from .errors import (
        ContextLengthExceeded as ContextLengthExceeded, ConversationNotFound as ConversationNotFound,
        DocumentError as DocumentError, DownloadError as DownloadError, InglenookError as InglenookError, InvalidRequest as InvalidRequest,
        JobCancelled as JobCancelled, ModelLoadError as ModelLoadError, ModelNotFound as ModelNotFound,
        ModelTooLarge as ModelTooLarge, PortInUse as PortInUse, QueueFull as QueueFull,
        ServerError as ServerError, StateFileInvalid as StateFileInvalid,
        StorageUnavailable as StorageUnavailable, StoreError as StoreError, UnsupportedCpu as UnsupportedCpu,
    )
    from .gguf_vocabulary import check_vocabulary as check_vocabulary
    from .generation_events import (
        Chunk as Chunk, Finished as Finished, GenerationEvent as GenerationEvent,
        PromptProgress as PromptProgress, Timings as Timings, TokenLogprob as TokenLogprob, Usage as Usage,
    )
    from .gguf import (
        FILE_TYPES as FILE_TYPES, GGUF_MAGIC as GGUF_MAGIC, GGUFInfo as GGUFInfo,
        parse_gguf_header as parse_gguf_header, read_gguf as read_gguf,
    )
    from .images import (
        MAX_IMAGE_BYTES as MAX_IMAGE_BYTES, ImageInput as ImageInput, decode_image as decode_image,
        image_from_base64 as image_from_base64, image_from_data_url as image_from_data_url,
        image_from_rgb as image_from_rgb, read_image_file as read_image_file,
    )
    from .jobs import (
        API as API, BACKGROUND as BACKGROUND, EMPTY as EMPTY, ENDED as ENDED, JOB_DONE as JOB_DONE,
        EmbedJob as EmbedJob, Embeddings as Embeddings, ExclusiveJob as ExclusiveJob,
        ExclusiveResult as ExclusiveResult, FinishedObserver as FinishedObserver, GenerateJob as GenerateJob,
        Job as Job, JobHandle as JobHandle, ModelListener as ModelListener, describe_job as describe_job,
    )
    from .lora import (
        MAX_SCALE as MAX_SCALE, NO_LORA as NO_LORA, AdapterError as AdapterError,
        AdapterHeader as AdapterHeader, LoraSet as LoraSet, LoraUse as LoraUse,
        adapter_header as adapter_header, check_compatible as check_compatible,
    )
    from .model_record import ModelRecord as ModelRecord, fingerprint_file as fingerprint_file
    from .projector import (
        ProjectorInfo as ProjectorInfo, ProjectorMismatch as ProjectorMismatch, check_pair as check_pair,
        find_projector as find_projector, is_projector_name as is_projector_name,
        read_projector as read_projector,
    )
    from .protocol import (
        AssistantMessage as AssistantMessage, ChatChoice as ChatChoice, ChatCompletion as ChatCompletion,
        ChatCompletionChunk as ChatCompletionChunk,
        ChatCompletionProgressChunk as ChatCompletionProgressChunk,
        ChatCompletionRequest as ChatCompletionRequest, ChatMessage as ChatMessage,
        ChoiceDelta as ChoiceDelta, ChoiceLogprobs as ChoiceLogprobs, ChunkChoice as ChunkChoice,
        Completion as Completion, CompletionChoice as CompletionChoice, ContentPart as ContentPart,
        CompletionLogprobs as CompletionLogprobs, CompletionProgressChunk as CompletionProgressChunk,
        CompletionRequest as CompletionRequest, DeltaFunctionCall as DeltaFunctionCall,
        DeltaToolCall as DeltaToolCall, EmbeddingData as EmbeddingData, EmbeddingList as EmbeddingList,
        EmbeddingRequest as EmbeddingRequest, EmbeddingUsage as EmbeddingUsage, ErrorDetail as ErrorDetail,
        ErrorResponse as ErrorResponse, FunctionCall as FunctionCall,
        FunctionDefinition as FunctionDefinition, JsonSchemaFormat as JsonSchemaFormat,
        LoraRequest as LoraRequest, NamedFunction as NamedFunction, NamedToolChoice as NamedToolChoice,
        PromptProgressInfo as PromptProgressInfo, PromptTokensDetails as PromptTokensDetails,
        RequestModel as RequestModel, ResponseFormat as ResponseFormat,
        ResponseFunctionCall as ResponseFunctionCall, ResponseModel as ResponseModel,
        ResponseToolCall as ResponseToolCall, SamplingFields as SamplingFields,
        ServerTimings as ServerTimings, TokenLogprobInfo as TokenLogprobInfo, Tool as Tool,
        ToolCall as ToolCall, TopLogprob as TopLogprob, UsageInfo as UsageInfo,
    )
    from .sampling import SamplingParams as SamplingParams
    from .units import human_count as human_count, human_duration as human_duration, human_size as human_size
