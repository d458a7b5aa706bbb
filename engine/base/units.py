"""Sizes and counts for people: one spelling for the terminal and the desktop app."""

from __future__ import annotations


def human_size(n: float) -> str:
    """Bytes in decimal units, as file managers and Hugging Face show them: '98.4 MB'."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def human_count(n: int) -> str:
    """Parameter and download counts: '134.5M', '5K'."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}".replace(".0", "")
    return str(n)


def human_duration(seconds: float) -> str:
    """A remaining time for people, coarse to fine: '45 s', '3 min 05 s', '1 h 02 min'."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
