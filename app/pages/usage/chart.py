"""A bar per day, stacked by model, drawn with QPainter (QtCharts is not always installed).

The Usage page shows two: tokens per day, and what those tokens would have cost per day on
the API chosen in the page's header. Each model keeps its colour in both, and a legend
under the bars names them.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from inglenook.app.widgets import theme

MODEL_COLORS = ["#5b5bd6", "#2f9e8f", "#d9822b", "#c2407a", "#3a86c8", "#8a9a2b", "#9657c9", "#c0392b"]
LEFT, RIGHT, TOP, BOTTOM, LEGEND = 64, 12, 28, 30, 22

# (day label, [(model, value)]) per bar, oldest first.
Bars = list[tuple[str, list[tuple[str, float]]]]


def model_color(models: list[str], model: str) -> QColor:
    return QColor(MODEL_COLORS[models.index(model) % len(MODEL_COLORS)] if model in models else "#888888")


class StackedBars(QWidget):
    """Bars of stacked values with a title, a value axis and a legend of models."""

    def __init__(self, title: str, value_label: Callable[[float], str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = title
        self.value_label = value_label
        self.bars: Bars = []
        self.models: list[str] = []
        self.setMinimumHeight(200)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def set_bars(self, bars: Bars, models: list[str], title: str | None = None) -> None:
        self.bars, self.models = bars, models
        if title is not None:
            self.title = title
        self.update()

    @property
    def peak(self) -> float:
        return max((sum(v for _, v in stack) for _, stack in self.bars), default=0.0)

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 — Qt's name
        colors = theme.colors(theme.current_mode())
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QColor(colors["text"]))
        painter.drawText(QRectF(0, 0, self.width(), TOP - 6), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         self.title)
        plot = QRectF(LEFT, TOP, max(10, self.width() - LEFT - RIGHT), max(10, self.height() - TOP - BOTTOM - LEGEND))
        self._axis(painter, plot, colors)
        self._draw_bars(painter, plot, colors)
        self._legend(painter, plot.bottom() + BOTTOM, colors)
        painter.end()

    def _axis(self, painter: QPainter, plot: QRectF, colors: dict[str, str]) -> None:
        peak = self.peak or 1.0
        painter.setPen(QPen(QColor(colors["border"]), 1))
        for step in range(5):
            y = plot.bottom() - plot.height() * step / 4
            painter.drawLine(int(plot.left()), int(y), int(plot.right()), int(y))
        painter.setPen(QColor(colors["muted"]))
        for step in (0, 2, 4):
            y = plot.bottom() - plot.height() * step / 4
            painter.drawText(QRectF(0, y - 8, LEFT - 6, 16), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                             self.value_label(peak * step / 4))

    def _draw_bars(self, painter: QPainter, plot: QRectF, colors: dict[str, str]) -> None:
        if not self.bars:
            return
        peak = self.peak or 1.0
        slot = plot.width() / len(self.bars)
        width = max(2.0, slot * 0.62)
        every = max(1, int(len(self.bars) / max(1, plot.width() / 48)))  # day labels that fit
        for i, (day, stack) in enumerate(self.bars):
            x = plot.left() + slot * i + (slot - width) / 2
            y = plot.bottom()
            for model, value in stack:
                height = plot.height() * value / peak
                painter.fillRect(QRectF(x, y - height, width, height), model_color(self.models, model))
                y -= height
            if i % every == 0 or i == len(self.bars) - 1:
                painter.setPen(QColor(colors["muted"]))
                painter.drawText(QRectF(x - 20, plot.bottom() + 4, width + 40, BOTTOM - 6),
                                 Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop, day[5:])  # MM-DD

    def _legend(self, painter: QPainter, top: float, colors: dict[str, str]) -> None:
        x = float(LEFT)
        for model in self.models:
            painter.fillRect(QRectF(x, top + 5, 10, 10), model_color(self.models, model))
            painter.setPen(QColor(colors["text"]))
            text_width = painter.fontMetrics().horizontalAdvance(model)
            painter.drawText(QRectF(x + 14, top, text_width + 4, 20), Qt.AlignmentFlag.AlignVCenter, model)
            x += text_width + 32
