"""Ratios of interleaved rounds, paired round by round.

On a shared two-core machine the speed drifts by a quarter within a run. Benchmarks that run
each configuration once per round (``speed.py``, ``server_speed.py``) therefore also report
the median over rounds of each round's own ratio: ours in round ``r`` against the other tool
in the same round ``r``, measured seconds apart, so a slow stretch of the machine that hits
both in one round cancels out instead of landing on one side's median.
"""

from __future__ import annotations

import statistics


def paired_ratio(ours: list[float], theirs: list[list[float]]) -> float | None:
    """The median over rounds of ``ours[r] / max(t[r] for t in theirs)``: each round's ratio to
    the best of the other configurations in that round. None without a complete round."""
    rounds = min([len(ours), *(len(t) for t in theirs)]) if theirs else 0
    per_round = [ours[r] / best for r in range(rounds) if (best := max(t[r] for t in theirs)) > 0]
    return round(statistics.median(per_round), 3) if per_round else None
