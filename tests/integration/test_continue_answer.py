""""Continue" with the real SmolLM2: the cut-off answer ends the prompt, unfinished, and the
model's continuation is saved into the same message."""

from __future__ import annotations

from pathlib import Path

from inglenook.engine.core.engine import Engine


def test_a_cut_off_answer_is_continued_from_where_it_stopped(home: Path) -> None:
    with Engine() as engine:
        conversation = engine.chats.new_conversation()
        first = engine.chats.send(conversation.id, "Count from 1 to 30, separated by commas.",
                                  max_tokens=12, temperature=0.0)
        cut = first.wait()
        assert cut is not None and cut.finish_reason == "length"

        turn = engine.chats.continue_answer(conversation.id, max_tokens=12, temperature=0.0)
        continued = turn.wait()
        assert continued is not None and continued.id == cut.id
        assert continued.content.startswith(cut.content) and len(continued.content) > len(cut.content)
        assert continued.completion_tokens == cut.completion_tokens + turn.finished.usage.completion_tokens
        # The prompt is the question's plus the answer so far, as text (not a new turn).
        model = engine.scheduler.loaded_models()[0]
        partial = model.tokenize(cut.content, add_special=False, parse_special=False)
        assert turn.finished.usage.prompt_tokens == first.finished.usage.prompt_tokens + len(partial)
        assert [m.role for m in engine.store.messages(conversation.id)] == ["user", "assistant"]
