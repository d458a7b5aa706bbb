"""The context rule: a context asked for is honoured past the training context, with a
warning; the automatic one stays within it (issue 33)."""

from __future__ import annotations

from inglenook.engine.runtime.model_loading import LoadOptions, context_per_sequence
from inglenook.engine.scheduling.model_context import LoadPlan


def test_an_explicit_context_past_training_is_honoured_with_a_warning() -> None:
    context, note = context_per_sequence(32768, 8192, explicit=True, model_id="m")
    assert context == 32768
    assert "32,768" in note and "8,192" in note


def test_an_automatic_or_default_context_stays_within_training() -> None:
    assert context_per_sequence(32768, 8192, explicit=False, model_id="m") == (8192, "")


def test_a_context_within_training_is_left_alone() -> None:
    assert context_per_sequence(4096, 8192, explicit=True, model_id="m") == (4096, "")
    assert context_per_sequence(4096, 8192, explicit=False, model_id="m") == (4096, "")


def test_an_unknown_training_context_takes_what_was_asked() -> None:
    assert context_per_sequence(4096, 0, explicit=False, model_id="m") == (4096, "")


def test_load_options_default_to_the_clamped_rule() -> None:
    assert LoadOptions().explicit_context is False


def _plan(context: int, trained: int | None, explicit: bool) -> LoadPlan:
    return LoadPlan("m", context, 1, "f16", 10**9, 8 * 10**9, trained_context=trained, explicit=explicit)


def test_the_load_plan_says_when_the_context_runs_past_training() -> None:
    plan = _plan(32768, 8192, explicit=True)
    assert plan.beyond_training
    assert "trained for 8,192 tokens" in plan.label
    assert "32,768 tokens" in plan.label


def test_the_load_plan_is_quiet_within_training_or_when_automatic() -> None:
    assert not _plan(4096, 8192, explicit=True).beyond_training
    assert "trained for" not in _plan(4096, 8192, explicit=True).label
    assert not _plan(8192, None, explicit=True).beyond_training
    assert not _plan(8192, 4096, explicit=False).beyond_training
