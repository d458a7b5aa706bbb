"""Screenshot of the embedding-model offer (issue 30, item 4): a chat with a report too long
for the context, its chip "searched", and the line under it offering the recommended encoder
with its size. Offline (HF_HUB_OFFLINE): the size is the one the engine knows, as a machine
without a network shows it.

    QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/encoder_shot.py [--out docs]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from screenshots import settle, shoot_alone, wait


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="docs")
    out = Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ["HF_HUB_OFFLINE"] = "1"
    from tests.document_files import report_pdf

    def shoot(app, window) -> None:  # noqa: ANN001
        chats = window.engine.chats
        chat = chats.new_conversation(title="Quarterly report")
        window.conversations.refresh()
        window.open_conversation(chat.id)
        wait(app, lambda: window.conversation is not None and window.conversation.id == chat.id)
        chats.context_of = lambda _model_id: 1200  # a report longer than the context: searched
        window.attachments.attach([report_pdf(Path(tempfile.mkdtemp()) / "report.pdf", n_pages=3)])
        bar = window.composer.attachments
        wait(app, lambda: bar.encoder_note.isVisible())
        settle(app)
        window.grab().save(str(out / "encoder-offer.png"))

    shoot_alone("inglenook-encoder-shot-", shoot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
