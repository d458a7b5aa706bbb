"""What the window says is true: Discover contacts Hugging Face only when opened, and says so;
a network failure reads as a sentence, not an exception's name; the welcome says the starter
model is ready only once it is loaded."""

from __future__ import annotations

import httpx
import pytest
from PySide6.QtWidgets import QApplication

from inglenook.app.services import errors as app_errors
from inglenook.app.pages.models.hub import DISCOVER_NOTE
from inglenook.app.widgets.welcome import NETWORK_PROMISE
from inglenook.engine import DownloadError
from inglenook.engine.models.hub import hub_errors
from tests.downloads.conftest import hub, served_files  # noqa: F401 — fixtures: a local Hugging Face hub

pytestmark = pytest.mark.gui


def test_discover_contacts_the_hub_only_when_opened_and_says_so(qtbot, window, hub) -> None:  # noqa: F811
    page = window.models_page
    window.show_page("models")  # the Installed tab: nothing online
    # Anything the Installed tab (wrongly) sent would be queued on a lane by now: let it run.
    qtbot.waitUntil(lambda: window.workers.wait(0), timeout=60_000)
    QApplication.processEvents()  # and deliver what the lanes posted back
    assert hub.requests == []
    page.show_tab(page.DISCOVER)
    qtbot.waitUntil(lambda: bool(hub.requests), timeout=60_000)
    assert page.browser.network_note.isVisible() and page.browser.network_note.text() == DISCOVER_NOTE
    assert "Discover" in NETWORK_PROMISE  # the welcome and About name the exception to "nothing is contacted"


def test_an_unreachable_hub_is_explained_in_a_sentence() -> None:
    with pytest.raises(DownloadError) as raised, hub_errors("owner/repo", None):
        raise httpx.ConnectError("[Errno -2] Name or service not known")
    said = app_errors.explain(raised.value)
    assert said.title == "Hugging Face cannot be reached"
    assert "Error" not in said.text and "Errno" not in said.text and said.text.endswith(".")
    assert "ConnectError" in said.detail  # the exact cause stays in the details (the banner's tooltip)


def test_the_welcome_says_ready_only_once_the_model_is_loaded(qtbot, window) -> None:
    from inglenook.app.desktop import maybe_welcome

    assert window.hub.loaded is None
    dialog = maybe_welcome(window)
    assert dialog is not None
    assert "is loading" in dialog.body.text() and "is ready" not in dialog.body.text()
    window.model_list.load(window.model_list.default_model)
    qtbot.waitUntil(lambda: "is ready" in dialog.body.text(), timeout=120_000)
    assert window.hub.loaded == window.model_list.default_model
    dialog.start_button.click()
