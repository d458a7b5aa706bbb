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


def per_round_ratios(ours: list[float], theirs: list[list[float]]) -> list[float]:
    """``ours[r] / best[r]`` for every round, ``best`` being the configuration of ``theirs``
    with the highest median (``best_configuration``); empty without a round."""
    complete = [t for t in theirs if t]
    if not ours or not complete:
        return []
    best = best_configuration(complete)
    return [mine / other for mine, other in zip(ours, best) if other > 0]


def paired_ratio(ours: list[float], theirs: list[list[float]]) -> float | None:
    """The median over rounds of ``per_round_ratios``. None without a round."""
    per_round = per_round_ratios(ours, theirs)
    return round(statistics.median(per_round), 3) if per_round else None


def paired_quartiles(ours: list[float], theirs: list[list[float]]) -> list[float] | None:
    """The first and third quartiles of ``per_round_ratios``: how far one round's ratio strays
    from the median, which says how much a run of this many rounds can be trusted. None with
    fewer than two rounds."""
    per_round = per_round_ratios(ours, theirs)
    if len(per_round) < 2:
        return None
    first, _, third = statistics.quantiles(per_round, n=4)
    return [round(first, 3), round(third, 3)]


Pairs = dict[str, tuple[list[float], list[list[float]]]]  # label -> (ours per round, theirs per configuration)


def paired_fields(pairs: Pairs, samples: dict[str, list[float]]) -> dict[str, object]:
    """The JSON fields both speed benchmarks report from their rounds: ``ratios_paired`` (the
    median of each round's own ratio), ``ratios_paired_quartiles`` and ``tok_s_rounds`` (every
    round's speed), which say how far single rounds strayed."""
    medians = {label: paired_ratio(ours, theirs) for label, (ours, theirs) in pairs.items()}
    quartiles = {label: paired_quartiles(ours, theirs) for label, (ours, theirs) in pairs.items()}
    return {"ratios_paired": {label: value for label, value in medians.items() if value is not None},
            "ratios_paired_quartiles": {label: value for label, value in quartiles.items() if value is not None},
            "tok_s_rounds": {key: [round(v, 2) for v in values] for key, values in samples.items()}}
