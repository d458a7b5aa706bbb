"""What the window costs an answer: the same answer decoded through the engine alone and
streamed into the window, side by side, at depth 0 and after a long conversation.

For each depth, the same greedy answer (temperature 0, ``--tokens`` tokens) to the same
prompt is produced twice, in two conversations holding the same messages: once by
``ChatService.send`` alone (nothing on screen), once typed into the window, which streams it
into the chat view. The engine reports each answer's decode speed (tokens/s after the first
token); ``…_ratio`` is the window's against the engine's. While the window streams, the GUI
thread's own CPU time (``time.thread_time``, read on that thread) over the wall time is its
share of one core. Runs alternate (engine, window, engine, window, …) so a machine that gets
busier or quieter weighs on both alike; medians are reported. Prints JSON.

Goal: a ratio of at least 0.95 at both depths, and the GUI thread under 15% of one core.

    .venv/bin/python benchmarks/window_decode.py [--tokens 256] [--depth 5000] [--repeats 2]
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
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

PROMPT = "Write a long, detailed story about a lighthouse keeper who finds a message in a bottle after a storm."
# Filler for a deep conversation: varied sentences, so the prompt is ordinary text, not one
# token repeated.
SENTENCES = (
    "The committee met on Tuesday to review the quarterly budget and the plans for the new library wing.",
    "Rainfall in the valley was twice the usual amount, and the river rose above the old stone bridge.",
    "Our team measured the latency of each request and found that most of it came from the database.",
    "She planted tomatoes, basil and three kinds of peppers along the south wall of the garden.",
    "The museum's new exhibit shows maps drawn by sailors in the sixteenth century, with notes in Latin.",
    "After the update, the application started faster, but some users reported that settings were lost.",
    "A good bread dough needs time: the yeast works slowly in a cool kitchen and gives more flavour.",
    "The train to the coast leaves at seven, stops in four towns, and arrives shortly before noon.",
)


def filler(chars: int, seed: int) -> str:
    out: list[str] = []
    index = seed
    while sum(len(s) + 1 for s in out) < chars:
        out.append(SENTENCES[index % len(SENTENCES)])
        index += 3
    return " ".join(out)


def history(depth_tokens: int) -> list[tuple[str, str]]:
    """(role, text) pairs of about ``depth_tokens`` tokens (at ~4 characters a token)."""
    if depth_tokens <= 0:
        return []
    pairs = 4
    per_pair = depth_tokens * 4 // pairs
    messages: list[tuple[str, str]] = []
    for index in range(pairs):
        messages.append(("user", f"Here is part {index + 1} of my notes. " + filler(per_pair * 9 // 10, index)))
        messages.append(("assistant", "Thank you, I have read it. " + filler(per_pair // 10, index + 1)))
    return messages


def wait(app: Any, until: Callable[[], bool], timeout_s: float = 1800.0) -> None:  # noqa: ARG001 — the app runs the loop
    """Run the Qt event loop until ``until()`` holds. The loop sleeps between events, as the
    app's own ``exec()`` does; the condition is checked every 50 ms by a timer. (Polling
    ``processEvents`` every few milliseconds instead woke the GUI thread 200 times a second,
    a cost the app does not have, and took ~7% off the window's decode at depth.)"""
    from PySide6.QtCore import QEventLoop, QTimer

    if until():
        return
    started = time.perf_counter()
    loop = QEventLoop()
    timer = QTimer()
    timer.setInterval(50)

    def check() -> None:
        if until():
            loop.quit()
        elif time.perf_counter() - started > timeout_s:
            loop.exit(1)

    timer.timeout.connect(check)
    timer.start()
    code = loop.exec()
    timer.stop()
    if code:
        raise TimeoutError("the answer did not end in time")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--depth", type=int, default=5000, help="tokens of conversation before the prompt")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    os.environ["INGLENOOK_HOME"] = tempfile.mkdtemp(prefix="inglenook-window-decode-")
    from PySide6.QtWidgets import QApplication

    from inglenook.app.widgets import theme
    from inglenook.app.window import MainWindow
    from inglenook.engine import Engine

    app = QApplication(sys.argv)
    engine = Engine()
    theme.apply_theme(app, "light")
    window = MainWindow(engine, start_api=False)
    window.resize(1280, 800)
    window.show()
    # Titles, summaries and the meaning index would run between the measured answers (on the
    # machine's cores, or loading a model of their own): off, so both runs face the same machine.
    engine.update_settings(background_titles=False, background_summaries=False, background_search=False)
    model = engine.default_model_id()
    list(engine.scheduler.load(model))
    sampling = {"temperature": 0.0, "top_k": 1, "max_tokens": args.tokens}
    store = engine.store

    def conversation(depth: int) -> int:
        created = engine.chats.new_conversation(sampling=sampling)
        for role, text in history(depth):
            store.add_message(created.id, role, text)
        return created.id

    def engine_alone(depth: int) -> dict[str, Any]:
        cid = conversation(depth)
        message = engine.chats.send(cid, PROMPT).wait()
        assert message is not None
        return {"tokens_per_s": message.tokens_per_s, "completion_tokens": message.completion_tokens,
                "prompt_tokens": message.prompt_tokens}

    def in_window(depth: int) -> dict[str, Any]:
        cid = conversation(depth)
        window.conversations.refresh()
        window.open_conversation(cid)
        wait(app, lambda: window.conversation is not None and window.conversation.id == cid)
        window.send(PROMPT)
        # The GUI thread's share is measured while text streams, not while the prompt is read.
        wait(app, lambda: (window.view.streaming_widget() is not None and bool(window.view.streaming_widget().text))
             or not window.chat.is_streaming(cid))
        cpu, wall = time.thread_time(), time.perf_counter()
        wait(app, lambda: not window.chat.is_streaming(cid) and window.view.streaming_widget() is None)
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
        message = store.messages(cid)[-1]
        return {"tokens_per_s": message.tokens_per_s, "completion_tokens": message.completion_tokens,
                "prompt_tokens": message.prompt_tokens, "gui_thread_core_share": cpu / wall if wall else 0.0}

    result: dict[str, Any] = {"benchmark": "window_decode", "model": model, "max_tokens": args.tokens}
    engine_alone(0)  # warm: the model's pages are in memory, the lexers imported
    for name, depth in (("depth_0", 0), ("depth_long", args.depth)):
        alone: list[dict[str, Any]] = []
        shown: list[dict[str, Any]] = []
        for _ in range(args.repeats):
            alone.append(engine_alone(depth))
            shown.append(in_window(depth))
        engine_tps = statistics.median(r["tokens_per_s"] for r in alone)
        window_tps = statistics.median(r["tokens_per_s"] for r in shown)
        result[name] = {
            "prompt_tokens": shown[-1]["prompt_tokens"],
            "completion_tokens": [r["completion_tokens"] for r in shown],
            "engine_tokens_per_s": round(engine_tps, 2),
            "window_tokens_per_s": round(window_tps, 2),
            "engine_runs": [round(r["tokens_per_s"], 2) for r in alone],
            "window_runs": [round(r["tokens_per_s"], 2) for r in shown],
            "gui_thread_core_share": round(statistics.median(r["gui_thread_core_share"] for r in shown), 3),
        }
        result[f"{name}_ratio"] = round(window_tps / engine_tps, 3) if engine_tps else None
    result.update(goal_ratio=0.95, goal_gui_thread_core_share=0.15, cpu_count=os.cpu_count(),
                  load_average=os.getloadavg()[0] if hasattr(os, "getloadavg") else None)
    window.shutdown()
    engine.close()
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
