"""Issue 14, finding 13 in the API: a database that cannot be written is a 503 in the API's
own error shape, and nothing already saved is lost."""

from __future__ import annotations

import httpx
import pytest

from inglenook.engine.api.server import ApiServer
from inglenook.engine.core.engine import Engine
from tests.api.conftest import STARTER

pytestmark = pytest.mark.api


def test_a_database_that_cannot_be_written_is_a_503(engine: Engine, server: ApiServer) -> None:
    body = {"model": STARTER, "input": "Say hi.", "max_output_tokens": 16, "temperature": 0}
    first = httpx.post(f"{server.url}/responses", json=body, timeout=300)
    assert first.status_code == 200, first.text
    response_id = first.json()["id"]
    conn = engine.store.db.conn
    with engine.store.reading():
        conn.execute("PRAGMA query_only = ON")  # SQLite's own SQLITE_READONLY from here on
    try:
        refused = httpx.delete(f"{server.url}/responses/{response_id}", timeout=60)
    finally:
        with engine.store.reading():
            conn.execute("PRAGMA query_only = OFF")
    assert refused.status_code == 503, refused.text
    error = refused.json()["error"]
    assert error["type"] == "server_error" and error["code"] == "storage_unavailable"
    assert "/" not in error["message"]  # no local path in the body
    kept = httpx.get(f"{server.url}/responses/{response_id}", timeout=60)
    assert kept.status_code == 200 and kept.json()["id"] == response_id  # nothing lost
