"""Decode and prompt reading through the servers, ours beside llama-server, each with its defaults.

``benchmarks/speed.py`` compares the engine with ``llama-bench`` (no server, no sampling);
this is what a person pointing a client at either server sees. Both servers run from the
same vendored llama.cpp, with the same context and threads and otherwise their own
defaults (llama-server: flash attention "auto", a unified KV pool for its slots, its
sampler chain; ours: the engine's defaults). Each request is a ``/v1/completions`` call
whose ``timings`` (llama-server's field, which ours also returns) say how fast the prompt
was read and the answer written:

- ``pp512 dD``: a 512-token prompt read after ``D`` tokens already cached (the depth is
  sent first, as its own request, so both servers' prefix caches hold it);
- ``tg128 dD``: 128 tokens written after a ``D``-token prompt, end-of-text made impossible
  with ``logit_bias`` so every answer is full length; each server's default sampling.

Rounds alternate the servers at each depth (each configuration once per round: both servers get
the depth, then read the prompt one after the other, then write the answer in the other order;
which server goes first swaps every round) and medians are reported, so machine noise hits both
alike; each one's best round is reported too (``tok_s_best``, ``ratios_best``: the speed with
the least outside work in it, on a shared machine whose speed swings from one run to the next),
and ``ratios_paired``, the median of each round's own ratio (``paired.py``), with the first and
third quartiles of those ratios (``ratios_paired_quartiles``) and every round's speed
(``tok_s_rounds``): how far single rounds strayed. Prints JSON.

    python benchmarks/server_speed.py --llama-server "$(python scripts/llama_build.py llama-server)" \\
        [--model PATH ...] [--depths 0,4096] [--rounds 3] [--threads N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import httpx
from kv_quality import default_models  # benchmarks/ is on sys.path when run as a script
from lengths import start_llama_server, start_ours
from paired import Pairs, paired_fields

from inglenook.engine.base.gguf import read_gguf
from inglenook.engine.runtime.native import physical_cores

FILLER = "The river ran past the mill and under the old stone bridge toward the sea. "
PP, TG = 512, 128


def end_tokens(model_path: Path) -> dict[str, float]:
    """``logit_bias`` that rules out every end-of-generation token of the model."""
    special = read_gguf(model_path).special_tokens
    return {str(token): -100.0 for role, (token, _) in special.items() if role in ("eos", "eot", "eom") and token >= 0}


def count_tokens(client: httpx.Client, url: str, model: str, text: str) -> int:
    """The prompt's length in tokens, as the server counts it (one token of answer)."""
    body = {"model": model, "prompt": text, "max_tokens": 1, "temperature": 0}
    return int(client.post(f"{url}/completions", json=body).json()["usage"]["prompt_tokens"])


# Tokens per FILLER sentence, per server and model: measured once, not before every request.
# Cleared for each model file: llama-server always calls its model "model", and a later
# server may get an earlier one's port.
_FILLER_TOKENS: dict[tuple[str, str], float] = {}


def text_of_about(client: httpx.Client, url: str, model: str, tokens: int, head: str) -> str:
    """``head`` then filler, cut to about ``tokens`` tokens (measured, not guessed)."""
    unit = _FILLER_TOKENS.get((url, model))
    if unit is None:
        unit = _FILLER_TOKENS[(url, model)] = count_tokens(client, url, model, FILLER * 20) / 20
    return head + FILLER * max(1, round(tokens / unit))


def completion(client: httpx.Client, url: str, model: str, prompt: str, max_tokens: int, bias: dict[str, float],
               seed: int) -> dict:
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "logit_bias": bias, "seed": seed}
    response = client.post(f"{url}/completions", json=body)
    response.raise_for_status()
    return response.json()


def fill_depth(client: httpx.Client, url: str, model: str, depth: int, bias: dict[str, float], round_no: int,
               name: str) -> str:
    """A ``depth``-token prompt, sent once so the server's prefix cache holds it; the prompt."""
    # Each round's own first words: nothing cached from an earlier round shortens it.
    head = f"Round {round_no} at depth {depth}, {name}. "
    if not depth:
        return head
    base = text_of_about(client, url, model, depth, head)
    completion(client, url, model, base, 1, bias, round_no)
    return base


def measure_pp(client: httpx.Client, url: str, model: str, base: str, depth: int, bias: dict[str, float],
               round_no: int, samples: dict[str, list[float]], name: str) -> None:
    more = text_of_about(client, url, model, PP, "")
    timings = completion(client, url, model, base + more, 1, bias, round_no)["timings"]
    samples[f"pp{PP} d{depth} | {name}"].append(timings["prompt_n"] / timings["prompt_ms"] * 1000)


def measure_tg(client: httpx.Client, url: str, model: str, base: str, depth: int, bias: dict[str, float],
               round_no: int, samples: dict[str, list[float]], name: str) -> None:
    decode = completion(client, url, model, base + f" Round {round_no} again.", TG, bias, round_no)
    assert decode["usage"]["completion_tokens"] == TG, decode["usage"]
    timings = decode["timings"]
    samples[f"tg{TG} d{depth} | {name}"].append(timings["predicted_n"] / timings["predicted_ms"] * 1000)


def measure_depth(client: httpx.Client, servers: list[tuple[str, str, str]], depth: int, bias: dict[str, float],
                  round_no: int, samples: dict[str, list[float]]) -> None:
    """One round at ``depth``: both servers get the depth first, then each test runs on both
    back to back, A B for prompt reading and B A for decode (the first server alternating
    from round to round), so the two sides of a pair are seconds apart and a steady drift
    falls on both alike."""
    order = servers if round_no % 2 == 0 else servers[::-1]
    bases = {name: fill_depth(client, url, model, depth, bias, round_no, name) for url, model, name in order}
    for url, model, name in order:
        measure_pp(client, url, model, bases[name], depth, bias, round_no, samples, name)
    for url, model, name in order[::-1]:
        measure_tg(client, url, model, bases[name], depth, bias, round_no, samples, name)


def measure_model(path: Path, args: argparse.Namespace) -> dict:
    depths = [int(d) for d in args.depths.split(",")]
    context = max(depths) + PP + TG + 256
    bias = end_tokens(path)
    _FILLER_TOKENS.clear()
    samples: dict[str, list[float]] = defaultdict(list)
    with tempfile.TemporaryDirectory() as home:
        ours, ours_url, ours_model = start_ours(path, home, context, args.threads)
        theirs, theirs_url, theirs_model = start_llama_server(str(args.llama_server), path, context, args.threads)
        try:
            servers = [(ours_url, ours_model, "ours"), (theirs_url, theirs_model, "llama-server")]
            with httpx.Client(timeout=1800.0) as client:
                for round_no in range(args.rounds):
                    for depth in depths:
                        measure_depth(client, servers, depth, bias, round_no, samples)
        finally:
            for process in (ours, theirs):
                process.terminate()
                process.wait(timeout=30)
    medians = {key: round(statistics.median(values), 2) for key, values in samples.items()}
    best = {key: round(max(values), 2) for key, values in samples.items()}
    return {"model": path.name, "context": context, "tok_s": medians, "ratios": ours_over_theirs(medians),
            "tok_s_best": best, "ratios_best": ours_over_theirs(best), **paired_fields(pairs(samples), samples)}


def ours_over_theirs(speeds: dict[str, float]) -> dict[str, float]:
    ratios = {}
    for key, value in speeds.items():
        test, name = key.split(" | ")
        if name == "ours" and speeds.get(f"{test} | llama-server"):
            ratios[f"{test}: ours / llama-server"] = round(value / speeds[f"{test} | llama-server"], 3)
    return ratios


def pairs(samples: dict[str, list[float]]) -> Pairs:
    """Per test, ours beside llama-server, round by round (``paired.py``)."""
    out: Pairs = {}
    for key, values in samples.items():
        test, name = key.split(" | ")
        theirs = samples.get(f"{test} | llama-server")
        if name == "ours" and theirs:
            out[f"{test}: ours / llama-server"] = (values, [theirs])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, action="append")
    parser.add_argument("--depths", default="0,4096")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=physical_cores())
    parser.add_argument("--llama-server", type=Path, required=True)
    args = parser.parse_args()
    results = [measure_model(path, args) for path in args.model or default_models()]
    json.dump({"threads": args.threads, "rounds": args.rounds, "results": results}, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
