"""Screenshots of the narrow and wide layouts (docs/narrow-*.png, docs/wide-dark.png): the
window at 800×560 (the smallest it allows) in light and dark, with the chat settings floating
over the chat and with the sidebar folded into its rail, the Models page at that width, and
the window at 1920×1080 with the settings beside the chat.

The conversation is written into the store (a long question, an answer with a wide code block
and a table), so the pictures show wrapping and sideways scrolling inside the code block.

Used by scripts/screenshots.py; on its own: ``.venv/bin/python scripts/layout_shot.py [--out docs]``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

QUESTION = ("I keep a long list of book titles in a text file, one per line. How can I print them "
            "sorted by their last word, ignoring case?")
ANSWER = """Split each line, sort by the lower-cased last word, and print:

```python
with open("books.txt", encoding="utf-8") as file:
    titles = [line.strip() for line in file if line.strip()]
for title in sorted(titles, key=lambda title: title.split()[-1].lower()):  # the last word decides
    print(title)
```

| Step | What it does |
|------|--------------|
| `strip()` | drops the newline and blank lines |
| `key=` | compares the last word only |

Lines with a single word sort by that word."""

NAMES = ("narrow-light.png", "narrow-dark.png", "narrow-settings.png", "narrow-rail.png", "narrow-models.png",
         "wide-dark.png")


def shoot_layout(app: Any, window: Any, out: Path, wait: Any, settle: Any) -> None:
    from inglenook.app.widgets import theme

    engine = window.engine
    chat = engine.chats.new_conversation(title="Sort book titles by their last word")
    engine.store.add_message(chat.id, "user", QUESTION)
    engine.store.add_message(chat.id, "assistant", ANSWER, model_id=engine.default_model_id())
    window.conversations.refresh()
    window.open_conversation(chat.id)
    wait(app, lambda: window.current_id == chat.id and len(window.view.widgets) == 2)

    def shot(name: str, mode: str, size: tuple[int, int]) -> None:
        engine.update_settings(theme=mode)
        window.apply_theme()
        window.resize(*size)
        settle(app, 0.6)
        window.view.scroll_to_bottom()
        settle(app, 0.3)
        window.grab().save(str(out / name))

    shot("narrow-light.png", "light", (800, 560))
    shot("narrow-dark.png", "dark", (800, 560))
    window.settings_toggle.setChecked(True)
    shot("narrow-settings.png", "light", (800, 560))
    window.settings_toggle.setChecked(False)
    window.sidebar.set_collapsed(True)
    shot("narrow-rail.png", "light", (800, 560))
    window.sidebar.set_collapsed(False)
    window.show_page("models")
    shot("narrow-models.png", "light", (800, 560))
    window.show_page("chat")
    window.settings_toggle.setChecked(True)
    shot("wide-dark.png", "dark", (1920, 1080))
    window.settings_toggle.setChecked(False)
    engine.update_settings(theme="light")
    window.apply_theme()
    window.resize(1280, 800)
    theme.apply_theme(app, "light")
    settle(app)


def main() -> int:
    out = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else Path("docs")
    out.mkdir(parents=True, exist_ok=True)
    from screenshots import settle, shoot_alone, wait

    shoot_alone("inglenook-layout-shot-", lambda app, window: shoot_layout(app, window, out, wait, settle))
    for name in NAMES:
        print(out / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
