"""Time to first byte and to first token of one long streaming chat request.

A prompt of ``--prompt-tokens`` tokens (about 8,000 by default: minutes of prefill on a small
CPU) goes to ``inglenook serve`` and, with ``--llama-server PATH``, to llama.cpp's own server
on the same model, context and thread count; with ``--baseline REV`` also to the engine as it
was at git revision ``REV`` (before and after, side by side). For each server it measures,
from the moment the request is sent: the status line and headers (``headers_s``), the first
byte of the body (``first_byte_s``: a comment, an opening event) and the first content token
(``first_token_s``), and the server's CPU seconds for the request (``server_cpu_s``). Every
round's prompt starts differently, so no prefix cache helps. Prints JSON; rounds are
interleaved (each starting with the next server) and each figure is the median over them.

    python benchmarks/first_byte.py [--prompt-tokens 8000] [--llama-server PATH] [--baseline REV] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

from batching import cpu_seconds, extract_revision, free_port, wait_ready  # benchmarks/ is on sys.path when run as a script
from inglenook.engine.core.engine import Engine
from inglenook.engine.models.starter import find_starter_model
from inglenook.engine.store.paths import Paths

CONTEXT = 8192  # SmolLM2's training context: room for an 8,000-token prompt and a short answer
ANSWER_TOKENS = 8
# SmolLM2's end-of-text tokens: banned, so a first content token always comes (after a long
# list of words the model may otherwise end its answer at once).
BANNED = {"0": -100, "1": -100, "2": -100}
# Varied words, so the tokenizer does not merge long repeats: about 1.23 tokens per word.
WORDS = ("river", "lantern", "copper", "meadow", "thistle", "harbour", "ember", "quarry", "willow", "saddle",
         "orchard", "granite", "falcon", "pebble", "timber", "velvet", "cobalt", "juniper", "marble", "tundra")


def prompt_text(tokens: int, round_no: int) -> str:
    """About ``tokens`` tokens of text, opening with the round's number (no cache hit)."""
    words = [WORDS[(i * 7 + i // len(WORDS)) % len(WORDS)] for i in range(int(tokens / 1.23))]
    return f"Round {round_no}. Summarise this list in one word: " + " ".join(words)


def start_ours(home: Path, threads: int, source: Path | None = None) -> tuple[str, subprocess.Popen]:
    """``inglenook serve`` of this checkout (or of the package tree under ``source``): one
    sequence of ``CONTEXT`` tokens, no prompt-state cache."""
    home.mkdir(parents=True, exist_ok=True)
    with Engine(Paths.under(home)) as engine:
        engine.update_settings(parallel_sequences=1, context_size=CONTEXT, cache_budget_mb=0, threads=threads)
    port = free_port()
    env = {**os.environ, "INGLENOOK_HOME": str(home)}
    if source is not None:
        env["PYTHONPATH"] = str(source)  # found before the editable install's mapping
    process = subprocess.Popen([sys.executable, "-m", "inglenook", "serve", "--port", str(port)], env=env,
                               cwd=source, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return f"http://127.0.0.1:{port}", process


def start_llama_server(binary: Path, model: Path, threads: int) -> tuple[str, subprocess.Popen]:
    """llama.cpp's server as the engine runs by default on a CPU, which is llama-server's own
    default there too: an f16 KV cache with flash attention. One slot, no prompt cache in RAM:
    every round reads the whole prompt."""
    port = free_port()
    process = subprocess.Popen(
        [str(binary), "-m", str(model), "--port", str(port), "-np", "1", "-c", str(CONTEXT), "-t", str(threads),
         "-ngl", "0", "-fa", "on", "--no-webui", "--cache-ram", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    return f"http://127.0.0.1:{port}", process


def measure(url: str, model: str, text: str, process: subprocess.Popen) -> dict[str, float]:
    """Seconds from sending the request to its headers, its first body byte and its first
    content token; the server's CPU seconds for the request (all its threads: on a shared
    machine wall times wander, the work done does not); the prompt's length as it counted it."""
    cpu_before = cpu_seconds(process)
    body = {"model": model, "stream": True, "temperature": 0, "max_tokens": ANSWER_TOKENS, "logit_bias": BANNED,
            "stream_options": {"include_usage": True}, "messages": [{"role": "user", "content": text}]}
    sent = time.perf_counter()
    first_byte = first_token = None
    prompt_tokens = 0
    buffer = b""
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=3600) as response:
        headers = time.perf_counter()
        response.raise_for_status()
        for data in response.iter_raw():
            first_byte = first_byte or time.perf_counter()
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if not line.startswith(b"data: {"):
                    continue
                chunk = json.loads(line[6:])
                if first_token is None and chunk.get("choices") and chunk["choices"][0].get("delta", {}).get("content"):
                    first_token = time.perf_counter()
                if chunk.get("usage"):
                    prompt_tokens = chunk["usage"]["prompt_tokens"]
    if first_token is None or first_byte is None:
        raise SystemExit(f"{url} sent no content token")
    return {"headers_s": round(headers - sent, 3), "first_byte_s": round(first_byte - sent, 3),
            "first_token_s": round(first_token - sent, 3), "server_cpu_s": round(cpu_seconds(process) - cpu_before, 2),
            "prompt_tokens": prompt_tokens}


def median_round(rows: list[dict[str, float]]) -> dict[str, object]:
    """Each figure's median over the rounds, with every round's time to first token."""
    keys = rows[0].keys()
    return {**{key: statistics.median(row[key] for row in rows) for key in keys},
            "rounds_first_token_s": [row["first_token_s"] for row in rows]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompt-tokens", type=int, default=8000, help="about this many prompt tokens")
    parser.add_argument("--llama-server", type=Path)
    parser.add_argument("--baseline", metavar="REV", help="also serve the engine as of this git revision")
    parser.add_argument("--threads", type=int, default=psutil.cpu_count(logical=False) or 2)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    if args.prompt_tokens + ANSWER_TOKENS + 64 > CONTEXT:
        parser.error(f"--prompt-tokens must leave room for the answer in the context of {CONTEXT}")
    # A SIGTERM (a timeout) still runs the finally below: no server is left behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    model_path = find_starter_model()
    servers: dict[str, tuple[str, subprocess.Popen, str]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        source = extract_revision(args.baseline, Path(scratch) / "baseline") if args.baseline else None
        servers["inglenook"] = (*start_ours(Path(scratch) / "home", args.threads), "smollm2")
        if source is not None:
            servers["inglenook_baseline"] = (*start_ours(Path(scratch) / "home-baseline", args.threads, source), "smollm2")
        if args.llama_server:
            servers["llama_server"] = (*start_llama_server(args.llama_server, model_path, args.threads), "model")
        try:
            for url, process, model in servers.values():
                wait_ready(url, process)
                measure(url, model, "Hello.", process)  # warm up: the model is loaded and paged in
            rows: dict[str, list[dict[str, float]]] = {name: [] for name in servers}
            names = list(servers)
            for round_no in range(args.rounds):
                # Interleaved, so machine noise hits every server alike; each round starts with
                # the next server, so none always goes first.
                for name in names[round_no % len(names):] + names[:round_no % len(names)]:
                    url, process, model = servers[name]
                    rows[name].append(measure(url, model, prompt_text(args.prompt_tokens, round_no), process))
                    print(json.dumps({name: rows[name][-1]}), file=sys.stderr, flush=True)
        finally:
            for _url, process, _model in servers.values():
                process.terminate()
                process.wait(timeout=30)
    result: dict[str, object] = {"model": model_path.name, "prompt_tokens_asked": args.prompt_tokens,
                                 "threads": args.threads, "rounds": args.rounds, "baseline": args.baseline}
    result.update({name: median_round(server_rows) for name, server_rows in rows.items()})
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
