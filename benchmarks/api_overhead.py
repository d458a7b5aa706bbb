"""What the HTTP API costs: the same greedy generation through the scheduler and through HTTP.

Runs, interleaved in rotating order so machine noise hits all alike: a job submitted to the engine's
scheduler directly, the same request over HTTP (whole response), and over HTTP as an SSE
stream. Also a JSON-object answer (grammar-constrained) next to a free one. Prints JSON
with the median wall time of each and the ratios to the direct run.

    python benchmarks/api_overhead.py [--tokens 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from inglenook.engine.api.server import ApiServer
from inglenook.engine.base.jobs import GenerateJob
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.core.engine import Engine
from inglenook.engine.store.paths import Paths

QUESTION = "Describe a fireplace in a cosy cottage."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory() as home, Engine(Paths.under(Path(home))) as engine:
        server = ApiServer(engine, port=0)
        server.start()
        try:
            print(json.dumps(measure(engine, server, args.tokens, args.rounds), indent=2))
        finally:
            server.stop()


def measure(engine: Engine, server: ApiServer, tokens: int, rounds: int) -> dict:
    model_id = engine.default_model_id()
    messages = [{"role": "user", "content": QUESTION}]
    body = {"model": model_id, "messages": messages, "temperature": 0, "max_tokens": tokens}
    client = httpx.Client(base_url=server.url, timeout=600)

    def direct() -> int:
        job = GenerateJob(model_id=model_id, messages=messages, sampling=SamplingParams(temperature=0, max_tokens=tokens))
        return engine.scheduler.submit(job).result()[1].usage.completion_tokens

    def http_whole() -> int:
        return client.post("/chat/completions", json=body).json()["usage"]["completion_tokens"]

    def http_stream() -> int:
        streamed = {**body, "stream": True, "stream_options": {"include_usage": True}}
        with client.stream("POST", "/chat/completions", json=streamed) as response:
            events = [line for line in response.iter_lines() if line.startswith("data: {")]
        return json.loads(events[-1][6:])["usage"]["completion_tokens"]

    def http_json_object() -> int:
        constrained = {**body, "response_format": {"type": "json_object"}}
        return client.post("/chat/completions", json=constrained).json()["usage"]["completion_tokens"]

    runs: dict[str, Callable[[], int]] = {
        "direct": direct, "http": http_whole, "http_stream": http_stream, "http_json_object": http_json_object,
    }
    direct()  # load the model and warm the prefix cache before timing
    times: dict[str, list[float]] = {name: [] for name in runs}
    counts: dict[str, int] = {}
    names = list(runs)
    for round_index in range(rounds):
        # Rotate the order each round so no variant always runs first (or after a slow one).
        for name in names[round_index % len(names) :] + names[: round_index % len(names)]:
            run = runs[name]
            started = time.perf_counter()
            counts[name] = run()
            times[name].append(time.perf_counter() - started)
    medians = {name: statistics.median(values) for name, values in times.items()}
    return {
        "model": model_id,
        "rounds": rounds,
        "completion_tokens": counts,
        "median_seconds": {k: round(v, 3) for k, v in medians.items()},
        "tokens_per_second": {k: round(counts[k] / medians[k], 1) for k in runs},
        "ratio_to_direct": {k: round(medians[k] / medians["direct"], 3) for k in runs},
    }


if __name__ == "__main__":
    main()
