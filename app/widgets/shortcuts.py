"""Every keyboard shortcut, in one table: the window binds the ones it owns from it, the menus
show them beside their items, and Help → Keyboard shortcuts lists them all."""

from __future__ import annotations

import html
from dataclasses import dataclass

from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QVBoxLayout, QWidget


@dataclass(frozen=True)
class Shortcut:
    keys: str  # portable QKeySequence text ("Ctrl+N"); shown in the platform's own words
    what: str


NEW_CHAT = Shortcut("Ctrl+N", "New chat")
SEARCH = Shortcut("Ctrl+F", "Search chats")
TOGGLE_SIDEBAR = Shortcut("Ctrl+B", "Hide or show the chat list")
SETTINGS = Shortcut("Ctrl+,", "Settings")
COPY_ANSWER = Shortcut("Ctrl+Shift+C", "Copy the last answer")
ESCAPE = Shortcut("Esc", "Stop the answer; leave voice mode; in the search box, clear the search; close floating chat settings")
QUIT = Shortcut("Ctrl+Q", "Quit")
DICTATE = Shortcut("Ctrl+Shift+M", "Dictate: start or stop the microphone")
VOICE_MODE = Shortcut("Ctrl+Shift+V", "Voice mode: talk and hear the answers (Esc leaves it)")

# The sheet, by where a person is when they need them.
SHEET: tuple[tuple[str, tuple[Shortcut, ...]], ...] = (
    ("Chats", (NEW_CHAT, SEARCH, Shortcut("F2", "Rename the selected chat"), TOGGLE_SIDEBAR)),
    ("Writing", (
        Shortcut("Enter", "Send"),
        Shortcut("Shift+Enter", "New line"),
        Shortcut("Up", "In an empty message box: the last question again"),
        ESCAPE,
        COPY_ANSWER,
    )),
    ("Voice", (DICTATE, VOICE_MODE)),
    ("Inglenook", (SETTINGS, QUIT)),
)


def shown(keys: str) -> str:
    """The keys as this platform writes them (⌘N on a Mac, Ctrl+N elsewhere)."""
    return QKeySequence(keys).toString(QKeySequence.SequenceFormat.NativeText)


def menu_text(label: str, shortcut: Shortcut) -> str:
    """A menu item's text with its shortcut in the menu's right-hand column (the tab puts it
    there without binding it again: the window's own shortcut stays the only one)."""
    return f"{label}\t{shown(shortcut.keys)}"


def sheet_html() -> str:
    parts = []
    for section, shortcuts in SHEET:
        rows = "".join(f"<tr><td style='padding:2px 18px 2px 0'><b>{html.escape(shown(s.keys))}</b></td>"
                       f"<td>{html.escape(s.what)}</td></tr>" for s in shortcuts)
        parts.append(f"<h4>{html.escape(section)}</h4><table>{rows}</table>")
    return "".join(parts)


class ShortcutsDialog(QDialog):
    """Help → Keyboard shortcuts."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 16, 24, 14)
        self.body = QLabel(sheet_html(), self)
        self.body.setWordWrap(True)
        layout.addWidget(self.body)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.setMinimumWidth(460)
