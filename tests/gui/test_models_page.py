"""The Models page against a local Hugging Face hub (tests/hubmock.py), driven as a person would:
search, pick a repo, read the quant table, download, cancel and resume, import, drop a file."""

from __future__ import annotations

from pathlib import Path

import pytest
from inglenook.engine import ModelRecord
from inglenook.engine.runtime.fit import detect_machine
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent

from tests.downloads.conftest import (  # noqa: F401 — fixtures: the local hub serving the real test models
    GATED_REPO,
    GEMMA_FILE,
    GEMMA_REPO,
    SMOL_FILE,
    SMOL_REPO,
    hub,
    served_files,
)

FIT_LABELS = ("Fits on GPU", "Partial offload", "CPU only", "Too large")
WAIT_MS = 120_000


@pytest.fixture
def page(qtbot, window, hub):  # noqa: F811 — hub: HF_ENDPOINT points at the local server
    # The size these tests read whole facts lines at (a narrower window elides them; the
    # first window opens within the screen, 800 px wide offscreen).
    window.resize(1280, 800)
    window.show_page("models")
    models_page = window.models_page
    models_page.confirm = False
    models_page.show_tab(models_page.DISCOVER)
    return models_page


def read_models_again(qtbot, window) -> None:
    """Read the installed models again and wait until the window has this read, not an
    earlier one: the disk lane runs its calls in order on one thread and hands the results
    back in order, so a call queued after the read reports back after it."""
    done: list[bool] = []
    window.model_list.refresh()
    window.workers.disk.run(lambda: None, lambda _result: done.append(True))
    qtbot.waitUntil(lambda: bool(done), timeout=WAIT_MS)


def search(qtbot, page, text: str = "") -> list[str]:
    page.browser.search.setText(text)
    qtbot.mouseClick(page.browser.search_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: page.browser.list.count() > 0 and page.browser.results_label.text() != "SEARCHING…",
                    timeout=WAIT_MS)
    return page.browser.repos()


def open_repo(qtbot, page, repo: str) -> None:
    if repo not in page.browser.repos():
        search(qtbot, page, repo.split("/")[1])
    page.browser.select_repo(repo)
    qtbot.waitUntil(lambda: page.browser.panel.details is not None
                    and page.browser.panel.details.listing.repo == repo, timeout=WAIT_MS)


def downloaded(window, repo: str) -> list[ModelRecord]:
    folder = Path(window.engine.paths.models) / repo
    return [r for r in window.models if r.source == "download" and Path(r.path).parent == folder]


def test_search_lists_results_with_their_facts_and_sorts(qtbot, page) -> None:
    repos = search(qtbot, page, "GGUF")
    assert SMOL_REPO in repos and GEMMA_REPO in repos
    assert repos.index(SMOL_REPO) < repos.index(GEMMA_REPO)  # most downloads first (5000 > 900)
    item = page.browser.list.itemWidget(page.browser.list.item(repos.index(SMOL_REPO)))
    texts = " ".join(label.text() for label in item.findChildren(type(page.notice)))
    for fact in ("SmolLM2-135M-Instruct-GGUF", "HuggingFaceTB", "5K", "40", "Mar 1, 2025", "apache-2.0"):
        assert fact in texts

    page.browser.sort.setCurrentIndex(page.browser.sort.findData("likes"))  # re-runs the search
    qtbot.waitUntil(lambda: page.browser.repos()[:1] == [GEMMA_REPO], timeout=WAIT_MS)  # 120 likes beat 40


def test_selecting_a_repo_shows_the_quant_table_with_fit_badges(qtbot, page) -> None:
    open_repo(qtbot, page, GEMMA_REPO)
    panel = page.browser.panel
    table = panel.table
    assert table.isVisible() and table.rowCount() == 1
    option = table.options[0]
    assert option.quant == "Q4_K_M" and option.name == GEMMA_FILE
    assert table.item(0, 1).text().endswith("MB")
    assert float(table.item(0, 2).text()) == pytest.approx(option.size * 8 / 268098176, abs=0.01)
    badge = table.badges[GEMMA_FILE]
    assert badge.text().startswith(FIT_LABELS)
    # A 250 MB model fits any GPU whole, and this machine's RAM when there is none.
    assert badge.property("verdict") == ("gpu" if detect_machine().has_gpu else "cpu")
    assert "RAM free" in panel.basis.text()
    assert table.buttons[GEMMA_FILE].text() == "Download" and table.buttons[GEMMA_FILE].isEnabled()


def test_download_shows_progress_and_installs_into_the_list_and_picker(qtbot, window, page, hub) -> None:  # noqa: F811
    hub.blob_delay_s = 0.01  # a few seconds on the wire, so progress is seen
    open_repo(qtbot, page, SMOL_REPO)
    seen = []
    qtbot.mouseClick(page.browser.panel.table.buttons[SMOL_FILE], Qt.MouseButton.LeftButton)
    assert page.downloads.isVisible() and len(page.downloads.jobs) == 1
    job, card = next(iter(page.downloads.jobs.values()))
    job.progressed.connect(seen.append)
    assert page.browser.panel.table.buttons[SMOL_FILE].text() == "Downloading"
    qtbot.waitUntil(lambda: card.bar.value() > 0 and " of " in card.status.text(), timeout=WAIT_MS)
    assert "/s" in card.status.text() or "starting" in card.status.text()
    qtbot.waitUntil(lambda: not page.downloads.jobs, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: bool(downloaded(window, SMOL_REPO)), timeout=WAIT_MS)

    phases = [p.phase for p in seen]
    assert "downloading" in phases and phases[-1] == "done"
    done = [p.done_bytes for p in seen if p.phase == "downloading"]
    assert done == sorted(done)  # progress only moves forward
    record = downloaded(window, SMOL_REPO)[0]
    assert record.id in [r.record.id for r in page.rows]
    assert record.id in [r.id for r in window.picker.records]
    assert not page.downloads.isVisible() and not page.downloads.pending_cards
    assert page.browser.panel.table.buttons[SMOL_FILE].text() == "Installed"
    assert "installed" in page.notice.text()


def test_cancel_keeps_nothing_listed_and_resume_completes(qtbot, window, page, hub) -> None:  # noqa: F811
    hub.blob_delay_s = 0.05  # about 5 s for the file: time to cancel mid-way
    open_repo(qtbot, page, SMOL_REPO)
    qtbot.mouseClick(page.browser.panel.table.buttons[SMOL_FILE], Qt.MouseButton.LeftButton)
    _job, card = next(iter(page.downloads.jobs.values()))
    qtbot.waitUntil(lambda: card.bar.value() > 0, timeout=WAIT_MS)
    qtbot.mouseClick(card.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not page.downloads.jobs and bool(page.downloads.pending_cards), timeout=WAIT_MS)

    read_models_again(qtbot, window)
    assert not downloaded(window, SMOL_REPO)
    assert not [r for r in window.engine.registry.list() if r.source == "download"]
    pending = page.downloads.pending_cards[0]
    assert pending.group.repo == SMOL_REPO and 0 < pending.group.done_bytes < pending.group.size
    assert page.browser.panel.table.buttons[SMOL_FILE].text() == "Download"

    hub.blob_delay_s = 0.0
    requests_before = len(hub.blob_gets())
    qtbot.mouseClick(pending.resume_button, Qt.MouseButton.LeftButton)
    assert len(page.downloads.jobs) == 1 and not page.downloads.pending_cards
    qtbot.waitUntil(lambda: not page.downloads.jobs, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: bool(downloaded(window, SMOL_REPO)), timeout=WAIT_MS)
    resumed = hub.blob_gets()[requests_before:]
    assert resumed and resumed[0].range is not None and not resumed[0].range.startswith("bytes=0-")
    qtbot.waitUntil(lambda: not page.downloads.pending_cards and not page.downloads.isVisible(), timeout=WAIT_MS)


def test_discard_removes_an_interrupted_download(qtbot, window, page, hub) -> None:  # noqa: F811
    hub.blob_delay_s = 0.05
    open_repo(qtbot, page, SMOL_REPO)
    qtbot.mouseClick(page.browser.panel.table.buttons[SMOL_FILE], Qt.MouseButton.LeftButton)
    _, card = next(iter(page.downloads.jobs.values()))
    qtbot.waitUntil(lambda: card.bar.value() > 0, timeout=WAIT_MS)
    qtbot.mouseClick(card.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(page.downloads.pending_cards), timeout=WAIT_MS)
    qtbot.mouseClick(page.downloads.pending_cards[0].discard_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not page.downloads.pending_cards and not page.downloads.isVisible(), timeout=WAIT_MS)
    assert not list(Path(window.engine.paths.downloads).glob("*.part"))


def test_gated_repo_explains_what_to_do(qtbot, page) -> None:
    open_repo(qtbot, page, GATED_REPO)
    panel = page.browser.panel
    assert panel.notice.isVisible() and "Gated" in panel.notice.text()
    assert "No fit estimate" in panel.basis.text()  # the header read is refused too
    option = panel.table.options[0]
    qtbot.mouseClick(panel.table.buttons[option.name], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: page.banner.isVisible(), timeout=WAIT_MS)
    assert page.banner.title.text() == "This model needs permission"
    assert "gated" in page.banner.text.text() and "HF_TOKEN" in page.banner.text.text()
    assert not page.downloads.jobs and not page.downloads.pending_cards


def test_unknown_repo_is_explained(qtbot, page) -> None:
    page.browser.open_repo("nobody/does-not-exist-GGUF")
    qtbot.waitUntil(lambda: page.banner.isVisible(), timeout=WAIT_MS)
    assert page.banner.title.text() == "Not found on Hugging Face"
    assert "nobody/does-not-exist-GGUF" in page.banner.text.text()


def test_import_a_file_through_the_page(qtbot, window, page, gemma_path) -> None:
    page.import_paths([gemma_path])
    qtbot.waitUntil(lambda: any(Path(r.path) == gemma_path for r in window.models), timeout=WAIT_MS)
    record = next(r for r in window.models if Path(r.path) == gemma_path)
    assert record.source == "import" and gemma_path.is_file()  # used in place, not moved
    assert record.id in [r.id for r in window.picker.records]
    assert record.id in [row.record.id for row in page.rows]
    assert page.stack.currentWidget() is page.installed
    assert page.last_import is not None and page.last_import.imported == [record]
    # Before it loads, its row and the picker say what loading it takes (issue 27: a 270M
    # model no longer reserves gigabytes of cache, and says so first; issue 44: its window
    # layers' caches are window-sized, so its trained 32k x 4 costs 444 MiB of f16 cache, not
    # the 2.3 GiB full-size window caches took).
    plan = window.model_list.plans[record.id]
    assert plan.context <= 32_768 and plan.sequences == 4 and plan.kv_cache_type == "f16"
    assert plan.resident_bytes < 2 * 1024**3
    row = next(row for row in page.rows if row.record.id == record.id)
    assert row.plan_badge is not None and f"{plan.context:,} ctx × 4" in row.plan_badge.text()
    assert "f16 cache" in row.plan_badge.toolTip()
    assert window.picker.plans[record.id] == plan

    page.import_paths([gemma_path])  # twice: recognised, not added again
    qtbot.waitUntil(lambda: bool(page.last_import.already), timeout=WAIT_MS)
    assert sum(Path(r.path) == gemma_path for r in window.engine.registry.list()) == 1


def test_drop_a_file_on_the_window_imports_it(qtbot, window, gemma_path, tmp_path) -> None:
    window.models_page.confirm = False
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(gemma_path))])
    enter = QDragEnterEvent(QPoint(400, 300), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)
    window.dragEnterEvent(enter)
    assert enter.isAccepted()
    drop = QDropEvent(QPointF(400, 300), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                      Qt.KeyboardModifier.NoModifier)
    window.dropEvent(drop)
    assert window.pages.currentWidget() is window.models_page
    qtbot.waitUntil(lambda: any(Path(r.path) == gemma_path for r in window.models), timeout=WAIT_MS)
    assert any(Path(r.path) == gemma_path for r in window.picker.records)

    text_file = tmp_path / "notes.txt"
    text_file.write_text("not a model")
    other = QMimeData()
    other.setUrls([QUrl.fromLocalFile(str(text_file))])
    refused = QDragEnterEvent(QPoint(400, 300), Qt.DropAction.CopyAction, other, Qt.MouseButton.LeftButton,
                              Qt.KeyboardModifier.NoModifier)
    refused.ignore()
    window.dragEnterEvent(refused)
    assert not refused.isAccepted()


def test_disk_full_and_damaged_downloads_are_explained(qtbot, window, page, hub, monkeypatch) -> None:  # noqa: F811
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    real_disk_usage = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 10**6, 10**6))
    open_repo(qtbot, page, SMOL_REPO)
    qtbot.mouseClick(page.browser.panel.table.buttons[SMOL_FILE], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: page.banner.isVisible(), timeout=WAIT_MS)
    assert page.banner.title.text() == "The download did not finish"
    assert "Not enough disk space" in page.banner.text.text()
    assert not page.downloads.jobs and not downloaded(window, SMOL_REPO)

    monkeypatch.setattr(shutil, "disk_usage", real_disk_usage)
    smol = hub.repos[SMOL_REPO].file(SMOL_FILE)
    hub.corrupt.add(smol.sha256)
    retry = next(b for b in page.banner.findChildren(type(page.import_button)) if b.property("action") == "retry")
    qtbot.mouseClick(retry, Qt.MouseButton.LeftButton)  # "Try again" re-runs the same download
    qtbot.waitUntil(lambda: page.banner.isVisible() and "verification" in page.banner.text.text(), timeout=WAIT_MS)
    assert page.banner.title.text() == "The download did not finish"
    read_models_again(qtbot, window)
    assert not downloaded(window, SMOL_REPO) and not page.downloads.pending_cards  # the damaged file is gone


def test_download_errors_are_titled_by_their_cause() -> None:
    import errno

    import httpx
    from inglenook.app.services import errors as app_errors
    from inglenook.engine import DownloadError

    def caused(cause: BaseException) -> DownloadError:
        try:
            raise DownloadError("downloading x.gguf failed") from cause
        except DownloadError as exc:
            return exc

    assert app_errors.explain(caused(OSError(errno.ENOSPC, "No space left on device"))).title == "The disk is full"
    network = app_errors.explain(caused(httpx.ConnectError("refused")))
    assert network.title == "Hugging Face cannot be reached" and app_errors.RETRY in dict(network.actions)
    plain = app_errors.explain(DownloadError("x.gguf failed verification: its sha256 does not match"))
    assert plain.title == "The download did not finish" and plain.text.startswith("X.gguf failed verification")


def test_drop_on_the_message_box_imports_instead_of_pasting_the_path(qtbot, window, gemma_path) -> None:
    from PySide6.QtWidgets import QApplication

    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(gemma_path))])
    viewport = window.composer.input.viewport()
    enter = QDragEnterEvent(QPoint(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(viewport, enter)
    assert enter.isAccepted()
    drop = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                      Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(viewport, drop)
    qtbot.waitUntil(lambda: any(Path(r.path) == gemma_path for r in window.models), timeout=WAIT_MS)
    assert window.composer.input.toPlainText() == ""


def test_find_models_from_other_apps(qtbot, window, page, gemma_path, tmp_path, monkeypatch) -> None:
    snapshot = tmp_path / "hf" / "models--unsloth--gemma-3-270m-GGUF" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / GEMMA_FILE).symlink_to(gemma_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama"))
    monkeypatch.setattr(Path, "home", staticmethod(lambda: tmp_path))  # no LM Studio folder here

    qtbot.mouseClick(page.find_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: any(Path(r.path).name == GEMMA_FILE for r in window.models), timeout=WAIT_MS)
    record = next(r for r in window.models if Path(r.path).name == GEMMA_FILE)
    assert record.source == "import" and Path(record.path).parent == snapshot
    assert "Added" in page.notice.text()

    qtbot.mouseClick(page.find_button, Qt.MouseButton.LeftButton)  # again: nothing new
    qtbot.waitUntil(lambda: "nothing new" in page.notice.text(), timeout=WAIT_MS)
