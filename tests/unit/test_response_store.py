"""Stored Responses API results in the real SQLite store: chains, deletion, pruning, restarts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inglenook.engine.api.responses.store import PreviousResponseNotFound, ResponseStore
from inglenook.engine.base.errors import InvalidRequest
from inglenook.engine.store.store import Store


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def response(rid: str, answer: str, previous: str | None = None) -> dict[str, Any]:
    output = [{"id": f"msg_{rid}", "type": "message", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": answer, "annotations": [], "logprobs": []}]}]
    return {"id": rid, "object": "response", "model": "m", "previous_response_id": previous, "output": output}


def texts(items: list[dict[str, Any]]) -> list[str]:
    return [item["content"][0]["text"] for item in items]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "inglenook.db")
    yield opened
    opened.close()


def test_a_chain_is_rebuilt_oldest_first_and_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "inglenook.db"
    first = Store(path)
    stored = ResponseStore(first)
    stored.save(response("r1", "Hello Ada."), [user("I am Ada.")])
    stored.save(response("r2", "Ada.", previous="r1"), [user("Who am I?")])
    first.close()

    reopened = Store(path)
    try:
        assert "m004_api_responses" in reopened.applied_migrations()
        again = ResponseStore(reopened)
        assert texts(again.history("r2")) == ["I am Ada.", "Hello Ada.", "Who am I?", "Ada."]
        assert again.get("r2").response["previous_response_id"] == "r1"
        assert again.get("nothing") is None
    finally:
        reopened.close()


def test_a_missing_link_names_itself(store: Store) -> None:
    stored = ResponseStore(store)
    stored.save(response("r1", "a"), [user("x")])
    stored.save(response("r2", "b", previous="r1"), [user("y")])
    assert stored.delete("r1") and not stored.delete("r1")
    with pytest.raises(PreviousResponseNotFound) as caught:
        stored.history("r2")
    assert "'r1'" in str(caught.value) and caught.value.param == "previous_response_id"
    with pytest.raises(PreviousResponseNotFound):
        stored.history("never-stored")


def test_a_loop_is_refused_instead_of_walked_forever(store: Store) -> None:
    stored = ResponseStore(store)
    stored.save(response("a", "1", previous="b"), [user("x")])
    stored.save(response("b", "2", previous="a"), [user("y")])
    with pytest.raises(InvalidRequest) as caught:
        stored.history("a")
    assert "loops" in str(caught.value)


def test_only_the_newest_responses_are_kept(store: Store) -> None:
    stored = ResponseStore(store, keep=2)
    for n in range(4):
        stored.save(response(f"r{n}", str(n)), [user(str(n))])
    assert [stored.get(f"r{n}") is not None for n in range(4)] == [False, False, True, True]


def test_items_are_found_by_id_for_item_references(store: Store) -> None:
    stored = ResponseStore(store)
    given = {**user("with an id"), "id": "msg_client_1"}
    stored.save(response("resp_a", "first answer"), [user("no id"), given])
    stored.save(response("resp_b", "second answer", previous="resp_a"), [user("later")])
    assert texts([stored.find_item("msg_resp_a")]) == ["first answer"]  # an output item
    assert stored.find_item("msg_client_1") == given  # an input item sent with its id
    assert texts([stored.find_item("item_resp_a_0")]) == ["no id"]  # as input_items lists it
    assert stored.find_item("item_resp_a_1") is None  # that one has an id of its own
    assert stored.find_item("item_resp_a_7") is None and stored.find_item("msg_nowhere") is None
    stored.delete("resp_a")
    assert stored.find_item("msg_resp_a") is None
