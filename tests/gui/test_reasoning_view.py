"""A reasoning model's thinking is shown collapsed above the answer, with its duration."""

from __future__ import annotations

from inglenook.app.pages.chat.message_widget import MessageWidget
from inglenook.engine import Message
from PySide6.QtGui import QGuiApplication


def test_streamed_reasoning_is_collapsed_above_the_answer(qtbot) -> None:
    widget = MessageWidget("assistant", author="qwen3")
    qtbot.addWidget(widget)
    widget.show()
    widget.begin_streaming()
    widget.set_text("<think>\nThe user wants a greeting.")
    assert widget.reasoning.isVisible() and widget.reasoning.toggle.text().startswith("Thinking…")
    assert not widget.reasoning.body.isVisible(), "collapsed while it streams"
    widget.set_text("<think>\nThe user wants a greeting.\n</think>\n\nHello there!")
    assert widget.reasoning.toggle.text().startswith("Thought for ")
    assert widget.reasoning.seconds is not None and widget.reasoning.seconds >= 0
    widget.reasoning.toggle.click()
    assert widget.reasoning.body.isVisible() and widget.reasoning.body.text() == "The user wants a greeting."
    widget.copy()
    assert QGuiApplication.clipboard().text() == "Hello there!", "the answer is copied without its thinking"


def test_a_saved_answer_estimates_its_thinking_time_and_plain_answers_show_none(qtbot) -> None:
    widget = MessageWidget("assistant")
    qtbot.addWidget(widget)
    widget.show()
    text = "<think>" + "x" * 50 + "</think>" + "y" * 50
    widget.set_message(Message(id=1, conversation_id=1, role="assistant", content=text,
                               completion_tokens=100, tokens_per_s=10.0))
    assert widget.reasoning.isVisible()
    assert widget.reasoning.toggle.text().startswith("Thought for 4.")  # half of 10 s, by its share of the text
    plain = MessageWidget("assistant")
    qtbot.addWidget(plain)
    plain.show()
    plain.set_message(Message(id=2, conversation_id=1, role="assistant", content="Just an answer."))
    assert not plain.reasoning.isVisible()
