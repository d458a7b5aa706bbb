"""Speculative decoding: draft tokens, and when a sequence should (not) draft.

A draft is a guess at the next few tokens of a sequence. ``LoadedModel.step`` feeds a
decoding sequence's last token plus its draft in one batch row, with logits for every
position, and the sequence keeps the longest prefix of the draft that its own sampler
would have produced (``Sequence.verify``). Drafts here are deterministic — the n-gram
lookup below, or a draft model's argmax — so the standard speculative acceptance rule
("accept draft token t with probability p(t) under the target's processed distribution,
else draw from the residual p without t, renormalised") is exactly: draw from the target's
own sampler chain, accept iff the draw equals the draft. That draw is the one plain
decoding would make — same chain, grammar, penalties and random stream — so the output is
distributed as without speculation (with a seed, it is the same output).

``PromptLookup`` drafts from the sequence's own history (prompt and answer so far): the
continuation of the most recent earlier occurrence of the current last few tokens. It
costs no model, and wins big when the answer repeats its input (edits, refactors, quotes).

``DraftControl`` decides how many tokens to draft for one sequence: longer after drafts
that were taken whole, shorter after rejections, and none for a while when acceptance
stays low (a free-form answer must not pay for verifying guesses that never land).
"""

from __future__ import annotations

from dataclasses import dataclass

OFF, LOOKUP, DRAFT = "off", "lookup", "draft"
MODES = (OFF, LOOKUP, DRAFT)

# The most draft tokens one sequence verifies per step; batches are sized for it.
MAX_DRAFT = 16


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"speculative must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


class PromptLookup:
    """An n-gram index over a token history: which position followed each n-gram.

    ``index[(t1..tn)]`` is the position right after the latest occurrence of that n-gram
    whose continuation is known, so a lookup of the history's last n tokens says where to
    copy a draft from. The history is the sequence's own list (prompt, then each token it
    emits); the index catches up with it on each lookup, ``max_ngram`` writes per token.
    """

    def __init__(self, history: list[int], max_ngram: int = 3, min_ngram: int = 1) -> None:
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self.history = history
        self._index: dict[tuple[int, ...], int] = {}
        self._indexed = 0  # positions whose preceding n-grams are in the index

    def _catch_up(self) -> None:
        history, index, longest = self.history, self._index, self.max_ngram
        for end in range(max(self._indexed, 1), len(history)):
            for n in range(1, min(longest, end) + 1):
                index[tuple(history[end - n:end])] = end
        self._indexed = len(history)

    def draft(self, length: int) -> list[int]:
        """Up to ``length`` tokens that followed the longest n-gram matching the history's end."""
        history = self.history
        if length <= 0 or not history:
            return []
        self._catch_up()
        for n in range(min(self.max_ngram, len(history)), self.min_ngram - 1, -1):
            start = self._index.get(tuple(history[len(history) - n:]))
            if start is not None:
                return history[start:start + length]
        return []


# Draft only when the expected tokens per step beat the step's extra cost by this much.
MIN_GAIN = 1.05


def expected_tokens(acceptance: float, length: int) -> float:
    """Tokens one verification of ``length`` drafts yields when each draft token is kept
    with probability ``acceptance`` (until the first miss), plus the model's own next one."""
    if acceptance >= 1.0:
        return float(length + 1)
    return (1.0 - acceptance ** (length + 1)) / (1.0 - acceptance)


@dataclass
class RowCost:
    """What one more batch row costs, as a share of a step without drafts, measured.

    On a GPU, or a CPU with memory bandwidth to spare, a step of eight rows costs little
    more than one; on a CPU that is busy with other work each row costs nearly a whole step,
    and a draft must be nearly certain to pay. Learned from the context's own decode steps.
    """

    plain_s: float = 0.0  # a decode step without drafts
    per_row: float = 0.35  # extra cost of one draft row / plain_s (a prior until measured)
    fixed: bool = False  # keep ``per_row`` as given (tests: behaviour must not depend on timing)

    def observe(self, seconds: float, draft_rows: int) -> None:
        if self.fixed:
            return
        if draft_rows == 0:
            self.plain_s = seconds if self.plain_s <= 0 else self.plain_s + 0.2 * (seconds - self.plain_s)
        elif self.plain_s > 0:
            sample = max(0.0, seconds / self.plain_s - 1.0) / draft_rows
            self.per_row += 0.2 * (sample - self.per_row)


@dataclass
class DraftControl:
    """One sequence's draft length and on/off state, with its counts for the timings."""

    length: int = 4  # tokens to draft next time
    min_length: int = 2
    max_length: int = MAX_DRAFT
    # Acceptance (accepted / drafted per verification), smoothed; below ``floor`` the
    # sequence stops drafting for ``pause`` tokens, a pause that doubles each time.
    rate: float = 0.5
    floor: float = 0.25
    pause: int = 32
    max_pause: int = 1024
    paused_for: int = 0
    drafted: int = 0
    accepted: int = 0
    probe: bool = False

    @property
    def active(self) -> bool:
        return self.paused_for <= 0

    def wanted(self, room: int, per_row: float = 0.0) -> int:
        """How many tokens to draft now, at most ``room`` (what the budget still allows).
        ``per_row`` is a draft row's cost as a share of a plain step (``RowCost``): a
        draft whose expected yield does not pay for its rows is not made, and the sequence
        pauses as if its drafts had failed."""
        if not self.active:
            return 0
        length = max(0, min(self.length, room, self.max_length))
        if self.probe:
            self.probe = False
            return min(length, self.min_length)
        if length and expected_tokens(self.rate, length) < MIN_GAIN * (1.0 + per_row * length):
            shorter = [n for n in range(1, length)
                       if expected_tokens(self.rate, n) >= MIN_GAIN * (1.0 + per_row * n)]
            if not shorter:
                self._pause()
                return 0
            length = shorter[-1]
        return length

    def tick(self, emitted: int) -> None:
        """``emitted`` tokens were produced without a draft (paused, or nothing to draft)."""
        if self.paused_for > 0:
            self.paused_for = max(0, self.paused_for - emitted)
            if self.paused_for == 0:
                self.rate = 0.5  # a fresh chance: the answer may have turned to quoting
                self.probe = True  # one short draft whatever it costs: it re-measures both

    def record(self, drafted: int, accepted: int) -> None:
        """A verification of ``drafted`` tokens kept ``accepted`` of them."""
        if drafted <= 0:
            return
        self.drafted += drafted
        self.accepted += accepted
        self.rate += 0.3 * (accepted / drafted - self.rate)
        if accepted == drafted:
            # Taken whole: the sequence is copying; reach further next time.
            self.length = min(self.max_length, self.length * 2)
        else:
            self.length = max(self.min_length, min(self.length, accepted + 2))
        if self.rate < self.floor:
            self._pause()

    def _pause(self) -> None:
        self.paused_for = self.pause
        self.pause = min(self.max_pause, self.pause * 2)
