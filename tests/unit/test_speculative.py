"""Prompt-lookup drafts and the per-sequence draft control (pure logic, no model)."""

from __future__ import annotations

from inglenook.engine.runtime.speculative import MAX_DRAFT, DraftControl, PromptLookup, RowCost, expected_tokens


def test_lookup_copies_what_followed_the_latest_match_of_the_longest_ngram() -> None:
    history = [1, 2, 3, 4, 5, 9, 2, 3, 7, 8, 1, 2, 3]
    lookup = PromptLookup(history)
    # (1, 2, 3) occurred at the start, followed by 4, 5: the longest match wins over (2, 3) → 7.
    assert lookup.draft(2) == [4, 5]
    history.append(7)  # the sequence's own list grows; the index catches up
    assert lookup.draft(3) == [8, 1, 2]  # (2, 3, 7) → 8, 1, 2


def test_lookup_drafts_nothing_without_a_match_and_stops_at_the_history_end() -> None:
    assert PromptLookup([5, 6, 7]).draft(4) == []
    assert PromptLookup([5, 6, 7, 5, 6]).draft(4) == [7, 5, 6]
    assert PromptLookup([5, 6, 7, 5, 6]).draft(0) == []
    # A one-token match is too weak a guess to verify, unless asked for.
    assert PromptLookup([5, 6, 5]).draft(4) == []
    assert PromptLookup([5, 6, 5], min_ngram=1).draft(4) == [6, 5]


def test_control_drafts_longer_while_drafts_are_taken_whole_and_shorter_after_misses() -> None:
    control = DraftControl()
    start = control.wanted(100, per_row=0.2)
    assert 0 < start < MAX_DRAFT
    for _ in range(4):
        length = control.wanted(100, per_row=0.2)
        control.record(length, length)
    assert control.wanted(100, per_row=0.2) > start  # copying: each verification reaches further
    assert control.wanted(100, per_row=0.0) == MAX_DRAFT  # free rows: as far as it may
    assert control.wanted(3, per_row=0.2) <= 3  # never past what the budget allows
    long = control.wanted(100, per_row=0.2)
    for _ in range(3):
        control.record(long, 1)  # the answer stopped copying
    assert control.wanted(100, per_row=0.2) < long


def test_control_stops_when_acceptance_stays_low_and_shadows_bring_it_back() -> None:
    control = DraftControl()
    verifications = 0
    while control.active:
        control.record(max(1, control.wanted(100)), 0)
        verifications += 1
    assert verifications <= 6 and control.wanted(100) == 0
    drafted = control.drafted
    for _ in range(3):
        control.shadow(False)  # plain steps where lookup's guess was wrong: still off
    assert not control.active and control.drafted == drafted
    for _ in range(6):
        control.shadow(True)  # the answer turned to quoting its input
    assert control.active and control.wanted(100, per_row=0.5) > 0
    assert control.drafted == drafted and control.accepted == 0  # shadows cost no drafts


def test_without_shadows_the_estimate_drifts_back_and_brings_a_trial() -> None:
    control = DraftControl()
    for _ in range(3):
        control.record(4, 0)
    assert control.wanted(100, per_row=0.2) == 0
    control.tick(200)  # a draft model's sequence: no free evidence, tokens went by
    assert control.wanted(100, per_row=0.2) > 0


def test_drafts_that_cannot_pay_for_their_rows_are_not_made() -> None:
    cost = RowCost()
    cost.observe(1.0, 0)  # a plain step
    for _ in range(30):
        cost.observe(5.0, 4)  # a busy CPU: four draft rows cost four more steps
    assert cost.extra(4) > 3.5
    control = DraftControl(hits=4.0, misses=1.0)  # 80% of draft tokens kept
    assert control.wanted(100, per_row=0.2) > 0  # cheap rows: an 80% draft pays
    assert control.wanted(100, per_row=cost.per_row, base=cost.base) == 0
    assert control.active  # not for lack of acceptance: the rows cost too much now
    assert expected_tokens(1.0, 4) == 5 and expected_tokens(0.5, 1) == 1.5


def test_row_cost_learns_a_fixed_price_and_a_price_per_row() -> None:
    # Steps as SmolLM2 on 2 CPU cores takes them: one draft row doubles a step, fifteen cost
    # about six more steps (0.7 + 0.37 a row). One price per row could not say both.
    cost = RowCost()
    cost.observe(0.010, 0)
    for _ in range(20):
        for rows, seconds in ((1, 0.0207), (3, 0.0281), (7, 0.0429), (15, 0.0725)):
            cost.observe(seconds, rows)
    assert 0.55 < cost.base < 0.85 and 0.3 < cost.per_row < 0.45
    assert abs(cost.extra(15) - 6.2) < 0.5 and cost.extra(0) == 0.0
    # So an answer that copies nearly every token drafts long, not a short cautious draft.
    copying = DraftControl(hits=30.0, misses=1.0)
    assert copying.wanted(100, per_row=cost.per_row, base=cost.base) >= 10
    # On a GPU rows are nearly free, and the fit follows: drafts as long as they may be.
    for _ in range(60):
        cost.observe(0.0101, 8)
    assert cost.extra(8) < 0.5
    assert copying.wanted(100, per_row=cost.per_row, base=cost.base) == MAX_DRAFT


def test_the_cursor_follows_a_copy_through_inserted_and_skipped_tokens() -> None:
    source = list(range(100, 130))  # a prompt of 30 distinct tokens the answer copies
    history = [*source, 1, 100, 101, 102]  # separator, then the answer starts copying
    lookup = PromptLookup(history)
    assert lookup.draft(4) == [103, 104, 105, 106]
    history += [103, 104, 7]  # the answer inserted a token (a comma) where 105 was due
    # No n-gram ending in 7 is in the history: the cursor assumes an insertion and resumes.
    assert lookup.draft(3) == [105, 106, 107]
    history += [105, 106, 107, 110]  # then it skipped 108 and 109 (a word dropped)
    assert lookup.draft(3) == [111, 112, 113]
    history += [50, 51, 52]  # three tokens of its own: the cursor gives up
    assert lookup.draft(3) == []
