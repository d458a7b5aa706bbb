"""Light and dark themes: one style sheet template (resources/inglenook.qss), two palettes."""

from __future__ import annotations

import string

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

from inglenook.app.services.resources import read_resource

LIGHT = {
    "bg": "#ffffff", "sidebar": "#f7f7f9", "surface": "#ffffff", "input": "#ffffff",
    "border": "#e4e4ea", "text": "#1c1c22", "muted": "#6e6e7a", "accent": "#5b5bd6",
    "accent_hover": "#4c4cc4", "accent_soft": "#ecebff", "on_accent": "#ffffff",
    "user_bubble": "#f0f0f6", "hover": "#eeeef3", "selected": "#e6e6f6", "disabled": "#e4e4ea",
    "code_bg": "#f8f8fb", "code_header": "#efeff4", "scroll": "#cfcfd8", "danger": "#c62f3a",
    "warn_bg": "#fff7e8", "warn_border": "#f3d7a3", "link": "#4c4cc4", "quote": "#d6d6e0",
}
DARK = {
    "bg": "#18181c", "sidebar": "#121215", "surface": "#202026", "input": "#202026",
    "border": "#2e2e36", "text": "#e9e9ef", "muted": "#9c9caa", "accent": "#8080f2",
    "accent_hover": "#9191f6", "accent_soft": "#2a2a48", "on_accent": "#ffffff",
    "user_bubble": "#26262e", "hover": "#25252c", "selected": "#2c2c40", "disabled": "#2e2e36",
    "code_bg": "#111114", "code_header": "#1c1c22", "scroll": "#3a3a44", "danger": "#ff6b74",
    "warn_bg": "#2d2619", "warn_border": "#5c4a25", "link": "#a3a3ff", "quote": "#3a3a46",
}
# Pygments styles that suit each palette.
CODE_STYLES = {"light": "friendly", "dark": "monokai"}

FONT_FAMILIES = ["Inter", "Segoe UI", "SF Pro Text", "Helvetica Neue", "Cantarell", "Noto Sans", "DejaVu Sans"]
MONO_FAMILIES = ["JetBrains Mono", "Cascadia Code", "SF Mono", "Menlo", "Consolas", "DejaVu Sans Mono", "monospace"]


def system_prefers_dark() -> bool:
    hints = QGuiApplication.styleHints()
    return hints.colorScheme() == Qt.ColorScheme.Dark


def resolve_mode(theme: str) -> str:
    """'light' or 'dark' for a setting of light, dark or system."""
    if theme in ("light", "dark"):
        return theme
    return "dark" if system_prefers_dark() else "light"


def colors(mode: str) -> dict[str, str]:
    return DARK if mode == "dark" else LIGHT


def mono_font(point_size: float = 9.5) -> QFont:
    font = QFont()
    font.setFamilies(MONO_FAMILIES)
    font.setStyleHint(QFont.StyleHint.Monospace)
    font.setPointSizeF(point_size)
    return font


def apply_theme(app: QApplication, theme: str) -> str:
    """Style the whole application; returns the mode used ('light' or 'dark')."""
    mode = resolve_mode(theme)
    c = colors(mode)
    app.setStyle("Fusion")
    font = QFont()
    font.setFamilies(FONT_FAMILIES)
    font.setPointSizeF(10)
    app.setFont(font)
    palette = QPalette()
    for role, key in (
        (QPalette.ColorRole.Window, "bg"), (QPalette.ColorRole.Base, "input"),
        (QPalette.ColorRole.AlternateBase, "sidebar"), (QPalette.ColorRole.Text, "text"),
        (QPalette.ColorRole.WindowText, "text"), (QPalette.ColorRole.Button, "surface"),
        (QPalette.ColorRole.ButtonText, "text"), (QPalette.ColorRole.Highlight, "accent"),
        (QPalette.ColorRole.HighlightedText, "on_accent"), (QPalette.ColorRole.Link, "link"),
        (QPalette.ColorRole.ToolTipBase, "surface"), (QPalette.ColorRole.ToolTipText, "text"),
        (QPalette.ColorRole.PlaceholderText, "muted"),
    ):
        palette.setColor(role, QColor(c[key]))
    app.setPalette(palette)
    app.setStyleSheet(string.Template(read_resource("inglenook.qss")).safe_substitute(c))
    app.setProperty("inglenook_theme", mode)
    return mode


def current_mode(app: QApplication | None = None) -> str:
    found = app or QApplication.instance()  # any QCoreApplication carries the property
    mode = found.property("inglenook_theme") if found is not None else None
    return mode if mode in ("light", "dark") else "light"
