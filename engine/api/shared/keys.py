"""Named API keys for a server a team shares: create, list, revoke, look up.

Only a SHA-256 hash of each key is stored (table ``api/shared/keys``, migration ``m006_api_keys``);
the key itself is returned once, by ``create``. A fast hash is enough here because keys are
256 random bits: there is no dictionary to try. Each key may carry limits (requests per
minute, concurrent streams, allowed models); ``api/shared/key_limits`` enforces them per process.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...base import InvalidRequest
from ...store import Store

if TYPE_CHECKING:
    from .api_engine import ApiEngine

TABLE = "api_keys"
KEY_PREFIX = "ink-"
SHOWN_PREFIX_CHARS = 10  # "ink-" and six random characters: enough to tell keys apart
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
_COLUMNS = "name, key_prefix, requests_per_minute, max_streams, models, created_at, revoked_at, last_used_at, requests"


@dataclass(frozen=True)
class KeyLimits:
    """What one key may do; None (or no models) means no limit of that kind."""

    requests_per_minute: int | None = None
    max_streams: int | None = None
    models: tuple[str, ...] = ()

    def validated(self) -> "KeyLimits":
        for label, value in (("requests per minute", self.requests_per_minute), ("max streams", self.max_streams)):
            if value is not None and not 1 <= value <= 1_000_000:
                raise InvalidRequest(f"{label} must be between 1 and 1000000 (or unset for no limit)")
        models = tuple(dict.fromkeys(m.strip() for m in self.models if m.strip()))
        return KeyLimits(self.requests_per_minute, self.max_streams, models)

    def allows_model(self, *names: str) -> bool:
        if not self.models:
            return True
        allowed = {m.lower() for m in self.models}
        return any(n.lower() in allowed for n in names if n)


@dataclass(frozen=True)
class ApiKeyRecord:
    name: str
    prefix: str
    limits: KeyLimits = field(default_factory=KeyLimits)
    created_at: float = 0.0
    revoked_at: float | None = None
    last_used_at: float | None = None
    requests: int = 0

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    @property
    def client(self) -> str:
        """The ``GenerateJob.client`` value of this key's requests (usage accounting)."""
        return f"api:{self.name}"

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> "ApiKeyRecord":
        name, prefix, rpm, streams, models, created, revoked, used, requests = row
        limits = KeyLimits(rpm, streams, tuple(json.loads(models)) if models else ())
        return cls(name, prefix, limits, created or 0.0, revoked, used, requests or 0)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.strip().encode()).hexdigest()


class ApiKeys:
    """The named keys in the application database. Safe to use from any thread."""

    def __init__(self, store: Store) -> None:
        self.store = store

    @classmethod
    def of(cls, engine: ApiEngine) -> "ApiKeys":
        """The keys in ``engine``'s database (the window's Team keys page, ``from_settings``):
        a front end hands over the engine and never holds its store."""
        return cls(engine.store)

    def create(self, name: str, limits: KeyLimits = KeyLimits()) -> tuple[ApiKeyRecord, str]:
        """A new key named ``name``; returns its record and the key, which is not kept."""
        name = name.strip()
        if not _NAME.match(name):
            raise InvalidRequest(
                "a key name is 1-64 letters, digits or . _ @ - and starts with a letter or digit", param="name"
            )
        limits = limits.validated()
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        now = time.time()
        with self.store.writing() as conn:
            taken = conn.execute(f"SELECT revoked_at FROM {TABLE} WHERE name = ?", [name]).fetchone()
            if taken is not None and taken[0] is None:
                raise InvalidRequest(f"a key named {name!r} already exists; revoke it first", param="name")
            conn.execute(f"DELETE FROM {TABLE} WHERE name = ?", [name])  # a revoked one's name is free again
            conn.execute(
                f"INSERT INTO {TABLE} (name, key_hash, key_prefix, requests_per_minute, max_streams, models, "
                "created_at, revoked_at, last_used_at, requests) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL, 0)",
                [name, hash_key(key), key[:SHOWN_PREFIX_CHARS], limits.requests_per_minute, limits.max_streams,
                 json.dumps(list(limits.models)) if limits.models else None, now],
            )
        return ApiKeyRecord(name, key[:SHOWN_PREFIX_CHARS], limits, now), key

    def list(self, include_revoked: bool = False) -> list[ApiKeyRecord]:
        where = "" if include_revoked else " WHERE revoked_at IS NULL"
        with self.store.reading() as conn:
            rows = conn.execute(f"SELECT {_COLUMNS} FROM {TABLE}{where} ORDER BY name").fetchall()
        return [ApiKeyRecord.from_row(r) for r in rows]

    def revoke(self, name: str) -> ApiKeyRecord:
        with self.store.writing() as conn:
            changed = conn.execute(
                f"UPDATE {TABLE} SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL", [time.time(), name]
            ).rowcount
        if not changed:
            raise InvalidRequest(f"no active key is named {name!r}", param="name")
        return self.get(name)

    def get(self, name: str) -> ApiKeyRecord:
        with self.store.reading() as conn:
            row = conn.execute(f"SELECT {_COLUMNS} FROM {TABLE} WHERE name = ?", [name]).fetchone()
        if row is None:
            raise InvalidRequest(f"no key is named {name!r}", param="name")
        return ApiKeyRecord.from_row(row)

    def any_active(self) -> bool:
        with self.store.reading() as conn:
            return conn.execute(f"SELECT 1 FROM {TABLE} WHERE revoked_at IS NULL LIMIT 1").fetchone() is not None

    def find(self, key: str) -> ApiKeyRecord | None:
        """The active key whose hash matches ``key`` (a lookup by hash leaks nothing of it)."""
        with self.store.reading() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM {TABLE} WHERE key_hash = ? AND revoked_at IS NULL", [hash_key(key)]
            ).fetchone()
        return ApiKeyRecord.from_row(row) if row is not None else None

    def was_revoked(self, key: str) -> bool:
        """Whether ``key`` is one that worked once and was revoked (its 401 says so)."""
        with self.store.reading() as conn:
            row = conn.execute(
                f"SELECT 1 FROM {TABLE} WHERE key_hash = ? AND revoked_at IS NOT NULL", [hash_key(key)]
            ).fetchone()
        return row is not None

    def is_active(self, name: str) -> bool:
        with self.store.reading() as conn:
            row = conn.execute(f"SELECT revoked_at FROM {TABLE} WHERE name = ?", [name]).fetchone()
        return row is not None and row[0] is None

    def record_use(self, name: str) -> None:
        with self.store.writing() as conn:
            conn.execute(
                f"UPDATE {TABLE} SET requests = requests + 1, last_used_at = ? WHERE name = ?", [time.time(), name]
            )
