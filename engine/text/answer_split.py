"""An answer as it streams, sorted into reasoning, text to show, and function calls.

Reasoning comes first (``reasoning``); what follows goes through the tool-call parser
(``tool_calls.ToolCallFilter``), so a call written after the thinking is still a call and
``<think>`` text never reaches the answer or a call's arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..base import ResponseToolCall
from .reasoning import ReasoningSplitter
from .tool_call_parser import Event
from .tool_calls import ToolCallFilter, ToolPlan


@dataclass
class AnswerPiece:
    reasoning: str = ""
    text: str = ""
    call_events: list[Event] = field(default_factory=list)


class AnswerSplitter:
    def __init__(self, tools: ToolPlan | None, parallel: bool, reasoning_inside: str | None = None,
                 split_reasoning: bool = True) -> None:
        self._reasoning = ReasoningSplitter(reasoning_inside) if split_reasoning else None
        self._calls = ToolCallFilter(tools, parallel) if tools is not None else None
        self.calls: list[ResponseToolCall] = []

    def feed(self, text: str) -> AnswerPiece:
        if self._reasoning is None:
            return self._answer("", text)
        split = self._reasoning.feed(text)
        return self._answer(split.reasoning, split.answer)

    def finish(self) -> AnswerPiece:
        piece = self._answer(*self._reasoning_tail())
        if self._calls is not None:
            self.calls, rest = self._calls.finish()
            piece.text += rest
            piece.call_events += self._new_events()
        return piece

    def _reasoning_tail(self) -> tuple[str, str]:
        if self._reasoning is None:
            return "", ""
        split = self._reasoning.finish()
        return split.reasoning, split.answer

    def _answer(self, reasoning: str, answer: str) -> AnswerPiece:
        if self._calls is None or not answer:
            return AnswerPiece(reasoning, answer)
        text = self._calls.feed(answer)
        return AnswerPiece(reasoning, text, self._new_events())

    def _new_events(self) -> list[Event]:
        assert self._calls is not None
        events, self._calls.events = self._calls.events, []
        return events


def split_answer(text: str, tools: ToolPlan | None, parallel: bool, reasoning_inside: str | None = None
                 ) -> tuple[str, str, list[ResponseToolCall]]:
    """(reasoning, text, calls) of a whole answer."""
    splitter = AnswerSplitter(tools, parallel, reasoning_inside)
    first, last = splitter.feed(text), splitter.finish()
    return first.reasoning + last.reasoning, first.text + last.text, splitter.calls
