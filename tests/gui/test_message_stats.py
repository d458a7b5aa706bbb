"""The line of numbers under an answer reads at a glance, however long the wait was."""

from __future__ import annotations

from inglenook.app.pages.chat.message_widget import stats_text
from inglenook.engine import Message


def answer(ttft_ms: float) -> Message:
    return Message(id=1, conversation_id=1, role="assistant", content="Hi.", completion_tokens=12,
                   ttft_ms=ttft_ms, tokens_per_s=58.9)


def test_a_quick_first_token_is_in_seconds_too() -> None:
    assert stats_text(answer(429)) == "12 tokens  ·  58.9 tok/s  ·  first token 0.4 s"
    assert "first token 9.1 s" in stats_text(answer(9102))  # the "9102 ms" beside "17.7 s"
    assert "first token < 0.1 s" in stats_text(answer(12))


def test_a_long_wait_is_in_seconds_then_minutes() -> None:
    assert "first token 49.7 s" in stats_text(answer(49_734))
    assert "first token 1 min 57 s" in stats_text(answer(116_517))
