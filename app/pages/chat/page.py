"""The chat page's widgets: the header (title, model picker, settings toggle),
the load bar, the conversation, the banner, the composer, and the chat settings panel.

Only layout lives here; ``ActiveChat`` drives these widgets. The page adapts to its width:
the settings panel sits beside the chat while both fit (the chat keeps ``MIN_CHAT_WIDTH``) and
floats over the chat's right edge when they do not; the settings button drops its words
first, then the title shortens with "…".
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QResizeEvent, QTextCursor
from PySide6.QtWidgets import QFrame, QHBoxLayout, QProgressBar, QToolButton, QVBoxLayout, QWidget

from inglenook.app.widgets import icons
from inglenook.app.widgets.banner import Banner
from inglenook.app.pages.chat.settings_panel import ChatSettingsPanel
from inglenook.app.pages.chat.composer import Composer
from inglenook.app.widgets.elided import ElidedLabel
from inglenook.app.text.formatting import BASE_MODEL_NOTE
from inglenook.app.pages.chat.message_actions import AnswerEditor
from inglenook.app.pages.chat.message_view import ConversationView
from inglenook.app.pages.chat.model_picker import ModelPicker
from inglenook.app.pages.chat.tool_call_widget import ToolCallWidget, finished_call_block
from inglenook.app.pages.chat.message_actions import ReadAloudButton
from inglenook.app.pages.chat.voice_widgets import VoiceModeBar
from inglenook.app.services.model_state import ModelStateHub
from inglenook.engine import CallRecord, CallRequest, Decision, Message

MIN_CHAT_WIDTH = 520  # narrower than this, the settings panel floats over the chat instead
COMPACT_HEADER_WIDTH = 640  # narrower than this, the settings button shows its icon alone
HEADER_HEIGHT = 58
PICKER_MAX_WIDTH = 340


class ChatPage(QWidget):
    # What the page's children say, said again by the page: controllers connect here and never
    # reach through the page to its composer, view, picker or panel.
    send_requested = Signal(str)  # the composer's Enter or Send
    stop_requested = Signal()
    image_pasted = Signal(bytes)  # a pasted image, as PNG bytes
    regenerate_requested = Signal()
    edit_submitted = Signal(int, str)  # (message id, new text)
    suggestion_chosen = Signal(str)  # a suggestion on the empty chat
    picture_clicked = Signal(object)  # a Picture in a message, to see larger
    model_chosen = Signal(str)  # the header's picker
    settings_changed = Signal(int, object, object)  # the panel: (conversation id, system prompt, sampling)
    model_wanted = Signal(str)  # an assistant that names its model was picked
    assistant_applied = Signal(object)  # the Assistant picked in the panel
    version_chosen = Signal(int)  # a message's pager: the id of the version to show
    continue_requested = Signal()  # an answer's ⋯ menu
    edit_text_requested = Signal(int)  # message id
    branch_requested = Signal(int)  # message id
    delete_requested = Signal(int)  # message id
    dictation_toggled = Signal()  # the microphone button or Ctrl+Shift+M
    voice_mode_requested = Signal()  # the voice mode button or Ctrl+Shift+V
    voice_mode_left = Signal()  # Leave voice mode (Esc)
    read_aloud_requested = Signal(str)  # an answer's Read aloud: its text
    read_aloud_stopped = Signal()  # its Stop reading

    def __init__(self, hub: ModelStateHub, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ChatPage")
        self._row = QHBoxLayout(self)
        self._row.setContentsMargins(0, 0, 0, 0)
        self._row.setSpacing(0)
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
        voice_row = QHBoxLayout()
        voice_row.setContentsMargins(24, 6, 24, 0)
        self.voice_bar = VoiceModeBar(self)
        voice_row.addWidget(self.voice_bar)
        middle.addLayout(voice_row)
        self.composer = Composer(self)
        # The chips of the next message's documents and images, which their controllers fill.
        self.attachment_bar = self.composer.attachments
        middle.addWidget(self.composer)
        self._row.addLayout(middle, 1)
        self.panel = ChatSettingsPanel(self)
        self.panel.hide()
        self._row.addWidget(self.panel)
        self.overlay = False  # True while the panel floats over the chat
        self.settings_toggle.toggled.connect(self._toggle_panel)
        self.picker.base_model_shown.connect(self._base_model_shown)
        self.composer.input.recall_requested.connect(self._recall_question)
        self._say_again()

    def _say_again(self) -> None:
        """Relay the children's signals as the page's own."""
        composer, view, panel = self.composer, self.view, self.panel
        composer.send_requested.connect(self.send_requested)
        composer.stop_requested.connect(self.stop_requested)
        composer.input.image_pasted.connect(self.image_pasted)
        view.regenerate_requested.connect(self.regenerate_requested)
        view.edit_submitted.connect(self.edit_submitted)
        view.suggestion_chosen.connect(self.suggestion_chosen)
        view.picture_clicked.connect(self.picture_clicked)
        view.version_chosen.connect(self.version_chosen)
        view.continue_requested.connect(self.continue_requested)
        view.edit_text_requested.connect(self.edit_text_requested)
        view.branch_requested.connect(self.branch_requested)
        view.delete_requested.connect(self.delete_requested)
        self.picker.model_chosen.connect(self.model_chosen)
        panel.changed.connect(self.settings_changed)
        panel.model_wanted.connect(self.model_wanted)
        panel.assistant_applied.connect(self.assistant_applied)
        composer.dictation_toggled.connect(self.dictation_toggled)
        composer.voice_mode_requested.connect(self.voice_mode_requested)
        self.voice_bar.leave_requested.connect(self.voice_mode_left)
        view.read_aloud_toggled.connect(self._read_aloud_toggled)
        self._reading: ReadAloudButton | None = None

    # -- what controllers may ask of the page ----------------------------------------------

    def shown_model(self) -> str | None:
        """The chat's model as the header's picker shows it (a switch shows here first)."""
        return self.picker.current

    def show_model(self, model_id: str | None) -> None:
        self.picker.set_current(model_id)

    def message_text(self) -> str:
        """What the message box holds."""
        return self.composer.input.toPlainText()

    def set_message_text(self, text: str) -> None:
        self.composer.set_text(text)

    def focus_input(self) -> None:
        self.composer.input.setFocus()

    def reopen_last_answer(self, model_id: str) -> str | None:
        """Continue: the last answer's card streams again from its text, which is returned
        (None when the chat does not end in an answer)."""
        view = self.view
        if not view.widgets or view.widgets[-1].role != "assistant":
            return None
        start = view.widgets[-1].text
        view.remove_from(len(view.widgets) - 1)
        self.banner.hide()
        view.begin_answer(model_id, start=start)
        self.set_streaming(True)
        return start

    def show_versions(self, versions: dict[int, list[int]]) -> None:
        """Each message's ‹ n/m › pager, from message id -> the ids of its versions."""
        for widget in self.view.widgets:
            if widget.message is not None:
                widget.set_versions(versions.get(widget.message.id, []))

    def open_answer_editor(self, message_id: int) -> AnswerEditor | None:
        """Edit text… on an answer shown here: its editor, opened (None: not on the page)."""
        index = self.view.index_of_message(message_id)
        if index is None:
            return None
        editor = AnswerEditor(self.view.widgets[index].text, self)
        editor.open()
        return editor

    def set_streaming(self, streaming: bool) -> None:
        """Send or Stop in the composer, as an answer streams or not."""
        self.composer.set_streaming(streaming)

    # -- voice: what the voice controllers show here --------------------------------------

    def set_listening(self, listening: bool) -> None:
        """Dictation's microphone is on or off."""
        self.composer.set_listening(listening)

    def set_mic_level(self, level: float) -> None:
        self.composer.set_level(level)
        self.voice_bar.meter.set_level(level)

    def show_dictated(self, words: str) -> None:
        self.composer.show_dictated(words)

    def show_voice_problem(self, text: str) -> None:
        """No microphone, access refused, no voice: in words, where the person looks."""
        self.composer.show_voice_problem(text)
        if self.voice_bar.isVisible():
            self.voice_bar.show_problem(text)

    def show_voice_state(self, state: str) -> None:
        """Voice mode's state: listening, hearing, thinking, speaking; "off" hides it."""
        self.voice_bar.show_state(state)
        self.composer.voice_button.setEnabled(state == "off")
        self.composer.mic_button.setEnabled(state == "off")

    @property
    def in_voice_mode(self) -> bool:
        return self.voice_bar.isVisible()

    def reading_ended(self) -> None:
        """The answer being read aloud was read to its end, or stopped: its button says Read aloud again."""
        reading, self._reading = self._reading, None
        if reading is not None:
            reading.reading_ended()

    def _read_aloud_toggled(self, button: ReadAloudButton) -> None:
        if not button.isChecked():
            if button is self._reading:
                self._reading = None
                self.read_aloud_stopped.emit()
            return
        self.reading_ended()  # one answer is read at a time: the one asked for last
        self._reading = button
        self.read_aloud_requested.emit(button.answer())

    def _header(self, hub: ModelStateHub) -> QFrame:
        header = QFrame(self)
        header.setObjectName("ChatHeader")
        header.setFixedHeight(HEADER_HEIGHT)
        row = QHBoxLayout(header)
        row.setContentsMargins(20, 8, 14, 8)
        row.setSpacing(10)
        self.title_label = ElidedLabel("New chat", header)
        self.title_label.setObjectName("ChatTitle")
        self.picker = ModelPicker(hub, header)
        self.picker.setMaximumWidth(PICKER_MAX_WIDTH)  # a long model label must not push the title to "N…"
        self.settings_toggle = QToolButton(header)
        self.settings_toggle.setObjectName("HeaderButton")
        self.settings_toggle.setText(" Chat settings")
        self.settings_toggle.setToolTip("Chat settings: system prompt and sampling for this chat")
        self.settings_toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        icons.set_icon(self.settings_toggle, "sliders", "muted")
        self.settings_toggle.setCheckable(True)
        self.settings_toggle.setCursor(Qt.CursorShape.PointingHandCursor)
        row.addWidget(self.title_label, 1)
        row.addWidget(self.picker)
        row.addWidget(self.settings_toggle)
        return header

    def _recall_question(self) -> None:
        """Up in an empty message box brings back the chat's last question, cursor at its end."""
        text = self.view.last_question_text()
        if text:
            self.composer.set_text(text)
            self.composer.input.moveCursor(QTextCursor.MoveOperation.End)

    def _base_model_shown(self, name: str) -> None:
        """A chat with a base model says, before its first message, what answering will be like."""
        self.view.empty.set_model_note(BASE_MODEL_NOTE.format(name=name) if name else "")

    # == adapting to the width ========================================================

    def _toggle_panel(self, shown: bool) -> None:
        self._arrange(self.width())
        self.panel.setVisible(shown)
        if shown and self.overlay:
            self.panel.raise_()

    # -- the conversation's messages and tool calls: the page builds their blocks ----------

    def show_messages(self, messages: list[Message], versions: dict[int, list[int]],
                      calls: dict[int, CallRecord]) -> None:
        """A conversation's messages; a tool message shows its call (``calls`` by its message
        id) as it ran."""
        self.view.set_messages(messages, versions, lambda m: finished_call_block(calls.get(m.id)))

    def show_waiting_call(self, request: CallRequest, draft: str, on_draft: Callable[[str], None],
                          on_decided: Callable[[Decision], None]) -> ToolCallWidget:
        """A call waiting for the person, with Approve / Deny; ``draft``: their earlier edits
        of its arguments. The block, so its result can be shown in it later."""
        block = ToolCallWidget(request)
        if draft:
            block.arguments.setPlainText(draft)
        block.arguments.textChanged.connect(lambda: on_draft(block.arguments.toPlainText()))
        block.decided.connect(on_decided)
        self.view.add_tool_call(block)
        return block

    def show_finished_call(self, record: CallRecord) -> None:
        """A call that ran without asking (allowed before), shown as it ran."""
        block = finished_call_block(record)
        if block is not None:
            self.view.add_tool_call(block)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._arrange(event.size().width())

    def close_overlay(self) -> bool:
        """Close the settings panel if it floats over the chat (Esc); True when it did."""
        if self.overlay and self.panel.isVisible():
            self.settings_toggle.setChecked(False)
            return True
        return False

    def _arrange(self, width: int) -> None:
        """Beside the chat or over it; the settings button in words or as an icon."""
        compact = width < COMPACT_HEADER_WIDTH
        self.settings_toggle.setToolButtonStyle(
            Qt.ToolButtonStyle.ToolButtonIconOnly if compact else Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        overlay = width - self.panel.width() < MIN_CHAT_WIDTH
        if overlay != self.overlay:
            self.overlay = overlay
            self.panel.setProperty("overlay", overlay)  # the layout check lets an overlay cover the chat
            if overlay:
                self._row.removeWidget(self.panel)
            else:
                self._row.addWidget(self.panel)
        if self.overlay:
            top = HEADER_HEIGHT
            self.panel.setGeometry(width - self.panel.width(), top, self.panel.width(), self.height() - top)
            if self.panel.isVisible():
                self.panel.raise_()
