"""Downloads through the real huggingface-hub code path against a local hub (tests/hubmock.py)."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest

from inglenook.engine.base.errors import DownloadError, JobCancelled
from inglenook.engine.models.downloads import DownloadProgress, Downloader
from inglenook.engine.models.hub import QuantOption, RemoteFile
from inglenook.engine.models.registry import ModelRegistry
from inglenook.engine.runtime.model import LoadedModel
from inglenook.engine.runtime.model_loading import LoadOptions
from inglenook.engine.store.paths import Paths
from tests.downloads.conftest import (
    BAD_SHA_REPO, GATED_REPO, GEMMA_REPO, HOSTILE_NAMES, HOSTILE_REPO, JUNK_REPO, SMOL_FILE, SMOL_REPO, TOKEN,
)
from tests.hubmock import HubMock, MockFile

MB = 1024 * 1024


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def gguf_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.gguf"))


def assert_nothing_installed(paths: Paths, registry: ModelRegistry) -> None:
    assert [r for r in registry.refresh() if r.source != "starter"] == []
    assert gguf_files(paths.models) == []
    assert list(paths.downloads.glob("*.part")) == []


def cancel_after_first_chunk(cancel: threading.Event):
    def on_progress(event: DownloadProgress) -> None:
        if event.phase == "downloading" and event.done_bytes > 0:
            cancel.set()
    return on_progress


@pytest.mark.parametrize(("repo", "served"), [(SMOL_REPO, "smol"), (GEMMA_REPO, "gemma")])
def test_full_download_is_verified_registered_and_loadable(
    hub: HubMock, paths: Paths, registry: ModelRegistry, served_files: dict[str, MockFile], repo: str, served: str,
) -> None:
    events: list[DownloadProgress] = []
    record = Downloader(registry, paths).pull(repo, progress=events.append)

    expected = served_files[served]
    assert record.source == "download"
    assert record.path == paths.models / Path(*repo.split("/")) / expected.path
    assert record.size_bytes == expected.size
    assert sha256(record.path) == expected.sha256
    assert registry.resolve(record.id).path == record.path
    assert list(paths.downloads.iterdir()) == [] or all(p.suffix == ".lock" for p in paths.downloads.iterdir())
    # Progress: bytes only grow while downloading, end at the total, and finish with "done".
    downloading = [e.done_bytes for e in events if e.phase == "downloading"]
    assert downloading == sorted(downloading) and downloading[-1] == expected.size
    assert any(e.bytes_per_s > 0 for e in events if e.phase == "downloading")
    assert events[-1].phase == "done" and events[-1].fraction == 1.0
    model = LoadedModel(record, LoadOptions(context_size=256))
    try:
        assert len(model.tokenize("Hello there")) > 1
    finally:
        model.close()


def test_resume_after_the_connection_is_cut_mid_file(hub: HubMock, paths: Paths, registry: ModelRegistry,
                                                    served_files: dict[str, MockFile]) -> None:
    hub.cut_after = 25 * MB
    hub.cut_times = 1
    record = Downloader(registry, paths).pull(SMOL_REPO)

    assert sha256(record.path) == served_files["smol"].sha256
    gets = hub.blob_gets()
    assert len(gets) == 2
    assert gets[0].range is None
    resumed_at = int(gets[1].range.removeprefix("bytes=").rstrip("-"))
    assert 0 < resumed_at <= 25 * MB and gets[1].status == 206


def test_cancel_keeps_the_partial_file_and_a_restart_resumes(hub: HubMock, paths: Paths, registry: ModelRegistry,
                                                             served_files: dict[str, MockFile]) -> None:
    cancel = threading.Event()
    with pytest.raises(JobCancelled):
        Downloader(registry, paths).pull(SMOL_REPO, progress=cancel_after_first_chunk(cancel), cancel=cancel)

    assert [r for r in registry.refresh() if r.source != "starter"] == []  # a partial is never a model
    pending = Downloader(registry, paths).pending()
    assert len(pending) == 1 and pending[0].repo == SMOL_REPO and pending[0].path == SMOL_FILE
    kept = pending[0].done_bytes
    assert 0 < kept < served_files["smol"].size

    # A new Downloader stands for a restarted app: only the staging folder carries over.
    record = Downloader(registry, paths).resume(pending[0])
    assert sha256(record.path) == served_files["smol"].sha256
    resumed = hub.blob_gets()[-1]
    assert resumed.range == f"bytes={kept}-" and resumed.status == 206
    assert Downloader(registry, paths).pending() == []


def test_a_server_that_ignores_range_restarts_the_file(hub: HubMock, paths: Paths, registry: ModelRegistry,
                                                       served_files: dict[str, MockFile]) -> None:
    cancel = threading.Event()
    with pytest.raises(JobCancelled):
        Downloader(registry, paths).pull(SMOL_REPO, progress=cancel_after_first_chunk(cancel), cancel=cancel)
    hub.ignore_range = True

    record = Downloader(registry, paths).pull(SMOL_REPO)

    last = hub.blob_gets()[-1]
    assert last.range is not None and last.status == 200  # asked to resume, got the whole file
    assert record.path.stat().st_size == served_files["smol"].size  # restarted, never appended
    assert sha256(record.path) == served_files["smol"].sha256


def test_checksum_mismatch_discards_the_file(hub: HubMock, paths: Paths, registry: ModelRegistry,
                                             served_files: dict[str, MockFile]) -> None:
    hub.corrupt.add(served_files["smol"].sha256)
    with pytest.raises(DownloadError, match="sha256 does not match"):
        Downloader(registry, paths).pull(SMOL_REPO)
    assert_nothing_installed(paths, registry)
    assert Downloader(registry, paths).pending() == []


def test_unknown_repo_is_a_clear_error(hub: HubMock, paths: Paths, registry: ModelRegistry) -> None:
    with pytest.raises(DownloadError, match="no model repository nobody/nothing-GGUF"):
        Downloader(registry, paths).pull("nobody/nothing-GGUF")
    assert hub.requests[-1].status == 404


def test_gated_repo_without_a_token_says_what_to_do(hub: HubMock, paths: Paths, registry: ModelRegistry) -> None:
    with pytest.raises(DownloadError, match="gated.*hf_token setting or the HF_TOKEN"):
        Downloader(registry, paths).pull(GATED_REPO)
    assert any(r.status == 401 for r in hub.requests)
    assert_nothing_installed(paths, registry)


def test_gated_repo_with_the_token_from_the_environment(hub: HubMock, paths: Paths, registry: ModelRegistry,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from inglenook.engine.models.hub import resolve_token

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    record = Downloader(registry, paths, token=resolve_token(None)).pull(GATED_REPO, "Q4_K_M")
    assert record.source == "download"
    head = next(r for r in hub.requests if r.method == "HEAD")
    assert head.authorized
    # The token goes to the hub, never to the CDN host the hub redirects to.
    assert not any(r.authorized for r in hub.blob_gets())


def test_wrong_token_for_a_gated_repo(hub: HubMock, paths: Paths, registry: ModelRegistry) -> None:
    with pytest.raises(DownloadError, match="has not been granted access"):
        Downloader(registry, paths, token="hf_someone_else").pull(GATED_REPO)


def test_disk_full_is_refused_before_downloading(hub: HubMock, paths: Paths, registry: ModelRegistry,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=50 * MB))
    with pytest.raises(DownloadError, match="not enough disk space"):
        Downloader(registry, paths).pull(SMOL_REPO)
    assert hub.blob_gets() == []
    assert_nothing_installed(paths, registry)


def test_hostile_names_in_a_listing_are_rejected(hub: HubMock, paths: Paths, registry: ModelRegistry,
                                                 tmp_path: Path) -> None:
    downloader = Downloader(registry, paths)
    listing = downloader.hub.list_files(HOSTILE_REPO)
    assert listing.options == []
    assert sorted(listing.rejected) == sorted(HOSTILE_NAMES)
    with pytest.raises(DownloadError, match="no GGUF model files"):
        downloader.pull(HOSTILE_REPO)
    for name in HOSTILE_NAMES:
        crafted = QuantOption("Q4_K_M", (RemoteFile(name, 1000, "a" * 64),))
        with pytest.raises(DownloadError, match="unsafe file name"):
            downloader.download(HOSTILE_REPO, crafted)
    # The sha256 names the staging file, so a hostile one must not reach the file system either.
    with pytest.raises(DownloadError, match="invalid sha256"):
        downloader.pull(BAD_SHA_REPO)
    with pytest.raises(DownloadError, match="not a sha256"):
        downloader.discard("../../x")
    assert hub.blob_gets() == []
    assert not (tmp_path / "x.gguf").exists() and not (paths.models / "x.gguf").exists()
    assert not (paths.models.parent / "evil").exists() and not (paths.models / "evil.part").exists()


def test_a_file_that_is_not_gguf_is_rejected(hub: HubMock, paths: Paths, registry: ModelRegistry) -> None:
    with pytest.raises(DownloadError, match="not a GGUF file"):
        Downloader(registry, paths).pull(JUNK_REPO)
    assert_nothing_installed(paths, registry)
    assert Downloader(registry, paths).pending() == []


def test_pulling_again_reuses_the_verified_file(hub: HubMock, paths: Paths, registry: ModelRegistry) -> None:
    first = Downloader(registry, paths).pull(SMOL_REPO)
    second = Downloader(registry, paths).pull(SMOL_REPO, "Q4_1")
    assert second.id == first.id and second.path == first.path
    assert len(hub.blob_gets()) == 1


def test_the_hf_token_setting_opens_a_gated_repo(hub: HubMock, paths: Paths) -> None:
    from inglenook.engine.core.engine import Engine
    from inglenook.engine.models.downloads import downloader_for

    with Engine(paths, scan=False) as engine:
        engine.update_settings(hf_token=TOKEN)
        record = downloader_for(engine).pull(GATED_REPO)
        assert engine.registry.resolve(record.id).source == "download"


def test_pull_brings_the_repos_vision_projector_and_the_model_pairs_with_it(
        hub: HubMock, paths: Paths, registry: ModelRegistry, served_files: dict[str, MockFile], tmp_path: Path) -> None:
    from inglenook.engine.base import find_projector, read_gguf
    from tests.hubmock import MockRepo
    from tests.mmproj_writer import write_mmproj

    f16 = write_mmproj(tmp_path / "mmproj-SmolVision-f16.gguf")
    other = write_mmproj(tmp_path / "mmproj-SmolVision-q8_0.gguf", seed=1)
    repo = "ggml-org/SmolVision-GGUF"
    hub.add(MockRepo(repo, [served_files["smol"], MockFile(f16.name, f16), MockFile(other.name, other)]))
    record = Downloader(registry, paths).pull(repo)
    folder = paths.models / "ggml-org" / "SmolVision-GGUF"
    assert sorted(p.name for p in folder.iterdir()) == sorted([served_files["smol"].path, f16.name])
    projector = find_projector(read_gguf(record.path))
    assert projector is not None and projector.path.name == f16.name
    assert [r.path for r in registry.list()] == [record.path]  # the projector is not a model of its own
