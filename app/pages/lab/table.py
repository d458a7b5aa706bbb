"""The lab's results table: one row per measured variant, sorted on raw numbers, the
recommended row in bold and stale rows greyed out."""

from __future__ import annotations

import math
from typing import Any

from inglenook.engine import LabResult
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QPersistentModelIndex, Qt
from PySide6.QtGui import QBrush, QColor, QFont

from inglenook.app.widgets.theme import colors, current_mode


def _mb(n: float | None) -> str:
    return "–" if n is None else f"{n / 1e6:,.0f} MB"


def _num(value: float | None, pattern: str) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, pattern)


class LabTableModel(QAbstractTableModel):
    """One row per measured variant; sorts on raw numbers (``UserRole``), shows formatted text."""

    COLUMNS: list[tuple[str, str]] = [
        ("Variant", "quantization"), ("Size", "size_bytes"), ("Bits/w", "bits_per_weight"),
        ("Load", "load_s"), ("RAM", "ram_bytes"), ("VRAM", "vram_bytes"), ("Prompt t/s", "prompt_tps"),
        ("Decode t/s", "decode_tps"), ("Perplexity", "perplexity"), ("KLD", "kld_mean"),
        ("KLD p99", "kld_p99"), ("Same top", "same_top"), ("Status", "status"),
    ]

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.results: list[LabResult] = []
        self.recommended_id: str | None = None
        self._palette = colors(current_mode())

    def set_results(self, results: list[LabResult], recommended_id: str | None) -> None:
        self.beginResetModel()
        self.results = sorted(results, key=lambda r: -r.size_bytes)
        self.recommended_id = recommended_id
        self.endResetModel()

    def upsert(self, result: LabResult) -> None:
        others = [r for r in self.results if r.model_id != result.model_id]
        self.set_results([*others, result], self.recommended_id)

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008, N802 — Qt's name
        return 0 if parent.isValid() else len(self.results)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(self.COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:  # noqa: N802
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.COLUMNS[section][0]
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        result = self.results[index.row()]
        key = self.COLUMNS[index.column()][1]
        recommended = result.model_id == self.recommended_id
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(result, key)
        if role == Qt.ItemDataRole.UserRole:
            return self._sort_value(result, key)
        if role == Qt.ItemDataRole.TextAlignmentRole and index.column() > 0:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.FontRole and (recommended or result.stale):
            font = QFont()
            font.setBold(recommended)
            font.setItalic(result.stale)
            return font
        if role == Qt.ItemDataRole.BackgroundRole and recommended:
            return QBrush(QColor(self._palette["accent_soft"]))
        if role == Qt.ItemDataRole.ForegroundRole and result.stale:
            return QBrush(QColor(self._palette["muted"]))
        if role == Qt.ItemDataRole.ToolTipRole:
            return result.stale_reason or ("recommended for this machine" if recommended else None)
        return None

    def _text(self, r: LabResult, key: str) -> str:
        if key == "quantization":
            return f"★ {r.quantization}" if r.model_id == self.recommended_id else r.quantization
        if key in ("size_bytes", "ram_bytes", "vram_bytes"):
            return _mb(getattr(r, key))
        if key == "bits_per_weight":
            return f"{r.bits_per_weight:.2f}"
        if key == "load_s":
            return _num(r.load_s, ".2f") + (" s" if r.load_s is not None else "")
        if key in ("prompt_tps", "decode_tps"):
            return _num(getattr(r, key), ",.1f")
        if key == "perplexity":
            return _num(r.perplexity, ".3f")
        if key in ("kld_mean", "kld_p99"):
            return _num(getattr(r, key), ".4f")
        if key == "same_top":
            return "–" if r.same_top is None else f"{r.same_top * 100:.1f}%"
        if key == "status":
            if r.stale:
                return "stale"
            return "reference" if r.is_reference else ""
        return ""

    @staticmethod
    def _sort_value(r: LabResult, key: str) -> Any:
        if key == "quantization":
            return r.bits_per_weight
        if key == "status":
            return (r.stale, not r.is_reference)
        value = getattr(r, key)
        return -1.0 if value is None else float(value)
