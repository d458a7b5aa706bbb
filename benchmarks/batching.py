"""Batching through the real HTTP API: aggregate decode tok/s at 1, 2, 4 and 8 streams.

Starts ``inglenook serve`` (8 sequences) and, with ``--llama-server PATH`` (``python
scripts/llama_build.py llama-server`` builds it from the same CMake tree as the engine's
library), llama.cpp's own server with ``-np 8``; sends the same streaming chat requests to
both, interleaved level by level (temperature 0, 128 tokens each, end-of-text banned so
every stream runs its full length). Prints JSON with the ratios to one stream.

With ``--baseline REV`` a third server runs the engine as it was at git revision ``REV``
(extracted to a temporary folder), under the same load in the same run: before and after,
side by side. Each row also gives the server process's CPU seconds per generated token
(all its threads), which shows what HTTP and Python cost beside decoding.

    python benchmarks/batching.py [--llama-server PATH] [--baseline REV] [--tokens 128] [--levels 1,2,4,8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

from inglenook.engine.core.engine import Engine
from inglenook.engine.models.starter import find_starter_model
from inglenook.engine.store.paths import Paths

TOPICS = ["foxes", "rivers", "bread", "clocks", "owls", "ships", "glass", "snow"]
SEQUENCES = 8
CONTEXT_PER_SEQUENCE = 1024
# SmolLM2's end-of-text tokens: banned, so every stream decodes exactly --tokens tokens.
BANNED = {"0": -100, "1": -100, "2": -100}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_ready(url: str, process: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server at {url} exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"the server at {url} did not become ready")


def start_ours(home: Path, source: Path | None = None) -> tuple[str, subprocess.Popen]:
    """``inglenook serve`` of this checkout, or of the package tree under ``source``."""
    home.mkdir(parents=True, exist_ok=True)
    with Engine(Paths.under(home)) as engine:
        engine.update_settings(parallel_sequences=SEQUENCES, context_size=CONTEXT_PER_SEQUENCE, cache_budget_mb=0)
    port = free_port()
    env = {**os.environ, "INGLENOOK_HOME": str(home)}
    if source is not None:
        env["PYTHONPATH"] = str(source)  # found before the editable install's mapping
    # -m puts the working folder first on sys.path: run the baseline from its own tree.
    process = subprocess.Popen([sys.executable, "-m", "inglenook", "serve", "--port", str(port)], env=env,
                               cwd=source, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return f"http://127.0.0.1:{port}", process


def start_llama_server(binary: Path, model: Path, threads: int) -> tuple[str, subprocess.Popen]:
    port = free_port()
    process = subprocess.Popen(
        [str(binary), "-m", str(model), "--port", str(port), "-np", str(SEQUENCES),
         "-c", str(SEQUENCES * CONTEXT_PER_SEQUENCE), "-t", str(threads), "-ngl", "0", "-fa", "off",
         "--no-webui"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    return f"http://127.0.0.1:{port}", process


def extract_revision(revision: str, into: Path) -> Path:
    """A folder from which ``import inglenook`` gives the package as it was at ``revision``."""
    repo = Path(__file__).resolve().parent.parent
    tree = into / "tree"
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(repo), "archive", revision, "inglenook", "engine", "app", "resources"]
                             + (["cli"] if _has_path(repo, revision, "cli") else []),
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    if (tree / "inglenook" / "engine").exists():
        return tree  # inglenook/ links to the folders beside it (the layout since the CLI moved)
    # Before that, inglenook/ held the CLI and the editable install mapped engine/ and app/.
    package = into / "installed" / "inglenook"
    package.parent.mkdir(parents=True)
    (tree / "inglenook").rename(package)
    for name in ("engine", "app", "resources"):
        (tree / name).rename(package / name)
    return package.parent


def _has_path(repo: Path, revision: str, path: str) -> bool:
    listed = subprocess.run(["git", "-C", str(repo), "ls-tree", "--name-only", revision, path],
                            capture_output=True, text=True, check=True).stdout
    return bool(listed.strip())


def cpu_seconds(process: subprocess.Popen) -> float:
    times = psutil.Process(process.pid).cpu_times()
    return times.user + times.system


def one_stream(url: str, model: str, topic: str, tokens: int, out: list[dict]) -> None:
    body = {
        "model": model, "stream": True, "temperature": 0, "max_tokens": tokens, "logit_bias": BANNED,
        "messages": [{"role": "user", "content": f"Write a long story about {topic}."}],
    }
    sent = time.perf_counter()
    first = None
    pieces = 0
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=600) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("choices") and chunk["choices"][0].get("delta", {}).get("content"):
                pieces += 1
                if first is None:
                    first = time.perf_counter()
    out.append({"ttft_s": (first or sent) - sent, "ended": time.perf_counter(), "pieces": pieces})


def load(url: str, model: str, streams: int, tokens: int, process: subprocess.Popen | None = None) -> dict[str, float]:
    results: list[dict] = []
    cpu_before = cpu_seconds(process) if process is not None else 0.0
    threads = [threading.Thread(target=one_stream, args=(url, model, TOPICS[i % len(TOPICS)], tokens, results))
               for i in range(streams)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = max(r["ended"] for r in results) - started
    row = {"aggregate_tok_s": round(streams * tokens / wall, 1), "wall_s": round(wall, 2),
           "mean_ttft_s": round(sum(r["ttft_s"] for r in results) / len(results), 3)}
    if process is not None:
        row["cpu_ms_per_token"] = round(1000 * (cpu_seconds(process) - cpu_before) / (streams * tokens), 2)
        row["server_threads"] = psutil.Process(process.pid).num_threads()
    return row


def median_run(rows: list[dict[str, float]]) -> dict[str, float]:
    """The round with the median aggregate speed, with every round's speed beside it."""
    ranked = sorted(rows, key=lambda row: row["aggregate_tok_s"])
    return {**ranked[len(ranked) // 2], "rounds_tok_s": [row["aggregate_tok_s"] for row in rows]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llama-server", type=Path)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--levels", default="1,2,4,8")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--baseline", metavar="REV", help="also serve the engine as of this git revision")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per level; each row is the median round")
    args = parser.parse_args()
    # A SIGTERM (a timeout) still runs the finally below: no server is left behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    levels = [int(x) for x in args.levels.split(",")]
    model_path = find_starter_model()
    servers = {}
    with tempfile.TemporaryDirectory() as scratch:
        # The baseline is extracted before any server starts: a bad revision leaves none behind.
        source = extract_revision(args.baseline, Path(scratch) / "baseline") if args.baseline else None
        servers["inglenook"] = (*start_ours(Path(scratch) / "home"), "smollm2")
        if source is not None:
            servers["inglenook_baseline"] = (*start_ours(Path(scratch) / "home-baseline", source), "smollm2")
        if args.llama_server:
            servers["llama_server"] = (*start_llama_server(args.llama_server, model_path, args.threads), "model")
        try:
            for url, process, model in servers.values():
                wait_ready(url, process)
                load(url, model, 1, 8)  # warm up: the model is loaded and paged in
            result: dict[str, object] = {"model": model_path.name, "tokens_per_stream": args.tokens,
                                         "sequences": SEQUENCES, "baseline": args.baseline}
            table: dict[str, dict[str, dict[str, float]]] = {name: {} for name in servers}
            for level in levels:
                runs: dict[str, list[dict[str, float]]] = {name: [] for name in servers}
                for _ in range(args.rounds):  # interleaved, so machine noise hits every server alike
                    for name, (url, process, model) in servers.items():
                        runs[name].append(load(url, model, level, args.tokens, process))
                        print(json.dumps({name: {level: runs[name][-1]}}), file=sys.stderr, flush=True)
                for name, rows in runs.items():
                    table[name][str(level)] = median_run(rows)
            for name, rows in table.items():
                base = rows[str(levels[0])]["aggregate_tok_s"]
                for row in rows.values():
                    row["speedup_vs_1"] = round(row["aggregate_tok_s"] / base, 2)
                result[name] = rows
            if "llama_server" in table:
                result["ours_vs_llama_server"] = {
                    level: round(table["inglenook"][level]["aggregate_tok_s"] / table["llama_server"][level]["aggregate_tok_s"], 3)
                    for level in table["inglenook"]
                }
            if "inglenook_baseline" in table:
                result["ours_vs_baseline"] = {
                    level: round(table["inglenook"][level]["aggregate_tok_s"] / table["inglenook_baseline"][level]["aggregate_tok_s"], 3)
                    for level in table["inglenook"]
                }
        finally:
            for _url, process, _model in servers.values():
                process.terminate()
                process.wait(timeout=30)
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
