"""A box a team shares: concurrent streams per named key, with and without limits, and the
key gate's cost beside an open server, in one run.

One engine (SmolLM2, 8 sequences) behind two servers in this process: an open one, and one
with four named keys (no limits) plus one key limited to 2 streams. Each round sends the
same 8 greedy streams (32 tokens, end of text banned) to the open server, then 2 streams
per key to the keyed one; a last round opens 4 streams at once on the limited key. Prints
JSON: aggregate tok/s, streams held per key at the peak, and every status seen (429s must
come only from the limited key).

    python benchmarks/team_keys.py [--tokens 32] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

from inglenook.engine.api.server import ApiServer
from inglenook.engine.api.shared.keys import ApiKeys, KeyLimits
from inglenook.engine.core.engine import Engine
from inglenook.engine.store.paths import Paths

MODEL = "smollm2-135m-instruct:q4_1"
BANNED = {"0": -100, "1": -100, "2": -100}


def stream(url: str, key: str | None, tokens: int, statuses: Counter, pieces: list[int]) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Tell me about owls."}], "temperature": 0,
            "max_tokens": tokens, "stream": True, "logit_bias": BANNED}
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with httpx.stream("POST", url + "/chat/completions", json=body, headers=headers, timeout=600) as response:
        statuses[response.status_code] += 1
        count = sum(1 for line in response.iter_lines() if line.startswith("data: {") and '"content":"' in line)
    pieces.append(count)


def burst(url: str, keys: list[str | None], tokens: int) -> tuple[float, Counter]:
    statuses: Counter = Counter()
    pieces: list[int] = []
    threads = [threading.Thread(target=stream, args=(url, key, tokens, statuses, pieces)) for key in keys]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(pieces) / (time.perf_counter() - started), statuses


def peak_streams(server: ApiServer, stop: threading.Event, peak: dict[str, int]) -> None:
    while not stop.wait(0.02):
        for name, count in server.active_streams_by_key().items():
            peak[name] = max(peak.get(name, 0), count)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        engine = Engine(Paths.under(Path(folder)))
        engine.update_settings(context_size=512, parallel_sequences=8)
        keys = ApiKeys(engine.store)
        team = [keys.create(name)[1] for name in ("ana", "ben", "cai", "dee")]
        limited = keys.create("intern", KeyLimits(max_streams=2))[1]
        open_tps, keyed_tps = [], []
        statuses: dict[str, Counter] = {"open": Counter(), "team": Counter(), "limited": Counter()}
        peak: dict[str, int] = {}
        with ApiServer(engine, port=0) as open_server, ApiServer(engine, port=0, keys=keys) as keyed:
            burst(open_server.url, [None], 4)  # load the model
            stop = threading.Event()
            watcher = threading.Thread(target=peak_streams, args=(keyed, stop, peak))
            watcher.start()
            for _ in range(args.rounds):
                tps, seen = burst(open_server.url, [None] * 8, args.tokens)
                open_tps.append(tps)
                statuses["open"].update(seen)
                tps, seen = burst(keyed.url, [k for k in team for _ in range(2)], args.tokens)
                keyed_tps.append(tps)
                statuses["team"].update(seen)
            _, seen = burst(keyed.url, [limited] * 4, args.tokens)
            statuses["limited"].update(seen)
            stop.set()
            watcher.join()
        engine.close()
    print(json.dumps({
        "streams_per_round": 8, "tokens": args.tokens, "rounds": args.rounds,
        "open_server_tok_s": [round(x, 1) for x in open_tps],
        "keyed_server_tok_s": [round(x, 1) for x in keyed_tps],
        "keyed_over_open": round(statistics.median(keyed_tps) / statistics.median(open_tps), 2),
        "peak_streams_per_key": peak,
        "statuses": {name: dict(counter) for name, counter in statuses.items()},
    }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
