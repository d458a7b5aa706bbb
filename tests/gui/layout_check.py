"""Geometry checks for a laid-out window: what a person would see cut off or covered.

A widget is *clipped* when part of it lies outside its parent's rectangle (the parent paints
only inside itself, so that part is invisible), unless the parent is a scroll area's viewport
(its content is meant to be larger and scrolls). A button or label is *squeezed* when it is
narrower than the smallest size its text needs (Qt then cuts the text: "Edit" shows as "Ed").
Two visible siblings *overlap* when their rectangles intersect, unless one of them is an
overlay that is meant to float (marked with the ``overlay`` property).

The checks read geometry only, never pixels, so they hold under any style or font.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QRect, Qt
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractScrollArea,
    QAbstractSpinBox,
    QComboBox,
    QLabel,
    QLineEdit,
    QScrollBar,
    QWidget,
)

OVERLAY = "overlay"  # a widget property: this widget floats over its siblings on purpose


@dataclass(frozen=True)
class Problem:
    kind: str  # "clipped", "squeezed", "overlap", "scrolls sideways"
    widget: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.widget} — {self.detail}"


def describe(widget: QWidget) -> str:
    parts = []
    current: QWidget | None = widget
    while current is not None and len(parts) < 4:
        name = current.objectName() or type(current).__name__
        text = ""
        if isinstance(current, (QAbstractButton, QLabel)) and current.text():
            text = f"[{current.text()[:24]!r}]"
        parts.append(name + text)
        current = current.parentWidget()
    return " < ".join(parts)


def _in_scroll_viewport(widget: QWidget) -> bool:
    parent = widget.parentWidget()
    return parent is not None and isinstance(parent.parentWidget(), QAbstractScrollArea) and (
        parent.parentWidget().viewport() is parent  # type: ignore[union-attr]
    )


def _internal(widget: QWidget) -> bool:
    """Parts a Qt widget manages itself: scroll bars and their containers, the insides of a
    combo box, line edit or spin box. A scroll area's viewport and what it holds are ours."""
    if isinstance(widget, QScrollBar):
        return True
    parent = widget.parentWidget()
    if isinstance(parent, QAbstractScrollArea) and widget is not parent.viewport():
        return True
    while parent is not None:
        if isinstance(parent, (QComboBox, QLineEdit, QAbstractSpinBox, QScrollBar)):
            return True
        parent = parent.parentWidget()
    return False


def _visible_children(widget: QWidget) -> list[QWidget]:
    direct = Qt.FindChildOption.FindDirectChildrenOnly
    return [c for c in widget.findChildren(QWidget, options=direct) if c.isVisible() and not c.isWindow()]


def _needs_width(widget: QWidget) -> int:
    """The least width the widget's text needs; 0 when it elides or wraps on its own."""
    if isinstance(widget, QLabel):
        if widget.wordWrap() or not widget.text() or widget.property("elided"):
            return 0
        return widget.minimumSizeHint().width()
    if isinstance(widget, QAbstractButton) and widget.text():
        return widget.minimumSizeHint().width()
    return 0


def problems(root: QWidget) -> list[Problem]:
    """Every clipped, squeezed or overlapping visible widget under ``root``."""
    found: list[Problem] = []
    _walk(root, found)
    return found


def _walk(widget: QWidget, found: list[Problem]) -> None:
    children = _visible_children(widget)
    bounds = widget.rect()
    for child in children:
        if _internal(child):
            continue
        geometry = child.geometry()
        if not _in_scroll_viewport(child) and not bounds.contains(geometry):
            found.append(Problem("clipped", describe(child), f"{_rect(geometry)} outside its parent {_rect(bounds)}"))
        need = _needs_width(child)
        if need and child.width() + 1 < need:
            found.append(Problem("squeezed", describe(child), f"{child.width()} px wide, its text needs {need}"))
    if isinstance(widget, QAbstractScrollArea):
        content = widget.viewport().childrenRect()
        if (widget.horizontalScrollBarPolicy() == Qt.ScrollBarPolicy.ScrollBarAlwaysOff
                and content.width() > widget.viewport().width() + 1):
            found.append(Problem("scrolls sideways", describe(widget),
                                 f"content {content.width()} px in a {widget.viewport().width()} px view with no scroll bar"))
    laid = [c for c in children if not _internal(c) and not c.property(OVERLAY)]
    for i, first in enumerate(laid):
        for second in laid[i + 1:]:
            if second.property(OVERLAY):
                continue
            overlap = first.geometry().intersected(second.geometry())
            if overlap.width() > 1 and overlap.height() > 1:
                found.append(Problem("overlap", describe(first), f"{_rect(overlap)} shared with {describe(second)}"))
    for child in children:
        if not _internal(child):
            _walk(child, found)


def _rect(rect: QRect) -> str:
    return f"{rect.width()}x{rect.height()}+{rect.x()}+{rect.y()}"
