"""Images in the window (issue 31): dropped, pasted or picked images wait as chips, go with
the next message to a vision model (the real SmolLM2 paired with the tests' projector), show
as thumbnails on the message (a click opens the viewer), stay with the chat when it is opened
again and in its exports; a text-only model says so before anything is sent and offers the
vision model."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from inglenook.engine.runtime.vision import mtmd_available

from ..conftest import MODEL_CACHE
from ..mmproj_writer import vision_copy_of_smollm2, write_png
from .conftest import type_and_send, wait_answer

# Long enough that the prefix cache keeps the first turn's state (it saves whole blocks).
QUESTION = ("Describe the picture in detail, mentioning colours, shapes and anything that looks like bread "
            "or cakes. ") * 3

pytestmark = pytest.mark.skipif(not mtmd_available()[0], reason=mtmd_available()[1] or "libmtmd")


@pytest.fixture
def engine(home, smollm2_path):
    """The window's engine with a vision model installed beside the starter (links to the
    cached pair: the registry scans the models folder)."""
    from inglenook.engine import Engine, Paths

    model = vision_copy_of_smollm2(smollm2_path, MODEL_CACHE / "smolvision")
    folder = Paths.under(home).ensure().models / "smolvision"
    folder.mkdir(parents=True)
    for source in (model, *model.parent.glob("mmproj-*.gguf")):
        os.symlink(source, folder / source.name)
    engine = Engine()
    yield engine
    engine.close()


def _vision_id(window) -> str:
    return next(m.id for m in window.model_list.models if "smolvis" in m.id.lower())


def _open_chat(qtbot, window, model_id: str | None) -> int:
    sampling = {"temperature": 0.0, "top_k": 1, "max_tokens": 4}
    conversation = window.engine.chats.new_conversation(model_id=model_id, sampling=sampling)
    window.conversations.refresh()
    window.open_conversation(conversation.id)
    qtbot.waitUntil(lambda: window.conversation is not None and window.conversation.id == conversation.id)
    return conversation.id


def _drop(window, paths: list[Path]) -> None:
    from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
    from PySide6.QtGui import QDragEnterEvent, QDropEvent
    from PySide6.QtWidgets import QApplication

    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    viewport = window.composer.input.viewport()
    enter = QDragEnterEvent(QPoint(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(viewport, enter)
    assert enter.isAccepted()
    QApplication.sendEvent(viewport, QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime,
                                                Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier))


def _paste(window, path: Path) -> None:
    from PySide6.QtCore import QMimeData
    from PySide6.QtGui import QImage

    mime = QMimeData()
    mime.setImageData(QImage(str(path)))
    window.composer.input.insertFromMimeData(mime)


def test_an_image_goes_with_the_question_and_stays_with_the_chat(qtbot, window, tmp_path: Path) -> None:
    chats, bar = window.engine.chats, window.composer.attachments
    cid = _open_chat(qtbot, window, _vision_id(window))
    shot = write_png(tmp_path / "shot.png", (64, 48), seed=3)
    _drop(window, [shot])
    qtbot.waitUntil(lambda: len(bar.image_chips) == 1, timeout=60_000)
    assert window.composer.text() == "" and chats.attached_documents(cid) == []  # not a path, not a document
    _paste(window, write_png(tmp_path / "other.png", seed=4))
    qtbot.waitUntil(lambda: len(bar.image_chips) == 2, timeout=60_000)
    bar.image_chips[1].findChild(type(bar.attach_button), "ImageChipRemove").click()  # ✕ on the pasted one
    qtbot.waitUntil(lambda: len(bar.image_chips) == 1)
    assert not bar.vision_note.isVisible()  # the chat's model reads images

    thumb = bar.image_chips[0].findChild(type(bar.attach_button), "ImageThumbnail")
    thumb.click()  # the viewer, with the image as the model reads it
    qtbot.waitUntil(lambda: window.images.viewer is not None and window.images.viewer.isVisible(), timeout=30_000)
    assert window.images.viewer.image.width() == 64 and window.images.viewer.image.height() == 48
    window.images.viewer.close()

    type_and_send(qtbot, window, QUESTION)
    wait_answer(qtbot, window, cid)
    assert not bar.image_chips  # taken by the message
    question, answer = window.engine.messages(cid)
    assert answer.role == "assistant" and answer.status == "complete"
    stored = chats.message_images(cid)[question.id]
    assert [(s.width, s.height) for s in stored] == [(64, 48)]
    shown = window.view.widgets[0]
    assert shown.picture_row is not None and len(shown.picture_row.buttons) == 1

    # A follow-up reads the same image again from the kept file: the prompt's start, image
    # included (it comes right after the system prompt), is restored from the cache, whole blocks
    # of it, and the follow-up's prompt holds the image's 16 tokens again.
    type_and_send(qtbot, window, "And its colours?")
    wait_answer(qtbot, window, cid)
    follow_up = window.engine.messages(cid)[-1]
    assert follow_up.cached_tokens is not None and follow_up.cached_tokens >= 64
    assert follow_up.prompt_tokens > answer.prompt_tokens

    # Opened again: the thumbnail comes back from the data folder; a click shows it larger.
    window.new_chat()
    qtbot.waitUntil(lambda: not window.view.widgets)
    window.open_conversation(cid)
    qtbot.waitUntil(lambda: bool(window.view.widgets) and window.view.widgets[0].picture_row is not None,
                    timeout=30_000)
    window.images.viewer = None
    window.view.widgets[0].picture_row.buttons[0].click()
    qtbot.waitUntil(lambda: window.images.viewer is not None, timeout=30_000)
    assert window.images.viewer.image.size().width() == 64
    window.images.viewer.close()

    # Exports carry it: JSON as a data URL, Markdown as a copy beside the file.
    window.conversations.export(cid, "json", str(tmp_path / "chat.json"))
    window.conversations.export(cid, "markdown", str(tmp_path / "chat.md"))
    qtbot.waitUntil(lambda: (tmp_path / "chat.json").exists() and (tmp_path / "chat.md").exists(), timeout=30_000)
    exported = json.loads((tmp_path / "chat.json").read_text())
    url = exported["messages"][0]["images"][0]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == stored[0].path.read_bytes()
    markdown = (tmp_path / "chat.md").read_text()
    link = f"chat-images/{stored[0].digest}.png"
    assert f"]({link})" in markdown and (tmp_path / link).read_bytes() == stored[0].path.read_bytes()


def test_a_text_only_model_says_so_before_sending_and_offers_a_vision_model(qtbot, window, tmp_path: Path) -> None:
    chats, bar = window.engine.chats, window.composer.attachments
    cid = _open_chat(qtbot, window, None)  # the default: the starter SmolLM2, text only
    window.images.add_paths([write_png(tmp_path / "shot.png", seed=5)])
    qtbot.waitUntil(lambda: bar.vision_note.isVisible(), timeout=60_000)
    assert "cannot read images" in bar.vision_text.text()
    vision = _vision_id(window)
    assert [b.text() for b in bar.offer_buttons] == [f"Use {vision}"]
    type_and_send(qtbot, window, "What is this?")
    assert window.composer.text() == "What is this?"  # kept: nothing was sent
    assert window.engine.messages(cid) == [] and len(bar.image_chips) == 1

    bar.offer_buttons[0].click()
    qtbot.waitUntil(lambda: chats.store.get_conversation(cid).model_id == vision, timeout=30_000)
    qtbot.waitUntil(lambda: not bar.vision_note.isVisible(), timeout=30_000)
    assert window.images.problem is None


def test_an_image_for_a_text_only_model_can_go_without_it_or_lead_to_models(qtbot, window, tmp_path: Path) -> None:
    """Enter with an image a text-only model cannot read: not silent — the line says why and
    offers to send the message without the image, or to open Models."""
    chats, bar = window.engine.chats, window.composer.attachments
    cid = _open_chat(qtbot, window, None)  # the starter SmolLM2, text only
    window.images.add_paths([write_png(tmp_path / "shot.png", seed=6)])
    qtbot.waitUntil(lambda: bar.vision_note.isVisible(), timeout=60_000)
    type_and_send(qtbot, window, "What is this?")
    assert window.engine.messages(cid) == []
    assert "Not sent" in bar.status.text() and bar.without_button.isVisible() and bar.models_button.isVisible()

    bar.models_button.click()
    assert window.pages.currentWidget() is window.models_page
    window.show_page("chat")
    bar.without_button.click()
    qtbot.waitUntil(lambda: [m.role for m in window.engine.messages(cid)][:1] == ["user"], timeout=60_000)
    wait_answer(qtbot, window, cid)
    question = window.engine.messages(cid)[0]
    assert question.content == "What is this?" and chats.message_images(cid) == {}
    assert not bar.image_chips and not bar.vision_note.isVisible() and window.composer.text() == ""


def test_the_vision_note_fits_a_narrow_window(qtbot, window, tmp_path: Path) -> None:
    from .layout_check import problems

    window.resize(800, 560)
    qtbot.waitUntil(lambda: window.width() == 800)
    bar = window.composer.attachments
    _open_chat(qtbot, window, None)
    window.images.add_paths([write_png(tmp_path / "shot.png", seed=7)])
    qtbot.waitUntil(lambda: bar.vision_note.isVisible() and bool(bar.offer_buttons), timeout=60_000)
    try:
        qtbot.waitUntil(lambda: not problems(window.composer), timeout=3000)
    except qtbot.TimeoutError:
        pass
    assert not [str(p) for p in problems(window.composer)]
