"""Line icons from resources/icons, drawn in the theme's colours (and redrawn when it changes)."""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QSize, Qt
from PySide6.QtGui import QIcon, QPainter, QPixmap
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtWidgets import QAbstractButton, QWidget

from inglenook.app.widgets import theme
from inglenook.app.services.resources import read_resource

ICON_PROPERTY = "inglenook_icon"


def make_icon(name: str, color: str, size: int = 18) -> QIcon:
    svg = read_resource(f"icons/{name}.svg").replace("#000000", color)
    renderer = QSvgRenderer(QByteArray(svg.encode("utf-8")))
    pixmap = QPixmap(size * 2, size * 2)  # drawn at twice the size: crisp on high-DPI screens
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    renderer.render(painter)
    painter.end()
    pixmap.setDevicePixelRatio(2.0)
    return QIcon(pixmap)


def set_icon(button: QAbstractButton, name: str, color_key: str = "muted", size: int = 16) -> None:
    """Give ``button`` a themed icon; ``refresh`` redraws it after a theme change."""
    button.setProperty(ICON_PROPERTY, f"{name}|{color_key}|{size}")
    button.setIcon(make_icon(name, theme.colors(theme.current_mode())[color_key], size))
    button.setIconSize(QSize(size, size))


def refresh(root: QWidget) -> None:
    colors = theme.colors(theme.current_mode())
    for button in root.findChildren(QAbstractButton):
        spec = button.property(ICON_PROPERTY)
        if spec:
            name, key, size = str(spec).split("|")
            button.setIcon(make_icon(name, colors[key], int(size)))
