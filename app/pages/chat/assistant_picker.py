"""The assistant picker at the top of Chat settings: choose a named preset (system prompt,
sampling, model, tool servers, document collections), save the current settings as one, edit
one (``assistant_editor``), delete one, export or import them as JSON.

The library is a single JSON value in the settings table, read and written in well under a
millisecond, so these calls run on the GUI thread like the settings dialog's own. What the
editor offers to choose from (the configured tool servers and collections) is read by
``read_choices`` through ``run_read``, the window's disk lane.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QInputDialog,
    QMenu,
    QMessageBox,
    QToolButton,
    QWidget,
)

from inglenook.engine import Assistant, AssistantLibrary, InglenookError

from inglenook.app.pages.chat.assistant_editor import AssistantEditor, Choices

log = logging.getLogger(__name__)

PICK = "Choose an assistant…"

#: ``run_read(read, done)``: ``read`` off the GUI thread, then ``done(result)`` on it.
ReadRunner = Callable[[Callable[[], Choices], Callable[[Choices], None]], None]


def describe(assistant: Assistant) -> str:
    """The tooltip of an assistant in the list: what it is and what it brings to a chat."""
    lines = [assistant.description or assistant.system_prompt[:200] or "No system prompt"]
    if assistant.tool_servers:
        lines.append("Tools: " + ", ".join(assistant.tool_servers))
    if assistant.collections:
        lines.append("Documents: " + ", ".join(assistant.collections))
    return "\n".join(lines)


class AssistantPicker(QWidget):
    chosen = Signal(object)  # the Assistant picked: the panel takes its settings

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.library: AssistantLibrary | None = None
        # The panel's system prompt and sampling as they are now, for "Save as".
        self.current_settings: Callable[[], tuple[str, dict[str, Any]]] = lambda: ("", {})
        # The servers whose tools the open chat offers, saved with "Save as" too.
        self.current_tools: Callable[[], list[str]] = lambda: []
        self.read_choices: Callable[[], Choices] = Choices
        self.run_read: ReadRunner = lambda read, done: done(read())
        self.editor: AssistantEditor | None = None
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(4)
        self.combo = QComboBox(self)
        self.combo.setToolTip("A named system prompt with its settings; picking one fills them in")
        self.combo.activated.connect(self._picked)
        self.more = QToolButton(self)
        self.more.setObjectName("MessageAction")
        self.more.setText("⋯")
        self.more.setToolTip("Save, delete, export or import assistants")
        self.more.setCursor(Qt.CursorShape.PointingHandCursor)
        self.more.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.more)
        menu.addAction("Save these settings as an assistant…", self.save_current)
        self.edit_action = menu.addAction("Edit the chosen assistant…", self.edit_chosen)
        self.delete_action = menu.addAction("Delete the chosen assistant", self.delete_chosen)
        menu.addSeparator()
        menu.addAction("Export assistants…", self.export)
        menu.addAction("Import assistants…", self.import_file)
        self.more.setMenu(menu)
        row.addWidget(self.combo, 1)
        row.addWidget(self.more)

    def set_library(self, library: AssistantLibrary) -> None:
        self.library = library
        self.refresh()

    def refresh(self, select: str | None = None) -> None:
        self.combo.blockSignals(True)
        try:
            self.combo.clear()
            self.combo.addItem(PICK, None)
            for assistant in self.library.all() if self.library is not None else []:
                self.combo.addItem(assistant.name, assistant)
                self.combo.setItemData(self.combo.count() - 1, describe(assistant), Qt.ItemDataRole.ToolTipRole)
            index = self.combo.findText(select) if select else 0
            self.combo.setCurrentIndex(max(0, index))
        finally:
            self.combo.blockSignals(False)

    def _picked(self, index: int) -> None:
        assistant = self.combo.itemData(index)
        if isinstance(assistant, Assistant):
            self.chosen.emit(assistant)

    def _chosen(self) -> Assistant | None:
        assistant = self.combo.currentData()
        return assistant if isinstance(assistant, Assistant) else None

    # -- the menu ------------------------------------------------------------------------

    def save_current(self) -> None:
        if self.library is None:
            return
        chosen = self._chosen()
        suggested = chosen.name if chosen is not None else ""
        name, accepted = QInputDialog.getText(self, "Save as an assistant", "Name:", text=suggested)
        if not accepted or not name.strip():
            return
        prompt, sampling = self.current_settings()
        kept = self.library.get(name) if self._exists(name) else None  # saved over: keep its documents
        collections = kept.collections if kept is not None else ()
        try:
            saved = self.library.save(Assistant(name.strip(), prompt, sampling, tool_servers=tuple(self.current_tools()),
                                                collections=collections))
        except InglenookError as exc:
            QMessageBox.warning(self, "Assistant not saved", str(exc))
            return
        self.refresh(select=saved.name)

    def _exists(self, name: str) -> bool:
        return self.library is not None and any(a.name.casefold() == name.strip().casefold() for a in self.library.all())

    def edit_chosen(self) -> None:
        """Open the editor on the chosen assistant (or on the chat's settings when none is
        chosen), once what it offers to choose from is read."""
        if self.library is None:
            return
        chosen = self._chosen()
        if chosen is None:
            prompt, sampling = self.current_settings()
            chosen = Assistant("", prompt, sampling, tool_servers=tuple(self.current_tools()))
        self.run_read(self.read_choices, lambda choices: self._open_editor(chosen, choices))

    def _open_editor(self, assistant: Assistant, choices: Choices) -> None:
        if self.library is None:
            return
        self.editor = AssistantEditor(self.library, assistant, choices, self)
        self.editor.accepted.connect(self._edited)
        self.editor.open()

    def _edited(self) -> None:
        editor = self.editor
        if editor is None or editor.saved is None:
            return
        self.refresh(select=editor.saved.name)
        self.chosen.emit(editor.saved)  # the open chat takes the edited assistant at once

    def delete_chosen(self) -> None:
        chosen = self._chosen()
        if self.library is None or chosen is None:
            return
        if not self.library.delete(chosen.name):
            QMessageBox.information(self, "Built-in assistant", f"{chosen.name} ships with Inglenook and stays.")
        self.refresh()

    def export(self) -> None:
        if self.library is None:
            return
        path, _ = QFileDialog.getSaveFileName(self, "Export assistants", "assistants.json", "JSON (*.json)")
        if path:
            Path(path).write_text(self.library.export_json(), encoding="utf-8")

    def import_file(self) -> None:
        if self.library is None:
            return
        path, _ = QFileDialog.getOpenFileName(self, "Import assistants", "", "JSON (*.json)")
        if not path:
            return
        try:
            imported = self.library.import_json(Path(path).read_text(encoding="utf-8", errors="replace"))
        except (InglenookError, OSError) as exc:
            QMessageBox.warning(self, "Nothing imported", str(exc))
            return
        self.refresh(select=imported[0].name)
