"""Holding the engine's step shut, so a test sees an admitted prompt that no step has read."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from inglenook.engine.runtime.model import LoadedModel


def hold_steps(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Every ``LoadedModel.step`` waits until the returned event is set (at most 300 s, so a
    failing test never leaves the engine's thread waiting for good). Set it to let them run."""
    gate = threading.Event()
    step = LoadedModel.step

    def held_step(self: LoadedModel, sequences: list[Any], prefill_budget: int) -> int:
        gate.wait(timeout=300)
        return step(self, sequences, prefill_budget)

    monkeypatch.setattr(LoadedModel, "step", held_step)
    return gate
