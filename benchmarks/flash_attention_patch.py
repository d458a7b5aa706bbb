"""What the recipe's flash-attention patches change in speed: llama-bench built with them
beside llama-bench built from upstream's source, in one run.

The first patch (``flash-attention-tiles-from-32-rows`` in scripts/llama_build.py) sends
prompt chunks of 32 to 63 rows through the CPU kernel's tiled path and sizes a tile's
products to the rows it holds; the second (``flash-attention-k-rows-as-stored``) makes that
path read the cache's K rows as stored instead of packing them one value at a time. So the
cells that can move are prompt reading in chunks of 32 rows or more, most at depth;
fewer rows (a decode step, a speculative draft being checked) run the same code in both. For each model,
``pp N`` reads an N-token prompt as one batch after ``depth`` tokens already in the context,
``tg 64`` writes 64 tokens; f16 cache, flash attention on (llama-server's default). Rounds
alternate the two binaries and medians are reported. Prints JSON.

    python benchmarks/flash_attention_patch.py \\
        --patched "$(python scripts/llama_build.py llama-bench)" \\
        --upstream "$(python scripts/llama_build.py llama-bench --upstream)" \\
        [--model PATH ...] [--prompts 4,16,32,48,512] [--depths 0,4096] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from kv_quality import default_models  # benchmarks/ is on sys.path when run as a script
from inglenook.engine.runtime.native import physical_cores


def bench(binary: Path, model: Path, threads: int, prompts: list[int], depths: list[int], tg: int) -> dict[str, float]:
    """One llama-bench run of every prompt size and decode at every depth: tok/s by cell."""
    out = subprocess.run(
        [str(binary), "-m", str(model), "-t", str(threads), "-p", ",".join(map(str, prompts)), "-n", str(tg),
         "-d", ",".join(map(str, depths)), "-r", "1", "-ngl", "0", "-fa", "1", "-ctk", "f16", "-ctv", "f16",
         "-o", "json"],
        capture_output=True, text=True, check=True,
    ).stdout
    cells: dict[str, float] = {}
    for test in json.loads(out):
        kind = f"pp {test['n_prompt']}" if test["n_prompt"] else f"tg {test['n_gen']}"
        cells[f"{kind} d{test['n_depth']}"] = float(test["avg_ts"])
    return cells


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patched", type=Path, required=True, help="llama-bench built by the recipe")
    parser.add_argument("--upstream", type=Path, required=True, help="llama-bench built with --upstream")
    parser.add_argument("--model", type=Path, action="append")
    parser.add_argument("--prompts", default="4,16,32,48,512")
    parser.add_argument("--depths", default="0,4096")
    parser.add_argument("--tg", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    threads = args.threads or physical_cores()
    prompts = [int(p) for p in args.prompts.split(",")]
    depths = [int(d) for d in args.depths.split(",")]
    report: dict = {"threads": threads, "rounds": args.rounds, "unit": "tok/s", "models": []}
    for model in args.model or default_models():
        runs: dict[str, dict[str, list[float]]] = {"patched": defaultdict(list), "upstream": defaultdict(list)}
        for _ in range(args.rounds):
            for name, binary in (("upstream", args.upstream), ("patched", args.patched)):
                for cell, speed in bench(binary, model, threads, prompts, depths, args.tg).items():
                    runs[name][cell].append(speed)
        cells = {}
        for cell in runs["patched"]:
            patched = statistics.median(runs["patched"][cell])
            upstream = statistics.median(runs["upstream"][cell])
            cells[cell] = {"upstream": round(upstream, 1), "patched": round(patched, 1),
                           "patched_over_upstream": round(patched / upstream, 3)}
        report["models"].append({"model": model.name, "cells": cells})
        print(json.dumps(report["models"][-1]), file=sys.stderr, flush=True)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
