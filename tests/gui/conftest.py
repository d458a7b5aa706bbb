"""GUI tests: the real window, offscreen, driven as a person would, with the real tiny model."""

from __future__ import annotations

import os
import warnings

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from collections.abc import Iterator

import pytest

pytestmark = pytest.mark.gui

# Answers are slow on a busy two-core machine; waits are generous, assertions are not timing-based.
ANSWER_TIMEOUT_MS = 180_000


@pytest.fixture(scope="session", autouse=True)
def sound_server(tmp_path_factory):
    """A PulseAudio daemon of the tests' own (tests/audio_device.py), started before anything
    asks Qt for a sound device: Qt's sound backend connects once per process, to the server
    named then. The voice tests record and play through it, and no test reaches the machine's
    real sound server. None where PulseAudio is not installed (the voice tests then skip)."""
    from tests import audio_device

    if audio_device.missing():
        yield None
        return
    try:
        server = audio_device.PulseServer(tmp_path_factory.mktemp("pulse"))
    except (OSError, RuntimeError) as exc:  # a sandbox without the daemon's needs: the voice tests skip
        warnings.warn(f"the test sound server did not start: {exc}", stacklevel=1)
        yield None
        return
    before = os.environ.get("PULSE_SERVER")
    os.environ["PULSE_SERVER"] = server.address
    yield server
    if before is None:
        os.environ.pop("PULSE_SERVER", None)
    else:
        os.environ["PULSE_SERVER"] = before
    server.close()


@pytest.fixture
def engine(home, smollm2_path):  # home: the per-test INGLENOOK_HOME
    from inglenook.engine import Engine

    engine = Engine()
    yield engine
    engine.close()


@pytest.fixture
def window(qtbot, qapp, engine) -> Iterator[object]:
    from inglenook.app.widgets import theme
    from inglenook.app.window import MainWindow

    theme.apply_theme(qapp, "light")
    win = MainWindow(engine, start_api=False)
    qtbot.addWidget(win)
    win.show()
    qtbot.waitUntil(lambda: bool(win.models), timeout=30_000)
    yield win
    win.shutdown()


def new_chat(qtbot, window, max_tokens: int = 12, **extra) -> int:
    """A greedy conversation (temperature 0) opened in the window; returns its id."""
    sampling = {"temperature": 0.0, "top_k": 1, "max_tokens": max_tokens, **extra}
    conversation = window.engine.chats.new_conversation(sampling=sampling)
    window.conversations.refresh()
    window.open_conversation(conversation.id)
    qtbot.waitUntil(lambda: window.conversation is not None and window.conversation.id == conversation.id)
    return conversation.id


def type_and_send(qtbot, window, text: str) -> None:
    from PySide6.QtCore import Qt

    window.composer.input.setFocus()
    qtbot.keyClicks(window.composer.input, text)
    qtbot.keyClick(window.composer.input, Qt.Key.Key_Return)


def wait_answer(qtbot, window, conversation_id: int) -> None:
    qtbot.waitUntil(
        lambda: not window.chat.is_streaming(conversation_id)
        and (window.current_id != conversation_id or window.view.streaming_widget() is None),
        timeout=ANSWER_TIMEOUT_MS,
    )
