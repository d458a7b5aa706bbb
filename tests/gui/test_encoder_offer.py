"""The window offers an embedding model where documents are searched (issue 30, item 4): with
no encoder installed a quiet line under the chips names the recommended one and its size (from
the hub's listing, here a local hub serving a tiny BERT GGUF under its name), Download starts it
on the Models page as any download, and once it is installed the line goes and search uses it.
"Not now" hides the line for good (a setting)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook.engine import Settings, human_size
from inglenook.engine.models import encoder
from tests.document_files import report_pdf
from tests.downloads.conftest import point_hub_at
from tests.encoder_writer import write_encoder
from tests.hubmock import HubMock, MockFile, MockRepo

from .conftest import ANSWER_TIMEOUT_MS, new_chat


@pytest.fixture
def encoder_hub(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MockFile]:
    """A local hub with the recommended encoder's repo; huggingface-hub pointed at it (as
    tests/downloads/conftest.py's ``hub`` does)."""
    served = MockFile(encoder.FILE, write_encoder(tmp_path / "served-encoder.gguf"))
    with HubMock() as mock:
        mock.add(MockRepo(encoder.REPO, [served], gguf={"architecture": "bert", "context_length": 512}))
        point_hub_at(monkeypatch, mock.endpoint)
        yield served


def attach_searched(qtbot, window, tmp_path: Path) -> None:
    new_chat(qtbot, window)
    window.engine.chats.context_of = lambda _model_id: 1200  # too small for the document: searched
    window.attachments.attach([report_pdf(tmp_path / "report.pdf", n_pages=3)])
    bar = window.composer.attachments
    qtbot.waitUntil(lambda: len(bar.chips()) == 1, timeout=ANSWER_TIMEOUT_MS)
    assert list(bar.chips().values())[0].text().endswith("searched  ✕")


def test_the_offer_downloads_the_encoder_and_search_uses_it(qtbot, window, encoder_hub: MockFile,
                                                            tmp_path: Path) -> None:
    bar = window.composer.attachments
    assert not bar.encoder_note.isVisible()  # nothing searched, nothing offered
    attach_searched(qtbot, window, tmp_path)
    qtbot.waitUntil(bar.encoder_note.isVisible, timeout=30_000)
    assert "uses the chat model" in bar.encoder_text.text()
    # The size is the hub's listing of the file (the tiny test encoder), not the known 84 MB.
    assert bar.encoder_button.text() == f"Download {encoder.NAME} ({human_size(encoder_hub.size)})"

    with qtbot.waitSignal(window.models_page.downloads.installed, timeout=ANSWER_TIMEOUT_MS) as installed:
        bar.encoder_button.click()  # on the Models page's downloads, as any other
    record = installed.args[0]
    assert record.architecture == "bert" and Path(record.path).name == encoder.FILE
    qtbot.waitUntil(lambda: not bar.encoder_note.isVisible(), timeout=30_000)
    assert window.attachments.offer is None
    assert window.engine.background.search_model() == record.id  # search now embeds with the encoder


def test_not_now_hides_the_offer_and_is_remembered(qtbot, window, encoder_hub: MockFile, tmp_path: Path) -> None:
    bar = window.composer.attachments
    attach_searched(qtbot, window, tmp_path)
    qtbot.waitUntil(bar.encoder_note.isVisible, timeout=30_000)
    bar.encoder_later.click()
    assert not bar.encoder_note.isVisible()
    qtbot.waitUntil(lambda: Settings.load(window.engine.store).encoder_offer_dismissed, timeout=10_000)
    with qtbot.waitSignal(window.attachments.changed, timeout=ANSWER_TIMEOUT_MS):
        window.attachments.reload()  # the chat drawn again: still searched, no offer
    assert not bar.encoder_note.isVisible() and window.engine.encoder_offer(online=False) is not None
