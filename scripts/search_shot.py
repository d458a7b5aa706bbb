"""The sidebar's search screenshot (docs/search.png): chats found by their words, then chats
related by meaning, embedded in the background by the starter model (nothing is made up:
the vectors are the model's).

Used by scripts/screenshots.py; on its own: ``.venv/bin/python scripts/search_shot.py [--out docs]``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

CHATS = [
    ("Sick kitten: what to do", "My kitten sneezes a lot. What should I do?"),
    ("Chat about Mina", "My cat has been sneezing for two days and won't eat. Should I take her to the vet?"),
    ("Reverse a list", "How do I reverse a list in Python without modifying the original?"),
    ("Sourdough crust", "What's a good recipe for sourdough bread with a crispy crust?"),
    ("Three days in Lisbon", "Plan a three day trip to Lisbon with museums and good seafood."),
    ("Freelance paperwork", "How do I file my income tax return as a freelancer?"),
]
QUERY = "sick kitten"


def shoot_search(app: Any, window: Any, out: Path, wait: Any, settle: Any) -> None:
    engine = window.engine
    for title, text in CHATS:
        conversation = engine.chats.new_conversation(title=title)
        engine.store.add_message(conversation.id, "user", text)
    engine.background.request_index()
    engine.background.wait_idle(600)
    window.new_chat()  # the chat page behind the list, whichever page the run was on
    window.conversations.refresh()
    window.sidebar.search.setText(QUERY)
    wait(app, lambda: "RELATED" in window.sidebar.section.text())
    settle(app, 0.6)
    window.grab().save(str(out / "search.png"))
    window.sidebar.search.clear()


def main() -> int:
    out = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else Path("docs")
    out.mkdir(parents=True, exist_ok=True)
    from screenshots import settle, shoot_alone, wait

    shoot_alone("inglenook-search-shot-", lambda app, window: shoot_search(app, window, out, wait, settle))
    print(out / "search.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
