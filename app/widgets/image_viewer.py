"""Pictures in the window: thumbnails (a composer chip, a row in a user message) and the
viewer a click opens.

A ``Picture`` is a thumbnail, already scaled, plus a way to read the whole image: thumbnails
are made on a worker lane (decoding a file is disk and CPU work the GUI thread never waits
on), and the whole image is read on a lane again when the viewer opens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QIcon, QImage, QPixmap
from PySide6.QtWidgets import QDialog, QHBoxLayout, QLabel, QScrollArea, QToolButton, QVBoxLayout, QWidget

from inglenook.engine import ImageInput, StoredImage

THUMBNAIL = 96  # the longer side of a thumbnail, in pixels
VIEWER_MARGIN = 120  # the viewer leaves this much of the screen around it


@dataclass(frozen=True)
class Picture:
    thumbnail: QImage
    label: str  # "640×480", for tooltips and the viewer's title
    full: Callable[[], QImage]  # reads the whole image: call it on a lane


def image_of(image: ImageInput) -> QImage:
    """An ``ImageInput``'s pixels as a QImage of its own (not sharing the bytes)."""
    return QImage(image.rgb, image.width, image.height, image.width * 3, QImage.Format.Format_RGB888).copy()


def thumbnail_of(image: QImage, side: int = THUMBNAIL) -> QImage:
    return image.scaled(side, side, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation)


def picture_of_input(image: ImageInput) -> Picture:
    """A picture of an image about to be sent (its pixels are in memory)."""
    whole = image_of(image)
    return Picture(thumbnail_of(whole), f"{image.width}×{image.height}", lambda: whole)


def picture_of_stored(stored: StoredImage) -> Picture:
    """A picture of an image kept with a message (read from its file: call on a lane)."""
    path: Path = stored.path
    whole = QImage(str(path))
    thumbnail = thumbnail_of(whole) if not whole.isNull() else QImage()
    return Picture(thumbnail, f"{stored.width}×{stored.height}", lambda: QImage(str(path)))


def thumbnail_button(picture: Picture, parent: QWidget, side: int = THUMBNAIL) -> QToolButton:
    """A flat button showing ``picture``'s thumbnail (its size, not stretched)."""
    button = QToolButton(parent)
    button.setObjectName("ImageThumbnail")
    button.setAutoRaise(True)
    button.setCursor(Qt.CursorShape.PointingHandCursor)
    button.setToolTip(f"Image, {picture.label}: click to see it larger")
    if picture.thumbnail.isNull():
        button.setText("image missing")
        button.setToolTip("This image's file is missing from the data folder")
    else:
        size = picture.thumbnail.size().scaled(QSize(side, side), Qt.AspectRatioMode.KeepAspectRatio)
        button.setIcon(QIcon(QPixmap.fromImage(picture.thumbnail)))
        button.setIconSize(size)
        button.setFixedSize(size + QSize(6, 6))
    return button


class ThumbnailRow(QWidget):
    """A message's pictures in a row; a click asks for the viewer."""

    picture_clicked = Signal(object)  # a Picture

    def __init__(self, pictures: list[Picture], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 4)
        row.setSpacing(6)
        self.buttons: list[QToolButton] = []
        for picture in pictures:
            button = thumbnail_button(picture, self)
            button.clicked.connect(lambda _=False, p=picture: self.picture_clicked.emit(p))
            row.addWidget(button)
            self.buttons.append(button)
        row.addStretch(1)


class ImageViewer(QDialog):
    """One image, as large as the screen allows (never enlarged past its own size)."""

    def __init__(self, image: QImage, label: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ImageViewer")
        self.setWindowTitle(f"Image · {label}")
        self.image = image
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.picture = QLabel(scroll)
        self.picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        scroll.setWidget(self.picture)
        layout.addWidget(scroll, 1)
        caption = QLabel(f"{image.width()}×{image.height()} pixels, as the model reads it", self)
        caption.setObjectName("ImageViewerCaption")
        layout.addWidget(caption)
        screen = (parent.screen() if parent is not None else self.screen()).availableSize()
        fit = QSize(max(200, screen.width() - VIEWER_MARGIN), max(200, screen.height() - VIEWER_MARGIN))
        shown = image if image.width() <= fit.width() and image.height() <= fit.height() else image.scaled(
            fit, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation)
        self.picture.setPixmap(QPixmap.fromImage(shown))
        self.resize(max(320, shown.width() + 40), max(240, shown.height() + 70))
