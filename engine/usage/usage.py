"""Usage, counted: one row per generation in ``usage_events`` (migration m007), counts only.

A row holds tokens in and out, cached prompt tokens, reasoning tokens, how long the
generation ran, the model and the client ("window", "terminal", "api:<key or user agent>",
"background:<task>"), never a word of the prompt or the answer. ``UsageRecorder``
(usage/recorder.py) writes the rows; this module reads them back as totals per day, per
model and per client (``UsageReport``), and turns a request into its client tag.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, fields
from typing import Any

from ..store import Store
from ..text import ReasoningSplitter

TABLE = "usage_events"
DEFAULT_DAYS = 7
MAX_DAYS = 3660
MAX_CLIENT_CHARS = 80
WINDOW, TERMINAL = "window", "terminal"
# Work the person did not ask for (a conversation's title) is counted under its own name.
BACKGROUND_PREFIX = "background:"
# Jobs tagged this way are not counted: count_tokens' one-token probe is free on the API it
# imitates, and counting it would bill its prompt twice.
UNCOUNTED_PREFIX = "uncounted:"


def local_day(at: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(at))


def api_client(user_agent: str | None, key_client: str = "") -> str:
    """The client tag of an API request: the named key's ("api:<name>") when one was used,
    else the User-Agent, shortened and cleaned (it is a label, never trusted)."""
    if key_client:
        return key_client
    agent = "".join(ch for ch in (user_agent or "") if ch.isprintable()).strip()
    return f"api:{agent[:MAX_CLIENT_CHARS]}" if agent else "api"


def uncounted(client: str) -> str:
    return client if client.startswith(UNCOUNTED_PREFIX) else UNCOUNTED_PREFIX + client


@dataclass
class TokenCounts:
    """Totals of some generations. ``completion_tokens`` includes ``reasoning_tokens``."""

    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    duration_s: float = 0.0

    def __add__(self, other: "TokenCounts") -> "TokenCounts":
        return TokenCounts(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict[str, Any]:
        values = asdict(self)
        values["duration_s"] = round(self.duration_s, 3)
        values["total_tokens"] = self.total_tokens
        return values


@dataclass(frozen=True)
class UsageGroup:
    """The generations of one day, model and client."""

    day: str
    model_id: str
    client: str
    counts: TokenCounts


def _summed(groups: list[UsageGroup], key: str) -> dict[str, TokenCounts]:
    sums: dict[str, TokenCounts] = {}
    for group in groups:
        name = getattr(group, key)
        sums[name] = sums.get(name, TokenCounts()) + group.counts
    return sums


@dataclass(frozen=True)
class UsageReport:
    """The last ``len(days)`` days' usage, grouped by day, model and client."""

    days: list[str]  # oldest first, every day of the period (days without use included)
    groups: list[UsageGroup]

    def total(self) -> TokenCounts:
        return sum((g.counts for g in self.groups), TokenCounts())

    def by_day(self) -> dict[str, TokenCounts]:
        found = _summed(self.groups, "day")
        return {day: found.get(day, TokenCounts()) for day in self.days}

    def by_model(self) -> dict[str, TokenCounts]:
        return dict(sorted(_summed(self.groups, "model_id").items(), key=lambda kv: -kv[1].total_tokens))

    def by_client(self) -> dict[str, TokenCounts]:
        return dict(sorted(_summed(self.groups, "client").items(), key=lambda kv: -kv[1].total_tokens))

    def day_by_model(self) -> dict[str, dict[str, TokenCounts]]:
        """For the chart: each day's totals per model."""
        table: dict[str, dict[str, TokenCounts]] = {day: {} for day in self.days}
        for group in self.groups:
            row = table.setdefault(group.day, {})
            row[group.model_id] = row.get(group.model_id, TokenCounts()) + group.counts
        return table


def period_days(days: int, now: float | None = None) -> list[str]:
    """The ``days`` local dates ending today, oldest first."""
    now = time.time() if now is None else now
    today = time.localtime(now)
    # Noon of each day steps cleanly over daylight-saving changes.
    noon = time.mktime((today.tm_year, today.tm_mon, today.tm_mday, 12, 0, 0, 0, 0, -1))
    return [local_day(noon - 86400 * back) for back in range(days - 1, -1, -1)]


def checked_days(days: int | str | None) -> int:
    """A period length from a person or a query string; ValueError says what is wrong."""
    if days is None:
        return DEFAULT_DAYS
    try:
        value = int(days)
    except (TypeError, ValueError):
        raise ValueError(f"days must be a whole number, got {days!r}") from None
    if not 1 <= value <= MAX_DAYS:
        raise ValueError(f"days must be between 1 and {MAX_DAYS}, got {value}")
    return value


def usage_report(store: Store, days: int = DEFAULT_DAYS, now: float | None = None) -> UsageReport:
    """Totals of the last ``days`` days (today included) from the store."""
    period = period_days(checked_days(days), now)
    with store.reading() as conn:
        rows = conn.execute(
            f"SELECT day, model_id, client, COUNT(*), SUM(prompt_tokens), SUM(cached_tokens), "
            f"SUM(completion_tokens), SUM(reasoning_tokens), SUM(duration_s) FROM {TABLE} "
            "WHERE day >= ? AND day <= ? GROUP BY day, model_id, client ORDER BY day",
            [period[0], period[-1]],
        ).fetchall()
    groups = [
        UsageGroup(day, model, client or "", TokenCounts(n, p or 0, c or 0, o or 0, r or 0, float(d or 0.0)))
        for day, model, client, n, p, c, o, r, d in rows
    ]
    return UsageReport(period, groups)


class ReasoningTally:
    """Counts the generated tokens that fall inside a reasoning block (``<think>…</think>``
    and its relatives, as ``reasoning.ReasoningSplitter`` finds them).

    Each chunk's tokens go to the part its text landed in; a chunk that straddles the end of
    the block is shared by characters, and the marker tokens themselves (which leave no text)
    go with the text that follows them. An honest count, not the model's own accounting.
    """

    def __init__(self, inside: str | None = None) -> None:
        self._splitter = ReasoningSplitter(inside)
        self._pending = 0  # tokens whose text the splitter still holds back
        self._reasoning = 0.0

    def feed(self, text: str, tokens: int) -> None:
        self._pending += tokens
        split = self._splitter.feed(text)
        self._attribute(len(split.reasoning), len(split.answer))

    def finish(self) -> int:
        split = self._splitter.finish()
        self._attribute(len(split.reasoning), len(split.answer))
        return self.tokens

    @property
    def tokens(self) -> int:
        return round(self._reasoning)

    def _attribute(self, reasoning_chars: int, answer_chars: int) -> None:
        shown = reasoning_chars + answer_chars
        if shown == 0:
            return
        self._reasoning += self._pending * reasoning_chars / shown
        self._pending = 0
