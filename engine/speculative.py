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

``DraftControl`` decides how many tokens to draft for one sequence: the length with the
best expected tokens per unit of step cost, from the sequence's measured acceptance and
what a batch row costs on this machine (``RowCost``), and none while acceptance is low (a
free-form answer must not pay for verifying guesses that never land).
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

    # A match of one token is a weak guess (after "the", anything): on SmolLM2 answers that
    # quote their prompt, requiring two tokens kept acceptance higher at the same speed.
    def __init__(self, history: list[int], max_ngram: int = 3, min_ngram: int = 2) -> None:
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
    """One sequence's draft length, from its measured acceptance and what a row costs.

    Acceptance is modelled per draft token: each is kept with probability ``acceptance``,
    until the first miss. The estimate is a decaying count of hits and misses, so it follows
    an answer that turns from copying its input to writing its own words and back. Evidence
    comes from verifications (``record``) and, for lookup, from every plain step too
    (``shadow``): what the draft would have been is compared with the token sampled, at no
    cost. So a sequence that stops drafting keeps learning, and starts again when its answer
    turns to quoting — no blind probe drafts. (A draft model has no free shadow; ``tick``
    lets its estimate drift back to the prior, which brings one trial draft.)

    Each step drafts the length whose expected tokens per unit of step cost is best, and
    nothing when no length beats a plain step by ``MIN_GAIN``; or when acceptance is under
    ``floor`` whatever the rows cost, so a free-form answer never pays to verify guesses.
    """

    hits: float = 2.0  # prior: a draft token is kept 2 times in 3 until measured
    misses: float = 1.0
    memory: float = 0.7  # weight left to the past at each observation
    floor: float = 0.2
    max_length: int = MAX_DRAFT
    drafted: int = 0
    accepted: int = 0

    @property
    def acceptance(self) -> float:
        return self.hits / (self.hits + self.misses)

    @property
    def active(self) -> bool:
        return self.acceptance >= self.floor

    def wanted(self, room: int, per_row: float = 0.0) -> int:
        """How many tokens to draft now, at most ``room`` (what the budget still allows).
        ``per_row`` is a draft row's cost as a share of a plain step (``RowCost``)."""
        if not self.active:
            return 0
        rate, best, best_length = self.acceptance, MIN_GAIN, 0
        for length in range(1, min(room, self.max_length) + 1):
            gain = expected_tokens(rate, length) / (1.0 + per_row * length)
            if gain > best:
                best, best_length = gain, length
        return best_length

    def record(self, drafted: int, accepted: int) -> None:
        """A verification of ``drafted`` tokens kept the first ``accepted`` of them."""
        if drafted <= 0:
            return
        self.drafted += drafted
        self.accepted += accepted
        self._observe(accepted, 1 if accepted < drafted else 0)

    def shadow(self, hit: bool) -> None:
        """A plain step: the one-token draft lookup had ready was (not) the token sampled."""
        self._observe(int(hit), int(not hit))

    def tick(self, emitted: int) -> None:
        """``emitted`` tokens went by with no evidence: the estimate drifts to the prior."""
        keep = self.memory ** (0.1 * emitted)
        prior = DraftControl.hits, DraftControl.misses
        self.hits = prior[0] + (self.hits - prior[0]) * keep
        self.misses = prior[1] + (self.misses - prior[1]) * keep

    def _observe(self, hits: int, misses: int) -> None:
        self.hits = self.hits * self.memory + hits
        self.misses = self.misses * self.memory + misses
