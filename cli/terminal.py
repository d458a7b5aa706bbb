"""Terminal output shared by the commands."""

from __future__ import annotations

from collections.abc import Sequence


def print_table(rows: Sequence[Sequence[str]]) -> None:
    """Left-aligned columns two spaces apart; the first row is the header."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
