"""Settings → Team keys and Engines, and a remote engine's model chatting in the real window."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.second_server import REMOTE_KEY, second_inglenook

from .conftest import type_and_send, wait_answer

STARTER = "smollm2-135m-instruct:q4_1"


@pytest.fixture
def remote(tmp_path: Path, smollm2_path: Path) -> Iterator[object]:
    with second_inglenook(tmp_path / "remote-home") as server:
        yield server


def test_team_keys_page_creates_shows_once_and_revokes(qtbot, window) -> None:
    dialog = window.open_settings("Team keys")
    page = dialog.keys_page
    page.name.setText("alice")
    page.rpm.setValue(30)
    page.create_button.click()
    key = page.new_key.text()
    assert key.startswith("ink-") and page.new_key.isVisibleTo(dialog)
    assert page.table.rowCount() == 1 and page.table.item(0, 0).text() == "alice"
    assert page.table.item(0, 2).text() == "30" and key not in page.table.item(0, 1).text()
    assert window.engine.store and [k.name for k in dialog.keys_page.keys.list()] == ["alice"]
    page.table.selectRow(0)
    page.revoke_button.click()
    assert page.table.rowCount() == 0 and "Revoked alice" in page.message.text()
    dialog.reject()


def test_a_remote_engine_added_in_settings_answers_in_the_window(qtbot, window, remote) -> None:
    dialog = window.open_settings("Engines")
    page = dialog.engines_page
    assert "no system keyring" in page.key_note.text()  # this machine has none: said plainly
    page.name.setText("office")
    page.base_url.setText(remote.url)
    page.key.setText(REMOTE_KEY)
    page.add_button.click()
    assert page.table.item(0, 2).text() == "settings database"
    qtbot.waitUntil(lambda: page.table.item(0, 3).text() not in ("…", ""), timeout=30_000)
    assert int(page.table.item(0, 3).text()) >= 1
    dialog.reject()

    window.model_list.refresh()
    remote_id = f"office/{STARTER}"
    qtbot.waitUntil(lambda: any(m.id == remote_id for m in window.models), timeout=30_000)
    record = next(m for m in window.models if m.id == remote_id)
    assert record.source == "remote:office"
    conversation = window.engine.chats.new_conversation(model_id=remote_id, sampling={"temperature": 0, "max_tokens": 12})
    window.conversations.refresh()
    window.open_conversation(conversation.id)
    qtbot.waitUntil(lambda: window.conversation is not None and window.conversation.id == conversation.id)
    assert "remote (office)" in window.chat_page.picker.text()
    type_and_send(qtbot, window, "Name three colours.")
    wait_answer(qtbot, window, conversation.id)
    stored = window.engine.store.messages(conversation.id)
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[-1].status == "complete" and stored[-1].content and stored[-1].model_id == remote_id
    assert window.view.widgets[-1].text == stored[-1].content
    assert not window.chat_page.banner.isVisible()  # no "not installed" complaint for a remote model
