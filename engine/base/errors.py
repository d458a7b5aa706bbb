"""Typed errors raised by the engine.

Every failure a caller can act on has its own class, so front ends map errors by type
(never by matching message text). Messages are written for people and never contain
file-system paths unless the path is the user's own input.
"""

from __future__ import annotations


class InglenookError(Exception):
    """Base class for every error the engine raises on purpose."""

    #: A short machine-readable code, used by the HTTP API's error bodies.
    code: str = "internal_error"


class InvalidRequest(InglenookError):
    """A request's parameters are out of range or of the wrong type."""

    code = "invalid_request"

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class ModelNotFound(InglenookError):
    """No local model matches the given id, alias or path."""

    code = "model_not_found"


class ModelLoadError(InglenookError):
    """A model file is missing, not GGUF, damaged, or llama.cpp refused it."""

    code = "model_load_error"


class ModelTooLarge(ModelLoadError):
    """The model's estimated memory is over the memory budget for models, even alone."""

    code = "model_too_large"


class UnsupportedCpu(ModelLoadError):
    """No llama.cpp CPU build in this installation can run on this processor (no AVX2, say).

    Raised before any native code runs, so the process never dies of an illegal instruction.
    """

    code = "unsupported_cpu"


class ContextLengthExceeded(InglenookError):
    """The prompt plus the requested completion does not fit in the context window."""

    code = "context_length_exceeded"

    def __init__(self, message: str, prompt_tokens: int = 0, context_size: int = 0) -> None:
        super().__init__(message)
        self.prompt_tokens = prompt_tokens
        self.context_size = context_size


class DocumentError(InvalidRequest):
    """A document cannot be read: a format Inglenook does not convert, a damaged or encrypted
    file, one over the size or time limits, or one without text (a scanned PDF). The message
    says which, in words a person can act on; the API answers 400 with ``param="file"``."""

    code = "document_error"

    def __init__(self, message: str, param: str | None = "file") -> None:
        super().__init__(message, param)


class DownloadError(InglenookError):
    """A download failed, was refused by the hub, or did not verify."""

    code = "download_error"


class StoreError(InglenookError):
    """The data directory or the database cannot be used."""

    code = "store_error"


class StorageUnavailable(StoreError):
    """The database is sound but cannot be used now: the disk is full, the file or folder is
    read-only, or another program holds a lock on it.

    Unlike damage, nothing is set aside or replaced: the file is left as it is, and the same
    action works again once the cause is gone. The API answers 503; the app shows a dialog.
    """

    code = "storage_unavailable"


class ConversationNotFound(InglenookError):
    """No stored conversation has the given id."""

    code = "conversation_not_found"


class QueueFull(InglenookError):
    """The scheduler's queue is full; the caller should retry later."""

    code = "queue_full"

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class JobCancelled(InglenookError):
    """The job was cancelled before it produced its result."""

    code = "cancelled"


class ServerError(InglenookError):
    """The local API server cannot start (e.g. an unsafe bind without an API key) or is stopping."""

    code = "server_error"


class PortInUse(ServerError):
    """Another program already listens on the API server's address and port."""

    code = "port_in_use"

    def __init__(self, message: str, host: str = "", port: int = 0) -> None:
        super().__init__(message)
        self.host = host
        self.port = port


class StateFileInvalid(InglenookError):
    """A saved prompt-cache state is damaged, truncated, or made for another model or build.

    The prefix cache catches it, logs it and prefills the prompt instead; it never reaches
    a user.
    """

    code = "state_file_invalid"
