"""Documents in the window (issue 30): attaching files to a chat shows chips (name, pages,
tokens, whole), a chip opens the text the model reads, a bad file says why, and the next
question is answered with the document in the prompt."""

from __future__ import annotations

from pathlib import Path

from tests.document_files import docx_file, report_pdf

from .conftest import ANSWER_TIMEOUT_MS, new_chat, type_and_send, wait_answer


def test_attach_preview_and_ask(qtbot, window, tmp_path: Path) -> None:
    conversation_id = new_chat(qtbot, window, max_tokens=4)
    bar = window.composer.attachments
    assert not bar.isVisible()  # no documents, no chips
    lease, report = docx_file(tmp_path / "lease.docx"), report_pdf(tmp_path / "report.pdf", n_pages=2)
    (tmp_path / "photo.txt").write_bytes(bytes(range(256)) * 32)
    window.attachments.attach([lease, report, tmp_path / "photo.txt"])
    # (the chat's own load may redraw the empty bar first: wait for the chips themselves)
    qtbot.waitUntil(lambda: len(bar.chips()) == 2, timeout=ANSWER_TIMEOUT_MS)
    chips = [chip.text() for chip in bar.chips().values()]
    assert len(chips) == 2 and bar.isVisible()
    assert chips[0].startswith("lease.docx · ≈") and "whole" in chips[0]
    assert chips[1].startswith("report.pdf · 2 pages · ≈")
    assert "photo.txt is a binary file" in bar.status.text()  # the bad file says why; the others are kept
    assert [d.name for d in window.engine.chats.attached_documents(conversation_id)] == ["lease.docx", "report.pdf"]

    list(bar.chips().values())[0].click()  # the preview: what the model reads
    assert window.attachments.preview is not None and "Clause 7: Pets" in window.attachments.preview.text.toPlainText()
    window.attachments.preview.close()

    type_and_send(qtbot, window, "What is the cat called?")
    wait_answer(qtbot, window, conversation_id)
    last = window.engine.messages(conversation_id)[-1]
    assert last.role == "assistant" and last.prompt_tokens > 300  # the documents were read with the question

    # Another chat shows its own (no) documents; coming back shows these again.
    window.new_chat()
    qtbot.waitUntil(lambda: not bar.chips())
    with qtbot.waitSignal(window.attachments.changed, timeout=ANSWER_TIMEOUT_MS):
        window.open_conversation(conversation_id)
    assert len(bar.chips()) == 2


def test_a_file_dropped_on_the_message_box_is_attached(qtbot, window, tmp_path: Path) -> None:
    from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
    from PySide6.QtGui import QDragEnterEvent, QDropEvent
    from PySide6.QtWidgets import QApplication

    conversation_id = new_chat(qtbot, window)
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\nThe boiler is serviced every October.\n", encoding="utf-8")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(notes))])
    viewport = window.composer.input.viewport()
    enter = QDragEnterEvent(QPoint(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(viewport, enter)
    assert enter.isAccepted()
    drop = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                      Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(viewport, drop)
    qtbot.waitUntil(lambda: len(window.composer.attachments.chips()) == 1, timeout=60_000)
    assert window.composer.text() == ""  # not pasted as a path
    assert [d.name for d in window.engine.chats.attached_documents(conversation_id)] == ["notes.md"]


def test_documents_too_long_are_searched_and_the_passages_named(qtbot, window, tmp_path: Path) -> None:
    conversation_id = new_chat(qtbot, window, max_tokens=4)
    window.engine.chats.context_of = lambda _model_id: 1200  # room for ~500 characters of documents
    bar = window.composer.attachments
    window.attachments.attach([report_pdf(tmp_path / "report.pdf", n_pages=3)])
    qtbot.waitUntil(lambda: len(bar.chips()) == 1, timeout=ANSWER_TIMEOUT_MS)
    assert list(bar.chips().values())[0].text().endswith("searched  ✕")
    type_and_send(qtbot, window, "Which region sold 1200 units?")
    wait_answer(qtbot, window, conversation_id)
    qtbot.waitUntil(lambda: bar.status.text().startswith("Passages used: "), timeout=ANSWER_TIMEOUT_MS)
    assert "[report.pdf, page 2]" in bar.status.text()  # the table's page


def test_a_citation_in_an_answer_opens_the_preview_at_its_page(qtbot, window, tmp_path: Path) -> None:
    from PySide6.QtCore import QPoint, Qt

    from inglenook.app.widgets.markdown_view import RichText

    conversation_id = new_chat(qtbot, window, max_tokens=4)
    bar = window.composer.attachments
    window.attachments.attach([report_pdf(tmp_path / "report.pdf", n_pages=8)])
    qtbot.waitUntil(lambda: len(bar.chips()) == 1, timeout=ANSWER_TIMEOUT_MS)
    type_and_send(qtbot, window, "Where is the harbour mentioned?")
    wait_answer(qtbot, window, conversation_id)
    # The answer as a model that follows the documents' block cites it (SmolLM2-135M rarely does).
    answer = window.engine.chats.open(conversation_id)[1][-1]
    window.engine.chats.edit_message(answer.id, "The harbour is on every page, e.g. [report.pdf, page 4].")
    window.active.reload()

    def cited() -> RichText | None:
        return next((t for t in window.view.findChildren(RichText)
                     if t.isVisible() and "[report.pdf, page 4]" in t.toPlainText()), None)

    qtbot.waitUntil(lambda: cited() is not None, timeout=ANSWER_TIMEOUT_MS)
    view = cited()
    assert view is not None
    found = view.document().find("page 4")
    assert found.charFormat().isAnchor() and found.charFormat().anchorHref().startswith("cite:")
    window.view.ensureWidgetVisible(view)
    qtbot.waitUntil(lambda: view.visibleRegion().contains(view.cursorRect(found).center()))
    found.setPosition(found.selectionStart() + 2)  # a point inside the link's text
    rect = view.cursorRect(found)
    point = QPoint(rect.right() + 2, rect.center().y())
    assert view.anchorAt(point).startswith("cite:report.pdf"), (view.anchorAt(point), point)
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=point)

    qtbot.waitUntil(lambda: window.attachments.preview is not None and window.attachments.preview.isVisible())
    preview = window.attachments.preview
    assert preview.windowTitle() == "report.pdf"
    text = preview.text.toPlainText()
    assert preview.text.textCursor().position() == text.index("## Page 4")  # at the cited page
    scroll = preview.text.verticalScrollBar()
    assert scroll.maximum() > 0 and scroll.value() > 0  # scrolled down to it...
    assert preview.text.cursorRect().top() < preview.text.viewport().height() // 4  # ...its heading at the top
    marked = preview.text.extraSelections()
    assert len(marked) == 1 and marked[0].cursor.selectedText().startswith("## Page 4")
    preview.close()


def test_a_chip_counts_one_page_as_one_page() -> None:
    from inglenook.app.pages.chat.attachment_bar import pages_text

    assert pages_text(1) == " · 1 page" and pages_text(3) == " · 3 pages" and pages_text(0) == ""
