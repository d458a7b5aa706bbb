"""The first launch's welcome: what Inglenook is, what is ready, where things are.

Shown once (the ``welcome_shown`` setting), window-modal so the event loop keeps running
(the API starts and the starter model is registered behind it); "Start chatting" lands in a
new chat with the composer focused.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, replace
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QVBoxLayout, QWidget

NETWORK_PROMISE = ("Nothing is contacted over the network unless you open Discover on the Models page "
                   "(it lists models from Hugging Face), search for or download a model.")

# The starter model's state, as the welcome tells it: it says "ready" only once the model is.
LOADING, READY, FAILED = "loading", "ready", "failed"


@dataclass(frozen=True)
class WelcomeFacts:
    starter_model: str | None  # the starter model's name, None when this install has none
    database: Path  # where chats are stored
    api_url: str | None  # None when the API is off in the settings
    model_state: str = LOADING  # LOADING, READY or FAILED
    progress: float = 0.0  # how far loading has come, 0..1


def _model_sentence(facts: WelcomeFacts) -> str:
    name = f"<b>{html.escape(facts.starter_model or '')}</b>, a small model that comes with Inglenook,"
    if facts.model_state == READY:
        return f"{name} is ready: ask it something now, offline. Find bigger models under <b>Models</b>."
    if facts.model_state == FAILED:
        return (f"{name} could not be loaded; the chat will say why. Find other models under "
                "<b>Models</b>.")
    done = f" ({int(facts.progress * 100)}%)" if facts.progress > 0 else ""
    return (f"{name} is loading{done}. You can type your first question meanwhile; the answer "
            "starts once loading ends, offline. Find bigger models under <b>Models</b>.")


def welcome_html(facts: WelcomeFacts) -> str:
    if facts.starter_model:
        model = _model_sentence(facts)
    else:
        model = "This installation has no starter model: add one under <b>Models</b> (search, download or import)."
    if facts.api_url:
        api = (f"Other programs can use the same models through the local OpenAI-compatible API at "
               f"<code>{html.escape(facts.api_url)}</code> (this computer only). Turn it off in "
               "<b>Settings → API server</b>.")
    else:
        api = "The local OpenAI-compatible API is off; turn it on in <b>Settings → API server</b>."
    return (
        "<p>Inglenook runs language models on this computer. Your chats stay here.</p>"
        f"<p>{model}</p>"
        f"<p>Chats are stored in <code>{html.escape(str(facts.database))}</code>.</p>"
        f"<p>{api}</p>"
        f"<p>{html.escape(NETWORK_PROMISE)}</p>"
    )


class WelcomeDialog(QDialog):
    def __init__(self, facts: WelcomeFacts, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("WelcomeDialog")
        self.facts = facts
        self.setWindowTitle("Welcome to Inglenook")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 20, 24, 16)
        heading = QLabel("Welcome to Inglenook", self)
        heading.setObjectName("PageTitle")
        self.body = QLabel(welcome_html(facts), self)
        self.body.setObjectName("WelcomeText")
        self.body.setWordWrap(True)
        self.body.setTextFormat(Qt.TextFormat.RichText)
        self.body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        buttons = QDialogButtonBox(self)
        self.start_button = buttons.addButton("Start chatting", QDialogButtonBox.ButtonRole.AcceptRole)
        self.start_button.setDefault(True)
        buttons.accepted.connect(self.accept)
        layout.addWidget(heading)
        layout.addWidget(self.body)
        layout.addWidget(buttons)
        self.setMinimumWidth(520)

    def set_model_state(self, state: str, progress: float = 0.0) -> None:
        """The starter model's load state changed: say it (``LOADING``, ``READY``, ``FAILED``)."""
        self.facts = replace(self.facts, model_state=state, progress=progress)
        self.body.setText(welcome_html(self.facts))
