"""One description of usage and cost for every surface: ``GET /v1/usage``, ``inglenook usage
--json`` and the app's Usage page read the same ``UsageSummary``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..store import Settings, Store
from .pricing import MachineCost, Price, cost_summary, price_table
from .usage import DEFAULT_DAYS, UsageReport, usage_report


def machine_cost_of(settings: Settings) -> MachineCost:
    return MachineCost.validated(settings.machine_watts, settings.electricity_price_per_kwh,
                                 settings.hardware_price, settings.hardware_months)


@dataclass(frozen=True)
class UsageSummary:
    report: UsageReport
    prices: list[Price]
    machine: MachineCost

    @classmethod
    def read(cls, store: Store, settings: Settings, days: int = DEFAULT_DAYS, now: float | None = None) -> "UsageSummary":
        return cls(usage_report(store, days, now), price_table(settings.usage_prices), machine_cost_of(settings))

    @property
    def days(self) -> int:
        return len(self.report.days)

    def cost(self) -> dict[str, Any]:
        return cost_summary(self.report.total(), self.days, self.prices, self.machine)

    def as_dict(self) -> dict[str, Any]:
        report = self.report
        by_day = report.day_by_model()
        return {
            "object": "usage",
            "days": self.days,
            "from": report.days[0],
            "to": report.days[-1],
            "totals": report.total().as_dict(),
            "by_day": [
                {"day": day, **counts.as_dict(),
                 "by_model": {model: c.as_dict() for model, c in by_day.get(day, {}).items()}}
                for day, counts in report.by_day().items()
            ],
            "by_model": [{"model": model, **c.as_dict()} for model, c in report.by_model().items()],
            "by_client": [{"client": client, **c.as_dict()} for client, c in report.by_client().items()],
            "cost": self.cost(),
        }
