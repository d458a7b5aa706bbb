"""Decode speed: Inglenook's decode loop vs llama-cpp-python's own streaming loop.

Both load the same GGUF with the same thread count, context and prompt, and decode the
same number of greedy tokens; runs are interleaved so machine noise hits both alike.
Prints JSON. With ``--llama-bench PATH`` (``make bench`` passes the one that
``scripts/llama_build.py llama-bench`` builds from the same CMake tree as the engine's
library, so both run the same CPU variant) it also reports llama.cpp's own decode speed,
interleaved round by round, and our ratio to it.

    python benchmarks/decode.py [--model PATH] [--tokens 128] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
import time
from pathlib import Path

from inglenook.engine.base.gguf import read_gguf
from inglenook.engine.base.model_record import ModelRecord
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.models.starter import find_starter_model
from inglenook.engine.runtime.model import LoadedModel
from inglenook.engine.runtime.model_loading import LoadOptions
from inglenook.engine.runtime.native import backend_report, llama, llama_cpp_version, physical_cores

PROMPT = "Once upon a time, in a village at the edge of a great forest, there lived"


def record_for(path: Path) -> ModelRecord:
    return ModelRecord.describe(read_gguf(path), model_id=path.stem, source="bench")


def ours(model: LoadedModel, tokens: int) -> float:
    prompt = model.tokenize(PROMPT)
    # EOS banned so every run decodes exactly ``tokens`` tokens.
    eos = model.context.lib.llama_vocab_eos(model.context.vocab)
    sampling = SamplingParams(temperature=0.0, max_tokens=tokens, logit_bias={eos: -100.0})
    finished = list(model.generate(prompt, sampling, reuse_kv=False))[-1]
    assert finished.usage.completion_tokens == tokens, finished
    return finished.tokens_per_s


def theirs(llm, tokens: int) -> float:  # noqa: ANN001
    first_at = None
    llm.reset()
    prompt = llm.tokenize(PROMPT.encode())
    for _ in llm.create_completion(
        prompt, max_tokens=tokens, temperature=0.0, stream=True, logit_bias=None,
    ):
        if first_at is None:
            first_at = time.perf_counter()
    ended = time.perf_counter()
    generated = llm.n_tokens - len(prompt) + 1
    return (generated - 1) / (ended - first_at)


def llama_bench(binary: Path, model: Path, threads: int, tokens: int, flash_attn: bool = False, reps: int = 1) -> float:
    # One repetition per call: the calls are interleaved with ours, round by round. Flash
    # attention off by default, as the engine runs an f16 KV cache on the CPU (runtime/model_loading.py
    # says why); llama-bench's own default ("auto") turns it on.
    out = subprocess.run(
        [str(binary), "-m", str(model), "-t", str(threads), "-p", "0", "-n", str(tokens), "-r", str(reps),
         "-ngl", "0", "-fa", "1" if flash_attn else "0", "-o", "json"],
        capture_output=True, text=True, check=True,
    ).stdout
    return float(json.loads(out)[0]["avg_ts"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=find_starter_model())
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=physical_cores())
    parser.add_argument("--llama-bench", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    llama()  # route llama.cpp's log lines into logging before anything loads

    import llama_cpp

    model = LoadedModel(record_for(args.model), LoadOptions(context_size=2048, threads=args.threads, gpu_layers=0))
    llm = llama_cpp.Llama(str(args.model), n_ctx=2048, n_threads=args.threads, n_threads_batch=args.threads,
                          n_gpu_layers=0, verbose=False)
    ours(model, 16), theirs(llm, 16)  # warm up both
    ours_tps, theirs_tps, bench_tps = [], [], []
    for _ in range(args.rounds):
        ours_tps.append(ours(model, args.tokens))
        theirs_tps.append(theirs(llm, args.tokens))
        if args.llama_bench:
            bench_tps.append(llama_bench(args.llama_bench, args.model, args.threads, args.tokens))
    backends = backend_report()
    result = {
        "cpu_variant": backends.cpu_variant,
        "llama_cpp_python": llama_cpp_version()[0],
        "llama_cpp_commit": llama_cpp_version()[1],
        "model": args.model.name,
        "threads": args.threads,
        "tokens": args.tokens,
        "rounds": args.rounds,
        "inglenook_tok_s": round(statistics.median(ours_tps), 2),
        "llama_cpp_python_tok_s": round(statistics.median(theirs_tps), 2),
        "inglenook_runs": [round(x, 2) for x in ours_tps],
        "llama_cpp_python_runs": [round(x, 2) for x in theirs_tps],
    }
    result["ratio_vs_llama_cpp_python"] = round(result["inglenook_tok_s"] / result["llama_cpp_python_tok_s"], 3)
    if bench_tps:
        bench = statistics.median(bench_tps)
        result["llama_bench_tok_s"] = round(bench, 2)
        result["llama_bench_runs"] = [round(x, 2) for x in bench_tps]
        result["ratio_vs_llama_bench"] = round(result["inglenook_tok_s"] / bench, 3)
        # For reference: what flash attention would give (the engine keeps it off for f16 on
        # the CPU so that a restored prompt cache reproduces a full prefill exactly).
        result["llama_bench_flash_attn_tok_s"] = round(
            llama_bench(args.llama_bench, args.model, args.threads, args.tokens, flash_attn=True, reps=3), 2)
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
