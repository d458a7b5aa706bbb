"""Faults during a download (issue 14): kill -9 at the final rename, a full disk mid-file.

Nothing half-written is ever installed or listed, and the next attempt finishes what was
verified without fetching it again. The kill happens in a child process running the real
Downloader against the local hub; the full disk is an OSError(ENOSPC) at the staging
file's write call.
"""

from __future__ import annotations

import errno
import hashlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from inglenook.engine.base.errors import DownloadError
from inglenook.engine.models import downloads
from inglenook.engine.models.downloads import Downloader
from inglenook.engine.models.registry import ModelRegistry
from inglenook.engine.store.paths import Paths
from tests.downloads.conftest import SMOL_FILE, SMOL_REPO
from tests.hubmock import HubMock, MockFile

MB = 1024 * 1024

# The child: the real download, killed by SIGKILL at one call of the final install.
_CHILD = textwrap.dedent("""
    import os, signal, sys
    from huggingface_hub import constants
    constants.HF_HUB_DISABLE_IMPLICIT_TOKEN = True
    from inglenook.engine.models import downloads
    from inglenook.engine.models.downloads import Downloader
    from inglenook.engine.store.paths import Paths
    from inglenook.engine.models.registry import ModelRegistry
    from inglenook.engine.store.store import Store

    where = sys.argv[1]
    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)
    real_replace = os.replace
    def replace_or_die(source, target, *args, **kwargs):
        if str(source).endswith(".part"):  # the rename of the verified file into place
            die()
        return real_replace(source, target, *args, **kwargs)
    if where == "rename":
        os.replace = replace_or_die
    elif where == "after_rename":
        downloads.fsync_directory = die  # killed after the rename, before the clean-up
    paths = Paths.default().ensure()
    Downloader(ModelRegistry(Store(paths.database), paths), paths, endpoint=os.environ["HF_ENDPOINT"]).pull(sys.argv[2])
""")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _downloaded(registry: ModelRegistry) -> list:
    return [r for r in registry.refresh() if r.source == "download"]


@pytest.mark.parametrize("where", ["rename", "after_rename"])
def test_kill_during_the_final_rename(hub: HubMock, paths: Paths, registry: ModelRegistry, home: Path,
                                      served_files: dict[str, MockFile], where: str) -> None:
    env = {**os.environ, "INGLENOOK_HOME": str(home), "HF_ENDPOINT": hub.endpoint, "HF_HUB_OFFLINE": "0"}
    env.pop("HF_TOKEN", None)
    child = subprocess.run([sys.executable, "-c", _CHILD, where, SMOL_REPO], env=env, capture_output=True,
                           text=True, timeout=600)
    assert child.returncode == -signal.SIGKILL, child.stderr
    target = paths.models / Path(*SMOL_REPO.split("/")) / SMOL_FILE
    expected = served_files["smol"]
    # What is in place is either nothing or the whole verified file, never a part of it.
    assert not target.exists() or _sha256(target) == expected.sha256
    assert not list(paths.models.rglob("*.part")) or where == "rename"
    gets_before = len(hub.blob_gets())

    record = Downloader(registry, paths).pull(SMOL_REPO)  # the restarted app

    assert _sha256(record.path) == expected.sha256
    assert len(hub.blob_gets()) == gets_before  # the verified bytes were not fetched again
    assert Downloader(registry, paths).pending() == []  # no stale "interrupted download" left
    assert [p.name for p in paths.models.rglob("*.gguf")] == [SMOL_FILE]


def test_disk_full_mid_download_installs_nothing_and_resumes(
    hub: HubMock, paths: Paths, registry: ModelRegistry, served_files: dict[str, MockFile],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_write = downloads._StagingSink.write

    def write_until_full(sink: downloads._StagingSink, data: bytes) -> int:
        if sink.tell() + len(data) > 30 * MB:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(sink, data)

    monkeypatch.setattr(downloads._StagingSink, "write", write_until_full)
    with pytest.raises(DownloadError) as caught:
        Downloader(registry, paths).pull(SMOL_REPO)
    causes = []
    cause: BaseException | None = caught.value
    while cause is not None:
        causes.append(cause)
        cause = cause.__cause__ or cause.__context__
    assert any(isinstance(c, OSError) and c.errno == errno.ENOSPC for c in causes)
    assert _downloaded(registry) == [] and list(paths.models.rglob("*.gguf")) == []
    pending = Downloader(registry, paths).pending()
    assert len(pending) == 1 and 0 < pending[0].done_bytes <= 30 * MB  # what was written is kept

    monkeypatch.setattr(downloads._StagingSink, "write", real_write)  # space freed
    record = Downloader(registry, paths).resume(pending[0])
    assert _sha256(record.path) == served_files["smol"].sha256
    assert hub.blob_gets()[-1].range == f"bytes={pending[0].done_bytes}-"


def test_a_failing_final_rename_is_a_download_error_and_the_retry_finishes(
    hub: HubMock, paths: Paths, registry: ModelRegistry, served_files: dict[str, MockFile],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_replace = os.replace

    def replace_fails(source: object, target: object) -> None:
        if str(source).endswith(".part"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_replace(source, target)

    monkeypatch.setattr(downloads.os, "replace", replace_fails)
    with pytest.raises(DownloadError, match="run the download again") as caught:
        Downloader(registry, paths).pull(SMOL_REPO)
    assert isinstance(caught.value.__cause__, OSError) and caught.value.__cause__.errno == errno.ENOSPC
    assert _downloaded(registry) == [] and list(paths.models.rglob("*.gguf")) == []
    monkeypatch.setattr(downloads.os, "replace", real_replace)
    gets = len(hub.blob_gets())
    record = Downloader(registry, paths).pull(SMOL_REPO)
    assert _sha256(record.path) == served_files["smol"].sha256 and len(hub.blob_gets()) == gets
