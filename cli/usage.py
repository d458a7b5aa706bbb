"""``inglenook usage [--days N] [--json]``: what this machine generated, and what it would have cost."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from inglenook.cli.terminal import print_table
from inglenook.engine import Paths, human_count

if TYPE_CHECKING:  # the usage rooms open the store: imported by the command, not by every command's parser
    from inglenook.engine import TokenCounts, UsageSummary


def add_commands(commands: Any) -> None:
    usage = commands.add_parser(
        "usage",
        help="tokens used per day, model and client, and what they would have cost on metered APIs",
        description="Totals of every generation (window, terminal, API) over the last N days, priced "
        "on the price table's APIs beside this machine's own cost (power and, if set, hardware).",
    )
    usage.add_argument("--days", default="7", metavar="N", help="the last N days, today included (default 7)")
    usage.add_argument("--json", action="store_true", help="print the same JSON as GET /v1/usage")
    usage.set_defaults(handler=cmd_usage, parser=usage)


def cmd_usage(args: argparse.Namespace, paths: Paths) -> int:
    from inglenook.engine import Engine, checked_days  # noqa: PLC0415 — keeps the other commands fast

    try:
        days = checked_days(args.days)
    except ValueError as exc:
        args.parser.error(str(exc))
    with Engine(paths, scan=False, crash_guard=args.crash_guard) as engine:
        summary = engine.usage_summary(days)
    if args.json:
        print(json.dumps(summary.as_dict(), indent=2))
        return 0
    print_summary(summary)
    return 0


def _row(name: str, counts: TokenCounts) -> list[str]:
    return [name, str(counts.requests), human_count(counts.prompt_tokens), human_count(counts.cached_tokens),
            human_count(counts.completion_tokens), human_count(counts.reasoning_tokens)]


HEADER = ["", "REQUESTS", "IN", "CACHED", "OUT", "REASONING"]


def print_summary(summary: UsageSummary) -> None:
    report = summary.report
    total = report.total()
    print(f"Usage from {report.days[0]} to {report.days[-1]} ({summary.days} day(s)):")
    if total.requests == 0:
        print("  nothing generated in this period.")
        return
    print_table([["DAY", *HEADER[1:]], *(_row(day, c) for day, c in report.by_day().items() if c.requests)])
    print()
    print_table([["MODEL", *HEADER[1:]], *(_row(model, c) for model, c in report.by_model().items())])
    print()
    print_table([["CLIENT", *HEADER[1:]], *(_row(client or "(unknown)", c) for client, c in report.by_client().items())])
    print()
    cost = summary.cost()
    rows = [["ON", "WOULD HAVE COST", "PRICES READ"]]
    rows += [[api["name"], f"${api['cost']:.4f}", api["read_on"] or "(yours)"] for api in cost["apis"]]
    machine = cost["machine"]
    rows.append(["this machine", f"${machine['total']:.4f}",
                 f"{machine['energy_kwh']:.3f} kWh at {machine['watts']:g} W"
                 + (f" + hardware over {machine['hardware_months']} months" if machine["hardware_price"] else "")])
    print_table(rows)
