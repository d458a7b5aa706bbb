"""What the next message carries: the message box's text, the chat's documents and the images
waiting under the box; and sending them together.

The composer asks to send; this controller checks the waiting images can go (the chat's model
reads images, or the person chose to send without them), takes them and hands text and images
to ``ActiveChat``, which knows the conversation on screen. Documents belong to the chat rather
than to one message (``Attachments`` keeps them in step); image files dropped among them come
here. So ``ActiveChat`` never asks for the images, and the images never reach the chat: nothing
here needs a setter to be told who the other is.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject


from inglenook.app.services.app_engine import AppEngine
from inglenook.app.controllers.active_chat import ActiveChat
from inglenook.app.controllers.documents import Attachments
from inglenook.app.controllers.images import WaitingImages
from inglenook.app.controllers.model_list import ModelList
from inglenook.app.pages.chat.page import ChatPage
from inglenook.app.services.workers import Workers

log = logging.getLogger(__name__)


class NextMessage(QObject):
    """The next message's text, documents and images, sent as one."""

    def __init__(self, engine: AppEngine, workers: Workers, page: ChatPage, active: ActiveChat, models: ModelList,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.page = page
        self.active = active
        bar = page.attachment_bar
        self.images = WaitingImages(engine, workers, bar, page, models, self)
        self.documents = Attachments(engine, workers, bar, active, self.images.add_paths, self)
        page.send_requested.connect(self.send)
        page.suggestion_chosen.connect(self.send)
        page.picture_clicked.connect(self.images.show_picture)
        self.images.send_wanted.connect(self.send)
        self.images.model_switched.connect(active.choose_model)
        active.current_changed.connect(lambda _cid: self.images.check_model())

    def send(self, text: str) -> None:
        """Send ``text`` with the waiting images, unless the chat's model cannot read them:
        then the text stays in the box and the note under the images says why."""
        if not self.active.can_send(text):
            return
        if not self.images.ready_to_send():
            self.page.set_message_text(text.strip())  # kept: the note under the images says why it did not go
            return
        pictures = self.images.pictures()
        self.active.send(text, self.images.take(), pictures)
