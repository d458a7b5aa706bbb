"""``inglenook lab``: compare quantization variants of a model in the terminal.

The same measurements as the Quantization page in Settings; a table (or JSON) on stdout,
a progress bar on stderr, Ctrl-C cancels the run cleanly.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from typing import Any

from inglenook.cli.terminal import print_table
from inglenook.engine import Paths


def add_commands(commands: Any) -> None:
    lab = commands.add_parser(
        "lab",
        help="compare a model's quantization variants on this machine",
        description="Measure size, memory, speed, perplexity and KL divergence (against the most precise "
        "variant installed) for quantization variants of one model. Results are saved; the Quantization "
        "page in Settings shows them too.",
    )
    lab.add_argument("models", metavar="MODEL_ID", nargs="+", help="variants to measure (ids from `inglenook list`)")
    lab.add_argument("--all", action="store_true", help="measure every installed variant of the model")
    lab.add_argument("--create", metavar="QUANTS", default="",
                     help="first create these variants from the most precise file, e.g. Q8_0,Q4_0")
    lab.add_argument("--eval-file", metavar="PATH", help="evaluation text (default: the bundled essays)")
    lab.add_argument("--window", type=int, default=512, help="tokens per evaluation window (default 512)")
    lab.add_argument("--max-tokens", type=int, help="evaluate only the first N tokens of the text")
    lab.add_argument("--backend", choices=("auto", "numpy", "torch"), default="auto",
                     help="array library for the math (auto: torch when installed)")
    lab.add_argument("--saved", action="store_true", help="only show the last saved measurements; measure nothing")
    lab.add_argument("--json", action="store_true", help="print JSON instead of a table")
    lab.set_defaults(handler=cmd_lab)


def cmd_lab(args: argparse.Namespace, paths: Paths) -> int:
    from inglenook.engine import Engine, EvalText, MeasureConfig, QuantLab  # noqa: PLC0415 — keeps --help fast

    with Engine(paths, crash_guard=args.crash_guard) as engine:
        lab = QuantLab.for_engine(engine)
        eval_text = EvalText.load(args.eval_file)
        config = MeasureConfig(window=args.window, max_eval_tokens=args.max_tokens, backend=args.backend)
        group = lab.variants(args.models[0])
        model_ids = [v.id for v in group.variants] if args.all else args.models
        if args.saved:
            results = [r for r in lab.saved(args.models[0], eval_text, config)
                       if args.all or r.model_id in {engine.resolve_model(m).id for m in model_ids}]
            recommendation = lab.recommendation(results)
            _print(args, results, recommendation, group.reference.id, notes=[group.hub_note] if group.hub_note else [])
            return 0
        bar = ProgressBar(sys.stderr)
        create = [q.strip() for q in args.create.split(",") if q.strip()]
        run = lab.start(model_ids, create=create, eval_text=eval_text, config=config, on_progress=bar.update)
        try:
            report = run.wait()
        except KeyboardInterrupt:
            run.cancel()
            report = run.wait()
        bar.close()
        if report.error is not None:
            raise report.error
        if report.cancelled:
            print("inglenook: lab run cancelled", file=sys.stderr)
            return 130
        notes = [f"created {', '.join(report.created)}"] if report.created else []
        if group.hub_note:
            notes.append(f"hub: {group.hub_note}")
        _print(args, report.results, report.recommendation, report.reference_id, notes)
        return 0


class ProgressBar:
    """One self-rewriting line on a terminal; plain lines when stderr is a file."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.last_message = ""

    def update(self, progress: Any) -> None:
        if self.tty:
            width = max(10, min(40, shutil.get_terminal_size().columns - 60))
            filled = int(progress.fraction * width)
            line = f"\r[{'#' * filled}{'.' * (width - filled)}] {progress.fraction * 100:3.0f}%  {progress.message}"
            self.stream.write(line[: shutil.get_terminal_size().columns - 1].ljust(79)[:200])
            self.stream.flush()
        elif progress.message != self.last_message:
            self.stream.write(f"{progress.fraction * 100:3.0f}%  {progress.message}\n")
            self.stream.flush()
        self.last_message = progress.message

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _fmt(value: float | None, pattern: str) -> str:
    return "-" if value is None else format(value, pattern)


def _print(args: argparse.Namespace, results: list, recommendation: Any, reference_id: str | None, notes: list[str]) -> None:
    if args.json:
        payload = {
            "reference": reference_id,
            "results": [r.to_json() | {"stale": r.stale} for r in results],
            "recommendation": None if recommendation is None else {"model_id": recommendation.model_id, "line": recommendation.line},
            "notes": notes,
        }
        print(json.dumps(payload, indent=2))
        return
    if not results:
        print("No measurements yet. Run `inglenook lab MODEL_ID` without --saved to measure.")
        return
    header = ("QUANT", "SIZE", "BPW", "LOAD", "RAM", "PP t/s", "TG t/s", "PPL", "KLD", "KLD p99", "SAME TOP", "")
    rows = [header]
    for r in sorted(results, key=lambda r: -r.size_bytes):
        note = "reference" if r.is_reference else ""
        if r.stale:
            note = f"stale: {r.stale_reason}"
        rows.append((
            r.quantization, f"{r.size_bytes / 1e6:.0f} MB", f"{r.bits_per_weight:.2f}", _fmt(r.load_s, ".2f") + " s",
            "-" if r.ram_bytes is None else f"{r.ram_bytes / 1e6:.0f} MB",
            _fmt(r.prompt_tps, ".0f"), _fmt(r.decode_tps, ".1f"), _fmt(r.perplexity, ".3f"),
            _fmt(r.kld_mean, ".4f"), _fmt(r.kld_p99, ".4f"),
            "-" if r.same_top is None else f"{r.same_top * 100:.1f}%", note,
        ))
    print_table(rows)
    if recommendation is not None:
        print(f"\nRecommended: {recommendation.line}")
    for note in notes:
        print(f"Note: {note}")
