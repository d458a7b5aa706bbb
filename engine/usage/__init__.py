"""Token usage per client and day: recording it as generations end, summaries, prices and what
the machine cost.

May import: base, store, text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base import lazy_door

# Which module defines each name other packages (or the front door) use. Keep in step with
# the TYPE_CHECKING block below, which is what type checkers read (a test compares them).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "pricing": ("DEFAULT_PRICES", "MachineCost", "Price", "validated_prices"),
    "recorder": ("ReasoningCount", "UsageRecorder"),
    "summary": ("UsageSummary", "machine_cost_of"),
    "usage": (
        "BACKGROUND_PREFIX", "TERMINAL", "TokenCounts", "UNCOUNTED_PREFIX", "UsageReport", "WINDOW",
        "api_client", "checked_days", "uncounted",
    ),
}

__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .pricing import (
        DEFAULT_PRICES as DEFAULT_PRICES, MachineCost as MachineCost, Price as Price,
        validated_prices as validated_prices,
    )
    from .recorder import ReasoningCount as ReasoningCount, UsageRecorder as UsageRecorder
    from .summary import UsageSummary as UsageSummary, machine_cost_of as machine_cost_of
    from .usage import (
        BACKGROUND_PREFIX as BACKGROUND_PREFIX, TERMINAL as TERMINAL, UNCOUNTED_PREFIX as UNCOUNTED_PREFIX,
        WINDOW as WINDOW, TokenCounts as TokenCounts, UsageReport as UsageReport, api_client as api_client,
        checked_days as checked_days, uncounted as uncounted,
    )
