"""The lab's math: numpy vs torch backends, and top-k storage vs full distributions.

Times ``summarize_reference`` + ``compare_to_reference`` on synthetic language-model-like
logits (one window of positions x a real vocabulary size) for each installed backend,
interleaved, and reports the on-disk size of the top-k reference next to what full float16
distributions would take. Prints JSON.

    python benchmarks/lab.py [--positions 256] [--vocab 49152] [--top-k 128] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from inglenook.engine.lab.backend import NumpyBackend, TorchBackend
from inglenook.engine.lab.metrics import compare_to_reference, summarize_reference


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--positions", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=49152)
    parser.add_argument("--top-k", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    # Peaked distributions with a long tail, like a model's next-token logits.
    reference = (rng.standard_normal((args.positions, args.vocab)) * 2.5).astype(np.float32)
    reference[np.arange(args.positions), rng.integers(0, args.vocab, args.positions)] += 12.0
    variant = reference + (rng.standard_normal(reference.shape) * 0.3).astype(np.float32)
    targets = rng.integers(0, args.vocab, args.positions)

    backends = [NumpyBackend()]
    try:
        backends.append(TorchBackend())
    except ImportError:
        pass
    times: dict[str, list[float]] = {f"{b.name}:{b.device}": [] for b in backends}
    kld: dict[str, float] = {}
    for _ in range(args.rounds):
        for backend in backends:
            started = time.perf_counter()
            chunk = summarize_reference(backend, reference, targets, args.top_k)
            result = compare_to_reference(backend, variant, targets, chunk)
            times[f"{backend.name}:{backend.device}"].append(time.perf_counter() - started)
            kld[f"{backend.name}:{backend.device}"] = float(result.kld.mean())
    top_k_bytes = chunk.top_index.nbytes + chunk.top_logprob.nbytes + chunk.nll.nbytes
    print(json.dumps({
        "positions": args.positions, "vocab": args.vocab, "top_k": args.top_k,
        "seconds_median": {name: statistics.median(t) for name, t in times.items()},
        "kld_mean": kld,
        "reference_bytes_top_k": top_k_bytes,
        "reference_bytes_full_float16": args.positions * args.vocab * 2,
        "storage_ratio": round(args.positions * args.vocab * 2 / top_k_bytes, 1),
    }, indent=2))


if __name__ == "__main__":
    main()
