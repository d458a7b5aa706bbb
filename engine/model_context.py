"""The context a model is loaded with: its own setting, the app-wide one, or "auto".

The scheduler builds a loaded model through ``load_with_context``, so a per-model setting
(``Settings.model_context``) or the automatic choice (``fit.auto_context``: the model's
training context as far as free memory allows) reaches llama.cpp without the scheduler
knowing about either.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from .fit import ModelShape, auto_context, detect_machine
from .gguf_headers import header_of
from .registry import ModelRecord
from .runtime import LoadedModel, LoadOptions, ProgressCallback
from .settings import AUTO_CONTEXT, Settings

log = logging.getLogger(__name__)


def context_for(record: ModelRecord, settings: Settings, options: LoadOptions) -> int:
    """Tokens per sequence for ``record``: its setting, else the app's, else the auto choice."""
    wanted = settings.context_for(record.id)
    if wanted != AUTO_CONTEXT:
        return wanted
    info = header_of(record)
    chosen = auto_context(
        ModelShape.from_gguf(info), detect_machine(), info.context_length,
        parallel=options.parallel, kv_type=options.kv_cache_type, n_ubatch=options.batch_size,
    )
    log.info("context for %s: %d tokens per sequence (auto; trained for %s)", record.id, chosen, info.context_length)
    return chosen


def context_loader(settings: Callable[[], Settings]) -> Callable[..., LoadedModel]:
    """A scheduler ``loader`` that loads each model with the context chosen for it."""

    def load(record: ModelRecord, options: LoadOptions, progress: ProgressCallback | None = None) -> LoadedModel:
        options = dataclasses.replace(options, context_size=context_for(record, settings(), options))
        return LoadedModel(record, options, progress=progress)

    return load
