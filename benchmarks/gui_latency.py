"""How responsive the window stays while an answer streams: the event loop's worst gap.

A 5 ms QTimer records the delay between its ticks, first with the window idle, then while
the starter model streams an answer into it (side by side, in one run). Prints JSON.
Goal: a worst gap under 50 ms while streaming.

    .venv/bin/python benchmarks/gui_latency.py [--tokens 96]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def measure(seconds: float | None = None, until: Callable[[], bool] | None = None) -> list[float]:
    from PySide6.QtCore import QEventLoop, QTimer

    gaps: list[float] = []
    last = [time.perf_counter()]

    def tick() -> None:
        now = time.perf_counter()
        gaps.append((now - last[0]) * 1000)
        last[0] = now

    timer = QTimer()
    timer.setInterval(5)
    timer.timeout.connect(tick)
    timer.start()
    loop = QEventLoop()
    started = time.perf_counter()
    check = QTimer()
    check.setInterval(20)

    def maybe_quit() -> None:
        if (until is not None and until()) or (seconds is not None and time.perf_counter() - started > seconds):
            loop.quit()

    check.timeout.connect(maybe_quit)
    check.start()
    loop.exec()
    timer.stop()
    check.stop()
    return gaps


def summary(gaps: list[float]) -> dict[str, float]:
    ordered = sorted(gaps)
    return {
        "ticks": len(gaps),
        "worst_gap_ms": round(ordered[-1], 2),
        "p99_gap_ms": round(ordered[int(len(ordered) * 0.99) - 1], 2),
        "median_gap_ms": round(statistics.median(ordered), 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=96)
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="inglenook-gui-bench-")
    os.environ["INGLENOOK_HOME"] = home
    from PySide6.QtWidgets import QApplication

    from inglenook.app.widgets import theme
    from inglenook.app.window import MainWindow
    from inglenook.engine.core.engine import Engine

    app = QApplication(sys.argv)
    engine = Engine()
    theme.apply_theme(app, "light")
    window = MainWindow(engine, start_api=False)
    window.show()
    conversation = engine.chats.new_conversation(sampling={"temperature": 0.0, "max_tokens": args.tokens})
    window.open_conversation(conversation.id)
    measure(until=lambda: window.conversation is not None)
    # Load the model first so the streaming run measures streaming, not the (threaded) load.
    engine.scheduler.load(engine.default_model_id())
    measure(until=lambda: window.hub.loaded is not None)

    idle = measure(seconds=2.0)
    window.send("Write a short Python function that reverses a string, and explain it.")
    started = time.perf_counter()
    streaming = measure(until=lambda: not window.chat.is_streaming(conversation.id)
                        and window.view.streaming_widget() is None and time.perf_counter() - started > 0.5)
    answer = engine.store.messages(conversation.id)[-1]
    result = {
        "benchmark": "gui_event_loop_latency",
        "model": answer.model_id,
        "completion_tokens": answer.completion_tokens,
        "tokens_per_s": answer.tokens_per_s,
        "idle": summary(idle),
        "streaming": summary(streaming),
        "goal_worst_gap_ms": 50,
        "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }
    window.shutdown()
    engine.close()
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
