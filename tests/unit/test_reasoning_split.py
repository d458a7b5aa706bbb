"""Reasoning text is kept apart from the answer, streamed or whole, in each family's markers."""

from __future__ import annotations

import pytest

from inglenook.engine.text.reasoning import ReasoningSplitter, opened_in_prompt, split_whole


def streamed(text: str, step: int, inside: str | None = None) -> tuple[str, str]:
    splitter = ReasoningSplitter(inside)
    reasoning, answer = [], []
    for i in range(0, len(text), step):
        part = splitter.feed(text[i:i + step])
        reasoning.append(part.reasoning)
        answer.append(part.answer)
    last = splitter.finish()
    return "".join(reasoning) + last.reasoning, "".join(answer) + last.answer


@pytest.mark.parametrize(
    ("text", "reasoning", "answer"),
    [
        ("<think>\nThe user greets me.\n</think>\n\nHello!", "The user greets me.\n", "Hello!"),
        ("[THINK]Short.[/THINK]Hi.", "Short.", "Hi."),
        ("<|START_THINKING|>Plan it.<|END_THINKING|>Done.", "Plan it.", "Done."),
        ("No reasoning here, and a literal <think> later stays.", "", "No reasoning here, and a literal <think> later stays."),
        ("<think>cut off by the limit", "cut off by the limit", ""),
    ],
)
@pytest.mark.parametrize("step", [1, 3, 10_000])
def test_markers_of_each_family(text: str, reasoning: str, answer: str, step: int) -> None:
    assert streamed(text, step) == (reasoning, answer)


def test_a_block_opened_by_the_prompt() -> None:
    closer = opened_in_prompt("<|im_start|>assistant\n<think>\n")
    assert closer == "</think>"
    assert streamed("Let me think.\n</think>\n\nThe answer is 4.", 2, closer) == ("Let me think.\n", "The answer is 4.")
    assert opened_in_prompt("<|im_start|>assistant\n") is None


def test_whole_text() -> None:
    split = split_whole("<think>a</think>\n\nb")
    assert (split.reasoning, split.answer) == ("a", "b")
