"""The OpenAI family's chat and text completions endpoints and the model cards of ``/v1/models``.

May import: api.shared, base, core, models, store, text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...base import lazy_door

# Which module defines each name other packages (or the front door) use. Keep in step with
# the TYPE_CHECKING block below, which is what type checkers read (a test compares them).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "model_cards": ("ModelCatalogue",),
    "text_endpoints": ("CHAT_COMPLETIONS", "COMPLETIONS", "TextEndpoint", "TextRequestT"),
}

__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .model_cards import ModelCatalogue as ModelCatalogue
    from .text_endpoints import (
        CHAT_COMPLETIONS as CHAT_COMPLETIONS, COMPLETIONS as COMPLETIONS, TextEndpoint as TextEndpoint,
        TextRequestT as TextRequestT,
    )
