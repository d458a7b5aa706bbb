"""Issue 14, finding 10: a GGUF that llama.cpp refuses is marked with the reason, not listed as fine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from inglenook.engine import Engine, ModelLoadError, Paths
from tests.gguf_writer import write_gguf

pytestmark = pytest.mark.integration


def test_a_refused_model_is_marked_until_it_loads(home: Path) -> None:
    paths = Paths.default().ensure()
    # Valid GGUF to our reader, refused by llama.cpp (no llama.embedding_length, no layers).
    write_gguf(paths.models / "refused-F32.gguf")
    with Engine(paths) as engine:
        record = engine.registry.resolve("refused:f32")
        assert record.usable
        with pytest.raises(ModelLoadError):
            list(engine.scheduler.load(record.id).events())
        marked = engine.registry.get(record.id)
        assert not marked.usable and "could not load" in (marked.problem or "")
        starter = engine.registry.resolve("smollm2")
        list(engine.scheduler.load(starter.id).events())
        assert engine.registry.get(starter.id).usable
    listed = subprocess.run([sys.executable, "-m", "inglenook.cli", "list"], capture_output=True, text=True,
                            timeout=300, env={**os.environ, "INGLENOOK_HOME": str(home)})
    assert "refused:f32 cannot be used: llama.cpp could not load" in listed.stdout
