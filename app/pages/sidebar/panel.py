"""The conversations sidebar: new chat, search, the list by last activity, navigation."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QPoint, QRect, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont, QIcon, QPainter
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.engine import Conversation

from inglenook.app.widgets import icons

from inglenook.app.widgets import theme
from inglenook.app.widgets.elided import ElidedLabel
from inglenook.app.text.formatting import relative_time
from inglenook.app.services.resources import resource_path

ID_ROLE = Qt.ItemDataRole.UserRole + 1
TIME_ROLE = Qt.ItemDataRole.UserRole + 2
STREAMING_ROLE = Qt.ItemDataRole.UserRole + 3
TITLE_ROLE = Qt.ItemDataRole.UserRole + 4  # the saved title, to tell a rename from other item changes
SUMMARY_ROLE = Qt.ItemDataRole.UserRole + 5  # a long conversation's summary ("" when it has none)
APPROVAL_ROLE = Qt.ItemDataRole.UserRole + 6  # a tool call in it waits for the person
APPROVAL_BADGE = "needs approval"
APPROVAL_TIP = "\n\nA tool call waits for your approval"
ROW_HEIGHT = 38
AGES_REFRESH_MS = 30_000  # "now", "5m", "2h" are painted from the clock: repaint them now and then


class _ConversationDelegate(QStyledItemDelegate):
    """A title and its last activity; a dot while an answer streams in, a "needs approval"
    badge while one of its tool calls waits for the person."""

    def sizeHint(self, option: QStyleOptionViewItem, index) -> QSize:  # noqa: ANN001, N802
        return QSize(option.rect.width(), ROW_HEIGHT)

    def updateEditorGeometry(self, editor: QWidget, option: QStyleOptionViewItem, index) -> None:  # noqa: ANN001, N802
        # The whole row, not the style's text rectangle: that one is the row less the item's
        # padding, too short for a line edit's own padding, and the letters were cut.
        height = max(editor.sizeHint().height(), ROW_HEIGHT - 6)
        rect = option.rect.adjusted(4, 0, -4, 0)
        editor.setGeometry(rect.left(), rect.center().y() - height // 2 + 1, rect.width(), height)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index) -> None:  # noqa: ANN001
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        title = opt.text
        opt.text = ""
        widget = opt.widget
        if widget is not None:
            widget.style().drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, widget)
        colors = theme.colors(theme.current_mode())
        rect = option.rect.adjusted(12, 0, -10, 0)
        painter.save()
        small = QFont(opt.font)
        small.setPointSizeF(max(7.0, opt.font.pointSizeF() - 1.5))
        painter.setFont(small)
        when = relative_time(index.data(TIME_ROLE) or 0)
        if index.data(STREAMING_ROLE):
            when = "●"
        if index.data(APPROVAL_ROLE):
            time_width = self._paint_badge(painter, rect, colors)
        else:
            time_width = painter.fontMetrics().horizontalAdvance(when) + 4
            painter.setPen(QColor(colors["accent"] if index.data(STREAMING_ROLE) else colors["muted"]))
            painter.drawText(QRect(rect.right() - time_width, rect.top(), time_width, rect.height()),
                             Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, when)
        painter.setFont(opt.font)
        painter.setPen(QColor(colors["text"]))
        text_rect = QRect(rect.left(), rect.top(), rect.width() - time_width - 8, rect.height())
        painter.drawText(text_rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         painter.fontMetrics().elidedText(title, Qt.TextElideMode.ElideRight, text_rect.width()))
        painter.restore()

    @staticmethod
    def _paint_badge(painter: QPainter, rect: QRect, colors: dict[str, str]) -> int:
        """The "needs approval" pill at the row's right; its width."""
        metrics = painter.fontMetrics()
        width = metrics.horizontalAdvance(APPROVAL_BADGE) + 12
        height = metrics.height() + 4
        pill = QRect(rect.right() - width, rect.center().y() - height // 2 + 1, width, height)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QColor(colors["warn_border"]))
        painter.setBrush(QColor(colors["warn_bg"]))
        painter.drawRoundedRect(pill, height / 2, height / 2)
        painter.setPen(QColor(colors["text"]))
        painter.drawText(pill, Qt.AlignmentFlag.AlignCenter, APPROVAL_BADGE)
        return width


class Sidebar(QFrame):
    new_chat_requested = Signal()
    conversation_selected = Signal(int)
    search_changed = Signal(str)
    rename_requested = Signal(int, str)
    delete_requested = Signal(int)
    export_requested = Signal(int, str)  # (conversation id, "markdown" | "json")
    undo_requested = Signal()
    page_requested = Signal(str)  # "chat" | "models" | "usage" | "settings"
    collapsed_changed = Signal(bool)

    WIDTH = 268
    RAIL_WIDTH = 56  # collapsed: a rail of icons (toggle, new chat, pages), no list

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Sidebar")
        self.setFixedWidth(self.WIDTH)
        self.collapsed = False
        layout = QVBoxLayout(self)
        self._layout = layout
        layout.setContentsMargins(12, 14, 12, 10)
        layout.setSpacing(8)
        self._filling = False  # True while the list is refilled: its signals are not the user's
        self.needs_approval: set[int] = set()  # conversations with a tool call waiting for the person
        layout.addLayout(self._brand())
        layout.addSpacing(4)
        self._build_conversations(layout)
        self._build_toast(layout)
        self._build_nav(layout)

    def ask_export_path(self, suggested: Path, markdown: bool) -> str:
        """Where to export a conversation ("" when cancelled)."""
        path, _ = QFileDialog.getSaveFileName(self.window(), "Export conversation", str(suggested),
                                              "Markdown (*.md)" if markdown else "JSON (*.json)")
        return path

    def _brand(self) -> QHBoxLayout:
        brand_row = QHBoxLayout()
        brand_row.setSpacing(8)
        logo = QLabel(self)
        icon_path = resource_path("inglenook.svg")
        if icon_path is not None:
            logo.setPixmap(QIcon(str(icon_path)).pixmap(24, 24))
        brand = QLabel("Inglenook", self)
        brand.setObjectName("Brand")
        self.collapse_button = QToolButton(self)
        self.collapse_button.setObjectName("HeaderButton")
        icons.set_icon(self.collapse_button, "sidebar", "muted")
        self.collapse_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.collapse_button.clicked.connect(self.toggle_collapsed)
        self._brand_parts = (logo, brand)
        brand_row.addWidget(logo)
        brand_row.addWidget(brand)
        brand_row.addStretch(1)
        brand_row.addWidget(self.collapse_button)
        self._update_collapse_tip()
        return brand_row

    def _build_conversations(self, layout: QVBoxLayout) -> None:
        """New chat, the search field, and the list of conversations."""
        self.new_button = QPushButton("  New chat", self)
        icons.set_icon(self.new_button, "plus", "on_accent")
        self.new_button.setObjectName("NewChatButton")
        self.new_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.new_button.setToolTip("New chat (Ctrl+N)")
        self.new_button.clicked.connect(self.new_chat_requested)
        layout.addWidget(self.new_button)

        self.search = QLineEdit(self)
        self.search.setObjectName("SearchField")
        self.search.setPlaceholderText("Search chats  (Ctrl+F)")
        self.search.setClearButtonEnabled(True)
        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(200)
        self._search_timer.timeout.connect(lambda: self.search_changed.emit(self.search.text().strip()))
        self.search.textChanged.connect(lambda _t: self._search_timer.start())
        layout.addWidget(self.search)

        self.section = ElidedLabel("RECENT", self)
        self.section.setObjectName("SectionLabel")
        layout.addWidget(self.section)

        self.list = QListWidget(self)
        self.list.setObjectName("ConversationList")
        self.list.setItemDelegate(_ConversationDelegate(self.list))
        self.list.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)  # titles elide instead
        self.list.setEditTriggers(QAbstractItemView.EditTrigger.EditKeyPressed)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._menu)
        self.list.currentItemChanged.connect(self._current_changed)
        self.list.itemChanged.connect(self._item_edited)
        layout.addWidget(self.list, 1)
        # Ages are computed when a row is painted; without a repaint "1m" would still show an hour later.
        self.ages_timer = QTimer(self)
        self.ages_timer.setInterval(AGES_REFRESH_MS)
        self.ages_timer.timeout.connect(self.list.viewport().update)
        self.ages_timer.start()

    def _build_toast(self, layout: QVBoxLayout) -> None:
        """"Chat deleted" with its Undo button, shown for a few seconds after a delete."""
        self.toast = QFrame(self)
        self.toast.setObjectName("Banner")
        toast_row = QHBoxLayout(self.toast)
        toast_row.setContentsMargins(10, 6, 6, 6)
        self.toast_label = QLabel("Chat deleted", self.toast)
        undo = QPushButton("Undo", self.toast)
        undo.setObjectName("BannerButton")
        undo.clicked.connect(self.undo_requested)
        toast_row.addWidget(self.toast_label, 1)
        toast_row.addWidget(undo)
        self.toast.hide()
        layout.addWidget(self.toast)

    def _build_nav(self, layout: QVBoxLayout) -> None:
        self.nav_buttons: dict[str, QPushButton] = {}
        self._nav_labels = {"chat": "Chats", "models": "Models", "usage": "Usage", "settings": "Settings"}
        for key, label in self._nav_labels.items():
            button = QPushButton("  " + label, self)
            button.setToolTip(label)
            icons.set_icon(button, key, "muted")
            button.setObjectName("NavButton")
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.setCheckable(key != "settings")
            button.clicked.connect(lambda _=False, k=key: self.page_requested.emit(k))
            self.nav_buttons[key] = button
            layout.addWidget(button)
        self.nav_buttons["chat"].setChecked(True)
        self.nav_buttons["settings"].setToolTip("Settings (Ctrl+,)")

    def clear_search(self) -> None:
        """Empty the search box and show every chat again at once (no typing pause to wait for)."""
        self._search_timer.stop()
        if self.search.text():
            self.search.blockSignals(True)
            self.search.clear()
            self.search.blockSignals(False)
            self.search_changed.emit("")

    # -- collapsing -------------------------------------------------------------------

    def toggle_collapsed(self) -> None:
        self.set_collapsed(not self.collapsed)

    def set_collapsed(self, collapsed: bool) -> None:
        """Fold into a rail of icons (more room for the chat in a narrow window), or unfold."""
        if collapsed == self.collapsed:
            return
        self.collapsed = collapsed
        for widget in (*self._brand_parts, self.search, self.section, self.list):
            widget.setVisible(not collapsed)
        if collapsed:
            self.toast.hide()
        self._layout.setContentsMargins(*((8, 14, 8, 10) if collapsed else (12, 14, 12, 10)))
        self.new_button.setText("" if collapsed else "  New chat")
        for key, button in self.nav_buttons.items():
            button.setText("" if collapsed else "  " + self._nav_labels[key])
        if collapsed:
            self._layout.insertStretch(self._layout.indexOf(self.toast), 1)
        else:
            stretch = self._layout.itemAt(self._layout.indexOf(self.toast) - 1)
            if stretch is not None and stretch.spacerItem() is not None:
                self._layout.removeItem(stretch)
        self.setFixedWidth(self.RAIL_WIDTH if collapsed else self.WIDTH)
        self._update_collapse_tip()
        self.collapsed_changed.emit(collapsed)

    def _update_collapse_tip(self) -> None:
        self.collapse_button.setToolTip(("Show" if self.collapsed else "Hide") + " the chat list (Ctrl+B)")

    # -- content ----------------------------------------------------------------------

    def set_conversations(self, conversations: list[Conversation], current: int | None, streaming: set[int],
                          summaries: dict[int, str] | None = None, related: list[Conversation] | None = None,
                          indexing: bool = False) -> None:
        """List ``conversations``; a long one's ``summaries`` entry (written in the background)
        shows under its title in the tooltip. While searching, ``related`` (close in meaning,
        sharing no word with the search) follow in italics; ``indexing`` says that messages are
        still being made searchable by meaning, so more may turn up."""
        summaries = summaries or {}
        related = related or []
        related_ids = {c.id for c in related}
        self._filling = True
        try:
            self.list.clear()
            for conversation in conversations + related:
                is_related = conversation.id in related_ids
                item = QListWidgetItem(conversation.title or "New chat")
                item.setData(ID_ROLE, conversation.id)
                item.setData(TIME_ROLE, conversation.updated_at)
                item.setData(TITLE_ROLE, item.text())
                item.setData(STREAMING_ROLE, conversation.id in streaming)
                item.setData(APPROVAL_ROLE, conversation.id in self.needs_approval)
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
                summary = summaries.get(conversation.id, "")
                item.setData(SUMMARY_ROLE, summary)
                tip = f"{conversation.title}\n\n{summary}" if summary else conversation.title
                if is_related:
                    font = item.font()
                    font.setItalic(True)
                    item.setFont(font)
                    tip = f"Related by meaning to your search\n\n{tip}"
                item.setToolTip(tip + APPROVAL_TIP if conversation.id in self.needs_approval else tip)
                self.list.addItem(item)
                if conversation.id == current:
                    self.list.setCurrentItem(item)
            searching = bool(self.search.text().strip())
            self.section.setText("RESULTS" if searching else "RECENT")
            if searching and related:
                self.section.setText(f"RESULTS · {len(related)} RELATED" if conversations else "RELATED BY MEANING")
            if searching and not conversations and not related:
                self.section.setText("NO MATCHES")
            if searching and indexing:
                self.section.setText(self.section.text() + " · INDEXING…")
            self.section.setToolTip("Messages are still being made searchable by meaning; more results may appear"
                                    if searching and indexing else "")
        finally:
            self._filling = False

    def select(self, conversation_id: int | None) -> None:
        self._filling = True
        try:
            for row in range(self.list.count()):
                item = self.list.item(row)
                if item.data(ID_ROLE) == conversation_id:
                    self.list.setCurrentItem(item)
                    return
            self.list.clearSelection()
        finally:
            self._filling = False

    def ids(self) -> list[int]:
        return [self.list.item(row).data(ID_ROLE) for row in range(self.list.count())]

    def titles(self) -> list[str]:
        return [self.list.item(row).text() for row in range(self.list.count())]

    def set_streaming(self, streaming: set[int]) -> None:
        self._filling = True
        try:
            for row in range(self.list.count()):
                item = self.list.item(row)
                item.setData(STREAMING_ROLE, item.data(ID_ROLE) in streaming)
        finally:
            self._filling = False

    def set_needs_approval(self, conversation_ids: set[int]) -> None:
        """Mark the chats where a tool call waits for the person (a badge on their rows)."""
        self.needs_approval = set(conversation_ids)
        self._filling = True
        try:
            for row in range(self.list.count()):
                item = self.list.item(row)
                waiting = item.data(ID_ROLE) in self.needs_approval
                if bool(item.data(APPROVAL_ROLE)) != waiting:
                    item.setData(APPROVAL_ROLE, waiting)
                    tip = item.toolTip().removesuffix(APPROVAL_TIP)
                    item.setToolTip(tip + APPROVAL_TIP if waiting else tip)
        finally:
            self._filling = False

    def show_toast(self, text: str) -> None:
        self.toast_label.setText(text)
        self.toast.show()

    def hide_toast(self) -> None:
        self.toast.hide()

    def set_page(self, key: str) -> None:
        for name, button in self.nav_buttons.items():
            if button.isCheckable():
                button.setChecked(name == key)

    def begin_rename(self, conversation_id: int) -> None:
        for row in range(self.list.count()):
            item = self.list.item(row)
            if item.data(ID_ROLE) == conversation_id:
                self.list.editItem(item)
                return

    # -- events -----------------------------------------------------------------------

    def _current_changed(self, current: QListWidgetItem | None, _previous: object) -> None:
        if current is not None and not self._filling:
            self.conversation_selected.emit(int(current.data(ID_ROLE)))

    def _item_edited(self, item: QListWidgetItem) -> None:
        if self._filling:
            return
        title = item.text().strip()
        if title and title != item.data(TITLE_ROLE):
            item.setData(TITLE_ROLE, title)
            self.rename_requested.emit(int(item.data(ID_ROLE)), title)

    def _menu(self, pos: QPoint) -> None:
        item = self.list.itemAt(pos)
        if item is None:
            return
        cid = int(item.data(ID_ROLE))
        menu = QMenu(self)
        menu.addAction("Rename", lambda: self.list.editItem(item))
        menu.addAction("Export as Markdown…", lambda: self.export_requested.emit(cid, "markdown"))
        menu.addAction("Export as JSON…", lambda: self.export_requested.emit(cid, "json"))
        menu.addSeparator()
        menu.addAction("Delete", lambda: self.delete_requested.emit(cid))
        menu.exec(self.list.viewport().mapToGlobal(pos))
