"""Decode and prompt-reading speed, ours beside llama.cpp's own ``llama-bench``, in one run.

For each model and depth (tokens already in the context), measures:
- ours in the default configuration (``kv_cache_type="auto"``: f16 K/V with flash
  attention, prompts read in exact chunks, window-sized caches for sliding-window layers)
  and, with ``--all-configs``, ours over a q8_0 cache, the engine's old CPU default (f16,
  flash attention off) and with full-size window caches (``swa_full``);
- ``llama-bench`` from the same CMake tree as the engine's library (so the same CPU
  variant runs) with flash attention off and on over an f16 cache (on is llama-server's
  default) and, with ``--all-configs``, on over a q8_0 cache.
Decode is ``tg`` (128 tokens), prompt reading ``pp`` (512 tokens), both after ``depth``
tokens, like ``llama-bench -d``. Rounds are interleaved (each configuration once per round)
and medians reported, so machine noise hits all alike; each one's best round is reported
too (``tok_s_best``, ``ratios_best``): on a shared two-core machine whose speed swings by a
quarter from one run to the next, the best of several rounds is the speed with the least
outside work in it (``timeit`` reports its minimum for the same reason). ``ratios_paired`` is
the median of each round's own ratio against llama-bench's best configuration (``paired.py``):
a slow stretch that hits one round hits both sides of it. Within a round each test (say tg128
at depth 4,096) runs all its configurations back to back, ours between llama-bench's two, so
that the two sides of a pair are measured one right after the other, not minutes apart (at
depth 4,096 every run reads the depth first); the order reverses every other test and every
other round. With ``--ubatch`` several
micro-batch sizes are measured for prompt reading, ours and llama-bench's alike.
``ratios_paired_quartiles`` (the first and third quartiles of the per-round ratios) and
``tok_s_rounds`` (every round's speed) say how far single rounds strayed. Prints JSON.

    python benchmarks/speed.py --llama-bench "$(python scripts/llama_build.py llama-bench)" \
        [--model PATH ...] [--depths 0,4096] [--rounds 3] [--ubatch 512] [--all-configs] \
        [--tg 0 | --pp 0] [--llama-bench-fa on|off]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
from collections import defaultdict
from functools import partial
from pathlib import Path

from kv_quality import default_models  # benchmarks/ is on sys.path when run as a script
from paired import Pairs, paired_fields
from inglenook.engine.base.generation_events import Finished
from inglenook.engine.base.gguf import read_gguf
from inglenook.engine.base.model_record import ModelRecord
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.runtime.model import LoadedModel
from inglenook.engine.runtime.model_loading import LoadOptions
from inglenook.engine.runtime.native import backend_report, llama, physical_cores

OURS: dict[str, dict[str, object]] = {"ours (auto: f16, fa on)": {}}
THEIRS = {"llama-bench f16 fa off": ("f16", "0"), "llama-bench f16 fa on": ("f16", "1")}
MORE_OURS: dict[str, dict[str, object]] = {
    "ours (q8_0, fa on)": {"kv_cache_type": "q8_0"},
    "ours (old default: f16, fa off)": {"kv_cache_type": "f16", "flash_attention": False},
    # Sliding-window layers at the full context, as before window-sized caches
    # (llama-bench keeps window-sized ones: it sets swa_full off); the same as the
    # default for other models.
    "ours (swa_full: full-size window cache)": {"swa_full": True}}
MORE_THEIRS = {"llama-bench q8_0 fa on": ("q8_0", "1")}


def filler_tokens(model: LoadedModel, count: int) -> list[int]:
    """``count`` tokens of ordinary text (the content does not change the speed)."""
    text = "The river ran past the mill and under the old stone bridge toward the sea. "
    tokens = model.tokenize(text * 8, add_special=False)
    return (tokens * (count // len(tokens) + 1))[:count]


def no_stop(model: LoadedModel) -> dict[int, float]:
    return {token_id: -100.0 for role, (token_id, _) in model.info.special_tokens.items()
            if role in ("eos", "eot", "eom") and 0 <= token_id < model.n_vocab}


def finished(events) -> Finished:  # noqa: ANN001
    last = list(events)[-1]
    assert isinstance(last, Finished), last
    return last


def ours_decode(model: LoadedModel, depth: int, tokens: int) -> float:
    prompt = filler_tokens(model, max(depth, 8))
    sampling = SamplingParams(temperature=0.0, max_tokens=tokens, logit_bias=no_stop(model))
    done = finished(model.generate(prompt, sampling, reuse_kv=False))
    assert done.usage.completion_tokens == tokens, done
    return done.tokens_per_s


def ours_prefill(model: LoadedModel, depth: int, tokens: int) -> float:
    body = filler_tokens(model, depth + tokens)
    one = SamplingParams(temperature=0.0, max_tokens=1, logit_bias=no_stop(model))
    if depth:
        finished(model.generate(body[:depth], one, reuse_kv=False))  # the depth, not timed
    done = finished(model.generate(body, one, reuse_kv=bool(depth)))
    assert done.usage.cached_tokens >= (depth if depth else 0) and done.usage.prompt_tokens == depth + tokens, done
    return (done.usage.prompt_tokens - done.usage.cached_tokens) / done.timings.prompt_s


def llama_bench(binary: Path, model: Path, threads: int, kv: str, fa: str, depth: int, pp: int, tg: int,
                ubatch: int) -> float:
    out = subprocess.run(
        [str(binary), "-m", str(model), "-t", str(threads), "-p", str(pp), "-n", str(tg), "-d", str(depth),
         "-r", "1", "-ngl", "0", "-fa", fa, "-ctk", kv, "-ctv", kv, "-ub", str(ubatch),
         "-b", str(max(ubatch, 2048)), "-o", "json"],
        capture_output=True, text=True, check=True,
    ).stdout
    return float(json.loads(out)[0]["avg_ts"])


def load(path: Path, context: int, threads: int, ubatch: int, **options: object) -> LoadedModel:
    record = ModelRecord.describe(read_gguf(path), model_id=path.stem, source="bench")
    return LoadedModel(record, LoadOptions(context_size=context, threads=threads, gpu_layers=0, batch_size=ubatch,
                                           **options))  # type: ignore[arg-type]


def measure_model(path: Path, args: argparse.Namespace) -> dict:
    depths = [int(d) for d in args.depths.split(",")]
    ubatches = [int(u) for u in args.ubatch.split(",")]
    context = max(depths) + args.pp + args.tg + 16
    samples: dict[str, list[float]] = defaultdict(list)
    models = {(name, ub): load(path, context, args.threads, ub, **opts)
              for name, opts in OURS.items() for ub in ubatches}
    try:
        for model in models.values():  # warm-up: compute buffers, page faults of the weights
            ours_decode(model, 0, 4)
        kinds = ([("tg", ubatches[0])] if args.tg else []) + ([("pp", ub) for ub in ubatches] if args.pp else [])
        tests = [(depth, kind, ub) for depth in depths for kind, ub in kinds]
        for round_no in range(args.rounds):
            for index, (depth, kind, ub) in enumerate(tests):
                sides = test_sides(models, path, depth, kind, ub, args, samples)
                # Reversed every other test and every other round: neither side always goes first.
                for side in sides if (round_no + index) % 2 == 0 else sides[::-1]:
                    side()
    finally:
        for model in models.values():
            model.close()
    medians = {key: round(statistics.median(values), 2) for key, values in samples.items()}
    best = {key: round(max(values), 2) for key, values in samples.items()}
    return {"model": path.name, "tok_s": medians, "ratios": ratios(medians), "tok_s_best": best,
            "ratios_best": ratios(best), **paired_fields(pairs(samples), samples)}


def test_sides(models: dict[tuple[str, int], LoadedModel], path: Path, depth: int, kind: str, ub: int,
               args: argparse.Namespace, samples: dict[str, list[float]]) -> list[partial[None]]:
    """One measurement per configuration of one test (``kind`` "tg" or "pp" at ``depth``, micro-batch
    ``ub``), to be run back to back: ours between llama-bench's configurations, so that ours is
    next to each of the two default ones whichever way round the list is run."""
    name = f"tg{args.tg} d{depth}" if kind == "tg" else f"pp{args.pp} d{depth} ub{ub}"

    def ours(config: str, model: LoadedModel) -> None:
        speed = ours_decode(model, depth, args.tg) if kind == "tg" else ours_prefill(model, depth, args.pp)
        samples[f"{name} | {config}"].append(speed)

    def theirs(config: str, kv: str, fa: str) -> None:
        pp, tg = (0, args.tg) if kind == "tg" else (args.pp, 0)
        samples[f"{name} | {config}"].append(llama_bench(args.llama_bench, path, args.threads, kv, fa, depth, pp, tg, ub))

    mine = [partial(ours, config, model) for (config, model_ub), model in models.items() if model_ub == ub]
    others = [partial(theirs, config, kv, fa) for config, (kv, fa) in THEIRS.items()] if args.llama_bench else []
    return others[:1] + mine + others[1:]


def ratios(medians: dict[str, float]) -> dict[str, float]:
    """Ours (default) ÷ the best llama-bench configuration, per test."""
    out: dict[str, float] = {}
    tests = {key.split(" | ")[0] for key in medians}
    for test in sorted(tests):
        ours = medians.get(f"{test} | {next(iter(OURS))}")
        best = max((v for k, v in medians.items() if k.startswith(test + " | llama-bench")), default=None)
        if ours and best:
            out[f"{test}: ours / best llama-bench"] = round(ours / best, 3)
    return out


def pairs(samples: dict[str, list[float]]) -> Pairs:
    """Per test, ours (default) beside llama-bench's configurations, round by round (``paired.py``
    pairs ours with the best of them by median)."""
    out: Pairs = {}
    for test in sorted({key.split(" | ")[0] for key in samples}):
        ours = samples.get(f"{test} | {next(iter(OURS))}")
        theirs = [v for k, v in samples.items() if k.startswith(test + " | llama-bench")]
        if ours and theirs:
            out[f"{test}: ours / best llama-bench"] = (ours, theirs)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, action="append")
    parser.add_argument("--depths", default="0,4096")
    parser.add_argument("--ubatch", default="512", help="micro-batch sizes for prompt reading, e.g. 256,512,1024,2048")
    parser.add_argument("--pp", type=int, default=512, help="prompt tokens read per pp test; 0: no pp test")
    parser.add_argument("--tg", type=int, default=128, help="tokens written per tg test; 0: no tg test")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=physical_cores())
    parser.add_argument("--llama-bench", type=Path)
    parser.add_argument("--all-configs", action="store_true", help="also q8_0 caches and flash attention off (ours)")
    parser.add_argument("--llama-bench-fa", choices=("both", "on", "off"), default="both",
                        help="llama-bench's flash attention: both configurations, or one (a long cell where the "
                             "other has lost every run, at half the time)")
    args = parser.parse_args()
    if args.all_configs:
        OURS.update(MORE_OURS)
        THEIRS.update(MORE_THEIRS)
    if args.llama_bench_fa != "both":
        wanted = "1" if args.llama_bench_fa == "on" else "0"
        for name in [name for name, (_, fa) in THEIRS.items() if fa != wanted]:
            del THEIRS[name]
    logging.basicConfig(level=logging.WARNING)
    llama()  # llama.cpp's log into logging before anything loads
    results = [measure_model(path, args) for path in args.model or default_models()]
    report = {"cpu_variant": backend_report().cpu_variant, "threads": args.threads, "rounds": args.rounds,
              "results": results}
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
