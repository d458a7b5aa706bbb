"""Cost, compared: what recorded tokens would have cost on metered APIs, and what this machine cost.

A price is US dollars per million tokens: fresh input, cached input (a prompt prefix the API
had seen) and output. Reasoning tokens are part of the output tokens we count and are billed
as output, as these APIs bill hidden reasoning. The machine's own cost is the energy of the
time it spent generating (power draw × busy hours × electricity price) plus, optionally,
its price spread over some months; idle power is not counted, so set the draw you measure
under load.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from ..base import InvalidRequest
from .usage import TokenCounts

MILLION = 1_000_000
DAYS_PER_MONTH = 365.25 / 12
MAX_PRICE = 100_000.0  # per million tokens; anything above is a typo, not a tariff
MAX_NAME_CHARS = 80

# Defaults read on 2026-12-01 from the providers' published pages:
#   Anthropic: https://platform.claude.com/docs/en/about-claude/pricing and
#     https://platform.claude.com/docs/en/models/sonnet-5/overview ("cache hits" = cached input)
#   OpenAI: https://developers.openai.com/api/docs/pricing, as tabulated in GitHub's
#     docs/data/tables/copilot/models-and-pricing.yml (GPT-5.4, GPT-5 mini)
READ_ON = "2026-12-01"


@dataclass(frozen=True)
class Price:
    name: str
    input: float  # USD per million fresh input tokens
    cached_input: float  # USD per million cached input tokens
    output: float  # USD per million output tokens (reasoning included)
    read_on: str = ""  # when the price was read (defaults), or "" for a person's own entry

    def cost(self, counts: TokenCounts) -> float:
        fresh = max(0, counts.prompt_tokens - counts.cached_tokens)
        return (fresh * self.input + counts.cached_tokens * self.cached_input
                + counts.completion_tokens * self.output) / MILLION

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


DEFAULT_PRICES: tuple[Price, ...] = (
    Price("Claude Opus 5", 5.00, 0.50, 25.00, READ_ON),
    Price("Claude Sonnet 5", 2.00, 0.20, 10.00, READ_ON),
    Price("GPT-5.4", 2.50, 0.25, 15.00, READ_ON),
    Price("GPT-5 mini", 0.25, 0.025, 2.00, READ_ON),
)

PRICE_FIELDS = ("input", "cached_input", "output")


def _number(value: Any, field: str, upper: float) -> float:
    """A non-negative finite number, else InvalidRequest naming ``field``."""
    if isinstance(value, bool):
        raise InvalidRequest(f"{field} must be a number", param=field)
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise InvalidRequest(f"{field} must be a number, got {value!r}", param=field) from None
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidRequest(f"{field} must be a number", param=field)
    if value < 0:
        raise InvalidRequest(f"{field} cannot be negative", param=field)
    if value > upper:
        raise InvalidRequest(f"{field} is implausibly large (more than {upper:g})", param=field)
    return float(value)


def validated_prices(entries: list[dict[str, Any]]) -> list[Price]:
    """A person's price table, checked: every field of every entry. The first bad field is
    named in the error's ``param`` as ``prices[i].field``, so an editor can mark it."""
    prices: list[Price] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        name = str(entry.get("name") or "").strip()
        if not name or len(name) > MAX_NAME_CHARS:
            raise InvalidRequest(f"price {i + 1} needs a name of 1 to {MAX_NAME_CHARS} characters",
                                 param=f"prices[{i}].name")
        if name.lower() in seen:
            raise InvalidRequest(f"two prices are named {name!r}", param=f"prices[{i}].name")
        seen.add(name.lower())
        values = {f: _number(entry.get(f), f"prices[{i}].{f}", MAX_PRICE) for f in PRICE_FIELDS}
        prices.append(Price(name, values["input"], values["cached_input"], values["output"],
                            str(entry.get("read_on") or "")))
    return prices


def price_table(saved: list[dict[str, Any]] | None) -> list[Price]:
    """The prices in use: the saved table, or the defaults when none was saved."""
    if saved is None:
        return list(DEFAULT_PRICES)
    return validated_prices(saved)


@dataclass(frozen=True)
class MachineCost:
    """What running here costs: power draw under load, electricity, the hardware over time."""

    watts: float = 150.0
    price_per_kwh: float = 0.30  # USD
    hardware_price: float = 0.0  # USD; 0 leaves the hardware out
    hardware_months: int = 36

    @classmethod
    def validated(cls, watts: Any, price_per_kwh: Any, hardware_price: Any = 0.0,
                  hardware_months: Any = 36) -> "MachineCost":
        months = _number(hardware_months, "hardware_months", 1200)
        if months < 1 or months != int(months):
            raise InvalidRequest("hardware_months must be a whole number of months, at least 1",
                                 param="hardware_months")
        return cls(_number(watts, "watts", 100_000), _number(price_per_kwh, "price_per_kwh", 100),
                   _number(hardware_price, "hardware_price", 10_000_000), int(months))

    def energy_kwh(self, busy_s: float) -> float:
        return self.watts * busy_s / 3600 / 1000

    def cost(self, busy_s: float, days: int) -> dict[str, float]:
        energy = self.energy_kwh(busy_s) * self.price_per_kwh
        hardware = self.hardware_price / (self.hardware_months * DAYS_PER_MONTH) * days
        return {"energy_kwh": self.energy_kwh(busy_s), "energy_cost": energy, "hardware_cost": hardware,
                "total": energy + hardware}


def cost_summary(counts: TokenCounts, days: int, prices: list[Price], machine: MachineCost) -> dict[str, Any]:
    """The period's tokens priced on every API in the table, beside the machine's own cost."""
    return {
        "currency": "USD",
        "apis": [{**p.as_dict(), "cost": round(p.cost(counts), 6)} for p in prices],
        "machine": {**asdict(machine), **{k: round(v, 6) for k, v in machine.cost(counts.duration_s, days).items()},
                    "busy_s": round(counts.duration_s, 3)},
    }
