"""The remote engines a user added (Settings → Engines): where they are, their keys, their models.

Endpoints live in the ``remote_engines`` setting; their API keys go to the system keyring
(the ``keyring`` package) when this machine has a backend, else into the settings with a
log line saying so (a headless box or a CI runner has none). Models of a remote are named
``<engine name>/<model id>`` so they never collide with local ids, which hold no slash.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..base import InglenookError, InvalidRequest, ModelRecord, SamplingParams
from ..store import Settings, Store
from .remote import SEPARATOR, RemoteAnswer, RemoteEndpoint, RemoteEngine, RemoteEngineError
from .rpc import parse_workers
from .rpc_host import CHILD_VARIABLE, ENGINE_NAME as RPC_ENGINE, RpcHost

log = logging.getLogger(__name__)

KEYRING_SERVICE = "inglenook"
IN_KEYRING, IN_STORE = "keyring", "store"
REMOTE_SOURCE = "remote"  # ModelRecord.source of a remote model (the picker marks these)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")


def _keyring_entry(name: str) -> str:
    return f"remote-engine:{name}"


def keyring_available() -> bool:
    """Whether a real keyring backend exists here (Settings says where keys go)."""
    try:
        import keyring  # noqa: PLC0415 — optional at import time
    except ImportError:
        return False
    return float(getattr(keyring.get_keyring(), "priority", 0)) > 0


def _save_key(name: str, key: str) -> str:
    """Keep ``key`` in the keyring when possible; returns where it went."""
    if keyring_available():
        import keyring  # noqa: PLC0415
        from keyring.errors import KeyringError  # noqa: PLC0415

        try:
            keyring.set_password(KEYRING_SERVICE, _keyring_entry(name), key)
            return IN_KEYRING
        except KeyringError as exc:
            log.warning("the system keyring refused the key of %r (%s); keeping it in the settings", name, exc)
    else:
        log.warning("no system keyring on this machine: the key of remote engine %r is kept in the settings", name)
    return IN_STORE


def _read_key(entry: dict[str, Any]) -> str | None:
    if entry.get("key_in") == IN_KEYRING:
        try:
            import keyring  # noqa: PLC0415

            return keyring.get_password(KEYRING_SERVICE, _keyring_entry(entry["name"]))
        except Exception as exc:  # noqa: BLE001 — a locked or missing keyring: say so, go on keyless
            log.warning("cannot read the key of remote engine %r from the keyring: %s", entry["name"], exc)
            return None
    return entry.get("key") or None


def _forget_key(entry: dict[str, Any]) -> None:
    if entry.get("key_in") != IN_KEYRING:
        return
    try:
        import keyring  # noqa: PLC0415

        keyring.delete_password(KEYRING_SERVICE, _keyring_entry(entry["name"]))
    except Exception as exc:  # noqa: BLE001 — already gone is fine
        log.info("could not delete the key of %r from the keyring: %s", entry["name"], exc)


class RemoteCatalogue:
    """Remote endpoints, read from the settings each time (so every front end sees changes)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.problems: dict[str, str] = {}  # engine name -> why its models could not be listed
        self._known: dict[str, list[str]] = {}  # engine name -> model ids last listed
        self._lock = threading.Lock()
        self._rpc: RpcHost | None = None  # the child running models split over the RPC workers

    def rpc_endpoint(self, start: bool = True) -> RemoteEndpoint | None:
        """With RPC workers set (Settings → Engines), the child that splits models over them,
        as engine "rpc"; started on first use, and again after a worker took it down."""
        workers = parse_workers(Settings.load(self.store).rpc_workers)
        if not workers or os.environ.get(CHILD_VARIABLE):
            return None
        with self._lock:
            if self._rpc is None or self._rpc.workers != workers:
                if self._rpc is not None:
                    self._rpc.stop()
                self._rpc = RpcHost(workers)
            host = self._rpc
        return host.endpoint() if start or host.alive else None

    def _entries(self) -> list[dict[str, Any]]:
        return [dict(e) for e in Settings.load(self.store).remote_engines if isinstance(e, dict) and e.get("name")]

    def endpoints(self, start_rpc: bool = False) -> list[RemoteEndpoint]:
        found = [RemoteEndpoint(e["name"], e["base_url"], _read_key(e)) for e in self._entries()]
        try:
            rpc = self.rpc_endpoint(start=start_rpc)
        except InglenookError as exc:
            log.warning("the RPC workers cannot be used: %s", exc)
            with self._lock:
                self.problems[RPC_ENGINE] = str(exc)
            rpc = None
        return [*found, rpc] if rpc is not None else found

    def add(self, name: str, base_url: str, api_key: str | None = None) -> str:
        """Add (or replace) an endpoint; returns where its key is kept ("keyring", "store" or "")."""
        name, base_url = name.strip(), base_url.strip().rstrip("/")
        if not _NAME.match(name) or name == RPC_ENGINE:
            raise InvalidRequest(f"an engine name is 1-40 letters, digits or . _ - (no slash, not {RPC_ENGINE!r})",
                                 param="name")
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidRequest("the base URL must start with http:// or https://, e.g. http://host:8484/v1",
                                 param="base_url")
        entries = [e for e in self._entries() if e["name"] != name]
        entry: dict[str, Any] = {"name": name, "base_url": base_url, "key_in": ""}
        if api_key and api_key.strip():
            entry["key_in"] = _save_key(name, api_key.strip())
            if entry["key_in"] == IN_STORE:
                entry["key"] = api_key.strip()
        Settings.load(self.store).save(self.store, remote_engines=[*entries, entry])
        return str(entry["key_in"])

    def remove(self, name: str) -> None:
        entries = self._entries()
        for entry in entries:
            if entry["name"] == name:
                _forget_key(entry)
        Settings.load(self.store).save(self.store, remote_engines=[e for e in entries if e["name"] != name])
        with self._lock:
            self._known.pop(name, None)
            self.problems.pop(name, None)

    def owner(self, model_id: str) -> tuple[RemoteEndpoint, str] | None:
        """The endpoint serving ``model_id`` ("engine/model") and the id the remote knows it by."""
        engine_name, sep, remote_id = (model_id or "").partition(SEPARATOR)
        if not sep or not remote_id:
            return None
        if engine_name == RPC_ENGINE:
            rpc = self.rpc_endpoint(start=True)  # a failure to start says why (RpcError)
            return (rpc, remote_id) if rpc is not None else None
        for endpoint in self.endpoints():
            if endpoint.name == engine_name:
                return endpoint, remote_id
        return None

    def records(self) -> list[ModelRecord]:
        """Every remote model as a record for the picker (asks each remote: network)."""
        records: list[ModelRecord] = []
        for endpoint in self.endpoints(start_rpc=True):
            try:
                ids = RemoteEngine(endpoint).model_ids()
            except InglenookError as exc:
                log.warning("remote engine %r: %s", endpoint.name, exc)
                with self._lock:
                    self.problems[endpoint.name] = str(exc)
                    ids = self._known.get(endpoint.name, [])
            else:
                with self._lock:
                    self.problems.pop(endpoint.name, None)
                    self._known[endpoint.name] = ids
            records += [remote_record(endpoint.name, model) for model in ids]
        return records

    def chat(self, model_id: str, messages: list[dict[str, Any]], sampling: SamplingParams) -> RemoteAnswer:
        found = self.owner(model_id)
        if found is None:
            raise RemoteEngineError(f"no remote engine serves {model_id!r}; add it in Settings → Engines")
        endpoint, remote_id = found
        return RemoteEngine(endpoint).chat(remote_id, messages, sampling)


def remote_record(engine_name: str, model: str) -> ModelRecord:
    return ModelRecord(
        id=f"{engine_name}{SEPARATOR}{model}", path=Path(), name=model, architecture="", quantization="remote",
        parameter_count=0, context_length=None, size_bytes=0, fingerprint="", source=f"{REMOTE_SOURCE}:{engine_name}",
    )
