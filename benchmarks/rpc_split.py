"""RPC split against local: decode tok/s of one stream, the model on this machine alone vs
split over two `inglenook worker`s on loopback and this machine (`inglenook serve --rpc`).

Both servers run at once and get the same greedy 128-token streaming request in turn (end of
text banned, so every answer has the same length), ``--rounds`` times each, interleaved, so
machine noise falls on both alike. On a busy machine wall-clock speed mostly measures who got
the cores (three processes get more CPU than one), so each row also gives the CPU seconds
all of that setup's processes spent per generated token, which contention does not change
much. Loopback hides the network's latency, so the "per-token
network cost" row is what RPC's protocol costs here; a LAN adds its round trip per token per
worker on top (see docs/scaling.md for the arithmetic).

    python benchmarks/rpc_split.py [--tokens 128] [--rounds 3] [--model ID]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

from inglenook.engine.core.engine import Engine
from inglenook.engine.store.paths import Paths

BANNED = {"0": -100, "1": -100, "2": -100}  # SmolLM2's end-of-text tokens


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(args: list[str], home: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, INGLENOOK_HOME=str(home), PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "inglenook", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env)


def url_of(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    for line in process.stdout:
        found = re.search(r"Serving the OpenAI-compatible API at (\S+)", line)
        if found:
            return found.group(1)
    raise SystemExit("a server did not start")


def cpu_seconds(roots: list[int]) -> float:
    """CPU time (user + system) of these processes and all their children."""
    total = 0.0
    for root in roots:
        try:
            parent = psutil.Process(root)
            for process in [parent, *parent.children(recursive=True)]:
                times = process.cpu_times()
                total += times.user + times.system
        except psutil.Error:
            continue
    return total


def one_stream(url: str, model: str, tokens: int, roots: list[int] | None = None) -> dict[str, float]:
    body = {"model": model, "messages": [{"role": "user", "content": "Tell me about foxes."}], "temperature": 0,
            "max_tokens": tokens, "stream": True, "logit_bias": BANNED}
    cpu_before = cpu_seconds(roots or [])
    asked = time.perf_counter()
    first = last = None
    pieces = 0
    with httpx.stream("POST", url + "/chat/completions", json=body, timeout=600) as response:
        for line in response.iter_lines():
            if line.startswith("data: {") and '"content":"' in line and '"content":""' not in line:
                last = time.perf_counter()
                first = first or last
                pieces += 1
    assert first is not None and last is not None and pieces > 1
    cpu = cpu_seconds(roots or []) - cpu_before
    return {"ttft_s": first - asked, "decode_tok_s": (pieces - 1) / (last - first), "pieces": pieces,
            "cpu_ms_per_token": 1000 * cpu / pieces}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", default="smollm2-135m-instruct:q4_1")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        engine = Engine(Paths.under(home))  # registers the starter model in this home
        engine.update_settings(context_size=1024, kv_cache_type="q8_0")  # flash attention in both, see test_rpc
        engine.close()
        processes: list[subprocess.Popen[str]] = []
        try:
            endpoints = []
            for _ in range(2):
                port = free_port()
                processes.append(start(["worker", "--port", str(port)], home))
                endpoints.append(f"127.0.0.1:{port}")
            time.sleep(3)
            local = start(["serve", "--port", "0", "--model", args.model], home)
            split = start(["serve", "--port", "0", "--model", args.model, "--rpc", ",".join(endpoints)], home)
            processes += [local, split]
            urls = {"local": url_of(local), "rpc_2_workers_loopback": url_of(split)}
            workers = [p.pid for p in processes[:2]]
            roots = {"local": [local.pid], "rpc_2_workers_loopback": [split.pid, *workers]}
            for url in urls.values():
                one_stream(url, args.model, 8)  # load and warm up
            runs: dict[str, list[dict[str, float]]] = {name: [] for name in urls}
            for _ in range(args.rounds):
                for name, url in urls.items():
                    runs[name].append(one_stream(url, args.model, args.tokens, roots[name]))
        finally:
            for process in reversed(processes):
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
    result: dict[str, object] = {"model": args.model, "tokens": args.tokens, "rounds": args.rounds}
    for name, rows in runs.items():
        result[name] = {
            "decode_tok_s_median": round(statistics.median(r["decode_tok_s"] for r in rows), 1),
            "decode_tok_s_all": [round(r["decode_tok_s"], 1) for r in rows],
            "ttft_s_median": round(statistics.median(r["ttft_s"] for r in rows), 3),
            "cpu_ms_per_token_median": round(statistics.median(r["cpu_ms_per_token"] for r in rows), 2),
        }
    local_tps = result["local"]["decode_tok_s_median"]  # type: ignore[index]
    split_tps = result["rpc_2_workers_loopback"]["decode_tok_s_median"]  # type: ignore[index]
    result["split_over_local"] = round(split_tps / local_tps, 2)
    result["rpc_cost_ms_per_token"] = round(1000 / split_tps - 1000 / local_tps, 2)
    local_cpu = result["local"]["cpu_ms_per_token_median"]  # type: ignore[index]
    split_cpu = result["rpc_2_workers_loopback"]["cpu_ms_per_token_median"]  # type: ignore[index]
    result["rpc_cpu_ms_per_token_extra"] = round(split_cpu - local_cpu, 2)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
