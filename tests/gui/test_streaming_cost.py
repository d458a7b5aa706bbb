"""An update of a streaming answer costs what the new text costs: the view renders again only
the run of paragraphs that grew, not the whole answer nor the conversation above it.

Counted in characters handed to the Markdown renderer, never timed."""

from __future__ import annotations

import pytest

from inglenook.app.widgets import markdown_view
from inglenook.app.text.markdown import split_prose
from inglenook.app.pages.chat.message_view import ConversationView
from inglenook.engine import Message

pytestmark = pytest.mark.gui

PARAGRAPH = "The keeper climbed the stairs again, counting each of the ninety steps as the storm grew. "


@pytest.fixture
def rendered(monkeypatch) -> list[str]:
    """The texts the view renders as Markdown, in order."""
    texts: list[str] = []
    real = markdown_view.render_markdown

    def counting(document, text, palette) -> None:
        texts.append(text)
        real(document, text, palette)

    monkeypatch.setattr(markdown_view, "render_markdown", counting)
    return texts


def test_a_growing_answer_renders_only_its_last_paragraphs(qtbot, rendered) -> None:
    view = ConversationView()
    qtbot.addWidget(view)
    view.resize(900, 700)
    view.show()
    question = "Please read this. " * 1200  # a long paste above the answer
    view.set_messages([Message(id=1, conversation_id=1, role="user", content=question)])
    view.begin_answer("model")
    answer = "\n\n".join(PARAGRAPH * 3 for _ in range(40))
    view.update_answer(answer)
    rendered.clear()
    for word in ("and", "then", "the", "light", "went", "out"):
        answer += f" {word}"
        view.update_answer(answer)
    widget = view.streaming_widget()
    assert widget is not None and widget.text == answer
    last_run = split_prose(answer)[-1]
    assert len(rendered) == 6
    assert max(len(text) for text in rendered) <= len(last_run), "an update rendered more than the paragraph that grew"


def test_cut_paragraphs_read_as_the_whole_text_does() -> None:
    """Runs never split a list, a formula or a paragraph: together they are the text."""
    text = ("Intro.\n\n- one\n\n- two\n\n1. first\n\n   still first\n\n2. second\n\n"
            "$$\na\n\nb\n$$\n\n# Heading\n\n| a |\n|---|\n| 1 |\n\nEnd.")
    runs = split_prose(text)
    assert runs == ["Intro.", "- one\n\n- two\n\n1. first\n\n   still first\n\n2. second", "$$\na\n\nb\n$$",
                    "# Heading", "| a |\n|---|\n| 1 |", "End."]


def test_a_long_question_is_not_laid_out_again_while_the_answer_below_grows(qtbot, monkeypatch) -> None:
    """Fitting a question's bubble lays out all its text: it happens when the width changes,
    never because the answer under it grew a line."""
    from inglenook.app.pages.chat.message_widget import MessageWidget

    view = ConversationView()
    qtbot.addWidget(view)
    view.resize(1000, 700)
    view.show()
    paste = "\n".join(f"Line {index} of a long pasted report, with enough words to wrap." for index in range(300))
    view.set_messages([Message(id=1, conversation_id=1, role="user", content=paste),
                       Message(id=2, conversation_id=1, role="assistant", content="Read it.")])
    view.add_pending_user("Summarise it.")
    view.begin_answer("model")
    qtbot.waitUntil(lambda: view.widgets[0].body_text.width() > 100)
    qtbot.wait(50)
    fitted: list[int] = []
    real = MessageWidget._fit_bubble

    def counting(self) -> None:
        if self.text == paste:
            fitted.append(self.width())
        real(self)

    monkeypatch.setattr(MessageWidget, "_fit_bubble", counting)
    answer = ""
    for index in range(30):
        answer += f"Sentence {index} of the summary goes on for a while so that it wraps. "
        if index % 5 == 4:
            answer += "\n\n"
        view.update_answer(answer)
        qtbot.wait(5)
    assert fitted == []
    view.resize(700, 700)
    qtbot.waitUntil(lambda: bool(fitted))  # a new width fits it again


def test_an_answer_full_of_inline_code_is_laid_out_a_few_times_not_once_per_span(qtbot) -> None:
    """Styling inline code and quotes is one edit: done span by span, every span laid the
    whole document out again, and an answer with a few thousand spans held the window for
    seconds per update (Esc went unheard while it streamed). Counted in layout passes."""
    from PySide6.QtGui import QTextCursor
    from PySide6.QtWidgets import QTextBrowser

    from inglenook.app.text.markdown import render_markdown
    from inglenook.app.widgets import theme

    browser = QTextBrowser()
    qtbot.addWidget(browser)
    browser.resize(600, 400)
    browser.show()
    document = browser.document()
    passes: list[object] = []
    document.documentLayout().update.connect(lambda *changed: passes.append(changed))
    document.documentLayout().documentSizeChanged.connect(lambda *size: passes.append(size))
    palette = theme.colors(theme.current_mode())
    spans = 300
    render_markdown(document, "Call `step` then " * spans + "\n\n> `quoted` words", palette)
    assert len(passes) < 20, f"{len(passes)} layout passes for {spans} inline code spans"
    # Every span got the code background, and the quote its muted colour.
    cursor = QTextCursor(document)
    code_backgrounds = set()
    block = document.begin()
    while block.isValid():
        iterator = block.begin()
        while not iterator.atEnd():
            fragment = iterator.fragment()
            if fragment.charFormat().fontFixedPitch():
                code_backgrounds.add(fragment.charFormat().background().color().name())
                spans -= 1
            iterator += 1
        block = block.next()
    assert spans == -1  # the 300 and the quote's
    assert code_backgrounds == {palette["code_header"].lower()}
    cursor.setPosition(document.characterCount() - 2)
    assert cursor.charFormat().foreground().color().name() == palette["muted"].lower()
