"""The price maths: API-equivalent cost from recorded tokens (cached input at its own price,
reasoning billed as output), the machine's own cost, and a price table that refuses bad
entries with the field named."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from inglenook.engine.base.errors import InvalidRequest
from inglenook.engine.store.settings import Settings
from inglenook.engine.store.store import Store
from inglenook.engine.usage.pricing import DEFAULT_PRICES, MachineCost, Price, price_table, validated_prices
from inglenook.engine.usage.summary import UsageSummary
from inglenook.engine.usage.usage import TokenCounts


def test_cached_input_has_its_own_price_and_reasoning_is_output() -> None:
    price = Price("X", input=2.0, cached_input=0.2, output=10.0)
    # 1M prompt tokens of which 600k cached; 100k generated, 40k of them reasoning.
    counts = TokenCounts(requests=1, prompt_tokens=1_000_000, cached_tokens=600_000,
                         completion_tokens=100_000, reasoning_tokens=40_000)
    assert price.cost(counts) == pytest.approx(0.4 * 2.0 + 0.6 * 0.2 + 0.1 * 10.0)
    without_reasoning = TokenCounts(1, 1_000_000, 600_000, 60_000, 0)
    assert price.cost(counts) - price.cost(without_reasoning) == pytest.approx(0.04 * 10.0)


def test_the_machine_costs_its_energy_and_its_hardware_over_time() -> None:
    machine = MachineCost(watts=200, price_per_kwh=0.30, hardware_price=1826.25, hardware_months=12)
    cost = machine.cost(busy_s=3600 * 5, days=7)  # five busy hours in a week
    assert cost["energy_kwh"] == pytest.approx(1.0)
    assert cost["energy_cost"] == pytest.approx(0.30)
    assert cost["hardware_cost"] == pytest.approx(1826.25 / 365.25 * 7)
    assert cost["total"] == pytest.approx(cost["energy_cost"] + cost["hardware_cost"])


@pytest.mark.parametrize("field,value", [("input", -1), ("cached_input", "abc"), ("output", float("nan")),
                                         ("output", True), ("input", None)])
def test_a_bad_price_is_refused_with_its_field_named(field: str, value: object) -> None:
    entry = {"name": "Mine", "input": 1, "cached_input": 0.1, "output": 2, field: value}
    good = {"name": "Other", "input": 1, "cached_input": 0.1, "output": 2}
    with pytest.raises(InvalidRequest) as refused:
        validated_prices([good, entry])
    assert refused.value.param == f"prices[1].{field}"


def test_names_are_required_and_unique_and_text_numbers_are_read() -> None:
    with pytest.raises(InvalidRequest) as refused:
        validated_prices([{"name": " ", "input": 1, "cached_input": 1, "output": 1}])
    assert refused.value.param == "prices[0].name"
    with pytest.raises(InvalidRequest):
        validated_prices([{"name": "a", "input": 1, "cached_input": 1, "output": 1}] * 2)
    assert validated_prices([{"name": "a", "input": "1.5", "cached_input": "0", "output": " 3 "}])[0].input == 1.5
    with pytest.raises(InvalidRequest) as refused:
        MachineCost.validated(-5, 0.3)
    assert refused.value.param == "watts"
    with pytest.raises(InvalidRequest):
        MachineCost.validated(100, 0.3, 1000, 0)


def test_defaults_are_dated_and_a_saved_table_replaces_them() -> None:
    assert price_table(None) == list(DEFAULT_PRICES)
    assert all(p.read_on and p.output >= p.input >= p.cached_input for p in DEFAULT_PRICES)
    mine = price_table([{"name": "Mine", "input": 1, "cached_input": 0.5, "output": 4}])
    assert [p.name for p in mine] == ["Mine"]


def test_a_week_of_usage_priced_from_the_store(tmp_path: Path) -> None:
    store = Store(tmp_path / "inglenook.db")
    now = time.time()
    try:
        with store.writing() as conn:
            for back in range(7):
                at = now - back * 86400
                conn.execute(
                    "INSERT INTO usage_events (at, day, model_id, client, prompt_tokens, cached_tokens, "
                    "completion_tokens, reasoning_tokens, duration_s) VALUES (?, ?, 'm', 'window', 100000, 50000, "
                    "10000, 0, 360)", [at, time.strftime("%Y-%m-%d", time.localtime(at))])
        settings = Settings(usage_prices=[{"name": "X", "input": 2, "cached_input": 0.2, "output": 10}],
                            machine_watts=100, electricity_price_per_kwh=0.5)
        summary = UsageSummary.read(store, settings, days=7, now=now).as_dict()
    finally:
        store.close()
    assert summary["totals"]["prompt_tokens"] == 700_000 and len(summary["by_day"]) == 7
    api = summary["cost"]["apis"][0]
    assert api["cost"] == pytest.approx(7 * (0.05 * 2 + 0.05 * 0.2 + 0.01 * 10))
    machine = summary["cost"]["machine"]
    assert machine["energy_kwh"] == pytest.approx(100 * 7 * 360 / 3600 / 1000)
    assert machine["total"] == pytest.approx(machine["energy_kwh"] * 0.5)
