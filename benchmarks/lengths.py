"""How long unconstrained answers run, ours beside llama-server, on the same prompts.

Client test suites and people alike send chat requests without ``max_tokens`` and with the
server's default sampling. A server whose answers end when the model is done (``stop``)
answers those in a second or two; one whose answers run away to its default cap makes them
wait tens of seconds. For each model, both servers answer ``--runs`` requests spread over
five kinds of prompt (a short instruction, a question, a list, a rewrite, a small piece of
code), each with its own seed and no sampling parameter set, so each server's defaults
apply. Reported per server: the completion lengths (median, p90, max), the share of answers
that hit the cap (``finish_reason: length``) and the wall time. Prints JSON.

``--forced N`` adds N constrained requests per server and model, alternating a forced tool
call (``tool_choice`` naming a function whose arguments are free strings, as clients write
them: no ``maxLength``, extra keys allowed) and a strict ``json_schema`` answer; reported:
their lengths, capped share, share of answers that parse as JSON, and the median seconds
per request.

    python benchmarks/lengths.py --llama-server "$(python scripts/llama_build.py llama-server)" \\
        [--model PATH ...] [--runs 50] [--forced 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from kv_quality import default_models  # benchmarks/ is on sys.path when run as a script
from structured_outputs import free_port, wait_ready

PROMPTS: list[tuple[str, str]] = [
    ("instruction", "Say this is a test"),
    ("question", "What is the capital of France?"),
    ("list", "Give me three tips for sleeping better."),
    ("rewrite", "Rewrite this sentence more politely: give me the report now."),
    ("code", "Write a Python function that adds two numbers."),
]


# Saves the threads setting into the scratch home (serve has no flag for it).
SET_THREADS = ("import sys; from inglenook.engine.store import Settings, Store; from inglenook.engine.store.paths import Paths; "
               "store = Store(Paths.default().ensure().database); Settings.load(store).save(store, threads=int(sys.argv[1]))")


def start_ours(model_path: Path, home: str, context: int, threads: int = 0) -> tuple[subprocess.Popen, str, str]:
    """``inglenook serve`` with the file imported into a scratch home; returns its model id."""
    env = {**os.environ, "INGLENOOK_HOME": home}
    cli = [sys.executable, "-m", "inglenook.cli"]
    imported = subprocess.run([*cli, "import", str(model_path)], env=env, capture_output=True, text=True, check=True)
    if threads:
        subprocess.run([sys.executable, "-c", SET_THREADS, str(threads)], env=env, check=True)
    model_id = next(line.split()[-2] for line in imported.stdout.splitlines()
                    if line.startswith(("imported ", "already there: ")))
    port = free_port()
    process = subprocess.Popen([*cli, "serve", "--port", str(port), "--model", model_id, "--context", str(context)],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, process)
    return process, url + "/v1", model_id


def start_llama_server(binary: str, model_path: Path, context: int, threads: int = 0) -> tuple[subprocess.Popen, str, str]:
    """llama-server with its defaults, apart from the context (the same as ours) and the port."""
    port = free_port()
    extra = ["-t", str(threads)] if threads else []
    process = subprocess.Popen([binary, "-m", str(model_path), "--port", str(port), "-c", str(context), "--jinja", *extra],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, process)
    return process, url + "/v1", "model"


# A tool whose arguments are unbounded strings, as most clients declare them.
FORCED_TOOL = {"type": "function", "function": {
    "name": "send_message",
    "description": "Send a message to a person.",
    "parameters": {"type": "object", "properties": {
        "recipient": {"type": "string", "description": "who gets the message"},
        "text": {"type": "string", "description": "the message"},
    }, "required": ["recipient", "text"]},
}}
STRICT_SCHEMA = {"type": "json_schema", "json_schema": {"name": "note", "strict": True, "schema": {
    "type": "object",
    "properties": {"title": {"type": "string"}, "body": {"type": "string"},
                   "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["title", "body", "tags"], "additionalProperties": False,
}}}


def forced_body(model_name: str, run: int) -> dict:
    """A forced tool call (even runs) or a strict json_schema answer (odd runs)."""
    if run % 2 == 0:
        return {"model": model_name, "seed": run, "tools": [FORCED_TOOL],
                "tool_choice": {"type": "function", "function": {"name": "send_message"}},
                "messages": [{"role": "user", "content": "Tell Alice that the meeting moved to Friday."}]}
    return {"model": model_name, "seed": run, "response_format": STRICT_SCHEMA,
            "messages": [{"role": "user", "content": "Write a short note about watering the plants."}]}


def parses(answer: dict) -> bool:
    message = answer["choices"][0]["message"]
    texts = [c["function"]["arguments"] for c in message.get("tool_calls") or []] or [message.get("content") or ""]
    try:
        for text in texts:
            json.loads(text)
    except ValueError:
        return False
    return True


def ask_forced(base_url: str, model_name: str, runs: int) -> dict:
    lengths: list[int] = []
    seconds: list[float] = []
    capped = valid = 0
    with httpx.Client(base_url=base_url, timeout=3600) as client:
        for run in range(runs):
            started = time.monotonic()
            response = client.post("/chat/completions", json=forced_body(model_name, run))
            seconds.append(time.monotonic() - started)
            response.raise_for_status()
            answer = response.json()
            lengths.append(int(answer["usage"]["completion_tokens"]))
            capped += answer["choices"][0]["finish_reason"] == "length"
            valid += parses(answer)
    return {
        "median": statistics.median(lengths), "max": max(lengths),
        "capped_share": round(capped / runs, 3), "valid_json_share": round(valid / runs, 3),
        "median_s": round(statistics.median(seconds), 2), "max_s": round(max(seconds), 2),
        "lengths": lengths,
    }


def ask_all(base_url: str, model_name: str, runs: int, temperature: float | None = None) -> dict:
    lengths: list[int] = []
    by_kind: dict[str, list[int]] = {kind: [] for kind, _ in PROMPTS}
    capped = 0
    started = time.monotonic()
    with httpx.Client(base_url=base_url, timeout=3600) as client:
        for run in range(runs):
            kind, prompt = PROMPTS[run % len(PROMPTS)]
            # No max_tokens, no temperature: each server's own defaults. A seed per run keeps
            # the comparison repeatable without making every run of a kind the same.
            body = {"model": model_name, "messages": [{"role": "user", "content": prompt}], "seed": run}
            if temperature is not None:  # --temperature: the same for both, to compare one sampler
                body["temperature"] = temperature
            response = client.post("/chat/completions", json=body)
            response.raise_for_status()
            answer = response.json()
            tokens = int(answer["usage"]["completion_tokens"])
            lengths.append(tokens)
            by_kind[kind].append(tokens)
            capped += answer["choices"][0]["finish_reason"] == "length"
    return {
        "median": statistics.median(lengths),
        "p90": sorted(lengths)[int(0.9 * (len(lengths) - 1))],
        "max": max(lengths),
        "capped_share": round(capped / len(lengths), 3),
        "median_by_kind": {kind: statistics.median(values) for kind, values in by_kind.items() if values},
        "wall_s": round(time.monotonic() - started, 1),
        "lengths": lengths,
    }


def ask(url: str, name: str, args: argparse.Namespace) -> dict:
    row = ask_all(url, name, args.runs, args.temperature) if args.runs else {}
    print(json.dumps({"partial": row}), file=sys.stderr, flush=True)  # a long run keeps what it measured
    if args.forced:
        row["forced"] = ask_forced(url, name, args.forced)
    return row


def measure(model_path: Path, args: argparse.Namespace) -> dict:
    rows: dict[str, dict] = {}
    if "ours" in args.servers:
        with tempfile.TemporaryDirectory() as home:
            process, url, name = start_ours(model_path, home, args.context, args.threads)
            try:
                rows["ours"] = ask(url, name, args)
            finally:
                process.terminate()
                process.wait(60)
    if args.llama_server and "llama-server" in args.servers:
        process, url, name = start_llama_server(args.llama_server, model_path, args.context, args.threads)
        try:
            rows["llama-server"] = ask(url, name, args)
        finally:
            process.terminate()
            process.wait(60)
    if not args.runs:
        return {"model": model_path.name, "servers": rows}
    print(f"{model_path.name}: " + ", ".join(f"{k} median {v['median']} capped {v['capped_share']}"
                                             for k, v in rows.items()), file=sys.stderr, flush=True)
    result: dict = {"model": model_path.name, "servers": rows}
    if "ours" in rows and "llama-server" in rows and rows["llama-server"]["median"]:
        result["median_ours_over_llama_server"] = round(rows["ours"]["median"] / rows["llama-server"]["median"], 3)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, action="append", help="GGUF file (default: both test models)")
    parser.add_argument("--runs", type=int, default=50)
    # On a machine shared with other work, one thread each avoids llama.cpp's threads spinning
    # against other processes (the lengths do not depend on it; the times do).
    parser.add_argument("--threads", type=int, default=0, help="threads for both servers (default: their own)")
    parser.add_argument("--temperature", type=float, help="send this temperature (default: none, each server's own)")
    parser.add_argument("--servers", default="ours,llama-server", help="which to measure, comma-separated")
    parser.add_argument("--forced", type=int, default=0, help="forced tool calls and strict json_schema requests")
    parser.add_argument("--context", type=int, default=4096, help="context for both servers")
    parser.add_argument("--llama-server", help="path to llama-server from the same vendored llama.cpp")
    args = parser.parse_args()
    results = [measure(path, args) for path in args.model or default_models()]
    print(json.dumps({"runs": args.runs, "prompts": [p for _, p in PROMPTS], "results": results}, indent=1))


if __name__ == "__main__":
    main()
