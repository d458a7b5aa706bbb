"""The scheduler's rule for LoRA adapters (they apply to a whole context): a step only holds
sequences with the same adapter set, a job with another set starts once the running ones end
and is not starved by later jobs of the running set; and what a LoraSet's key says."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from inglenook.engine.base.jobs import GenerateJob
from inglenook.engine.base.lora import AdapterError, LoraSet, LoraUse
from inglenook.engine.base.model_record import ModelRecord
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.runtime.model_loading import LoadOptions
from inglenook.engine.scheduling.scheduler import Scheduler
from tests.fakes import FakeModel

X = LoraSet.of([LoraUse("style", Path("/a/style.gguf"), "fp-style", 1.0)])
Y = LoraSet.of([LoraUse("style", Path("/a/style.gguf"), "fp-style", 0.5)])


def _record(model_id: str) -> ModelRecord:
    return ModelRecord(model_id, Path(f"/models/{model_id}.gguf"), model_id, "llama", "Q4_0", 1, 256, 1, "fp-" + model_id, "scan")


@pytest.fixture()
def scheduler():
    FakeModel.step_delay_s = 0.0
    sched = Scheduler(_record, lambda: LoadOptions(context_size=256, parallel=4), idle_unload_s=0, loader=FakeModel)
    yield sched
    sched.close()


def job(lora: LoraSet, words: int = 4) -> GenerateJob:
    return GenerateJob("m:q4_0", text="hello", sampling=SamplingParams(max_tokens=words), lora=lora)


def test_a_step_never_mixes_adapter_sets_and_a_waiting_set_is_not_starved(scheduler: Scheduler) -> None:
    list(scheduler.load("m:q4_0"))
    handles = scheduler.submit_many([job(X), job(Y), job(X), job(LoraSet())])
    texts = [h.result()[0] for h in handles]
    assert all(texts)
    model = scheduler.loaded_models()[0]
    assert isinstance(model, FakeModel)
    # Each step ran one set; the sets ran in the order they were asked for: the second X job
    # waited behind the Y job instead of joining the first X job's steps and starving Y.
    runs = [key for key, _steps in itertools.groupby(model.step_loras)]
    assert runs == [X.key, Y.key, X.key, ""]
    assert all(len(slots) == 1 for slots in model.steps)


def test_jobs_with_the_same_set_share_steps(scheduler: Scheduler) -> None:
    list(scheduler.load("m:q4_0"))
    handles = scheduler.submit_many([job(X), job(X, words=6)])
    for handle in handles:
        handle.result()
    model = scheduler.loaded_models()[0]
    assert isinstance(model, FakeModel)
    assert max(len(slots) for slots in model.steps) == 2
    assert set(model.step_loras) == {X.key}


def test_the_key_is_the_same_for_equal_sets_and_leaves_out_zero_scales() -> None:
    a = LoraUse("a", Path("/a.gguf"), "fp-a", 1.0)
    b = LoraUse("b", Path("/b.gguf"), "fp-b", 0.25)
    assert LoraSet.of([a, b]).key == LoraSet.of([b, a]).key
    assert LoraSet.of([a, LoraUse("b", Path("/b.gguf"), "fp-b", 0.0)]).key == LoraSet.of([a]).key
    assert LoraSet.of([LoraUse("a", Path("/a.gguf"), "fp-a", 0.0)]).key == "" == LoraSet().key
    assert LoraSet.of([a]).key != LoraSet.of([LoraUse("a", Path("/a.gguf"), "fp-a", 0.5)]).key
    assert not LoraSet.of([LoraUse("a", Path("/a.gguf"), "fp-a", 0.0)])


@pytest.mark.parametrize("scale", [float("nan"), float("inf"), 17.0, True, "1"])
def test_bad_scales_are_refused(scale: object) -> None:
    with pytest.raises(AdapterError) as refused:
        LoraSet.of([LoraUse("a", Path("/a.gguf"), "fp-a", scale)])  # type: ignore[arg-type]
    assert refused.value.param == "lora"
