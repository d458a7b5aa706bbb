"""Settings → Tools: the MCP servers, their state and their tools (the per-chat
switches are pages/chat/tools_box.py).

Servers are added (by form or by pasting the ``mcpServers`` JSON other apps use) and removed
at once: their secrets go to the keyring, which must not wait for the dialog's Save. Starting
a server runs on the network lane; the list shows "starting", "ready · N tools" or "failed"
with the server's own stderr lines, or "needs sign-in" for a Streamable HTTP server that asks
for OAuth: then a Sign in button opens the browser (the URL is shown too) and a Sign out button
forgets the tokens. Each tool has a switch and its description, which is text
a stranger wrote that the model will read, so it is shown in full.
"""

from __future__ import annotations

import html
import json
import logging
import shlex
import webbrowser
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from inglenook.engine import (
    InglenookError, McpManager, McpServerConfig, other_app_configs, parse_mcp_servers,
)

from inglenook.app.services.errors import Explanation
from inglenook.app.services.operations import Operations

log = logging.getLogger(__name__)

SHOWN_URL_CHARS = 48  # a sign-in address's words in the status line (the link holds it whole)

NAME_ROLE = Qt.ItemDataRole.UserRole
TOOL_ROLE = Qt.ItemDataRole.UserRole + 1
STATE_ROLE = Qt.ItemDataRole.UserRole + 2  # the server's state, and whether a sign-in is kept
NEEDS_SIGN_IN = "needs sign-in"
API_COLUMN = 2


def state_words(state: Any) -> str:
    if state.state == "ready":
        count = len(state.tools)
        return f"ready · {count} tool{'' if count == 1 else 's'}"
    if state.state == "failed":
        return f"failed: {state.error}"
    if state.state == NEEDS_SIGN_IN:
        return "needs sign-in"
    return {"stopped": "not started", "starting": "starting…", "closed": "not started"}.get(state.state, state.state)


class ToolsPage(QWidget):
    def __init__(self, manager: McpManager, operations: Operations, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.manager = manager
        self.operations = operations
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.tree = QTreeWidget(self)
        self.tree.setObjectName("ToolsTree")
        self.tree.setHeaderLabels(["Server / tool", "State / description", "API clients"])
        self.tree.headerItem().setToolTip(API_COLUMN, "Let API clients (a Responses request naming the server) "
                                          "have Inglenook run its tools")
        self.tree.setColumnWidth(0, 220)
        header = self.tree.header()
        header.setStretchLastSection(False)  # the descriptions take the room, the API switch its own
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(API_COLUMN, QHeaderView.ResizeMode.ResizeToContents)
        self.tree.setWordWrap(True)
        self.tree.setMinimumHeight(200)
        self.tree.itemChanged.connect(self._tool_switched)
        self.tree.currentItemChanged.connect(lambda *_: self._show_sign_in_buttons())
        layout.addWidget(self.tree, 1)
        row = QHBoxLayout()
        self.start = QPushButton("Start and list tools", self)
        self.start.clicked.connect(self._start_selected)
        self.remove = QPushButton("Remove", self)
        self.remove.clicked.connect(self._remove_selected)
        self.sign_in = QPushButton("Sign in", self)
        self.sign_in.setToolTip("Sign in to this server in your browser (OAuth); the tokens go to the system keyring")
        self.sign_in.clicked.connect(self._sign_in_selected)
        self.sign_out = QPushButton("Sign out", self)
        self.sign_out.setToolTip("Forget this server's sign-in tokens")
        self.sign_out.clicked.connect(self._sign_out_selected)
        row.addWidget(self.start)
        row.addWidget(self.sign_in)
        row.addWidget(self.sign_out)
        row.addWidget(self.remove)
        row.addStretch(1)
        layout.addLayout(row)

        form = QHBoxLayout()
        self.name = QLineEdit(self)
        self.name.setPlaceholderText("name, e.g. time")
        self.target = QLineEdit(self)
        self.target.setPlaceholderText("command (uvx mcp-server-time) or URL (https://…/mcp)")
        self.add = QPushButton("Add", self)
        self.add.clicked.connect(self._add_form)
        form.addWidget(self.name)
        form.addWidget(self.target, 2)
        form.addWidget(self.add)
        layout.addLayout(form)
        self.pasted = QPlainTextEdit(self)
        self.pasted.setPlaceholderText('Or paste an mcpServers JSON: {"mcpServers": {"time": {"command": "uvx", '
                                       '"args": ["mcp-server-time"]}}}')
        self.pasted.setFixedHeight(90)
        layout.addWidget(self.pasted)
        buttons = QHBoxLayout()
        self.add_json = QPushButton("Add from JSON", self)
        self.add_json.clicked.connect(self._add_pasted)
        self.from_apps = QPushButton("Import from other apps…", self)
        self.from_apps.setToolTip("Read Claude Desktop's, Cursor's and LM Studio's MCP settings into the box above, "
                                  "to review before adding")
        self.from_apps.clicked.connect(self._read_other_apps)
        buttons.addWidget(self.add_json)
        buttons.addWidget(self.from_apps)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        self.message = QLabel("", self)
        self.message.setObjectName("PageHint")
        self.message.setWordWrap(True)
        self.message.setTextFormat(Qt.TextFormat.RichText)  # a sign-in address is a link
        self.message.setOpenExternalLinks(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        layout.addWidget(self.message)
        self._filling = False
        self._show_sign_in_buttons()
        self.refresh()

    # -- the list --------------------------------------------------------------------------

    def refresh(self) -> None:
        manager = self.manager

        def read() -> list[tuple[McpServerConfig, Any]]:
            return [(config, manager.state(config.name)) for config in manager.servers.all()]

        self.operations.run("disk", read, self._fill, self._show_failure)

    def _fill(self, found: list[tuple[McpServerConfig, Any]]) -> None:
        self._filling = True
        try:
            self.tree.clear()
            for config, state in found:
                item = QTreeWidgetItem([config.name, state_words(state)])
                item.setData(0, NAME_ROLE, config.name)
                item.setData(0, STATE_ROLE, (state.state, getattr(state, "signed_in", False)))
                item.setToolTip(0, config.target)
                if state.state == NEEDS_SIGN_IN:
                    item.setToolTip(1, "The server asks you to sign in: select it and press Sign in (your browser opens)")
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
                item.setCheckState(API_COLUMN, Qt.CheckState.Checked if config.allow_api else Qt.CheckState.Unchecked)
                item.setText(API_COLUMN, "allowed" if config.allow_api else "off")
                item.setToolTip(API_COLUMN, "API clients may have it run (a Responses request's mcp tool)"
                                if config.allow_api else "API clients may not name it")
                self.tree.addTopLevelItem(item)
                for tool in state.tools:
                    child = QTreeWidgetItem([tool.name, tool.description])
                    child.setData(0, NAME_ROLE, config.name)
                    child.setData(0, TOOL_ROLE, tool.name)
                    child.setFlags(child.flags() | Qt.ItemFlag.ItemIsUserCheckable)
                    on = tool.name not in config.disabled_tools
                    child.setCheckState(0, Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
                    child.setToolTip(1, tool.description)
                    item.addChild(child)
                for line in state.stderr if state.state == "failed" else ():
                    item.addChild(QTreeWidgetItem(["stderr", line]))
                item.setExpanded(True)
        finally:
            self._filling = False
        self._show_sign_in_buttons()

    def item_named(self, name: str) -> QTreeWidgetItem | None:
        for index in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(index)
            if item is not None and item.data(0, NAME_ROLE) == name:
                return item
        return None

    # -- actions ---------------------------------------------------------------------------

    def _selected_server(self) -> str | None:
        item = self.tree.currentItem()
        return None if item is None else item.data(0, NAME_ROLE)

    def start_server(self, name: str) -> None:
        item = self.item_named(name)
        if item is not None:
            item.setText(1, "starting…")
        manager = self.manager

        def start() -> None:
            try:
                manager.connection(name)
            except InglenookError as exc:  # the state holds the reason and its stderr
                log.info("MCP server %s did not start: %s", name, exc)

        self.operations.run("network", start, lambda _: self.refresh(), self._show_failure)

    def _selected_state(self) -> tuple[str, bool]:
        """The selected server's (state, sign-in kept), from its row."""
        item = self.tree.currentItem()
        while item is not None and item.parent() is not None:
            item = item.parent()
        found = None if item is None else item.data(0, STATE_ROLE)
        return (str(found[0]), bool(found[1])) if found else ("", False)

    def _show_sign_in_buttons(self) -> None:
        state, kept = self._selected_state()
        self.sign_in.setVisible(state == NEEDS_SIGN_IN)
        self.sign_out.setVisible(kept)

    def sign_in_to(self, name: str, opener: Any = webbrowser.open) -> None:
        """Run the OAuth sign-in of ``name`` on a thread of its own (a person may take minutes
        in the browser; the network lane stays free): the browser opens, the URL is shown here
        too, and the list says when it is ready."""
        item = self.item_named(name)
        if item is not None:
            item.setText(1, "signing in… (finish in your browser)")
        manager = self.manager
        self.sign_in.setEnabled(False)

        def shown(url: str) -> None:
            self._show_sign_in_url(name, url)

        show_url = self.operations.relay("network", shown)
        self.operations.run_apart(f"mcp-sign-in-{name}", lambda: manager.sign_in(name, opener, show_url),
                                  lambda _: self._signed_in((name, "")),
                                  lambda explained: self._signed_in((name, explained.text)))

    def _signed_in(self, outcome: tuple[str, str]) -> None:
        name, problem = outcome
        self.sign_in.setEnabled(True)
        self._done(problem or f"Signed in to {name}.")

    def _show_sign_in_url(self, name: str, url: str) -> None:
        # The address as a link whose words are short: a URL has no spaces to wrap at, and as
        # plain text it made the page wider than the dialog, the line cut off at its bottom.
        shown = url if len(url) <= SHOWN_URL_CHARS else url[:SHOWN_URL_CHARS - 1] + "…"
        self.message.setText(f"Sign in to {html.escape(name)} in your browser. If it did not open, open "
                             f'<a href="{html.escape(url, quote=True)}">{html.escape(shown)}</a> '
                             "(right-click it to copy the whole address).")

    def _sign_in_selected(self) -> None:
        name = self._selected_server()
        if name:
            self.sign_in_to(name)

    def _sign_out_selected(self) -> None:
        name = self._selected_server()
        if not name:
            return
        manager = self.manager
        self.operations.run("network", lambda: manager.sign_out(name), lambda _: self._done(f"Signed out of {name}."),
                            self._show_failure)

    def _start_selected(self) -> None:
        name = self._selected_server()
        if name:
            self.start_server(name)

    def _remove_selected(self) -> None:
        name = self._selected_server()
        if not name:
            return
        manager = self.manager

        def remove() -> None:
            manager.stop(name)
            manager.servers.remove(name)

        self.operations.run("disk", remove, lambda _: self._done(f"Removed {name}."), self._show_failure)

    def _add_form(self) -> None:
        name, target = self.name.text().strip(), self.target.text().strip()
        try:
            if target.startswith(("http://", "https://")):
                config = McpServerConfig(name, "http", url=target)
            else:
                words = shlex.split(target)
                config = McpServerConfig(name, command=words[0] if words else "", args=tuple(words[1:]))
        except (InglenookError, ValueError) as exc:
            self.operations.report(exc, self._show_failure)
            return
        servers = self.manager.servers
        self.operations.run("disk", lambda: servers.add(config), lambda _: self._added([name]), self._show_failure)

    def _add_pasted(self) -> None:
        try:
            configs = parse_mcp_servers(self.pasted.toPlainText())
        except InglenookError as exc:
            self.operations.report(exc, self._show_failure)
            return
        servers = self.manager.servers
        self.operations.run("disk", lambda: servers.import_json(configs), lambda r: self._added(r[0], r[1]), self._show_failure)

    def _read_other_apps(self) -> None:
        """Other apps' servers go into the paste box: nothing is added until the person says so."""

        def read() -> tuple[str, list[str]]:
            merged: dict[str, Any] = {}
            sources: list[str] = []
            for app, path in other_app_configs():
                try:
                    servers = json.loads(path.read_text(encoding="utf-8")).get("mcpServers") or {}
                except (OSError, ValueError, AttributeError) as exc:
                    sources.append(f"{app}: {path} is unreadable ({exc})")
                    continue
                merged.update({k: v for k, v in servers.items() if k not in merged})
                sources.append(f"{app}: {', '.join(servers) or 'no servers'}")
            return (json.dumps({"mcpServers": merged}, indent=1) if merged else ""), sources

        self.operations.run("disk", read, self._show_other_apps, self._show_failure)

    def _show_other_apps(self, found: tuple[str, list[str]]) -> None:
        text, sources = found
        if not sources:
            self.message.setText("No Claude Desktop, Cursor or LM Studio MCP settings on this machine.")
            return
        if text:
            self.pasted.setPlainText(text)
        self.message.setText(html.escape("Found " + "; ".join(sources) + ". Review them above, then Add from JSON."))

    def _added(self, names: list[str], skipped: list[str] | None = None) -> None:
        self.name.clear()
        self.target.clear()
        self.pasted.clear()
        words = f"Added {', '.join(names)}." if names else "Nothing added."
        if skipped:
            words += f" Skipped {', '.join(skipped)}: those names are taken."
        self._done(words)
        for name in names:
            self.start_server(name)

    def _tool_switched(self, item: QTreeWidgetItem, column: int) -> None:
        if not self._filling and column == API_COLUMN and not item.data(0, TOOL_ROLE):
            self._api_switched(item)
            return
        tool = item.data(0, TOOL_ROLE)
        if self._filling or column != 0 or not tool:
            return
        server, on = item.data(0, NAME_ROLE), item.checkState(0) == Qt.CheckState.Checked
        servers = self.manager.servers
        self.operations.run("disk", lambda: servers.set_tool_enabled(server, tool, on), None, self._show_failure)

    def _api_switched(self, item: QTreeWidgetItem) -> None:
        server, on = item.data(0, NAME_ROLE), item.checkState(API_COLUMN) == Qt.CheckState.Checked
        servers = self.manager.servers
        words = (f"API clients may now have {server} run." if on else f"{server} is no longer run for API clients.")
        self.operations.run("disk", lambda: servers.update(server, allow_api=on), lambda _: self._done(words), self._show_failure)

    def _done(self, words: str) -> None:
        self.message.setText(html.escape(words))
        self.refresh()

    def _show_failure(self, explained: Explanation) -> None:
        self.message.setText(html.escape(explained.text))
