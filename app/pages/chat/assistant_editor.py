"""The assistant editor: an assistant's name, description, system prompt, the MCP tool servers
switched on in its chats and the document collections attached to them.

Sampling and the model are not edited here: they come from the chat settings the assistant
was saved from (or the assistant being edited) and are kept as they are, summed up in a line.
A server or collection the assistant names that is not set up on this machine (an imported
assistant) stays listed, marked, so saving does not silently drop it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from inglenook.engine import Assistant, AssistantLibrary, InglenookError

NAME_ROLE = Qt.ItemDataRole.UserRole
NOT_HERE = "  (not set up here)"


@dataclass(frozen=True)
class Choices:
    """What this machine has for an assistant to name."""

    tool_servers: tuple[str, ...] = ()
    collections: tuple[str, ...] = ()


def _summary(assistant: Assistant) -> str:
    parts = [f"{key.replace('_', ' ')} {value}" for key, value in sorted(assistant.sampling.items())
             if isinstance(value, (int, float, str))]
    sampling = ", ".join(parts) if parts else "the default sampling"
    model = assistant.model_id or "the default model"
    return f"Runs {model} with {sampling}."


class AssistantEditor(QDialog):
    """Edits one assistant; ``saved`` holds what was saved once accepted."""

    def __init__(self, library: AssistantLibrary, assistant: Assistant, choices: Choices,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.library = library
        self.original = assistant
        self.saved: Assistant | None = None
        self.setWindowTitle("Edit assistant" if assistant.name else "New assistant")
        self.setMinimumWidth(460)
        layout = QVBoxLayout(self)
        form = QFormLayout()
        self.name = QLineEdit(assistant.name, self)
        self.name.setPlaceholderText("Tutor, Translator, Code reviewer…")
        self.description = QLineEdit(assistant.description, self)
        self.description.setPlaceholderText("A few words shown in the list")
        form.addRow("Name", self.name)
        form.addRow("Description", self.description)
        layout.addLayout(form)
        layout.addWidget(self._heading("SYSTEM PROMPT"))
        self.system_prompt = QPlainTextEdit(assistant.system_prompt, self)
        self.system_prompt.setPlaceholderText("You are a helpful assistant…")
        self.system_prompt.setFixedHeight(120)
        layout.addWidget(self.system_prompt)
        self.tool_servers = self._checklist(
            layout, "TOOLS SWITCHED ON IN ITS CHATS", choices.tool_servers, assistant.tool_servers,
            "No tool servers yet: Settings → Tools adds them.")
        self.collections = self._checklist(
            layout, "DOCUMENTS ATTACHED TO ITS CHATS", choices.collections, assistant.collections,
            "No document collections yet: the terminal's inglenook docs add makes them.")
        kept = QLabel(_summary(assistant), self)
        kept.setObjectName("PageHint")
        kept.setWordWrap(True)
        layout.addWidget(kept)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.accepted.connect(self.save)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    def _checklist(self, layout: QVBoxLayout, title: str, available: tuple[str, ...], chosen: tuple[str, ...],
                   empty: str) -> QListWidget:
        layout.addSpacing(4)
        layout.addWidget(self._heading(title))
        names = list(dict.fromkeys([*available, *chosen]))
        checklist = QListWidget(self)
        for name in names:
            item = QListWidgetItem(name + ("" if name in available else NOT_HERE))
            item.setData(NAME_ROLE, name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if name in chosen else Qt.CheckState.Unchecked)
            if name not in available:
                item.setToolTip("Named by this assistant but not set up on this computer; skipped when a chat starts")
            checklist.addItem(item)
        row = checklist.sizeHintForRow(0) if names else 0
        checklist.setFixedHeight(min(6, len(names)) * row + 2 * checklist.frameWidth() + 4)
        checklist.setVisible(bool(names))
        layout.addWidget(checklist)
        if not names:
            hint = QLabel(empty, self)
            hint.setObjectName("PageHint")
            hint.setWordWrap(True)
            layout.addWidget(hint)
        return checklist

    def _heading(self, text: str) -> QLabel:
        label = QLabel(text, self)
        label.setObjectName("FieldLabel")  # as the chat settings panel's headings
        return label

    @staticmethod
    def checked(checklist: QListWidget) -> tuple[str, ...]:
        return tuple(str(checklist.item(row).data(NAME_ROLE)) for row in range(checklist.count())
                     if checklist.item(row).checkState() == Qt.CheckState.Checked)

    def edited(self) -> Assistant:
        return replace(self.original, name=self.name.text().strip(), description=self.description.text().strip(),
                       system_prompt=self.system_prompt.toPlainText().strip(),
                       tool_servers=self.checked(self.tool_servers), collections=self.checked(self.collections),
                       builtin=False)

    def save(self) -> None:
        edited = self.edited()
        try:
            self.saved = self.library.save(edited)
            renamed = self.original.name and self.original.name.casefold() != edited.name.casefold()
            if renamed and not self.original.builtin:
                self.library.delete(self.original.name)  # a rename, not a copy
        except InglenookError as exc:
            QMessageBox.warning(self, "Assistant not saved", str(exc))
            return
        self.accept()
