"""Screenshots of documents in a chat (issue 30): the composer's chip for an attached PDF with
an answer that cites a page, and the preview that a click on the citation opens, scrolled to
that page and marked.

Runs like scripts/screenshots.py (offscreen, 1280x800, a throwaway INGLENOOK_HOME). The PDF is
the tests' generated report, attached through the window (converted by the engine's worker);
the exchange is written into the store, as screenshots.py writes its first one, so the answer
cites a page whatever the starter model would say.

    .venv/bin/python scripts/documents_shot.py [--out docs]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from screenshots import settle, shoot_alone, wait

from tests.document_files import report_pdf  # the tests' PDF writer, from the checkout

QUESTION = "Which region sold the most units, and where does the report say so?"
ANSWER = ("The **North** region sold the most: 1,200 units for 48,000 in revenue, against 950 units in the "
          "South [report.pdf, page 2]. Every section also mentions the harbour and the mill, e.g. [report.pdf, page 6].")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="docs")
    out = Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    pdf = report_pdf(Path(tempfile.mkdtemp(prefix="inglenook-docs-shot-")) / "report.pdf", n_pages=10)

    def shoot(app, window) -> None:  # noqa: ANN001
        from PySide6.QtCore import QUrl
        from PySide6.QtGui import QDesktopServices

        chats = window.engine.chats
        chat = chats.new_conversation(title="Quarterly report")
        window.conversations.refresh()
        window.open_conversation(chat.id)
        wait(app, lambda: window.conversation is not None and window.conversation.id == chat.id)
        window.attachments.attach([pdf])
        wait(app, lambda: len(window.composer.attachments.chips()) == 1)
        chats.store.add_message(chat.id, "user", QUESTION)
        chats.store.add_message(chat.id, "assistant", ANSWER, model_id=chats.default_model_id())
        window.active.reload()
        wait(app, lambda: "[report.pdf, page 2]" in window.view.last_answer_text())
        settle(app, 1.0)
        window.grab().save(str(out / "documents-chat.png"))

        QDesktopServices.openUrl(QUrl("cite:report.pdf#page%206"))  # what a click on the citation does
        wait(app, lambda: window.attachments.preview is not None and window.attachments.preview.isVisible())
        settle(app, 1.0)
        window.attachments.preview.grab().save(str(out / "documents-preview.png"))
        window.attachments.preview.close()

    shoot_alone("inglenook-docs-shots-", shoot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
