"""What a model's chat template renders (reasoning, tools) is read from its header once."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from pathlib import Path

import pytest

from inglenook.engine import Engine
from inglenook.engine.api.shared.requests import ModelNames
from inglenook.engine.base.gguf import GGUFInfo
from inglenook.engine.runtime import gguf_headers
from tests.integration.test_cli import STARTER


def test_requests_arriving_together_read_the_model_header_once(home, monkeypatch: pytest.MonkeyPatch) -> None:
    # Eight API requests for a model not read yet each parsed its whole header (0.25 s of
    # CPU apiece for SmolLM2's vocabulary), taking the CPU from the answers being decoded.
    reads: list[Path] = []
    real_read = gguf_headers.read_gguf

    def slow_counting_read(path: Path) -> GGUFInfo:
        reads.append(path)
        time.sleep(0.2)  # long enough for every request to arrive while the first one reads
        return real_read(path)

    with Engine() as engine:
        record = engine.registry.resolve(STARTER)
        monkeypatch.setattr(gguf_headers, "_headers", OrderedDict())  # nothing read yet
        monkeypatch.setattr(gguf_headers, "read_gguf", slow_counting_read)
        names = ModelNames(engine, strict=False)
        found = []
        requests = [threading.Thread(target=lambda: found.append(names.abilities(record))) for _ in range(8)]
        for request in requests:
            request.start()
        for request in requests:
            request.join(timeout=60)
    assert len(found) == 8 and len(set(map(id, found))) == 1
    assert reads == [record.path]
