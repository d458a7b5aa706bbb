"""How the prompt's reading is told: the event's words and estimate, and the terminal's line."""

from __future__ import annotations

import io

import pytest

from inglenook.cli import terminal
from inglenook.cli.terminal import ProgressLine
from inglenook.engine import PromptProgress


def test_the_remaining_time_comes_from_the_rate_once_a_few_chunks_give_one() -> None:
    early = PromptProgress(read=1_024, total=6_159, cached=0, elapsed_s=4.0, chunks=2)
    assert early.remaining_s is None and early.describe() == "Reading 1,024 of 6,159 prompt tokens"
    later = PromptProgress(read=3_200, total=6_159, cached=0, elapsed_s=43.0, chunks=7)
    assert later.remaining_s == pytest.approx((6_159 - 3_200) * 43.0 / 3_200)
    assert later.describe() == "Reading 3,200 of 6,159 prompt tokens · ~40 s"


def test_cached_tokens_count_as_read_but_not_toward_the_rate() -> None:
    progress = PromptProgress(read=5_000, total=9_000, cached=4_000, elapsed_s=10.0, chunks=4)
    assert progress.remaining_s == pytest.approx(40.0)  # 1,000 read in 10 s, 4,000 to go
    assert progress.describe() == "Reading 5,000 of 9,000 prompt tokens · ~40 s"
    assert progress.worth_showing
    # A turn whose history came from the cache has little to read: nothing worth a line.
    assert not PromptProgress(read=8_900, total=9_000, cached=8_900, elapsed_s=0.0).worth_showing


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_line_is_redrawn_in_place_and_erased(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(terminal, "REDRAW_EVERY_S", 0.0)
    stream = Terminal()
    line = ProgressLine(stream)
    line.show("Reading 512 of 6,159 prompt tokens")
    line.show("Reading 1,024 of 6,159")
    line.clear()
    line.clear()  # a second clear writes nothing
    written = stream.getvalue()
    assert written == ("\rReading 512 of 6,159 prompt tokens" + "\rReading 1,024 of 6,159".ljust(35)
                       + "\r" + " " * 22 + "\r")


def test_nothing_is_drawn_when_the_stream_is_not_a_terminal() -> None:
    stream = io.StringIO()  # a pipe or a log file: its reader wants the answer alone
    line = ProgressLine(stream)
    line.show("Reading 512 of 6,159 prompt tokens")
    line.clear()
    assert stream.getvalue() == ""
