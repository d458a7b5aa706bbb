"""A chat turn's time to first token while API streams run, against the same turn idle.

The engine serves the real HTTP API on a loopback port; ``--api-streams`` clients stream
long answers from it (temperature 0, end-of-text banned) while a chat turn is sent through
``ChatService``, the path the window's send button takes. For each number of answers the
model runs at once (``--slots``: 4, the default setting, makes the turn wait for a free
sequence; 5 gives it one at once), the turn's first token is timed from the moment it was
sent, and compared with the time the engine reports (``ttft_ms`` of the saved answer),
which must include the wait in the queue. Prints JSON.

    .venv/bin/python benchmarks/window_ttft.py [--api-streams 4] [--slots 4,5] [--api-tokens 192]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from inglenook.engine.api.server import ApiServer
from inglenook.engine.base.generation_events import Chunk
from inglenook.engine.core.engine import Engine
from inglenook.engine.store.paths import Paths

TOPICS = ["foxes", "rivers", "bread", "clocks", "owls", "ships", "glass", "snow"]
# SmolLM2's end-of-text tokens: banned, so every API stream runs its full length.
BANNED = {"0": -100, "1": -100, "2": -100}
TURN = "Name three animals that live in a forest."
# Measured and reported first-token times agree when they differ by less than this share
# (the reported time starts at submission, a few store writes after the send).
AGREEMENT = 0.1


def api_stream(url: str, model: str, topic: str, tokens: int, first: threading.Event, out: list[float]) -> None:
    body = {"model": model, "stream": True, "temperature": 0, "max_tokens": tokens, "logit_bias": BANNED,
            "messages": [{"role": "user", "content": f"Write a long story about {topic}."}]}
    with httpx.stream("POST", f"{url}/chat/completions", json=body, timeout=600) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("data: ") and '"content"' in line:
                first.set()
    out.append(time.perf_counter())


def chat_turn(engine: Engine) -> dict[str, float]:
    """Send one turn in a fresh conversation; the first token as measured and as reported."""
    conversation = engine.chats.new_conversation(sampling={"temperature": 0.0, "max_tokens": 24})
    sent = time.perf_counter()
    turn = engine.chats.send(conversation.id, TURN, use_cache=False)
    first = None
    for event in turn:
        if first is None and isinstance(event, Chunk):
            first = time.perf_counter()
    message = turn.message
    assert message is not None and first is not None, "the turn produced no answer"
    measured = (first - sent) * 1000
    reported = float(message.ttft_ms or 0.0)
    return {
        "measured_ttft_ms": round(measured, 1),
        "reported_ttft_ms": round(reported, 1),
        "reported_includes_queue_wait": abs(reported - measured) <= AGREEMENT * measured + 5,
    }


def scenario(engine: Engine, server: ApiServer, slots: int, streams: int, tokens: int) -> dict[str, object]:
    engine.update_settings(parallel_sequences=slots)
    engine.scheduler.unload_all()  # the next load takes the new number of sequences
    model = engine.default_model_id()
    list(engine.scheduler.load(model))
    chat_turn(engine)  # warm: the model is paged in
    idle = chat_turn(engine)
    started = [threading.Event() for _ in range(streams)]
    ended: list[float] = []
    clients = [threading.Thread(target=api_stream, args=(server.url, model, TOPICS[i % len(TOPICS)], tokens,
                                                         started[i], ended)) for i in range(streams)]
    for client in clients:
        client.start()
    for event in started:
        event.wait(300)
    busy = chat_turn(engine)
    busy["api_streams_still_running"] = streams - len(ended)
    for client in clients:
        client.join()
    return {"slots": slots, "idle": idle, "with_api_streams": busy,
            "busy_vs_idle": round(busy["measured_ttft_ms"] / max(idle["measured_ttft_ms"], 1e-3), 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--api-streams", type=int, default=4)
    parser.add_argument("--api-tokens", type=int, default=192)
    parser.add_argument("--slots", default="4,5")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home, Engine(Paths.under(Path(home))) as engine:
        engine.update_settings(context_size=1024, cache_budget_mb=0)
        server = ApiServer(engine, port=0)
        server.start()
        try:
            rows = [scenario(engine, server, int(slots), args.api_streams, args.api_tokens)
                    for slots in args.slots.split(",")]
        finally:
            server.stop()
        result = {"benchmark": "window_ttft_while_api_busy", "model": engine.default_model_id(),
                  "api_streams": args.api_streams, "api_tokens": args.api_tokens, "scenarios": rows,
                  "cpu_count": os.cpu_count(), "load_average": os.getloadavg()[0]}
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
