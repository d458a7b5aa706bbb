"""Holding the engine's step shut, so a test sees an admitted prompt that no step has read."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from inglenook.engine.runtime.model import LoadedModel


def hold_steps(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Every ``LoadedModel.step`` reads nothing until the returned event is set; set it to let
    them run.

    A held step returns at once, having fed no token, rather than blocking: the scheduler's
    thread must stay free to admit the jobs that arrive meanwhile (a blocked step would hold
    back every admission after the first, and the test would depend on whether the model's
    load finished before or after the last job was submitted)."""
    gate = threading.Event()
    step = LoadedModel.step

    def held_step(self: LoadedModel, sequences: list[Any], prefill_budget: int) -> int:
        if not gate.wait(timeout=0.02):
            return 0  # an empty step: nothing read, nothing sampled
        return step(self, sequences, prefill_budget)

    monkeypatch.setattr(LoadedModel, "step", held_step)
    return gate
