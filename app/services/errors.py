"""The one place that turns engine errors into messages a person can act on (rule 4 of docs/ARCHITECTURE.md).

Errors are mapped by type, never by matching message text. Each explanation names what
happened in plain words and offers the actions that help; the window wires the actions.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field

from inglenook.engine import (
    ContextLengthExceeded,
    DownloadError,
    InglenookError,
    InvalidRequest,
    LastCrash,
    ModelLoadError,
    ModelNotFound,
    PortInUse,
    QueueFull,
    ServerError,
    StorageUnavailable,
    StoreError,
)

# Action ids the window knows how to perform.
NEW_CHAT = "new_chat"
TRIM_OLDEST = "trim_oldest"
RETRY = "retry"
USE_DEFAULT_MODEL = "use_default_model"
OPEN_MODELS = "open_models"
OPEN_SETTINGS = "open_settings"
DISMISS = "dismiss"
OPEN_CRASH_LOG = "open_crash_log"


@dataclass
class Explanation:
    title: str
    text: str
    actions: list[tuple[str, str]] = field(default_factory=list)  # (action id, button label)
    detail: str = ""


def explain_crash(crash: LastCrash) -> Explanation:
    """The notice for a run that ended in a native crash (shown once, on the next start)."""
    actions = [(OPEN_CRASH_LOG, "Open the crash report")] if crash.fault_log is not None else []
    return Explanation(
        "Inglenook stopped unexpectedly last time",
        f"It was {crash.doing}. Everything saved before then is kept. If it happens again, "
        "the crash report helps: Settings → About has what to paste into a bug report.",
        actions,
        crash.fault_excerpt or crash.message(),
    )


def explain(exc: BaseException) -> Explanation:
    detail = str(exc)
    explanation = _explain_chat(exc, detail) or _explain_service(exc, detail)
    if explanation is not None:
        return explanation
    if isinstance(exc, InglenookError):
        return Explanation("Something went wrong", detail[:1].upper() + detail[1:], [(RETRY, "Try again")], detail)
    return Explanation(
        "Something unexpected went wrong",
        "Inglenook hit an internal error; details are in the log file.",
        [(DISMISS, "OK")],
        f"{exc.__class__.__name__}: {detail}",
    )


def _explain_chat(exc: BaseException, detail: str) -> Explanation | None:
    """What stops an answer: the context, the model, the queue, a setting."""
    if isinstance(exc, ContextLengthExceeded):
        size = f" of {exc.context_size} tokens" if exc.context_size else ""
        return Explanation(
            "This conversation no longer fits",
            f"The messages so far are longer than the model's context{size}. Start a new chat, "
            "or drop the oldest messages and answer again.",
            [(NEW_CHAT, "New chat"), (TRIM_OLDEST, "Trim oldest messages")],
            detail,
        )
    if isinstance(exc, ModelNotFound):
        return Explanation(
            "The model for this chat is not installed",
            "This conversation used a model that is no longer on this computer. Continue with "
            "the default model, or open Models to get it back.",
            [(USE_DEFAULT_MODEL, "Use default model"), (OPEN_MODELS, "Open Models")],
            detail,
        )
    if isinstance(exc, ModelLoadError):
        return Explanation(
            "The model could not be loaded",
            "The file may be damaged, of an architecture this build cannot run, or too large "
            "for the memory available. Try another model, or fewer GPU layers in Settings.",
            [(USE_DEFAULT_MODEL, "Use default model"), (OPEN_SETTINGS, "Settings"), (RETRY, "Try again")],
            detail,
        )
    if isinstance(exc, QueueFull):
        return Explanation(
            "Inglenook is busy",
            "Too many answers are waiting (the API may be serving other programs). Try again in a moment.",
            [(RETRY, "Try again")],
            detail,
        )
    if isinstance(exc, InvalidRequest):
        return Explanation(
            "A chat setting is out of range",
            f"{detail[:1].upper()}{detail[1:]}. Adjust it in the chat settings panel.",
            [(DISMISS, "OK")],
            detail,
        )
    return None


def _explain_service(exc: BaseException, detail: str) -> Explanation | None:
    """What fails around the chat: downloads, the data folder, the API server."""
    if isinstance(exc, DownloadError):
        return _explain_download(exc, detail)
    if isinstance(exc, StorageUnavailable):
        return Explanation(
            "Inglenook cannot save right now",
            "The database cannot be written: the disk may be full, the file read-only, or another "
            "program may be using it. Nothing was lost: what was saved before is kept, and the "
            "database was left as it is. Free some space or close the other program, then try again.",
            [(RETRY, "Try again"), (DISMISS, "OK")],
            detail,
        )
    if isinstance(exc, StoreError):
        return Explanation(
            "Inglenook cannot save its data",
            "The data folder cannot be written (a full disk or missing permissions).",
            [(DISMISS, "OK")],
            detail,
        )
    if _is_port_in_use(exc):
        return Explanation(
            "The API port is already in use",
            "Another program is using the local API's port. Choose another port in Settings; "
            "the chat keeps working either way.",
            [(OPEN_SETTINGS, "Change port"), (DISMISS, "OK")],
            detail,
        )
    if isinstance(exc, ServerError):
        return Explanation(
            "The local API server could not start",
            f"{detail[:1].upper()}{detail[1:]}. The chat keeps working; check the API settings.",
            [(OPEN_SETTINGS, "API settings"), (DISMISS, "OK")],
            detail,
        )
    return None


def _causes(exc: BaseException) -> list[BaseException]:
    chain, seen = [], set()
    cause = exc.__cause__ or exc.__context__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    return chain


def _explain_download(exc: BaseException, detail: str) -> Explanation:
    """A DownloadError carries a sentence written for people; the title comes from what caused
    it (huggingface-hub's exception types, an OSError's errno), never from the message text."""
    import httpx  # noqa: PLC0415 — httpx and huggingface_hub load when a download failed, not at start
    from huggingface_hub.errors import (  # noqa: PLC0415
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    sentence = f"{detail[:1].upper()}{detail[1:]}"
    sentence = sentence if sentence.endswith(".") else sentence + "."
    causes = _causes(exc)
    if any(isinstance(c, GatedRepoError) for c in causes) or any(
        isinstance(c, HfHubHTTPError) and c.response is not None and c.response.status_code in (401, 403)
        for c in causes
    ):
        return Explanation("This model needs permission", sentence, [(DISMISS, "OK")], detail)
    if any(isinstance(c, (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError)) for c in causes):
        return Explanation("Not found on Hugging Face", sentence, [(DISMISS, "OK")], detail)
    if any(isinstance(c, OSError) and c.errno == errno.ENOSPC for c in causes):
        return Explanation("The disk is full", "The download stopped because the disk filled up. Free some "
                           "space, then resume it from the Downloads list.", [(DISMISS, "OK")], detail)
    if any(isinstance(c, OfflineModeIsEnabled) for c in causes):
        return Explanation("Offline mode is on", "Inglenook is set to stay offline (the HF_HUB_OFFLINE "
                           "environment variable), so it does not contact Hugging Face. Installed models "
                           "keep working; unset it to search and download.", [(DISMISS, "OK")], detail)
    if any(isinstance(c, httpx.TimeoutException) for c in causes):
        return Explanation("Hugging Face did not answer", "Hugging Face took too long to answer. The network "
                           "may be slow or the site busy; try again in a moment.", [(RETRY, "Try again")], detail)
    if any(isinstance(c, httpx.HTTPError) for c in causes):
        # The exception's own words ("ConnectError: [Errno -2] …") go to the details, not the sentence.
        return Explanation("Hugging Face cannot be reached", "This computer could not connect to Hugging Face: "
                           "it may be offline, or a firewall or proxy may block it. Installed models keep "
                           "working.", [(RETRY, "Try again")], detail)
    return Explanation("The download did not finish", sentence, [(RETRY, "Try again")], detail)


def _is_port_in_use(exc: BaseException) -> bool:
    """The server's own error, or the operating system's (a bind that failed before it was wrapped)."""
    if isinstance(exc, PortInUse):
        return True
    return isinstance(exc, OSError) and exc.errno in (48, 98, 10048)  # EADDRINUSE on macOS, Linux, Windows
