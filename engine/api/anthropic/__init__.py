"""Anthropic's Messages API: its request shapes, output and stream, thinking blocks and routes.

May import: api.shared, base, text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...base import lazy_door

# Which module defines each name other packages (or the front door) use. Keep in step with
# the TYPE_CHECKING block below, which is what type checkers read (a test compares them).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "routes": ("messages_router",),
}

__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .routes import messages_router as messages_router
