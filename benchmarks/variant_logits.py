"""How much llama.cpp's CPU variants disagree on the same logits: the size the test-only jitter
(``engine/runtime/logit_jitter.py``) should have.

Runs the lab's evaluation text through each model once per CPU variant that runs here (each in
a process of its own: the variant is chosen when the library loads), with the engine's default
load, and compares every variant's logits with the best variant's: the standard deviation and
the largest absolute difference, and how often the top token differs. Beside them, the same
figures for the jitter at a few scales (its noise added to the best variant's logits), so the
jitter's default can be chosen to move answers as much as a change of CPU does. Prints JSON.

    python benchmarks/variant_logits.py [--model PATH ...] [--tokens 512]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from kv_quality import default_models  # type: ignore[import-not-found]


JITTER_SCALES = (0.05, 0.1, 0.2, 0.3)


def logits_in_this_process(model: Path, tokens: int, out: Path) -> None:
    from inglenook.engine.base.gguf import read_gguf
    from inglenook.engine.base.model_record import ModelRecord
    from inglenook.engine.lab.evaltext import EvalText
    from inglenook.engine.runtime.model import LoadedModel
    from inglenook.engine.runtime.model_loading import LoadOptions

    record = ModelRecord.describe(read_gguf(model), model_id=model.stem, source="bench")
    loaded = LoadedModel(record, LoadOptions(context_size=max(tokens, 512)))
    try:
        ids = loaded.tokenize(EvalText.load().text, add_special=True, parse_special=False)[:tokens]
        np.save(out, loaded.logits_for(ids))
        np.save(out.with_suffix(".ids.npy"), np.array(ids))
    finally:
        loaded.close()


def variants_here() -> list[str]:
    from inglenook.engine.runtime.native import backend_report

    report = backend_report()
    usable = sorted((v for v in report.cpu_variants if v.runs_here), key=lambda v: -v.score)
    return [v.name for v in usable] or [report.cpu_variant]


def differences(logits: np.ndarray, reference: np.ndarray) -> dict[str, float | int]:
    difference = logits - reference
    return {
        "std": round(float(difference.std()), 4),
        "max_abs": round(float(np.abs(difference).max()), 4),
        "top_token_differs": int((logits.argmax(1) != reference.argmax(1)).sum()),
    }


def jittered(logits: np.ndarray, ids: np.ndarray, scale: float) -> np.ndarray:
    from inglenook.engine.runtime.logit_jitter import LogitJitter

    jitter = LogitJitter(logits.shape[1], scale)
    return logits + np.stack([jitter.noise_for(position, int(token)) for position, token in enumerate(ids)])


def compare(model: Path, tokens: int) -> dict[str, object]:
    results: dict[str, object] = {"model": model.name, "positions": tokens}
    with tempfile.TemporaryDirectory() as folder:
        logits = {}
        for variant in variants_here():
            out = Path(folder) / f"{variant}.npy"
            env = {**os.environ, "INGLENOOK_CPU_VARIANT": variant}
            env.pop("INGLENOOK_TEST_LOGIT_JITTER", None)
            subprocess.run([sys.executable, __file__, "--one", str(model), "--tokens", str(tokens), "--out", str(out)],
                           check=True, env=env)
            logits[variant] = np.load(out)
        ids = np.load(out.with_suffix(".ids.npy"))
    best, *others = list(logits)
    for variant in others:
        results[f"{variant}_vs_{best}"] = differences(logits[variant], logits[best])
    for scale in JITTER_SCALES:
        results[f"jitter_{scale}_vs_{best}"] = differences(jittered(logits[best], ids, scale), logits[best])
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, action="append")
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        logits_in_this_process(args.one, args.tokens, args.out)
        return
    print(json.dumps([compare(model, args.tokens) for model in args.model or default_models()], indent=2))


if __name__ == "__main__":
    main()
