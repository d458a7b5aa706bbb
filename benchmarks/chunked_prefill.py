"""Chunked prefill: a running stream's inter-token gaps while a ~4,000-token prompt arrives.

For each prefill chunk size (tokens fed per step while another sequence decodes), one
greedy stream runs; after its 20th token a long prompt is submitted. Reports the stream's
median gap alone, its worst gap while the long prompt enters, and the long prompt's own
time to first token, against its time alone. Prints JSON.

    python benchmarks/chunked_prefill.py [--chunks 32,64,128,512] [--prompt-tokens 4000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from inglenook.engine.base.generation_events import Chunk, Finished
from inglenook.engine.base.jobs import GenerateJob
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.core.engine import Engine
from inglenook.engine.store.paths import Paths

MODEL = "smollm2"
STREAM = SamplingParams(temperature=0.0, max_tokens=400, logit_bias={0: -100.0, 1: -100.0, 2: -100.0})


def long_prompt(tokens: int) -> str:
    line = "Item {i}: a fox, a river, a loaf of bread and a clock sat in a row. "
    return "".join(line.format(i=i) for i in range(tokens // 23)) + "\nWhich item came first?"


def stream_alone(engine: Engine) -> float:
    stamps = [time.perf_counter() for e in engine.scheduler.submit(GenerateJob(
        MODEL, sampling=STREAM, text="Once upon a time", use_cache=False)) if isinstance(e, Chunk)]
    return statistics.median(b - a for a, b in zip(stamps, stamps[1:]))


def long_alone(engine: Engine, text: str) -> float:
    _, finished = engine.scheduler.submit(GenerateJob(
        MODEL, sampling=SamplingParams(temperature=0.0, max_tokens=2), text=text, use_cache=False)).result()
    return finished.timings.ttft_s


def together(engine: Engine, text: str) -> tuple[float, float, float]:
    stream = engine.scheduler.submit(GenerateJob(MODEL, sampling=STREAM, text="Once upon a time", use_cache=False))
    stamps: list[float] = []
    late = None
    for event in stream:
        if isinstance(event, Chunk):
            stamps.append(time.perf_counter())
            if len(stamps) == 20:
                late = engine.scheduler.submit(GenerateJob(
                    MODEL, sampling=SamplingParams(temperature=0.0, max_tokens=2), text=text, use_cache=False))
                submitted = len(stamps)
        if isinstance(event, Finished):
            break
    assert late is not None
    _, finished = late.result()
    gaps = [b - a for a, b in zip(stamps[submitted - 1:], stamps[submitted:])]
    return max(gaps), statistics.median(gaps), finished.timings.ttft_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", default="32,64,128,512")
    parser.add_argument("--prompt-tokens", type=int, default=4000)
    args = parser.parse_args()
    result: dict[str, object] = {"prompt_tokens_requested": args.prompt_tokens}
    with tempfile.TemporaryDirectory() as home, Engine(Paths.under(Path(home))) as engine:
        engine.update_settings(parallel_sequences=2, context_size=5120, cache_budget_mb=0)
        text = long_prompt(args.prompt_tokens)
        stream_alone(engine)  # warm up
        median_alone = stream_alone(engine)
        ttft_alone = long_alone(engine, text)
        result.update({"stream_median_gap_alone_s": round(median_alone, 4), "long_prompt_ttft_alone_s": round(ttft_alone, 2)})
        rows = {}
        for chunk in [int(c) for c in args.chunks.split(",")]:
            engine.update_settings(prefill_chunk=chunk)
            worst, median, ttft = together(engine, text)
            rows[str(chunk)] = {
                "worst_gap_s": round(worst, 3), "median_gap_s": round(median, 4),
                "worst_gap_vs_alone_median": round(worst / median_alone, 1),
                "long_prompt_ttft_s": round(ttft, 2), "ttft_vs_alone": round(ttft / ttft_alone, 2),
            }
        result["by_prefill_chunk"] = rows
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
