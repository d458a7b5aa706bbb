"""While a long prompt is read, the answer's status line says how far instead of "Starting the answer…".

The engine's step is held shut until the window shows the reading line, so the test sees
the state a person sees for minutes on a slow CPU, without depending on timing."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from tests.held_steps import hold_steps

from .conftest import ANSWER_TIMEOUT_MS, new_chat, wait_answer

pytestmark = [pytest.mark.gui, pytest.mark.integration]


def test_the_status_shows_the_prompt_being_read(qtbot, window, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = hold_steps(monkeypatch)
    try:
        cid = new_chat(qtbot, window, max_tokens=4)
        words = ("alpha", "beta", "gamma", "delta", "omega", "sigma")
        window.composer.input.setPlainText(" ".join(words[i % 6] for i in range(700)) + ". Say one word.")
        qtbot.keyClick(window.composer.input, Qt.Key.Key_Return)
        # The prompt is admitted but not one token of it read: the line says so.
        qtbot.waitUntil(lambda: window.view.streaming_widget() is not None
                        and window.view.streaming_widget().typing.text().startswith("Reading 0 of "),
                        timeout=ANSWER_TIMEOUT_MS)
        typing = window.view.streaming_widget().typing
        assert typing.isVisible() and typing.text().endswith(" prompt tokens")
        gate.set()
        wait_answer(qtbot, window, cid)
        assert not typing.isVisible()  # the answer replaced it
    finally:
        gate.set()
