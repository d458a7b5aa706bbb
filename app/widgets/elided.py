"""A label and a push button that shorten their text with "…" to the room they get.

``text()`` stays the whole text (tests, tooltips and callers read it); only the painting is
shortened. Their minimum size is small so a narrow window can squeeze them, and the
``elided`` property tells the layout check (tests/gui/layout_check.py) that a width below the
text's is intended, not a clipped word.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import QLabel, QPushButton, QStyle, QStyleOptionButton, QStylePainter, QWidget

MIN_CHARS = 8  # the least a squeezed label keeps readable, in average character widths


class ElidedLabel(QLabel):
    """A one-line label that ends in "…" when it is narrower than its text."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self.setProperty("elided", True)
        self.setWordWrap(False)

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        hint = super().minimumSizeHint()
        margins = self.contentsMargins()
        floor = self.fontMetrics().averageCharWidth() * MIN_CHARS + margins.left() + margins.right()
        return QSize(min(hint.width(), floor), hint.height())

    def is_elided(self) -> bool:
        return self.fontMetrics().horizontalAdvance(self.text()) > self.contentsRect().width()

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802
        if not self.is_elided():
            super().paintEvent(event)
            return
        painter = QPainter(self)
        rect = self.contentsRect()
        shown = self.fontMetrics().elidedText(self.text(), Qt.TextElideMode.ElideRight, rect.width())
        self.style().drawItemText(painter, rect, int(self.alignment()), self.palette(), self.isEnabled(), shown,
                                  QPalette.ColorRole.WindowText)
        painter.end()

    def setText(self, text: str) -> None:  # noqa: N802
        super().setText(text)
        self.setToolTip(text)


class ElidedButton(QPushButton):
    """A push button whose text ends in "…" when the button is narrower than it."""

    def __init__(self, text: str = "", parent: QWidget | None = None, min_width: int = 120, keep: str = "") -> None:
        super().__init__(text, parent)
        self.setProperty("elided", True)
        self._min_width = min_width
        self._keep = keep  # an ending that stays whole (the picker's "▾"): the text before it is shortened

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        hint = super().minimumSizeHint()
        return QSize(min(hint.width(), self._min_width), hint.height())

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802
        option = QStyleOptionButton()
        self.initStyleOption(option)
        contents = self.style().subElementRect(QStyle.SubElement.SE_PushButtonContents, option, self)
        room = contents.width() - (option.iconSize.width() + 4 if not option.icon.isNull() else 0)
        text, metrics = self.text(), self.fontMetrics()
        if metrics.horizontalAdvance(text) > room:
            keep = self._keep if self._keep and text.endswith(self._keep) else ""
            head = text[: len(text) - len(keep)] if keep else text
            room -= metrics.horizontalAdvance(keep)
            text = metrics.elidedText(head.rstrip(), Qt.TextElideMode.ElideRight, max(0, room)) + keep
        option.text = text
        painter = QStylePainter(self)
        painter.drawControl(QStyle.ControlElement.CE_PushButton, option)
