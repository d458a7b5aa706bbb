"""The lab's two charts (quality and decode speed against file size): one dot per variant,
labelled, the recommended one a star, and a dashed trend line through them."""

from __future__ import annotations

import math

from inglenook.engine import LabResult
from PySide6.QtCharts import QChart, QLineSeries, QScatterSeries, QValueAxis
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QColor, QFont, QPen

# Point colours for the variants, most precise first (readable on light and dark).
SERIES_COLORS = ["#5b5bd6", "#2f9e8f", "#d9822b", "#c2407a", "#3a86c8", "#8a9a2b", "#9657c9", "#c0392b"]


def make_chart(title: str, x_title: str, y_title: str, dark: bool) -> tuple[QChart, QValueAxis, QValueAxis]:
    chart = QChart()
    chart.setTheme(QChart.ChartTheme.ChartThemeDark if dark else QChart.ChartTheme.ChartThemeLight)
    chart.setTitle(title)
    chart.legend().hide()
    chart.setAnimationOptions(QChart.AnimationOption.NoAnimation)
    chart.setMargins(chart.margins().__class__(4, 4, 4, 4))
    chart.setBackgroundRoundness(6)
    x_axis, y_axis = QValueAxis(), QValueAxis()
    x_axis.setTitleText(x_title)
    y_axis.setTitleText(y_title)
    x_axis.setLabelFormat("%.0f")
    chart.addAxis(x_axis, Qt.AlignmentFlag.AlignBottom)
    chart.addAxis(y_axis, Qt.AlignmentFlag.AlignLeft)
    return chart, x_axis, y_axis


def plot(
    chart: QChart, x_axis: QValueAxis, y_axis: QValueAxis,
    points: list[tuple[LabResult, float | None]], recommended: str | None, y_format: str, palette: dict[str, str],
) -> None:
    """Draw ``points`` (result, y) on ``chart``: a dashed trend line and one labelled dot per variant,
    the recommended one a larger star."""
    chart.removeAllSeries()
    drawn = [(r, y) for r, y in points if y is not None and math.isfinite(y)]
    if not drawn:
        return
    trend = QLineSeries()
    trend.setPen(QPen(QColor(palette["muted"]), 1.2, Qt.PenStyle.DashLine))
    for r, y in drawn:
        trend.append(QPointF(r.size_bytes / 1e6, y))
    chart.addSeries(trend)
    trend.attachAxis(x_axis)
    trend.attachAxis(y_axis)
    by_precision = sorted(drawn, key=lambda p: -p[0].bits_per_weight)
    for i, (r, y) in enumerate(by_precision):
        dot = QScatterSeries()
        dot.setName(r.quantization)
        is_best = r.model_id == recommended
        dot.setMarkerSize(18.0 if is_best else 12.0)
        color = QColor(SERIES_COLORS[i % len(SERIES_COLORS)])
        dot.setColor(color)
        dot.setBorderColor(QColor(palette["text"]) if is_best else color)
        if is_best:
            dot.setMarkerShape(QScatterSeries.MarkerShape.MarkerShapeStar)
        dot.append(QPointF(r.size_bytes / 1e6, y))
        # The format has no @-placeholders, so it is the point's label as written.
        dot.setPointLabelsFormat(f"★ {r.quantization}" if is_best else r.quantization)
        dot.setPointLabelsVisible(True)
        dot.setPointLabelsClipping(False)
        label_font = QFont()
        label_font.setBold(is_best)
        dot.setPointLabelsFont(label_font)
        dot.setPointLabelsColor(QColor(palette["text"]))
        chart.addSeries(dot)
        dot.attachAxis(x_axis)
        dot.attachAxis(y_axis)
    xs = [r.size_bytes / 1e6 for r, _ in drawn]
    ys = [y for _, y in drawn]
    x_pad = max(1.0, (max(xs) - min(xs)) * 0.12)
    y_pad = max(abs(max(ys)) * 0.05, (max(ys) - min(ys)) * 0.15, 1e-3)
    x_axis.setRange(max(0.0, min(xs) - x_pad), max(xs) + x_pad)
    y_axis.setRange(min(0.0, min(ys)), max(ys) + y_pad)
    y_axis.setLabelFormat(y_format)
    x_axis.applyNiceNumbers()
    y_axis.applyNiceNumbers()
