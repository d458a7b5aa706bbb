"""The Models page's Installed tab (one row per model: badges, Show in folder, Delete), and
the drop filter that turns GGUF files dropped on a text box into an import."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QDropEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QScrollArea, QVBoxLayout, QWidget

from inglenook.engine import LoadPlan, ModelRecord

from inglenook.app.widgets.elided import ElidedLabel
from inglenook.app.widgets.flow_layout import FlowLayout
from inglenook.app.text.formatting import BASE_MODEL, BASE_MODEL_TIP, human_count, human_size, model_label


def _badge(text: str, parent: QWidget, muted: bool = False) -> QLabel:
    label = QLabel(text, parent)
    label.setObjectName("MutedBadge" if muted else "Badge")
    return label


class ModelRow(QFrame):
    delete_requested = Signal(str)

    def __init__(self, record: ModelRecord, loaded: bool, parent: QWidget | None = None,
                 plan: LoadPlan | None = None, base: bool = False) -> None:
        super().__init__(parent)
        self.setObjectName("ModelRow")
        self.record = record
        row = QHBoxLayout(self)
        row.setContentsMargins(16, 12, 12, 12)
        row.setSpacing(10)
        text = QVBoxLayout()
        text.setSpacing(4)
        name = QLabel(model_label(record), self)
        name.setObjectName("ModelName")
        detail = ElidedLabel(f"{record.id}  ·  {record.architecture}", self)
        detail.setObjectName("PageHint")
        badges = FlowLayout(spacing=6)  # wraps onto a second line in a narrow window
        badges.addWidget(_badge(record.quantization, self))
        badges.addWidget(_badge(human_size(record.size_bytes), self, muted=True))
        if record.parameter_count:
            badges.addWidget(_badge(f"{human_count(record.parameter_count)} params", self, muted=True))
        if record.context_length:
            badges.addWidget(_badge(f"{record.context_length:,} ctx", self, muted=True))
        if record.source in ("starter", "import", "download"):
            label = {"starter": "starter", "import": "imported, in place", "download": "downloaded"}[record.source]
            badges.addWidget(_badge(label, self, muted=True))
        if loaded:
            badges.addWidget(_badge("● loaded", self))
        self.base_badge: QLabel | None = None
        if base:
            self.base_badge = _badge(BASE_MODEL, self)
            self.base_badge.setToolTip(BASE_MODEL_TIP)
            badges.addWidget(self.base_badge)
        # What loading it takes, said before it loads: a line of its own, so a long estimate
        # never widens the row past the page.
        self.plan_badge: QLabel | None = None
        if plan is not None:
            self.plan_badge = QLabel(("⚠ " if plan.short else "") + f"Loads with {plan.summary}", self)
            self.plan_badge.setObjectName("PageHint")
            self.plan_badge.setWordWrap(True)
            self.plan_badge.setToolTip(f"Loads with {plan.label}")
        text.addWidget(name)
        text.addWidget(detail)
        text.addLayout(badges)
        if self.plan_badge is not None:
            text.addWidget(self.plan_badge)
        if not record.usable:  # llama.cpp refused it last time: say why, until it loads
            self.problem = QLabel(f"Cannot be loaded: {record.problem}", self)
            self.problem.setObjectName("PageHint")
            self.problem.setWordWrap(True)
            text.addWidget(self.problem)
        row.addLayout(text, 1)
        reveal = QPushButton("Show in folder", self)
        reveal.clicked.connect(self.reveal)
        delete = QPushButton("Delete", self)
        delete.setObjectName("DangerButton")
        delete.setEnabled(record.source != "starter")
        delete.setToolTip("The bundled starter model cannot be deleted" if record.source == "starter" else "Remove this model")
        delete.clicked.connect(lambda: self.delete_requested.emit(record.id))
        buttons = QVBoxLayout()  # stacked, so the row needs little width beside the text
        buttons.setSpacing(6)
        buttons.addWidget(reveal)
        buttons.addWidget(delete)
        buttons.addStretch(1)
        row.addLayout(buttons)

    def reveal(self) -> None:
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.record.path.parent)))


class InstalledList(QScrollArea):
    """The installed models, one row each."""

    delete_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        body = QWidget(self)
        body.setObjectName("ModelsPage")
        layout = QVBoxLayout(body)
        layout.setContentsMargins(0, 0, 4, 0)
        layout.setSpacing(8)
        self.rows_layout = QVBoxLayout()
        self.rows_layout.setSpacing(8)
        layout.addLayout(self.rows_layout)
        self.empty = QLabel("No models yet. Find one in Discover, import a GGUF file, or drop one on the window.",
                            body)
        self.empty.setObjectName("PageHint")
        layout.addWidget(self.empty)
        layout.addStretch(1)
        self.setWidget(body)
        self.rows: list[ModelRow] = []

    def set_models(self, records: list[ModelRecord], loaded: str | None,
                   plans: dict[str, LoadPlan] | None = None, base_models: set[str] | None = None) -> None:
        for row in self.rows:
            row.hide()
            row.deleteLater()
        self.rows = []
        for record in records:
            row = ModelRow(record, record.id == loaded, self.widget(), (plans or {}).get(record.id),
                           base=record.id in (base_models or set()))
            row.delete_requested.connect(self.delete_requested)
            self.rows_layout.addWidget(row)
            self.rows.append(row)
        self.empty.setVisible(not records)


class ModelDropFilter(QObject):
    """Installed on a widget that takes drops itself (the message box would paste a dropped file's
    path as text): GGUF files and folders go to ``on_drop`` instead; other drops pass through."""

    def __init__(self, paths_of: Callable[[QDropEvent], list[Path]], on_drop: Callable[[list[Path]], None],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.paths_of = paths_of
        self.on_drop = on_drop

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        if event.type() in (QEvent.Type.DragEnter, QEvent.Type.DragMove, QEvent.Type.Drop):
            paths = self.paths_of(event) if isinstance(event, QDropEvent) else []
            if paths and isinstance(event, QDropEvent):
                event.acceptProposedAction()
                if event.type() == QEvent.Type.Drop:
                    self.on_drop(paths)
                return True
        return super().eventFilter(watched, event)
