"""Issue 14, finding 10: the Models page says why a model cannot be loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook.app.pages.models.installed import ModelRow
from inglenook.engine.models.registry import ModelRegistry
from inglenook.engine.store.paths import Paths
from inglenook.engine.store.store import Store
from tests.gguf_writer import write_gguf

pytestmark = pytest.mark.gui


def test_a_row_says_why_its_model_cannot_be_loaded(qtbot, home: Path) -> None:
    paths = Paths.default().ensure()
    registry = ModelRegistry(Store(paths.database), paths)
    refused = registry.register_file(write_gguf(home / "tiny-F32.gguf"))
    fine = registry.register_file(write_gguf(home / "other-F32.gguf", metadata={"general.name": "Other"}))
    registry.mark_problem(refused.id, "llama.cpp could not load tiny:f32")
    row = ModelRow(registry.get(refused.id), loaded=False)
    qtbot.addWidget(row)
    assert row.problem.text() == "Cannot be loaded: llama.cpp could not load tiny:f32"
    healthy = ModelRow(registry.get(fine.id), loaded=False)
    qtbot.addWidget(healthy)
    assert not hasattr(healthy, "problem")
