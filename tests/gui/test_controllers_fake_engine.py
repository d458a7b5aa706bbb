"""Controllers against a small fake engine (no model, no store): AppEngine is all they see,
so these run in milliseconds beside the end-to-end window tests."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import cast

import pytest

from inglenook.app.controllers.model_list import ModelList
from inglenook.app.services.app_engine import AppEngine
from inglenook.app.services.workers import Workers
from inglenook.engine import REMOTE_SOURCE, InglenookError, ModelNotFound, ModelRecord

pytestmark = pytest.mark.gui
WAIT_MS = 5_000


def _record(model_id: str, source: str = "local") -> ModelRecord:
    return ModelRecord(id=model_id, path=Path(f"/models/{model_id}.gguf"), name=model_id, architecture="llama",
                       quantization="Q4_K_M", parameter_count=1, context_length=2048, size_bytes=1, fingerprint="f",
                       source=source)


class FakeEngine:
    """What ModelList asks of AppEngine, answered from lists; remote engines wait on an event."""

    def __init__(self, local: list[ModelRecord], remote: list[ModelRecord], default: str | None) -> None:
        self.local, self.remote, self.default = local, remote, default
        self.remote_may_answer = threading.Event()
        self.loads: list[str] = []
        self.removed: list[str] = []

    def models(self) -> list[ModelRecord]:
        return list(self.local)

    def default_model_id(self) -> str:
        if self.default is None:
            raise ModelNotFound("no models are installed")
        return self.default

    def load_plans(self) -> dict[str, object]:
        return {}

    def base_models(self) -> set[str]:
        return {"base"} & {m.id for m in self.local}

    def remote_models(self) -> list[ModelRecord]:
        self.remote_may_answer.wait(WAIT_MS / 1000)
        return list(self.remote)

    def load_model(self, model_id: str) -> None:
        if model_id == "broken":
            raise InglenookError("broken cannot load")
        self.loads.append(model_id)

    def remove_model(self, model_id: str) -> None:
        self.removed.append(model_id)
        self.local = [m for m in self.local if m.id != model_id]


@pytest.fixture
def workers(qapp):
    lanes = Workers()
    yield lanes
    lanes.close()


def _model_list(engine: FakeEngine, workers: Workers) -> ModelList:
    return ModelList(cast(AppEngine, engine), workers)  # the fake answers only what ModelList asks


def test_local_models_come_first_and_do_not_wait_for_remote_engines(qtbot, workers) -> None:
    engine = FakeEngine([_record("smol"), _record("base")], [_record("office/gpt", REMOTE_SOURCE + "office")], "smol")
    models = _model_list(engine, workers)
    with qtbot.waitSignal(models.local_read, timeout=WAIT_MS):
        models.refresh()
    assert [m.id for m in models.models] == ["smol", "base"]  # the network has not answered yet
    assert models.default_model == "smol" and models.base_models == {"base"} and models.local_loaded
    engine.remote_may_answer.set()
    qtbot.waitUntil(lambda: len(models.models) == 3, timeout=WAIT_MS)
    assert models.models[-1].id == "office/gpt" and ModelList.is_remote(models.models[-1])
    assert models.is_installed("office/gpt") and not models.is_installed("missing")


def test_nothing_installed_means_no_default_not_a_failure(qtbot, workers) -> None:
    engine = FakeEngine([], [], None)
    engine.remote_may_answer.set()
    models = _model_list(engine, workers)
    models.failed.connect(lambda exc: pytest.fail(f"no failure expected: {exc}"))
    with qtbot.waitSignal(models.local_read, timeout=WAIT_MS):
        models.refresh()
    assert models.models == [] and models.default_model is None


def test_loading_skips_remote_models_and_reports_a_refusal(qtbot, workers) -> None:
    engine = FakeEngine([_record("smol"), _record("broken")], [_record("office/gpt", REMOTE_SOURCE + "office")], "smol")
    engine.remote_may_answer.set()
    models = _model_list(engine, workers)
    models.refresh()
    qtbot.waitUntil(lambda: len(models.models) == 3, timeout=WAIT_MS)
    models.load("office/gpt")  # a remote engine loads its own models
    models.load("smol")
    assert engine.loads == ["smol"]
    with qtbot.waitSignal(models.failed, timeout=WAIT_MS) as failed:
        models.load("broken")
    assert isinstance(failed.args[0], InglenookError)


def test_removing_a_model_reads_the_list_again(qtbot, workers) -> None:
    engine = FakeEngine([_record("smol"), _record("other")], [], "smol")
    engine.remote_may_answer.set()
    models = _model_list(engine, workers)
    models.refresh()
    qtbot.waitUntil(lambda: len(models.models) == 2, timeout=WAIT_MS)
    models.remove("other")
    qtbot.waitUntil(lambda: [m.id for m in models.models] == ["smol"], timeout=WAIT_MS)
    assert engine.removed == ["other"]
