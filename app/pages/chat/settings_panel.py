"""Per-conversation settings: system prompt, sampling, presets, a LoRA adapter and, for a chat
with tools, its rounds and tool choice (a panel beside the chat). The adapter and its scale are
kept in the conversation's settings under ``lora`` (``[{"id", "scale"}]``), which
``ChatService`` checks before they are saved; the tools' under ``tool_rounds`` and
``tool_choice`` ("none", "required" or a tool's name; absent: the model decides), which
``ChatService.send_with_tools`` reads."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QFrame,
    QLabel,
    QPlainTextEdit,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from inglenook.engine import DEFAULT_MAX_ROUNDS, MAX_SCALE, AdapterRecord, Assistant, SamplingParams

from inglenook.app.pages.chat.assistant_picker import AssistantPicker


# Presets people can pick; "Custom" is whatever the fields say.
PRESETS: dict[str, dict[str, Any]] = {
    "Balanced": {"temperature": 0.8, "top_p": 0.95, "top_k": 40},  # SamplingParams' defaults
    "Precise": {"temperature": 0.2, "top_p": 0.9, "top_k": 20},
    "Creative": {"temperature": 1.0, "top_p": 0.98, "top_k": 100},
    "Deterministic": {"temperature": 0.0, "top_p": 1.0, "top_k": 1},
}
CUSTOM = "Custom"
NO_ADAPTER = "None"
LORA = "lora"  # the settings key ChatService reads (engine/chat/chat.py LORA_KEY)
TOOL_ROUNDS, TOOL_CHOICE = "tool_rounds", "tool_choice"  # read by ChatService.send_with_tools
# The tool choices besides a named tool: (stored value, words); "auto" is stored as nothing.
TOOL_CHOICES = (("auto", "Auto"), ("none", "No tools"), ("required", "Any tool"))
TOOL_CHOICE_TIPS = {"auto": "The model decides whether to call a tool", "none": "Answer without offering tools",
                    "required": "The first round must call one of the tools"}
OWN_KEYS = ("temperature", "top_p", "top_k", "max_tokens", LORA, TOOL_ROUNDS, TOOL_CHOICE)


def preset_for(sampling: dict[str, Any]) -> str:
    defaults = SamplingParams()
    for name, values in PRESETS.items():
        if all(abs(float(sampling.get(k, getattr(defaults, k))) - v) < 1e-6 for k, v in values.items()):
            return name
    return CUSTOM


def _label(text: str, parent: QWidget) -> QLabel:
    label = QLabel(text, parent)
    label.setObjectName("FieldLabel")
    return label


class ChatSettingsPanel(QFrame):
    """Edits one conversation's system prompt and sampling; emits ``changed`` after a pause."""

    changed = Signal(int, object, object)  # (conversation id, system prompt | None, sampling dict)
    model_wanted = Signal(str)  # an assistant that names its model was picked
    assistant_applied = Signal(object)  # the Assistant picked: its tools and documents go to the chat
    context_size_changed = Signal(int)  # the app-wide context size (llama.cpp sets it at load time)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ChatSettingsPanel")
        self.setFixedWidth(300)
        self.conversation_id: int | None = None
        self._loading = False
        self._extra: dict[str, Any] = {}
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setStyleSheet("QScrollArea, QScrollArea > QWidget > QWidget { background: transparent; }")
        body = QWidget(scroll)
        layout = QVBoxLayout(body)
        layout.setContentsMargins(18, 18, 18, 18)
        layout.setSpacing(10)
        title = QLabel("Chat settings", body)
        title.setObjectName("PanelTitle")
        hint = QLabel("These apply to this conversation only.", body)
        hint.setObjectName("PageHint")
        layout.addWidget(title)
        layout.addWidget(hint)
        layout.addSpacing(6)

        layout.addWidget(_label("ASSISTANT", body))
        self.assistant = AssistantPicker(body)
        self.assistant.chosen.connect(self.apply_assistant)
        self.assistant.current_settings = lambda: (self.system_prompt.toPlainText().strip(), self.sampling())
        layout.addWidget(self.assistant)
        layout.addSpacing(6)

        layout.addWidget(_label("SYSTEM PROMPT", body))
        self.system_prompt = QPlainTextEdit(body)
        self.system_prompt.setPlaceholderText("You are a helpful assistant…")
        self.system_prompt.setFixedHeight(110)
        layout.addWidget(self.system_prompt)
        layout.addSpacing(6)

        layout.addWidget(_label("PRESET", body))
        self.preset = QComboBox(body)
        self.preset.addItems([*PRESETS, CUSTOM])
        layout.addWidget(self.preset)
        layout.addSpacing(6)
        self._build_numbers(body, layout)
        self._build_adapter(body, layout)
        self._build_tool_controls(body)
        self._sections = layout  # add_section puts more (the chat's tools) above the stretch
        layout.addStretch(1)
        scroll.setWidget(body)
        outer.addWidget(scroll)
        self._connect()

    def _build_numbers(self, body: QWidget, layout: QVBoxLayout) -> None:
        """The sampling numbers, and the app-wide context size with its note."""
        form = QFormLayout()
        form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        form.setHorizontalSpacing(12)
        form.setVerticalSpacing(10)
        self.temperature = QDoubleSpinBox(body)
        self.temperature.setRange(0.0, 2.0)
        self.temperature.setSingleStep(0.05)
        self.top_p = QDoubleSpinBox(body)
        self.top_p.setRange(0.0, 1.0)
        self.top_p.setSingleStep(0.01)
        self.top_k = QSpinBox(body)
        self.top_k.setRange(0, 1000)
        self.max_tokens = QSpinBox(body)
        self.max_tokens.setRange(0, 1_000_000)
        self.max_tokens.setSingleStep(64)
        self.max_tokens.setSpecialValueText("Until done")
        self.context_size = QSpinBox(body)
        self.context_size.setRange(0, 1_048_576)
        self.context_size.setSingleStep(1024)
        self.context_size.setSpecialValueText("Auto")  # 0: the model's own context, as memory allows
        self.context_size.setToolTip("The model's context window, in tokens")
        for label, widget in (
            ("Temperature", self.temperature), ("Top P", self.top_p), ("Top K", self.top_k),
            ("Max tokens", self.max_tokens), ("Context size", self.context_size),
        ):
            form.addRow(_label(label, body), widget)
        layout.addLayout(form)
        context_note = QLabel("Context size is shared by all chats and the API; it applies the next time a model loads.", body)
        context_note.setObjectName("PageHint")
        context_note.setWordWrap(True)
        layout.addWidget(context_note)

    def _build_adapter(self, body: QWidget, layout: QVBoxLayout) -> None:
        """The LoRA adapter this chat runs with, and how strongly (switched without a reload)."""
        layout.addSpacing(6)
        layout.addWidget(_label("LORA ADAPTER", body))
        self.adapter = QComboBox(body)
        self.adapter.addItem(NO_ADAPTER, None)
        self.adapter.setToolTip("A fine-tune applied on top of the model; imported like a model")
        layout.addWidget(self.adapter)
        self.adapter_scale = QDoubleSpinBox(body)
        self.adapter_scale.setRange(0.0, MAX_SCALE)
        self.adapter_scale.setSingleStep(0.1)
        self.adapter_scale.setValue(1.0)
        self.adapter_scale.setToolTip("How strongly the adapter applies; 0 answers as the model alone")
        form = QFormLayout()
        form.addRow(_label("Scale", body), self.adapter_scale)
        layout.addLayout(form)
        self._sync_adapter_scale()

    def _build_tool_controls(self, body: QWidget) -> None:
        """A chat with tools: how many rounds of calls one answer may take, and which tool (if
        any) its first round must call — forced through the grammar, as the API's tool_choice.
        Shown under the chat's tool switches (``add_tools_section``)."""
        self.tool_controls = QWidget(body)
        form = QFormLayout(self.tool_controls)
        form.setContentsMargins(0, 4, 0, 0)
        form.setHorizontalSpacing(12)
        form.setVerticalSpacing(10)
        self.tool_rounds = QSpinBox(self.tool_controls)
        self.tool_rounds.setRange(1, 20)
        self.tool_rounds.setValue(DEFAULT_MAX_ROUNDS)
        self.tool_rounds.setToolTip("Rounds of model → tool calls → results in one answer; the last answers in words")
        self.tool_choice = QComboBox(self.tool_controls)
        # Tool names can be long: the box keeps the panel's width and elides, never widens it.
        self.tool_choice.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.tool_choice.setMinimumContentsLength(12)
        self.tool_choice.setToolTip("Which tool the first round must call; later rounds let the model decide")
        self._fill_tool_choice([], "auto")
        form.addRow(_label("Rounds", self.tool_controls), self.tool_rounds)
        form.addRow(_label("Tool choice", self.tool_controls), self.tool_choice)

    def add_tools_section(self, switches: QWidget) -> None:
        """The TOOLS section: the chat's server switches, then its rounds and tool choice."""
        self.add_section("TOOLS", switches)
        self._sections.insertWidget(self._sections.count() - 1, self.tool_controls)

    def set_tool_names(self, names: list[str]) -> None:
        """The tools this chat offers (its switched-on servers'), for the tool choice."""
        self._fill_tool_choice(names, self.chosen_tool())

    def chosen_tool(self) -> str:
        return str(self.tool_choice.currentData() or "auto")

    def _fill_tool_choice(self, names: list[str], chosen: str) -> None:
        combo = self.tool_choice
        combo.blockSignals(True)
        try:
            combo.clear()
            for value, words in TOOL_CHOICES:
                combo.addItem(words, value)
                combo.setItemData(combo.count() - 1, TOOL_CHOICE_TIPS[value], Qt.ItemDataRole.ToolTipRole)
            listed = [*names, *([chosen] if chosen not in names and chosen not in dict(TOOL_CHOICES) else [])]
            for name in listed:
                combo.addItem(name, name)
                combo.setItemData(combo.count() - 1, f"The first round must call {name}", Qt.ItemDataRole.ToolTipRole)
            combo.setCurrentIndex(max(0, combo.findData(chosen)))
        finally:
            combo.blockSignals(False)

    def _connect(self) -> None:
        # Edits are saved after a pause in typing, not on every keystroke.
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(400)
        self._timer.timeout.connect(self._emit)
        self.preset.currentTextChanged.connect(self._preset_chosen)
        self.system_prompt.textChanged.connect(self._edited)
        for spin in (self.temperature, self.top_p, self.top_k, self.max_tokens, self.adapter_scale, self.tool_rounds):
            spin.valueChanged.connect(self._edited)
        self.tool_choice.currentIndexChanged.connect(self._edited)
        self.adapter.currentIndexChanged.connect(self._adapter_chosen)
        self._context_timer = QTimer(self)
        self._context_timer.setSingleShot(True)
        self._context_timer.setInterval(600)
        self._context_timer.timeout.connect(lambda: self.context_size_changed.emit(self.context_size.value()))
        self.context_size.valueChanged.connect(lambda _v: None if self._loading else self._context_timer.start())

    def add_section(self, title: str, widget: QWidget) -> None:
        self._sections.insertWidget(self._sections.count() - 1, _label(title, self))
        self._sections.insertWidget(self._sections.count() - 1, widget)

    def set_context_size(self, tokens: int) -> None:
        self._loading = True
        try:
            self.context_size.setValue(tokens)
        finally:
            self._loading = False

    def load(self, conversation_id: int, system_prompt: str | None, sampling: dict[str, Any]) -> None:
        self._timer.stop()
        self._loading = True
        try:
            self.conversation_id = conversation_id
            defaults = SamplingParams()
            self._extra = {k: v for k, v in sampling.items() if k not in OWN_KEYS}
            self.system_prompt.setPlainText(system_prompt or "")
            self.temperature.setValue(float(sampling.get("temperature", defaults.temperature)))
            self.top_p.setValue(float(sampling.get("top_p", defaults.top_p)))
            self.top_k.setValue(int(sampling.get("top_k", defaults.top_k)))
            self.max_tokens.setValue(int(sampling.get("max_tokens") or 0))
            self.preset.setCurrentText(preset_for(sampling))
            self._show_adapter(sampling.get(LORA))
            self.tool_rounds.setValue(int(sampling.get(TOOL_ROUNDS) or DEFAULT_MAX_ROUNDS))
            names = [str(self.tool_choice.itemData(i)) for i in range(len(TOOL_CHOICES), self.tool_choice.count())]
            self._fill_tool_choice(names, str(sampling.get(TOOL_CHOICE) or "auto"))
        finally:
            self._loading = False

    def apply_assistant(self, assistant: Assistant) -> None:
        """Fill in an assistant's system prompt and sampling (saved like an edit), ask for
        its model when it names one, and pass it on for its tool servers and collections."""
        conversation_id = self.conversation_id
        self.load(0 if conversation_id is None else conversation_id, assistant.system_prompt, assistant.sampling)
        self.conversation_id = conversation_id  # a new chat stays new: its first message creates it
        self._timer.start()
        if assistant.model_id:
            self.model_wanted.emit(assistant.model_id)
        self.assistant_applied.emit(assistant)

    def set_adapters(self, adapters: list[AdapterRecord]) -> None:
        """The imported adapters to choose from (read on the disk lane); the choice stays."""
        chosen = self.adapter.currentData()
        self._loading = True
        try:
            self.adapter.clear()
            self.adapter.addItem(NO_ADAPTER, None)
            for record in adapters:
                self.adapter.addItem(f"{record.id} ({record.architecture}, rank {record.rank})", record.id)
            self._select_adapter(chosen)
        finally:
            self._loading = False

    def _show_adapter(self, chosen: Any) -> None:
        first = chosen[0] if isinstance(chosen, list) and chosen and isinstance(chosen[0], dict) else {}
        self._select_adapter(first.get("id"))
        self.adapter_scale.setValue(float(first.get("scale", 1.0)) if first else 1.0)
        self._sync_adapter_scale()

    def _select_adapter(self, adapter_id: Any) -> None:
        index = self.adapter.findData(adapter_id) if adapter_id is not None else 0
        if index < 0:  # a chat names an adapter not listed (yet): keep it, so nothing is lost
            self.adapter.addItem(f"{adapter_id} (not imported)", adapter_id)
            index = self.adapter.count() - 1
        self.adapter.setCurrentIndex(index)

    def _sync_adapter_scale(self) -> None:
        self.adapter_scale.setEnabled(self.adapter.currentData() is not None)

    def _adapter_chosen(self, _index: int) -> None:
        self._sync_adapter_scale()
        self._edited()

    def sampling(self) -> dict[str, Any]:
        values: dict[str, Any] = dict(self._extra)
        values.update(
            temperature=round(self.temperature.value(), 3),
            top_p=round(self.top_p.value(), 3),
            top_k=self.top_k.value(),
        )
        if self.max_tokens.value():
            values["max_tokens"] = self.max_tokens.value()
        adapter_id = self.adapter.currentData()
        if adapter_id is not None:
            values[LORA] = [{"id": adapter_id, "scale": round(self.adapter_scale.value(), 3)}]
        if self.tool_rounds.value() != DEFAULT_MAX_ROUNDS:
            values[TOOL_ROUNDS] = self.tool_rounds.value()
        if self.chosen_tool() != "auto":
            values[TOOL_CHOICE] = self.chosen_tool()
        return values

    def _preset_chosen(self, name: str) -> None:
        if self._loading or name not in PRESETS:
            return
        self._loading = True
        try:
            values = PRESETS[name]
            self.temperature.setValue(values["temperature"])
            self.top_p.setValue(values["top_p"])
            self.top_k.setValue(values["top_k"])
        finally:
            self._loading = False
        self._timer.start()

    def _edited(self, *_args: object) -> None:
        if self._loading:
            return
        self._loading = True
        self.preset.setCurrentText(preset_for(self.sampling()))
        self._loading = False
        self._timer.start()

    def flush(self) -> None:
        """Emit pending edits now (before sending, switching chats or closing)."""
        if self._timer.isActive():
            self._timer.stop()
            self._emit()
        if self._context_timer.isActive():
            self._context_timer.stop()
            self.context_size_changed.emit(self.context_size.value())

    def _emit(self) -> None:
        if self.conversation_id is None:
            return
        prompt = self.system_prompt.toPlainText().strip() or None
        self.changed.emit(self.conversation_id, prompt, self.sampling())
