"""Images waiting to go with the next message: added by the + button's file dialog, by
dropping files on the message box, or by pasting; shown as chips; taken by the next send.

Files are read and decoded on the disk lane (``decode_image``: the engine's checks of size,
pixels and format, EXIF, downscaling), so the chip shows what the model will read. Whether
the chat's model can read images is asked on the disk lane too, whenever images wait or the
model changes: when it cannot, the chips' line says so and offers the installed models that
can, and ``ready_to_send`` refuses to send until the person switches or removes the images.
"""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from inglenook.engine import ImageInput, decode_image, read_image_file

from inglenook.app.services.app_engine import AppEngine
from inglenook.app.pages.chat.page import ChatPage
from inglenook.app.services.errors import explain
from inglenook.app.pages.chat.attachment_bar import AttachmentBar
from inglenook.app.widgets.image_viewer import ImageViewer, Picture, picture_of_input
from inglenook.app.controllers.model_list import ModelList
from inglenook.app.services.workers import Workers

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".webp", ".gif"})
MAX_WAITING = 8  # images one message may carry


def is_image_path(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_SUFFIXES


class WaitingImages(QObject):
    """The composer's images for the next message."""

    changed = Signal()  # chips or the model's note were redrawn (tests wait for it)
    models_wanted = Signal()  # "Models…" on the note: the window shows the Models page
    send_wanted = Signal(str)  # "Send without images": the message box's text, to send as it is
    model_switched = Signal(str)  # a vision model offered on the note was chosen for the chat

    def __init__(self, engine: AppEngine, workers: Workers, bar: AttachmentBar, page: ChatPage, models: ModelList,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine = engine
        self.workers = workers
        self.bar = bar
        self.page = page
        self.models = models
        self.images: list[tuple[ImageInput, Picture]] = []
        self.problem: str | None = None  # why the chat's model cannot read them (None: it can, or unknown)
        self.viewer: ImageViewer | None = None
        self._checked_model: str | None = None
        bar.image_remove_requested.connect(self.remove)
        bar.image_clicked.connect(self.show_picture)
        bar.model_offered.connect(self._switch)
        bar.send_without_images.connect(self.send_without)
        bar.models_wanted.connect(self.models_wanted)
        page.model_chosen.connect(lambda _m: self.check_model())
        page.image_pasted.connect(lambda data: self.add_bytes([(data, "the pasted image")]))

    # -- adding and removing -------------------------------------------------------------

    def add_paths(self, paths: list[Path]) -> None:
        def read() -> list[tuple[bytes, str]]:
            # Checked before it is read: a device or a 2 GB file is refused, not loaded.
            return [(read_image_file(path), path.name) for path in paths]

        self.workers.disk.run(read, self.add_bytes, self._failed)

    def add_bytes(self, items: list[tuple[bytes, str]]) -> None:
        def decode() -> list[tuple[ImageInput, Picture]]:
            return [(image, picture_of_input(image)) for image in (decode_image(data, what=name) for data, name in items)]

        self.workers.disk.run(decode, self._added, self._failed)

    def _added(self, decoded: list[tuple[ImageInput, Picture]]) -> None:
        room = MAX_WAITING - len(self.images)
        self.images.extend(decoded[:max(0, room)])
        self.bar.show_status("" if len(decoded) <= room else f"A message carries at most {MAX_WAITING} images")
        self._redraw()
        self.check_model(force=True)

    def remove(self, index: int) -> None:
        if 0 <= index < len(self.images):
            del self.images[index]
        self._redraw()
        if not self.images:
            self._note(None, [])

    def take(self) -> list[ImageInput]:
        """The waiting images, for the message being sent (the chips go)."""
        taken = [image for image, _picture in self.images]
        self.images = []
        self._redraw()
        self._note(None, [])
        return taken

    def pictures(self) -> list[Picture]:
        return [picture for _image, picture in self.images]

    # -- the chat's model ----------------------------------------------------------------

    def ready_to_send(self) -> bool:
        """False when images wait for a model known to read none: the note says why and
        offers the ways on (a vision model, sending without them, the Models page)."""
        if self.images and self.problem is not None:
            self.bar.vision_note.show()
            self.bar.show_status("Not sent: the chat's model cannot read the images.")
            return False
        return True

    def send_without(self) -> None:
        """Drop the waiting images and send what the message box holds."""
        self.take()
        self.bar.show_status("")
        text = self.page.message_text()
        if text.strip():
            self.page.set_message_text("")
            self.send_wanted.emit(text)

    def check_model(self, force: bool = False) -> None:
        model = self.page.shown_model()  # the chat's model as shown (switches show here first)
        if not self.images:
            self._checked_model = None
            self._note(None, [])
            return
        if model == self._checked_model and not force:
            return
        self._checked_model = model
        chats = self.engine.chats
        candidates = [m.id for m in self.models.models if m.id != model and not self.models.is_remote(m)]

        def ask() -> tuple[str | None, str | None, list[str]]:
            problem = chats.image_problem(model)
            offered = [m for m in candidates if chats.reads_images(m)] if problem is not None else []
            return model, problem, offered

        self.workers.disk.run(ask, self._checked, self._failed)

    def _checked(self, result: tuple[str | None, str | None, list[str]]) -> None:
        model, problem, offered = result
        if model != self._checked_model or not self.images:
            return  # the model changed again meanwhile; its own check follows
        self._note(problem, offered)

    def _note(self, problem: str | None, offered: list[str]) -> None:
        self.problem = problem
        if problem is None:
            self.bar.show_vision_problem("", [])
        else:
            who = problem.split(" is a text-only model", 1)[0].split(" cannot read images", 1)[0]
            these = "this image" if len(self.images) == 1 else "these images"
            text = f"{who} cannot read images, so {these} would not reach it."
            text += " Switch to a vision model:" if offered else (
                " No installed model reads images: a vision model has an mmproj-*.gguf beside it.")
            self.bar.show_vision_problem(text, offered)
        self.changed.emit()

    def _switch(self, model_id: str) -> None:
        self.page.show_model(model_id)
        self.model_switched.emit(model_id)
        self.check_model(force=True)

    # -- showing -------------------------------------------------------------------------

    def show_picture(self, picture: Picture) -> None:
        """The viewer for ``picture`` (its whole image read on the disk lane)."""
        def opened(image: object) -> None:
            from PySide6.QtGui import QImage  # noqa: PLC0415 — the lane hands back a QImage

            if isinstance(image, QImage) and not image.isNull():
                self.viewer = self.bar.open_viewer(image, picture.label)
                self.changed.emit()

        self.workers.disk.run(picture.full, opened, self._failed)

    def _redraw(self) -> None:
        self.bar.show_images(self.pictures())
        self.changed.emit()

    def _failed(self, exc: BaseException) -> None:
        log.info("an image could not be attached: %s", exc)
        self.bar.show_status(explain(exc).text)
        self.changed.emit()
