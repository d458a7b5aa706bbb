"""Screenshots for the README: the main window (light and dark), Settings, the model picker, Models, Usage,
the assistant editor, search.

Runs offscreen at 1280x800 in a throwaway INGLENOOK_HOME. The first exchange is written
into the store (so the sidebar and history look lived-in); the last answer is generated
live by the starter model, so its text and stats line are real.

    .venv/bin/python scripts/screenshots.py [--out docs]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

HISTORY = [
    ("Trip ideas for a rainy weekend", None),
    ("Explain TCP vs UDP", None),
    ("Sourdough starter schedule", None),
    ("Refactor the invoice parser", None),
]

FIRST_QUESTION = "What should I look for when choosing a quantization for a local model?"
FIRST_ANSWER = """Pick the **smallest file that still answers well** on your machine. A few rules of thumb:

1. **Memory first.** The model, plus its context, must fit in RAM (or VRAM).
2. **Q4_K_M** is the usual sweet spot; **Q8_0** is close to the original.
3. Below 4 bits, quality drops quickly on small models.

| Quant | Bits/weight | Quality |
|-------|-------------|---------|
| Q8_0  | 8.5         | near lossless |
| Q4_K_M | 4.8        | good |
| Q2_K  | 2.6         | noticeably worse |

> Tip: *Settings → Quantization* compares levels side by side on your own text."""

LIVE_QUESTION = "Write a Python function that reverses a string."


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait(app, condition, timeout: float = 900.0) -> None:  # noqa: ANN001 — a shared machine can be slow
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the window did not get there in time")
        app.processEvents()
        time.sleep(0.01)


def settle(app, seconds: float = 0.4) -> None:  # noqa: ANN001
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.01)


def shoot_alone(prefix: str, shoot) -> None:  # noqa: ANN001
    """Run one page's ``shoot(app, window)`` on its own: a light 1280x800 window, no API, in a
    throwaway INGLENOOK_HOME (what each ``*_shot.py`` script does when run by itself)."""
    os.environ["INGLENOOK_HOME"] = tempfile.mkdtemp(prefix=prefix)
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
    try:
        shoot(app, window)
    finally:
        window.shutdown()
        engine.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="docs")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ["INGLENOOK_HOME"] = tempfile.mkdtemp(prefix="inglenook-shots-")

    from PySide6.QtCore import QPoint
    from PySide6.QtGui import QPainter
    from PySide6.QtWidgets import QApplication

    from inglenook.app.widgets import theme
    from inglenook.app.window import MainWindow
    from inglenook.engine import Engine

    app = QApplication(sys.argv)
    engine = Engine()
    extra = Path.home() / ".cache" / "inglenook-test-models" / "gemma-3-270m-q4_k_m.gguf"
    if extra.is_file():  # a second model makes the picker worth showing
        engine.registry.register_file(extra)
    store = engine.store
    for title, _ in HISTORY:
        conversation = store.create_conversation(title)
        store.add_message(conversation.id, "user", title)
        store.add_message(conversation.id, "assistant", "…")
    chat = engine.chats.new_conversation(
        title="Choosing a quantization", sampling={"temperature": 0.0, "max_tokens": 90},
        system_prompt="You are a concise, friendly assistant.",
    )
    store.add_message(chat.id, "user", FIRST_QUESTION)
    store.add_message(chat.id, "assistant", FIRST_ANSWER, model_id=engine.default_model_id())

    theme.apply_theme(app, "light")
    # The API runs beside the window as in a real session, on a free port so that a running
    # Inglenook does not stop the screenshots.
    engine.update_settings(api_port=_free_port())
    window = MainWindow(engine, start_api=True)
    window.resize(1280, 800)
    window.show()
    wait(app, lambda: window.conversation is not None and window.conversation.id == chat.id)
    window.send(LIVE_QUESTION)
    wait(app, lambda: not window.chat.is_streaming(chat.id) and window.view.streaming_widget() is None)
    # After a turn the background titles it and embeds it for search, loading a second
    # instance of the model: the shot waits for that to finish rather than catch it midway.
    wait(app, lambda: not engine.search_indexing() and engine.background.wait_idle(0.05)
         and "Loading" not in window.status_line.model_status.text())
    settle(app)
    window.view.scroll_to_bottom()
    settle(app)
    window.grab().save(str(out / "main-light.png"))

    engine.update_settings(theme="dark")
    window.apply_theme()
    window.settings_toggle.setChecked(True)
    settle(app)
    window.view.scroll_to_bottom()
    settle(app)
    window.grab().save(str(out / "main-dark.png"))
    window.settings_toggle.setChecked(False)

    engine.update_settings(theme="light")
    window.apply_theme()
    settle(app)
    window.picker.open_popup()
    settle(app)
    shot = window.grab()
    painter = QPainter(shot)
    offset = window.picker.popup.pos() - window.mapToGlobal(QPoint(0, 0))
    painter.drawPixmap(offset, window.picker.popup.grab())
    painter.end()
    shot.save(str(out / "model-picker.png"))
    window.picker.popup.hide()

    dialog = window.open_settings("API server")
    settle(app)
    dialog.grab().save(str(out / "settings.png"))
    dialog.show_page("About")
    about = dialog.about_page
    about.refresh(self_test=True)
    wait(app, lambda: about.report is not None and about.report.self_test is not None)
    settle(app)
    dialog.grab().save(str(out / "about.png"))
    dialog.reject()

    from models_shot import shoot_models  # the Models page mid-download, against a local hub

    shoot_models(app, window, out, wait, settle)

    from usage_shot import shoot_usage  # the Usage page after real chats and API calls

    shoot_usage(app, window, out, wait, settle)

    from assistant_shot import shoot_assistant  # the assistant editor: tools and documents

    shoot_assistant(app, window, out, wait, settle)

    from search_shot import shoot_search  # the sidebar: chats found by words, then by meaning

    shoot_search(app, window, out, wait, settle)

    from layout_shot import NAMES as LAYOUT_NAMES  # 800×560 and 1920×1080, light and dark
    from layout_shot import shoot_layout

    shoot_layout(app, window, out, wait, settle)

    window.shutdown()
    engine.close()
    for name in ("main-light.png", "main-dark.png", "model-picker.png", "settings.png", "about.png", "models.png", "usage.png",
                 "assistant-editor.png", "search.png", *LAYOUT_NAMES):
        print(out / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
