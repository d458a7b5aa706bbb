"""Ratios of interleaved rounds, paired round by round.

On a shared two-core machine the speed drifts by a quarter within a run. Benchmarks that run
each configuration once per round (``speed.py``, ``server_speed.py``) therefore also report
the median over rounds of each round's own ratio: ours in round ``r`` against the other tool
in the same round ``r``, measured seconds apart, so a slow stretch of the machine that hits
both in one round cancels out instead of landing on one side's median.

Against several configurations of the other tool (llama-bench with flash attention on and
off), the one compared is the best by its median over rounds, and ours is paired with that
configuration's rounds. Taking the faster of the two in each round instead would compare one
sample of ours against the larger of two samples of theirs: where both configurations run at
about the same speed (decode at depth 0), the larger of two draws with the ~10% spread of
this machine sits ~5% above either's median, so such a ratio reads ~0.95 for equal speeds.
"""

from __future__ import annotations

import statistics


def best_configuration(theirs: list[list[float]]) -> list[float]:
    """The configuration (a list of per-round speeds) with the highest median."""
    return max(theirs, key=statistics.median)


def paired_ratio(ours: list[float], theirs: list[list[float]]) -> float | None:
    """The median over rounds of ``ours[r] / best[r]``, ``best`` being the configuration of
    ``theirs`` with the highest median (``best_configuration``). None without a round."""
    complete = [t for t in theirs if t]
    if not ours or not complete:
        return None
    best = best_configuration(complete)
    per_round = [mine / other for mine, other in zip(ours, best) if other > 0]
    return round(statistics.median(per_round), 3) if per_round else None
