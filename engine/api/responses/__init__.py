"""OpenAI's Responses API: its request and output shapes, stream, routes and stored responses.

May import: api.shared, base, store, text, tools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...base import lazy_door

# Which module defines each name other packages (or the front door) use. Keep in step with
# the TYPE_CHECKING block below, which is what type checkers read (a test compares them).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "routes": ("responses_router",),
}

__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .routes import responses_router as responses_router
