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

from collections import deque
from dataclasses import dataclass, field

OFF, LOOKUP, DRAFT = "off", "lookup", "draft"
MODES = (OFF, LOOKUP, DRAFT)

# The most draft tokens one sequence verifies per step; batches are sized for it.
MAX_DRAFT = 16


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"speculative must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


class PromptLookup:
    """Drafts copied from a token history: where the answer is copying from, and what follows.

    Two ways to find the place. An n-gram index: ``index[(t1..tn)]`` is the position right
    after the latest occurrence of that n-gram, so the history's last n tokens say where to
    copy from. And a cursor that follows the copy: once a draft came from position p, the
    tokens the answer then emits are walked along the source, so the next draft continues
    where the copy is, even through a repeated n-gram that the index maps elsewhere.

    An answer that edits what it copies (a comma added, a word fixed, a name changed)
    leaves the source for a token or two. The cursor re-finds its place at once where it
    can: a token emitted instead of the next source token that appears a few tokens ahead
    is a skip (the cursor jumps past it); one that does not is taken for an insertion (the
    cursor waits, so the next draft resumes the copy right after the inserted text). The
    n-gram index alone needs ``min_ngram`` new tokens to re-find the place, paying a
    plain step for each; on SmolLM2 returning a paragraph with its typos fixed, the cursor
    kept drafts going through each edit. After ``LOST`` tokens in a row off the source the
    cursor gives up, and the index finds the place again.

    The history is the sequence's own list (prompt, then each token it emits); the index
    and the cursor catch up with it on each call, ``max_ngram`` writes per token.
    """

    LOST = 3  # tokens in a row off the source before the cursor is dropped
    AHEAD = 6  # how far ahead an off-source token is looked for (a skipped word or two)
    RECENT = 16  # emitted tokens that ``copying`` looks back over

    # A match of one token is a weak guess (after "the", anything): on SmolLM2 answers that
    # quote their prompt, requiring two tokens kept acceptance higher at the same speed.
    def __init__(self, history: list[int], max_ngram: int = 3, min_ngram: int = 2) -> None:
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self.history = history
        self._index: dict[tuple[int, ...], int] = {}
        self._indexed = 0  # positions whose preceding n-grams are in the index
        self._cursor: int | None = None  # the source position the next token should copy
        self._followed = len(history)  # history length the cursor has walked (the prompt: no cursor yet)
        self._off = 0  # tokens in a row that left the source (0: on track)
        self._recent: deque[bool] = deque(maxlen=self.RECENT)  # was each emitted token the cursor's?

    def catch_up(self) -> None:
        """Index and follow the tokens added to the history since the last call."""
        self._index_new()
        self._follow()

    def _index_new(self) -> None:
        history, index, longest = self.history, self._index, self.max_ngram
        for end in range(max(self._indexed, 1), len(history)):
            for n in range(1, min(longest, end) + 1):
                index[tuple(history[end - n:end])] = end
        self._indexed = len(history)

    def _follow(self) -> None:
        """Walk the cursor along the tokens emitted since the last call."""
        history = self.history
        for position in range(self._followed, len(history)):
            cursor = self._cursor
            if cursor is None:
                self._recent.append(False)
                continue
            token = history[position]
            if cursor < position and history[cursor] == token:
                self._cursor, self._off = cursor + 1, 0
                self._recent.append(True)
                continue
            ahead = history[cursor + 1:min(cursor + 1 + self.AHEAD, position)]
            if token in ahead:  # the answer skipped part of the source
                self._cursor, self._off = cursor + 2 + ahead.index(token), 0
                self._recent.append(True)
                continue
            self._recent.append(False)
            self._off += 1  # inserted text (or a rewrite): the cursor waits
            if self._off >= self.LOST:
                self._cursor = None
        self._followed = len(history)

    @property
    def guessing(self) -> bool:
        """The draft rests on the cursor's insertion guess alone (the answer just left its
        source and no n-gram found it again): worth checking for free on a plain step (a
        shadow), not worth verifying rows for."""
        return self._cursor is not None and self._off > 0

    @property
    def copying(self) -> bool:
        """Most of the answer's recent tokens were where the cursor said: it is copying."""
        recent = self._recent
        return len(recent) >= 4 and sum(recent) >= 0.75 * len(recent)

    def _ngram_match(self) -> int | None:
        history = self.history
        for n in range(min(self.max_ngram, len(history)), self.min_ngram - 1, -1):
            start = self._index.get(tuple(history[len(history) - n:]))
            if start is not None:
                return start
        return None

    def draft(self, length: int) -> list[int]:
        """Up to ``length`` tokens predicted to come next: from the cursor while the answer
        follows its source, else after the longest n-gram matching the history's end."""
        history = self.history
        if length <= 0 or not history:
            return []
        self.catch_up()
        start = self._cursor
        if start is None or self._off:
            # Off track (or no copy yet): an n-gram match is firmer evidence of where the
            # answer is than the cursor's guess that the last tokens were an insertion.
            match = self._ngram_match()
            if match is not None:
                start, self._cursor, self._off = match, match, 0
        if start is None:
            return []
        return history[start:start + length]


# Draft only when the expected tokens per unit of step cost beat a plain step by this much:
# the acceptance estimate is noisy, and shadows check only a draft's first token, so a
# free-form answer with a few lucky n-gram hits would otherwise pay for drafts that miss
# (SmolLM2's story: 0.91x of plain at 1.05). An answer that is plainly copying (most of its
# recent tokens were where the lookup cursor said) drafts at the smaller margin, so it
# resumes at once after an edit instead of waiting for the estimate to climb back.
MIN_GAIN = 1.2
MIN_GAIN_COPYING = 1.05


def expected_tokens(acceptance: float, length: int) -> float:
    """Tokens one verification of ``length`` drafts yields when each draft token is kept
    with probability ``acceptance`` (until the first miss), plus the model's own next one."""
    if acceptance >= 1.0:
        return float(length + 1)
    return (1.0 - acceptance ** (length + 1)) / (1.0 - acceptance)


@dataclass
class RowCost:
    """What draft rows add to a decode step, as a share of a step without drafts, measured.

    On a GPU, or a CPU with memory bandwidth to spare, a step of eight rows costs little
    more than one; on a CPU that is busy with other work each row costs nearly a whole step,
    and a draft must be nearly certain to pay. The cost is not proportional to the rows:
    llama.cpp's CPU kernels pay a fixed price for leaving the one-row path, then a smaller
    one per row (SmolLM2 on 2 EPYC cores: a 1-token draft costs a whole extra step, a
    15-token one about 6), so one price per row would make long drafts look dearer than
    they are and short ones cheaper. The cost of ``k`` draft rows is modelled as
    ``base + per_row * k`` plain steps, fitted by least squares over the context's own
    decode steps (recent ones weigh more), pulled toward a prior line that weighs as much
    as a couple of steps.
    """

    plain_s: float = 0.0  # a decode step without drafts
    per_row: float = 0.4  # each draft row, as a share of plain_s (a prior until measured)
    base: float = 0.5  # the fixed price of a step with drafts (a prior until measured)
    fixed: bool = False  # keep the given line (tests: behaviour must not depend on timing)
    # Decayed sums for the fit: weight, Σx, Σy, Σx², Σxy over (draft rows, extra cost).
    _sums: list[float] = field(default_factory=lambda: [0.0] * 5)
    _prior: tuple[float, float] = field(init=False)  # (base, per_row) as given

    PRIOR_WEIGHT = 2.0  # the prior line weighs as much as this many observed steps
    DECAY = 0.95  # weight left to the past at each observed step (about 20 steps remembered)

    def __post_init__(self) -> None:
        self._prior = (self.base, self.per_row)

    def extra(self, rows: int) -> float:
        """What ``rows`` draft rows add to a plain step, in plain steps."""
        return self.base + self.per_row * rows if rows > 0 else 0.0

    def observe(self, seconds: float, draft_rows: int) -> None:
        if self.fixed:
            return
        if draft_rows == 0:
            self.plain_s = seconds if self.plain_s <= 0 else self.plain_s + 0.2 * (seconds - self.plain_s)
            return
        if self.plain_s <= 0:
            return
        y = max(0.0, seconds / self.plain_s - 1.0)
        sums = self._sums
        for i, value in enumerate((1.0, draft_rows, y, draft_rows * draft_rows, draft_rows * y)):
            sums[i] = sums[i] * self.DECAY + value
        self._fit()

    def _fit(self) -> None:
        # Least squares pulled toward the prior line (ridge): the prior keeps the fit well
        # posed while every observed step has the same number of rows.
        prior_base, prior_slope = self._prior
        w, sx, sy, sxx, sxy = self._sums
        base_weight, slope_weight = self.PRIOR_WEIGHT, self.PRIOR_WEIGHT * (MAX_DRAFT / 2) ** 2
        a, b, d = w + base_weight, sx, sxx + slope_weight
        rhs_base, rhs_slope = sy + base_weight * prior_base, sxy + slope_weight * prior_slope
        determinant = a * d - b * b
        base = (rhs_base * d - b * rhs_slope) / determinant
        slope = (a * rhs_slope - b * rhs_base) / determinant
        if base < 0:  # no negative price: the best line through the origin
            base, slope = 0.0, rhs_slope / d
        if slope < 0:
            base, slope = max(0.0, rhs_base / a), 0.0
        self.base, self.per_row = base, slope


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
    nothing when no length beats a plain step by the margin (``MIN_GAIN``); or when acceptance is under
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

    def wanted(self, room: int, per_row: float = 0.0, base: float = 0.0, copying: bool = False) -> int:
        """How many tokens to draft now, at most ``room`` (what the budget still allows).
        A step with ``k`` draft rows costs ``1 + base + per_row * k`` plain steps (``RowCost``);
        ``copying``: the answer is plainly copying its source (``PromptLookup.copying``)."""
        if not self.active:
            return 0
        rate, best_length = self.acceptance, 0
        best = MIN_GAIN_COPYING if copying else MIN_GAIN
        for length in range(1, min(room, self.max_length) + 1):
            gain = expected_tokens(rate, length) / (1.0 + base + per_row * length)
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
