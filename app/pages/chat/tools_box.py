"""The chat settings panel's tool switches: which MCP servers' tools this chat offers its model.

Reading the switches runs on the disk lane and listing a server's tools (which starts it) on
the network lane; a reply for a chat the person has since left is dropped.
"""

from __future__ import annotations

import functools

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QCheckBox, QLabel, QVBoxLayout, QWidget

from inglenook.engine import ChatService

from inglenook.app.services.operations import Operations


class ChatToolsBox(QWidget):
    """The chat settings panel's switches: which servers' tools this chat offers its model.
    ``tools_listed`` names those tools (their servers started on the network lane) for the
    panel's tool choice."""

    tools_listed = Signal(list)  # the names the model sees the chat's tools by

    def __init__(self, chats: ChatService, operations: Operations, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.chats = chats
        self.operations = operations
        self.conversation_id: int | None = None
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self.boxes: dict[str, QCheckBox] = {}
        self.hint = QLabel("No tool servers yet: Settings → Tools adds them.", self)
        self.hint.setObjectName("PageHint")
        self.hint.setWordWrap(True)
        self._layout.addWidget(self.hint)

    def load(self, conversation_id: int | None) -> None:
        """Show ``conversation_id``'s switches; None: a new chat's, all off, which work all the
        same (``chosen`` is what its first message creates it with)."""
        self.conversation_id = conversation_id
        chats = self.chats

        def read() -> tuple[list[str], list[str]]:
            names = [c.name for c in chats.tools.servers.all() if c.enabled]
            return names, chats.chat_tools(conversation_id) if conversation_id is not None else []

        self.operations.run("disk", read, functools.partial(self._fill, conversation_id))

    def chosen(self) -> list[str]:
        """The servers switched on for this chat now."""
        return [name for name, box in self.boxes.items() if box.isChecked()]

    def show_planned(self, servers: list[str]) -> None:
        """A new chat's boxes ticked for the servers it will start with (an assistant's)."""
        for name, box in self.boxes.items():
            box.blockSignals(True)
            box.setChecked(name in servers)
            box.blockSignals(False)
        self._list_tools(self.chosen())

    def _fill(self, conversation_id: int | None, found: tuple[list[str], list[str]]) -> None:
        if conversation_id != self.conversation_id:
            return  # another chat was opened meanwhile; its own read follows
        names, chosen = found
        for box in self.boxes.values():
            box.deleteLater()
        self.boxes = {}
        for name in names:
            box = QCheckBox(f"Tools of {name}", self)
            box.setChecked(name in chosen)
            box.toggled.connect(self._changed)
            self._layout.addWidget(box)
            self.boxes[name] = box
        self.hint.setVisible(not names)
        self._list_tools([name for name in names if name in chosen])

    def _list_tools(self, servers: list[str]) -> None:
        cid, chats = self.conversation_id, self.chats
        if not servers:
            self.tools_listed.emit([])
            return

        def listed(names: list[str]) -> None:
            if cid == self.conversation_id:  # not a chat the person has left meanwhile
                self.tools_listed.emit(names)

        self.operations.run("network", lambda: list(chats.tools.tools_for(servers).tools), listed)

    def _changed(self, _on: bool) -> None:
        cid, chosen = self.conversation_id, self.chosen()
        if cid is not None:  # a new chat's switches are kept here until its first message creates it
            chats = self.chats
            self.operations.run("disk", lambda: chats.set_chat_tools(cid, chosen))
        self._list_tools(chosen)
