"""The Usage page screenshot (docs/usage.png) with real numbers: chats answered in the window,
then calls to the local API through the openai and anthropic SDKs and curl-like httpx, some to
the routing alias ``auto`` (short prompts to SmolLM2, long ones to gemma-3-270m when the test
copy of it is there). Nothing is typed into the store: every row is a real generation.

Used by scripts/screenshots.py; on its own: ``.venv/bin/python scripts/usage_shot.py [--out docs]``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

CHATS = ["Suggest a name for a cat.", "What is a good first houseplant?"]
LONG_DOCUMENT = "An inglenook is a recess beside a big fireplace where people sat to keep warm. " * 30


def api_calls(url: str) -> None:
    """Real calls as different clients would make them."""
    import anthropic
    import httpx
    import openai

    client = openai.OpenAI(base_url=url, api_key="local", max_retries=0, timeout=600)
    for content in ("Say hi.", "Name three colours.", f"{LONG_DOCUMENT}\nSummarise that in one line."):
        client.chat.completions.create(model="auto", messages=[{"role": "user", "content": content}],
                                       max_tokens=24, temperature=0)
    client.responses.create(model="auto", input="Give me a word that rhymes with moon.", max_output_tokens=16)
    claude = anthropic.Anthropic(base_url=url.removesuffix("/v1"), api_key="local", max_retries=0, timeout=600)
    claude.messages.create(model="auto", max_tokens=24, messages=[{"role": "user", "content": "Count to five."}])
    for prompt in ("The fireplace was", "Once upon a time"):
        httpx.post(f"{url}/completions", headers={"User-Agent": "curl/8.5.0"}, timeout=600,
                   json={"model": "auto", "prompt": prompt, "max_tokens": 16, "temperature": 0}).raise_for_status()


def shoot_usage(app: Any, window: Any, out: Path, wait: Any, settle: Any) -> None:
    engine = window.engine
    for text in CHATS:
        conversation = engine.chats.new_conversation(sampling={"temperature": 0.0, "max_tokens": 48})
        window.conversations.refresh()
        window.open_conversation(conversation.id)
        wait(app, lambda: window.conversation is not None and window.conversation.id == conversation.id)
        window.send(text)
        wait(app, lambda: not window.chat.is_streaming(conversation.id) and window.view.streaming_widget() is None)
    engine.background.wait_idle(300)
    api_calls(window.server.url)
    engine.usage.flush()
    page = window.usage_page
    shown: list[Any] = []
    page.refreshed.connect(shown.append)
    window.show_page("usage")
    wait(app, lambda: bool(shown))
    settle(app, 0.6)
    window.grab().save(str(out / "usage.png"))


def main() -> int:
    out = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else Path("docs")
    out.mkdir(parents=True, exist_ok=True)
    os.environ["INGLENOOK_HOME"] = tempfile.mkdtemp(prefix="inglenook-usage-shot-")
    from PySide6.QtWidgets import QApplication

    from inglenook.app.widgets import theme
    from inglenook.app.window import MainWindow
    from inglenook.engine import Engine
    from screenshots import _free_port, settle, wait

    app = QApplication(sys.argv)
    engine = Engine()
    large = Path.home() / ".cache" / "inglenook-test-models" / "gemma-3-270m-q4_k_m.gguf"
    if large.is_file():  # the routing alias then has a large model to send long prompts to
        engine.update_settings(route_large_model=engine.registry.register_file(large).id,
                               route_short_prompt_chars=1000)
    # A small context loads and answers quickly (this runs on busy machines too).
    engine.update_settings(api_port=_free_port(), context_size=2048, parallel_sequences=2)
    theme.apply_theme(app, "light")
    window = MainWindow(engine, start_api=True)
    window.resize(1280, 800)
    window.show()
    wait(app, lambda: window.server.running)
    shoot_usage(app, window, out, wait, settle)
    window.shutdown()
    engine.close()
    print(out / "usage.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
