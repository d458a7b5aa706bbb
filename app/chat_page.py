"""The chat page's widgets: the header (title, model picker, settings toggle), the load bar,
the conversation, the banner, the composer, and the chat settings panel on the right.

Only layout lives here; ``ActiveChat`` drives these widgets.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QProgressBar, QToolButton, QVBoxLayout, QWidget

from . import icons
from .banner import Banner
from .chat_settings import ChatSettingsPanel
from .composer import Composer
from .message_view import ConversationView
from .model_picker import ModelPicker
from .model_state import ModelStateHub


class ChatPage(QWidget):
    def __init__(self, hub: ModelStateHub, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ChatPage")
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(0)
        middle = QVBoxLayout()
        middle.setContentsMargins(0, 0, 0, 0)
        middle.setSpacing(0)
        middle.addWidget(self._header(hub))
        self.load_bar = QProgressBar(self)
        self.load_bar.setRange(0, 100)
        self.load_bar.setTextVisible(False)
        self.load_bar.setFixedHeight(3)
        self.load_bar.hide()
        middle.addWidget(self.load_bar)
        self.view = ConversationView(self)
        middle.addWidget(self.view, 1)
        banner_row = QHBoxLayout()
        banner_row.setContentsMargins(24, 0, 24, 0)
        self.banner = Banner(self)
        banner_row.addWidget(self.banner)
        middle.addLayout(banner_row)
        self.composer = Composer(self)
        middle.addWidget(self.composer)
        row.addLayout(middle, 1)
        self.panel = ChatSettingsPanel(self)
        self.panel.hide()
        row.addWidget(self.panel)
        self.settings_toggle.toggled.connect(self.panel.setVisible)

    def _header(self, hub: ModelStateHub) -> QFrame:
        header = QFrame(self)
        header.setObjectName("ChatHeader")
        header.setFixedHeight(58)
        row = QHBoxLayout(header)
        row.setContentsMargins(20, 8, 14, 8)
        row.setSpacing(10)
        self.title_label = QLabel("New chat", header)
        self.title_label.setObjectName("ChatTitle")
        self.picker = ModelPicker(hub, header)
        self.picker.setMinimumWidth(240)
        self.settings_toggle = QToolButton(header)
        self.settings_toggle.setObjectName("HeaderButton")
        self.settings_toggle.setText(" Chat settings")
        self.settings_toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        icons.set_icon(self.settings_toggle, "sliders", "muted")
        self.settings_toggle.setCheckable(True)
        self.settings_toggle.setCursor(Qt.CursorShape.PointingHandCursor)
        row.addWidget(self.title_label, 1)
        row.addWidget(self.picker)
        row.addWidget(self.settings_toggle)
        return header
