"""LoRA adapters on a loaded model's context, through llama.cpp's adapter API.

An adapter is loaded once per model (``llama_adapter_lora_init``: its tensors next to the
model's weights) and kept until the model closes; llama.cpp frees the ones still attached
when the model is freed. Which adapters apply, with which scales, is a property of the
whole context (``llama_set_adapters_lora``, every sequence of a step alike), so the
scheduler only switches the set while no sequence runs. Switching costs no reload: the
next decode rebuilds its graph with the new set.
"""

from __future__ import annotations

import ctypes
import logging
from pathlib import Path
from typing import Any

from ..base import (
    NO_LORA, AdapterError, GGUFInfo, LoraSet, LoraUse, adapter_header, check_compatible, read_gguf,
)

log = logging.getLogger(__name__)


class ContextAdapters:
    """The adapters loaded for one model, and the set its context applies now."""

    def __init__(self, lib: Any, model: Any, context: Any, model_info: GGUFInfo, model_id: str) -> None:
        self._lib = lib
        self._model = model
        self._context = context
        self._info = model_info
        self._model_id = model_id
        self._handles: dict[str, Any] = {}  # by content fingerprint
        self.active: LoraSet = NO_LORA

    @property
    def key(self) -> str:
        return self.active.key

    def apply(self, wanted: LoraSet) -> None:
        """Make ``wanted`` the context's set (loading adapters first seen); an adapter that does
        not fit the model is ``AdapterError`` and the set in place stays as it was."""
        if wanted.key == self.active.key:
            return
        handles = [self._handle(use) for use in wanted.uses]
        count = len(handles)
        lib = self._lib
        if count:
            array = (lib.llama_adapter_lora_p_ctypes * count)(*handles)
            scales = (ctypes.c_float * count)(*(use.scale for use in wanted.uses))
            status = lib.llama_set_adapters_lora(self._context, array, count, scales)
        else:
            status = lib.llama_set_adapters_lora(self._context, None, 0, None)
        if status != 0:
            raise AdapterError(f"llama.cpp could not apply {wanted.describe()} to {self._model_id}")
        log.info("%s now runs with %s", self._model_id, wanted.describe())
        self.active = wanted

    def _handle(self, use: LoraUse) -> Any:
        handle = self._handles.get(use.fingerprint)
        if handle is not None:
            return handle
        self._check(use.path, use.adapter_id)
        handle = self._lib.llama_adapter_lora_init(self._model, str(use.path).encode())
        if not handle:
            raise AdapterError(f"llama.cpp refused the adapter {use.adapter_id} for {self._model_id}; "
                               "the server's log says why")
        self._handles[use.fingerprint] = handle
        return handle

    def _check(self, path: Path, adapter_id: str) -> None:
        """Decide here what llama.cpp would only log: the file is a LoRA for this model."""
        try:
            info = read_gguf(path)
        except Exception as exc:  # noqa: BLE001 — a vanished or damaged file: the adapter cannot be used
            raise AdapterError(f"the adapter {adapter_id} cannot be read: {exc}") from None
        check_compatible(adapter_header(info, adapter_id), adapter_id, self._info, self._model_id)

    @property
    def loaded(self) -> int:
        """How many adapters this model holds (attached or not)."""
        return len(self._handles)
