"""``inglenook usage``: the table and ``--json`` (the same document as GET /v1/usage) read the
store that recorded the generations."""

from __future__ import annotations

import json
import time

import pytest

from inglenook.cli import main
from inglenook.engine.base.generation_events import Finished, Timings, Usage
from inglenook.engine.base.jobs import GenerateJob
from inglenook.engine.core.engine import Engine


def _record_two_generations() -> None:
    with Engine(scan=False) as engine:
        engine.update_settings(usage_prices=[{"name": "Metered", "input": 1, "cached_input": 0.1, "output": 4}])
        engine.usage.observe(GenerateJob("small:q4", client="window"),
                             Finished("stop", Usage(1000, 400, 100), Timings(0.1, 0.5, 1.5), "small:q4"))
        engine.usage.observe(GenerateJob("large:q4", client="api:curl/8"),
                             Finished("length", Usage(2000, 0, 50), Timings(0.2, 1.0, 1.0), "large:q4"))
        # Engine.close() writes what the recorder still holds.


def test_usage_json_totals_what_was_recorded(capsys: pytest.CaptureFixture[str]) -> None:
    _record_two_generations()
    assert main(["usage", "--days", "2", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["days"] == 2 and body["to"] == time.strftime("%Y-%m-%d")
    assert body["totals"]["requests"] == 2 and body["totals"]["prompt_tokens"] == 3000
    assert {row["client"] for row in body["by_client"]} == {"window", "api:curl/8"}
    assert [row["model"] for row in body["by_model"]] == ["large:q4", "small:q4"]  # most tokens first
    (metered,) = body["cost"]["apis"]
    assert metered["cost"] == pytest.approx((600 * 1 + 400 * 0.1 + 100 * 4 + 2000 * 1 + 50 * 4) / 1e6)
    assert body["cost"]["machine"]["busy_s"] == pytest.approx(4.0)


def test_usage_table_and_a_bad_period(capsys: pytest.CaptureFixture[str]) -> None:
    _record_two_generations()
    assert main(["usage"]) == 0
    out = capsys.readouterr().out
    assert "api:curl/8" in out and "Metered" in out and "this machine" in out
    with pytest.raises(SystemExit) as refused:
        main(["usage", "--days", "0"])
    assert refused.value.code == 2
    assert "days must be between" in capsys.readouterr().err
