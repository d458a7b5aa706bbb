"""Prompt-lookup drafts and the per-sequence draft control (pure logic, no model)."""

from __future__ import annotations

from inglenook.engine.speculative import MAX_DRAFT, DraftControl, PromptLookup, RowCost, expected_tokens


def test_lookup_copies_what_followed_the_latest_match_of_the_longest_ngram() -> None:
    history = [1, 2, 3, 4, 5, 9, 2, 3, 7, 8, 1, 2, 3]
    lookup = PromptLookup(history)
    # (1, 2, 3) occurred at the start, followed by 4, 5: the longest match wins over (2, 3) → 7.
    assert lookup.draft(2) == [4, 5]
    history.append(7)  # the sequence's own list grows; the index catches up
    assert lookup.draft(3) == [8, 1, 2]  # (2, 3, 7) → 8, 1, 2


def test_lookup_drafts_nothing_without_a_match_and_stops_at_the_history_end() -> None:
    assert PromptLookup([5, 6, 7]).draft(4) == []
    assert PromptLookup([5, 6, 5]).draft(4) == [6, 5]
    assert PromptLookup([5, 6, 5]).draft(0) == []


def test_control_reaches_further_while_drafts_are_taken_whole() -> None:
    control = DraftControl()
    start = control.wanted(100)
    control.record(start, start)
    assert control.wanted(100) == 2 * start
    for _ in range(10):
        control.record(control.length, control.length)
    assert control.wanted(100) == MAX_DRAFT
    assert control.wanted(3) == 3  # never past what the budget allows
    control.record(MAX_DRAFT, 1)
    assert control.wanted(100) == 3  # just past what was accepted


def test_control_pauses_when_acceptance_stays_low_and_tries_again_later() -> None:
    control = DraftControl()
    verifications = 0
    while control.active:
        control.record(control.wanted(100), 0)
        verifications += 1
    assert verifications <= 3 and control.wanted(100) == 0
    first_pause = control.paused_for
    control.tick(first_pause - 1)
    assert not control.active
    control.tick(1)
    assert control.active and control.wanted(100) > 0
    while control.active:
        control.record(control.wanted(100), 0)
    assert control.paused_for == 2 * first_pause  # each pause is longer than the last
    assert control.drafted > 0 and control.accepted == 0


def test_drafts_that_cannot_pay_for_their_rows_are_not_made() -> None:
    cost = RowCost()
    cost.observe(1.0, 0)  # a plain step
    for _ in range(30):
        cost.observe(5.0, 4)  # a busy CPU: four draft rows cost four more steps
    assert cost.per_row > 0.9
    control = DraftControl(rate=0.8)
    assert control.wanted(100, per_row=0.2) > 0  # cheap rows: an 80% draft pays
    assert control.wanted(100, per_row=cost.per_row) == 0 and not control.active
    control.tick(control.paused_for)
    assert control.wanted(100, per_row=cost.per_row) == control.min_length  # one probe, then judged again
    assert expected_tokens(1.0, 4) == 5 and expected_tokens(0.5, 1) == 1.5
