"""The model picker in the chat header: installed models, their load state and progress."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QPainter
from PySide6.QtWidgets import (
    QFrame,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

from inglenook.engine import REMOTE_SOURCE, LoadPlan, ModelRecord

from inglenook.app.widgets import theme
from inglenook.app.widgets.elided import ElidedButton
from inglenook.app.text.formatting import BASE_MODEL, BASE_MODEL_TIP, human_count, human_size, model_label
from inglenook.app.services.model_state import ModelStateHub

RECORD_ROLE = Qt.ItemDataRole.UserRole + 1
STATE_ROLE = Qt.ItemDataRole.UserRole + 2
PLAN_ROLE = Qt.ItemDataRole.UserRole + 3  # the LoadPlan: memory and context before loading
BASE_ROLE = Qt.ItemDataRole.UserRole + 4  # True for a model without a chat template
ARROW = "   ▾"  # the button's ending, kept whole when the name is shortened


class _ModelDelegate(QStyledItemDelegate):
    """Two lines per model: its name, then quantization, size and parameters; a state badge."""

    def sizeHint(self, option: QStyleOptionViewItem, index) -> QSize:  # noqa: ANN001, N802
        return QSize(option.rect.width(), 54)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index) -> None:  # noqa: ANN001
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""
        widget = opt.widget
        style = widget.style() if widget else None
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, widget)
        record: ModelRecord = index.data(RECORD_ROLE)
        state: str = index.data(STATE_ROLE) or ""
        remote = record.source.startswith(REMOTE_SOURCE)  # served by another engine (Settings → Engines)
        if remote:
            state = state or "Remote"
        colors = theme.colors(theme.current_mode())
        rect = option.rect.adjusted(12, 8, -12, -8)
        painter.save()
        name_font = QFont(opt.font)
        name_font.setBold(True)
        painter.setFont(name_font)
        painter.setPen(QColor(colors["text"]))
        badge_width = 74 if state else 0
        top = QRect(rect.left(), rect.top(), rect.width() - badge_width, rect.height() // 2)
        painter.drawText(top, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         painter.fontMetrics().elidedText(model_label(record), Qt.TextElideMode.ElideRight, top.width()))
        small = QFont(opt.font)
        small.setPointSizeF(max(7.0, opt.font.pointSizeF() - 1.2))
        painter.setFont(small)
        painter.setPen(QColor(colors["muted"]))
        detail = f"{record.quantization}  ·  {human_size(record.size_bytes)}"
        if record.parameter_count:
            detail += f"  ·  {human_count(record.parameter_count)} params"
        plan: LoadPlan | None = index.data(PLAN_ROLE)
        if plan is not None:
            detail += f"  ·  {plan.memory}"  # the whole plan is the item's tooltip
            if plan.short:
                painter.setPen(QColor(colors["danger"]))
        if remote:
            detail = f"remote  ·  {record.source.partition(':')[2]}"
        if index.data(BASE_ROLE):
            detail = f"{BASE_MODEL}  ·  {detail}"  # first, so eliding never hides it
        bottom = QRect(rect.left(), rect.top() + rect.height() // 2, rect.width(), rect.height() // 2)
        painter.drawText(bottom, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         painter.fontMetrics().elidedText(detail, Qt.TextElideMode.ElideRight, bottom.width()))
        if state:
            badge = QRect(rect.right() - badge_width + 8, rect.top() + 1, badge_width - 8, 20)
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(QColor(colors["accent_soft"] if state != "Failed" else colors["warn_bg"]))
            painter.drawRoundedRect(badge, 9, 9)
            painter.setPen(QColor(colors["accent"] if state != "Failed" else colors["danger"]))
            painter.drawText(badge, Qt.AlignmentFlag.AlignCenter, state)
        painter.restore()


class ModelPopup(QFrame):
    """The drop-down list of installed models."""

    chosen = Signal(str)
    manage_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Popup | Qt.WindowType.FramelessWindowHint)
        self.setObjectName("ModelPopup")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 10, 8, 8)
        layout.setSpacing(6)
        title = QLabel("Installed models", self)
        title.setObjectName("SectionLabel")
        self.list = QListWidget(self)
        self.list.setObjectName("ModelList")
        self.list.setItemDelegate(_ModelDelegate(self.list))
        self.list.setVerticalScrollMode(QListWidget.ScrollMode.ScrollPerPixel)
        self.list.itemClicked.connect(self._clicked)
        self.list.itemActivated.connect(self._clicked)
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 100)
        self.progress.setTextVisible(False)
        self.progress.hide()
        manage = QPushButton("Manage models…", self)
        manage.setObjectName("NavButton")
        manage.clicked.connect(self._manage)
        layout.addWidget(title)
        layout.addWidget(self.list)
        layout.addWidget(self.progress)
        layout.addWidget(manage)
        self.resize(380, 300)

    def _clicked(self, item: QListWidgetItem) -> None:
        record: ModelRecord = item.data(RECORD_ROLE)
        self.hide()
        self.chosen.emit(record.id)

    def _manage(self) -> None:
        self.hide()
        self.manage_requested.emit()


class ModelPicker(ElidedButton):
    """The header button showing the chat's model; opens the popup."""

    model_chosen = Signal(str)
    manage_requested = Signal()
    # The model on the button is a base model (no chat template): its display name, else "".
    base_model_shown = Signal(str)

    def __init__(self, hub: ModelStateHub, parent: QWidget | None = None) -> None:
        super().__init__("", parent, min_width=140, keep=ARROW)  # a narrow header shortens the name with "…"
        self.setObjectName("ModelButton")
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.hub = hub
        self.records: list[ModelRecord] = []
        self.plans: dict[str, LoadPlan] = {}
        self.base_models: set[str] = set()
        self.current: str | None = None
        self.missing = False
        self.popup = ModelPopup(self)
        self.popup.chosen.connect(self._chosen)
        self.popup.manage_requested.connect(self.manage_requested)
        self.clicked.connect(self.open_popup)
        hub.changed.connect(self._refresh)
        self._refresh()

    def set_models(self, records: list[ModelRecord], plans: dict[str, LoadPlan] | None = None,
                   base_models: set[str] | None = None) -> None:
        self.records = list(records)
        self.plans = dict(plans or {})
        self.base_models = set(base_models or ())
        self._refresh()

    def set_current(self, model_id: str | None) -> None:
        self.current = model_id
        self._refresh()

    def record(self, model_id: str | None) -> ModelRecord | None:
        for record in self.records:
            if record.id == model_id:
                return record
        return None

    def state_of(self, model_id: str) -> str:
        hub = self.hub
        if hub.loading == model_id:
            return f"{int(hub.progress * 100)}%"
        if hub.loaded == model_id:
            return "Loaded"
        if model_id in hub.failed:
            return "Failed"
        return ""

    def open_popup(self) -> None:
        self._fill_popup()
        width = max(self.popup.width(), self.width())
        height = min(420, 86 + 54 * max(1, len(self.records)))
        self.popup.resize(width, height)
        self.popup.move(self.mapToGlobal(QPoint(0, self.height() + 4)))
        self.popup.show()
        self.popup.list.setFocus()

    def _fill_popup(self) -> None:
        self.popup.list.clear()
        for record in self.records:
            item = QListWidgetItem()
            item.setData(RECORD_ROLE, record)
            item.setData(STATE_ROLE, self.state_of(record.id))
            plan = self.plans.get(record.id)
            if plan is not None:
                item.setData(PLAN_ROLE, plan)
                item.setToolTip(f"Loads with {plan.label}")
            if record.id in self.base_models:
                item.setData(BASE_ROLE, True)
                item.setToolTip(f"{BASE_MODEL_TIP}\n\n{item.toolTip()}".strip())
            self.popup.list.addItem(item)
            if record.id == self.current:
                item.setSelected(True)
                self.popup.list.setCurrentItem(item)
        loading = self.hub.loading is not None
        self.popup.progress.setVisible(loading)
        self.popup.progress.setValue(int(self.hub.progress * 100))

    def _chosen(self, model_id: str) -> None:
        self.set_current(model_id)
        self.model_chosen.emit(model_id)

    def _refresh(self, *_args: object) -> None:
        record = self.record(self.current)
        if record is None:
            label = f"{self.current} (not installed)" if self.current else "Choose a model"
            self.missing = bool(self.current)
        else:
            self.missing = False
            label = f"{model_label(record)}  ·  {record.quantization}"
            if record.source.startswith(REMOTE_SOURCE):
                label = f"{model_label(record)}  ·  remote ({record.source.partition(':')[2]})"
            if record.id in self.base_models:
                label += "  ·  base model"
            state = self.state_of(record.id)
            if state and state != "Loaded":
                label += f"  ·  {state if state != 'Failed' else 'failed to load'}"
        base = record is not None and record.id in self.base_models
        self.setToolTip(BASE_MODEL_TIP if base else "")
        self.base_model_shown.emit(model_label(record) if base and record is not None else "")
        dot = "●" if self.current and self.hub.loaded == self.current else "○"
        self.setText(f"{dot}  {label}{ARROW}")
        if self.popup.isVisible():
            self._fill_popup()
