"""Download GGUF models from Hugging Face into the models folder: resumable, verified, cancellable.

The transfer is huggingface-hub's own: ``get_hf_file_metadata`` (HEAD on ``/resolve``,
following the hub's redirects, reading ``X-Linked-Etag``/``X-Linked-Size``/``X-Repo-Commit``)
and ``http_get`` (GET with ``Range``, retrying dropped connections, and restarting from
zero when a server ignores ``Range``). What this module adds around it:

* A **staging file** per blob, ``<models>/.partial/<sha256>.part`` with a JSON sidecar.
  It survives cancellation, crashes and restarts, so the next attempt resumes where the
  last one stopped. (``hf_hub_download`` itself deletes its temporary file on failure.)
  The registry never scans ``.partial``, so a partial download is never listed.
* **Verification**: the sha256 of every file is compared with the hub's LFS metadata
  (``paths-info``) before anything is moved into place, and the GGUF header is checked.
  A mismatch discards the staging file.
* **Free disk space** is checked before the first byte.
* **Progress** callbacks (bytes, speed, time left) and **cancel** through a
  ``threading.Event``. Progress arrives once per chunk that huggingface-hub hands over
  (10 MB), which is also how quickly a cancel takes effect.

Only then are the files renamed into ``<models>/<owner>/<repo>/`` and registered with
``ModelRegistry.register_file(source="download")``.

For front ends: build one ``Downloader`` per engine (``downloader_for(engine)``), call
``download``/``pull``/``resume`` from a worker thread (they block), and marshal the
progress callback to the UI thread (it is called on the downloading thread). Cancel by
setting the event passed as ``cancel``; the call then raises ``JobCancelled``.

Why one file of ~480 lines: one download's states — staging, resume, verification, the
rename into place, cancel — are one state machine, easier to check whole.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast
from urllib.parse import urlsplit

import filelock
from huggingface_hub import get_hf_file_metadata, hf_hub_url
from huggingface_hub.file_download import http_get
from huggingface_hub.utils import build_hf_headers
from huggingface_hub.utils import tqdm as hub_tqdm

from ..base import (
    GGUF_MAGIC, DownloadError, JobCancelled, ModelLoadError, ModelRecord, atomic_write_text, fsync_directory,
    read_gguf, remove_stale_temporaries,
)
from ..store import Paths
from .hub import HubClient, QuantOption, RemoteFile, RepoListing, check_repo_id, is_safe_remote_path
from .registry import ModelRegistry

log = logging.getLogger(__name__)

#: Kept free on the disk beyond the download itself, for the database, logs and caches.
DISK_HEADROOM = 256 * 1024 * 1024
_HASH_BLOCK = 4 * 1024 * 1024
_SHA256 = re.compile(r"^[0-9a-f]{64}$")

DOWNLOADING, VERIFYING, DONE = "downloading", "verifying", "done"


@dataclass(frozen=True)
class DownloadProgress:
    """A snapshot handed to progress callbacks (from the downloading thread)."""

    repo: str
    name: str  # the model's display name (e.g. "model-Q4_K_M.gguf (2 parts)")
    file: str  # the file now being transferred or verified
    part: int  # 1-based index of that file
    parts: int
    done_bytes: int  # over every part of the model
    total_bytes: int
    bytes_per_s: float  # over the last few seconds; 0 while verifying
    eta_s: float | None  # None while unknown
    phase: str  # "downloading" | "verifying" | "done"

    @property
    def fraction(self) -> float:
        return self.done_bytes / self.total_bytes if self.total_bytes else 0.0


ProgressCallback = Callable[[DownloadProgress], None]


@dataclass(frozen=True)
class PendingDownload:
    """An interrupted download that the next attempt will resume."""

    repo: str
    path: str
    sha256: str
    size: int
    done_bytes: int
    commit: str | None
    started_at: float


class _Meter:
    """Speed over a sliding window of recent samples, so a stall shows up quickly."""

    def __init__(self, window_s: float = 5.0) -> None:
        self.window_s = window_s
        self.samples: deque[tuple[float, int]] = deque()

    def add(self, done: int) -> float:
        now = time.monotonic()
        self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[0][0] > self.window_s:
            self.samples.popleft()
        (t0, b0), (t1, b1) = self.samples[0], self.samples[-1]
        return (b1 - b0) / (t1 - t0) if t1 > t0 and b1 >= b0 else 0.0


class _NotGGUF(Exception):
    pass


class _StagingSink:
    """The file object handed to ``http_get``: counts bytes, checks the magic, honours cancel."""

    def __init__(self, handle: BinaryIO, cancel: threading.Event | None, on_write: Callable[[int], None]) -> None:
        self.handle = handle
        self.cancel = cancel
        self.on_write = on_write

    def write(self, data: bytes) -> int:
        if self.cancel is not None and self.cancel.is_set():
            raise JobCancelled("download cancelled")
        if self.handle.tell() == 0 and len(data) >= 4 and bytes(data[:4]) != GGUF_MAGIC:
            raise _NotGGUF()
        written = self.handle.write(data)
        self.on_write(self.handle.tell())
        return written

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.handle.seek(offset, whence)

    def tell(self) -> int:
        return self.handle.tell()

    def truncate(self, size: int | None = None) -> int:
        return self.handle.truncate(size)

    def flush(self) -> None:
        self.handle.flush()


class _NoBar(hub_tqdm):
    """huggingface-hub insists on a progress bar; ours are driven by callbacks instead."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["disable"] = True
        super().__init__(*args, **kwargs)


def default_free_space(folder: Path) -> int:
    return shutil.disk_usage(folder).free


class Downloader:
    """Downloads models for one profile. Safe to use from several threads (one file at a time
    per blob: a second attempt at the same file fails fast instead of interleaving)."""

    def __init__(
        self,
        registry: ModelRegistry,
        paths: Paths,
        token: str | None = None,
        endpoint: str | None = None,
        free_space: Callable[[Path], int] = default_free_space,
    ) -> None:
        self.registry = registry
        self.paths = paths
        self.hub = HubClient(token=token, endpoint=endpoint)
        self.free_space = free_space

    @property
    def staging(self) -> Path:
        return self.paths.downloads

    # -- public API -----------------------------------------------------------------------

    def pull(
        self, repo: str, quant: str | None = None, *, revision: str | None = None,
        progress: ProgressCallback | None = None, cancel: threading.Event | None = None,
    ) -> ModelRecord:
        """List ``repo``, pick ``quant`` (default Q4_K_M, else the closest 4-bit file), download it."""
        listing = self.hub.list_files(repo, revision=revision)
        option = listing.pick(quant)
        record = self.download(listing.repo, option, commit=listing.commit, progress=progress, cancel=cancel)
        self.download_projector(listing, cancel=cancel)
        return record

    def download_projector(self, listing: RepoListing, cancel: threading.Event | None = None) -> Path | None:
        """The repo's vision projector, beside its models, when it has one (f16 first: the
        precision llama.cpp's converters default to). The model pairs with it by its header
        (base/projector.py); a projector already there is kept. None when there is none."""
        if not listing.projectors:
            return None
        rank = {"f16": 0, "bf16": 1, "q8_0": 2, "f32": 3}
        remote = min(listing.projectors, key=lambda f: (
            min((r for k, r in rank.items() if k in f.path.lower()), default=len(rank)), f.path))
        target = self.paths.models / Path(*listing.repo.split("/")) / remote.path.rsplit("/", 1)[-1]
        if target.exists():
            return target
        option = QuantOption("mmproj", (remote,))
        files = self._authoritative(listing.repo, option, listing.commit)
        staged = [self._fetch(listing.repo, files[0], listing.commit, lambda *_a, **_k: None, cancel)]
        self._check_gguf(staged, files)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staged[0], target)
            fsync_directory(target.parent)
        except OSError as exc:
            raise DownloadError(f"installing {target.name} failed: {exc.strerror or exc}") from exc
        self._forget(files[0].sha256 or "")
        log.info("downloaded the vision projector %s for %s", target.name, listing.repo)
        return target

    def download(
        self, repo: str, option: QuantOption, *, commit: str | None = None,
        progress: ProgressCallback | None = None, cancel: threading.Event | None = None,
    ) -> ModelRecord:
        """Download every file of ``option`` at ``commit``, verify, move into place, register.

        Raises DownloadError (network, refused, disk full, checksum, not GGUF) or
        JobCancelled (``cancel`` was set; the staging files are kept for a later resume).
        """
        repo = check_repo_id(repo)
        for remote in option.files:
            if not is_safe_remote_path(remote.path):
                raise DownloadError(f"refusing to download {remote.path!r}: unsafe file name")
        files = self._authoritative(repo, option, commit)
        target_dir = self.paths.models / Path(*repo.split("/"))
        targets = [target_dir / remote.path.rsplit("/", 1)[-1] for remote in files]

        already = self._already_installed(files, targets)
        if already is not None:
            return already
        self._check_disk_space(files)

        total = sum(f.size for f in files)
        meter = _Meter()
        done_before = 0
        staged: list[Path] = []
        for index, remote in enumerate(files, start=1):
            def report(done_in_file: int, phase: str = DOWNLOADING, *, _base: int = done_before,
                       _remote: RemoteFile = remote, _index: int = index) -> None:
                if progress is None:
                    return
                done = _base + done_in_file
                speed = meter.add(done) if phase == DOWNLOADING else 0.0
                eta = (total - done) / speed if speed > 0 else None
                progress(DownloadProgress(repo, option.display_name, _remote.path, _index, len(files), done, total,
                                          speed, eta, phase))

            staged.append(self._fetch(repo, remote, commit, report, cancel))
            done_before += remote.size

        self._check_gguf(staged, files)
        record = self._install(staged, files, targets)
        if progress is not None:
            progress(DownloadProgress(repo, option.display_name, files[-1].path, len(files), len(files), total, total,
                                      0.0, 0.0, DONE))
        return record

    def resume(
        self, pending: PendingDownload, *, progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> ModelRecord:
        """Continue an interrupted download (every part of its model, if it is a split set)."""
        listing = self.hub.list_files(pending.repo, revision=pending.commit)
        for option in listing.options:
            if any(f.path == pending.path for f in option.files):
                return self.download(listing.repo, option, commit=listing.commit, progress=progress, cancel=cancel)
        raise DownloadError(f"{pending.repo} no longer has {pending.path}; discard this download")

    def pending(self) -> list[PendingDownload]:
        """Interrupted downloads waiting in the staging folder."""
        if self.staging.is_dir():
            remove_stale_temporaries(self.staging)  # sidecars a killed run was still writing
        found = []
        for sidecar in sorted(self.staging.glob("*.json")) if self.staging.is_dir() else []:
            try:
                data = json.loads(sidecar.read_text("utf-8"))
                part = self._part_path(data["sha256"])
                found.append(PendingDownload(
                    repo=data["repo"], path=data["path"], sha256=data["sha256"], size=int(data["size"]),
                    done_bytes=part.stat().st_size if part.exists() else 0, commit=data.get("commit"),
                    started_at=float(data.get("started_at", 0.0)),
                ))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.warning("ignoring unreadable download record %s: %s", sidecar.name, exc)
        return found

    def discard(self, sha256: str) -> None:
        """Delete an interrupted download's staging files."""
        if not _SHA256.match(sha256):
            raise DownloadError(f"not a sha256: {sha256[:80]!r}")
        self._forget(sha256)

    # -- steps ------------------------------------------------------------------------------

    def _authoritative(self, repo: str, option: QuantOption, commit: str | None) -> list[RemoteFile]:
        """Sizes and sha256 as the hub states them now, at ``commit``; never trust a stale listing."""
        metadata = self.hub.file_metadata(repo, [f.path for f in option.files], commit)
        files = []
        for remote in option.files:
            current = metadata.get(remote.path)
            if current is None:
                raise DownloadError(f"{repo} no longer has {remote.path}")
            if not current.sha256:
                raise DownloadError(f"{repo} gives no sha256 for {remote.path}, so it cannot be verified")
            if not _SHA256.match(current.sha256):
                # It becomes a file name in the staging folder: only 64 hex digits may.
                raise DownloadError(f"{repo} gives an invalid sha256 for {remote.path}: {current.sha256[:80]!r}")
            files.append(current)
        return files

    def _already_installed(self, files: list[RemoteFile], targets: list[Path]) -> ModelRecord | None:
        if not all(t.is_file() and t.stat().st_size == f.size for f, t in zip(files, targets)):
            return None
        if any(_sha256_of(t) != f.sha256 for f, t in zip(files, targets)):
            return None
        log.info("%s is already downloaded and intact", targets[0].name)
        # A run killed between the final rename and the clean-up left its staging record
        # behind: the file is installed, so it is not an interrupted download any more.
        for remote in files:
            self._forget(remote.sha256 or "")
        return self._register(targets)

    def _check_disk_space(self, files: list[RemoteFile]) -> None:
        self.staging.mkdir(parents=True, exist_ok=True)
        have = sum(min(self._part_path(f.sha256 or "").stat().st_size, f.size)
                   for f in files if self._part_path(f.sha256 or "").exists())
        needed = sum(f.size for f in files) - have
        free = self.free_space(self.staging)
        if free < needed + DISK_HEADROOM:
            raise DownloadError(
                f"not enough disk space: this download needs {_gb(needed + DISK_HEADROOM)} "
                f"and {_gb(free)} is free in {self.paths.models}"
            )

    def _part_path(self, sha256: str) -> Path:
        return self.staging / f"{sha256}.part"

    def _sidecar_path(self, sha256: str) -> Path:
        return self.staging / f"{sha256}.json"

    def _fetch(
        self, repo: str, remote: RemoteFile, commit: str | None,
        report: Callable[..., None], cancel: threading.Event | None,
    ) -> Path:
        """Bring one file into the staging folder, resuming a previous attempt, and verify it."""
        sha = remote.sha256 or ""
        part = self._part_path(sha)
        lock = filelock.FileLock(str(self.staging / f"{sha}.lock"))
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            raise DownloadError(f"{remote.path} is already being downloaded") from None
        try:
            if cancel is not None and cancel.is_set():
                raise JobCancelled("download cancelled")
            url, headers = self._locate(repo, remote, commit)
            if not self._sidecar_path(sha).exists():
                atomic_write_text(self._sidecar_path(sha), json.dumps({
                    "repo": repo, "path": remote.path, "sha256": sha, "size": remote.size,
                    "commit": commit, "started_at": time.time(),
                }))
            fd = os.open(part, os.O_RDWR | os.O_CREAT, 0o644)
            with os.fdopen(fd, "r+b") as handle:
                resume = handle.seek(0, os.SEEK_END)
                if resume > remote.size:
                    handle.truncate(0)
                    resume = handle.seek(0)
                if resume:
                    log.info("resuming %s at %d of %d bytes", remote.path, resume, remote.size)
                report(resume)
                try:
                    if resume < remote.size:
                        with self.hub.errors(repo):
                            # http_get types its file as BinaryIO but only writes, seeks, tells and
                            # truncates, which the sink does; it is not a whole file object.
                            sink = cast(BinaryIO, _StagingSink(handle, cancel, report))
                            http_get(url, sink, resume_size=resume, headers=headers,
                                     expected_size=remote.size, displayed_filename=remote.path, tqdm_class=_NoBar)
                finally:
                    handle.flush()
                    os.fsync(handle.fileno())
        except _NotGGUF:
            self._forget(sha)
            raise DownloadError(f"{remote.path} in {repo} is not a GGUF file; nothing was installed") from None
        except OSError as exc:
            # http_get's size check ("Consistency check failed") and local disk errors.
            raise DownloadError(f"downloading {remote.path} failed: {exc}; run the download again to resume") from exc
        finally:
            lock.release()
        self._verify(part, remote, report, cancel)
        return part

    def _locate(self, repo: str, remote: RemoteFile, commit: str | None) -> tuple[str, dict[str, str]]:
        """HEAD the file through huggingface-hub: where to GET it, and check what the hub says it is."""
        url = hf_hub_url(repo, remote.path, revision=commit, endpoint=self.hub.endpoint)
        headers = build_hf_headers(token=self.hub.token)
        with self.hub.errors(repo):
            metadata = get_hf_file_metadata(url, token=self.hub.token, endpoint=self.hub.endpoint, retry_on_errors=True)
        etag = (metadata.etag or "").lower()
        if len(etag) == 64 and etag != remote.sha256:
            raise DownloadError(f"{remote.path} changed on the hub while it was being listed; try again")
        if metadata.size is not None and metadata.size != remote.size:
            raise DownloadError(f"the hub reports two different sizes for {remote.path}; try again")
        location = metadata.location or url
        if urlsplit(location).hostname != urlsplit(url).hostname:
            # A signed CDN address: the hub token must not travel there.
            headers.pop("authorization", None)
        return location, headers

    def _verify(self, part: Path, remote: RemoteFile, report: Callable[..., None],
                cancel: threading.Event | None = None) -> None:
        size = part.stat().st_size
        if size != remote.size:
            self._forget(remote.sha256 or "")
            raise DownloadError(f"{remote.path} arrived with {size} bytes instead of {remote.size}; discarded it")
        digest = hashlib.sha256()
        done = 0
        with part.open("rb") as handle:
            while block := handle.read(_HASH_BLOCK):
                if cancel is not None and cancel.is_set():
                    raise JobCancelled("download cancelled")  # the complete file stays staged
                digest.update(block)
                done += len(block)
                if done % (16 * _HASH_BLOCK) < _HASH_BLOCK:
                    report(done, VERIFYING)
        if digest.hexdigest() != remote.sha256:
            self._forget(remote.sha256 or "")
            raise DownloadError(
                f"{remote.path} failed verification: its sha256 does not match the hub's; "
                "the damaged file was discarded, run the download again"
            )
        report(remote.size, VERIFYING)

    def _check_gguf(self, staged: list[Path], files: list[RemoteFile]) -> None:
        for part, remote in zip(staged, files):
            with part.open("rb") as handle:
                magic = handle.read(4)
            if magic != GGUF_MAGIC:
                self._forget(remote.sha256 or "")
                raise DownloadError(f"{remote.path} is not a GGUF file; nothing was installed")
        try:
            read_gguf(staged[0])
        except ModelLoadError as exc:
            for remote in files:
                self._forget(remote.sha256 or "")
            raise DownloadError(f"{files[0].path} is not a usable GGUF file ({exc}); nothing was installed") from exc

    def _install(self, staged: list[Path], files: list[RemoteFile], targets: list[Path]) -> ModelRecord:
        try:
            targets[0].parent.mkdir(parents=True, exist_ok=True)
            for part, target in zip(staged, targets):
                os.replace(part, target)
            fsync_directory(targets[0].parent)
        except OSError as exc:
            # The verified files stay staged (or already in place): the next attempt finishes.
            raise DownloadError(f"installing {targets[0].name} failed: {exc.strerror or exc}; "
                                "run the download again to finish it") from exc
        for remote in files:
            self._forget(remote.sha256 or "")
        return self._register(targets)

    def _register(self, targets: list[Path]) -> ModelRecord:
        try:
            return self.registry.register_file(targets[0], source="download")
        except ModelLoadError as exc:
            for target in targets:
                target.unlink(missing_ok=True)
            raise DownloadError(f"{targets[0].name} could not be registered: {exc}") from exc

    def _forget(self, sha256: str) -> None:
        if not sha256:
            return
        for path in (self._part_path(sha256), self._sidecar_path(sha256)):
            with contextlib.suppress(OSError):
                path.unlink()


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.0f} MB"


def downloader_for(engine: Any, endpoint: str | None = None) -> Downloader:
    """A Downloader wired to an Engine's registry, paths and ``hf_token`` setting."""
    from .hub import resolve_token  # noqa: PLC0415

    return Downloader(engine.registry, engine.paths, token=resolve_token(engine.settings.hf_token), endpoint=endpoint)
