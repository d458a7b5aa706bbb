"""The Settings dialog: a page list on the left, one page per topic on the right.

Pages: General (models folders, default model, background work), Performance (threads, context, GPU
layers), Models & context (aliases, per-model context), API server (with the coding agents'
settings), Team keys (named API keys), Engines (remote engines, RPC workers), Tools (MCP servers), Appearance,
Cache, Quantization (the lab), and About (the doctor
report: versions, CPU variant, backends, GPUs, a self-test).
``Save`` emits the changed fields; the window applies them off the GUI thread.

Why one file of ~500 lines: the dialog's frame and the wiring of its ten pages (each page's
widgets are built in their own modules or named sections); Save reads them all in one place.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QGuiApplication
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QDialog,
    QFileDialog,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QRadioButton,
    QScrollArea,
    QSpinBox,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from inglenook.engine import ApiKeys, CacheUsage, Endpoint, Engine, InglenookError, ModelRecord, Settings

from inglenook.app.pages.settings.about import AboutPage
from inglenook.app.pages.settings.api_clients import ApiClientsCard
from inglenook.app.pages.settings.engines import EnginesPage
from inglenook.app.text.formatting import human_count, human_size
from inglenook.app.pages.settings.keys import KeysPage
from inglenook.app.pages.settings.model_names import ModelNamesPage
from inglenook.app.pages.settings.background import BackgroundCard
from inglenook.app.pages.settings.tools import ToolsPage
from inglenook.app.pages.settings.voice import VoicePage
from inglenook.app.services.operations import Operations

if TYPE_CHECKING:
    from inglenook.app.pages.lab.page import LabPage

log = logging.getLogger(__name__)


def _page(title: str, hint: str) -> tuple[QWidget, QVBoxLayout]:
    page = QWidget()
    layout = QVBoxLayout(page)
    layout.setContentsMargins(28, 24, 28, 24)
    layout.setSpacing(10)
    heading = QLabel(title, page)
    heading.setObjectName("PageTitle")
    layout.addWidget(heading)
    if hint:
        note = QLabel(hint, page)
        note.setObjectName("PageHint")
        note.setWordWrap(True)
        layout.addWidget(note)
    layout.addSpacing(8)
    return page, layout


def _card(parent: QWidget) -> tuple[QFrame, QFormLayout]:
    card = QFrame(parent)
    card.setObjectName("Card")
    form = QFormLayout(card)
    form.setContentsMargins(18, 16, 18, 16)
    form.setHorizontalSpacing(18)
    form.setVerticalSpacing(12)
    form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
    return card, form


def cache_usage_text(usage: CacheUsage) -> str:
    """The Cache page's line: space on disk, and in memory when states are held there."""
    files = usage.disk_files
    text = f"{human_size(usage.disk_bytes)} on disk in {files} saved state{'s' if files != 1 else ''}"
    if usage.ram_bytes:
        text += f"  ·  {human_size(usage.ram_bytes)} in memory"
    return text


class SettingsDialog(QDialog):
    saved = Signal(dict)  # the changed Settings fields
    PAGES = ("General", "Performance", "Models & context", "API server", "Team keys", "Engines", "Tools", "Voice",
             "Appearance", "Cache", "Quantization", "About")

    def __init__(
        self,
        engine: Engine,
        operations: Operations,
        models: list[ModelRecord],
        api_state: tuple[str, str] = ("stopped", ""),
        parent: QWidget | None = None,
        api_streams: Callable[[], dict[str, int]] | None = None,
    ) -> None:
        super().__init__(parent)
        self.api_streams = api_streams or dict  # named key -> generations in flight (Team keys)
        self.setWindowTitle("Settings")
        self.setObjectName("SettingsDialog")
        # 880×600, but never larger than the window it opens over (or the screen).
        bound = parent.size() if parent is not None else self.screen().availableGeometry().size()
        self.resize(min(880, bound.width()), min(600, bound.height()))
        self.engine = engine
        self.operations = operations
        self.original: Settings = engine.settings
        self.models = models
        self.api_state = api_state
        self.lab_page: LabPage | None = None
        self._client_model: str | None = None  # the model the coding agents' settings name

        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(0)
        body = QHBoxLayout()
        body.setSpacing(0)
        self.nav = QListWidget(self)
        self.nav.setObjectName("SettingsNav")
        self.nav.setFixedWidth(200)
        self.nav.addItems(list(self.PAGES))
        self.stack = QStackedWidget(self)
        self.stack.setObjectName("SettingsStack")
        self.about_page: AboutPage | None = None
        for builder in (self._general, self._performance, self._model_names, self._api, self._team_keys, self._engines,
                        self._tools, self._voice, self._appearance, self._cache, self._lab_placeholder, self._about):
            page = builder()
            scroll = QScrollArea(self.stack)
            scroll.setWidgetResizable(True)
            scroll.setFrameShape(QFrame.Shape.NoFrame)
            scroll.setWidget(page)
            self.stack.addWidget(scroll)
        self.nav.currentRowChanged.connect(self._show_page)
        body.addWidget(self.nav)
        body.addWidget(self.stack, 1)
        outer.addLayout(body, 1)

        footer = QFrame(self)
        footer.setObjectName("DialogFooter")
        row = QHBoxLayout(footer)
        row.setContentsMargins(16, 10, 16, 10)
        self.status = QLabel("", footer)
        self.status.setObjectName("PageHint")
        cancel = QPushButton("Cancel", footer)
        cancel.clicked.connect(self.reject)
        save = QPushButton("Save", footer)
        save.setObjectName("PrimaryButton")
        save.setDefault(True)
        save.clicked.connect(self._save)
        row.addWidget(self.status, 1)
        row.addWidget(cancel)
        row.addWidget(save)
        outer.addWidget(footer)
        self.nav.setCurrentRow(0)
        self.refresh_cache()

    # -- pages ------------------------------------------------------------------------

    def _general(self) -> QWidget:
        s = self.original
        page, layout = _page("General", "Where Inglenook finds models, and which one new chats use.")
        card, form = _card(page)
        folder_row = QHBoxLayout()
        self.models_dir = QLineEdit(str(self.engine.paths.models), card)
        self.models_dir.setReadOnly(True)
        open_folder = QPushButton("Open", card)
        open_folder.clicked.connect(lambda: QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.engine.paths.models))))
        folder_row.addWidget(self.models_dir, 1)
        folder_row.addWidget(open_folder)
        form.addRow("Models folder", folder_row)
        self.extra_dirs = QListWidget(card)
        self.extra_dirs.addItems(list(s.models_dirs))
        self.extra_dirs.setFixedHeight(90)
        buttons = QHBoxLayout()
        add = QPushButton("Add folder…", card)
        add.clicked.connect(self._add_folder)
        remove = QPushButton("Remove", card)
        remove.clicked.connect(lambda: [self.extra_dirs.takeItem(self.extra_dirs.row(i)) for i in self.extra_dirs.selectedItems()])
        buttons.addWidget(add)
        buttons.addWidget(remove)
        buttons.addStretch(1)
        extra = QVBoxLayout()
        extra.addWidget(self.extra_dirs)
        extra.addLayout(buttons)
        form.addRow("Also scan", extra)
        self.default_model = QComboBox(card)
        self.default_model.addItem("Automatic (starter model)", None)
        for record in self.models:
            self.default_model.addItem(record.id, record.id)
        index = self.default_model.findData(s.default_model)
        self.default_model.setCurrentIndex(max(0, index))
        form.addRow("Default model", self.default_model)
        layout.addWidget(card)
        self.background = BackgroundCard(page, s, self.models)
        layout.addWidget(self.background)
        layout.addStretch(1)
        return page

    def _performance(self) -> QWidget:
        s = self.original
        page, layout = _page("Performance", "How models are loaded. Changes apply the next time a model loads.")
        card, form = _card(page)
        self.threads = QSpinBox(card)
        self.threads.setRange(0, 256)
        self.threads.setSpecialValueText(f"Automatic ({os.cpu_count() or 1} available)")
        self.threads.setValue(s.threads)
        form.addRow("CPU threads", self.threads)
        self.context_size = QSpinBox(card)
        self.context_size.setRange(0, 1_048_576)
        self.context_size.setSingleStep(1024)
        # 0: each model gets its training context, as far as free memory allows (fit.auto_context).
        self.context_size.setSpecialValueText("Automatic (the model's own, as memory allows)")
        self.context_size.setValue(s.context_size)
        self.context_size.setSuffix(" tokens")
        form.addRow("Context size", self.context_size)
        gpu_row = QHBoxLayout()
        self.gpu_auto = QCheckBox("Automatic", card)
        self.gpu_layers = QSpinBox(card)
        self.gpu_layers.setRange(0, 999)
        self.gpu_layers.setSuffix(" layers")
        self.gpu_auto.setChecked(s.gpu_layers < 0)
        self.gpu_layers.setValue(max(0, s.gpu_layers))
        self.gpu_layers.setEnabled(s.gpu_layers >= 0)
        self.gpu_auto.toggled.connect(lambda on: self.gpu_layers.setEnabled(not on))
        gpu_row.addWidget(self.gpu_auto)
        gpu_row.addWidget(self.gpu_layers, 1)
        form.addRow("GPU offload", gpu_row)
        self.kv_type = QComboBox(card)
        self.kv_type.addItem("Automatic (16-bit with flash attention)", "auto")
        self.kv_type.addItem("16-bit (fastest, best quality)", "f16")
        self.kv_type.addItem("8-bit (half the memory; slower prompt reading on the CPU)", "q8_0")
        self.kv_type.setCurrentIndex(max(0, self.kv_type.findData(s.kv_cache_type)))
        form.addRow("KV cache", self.kv_type)
        self._speculative_rows(card, form)
        self._serving_rows(card, form)
        layout.addWidget(card)
        layout.addStretch(1)
        return page

    def _serving_rows(self, card: QWidget, form: QFormLayout) -> None:
        """How answers share a model, and how many models stay in memory."""
        s = self.original
        self.parallel = QSpinBox(card)
        self.parallel.setRange(1, 16)
        self.parallel.setValue(s.parallel_sequences)
        self.parallel.setToolTip("Answers one model works on at once (the window, the terminal and the API "
                                 "share them). Each takes its own KV cache of the context size.")
        form.addRow("Answers at once", self.parallel)
        self.prefill_chunk = QSpinBox(card)
        self.prefill_chunk.setRange(8, 4096)
        self.prefill_chunk.setSingleStep(32)
        self.prefill_chunk.setSuffix(" tokens")
        self.prefill_chunk.setValue(s.prefill_chunk)
        self.prefill_chunk.setToolTip("The most prompt tokens read per step while other answers stream. Smaller "
                                      "keeps their text flowing while a long prompt arrives; fewer are read "
                                      "when measurements say a chunk would stall them.")
        form.addRow("Prompt tokens per step", self.prefill_chunk)
        self.memory_budget = QSpinBox(card)
        self.memory_budget.setRange(0, 4 * 1024 * 1024)
        self.memory_budget.setSingleStep(512)
        self.memory_budget.setSuffix(" MiB")
        self.memory_budget.setSpecialValueText("Automatic (60% of memory)")
        self.memory_budget.setValue(s.memory_budget_mb)
        self.memory_budget.setToolTip("Memory the loaded models may take together (weights and KV cache). "
                                      "Another model loads beside them while it fits; otherwise the one "
                                      "used least recently is unloaded first.")
        form.addRow("Memory for models", self.memory_budget)
        self.idle_unload = QSpinBox(card)
        self.idle_unload.setRange(0, 24 * 60)
        self.idle_unload.setSuffix(" min")
        self.idle_unload.setSpecialValueText("Never")
        self.idle_unload.setValue(int(s.idle_unload_s // 60))
        form.addRow("Unload when idle for", self.idle_unload)

    def _speculative_rows(self, card: QWidget, form: QFormLayout) -> None:
        """Speculative decoding: off, prompt lookup, or a draft model picked from the installed ones."""
        s = self.original
        self.speculative = QComboBox(card)
        for label, mode in (("Off", "off"), ("Prompt lookup (no extra model)", "lookup"), ("Draft model", "draft")):
            self.speculative.addItem(label, mode)
        self.speculative.setCurrentIndex(max(0, self.speculative.findData(s.speculative)))
        self.speculative.setToolTip("Guess a few tokens ahead and check them in one step: answers that repeat "
                                    "their input (edits, quotes) come much faster. A guess is kept only where "
                                    "the model would have written it.")
        form.addRow("Speculative decoding", self.speculative)
        self.draft_picker = QComboBox(card)
        self.draft_picker.addItem("None", None)
        for record in self.models:
            if not record.source.startswith("remote"):
                # Architecture and size: a draft model is a small one of the chat model's family.
                size = f", {human_count(record.parameter_count)}" if record.parameter_count else ""
                self.draft_picker.addItem(f"{record.id} ({record.architecture}{size})", record.id)
        self.draft_picker.setCurrentIndex(max(0, self.draft_picker.findData(s.draft_model)))
        self.draft_picker.setToolTip("A small model with the same vocabulary as the one you chat with (the same "
                                     "family); one with another vocabulary is refused when the model loads.")
        self.draft_picker.setEnabled(s.speculative == "draft")
        self.speculative.currentIndexChanged.connect(
            lambda _index: self.draft_picker.setEnabled(self.speculative.currentData() == "draft"))
        form.addRow("Draft model", self.draft_picker)

    def _api(self) -> QWidget:
        s = self.original
        page, layout = _page(
            "API server",
            "An OpenAI-compatible API on this computer, for editors, scripts and other apps. "
            "It runs beside the window and uses the same models.",
        )
        card, form = _card(page)
        self.api_enabled = QCheckBox("Run the local API server", card)
        self.api_enabled.setChecked(s.api_enabled)
        form.addRow("", self.api_enabled)
        self.api_port = QSpinBox(card)
        self.api_port.setRange(1, 65535)
        self.api_port.setValue(s.api_port)
        form.addRow("Port", self.api_port)
        self.api_key = QLineEdit(s.api_key or "", card)
        self.api_key.setEchoMode(QLineEdit.EchoMode.PasswordEchoOnEdit)
        self.api_key.setPlaceholderText("None (only this computer can connect)")
        form.addRow("API key", self.api_key)
        self.cors = QPlainTextEdit("\n".join(s.cors_origins), card)
        self.cors.setPlaceholderText("One origin per line, e.g. http://localhost:3000")
        self.cors.setFixedHeight(80)
        form.addRow("Allowed origins", self.cors)
        url_row = QHBoxLayout()
        self.api_url = QLineEdit(self._url(), card)
        self.api_url.setReadOnly(True)
        copy = QPushButton("Copy URL", card)
        copy.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.api_url.text()))
        url_row.addWidget(self.api_url, 1)
        url_row.addWidget(copy)
        form.addRow("URL", url_row)
        state, _url = self.api_state
        self.api_status = QLabel({"running": "● Running", "failed": "● Not running: failed to start",
                                  "starting": "Starting…"}.get(state, "○ Stopped"), card)
        self.api_status.setObjectName("PageHint")
        form.addRow("Status", self.api_status)
        self.api_port.valueChanged.connect(lambda _v: self.api_url.setText(self._url()))
        layout.addWidget(card)
        self.api_clients = ApiClientsCard(page)  # api_clients_page.py: Codex, Claude Code, opencode
        self.api_port.valueChanged.connect(lambda _v: self._show_clients())
        self.api_key.textChanged.connect(lambda _t: self._show_clients())
        self._show_clients()
        layout.addWidget(self.api_clients)
        layout.addStretch(1)
        return page

    def _show_clients(self) -> None:
        if self._client_model is None:  # looked up once, not on every keystroke in the key field
            try:
                self._client_model = self.engine.default_model_id()
            except InglenookError:  # nothing installed yet: the settings still show where things go
                self._client_model = "MODEL"
        key = self.api_key.text().strip() or None
        endpoint = Endpoint.of(self.original.api_host, self.api_port.value(), self._client_model, key)
        self.api_clients.show_endpoint(endpoint)

    def _model_names(self) -> QWidget:
        page, layout = _page(
            "Models & context",
            "Names that clients such as coding agents send (claude-sonnet-4-5, gpt-5-codex, fast), answered "
            "by an installed model; names without an alias go to the default model. And a context size "
            "for a model of its own. Changes apply to the next request, and to the next load of a model.",
        )
        self.model_names = ModelNamesPage(self.original, self.models, page)
        layout.addWidget(self.model_names)
        layout.addStretch(1)
        return page

    def _url(self) -> str:
        host = self.original.api_host
        return f"http://{host}:{self.api_port.value()}/v1"

    def _appearance(self) -> QWidget:
        page, layout = _page("Appearance", "Light, dark, or follow the system setting.")
        card, form = _card(page)
        self.theme_group = QButtonGroup(card)
        row = QVBoxLayout()
        for value, label in (("system", "Follow the system"), ("light", "Light"), ("dark", "Dark")):
            button = QRadioButton(label, card)
            button.setProperty("theme", value)
            button.setChecked(self.original.theme == value)
            self.theme_group.addButton(button)
            row.addWidget(button)
        form.addRow("Theme", row)
        layout.addWidget(card)
        layout.addStretch(1)
        return page

    def _cache(self) -> QWidget:
        page, layout = _page(
            "Cache",
            "Inglenook keeps the model's work on each conversation, so reopening a long chat "
            "answers at once instead of re-reading it.",
        )
        card, form = _card(page)
        self.cache_used = QLabel("Measuring…", card)
        form.addRow("Space used", self.cache_used)
        self.cache_budget = QSpinBox(card)
        self.cache_budget.setRange(0, 1_000_000)
        self.cache_budget.setSingleStep(256)
        self.cache_budget.setSuffix(" MB")
        self.cache_budget.setSpecialValueText("Off")
        self.cache_budget.setValue(self.original.cache_budget_mb)
        form.addRow("Budget", self.cache_budget)
        clear = QPushButton("Clear cache", card)
        clear.setObjectName("DangerButton")
        clear.clicked.connect(self._clear_cache)
        form.addRow("", clear)
        layout.addWidget(card)
        layout.addStretch(1)
        return page

    def _lab_placeholder(self) -> QWidget:
        holder = QWidget()
        self._lab_layout = QVBoxLayout(holder)
        self._lab_layout.setContentsMargins(0, 0, 0, 0)
        return holder

    def _ensure_lab(self) -> None:
        """Build the quantization lab the first time its page opens (it is the heaviest page)."""
        if self.lab_page is not None:
            return
        from inglenook.app.pages.lab.page import LabPage  # noqa: PLC0415 — QtCharts loads only when the lab opens

        self.lab_page = LabPage(self.engine, self, operations=self.operations)
        self._lab_layout.addWidget(self.lab_page)

    def _about(self) -> QWidget:
        self.about_page = AboutPage(self.engine, self.operations)
        return self.about_page

    def _show_page(self, row: int) -> None:
        if self.PAGES[row] == "Quantization":
            self._ensure_lab()
        if self.PAGES[row] == "About" and self.about_page is not None and self.about_page.report is None:
            self.about_page.refresh()
        self.stack.setCurrentIndex(row)

    def show_page(self, name: str) -> None:
        self.nav.setCurrentRow(self.PAGES.index(name))

    # -- actions ----------------------------------------------------------------------

    def _add_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Folder with GGUF models")
        if folder:
            self.extra_dirs.addItem(folder)

    def refresh_cache(self) -> None:
        engine = self.engine
        self.operations.run("disk", lambda: cache_usage_text(engine.cache_usage()), self.cache_used.setText,
                            lambda explained: self.cache_used.setText(f"Unknown ({explained.text})"))

    def _clear_cache(self) -> None:
        self.cache_used.setText("Clearing…")
        engine = self.engine
        self.operations.run("disk", engine.clear_cache, lambda _: self.refresh_cache(),
                            lambda explained: self.cache_used.setText(f"Could not clear: {explained.text}"))

    def _team_keys(self) -> QWidget:
        page, layout = _page(
            "Team keys",
            "Named API keys for colleagues on your network, each with optional limits. Only a hash of a key is "
            "kept: it is shown once, when it is made. Changes apply at once; a revoked key's open streams end.",
        )
        self.keys_page = KeysPage(ApiKeys.of(self.engine), self.api_streams, page)
        layout.addWidget(self.keys_page, 1)
        return page

    def _engines(self) -> QWidget:
        page, layout = _page(
            "Engines",
            "Other OpenAI-compatible servers (another Inglenook, llama-server, vLLM, a hosted API): their models "
            "appear in the model picker marked remote, and the local API forwards requests naming them.",
        )
        self.engines_page = EnginesPage(self.engine.chats.remotes, self.original, self.operations, page)
        layout.addWidget(self.engines_page, 1)
        return page

    def _tools(self) -> QWidget:
        page, layout = _page(
            "Tools",
            "MCP servers whose tools a chat may call (switch them on in a chat's settings). A call waits for your "
            "Approve unless you allowed that tool; API clients may use a server only where its API switch is on. "
            "Tool descriptions are written by the server's authors and read by the model.",
        )
        self.tools_page = ToolsPage(self.engine.chats.tools, self.operations, page)
        layout.addWidget(self.tools_page, 1)
        return page

    def _voice(self) -> QWidget:
        page, layout = _page("Voice", "Talking to Inglenook and hearing its answers: the microphone in the message "
                             "box, Read aloud on answers and voice mode. Speech is recognised and spoken on this machine.")
        self.voice_page = VoicePage(self.engine, self.operations, self.original, page)
        layout.addWidget(self.voice_page, 1)
        return page

    def changes(self) -> dict[str, Any]:
        checked = self.theme_group.checkedButton()
        key = self.api_key.text().strip() or None
        wanted: dict[str, Any] = {
            "models_dirs": [self.extra_dirs.item(i).text() for i in range(self.extra_dirs.count())],
            "default_model": self.default_model.currentData(),
            "threads": self.threads.value(),
            "context_size": self.context_size.value(),
            "gpu_layers": -1 if self.gpu_auto.isChecked() else self.gpu_layers.value(),
            "kv_cache_type": self.kv_type.currentData(),
            "speculative": self.speculative.currentData(),
            "draft_model": self.draft_picker.currentData(),
            "parallel_sequences": self.parallel.value(),
            "prefill_chunk": self.prefill_chunk.value(),
            "memory_budget_mb": self.memory_budget.value(),
            "idle_unload_s": float(self.idle_unload.value() * 60),
            "api_enabled": self.api_enabled.isChecked(),
            "api_port": self.api_port.value(),
            "api_key": key,
            "cors_origins": [line.strip() for line in self.cors.toPlainText().splitlines() if line.strip()],
            "cache_budget_mb": self.cache_budget.value(),
            "model_aliases": self.model_names.alias_map(),
            "model_context": self.model_names.context_map(),
            "theme": checked.property("theme") if checked is not None else self.original.theme,
            "rpc_workers": self.engines_page.worker_list(),
            **self.background.changes(),
            **self.voice_page.changes(),
        }
        return {k: v for k, v in wanted.items() if getattr(self.original, k) != v}

    def _save(self) -> None:
        self.saved.emit(self.changes())
        self.accept()
