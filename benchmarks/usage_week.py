"""A week of synthetic usage, priced: what it would have cost on the default metered APIs beside
what this machine cost to run it.

The week (written into a throwaway store, then read back through ``UsageSummary`` exactly as
``GET /v1/usage`` does): per weekday 30 chat turns in the window (1,800-token prompts, 1,500 of
them from the saved conversation state, 350-token answers), 150 requests from a coding agent
(24,000-token prompts with 22,000 cached, 600 tokens out of which 150 reasoning) and 5
background titles; weekends at a third of that. Busy time assumes 400 tokens/s prefill of the
uncached prompt and 25 tokens/s decode (a mid-range GPU box on an 8B model); the machine draws
250 W at $0.30/kWh and cost $2,000 spread over 36 months. Prints JSON.

    python benchmarks/usage_week.py
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from inglenook.engine.store.settings import Settings
from inglenook.engine.store.store import Store
from inglenook.engine.usage.summary import UsageSummary

PREFILL_TPS, DECODE_TPS = 400.0, 25.0
# (client, model, requests per weekday, prompt, cached, completion, reasoning)
DAY = [
    ("window", "qwen3-8b:q4_k_m", 30, 1800, 1500, 350, 0),
    ("api:claude-cli/2.1.197 (external, cli)", "qwen3-8b:q4_k_m", 150, 24000, 22000, 600, 150),
    ("background:title", "qwen3-0.6b:q8_0", 5, 80, 0, 10, 0),
]


def busy_s(prompt: int, cached: int, completion: int) -> float:
    return (prompt - cached) / PREFILL_TPS + completion / DECODE_TPS


def write_week(store: Store, now: float) -> None:
    rows = []
    for back in range(7):
        at = now - back * 86400
        weekend = time.localtime(at).tm_wday >= 5
        for client, model, per_day, prompt, cached, completion, reasoning in DAY:
            for _ in range(round(per_day / 3) if weekend else per_day):
                rows.append([at, time.strftime("%Y-%m-%d", time.localtime(at)), model, client, prompt, cached,
                             completion, reasoning, busy_s(prompt, cached, completion)])
    with store.writing() as conn:
        conn.executemany(
            "INSERT INTO usage_events (at, day, model_id, client, prompt_tokens, cached_tokens, completion_tokens, "
            "reasoning_tokens, duration_s, finish_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'stop')", rows)


def main() -> None:
    settings = Settings(machine_watts=250, electricity_price_per_kwh=0.30, hardware_price=2000, hardware_months=36)
    now = time.time()
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder) / "week.db")
        try:
            write_week(store, now)
            summary = UsageSummary.read(store, settings, days=7, now=now).as_dict()
        finally:
            store.close()
    cost = summary["cost"]
    print(json.dumps({
        "benchmark": "usage_week (synthetic)",
        "totals": summary["totals"],
        "by_client": {row["client"]: row["requests"] for row in summary["by_client"]},
        "would_have_cost_usd": {api["name"]: round(api["cost"], 2) for api in cost["apis"]},
        "prices_read_on": sorted({api["read_on"] for api in cost["apis"]}),
        "machine_usd": {k: round(cost["machine"][k], 2) for k in ("energy_kwh", "energy_cost", "hardware_cost", "total")},
        "busy_hours": round(cost["machine"]["busy_s"] / 3600, 2),
    }, indent=2))


if __name__ == "__main__":
    main()
