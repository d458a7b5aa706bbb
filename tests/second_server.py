"""A second Inglenook, headless, with its own home, serving on another loopback port: the
remote engine the remote-engine tests (window and engine) talk to."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from inglenook.engine.api.server import ApiServer
from inglenook.engine.core.engine import Engine
from inglenook.engine.store.paths import Paths

REMOTE_KEY = "remote-secret"


@contextmanager
def second_inglenook(home: Path, api_key: str = REMOTE_KEY) -> Iterator[ApiServer]:
    engine = Engine(Paths.under(home))
    engine.update_settings(context_size=1024)
    server = ApiServer(engine, port=0, api_key=api_key)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        engine.close()
