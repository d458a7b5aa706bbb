"""Stored Responses API results: what ``previous_response_id`` continues and ``GET`` returns.

Rows live in the application database (``Store``), table ``api/shared/responses`` (migration
``m004_api_responses``). Each row keeps the request's own input items and the response
object as it was returned; a chain is rebuilt by walking ``previous_response_id`` links,
so no row repeats the history before it. The oldest rows beyond ``keep`` are pruned on
write: clients such as the ``openai`` package store by default, and a long-running server
must not grow its database without bound.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass
from typing import Any

from ...base import InvalidRequest
from ...store import Store

log = logging.getLogger(__name__)

DEFAULT_KEEP = 5000
MAX_CHAIN = 10_000  # links followed at most; a longer chain is refused rather than walked forever
TABLE = "api_responses"
# How GET /v1/responses/{id}/input_items names an input item that came without an id.
LISTED_ITEM_ID = re.compile(r"item_(.+)_(\d+)")


class PreviousResponseNotFound(InvalidRequest):
    """``previous_response_id`` names a response this server does not hold (a 400, as OpenAI)."""

    code = "previous_response_not_found"


@dataclass(frozen=True)
class StoredResponse:
    id: str
    previous_response_id: str | None
    input_items: list[dict[str, Any]]
    response: dict[str, Any]

    @property
    def items(self) -> list[dict[str, Any]]:
        """This turn of the conversation: its input, then what the model answered."""
        return [*self.input_items, *self.response.get("output", [])]


class ResponseStore:
    """Saves, reads and deletes stored responses through the Store's own transactions.

    SQLite failures arrive as the Store's typed errors (``StorageUnavailable`` and the like).
    """

    def __init__(self, store: Store, keep: int = DEFAULT_KEEP) -> None:
        self.store = store
        self.keep = keep

    def save(self, response: dict[str, Any], input_items: list[dict[str, Any]]) -> None:
        row = {
            "id": response["id"],
            "previous_response_id": response.get("previous_response_id"),
            "model": response.get("model"),
            "input_items": json.dumps(input_items, ensure_ascii=False),
            "response": json.dumps(response, ensure_ascii=False),
            "created_at": time.time(),
        }
        with self.store.writing() as conn:
            conn.execute(
                f"INSERT OR REPLACE INTO {TABLE} (id, previous_response_id, model, input_items, response, created_at) "
                "VALUES (:id, :previous_response_id, :model, :input_items, :response, :created_at)",
                row,
            )
            pruned = conn.execute(
                f"DELETE FROM {TABLE} WHERE id IN "
                f"(SELECT id FROM {TABLE} ORDER BY created_at DESC, rowid DESC LIMIT -1 OFFSET ?)",
                [self.keep],
            ).rowcount
        if pruned:
            log.info("pruned %d stored response(s) beyond the newest %d", pruned, self.keep)

    def get(self, response_id: str) -> StoredResponse | None:
        with self.store.reading() as conn:
            row = conn.execute(
                f"SELECT id, previous_response_id, input_items, response FROM {TABLE} WHERE id = ?", [response_id]
            ).fetchone()
        if row is None:
            return None
        return StoredResponse(row[0], row[1], json.loads(row[2]), json.loads(row[3]))

    def delete(self, response_id: str) -> bool:
        with self.store.writing() as conn:
            return conn.execute(f"DELETE FROM {TABLE} WHERE id = ?", [response_id]).rowcount > 0

    def find_item(self, item_id: str) -> dict[str, Any] | None:
        """A stored item by its id (what an ``item_reference`` names), newest first: an item a
        response returned (``msg_…``, ``fc_…``, ``rs_…``), an input item sent with an id, or
        an input item as ``input_items`` lists it (``item_<response id>_<n>``); None if none."""
        listed = LISTED_ITEM_ID.fullmatch(item_id)
        with self.store.reading() as conn:
            for column, path in (("response", "$.output"), ("input_items", "$")):
                row = conn.execute(
                    f"SELECT item.value FROM {TABLE} AS r, json_each(r.{column}, '{path}') AS item "
                    "WHERE json_extract(item.value, '$.id') = ? ORDER BY r.created_at DESC, r.rowid DESC LIMIT 1",
                    [item_id],
                ).fetchone()
                if row is not None:
                    found: dict[str, Any] = json.loads(row[0])
                    return found
        if listed is not None:
            turn = self.get(listed.group(1))
            index = int(listed.group(2))
            if turn is not None and index < len(turn.input_items) and not turn.input_items[index].get("id"):
                return turn.input_items[index]
        return None

    def history(self, response_id: str) -> list[dict[str, Any]]:
        """Every item of the chain that ends with ``response_id``, oldest first.

        Raises InvalidRequest (param ``previous_response_id``) when a link is missing: it
        was never stored (``store: false``), was deleted, or was pruned.
        """
        turns: list[StoredResponse] = []
        seen: set[str] = set()
        current: str | None = response_id
        while current is not None:
            if current in seen or len(turns) >= MAX_CHAIN:
                raise InvalidRequest(
                    f"the chain of responses ending at {response_id!r} is too long or loops", param="previous_response_id"
                )
            seen.add(current)
            found = self.get(current)
            if found is None:
                which = "" if current == response_id else f" (a response earlier in the chain of {response_id!r})"
                raise PreviousResponseNotFound(
                    f"previous response {current!r}{which} was not found: it was not stored (store: false), "
                    "or it was deleted",
                    param="previous_response_id",
                )
            turns.append(found)
            current = found.previous_response_id
        return [item for turn in reversed(turns) for item in turn.items]
