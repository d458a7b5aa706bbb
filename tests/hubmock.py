"""A local HTTP server that answers like the Hugging Face hub, for download tests.

It serves the endpoints huggingface-hub really calls, with the headers it reads:

* ``GET /api/models?search=&filter=&sort=&limit=&expand=`` — search (``HfApi.list_models``);
* ``GET /api/models/{repo}[/revision/{rev}]?blobs=true`` — ``model_info(files_metadata=True)``;
* ``GET /api/models/{repo}/tree/{rev}`` — ``list_repo_tree``;
* ``POST /api/models/{repo}/paths-info/{rev}`` (form: ``paths``, ``expand``) — ``get_paths_info``;
* ``HEAD|GET /{repo}/resolve/{rev}/{path}`` — LFS files answer ``302`` to a "CDN" on another
  host name (``localhost`` instead of ``127.0.0.1``, same server) with ``X-Repo-Commit``,
  ``X-Linked-Etag`` (the sha256), ``X-Linked-Size`` and ``ETag``; small files answer 200;
* ``HEAD|GET /cdn/{sha256}`` — the blob, with ``Range`` → ``206`` + ``Content-Range``.

Errors carry ``X-Error-Code`` (``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``,
``GatedRepo``) as the hub does, which is how huggingface-hub picks its exception types.

Faults a test can switch on: cut the connection after N bytes of a body (``cut_after``,
for the next ``cut_times`` GETs), ignore ``Range`` (``ignore_range``), serve damaged bytes
for a blob (``corrupt``). Every request is logged in ``requests``.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

_BLOCK = 1024 * 1024


def sha256_of(source: Path | bytes) -> str:
    if isinstance(source, bytes):
        return hashlib.sha256(source).hexdigest()
    digest = hashlib.sha256()
    with source.open("rb") as handle:
        while block := handle.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class MockFile:
    path: str
    source: Path | bytes
    sha256: str = ""
    lfs: bool = True

    def __post_init__(self) -> None:
        if not self.sha256:
            self.sha256 = sha256_of(self.source)

    @property
    def size(self) -> int:
        return len(self.source) if isinstance(self.source, bytes) else self.source.stat().st_size

    @property
    def git_oid(self) -> str:
        return hashlib.sha1(f"blob {self.path} {self.sha256}".encode()).hexdigest()  # noqa: S324 — an id, not security

    def entry(self) -> dict[str, Any]:
        """A tree / paths-info entry."""
        entry: dict[str, Any] = {"type": "file", "oid": self.git_oid, "size": self.size, "path": self.path}
        if self.lfs:
            entry["lfs"] = {"oid": self.sha256, "size": self.size, "pointerSize": 134}
        return entry

    def sibling(self, blobs: bool) -> dict[str, Any]:
        sibling: dict[str, Any] = {"rfilename": self.path}
        if blobs:
            sibling |= {"blobId": self.git_oid, "size": self.size}
            if self.lfs:
                sibling["lfs"] = {"sha256": self.sha256, "size": self.size, "pointerSize": 134}
        return sibling


@dataclass
class MockRepo:
    repo_id: str
    files: list[MockFile]
    commit: str = ""
    gated: bool = False
    downloads: int = 0
    likes: int = 0
    last_modified: str = "2025-01-15T10:00:00.000Z"
    licence: str | None = "apache-2.0"
    gguf: dict[str, Any] | None = None
    listing_only: list[dict[str, Any]] = field(default_factory=list)  # siblings that cannot be fetched

    def __post_init__(self) -> None:
        if not self.commit:
            self.commit = hashlib.sha1(self.repo_id.encode()).hexdigest()  # noqa: S324

    def file(self, path: str) -> MockFile | None:
        return next((f for f in self.files if f.path == path), None)

    def info(self, blobs: bool) -> dict[str, Any]:
        tags = ["gguf", "text-generation"] + ([f"license:{self.licence}"] if self.licence else [])
        data: dict[str, Any] = {
            "_id": self.commit[:24], "id": self.repo_id, "modelId": self.repo_id,
            "author": self.repo_id.split("/")[0], "sha": self.commit, "lastModified": self.last_modified,
            "createdAt": "2024-06-01T00:00:00.000Z", "private": False, "disabled": False,
            "gated": "manual" if self.gated else False, "downloads": self.downloads, "likes": self.likes,
            "tags": tags, "library_name": "gguf", "pipeline_tag": "text-generation",
            "siblings": [f.sibling(blobs) for f in self.files] + list(self.listing_only),
        }
        if self.licence:
            data["cardData"] = {"license": self.licence}
        if self.gguf:
            data["gguf"] = self.gguf
        return data


@dataclass
class LoggedRequest:
    method: str
    path: str
    range: str | None
    status: int
    authorized: bool


class HubMock:
    """Start with ``with HubMock() as hub:``; point HF_ENDPOINT at ``hub.endpoint``."""

    def __init__(self, token: str = "hf_test_token") -> None:
        self.repos: dict[str, MockRepo] = {}
        self.token = token
        self.requests: list[LoggedRequest] = []
        self.cut_after: int | None = None
        self.cut_times = 0
        self.ignore_range = False
        self.corrupt: set[str] = set()  # sha256 of blobs served damaged
        self.blob_delay_s = 0.0  # pause between blocks of a blob body (to test cancelling mid-file)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="hubmock", daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def cdn(self) -> str:
        # Another host name for the same server, so huggingface-hub treats it as a CDN.
        return f"http://localhost:{self.port}"

    def add(self, repo: MockRepo) -> MockRepo:
        self.repos[repo.repo_id] = repo
        return repo

    def blob(self, sha256: str) -> MockFile | None:
        for repo in self.repos.values():
            for mock_file in repo.files:
                if mock_file.sha256 == sha256:
                    return mock_file
        return None

    def log(self, entry: LoggedRequest) -> None:
        with self._lock:
            self.requests.append(entry)

    def take_cut(self) -> int | None:
        with self._lock:
            if self.cut_after is None or self.cut_times <= 0:
                return None
            self.cut_times -= 1
            return self.cut_after

    def blob_gets(self) -> list[LoggedRequest]:
        return [r for r in self.requests if r.method == "GET" and r.path.startswith("/cdn/")]

    def __enter__(self) -> "HubMock":
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _make_handler(hub: HubMock) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 — quiet test output
            pass

        # -- plumbing ------------------------------------------------------------------

        def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
                  content_type: str = "application/json") -> None:
            # Logged before answering: a client that has its answer may look at the log at once.
            self._log(status)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, data: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
            self._send(status, json.dumps(data).encode(), headers)

        def _error(self, status: int, code: str | None, message: str, extra: dict[str, str] | None = None) -> None:
            headers = {"X-Error-Message": message, **(extra or {})}
            if code:
                headers["X-Error-Code"] = code
            self._json({"error": message}, status, headers)

        def _log(self, status: int) -> None:
            hub.log(LoggedRequest(self.command, self.path, self.headers.get("Range"), status,
                                  self.headers.get("Authorization") is not None))

        def _authorized(self) -> bool:
            return self.headers.get("Authorization") == f"Bearer {hub.token}"

        def _repo_and_rest(self, parts: list[str]) -> tuple[MockRepo | None, str, list[str]]:
            repo_id = "/".join(parts[:2])
            return hub.repos.get(repo_id), repo_id, parts[2:]

        def _check_revision(self, repo: MockRepo, revision: str) -> bool:
            if revision in ("main", repo.commit):
                return True
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            return False

        # -- verbs ---------------------------------------------------------------------

        def do_HEAD(self) -> None:
            self.do_GET()

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            parts = [unquote(p) for p in url.path.split("/") if p]
            if parts[:2] == ["api", "models"] and len(parts) == 2:
                return self._search(query)
            if parts[:2] == ["api", "models"]:
                return self._api_model(parts[2:], query)
            if parts and parts[0] == "cdn" and len(parts) == 2:
                return self._blob(parts[1])
            if len(parts) >= 5 and parts[2] == "resolve":
                return self._resolve(parts)
            self._error(404, None, "Not Found")

        def do_POST(self) -> None:
            url = urlsplit(self.path)
            parts = [unquote(p) for p in url.path.split("/") if p]
            length = int(self.headers.get("Content-Length") or 0)
            form = parse_qs(self.rfile.read(length).decode())
            if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "paths-info":
                repo, repo_id, _ = self._repo_and_rest(parts[2:])
                if repo is None:
                    return self._error(404, "RepoNotFound", "Repository not found")
                if not self._check_revision(repo, "/".join(parts[5:])):
                    return None
                wanted = form.get("paths", [])
                entries = [f.entry() for f in repo.files if f.path in wanted]
                entries += [e for e in repo.listing_only if e.get("rfilename") in wanted and "entry" in e]
                return self._json(entries)
            self._error(404, None, "Not Found")

        # -- endpoints -------------------------------------------------------------------

        def _search(self, query: dict[str, list[str]]) -> None:
            text = " ".join(query.get("search", [])).lower()
            filters = query.get("filter", [])
            found = [r for r in hub.repos.values() if text in r.repo_id.lower()]
            if "gguf" in filters:
                found = [r for r in found if r.files or r.listing_only]
            sort = (query.get("sort") or ["downloads"])[0]
            key = {"downloads": lambda r: r.downloads, "likes": lambda r: r.likes,
                   "lastModified": lambda r: r.last_modified}.get(sort, lambda r: r.downloads)
            found.sort(key=key, reverse=True)
            limit = int((query.get("limit") or ["1000"])[0])
            items = []
            for repo in found[:limit]:
                info = repo.info(blobs=False)
                info.pop("siblings")
                items.append(info)
            self._json(items)

        def _api_model(self, parts: list[str], query: dict[str, list[str]]) -> None:
            repo, repo_id, rest = self._repo_and_rest(parts)
            if repo is None:
                return self._error(404, "RepoNotFound", "Repository not found")
            if not rest or rest[0] == "revision":
                if rest and not self._check_revision(repo, "/".join(rest[1:])):
                    return None
                return self._json(repo.info(blobs=query.get("blobs", ["false"])[0].lower() == "true"))
            if rest[0] == "tree" and len(rest) >= 2:
                if not self._check_revision(repo, rest[1]):
                    return None
                return self._json([f.entry() for f in repo.files])
            return self._error(404, None, "Not Found")

        def _resolve(self, parts: list[str]) -> None:
            repo, repo_id, rest = self._repo_and_rest(parts)
            if repo is None:
                return self._error(404, "RepoNotFound", "Repository not found")
            revision, path = rest[1], "/".join(rest[2:])
            if not self._check_revision(repo, revision):
                return None
            if repo.gated and not self._authorized():
                return self._error(
                    401, "GatedRepo",
                    f"Access to model {repo_id} is restricted. You must have access to it and be authenticated to access it. Please log in.",
                )
            mock_file = repo.file(path)
            if mock_file is None:
                return self._error(404, "EntryNotFound", f"{path} does not exist on \"{revision}\"",
                                   {"X-Repo-Commit": repo.commit})
            common = {"X-Repo-Commit": repo.commit, "ETag": f'"{mock_file.git_oid}"', "Accept-Ranges": "bytes"}
            if mock_file.lfs:
                location = f"{hub.cdn}/cdn/{mock_file.sha256}"
                return self._send(302, b"", {
                    **common, "Location": location, "X-Linked-Etag": f'"{mock_file.sha256}"',
                    "X-Linked-Size": str(mock_file.size),
                }, content_type="text/plain")
            data = mock_file.source if isinstance(mock_file.source, bytes) else mock_file.source.read_bytes()
            return self._send(200, data, common, content_type="application/octet-stream")

        def _blob(self, sha256: str) -> None:
            mock_file = hub.blob(sha256)
            if mock_file is None:
                return self._error(404, None, "Not Found")
            size = mock_file.size
            start, end = 0, size - 1
            status = 200
            wanted = self.headers.get("Range")
            if wanted and not hub.ignore_range:
                spec = wanted.removeprefix("bytes=")
                first, _, last = spec.partition("-")
                start = int(first)
                end = int(last) if last else size - 1
                if start >= size:
                    return self._send(416, b"", {"Content-Range": f"bytes */{size}"})
                status = 206
            length = end - start + 1
            self._log(status)
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(length))
            self.send_header("ETag", f'"{sha256}"')
            self.send_header("Accept-Ranges", "bytes")
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            self.end_headers()
            if self.command == "HEAD":
                return None
            cut = hub.take_cut()
            budget = length if cut is None else min(cut, length)
            damaged_at = size // 2 if sha256 in hub.corrupt else -1
            sent = 0
            try:
                for offset, block in _blocks(mock_file.source, start, budget):
                    if offset <= damaged_at < offset + len(block):
                        block = bytearray(block)
                        block[damaged_at - offset] ^= 0xFF
                        block = bytes(block)
                    self.wfile.write(block)
                    sent += len(block)
                    if hub.blob_delay_s:
                        time.sleep(hub.blob_delay_s)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
                return None
            if sent < length:
                # Drop the connection mid-body, as a flaky network would.
                self.wfile.flush()
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            return None

    return Handler


def _blocks(source: Path | bytes, start: int, count: int):
    if isinstance(source, bytes):
        data = source[start : start + count]
        for i in range(0, len(data), _BLOCK):
            yield start + i, data[i : i + _BLOCK]
        return
    with source.open("rb") as handle:
        handle.seek(start)
        offset, left = start, count
        while left > 0:
            block = handle.read(min(_BLOCK, left))
            if not block:
                return
            yield offset, block
            offset += len(block)
            left -= len(block)
