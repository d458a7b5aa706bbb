"""The Models page's Speech tab (issue 42, items 1 and 2): installed speech models with their
licences, Whisper models and Piper voices from the local hub (tests/hubmock.py, a mirror
built at test time from the starter packages), voices listed by language and quality, a
download from the tab, and Preview playing a voice's sample and an installed voice through the
window's PCM speaker into the tests' own sound server (tests/audio_device.py), recorded there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import audio_device
from tests.downloads.test_speech_pull import VOICE_ID, WHISPER_REPO, speech_hub  # noqa: F401 — the fixture
from tests.voice.recordings import speech_missing

pytestmark = pytest.mark.skipif(speech_missing() is not None, reason=str(speech_missing()))


@pytest.fixture
def speech_page(qtbot, home: Path, speech_hub) -> Iterator[object]:  # noqa: F811
    from inglenook.app.pages.models.page import ModelsPage
    from inglenook.app.services.operations import Operations
    from inglenook.engine import Engine

    engine = Engine(scan=False)
    operations = Operations.of_its_own()
    page = ModelsPage(engine, operations)
    qtbot.addWidget(page)
    page.confirm = False
    yield page
    page.shutdown()
    operations.close()
    engine.close()


def _rows(tree) -> list[list[str]]:
    return [[tree.topLevelItem(i).text(c) for c in range(tree.columnCount() - 1)] for i in range(tree.topLevelItemCount())]


def _buttons(tree, row: int) -> list:
    from PySide6.QtWidgets import QPushButton

    return tree.itemWidget(tree.topLevelItem(row), tree.columnCount() - 1).findChildren(QPushButton)


def _button(tree, row: int, text: str | None = None):
    """The row's button (the one named ``text`` where the row has several)."""
    from PySide6.QtWidgets import QPushButton

    widget = tree.itemWidget(tree.topLevelItem(row), tree.columnCount() - 1)
    if isinstance(widget, QPushButton):
        return widget
    buttons = widget.findChildren(QPushButton)
    return next(b for b in buttons if text is None or b.text() == text)


def _heard(qtbot, speech, sound_server, button) -> str:
    """Click a Preview ``button``: the path it plays, once its sound reached the speakers."""
    recording = sound_server.record_speakers()
    try:
        with qtbot.waitSignal(speech.preview_ready, timeout=120_000) as ready:
            button.click()
        assert speech.player.playing
        qtbot.waitUntil(lambda: speech.player.duration_ms > 1000, timeout=30_000)  # a sentence, read a chunk at a time
        qtbot.waitUntil(lambda: recording.loud_samples() > 2_000, timeout=30_000)
        qtbot.waitUntil(lambda: not speech.player.playing, timeout=60_000)  # played to its end by itself
        assert speech.player.position() == 0  # Play again would start from the beginning
    finally:
        recording.close()
    return str(ready.args[0])


def test_the_speech_tab_lists_downloads_and_previews(qtbot, speech_page, home: Path, sound_server) -> None:
    if sound_server is None:
        pytest.skip(audio_device.missing() or "the test sound server did not start (see the warning)")
    speech = speech_page.speech
    with qtbot.waitSignal(speech.changed, timeout=60_000, check_params_cb=lambda: bool(speech.voices)):
        speech_page.show_tab(speech_page.SPEECH)
    qtbot.waitUntil(lambda: speech.voice_list.topLevelItemCount() == 2 and speech.installed.topLevelItemCount() >= 2)
    installed = {row[0]: row for row in _rows(speech.installed)}
    assert installed["whisper-tiny.en"][1:] == ["Speech to text", "—"]
    assert installed["en_US-joe-medium"][1:] == ["Voice", "CC0"]  # the starter voice's own licence
    assert _rows(speech.whisper_list)[0][:3] == [WHISPER_REPO, "50", "mit"]
    assert [row[:3] for row in _rows(speech.voice_list)] == [
        ["de_DE-mirror-low", "de_DE", "low"], [VOICE_ID, "en_GB", "medium"]]
    speech.language.setCurrentText("en_GB")  # one language
    assert [row[0] for row in _rows(speech.voice_list)] == [VOICE_ID]

    # Preview before downloading: the sample Piper's repository keeps beside the voice.
    assert _heard(qtbot, speech, sound_server, _button(speech.voice_list, 0, "Preview")).endswith("speaker_0.mp3")
    assert VOICE_ID not in speech.installed_ids

    with qtbot.waitSignal(speech.installed_changed, timeout=120_000):
        _button(speech.voice_list, 0, "Download").click()
    qtbot.waitUntil(lambda: VOICE_ID in speech.installed_ids, timeout=30_000)
    assert (home / "models" / "speech" / "voices" / VOICE_ID / f"{VOICE_ID}.onnx").is_file()
    assert {row[0]: row for row in _rows(speech.installed)}[VOICE_ID][2] == "CC BY 4.0"
    assert _button(speech.voice_list, 0, "Installed").isEnabled() is False
    # Spoken now by the downloaded voice.
    assert _heard(qtbot, speech, sound_server, _button(speech.voice_list, 0, "Preview")).endswith(f"{VOICE_ID}.wav")

    with qtbot.waitSignal(speech.installed_changed, timeout=120_000):
        _button(speech.whisper_list, 0).click()
    qtbot.waitUntil(lambda: "whisper-mirror.en" in speech.installed_ids, timeout=30_000)
    assert _button(speech.whisper_list, 0).text() == "Installed"

    # Remove: offered for what was downloaded here, not for the starters of their packages.
    rows = [row[0] for row in _rows(speech.installed)]
    assert [b.text() for b in _buttons(speech.installed, rows.index("en_US-joe-medium"))] == ["Preview"]
    remove = next(b for b in _buttons(speech.installed, rows.index(VOICE_ID)) if b.text() == "Remove")
    with qtbot.waitSignal(speech.installed_changed, timeout=30_000):
        remove.click()
    qtbot.waitUntil(lambda: VOICE_ID not in speech.installed_ids, timeout=30_000)
    assert not (home / "models" / "speech" / "voices" / VOICE_ID).exists()


@pytest.mark.parametrize("size", ((800, 560), (1280, 800)), ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_speech_tab_fits(qtbot, speech_page, size) -> None:
    from .layout_check import problems

    speech = speech_page.speech
    speech_page.resize(*size)
    speech_page.show()
    with qtbot.waitSignal(speech.changed, timeout=60_000, check_params_cb=lambda: bool(speech.voices)):
        speech_page.show_tab(speech_page.SPEECH)
    qtbot.waitUntil(lambda: speech.voice_list.topLevelItemCount() == 2 and speech.installed.topLevelItemCount() >= 2)
    try:
        qtbot.waitUntil(lambda: not problems(speech_page), timeout=3000)
    except qtbot.TimeoutError:
        pass
    assert not [str(p) for p in problems(speech_page)]
