"""Settings ▸ Quantization: compare a model's quantization variants on this machine.

Pick a model, tick the variants to measure (installed ones, or ones to create locally),
press Run. The lab lane runs the engine's ``LabRun``; progress and each finished variant
arrive as queued signals, so the table and the two charts fill in as it goes.
Saved measurements show at once when the page opens, greyed out where they are stale.

Why about 400 lines: the page is one form (model, variants, run) over one results table,
and its builders are split into named sections; the charts are their own widgets.
"""

from __future__ import annotations

import logging
from pathlib import Path

from inglenook.engine import (
    Engine,
    EvalText,
    LabProgress,
    LabReport,
    LabResult,
    LabRun,
    MeasureConfig,
    QuantLab,
    Recommendation,
    VariantGroup,
)
from PySide6.QtCharts import QChartView
from PySide6.QtCore import QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QBrush, QCloseEvent, QColor, QPainter
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from inglenook.app.widgets.elided import ElidedLabel
from inglenook.app.services.errors import explain
from inglenook.app.pages.lab.charts import make_chart, plot
from inglenook.app.pages.lab.table import LabTableModel
from inglenook.app.widgets.theme import colors, current_mode
from inglenook.app.services.operations import Operations

log = logging.getLogger(__name__)

KIND_ROLE = Qt.ItemDataRole.UserRole + 1


class LabPage(QWidget):
    """The Quantization page of Settings."""

    run_finished = Signal(object)  # LabReport, after the page has shown it
    results_shown = Signal()

    def __init__(self, engine: Engine, parent: QWidget | None = None, config: MeasureConfig | None = None,
                 operations: Operations | None = None) -> None:
        """``operations``: the window's; a page opened on its own runs a lab lane of its own."""
        super().__init__(parent)
        self.setObjectName("LabPage")
        self.engine = engine
        self.lab = QuantLab.for_engine(engine)
        self.config = config or MeasureConfig()
        self.eval_text: EvalText | None = None
        self.eval_path: str | None = None
        self.group: VariantGroup | None = None
        self.recommendation: Recommendation | None = None
        self._own_lanes = operations is None
        self.operations = operations if operations is not None else Operations.of_its_own(self)
        self._run: LabRun | None = None
        self._palette = colors(current_mode())
        self._build()
        self._load_eval_then_groups()

    # -- layout -----------------------------------------------------------------------

    def _build(self) -> None:
        outer = QVBoxLayout(self)
        outer.setContentsMargins(20, 16, 20, 16)
        outer.setSpacing(10)

        heading = QLabel("Quantization", self)
        heading.setObjectName("PageTitle")
        font = heading.font()
        font.setPointSizeF(font.pointSizeF() * 1.35)
        font.setBold(True)
        heading.setFont(font)
        outer.addWidget(heading)
        hint = QLabel(
            "Compare a model's quantization levels on this computer: size, memory, speed, and how closely "
            "each one follows the most precise variant (KL divergence and same top token).", self)
        hint.setObjectName("PageHint")
        hint.setWordWrap(True)
        outer.addWidget(hint)

        outer.addLayout(self._build_top())
        outer.addLayout(self._build_middle(), 1)
        outer.addLayout(self._build_progress())
        outer.addWidget(self._build_charts(), 2)

    def _build_top(self) -> QHBoxLayout:
        """The model picker and the evaluation text."""
        top = QHBoxLayout()
        top.addWidget(QLabel("Model", self))
        self.model_picker = QComboBox(self)
        # Narrow enough for the Settings dialog (its page had a sideways scroll bar); the list
        # that drops down is as wide as its longest name.
        self.model_picker.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.model_picker.setMinimumContentsLength(18)
        self.model_picker.currentIndexChanged.connect(self._model_changed)
        top.addWidget(self.model_picker, 1)
        top.addSpacing(12)
        self.eval_label = ElidedLabel("Evaluation text: bundled essays", self)
        self.eval_label.setObjectName("PageHint")
        top.addWidget(self.eval_label)
        choose = QPushButton("Choose text…", self)
        choose.clicked.connect(self._choose_eval_file)
        top.addWidget(choose)
        return top

    def _build_middle(self) -> QHBoxLayout:
        """The variants to tick and Run/Cancel on the left; the recommendation and the table on the right."""
        middle = QHBoxLayout()
        left = QVBoxLayout()
        left.addWidget(QLabel("Variants to measure", self))
        self.variant_list = QListWidget(self)
        self.variant_list.setMinimumWidth(210)
        self.variant_list.setMaximumWidth(300)
        left.addWidget(self.variant_list, 1)
        buttons = QHBoxLayout()
        self.run_button = QPushButton("Run", self)
        self.run_button.setObjectName("PrimaryButton")
        self.run_button.clicked.connect(self.start_run)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel_run)
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        left.addLayout(buttons)
        middle.addLayout(left)

        right = QVBoxLayout()
        self.recommendation_label = QLabel("", self)
        self.recommendation_label.setObjectName("LabRecommendation")
        self.recommendation_label.setWordWrap(True)
        self.recommendation_label.setStyleSheet(
            f"QLabel#LabRecommendation {{ background: {self._palette['accent_soft']}; color: {self._palette['text']};"
            f" border: 1px solid {self._palette['accent']}; border-radius: 6px; padding: 8px 10px; font-weight: 600; }}"
        )
        self.recommendation_label.hide()
        right.addWidget(self.recommendation_label)

        self.table_model = LabTableModel(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.table_model)
        self.proxy.setSortRole(Qt.ItemDataRole.UserRole)
        self.table = QTableView(self)
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(1, Qt.SortOrder.DescendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.setAlternatingRowColors(True)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setMinimumHeight(170)
        right.addWidget(self.table, 1)
        middle.addLayout(right, 1)
        return middle

    def _build_progress(self) -> QHBoxLayout:
        progress_row = QHBoxLayout()
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 1000)
        self.progress.setValue(0)
        self.progress.setTextVisible(False)
        self.progress.setMaximumHeight(10)
        self.status = QLabel("", self)
        self.status.setObjectName("PageHint")
        self.status.setWordWrap(True)  # long statuses wrap instead of widening the page
        progress_row.addWidget(self.progress, 1)
        progress_row.addWidget(self.status)
        return progress_row

    def _build_charts(self) -> QSplitter:
        charts = QSplitter(Qt.Orientation.Horizontal, self)
        dark = current_mode() == "dark"
        self.quality_chart, self.quality_x, self.quality_y = make_chart(
            "Quality against size", "file size (MB)", "KL divergence from reference (mean)", dark)
        self.speed_chart, self.speed_x, self.speed_y = make_chart("Decode speed against size", "file size (MB)", "tokens per second", dark)
        for chart in (self.quality_chart, self.speed_chart):
            view = QChartView(chart, charts)
            view.setRenderHint(QPainter.RenderHint.Antialiasing)
            view.setMinimumHeight(260)
            view.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
            view.setFrameShape(QFrame.Shape.NoFrame)
            charts.addWidget(view)
        return charts

    # -- loading ----------------------------------------------------------------------

    def _load_eval_then_groups(self) -> None:
        path = self.eval_path

        def load() -> tuple[EvalText, list[VariantGroup]]:
            return EvalText.load(path), self.lab.groups()

        self.status.setText("Looking for models…")
        self.operations.run_typed("lab", load, self._groups_loaded, self._show_error)

    def _groups_loaded(self, loaded: tuple[EvalText, list[VariantGroup]]) -> None:
        self.eval_text, groups = loaded
        self.eval_label.setText(f"Evaluation text: {'bundled essays' if self.eval_text.source == 'bundled' else self.eval_text.source}")
        wanted = self.model_picker.currentData()
        self.model_picker.blockSignals(True)
        self.model_picker.clear()
        for group in groups:
            count = len(group.variants)
            self.model_picker.addItem(f"{group.name}  ({count} variant{'s' if count != 1 else ''})", group.reference.id)
        self.model_picker.blockSignals(False)
        index = max(0, self.model_picker.findData(wanted)) if wanted else 0
        self.model_picker.setCurrentIndex(index)
        self.status.setText("" if groups else "No models installed.")
        self._model_changed()

    def select_model(self, model_id: str) -> None:
        """Show ``model_id``'s variants (it may be any variant of the group)."""
        for i in range(self.model_picker.count()):
            group_ref = self.model_picker.itemData(i)
            if group_ref == model_id or model_id.split(":")[0] == str(group_ref).split(":")[0]:
                self.model_picker.setCurrentIndex(i)
                return

    def _model_changed(self, *_: object) -> None:
        model_id = self.model_picker.currentData()
        if not model_id or self.eval_text is None:
            return
        eval_text, config = self.eval_text, self.config

        def load() -> tuple[VariantGroup, list[LabResult]]:
            group = self.lab.variants(model_id)
            return group, self.lab.saved(model_id, eval_text, config)

        self.operations.run_typed("lab", load, self._variants_loaded, self._show_error)

    def _variants_loaded(self, loaded: tuple[VariantGroup, list[LabResult]]) -> None:
        self.group, results = loaded
        self.variant_list.clear()
        for variant in self.group.variants:
            label = f"{variant.quantization}   {variant.record.size_bytes / 1e6:,.0f} MB"
            if variant.id == self.group.reference.id:
                label += "   (reference)"
            item = QListWidgetItem(label, self.variant_list)
            item.setData(Qt.ItemDataRole.UserRole, variant.id)
            item.setData(KIND_ROLE, "installed")
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked)
        for quant in self.group.creatable():
            source = self.group.reference.quantization
            label = f"{quant}   create from {source}"
            if self.group.gains_nothing(quant):
                # Re-encoding a coarser file finely gains nothing; it is offered only as a reference copy.
                label = f"{quant}   from {source}: gains nothing"
            item = QListWidgetItem(label, self.variant_list)
            if self.group.gains_nothing(quant):
                item.setToolTip(f"{quant} made from {source} keeps {source}'s detail and adds none: it is larger, "
                                "not better. Useful only as a reference that matches the source closely.")
            item.setData(Qt.ItemDataRole.UserRole, quant)
            item.setData(KIND_ROLE, "create")
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Unchecked)
            item.setForeground(QBrush(QColor(self._palette["muted"])))
        for name in self.group.hub_files:
            item = QListWidgetItem(f"{name}   on the hub", self.variant_list)
            item.setFlags(Qt.ItemFlag.NoItemFlags)
            item.setToolTip("Download it from the Models page first; then it appears here as installed.")
        if self.group.hub_note:
            self.variant_list.setToolTip(f"Hugging Face: {self.group.hub_note}")
        self.show_results(results)

    def _choose_eval_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Evaluation text", str(Path.home()), "Text files (*.txt *.md);;All files (*)")
        if path:
            self.eval_path = path
            self._load_eval_then_groups()

    # -- results ----------------------------------------------------------------------

    def show_results(self, results: list[LabResult]) -> None:
        self.recommendation = self.lab.recommendation(results) if results else None
        recommended = self.recommendation.model_id if self.recommendation else None
        self.table_model.set_results(results, recommended)
        vram_column = [key for _, key in LabTableModel.COLUMNS].index("vram_bytes")
        self.table.setColumnHidden(vram_column, not any(r.vram_bytes for r in results))
        if self.recommendation is not None:
            self.recommendation_label.setText(f"Recommended: {self.recommendation.line}")
            self.recommendation_label.show()
        else:
            self.recommendation_label.hide()
        stale = sum(1 for r in results if r.stale)
        if results and not self._running():
            when = "Last measurements shown"
            self.status.setText(f"{when}; {stale} stale (greyed)." if stale else f"{when}.")
        self._update_charts(results, recommended)
        self.results_shown.emit()

    def _update_charts(self, results: list[LabResult], recommended: str | None) -> None:
        shown = sorted((r for r in results if not r.stale), key=lambda r: r.size_bytes)
        use_kld = any(r.kld_mean is not None for r in shown)
        self.quality_y.setTitleText("KL divergence from reference (mean)" if use_kld else "perplexity")
        quality = [(r, r.kld_mean if use_kld else r.perplexity) for r in shown]
        speed = [(r, r.decode_tps) for r in shown]
        plot(self.quality_chart, self.quality_x, self.quality_y, quality, recommended, "%.3f" if use_kld else "%.1f",
             self._palette)
        slow = all((r.decode_tps or 0) < 10 for r in shown)
        plot(self.speed_chart, self.speed_x, self.speed_y, speed, recommended, "%.1f" if slow else "%.0f", self._palette)

    # -- running ----------------------------------------------------------------------

    def _running(self) -> bool:
        return self._run is not None

    def checked(self) -> tuple[list[str], list[str]]:
        """(installed variant ids, quantizations to create) currently ticked."""
        installed: list[str] = []
        create: list[str] = []
        for i in range(self.variant_list.count()):
            item = self.variant_list.item(i)
            if item.checkState() != Qt.CheckState.Checked:
                continue
            kind, value = item.data(KIND_ROLE), item.data(Qt.ItemDataRole.UserRole)
            (installed if kind == "installed" else create).append(value)
        return installed, create

    def start_run(self) -> None:
        if self._running() or self.group is None or self.eval_text is None:
            return
        installed, create = self.checked()
        if not installed and not create:
            self.status.setText("Tick at least one variant.")
            return
        model_ids = installed or [self.group.reference.id]
        eval_text, config = self.eval_text, self.config

        # The run reports on the lab lane's thread; the relays hand each report to the GUI thread.
        on_progress = self.operations.relay("lab", self._on_progress)
        on_result = self.operations.relay("lab", self._on_result)
        try:
            run = self.lab.prepare(model_ids, create, eval_text, config, on_progress, on_result)
        except Exception as exc:  # noqa: BLE001 — shown to the person, not raised into Qt
            self._show_error(exc)
            return
        self._run = run
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.model_picker.setEnabled(False)
        self.progress.setValue(0)
        self.status.setText("Starting…")
        self.operations.run_typed("lab", run.execute, self._on_finished, self._on_run_failed)

    def cancel_run(self) -> None:
        if self._run is not None:
            self._run.cancel()
            self.status.setText("Cancelling…")
            self.cancel_button.setEnabled(False)

    def _on_progress(self, progress: LabProgress) -> None:
        message = progress.message
        self.progress.setValue(int(progress.fraction * 1000))
        self.status.setText(message[:1].upper() + message[1:])

    def _on_result(self, result: LabResult) -> None:
        self.table_model.upsert(result)
        if result.vram_bytes:
            self.table.setColumnHidden([key for _, key in LabTableModel.COLUMNS].index("vram_bytes"), False)
        self._update_charts(self.table_model.results, self.table_model.recommended_id)

    def _end_run(self) -> None:
        self._run = None
        self.run_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        self.model_picker.setEnabled(True)

    def _on_run_failed(self, exc: BaseException) -> None:
        """``execute`` reports a variant's failure in its report; this is a failure of the run itself."""
        self._end_run()
        self._show_error(exc)

    def _on_finished(self, report: LabReport) -> None:
        self._end_run()
        if report.error is not None:
            self._show_error(report.error)
        elif report.cancelled:
            self.status.setText("Cancelled. Variants finished before the cancel are kept.")
        else:
            self.progress.setValue(1000)
        # New files may exist, and the saved results now include this run's.
        if report.created:
            self._load_eval_then_groups()
        else:
            self._model_changed()
        if report.error is None and not report.cancelled:
            self.status.setText("Done.")
        self.run_finished.emit(report)

    def _show_error(self, exc: BaseException) -> None:
        explanation = explain(exc)
        self.status.setText(f"{explanation.title}: {explanation.detail or explanation.text}")
        log.warning("quantization lab: %s", exc)

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 — Qt's name
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self) -> None:
        """Cancel a running measurement and wait for the lab lane (window close, tests)."""
        if self._run is not None:
            self._run.cancel()
        if self._own_lanes:
            self.operations.close(30_000)
        else:
            self.operations.wait("lab", 30_000)
