"""What every API family shares: the ``ApiService`` and request submission, requests turned
into jobs, runs, error shapes, security, keys and their limits, request bodies and connections.

May import: base, core, documents, models, runtime, scheduling, speech, store, text, tools, usage.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...base import lazy_door

# Which module defines each name other packages (or the front door) use. Keep in step with
# the TYPE_CHECKING block below, which is what type checkers read (a test compares them).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "anthropic_errors": ("anthropic_error", "anthropic_error_response", "is_messages_path"),
    "api_engine": ("ApiEngine",),
    "bodies": ("check_json_value",),
    "connections": ("DEFAULT_MAX_CONNECTIONS", "DEFAULT_READ_TIMEOUT_S", "guarded_h11"),
    "documents": ("file_part", "hoist_documents"),
    "errors": ("ApiError", "error_body", "error_for"),
    "image_fetch": ("fetch_image", "fetched_images", "public_addresses", "refused_reason"),
    "key_limits": ("GENERATION_PATHS", "KeyTraffic", "stamp_client"),
    "keys": ("ApiKeyRecord", "ApiKeys", "KeyLimits"),
    "requests": ("GenerationPlan", "ModelNames", "chat_plan", "completion_plan", "looks_like_path"),
    "responses": ("Meta", "chat_completion", "chat_stream", "completion", "completion_stream", "keepalive"),
    "runs": ("KEEPALIVE_S", "Run", "cancelled_on_disconnect"),
    "security": ("Gate", "is_loopback_host", "replay_body", "send_error"),
    "service": (
        "ApiService", "DEFAULT_STUCK_AFTER_S", "event_stream", "read_request", "run_plan", "submitted",
        "tag_jobs",
    ),
}

__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .anthropic_errors import (
        anthropic_error as anthropic_error, anthropic_error_response as anthropic_error_response,
        is_messages_path as is_messages_path,
    )
    from .api_engine import ApiEngine as ApiEngine
    from .bodies import check_json_value as check_json_value
    from .connections import (
        DEFAULT_MAX_CONNECTIONS as DEFAULT_MAX_CONNECTIONS, DEFAULT_READ_TIMEOUT_S as DEFAULT_READ_TIMEOUT_S,
        guarded_h11 as guarded_h11,
    )
    from .documents import file_part as file_part, hoist_documents as hoist_documents
    from .image_fetch import (
        fetch_image as fetch_image, fetched_images as fetched_images, public_addresses as public_addresses,
        refused_reason as refused_reason,
    )
    from .errors import ApiError as ApiError, error_body as error_body, error_for as error_for
    from .key_limits import (
        GENERATION_PATHS as GENERATION_PATHS, KeyTraffic as KeyTraffic, stamp_client as stamp_client,
    )
    from .keys import ApiKeyRecord as ApiKeyRecord, ApiKeys as ApiKeys, KeyLimits as KeyLimits
    from .requests import (
        GenerationPlan as GenerationPlan, ModelNames as ModelNames, chat_plan as chat_plan,
        completion_plan as completion_plan, looks_like_path as looks_like_path,
    )
    from .responses import (
        Meta as Meta, chat_completion as chat_completion, chat_stream as chat_stream,
        completion as completion, completion_stream as completion_stream, keepalive as keepalive,
    )
    from .runs import (
        KEEPALIVE_S as KEEPALIVE_S, Run as Run,
        cancelled_on_disconnect as cancelled_on_disconnect,
    )
    from .security import (
        Gate as Gate, is_loopback_host as is_loopback_host, replay_body as replay_body,
        send_error as send_error,
    )
    from .service import (
        DEFAULT_STUCK_AFTER_S as DEFAULT_STUCK_AFTER_S, ApiService as ApiService,
        event_stream as event_stream, read_request as read_request, run_plan as run_plan,
        submitted as submitted, tag_jobs as tag_jobs,
    )
