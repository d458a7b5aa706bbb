"""A window model's prompt end read whole against the resume cut, in one process.

With the recipe's ``state-seq-window-at`` patch the engine reads a sliding-window model's
prompt in the chunks its length asks for and takes the window checkpoints where a later
prompt resumes after the last chunk, from inside it (``swa_checkpoints.after_chunk``).
Without the patch it ends a chunk there instead (``Sequence._resume_cut``): a 512-token
prompt is read as 448 + 64 rows, with window caches on the 64-row rule. This loads the
model twice, one of them set up as without the patch, and times reading a 512-token prompt
after ``depth`` tokens on each, rounds interleaved (the order alternating), medians
reported. Prints JSON.

    python benchmarks/window_last_chunk.py [--model PATH] [--depths 0,4096] [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
from pathlib import Path

from kv_quality import default_models  # benchmarks/ is on sys.path when run as a script
from speed import load, ours_decode, ours_prefill

from inglenook.engine.runtime.model import LoadedModel
from inglenook.engine.runtime.native import backend_report, physical_cores
from inglenook.engine.runtime.slots import FA_TILE_ROWS

WHOLE = "last chunk whole (state-seq-window-at)"
CUT = "resume cut (as without the patch)"


def as_without_the_patch(model: LoadedModel) -> None:
    """What the engine does with a llama.cpp that lacks ``state-seq-window-at``."""
    model.context.state_end_at = None
    model.context.canonical_rows = FA_TILE_ROWS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="a GGUF with sliding-window layers (default: gemma-3-270m)")
    parser.add_argument("--depths", default="0,4096")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--pp", type=int, default=512)
    parser.add_argument("--threads", type=int, default=physical_cores())
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    path = args.model or next((p for p in default_models() if "gemma" in p.name), None)
    if path is None:
        parser.error("no sliding-window model: pass --model (make test installs gemma-3-270m)")
    depths = [int(d) for d in args.depths.split(",")]
    context = max(depths) + args.pp + 16
    models = {WHOLE: load(path, context, args.threads, 512), CUT: load(path, context, args.threads, 512)}
    try:
        if models[WHOLE].context.state_end_at is None:
            parser.error(f"{path.name}: no window cache, or a llama.cpp built without state-seq-window-at")
        as_without_the_patch(models[CUT])
        for model in models.values():  # warm-up: compute buffers, page faults of the weights
            ours_decode(model, 0, 4)
        samples: dict[str, list[float]] = {}
        for round_number in range(args.rounds):
            order = list(models.items()) if round_number % 2 == 0 else list(reversed(models.items()))
            for depth in depths:
                for name, model in order:
                    samples.setdefault(f"pp{args.pp} d{depth} | {name}", []).append(
                        ours_prefill(model, depth, args.pp))
    finally:
        for model in models.values():
            model.close()
    medians = {key: round(statistics.median(values), 1) for key, values in samples.items()}
    print(json.dumps({
        "model": path.name, "cpu_variant": backend_report().cpu_variant, "threads": args.threads,
        "rounds": args.rounds, "tok_s": medians,
        "range": {key: [round(min(v), 1), round(max(v), 1)] for key, v in samples.items()},
        "ratios": {f"pp{args.pp} d{d}: whole / cut": round(medians[f"pp{args.pp} d{d} | {WHOLE}"]
                                                          / medians[f"pp{args.pp} d{d} | {CUT}"], 3)
                   for d in depths},
    }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
