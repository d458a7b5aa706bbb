"""A tool call in the conversation: a collapsible block with the tool's name, its server and
its arguments (pretty JSON, editable while the call waits), Approve / Deny, then the result
(text, pictures, links).

The calls waiting for a decision are kept by ``controllers.approvals.ApprovalBridge``.
"""

from __future__ import annotations

import base64
import json
import logging
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPixmap
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from inglenook.engine import CallRecord, CallRequest, Decision

log = logging.getLogger(__name__)

# What "remember" offers beside Approve, and the Decision.remember value of each.
REMEMBER = (("Just this call", "once"), ("Allow this tool in this chat", "chat"), ("Always allow this tool", "always"))
STATUS_WORDS = {"ran": "done", "denied": "denied", "failed": "failed", "not run": "not run"}


class ToolCallWidget(QFrame):
    """One call: waiting for the person (``decided`` carries the Decision), then its result."""

    decided = Signal(object)  # Decision

    def __init__(self, request: CallRequest, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.request = request
        self.setObjectName("ToolCall")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 8)
        head = QHBoxLayout()
        self.toggle = QToolButton(self)
        self.toggle.setObjectName("ToolCallToggle")
        self.toggle.setCheckable(True)
        self.toggle.setChecked(True)
        self.toggle.setArrowType(Qt.ArrowType.DownArrow)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setText(f"{request.tool}  ·  {request.server}")
        self.toggle.toggled.connect(self._expand)
        self.state = QLabel("waiting for you", self)
        self.state.setObjectName("PageHint")
        head.addWidget(self.toggle)
        head.addStretch(1)
        head.addWidget(self.state)
        layout.addLayout(head)
        self.body = QWidget(self)
        body = QVBoxLayout(self.body)
        body.setContentsMargins(0, 4, 0, 0)
        if request.description:
            about = QLabel(request.description, self.body)
            about.setWordWrap(True)
            about.setObjectName("PageHint")
            about.setToolTip("The server's own description of this tool (text a stranger wrote)")
            body.addWidget(about)
        self.arguments = QPlainTextEdit(json.dumps(request.arguments, indent=2, ensure_ascii=False), self.body)
        self.arguments.setObjectName("ToolCallArguments")
        self.arguments.setMaximumHeight(140)
        body.addWidget(self.arguments)
        self.problem = QLabel("", self.body)
        self.problem.setObjectName("ErrorText")
        self.problem.hide()
        body.addWidget(self.problem)
        buttons = QHBoxLayout()
        self.remember = QComboBox(self.body)
        for words, value in REMEMBER:
            self.remember.addItem(words, value)
        self.approve = QPushButton("Approve", self.body)
        self.approve.setObjectName("PrimaryButton")
        self.deny = QPushButton("Deny", self.body)
        self.approve.clicked.connect(self._approve)
        self.deny.clicked.connect(self._deny)
        buttons.addWidget(self.remember, 1)
        buttons.addWidget(self.deny)
        buttons.addWidget(self.approve)
        self.choices = QWidget(self.body)
        self.choices.setLayout(buttons)
        body.addWidget(self.choices)
        self.result = QPlainTextEdit(self.body)
        self.result.setObjectName("ToolCallResult")
        self.result.setReadOnly(True)
        self.result.setMaximumHeight(200)
        self.result.hide()
        body.addWidget(self.result)
        self.pictures = QVBoxLayout()
        body.addLayout(self.pictures)
        self.links = QLabel("", self.body)
        self.links.setOpenExternalLinks(True)
        self.links.hide()
        body.addWidget(self.links)
        layout.addWidget(self.body)
        self.done = False

    @property
    def waiting(self) -> bool:
        """Whether the call still waits for the person's decision."""
        return not self.done and self.choices.isEnabled() and not self.choices.isHidden()

    def _expand(self, open_: bool) -> None:
        self.body.setVisible(open_)
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if open_ else Qt.ArrowType.RightArrow)

    def _approve(self) -> None:
        try:
            edited = json.loads(self.arguments.toPlainText() or "{}")
        except ValueError as exc:
            self.problem.setText(f"The arguments are not valid JSON: {exc}")
            self.problem.show()
            return
        if not isinstance(edited, dict):
            self.problem.setText("The arguments must be a JSON object.")
            self.problem.show()
            return
        self.problem.hide()
        changed = edited if edited != self.request.arguments else None
        self._decide(Decision(arguments=changed, remember=str(self.remember.currentData())), "running…")

    def _deny(self) -> None:
        self._decide(Decision(verdict="deny"), "denied")

    def _decide(self, decision: Decision, words: str) -> None:
        self.choices.setEnabled(False)
        self.choices.hide()
        self.arguments.setReadOnly(True)
        self.state.setText(words)
        self.decided.emit(decision)

    def cancel(self) -> None:
        """Stop was pressed while the call waited: nothing more to decide here."""
        if not self.done:
            self.choices.hide()
            self.arguments.setReadOnly(True)
            self.state.setText("stopped")

    def show_result(self, record: CallRecord) -> None:
        """The call's outcome: its status, the arguments that ran, the result."""
        self.done = True
        self.choices.hide()
        self.arguments.setReadOnly(True)
        self.arguments.setPlainText(json.dumps(record.arguments, indent=2, ensure_ascii=False))
        seconds = f" in {record.duration_s:.1f} s" if record.duration_s >= 0.05 else ""
        self.state.setText(STATUS_WORDS.get(record.status, record.status) + seconds)
        self.result.setPlainText(record.result.text)
        self.result.show()
        for mime, data in record.result.images:
            picture = QPixmap()
            if picture.loadFromData(base64.b64decode(data)):
                label = QLabel(self.body)
                label.setPixmap(picture.scaledToWidth(min(picture.width(), 480)))
                self.pictures.addWidget(label)
            else:
                log.info("a %s picture from %s could not be shown", mime, record.server)
        if record.result.links:
            self.links.setText(" · ".join(f'<a href="{uri}">{name}</a>' for name, uri in record.result.links))
            self.links.show()
        self.toggle.setChecked(record.status != "ran")  # a finished call folds away; a problem stays open


def finished_call_block(record: CallRecord | None) -> ToolCallWidget | None:
    """A finished call's block, as a saved conversation shows it."""
    if record is None:
        return None
    block = ToolCallWidget(CallRequest(record.call_id, record.server, record.tool, record.arguments, "", 0))
    block.show_result(record)
    return block
