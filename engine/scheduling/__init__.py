"""Who runs when: the scheduler's step loop over loaded models, the model pool and its memory
budget, load plans (context per model), and routing a request to a model.

May import: base, models, runtime, store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base import lazy_door

# Which module defines each name other packages (or the front door) use. Keep in step with
# the TYPE_CHECKING block below, which is what type checkers read (a test compares them).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "model_context": ("LoadPlan", "context_for", "context_loader", "plan_load"),
    "model_pool": ("budget_from_setting", "estimate_resident_bytes"),
    "routing": ("ChatModels", "Router", "is_encoder", "search_model_id", "small_model_id"),
    "scheduler": ("Scheduler",),
}

__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .model_context import (
        LoadPlan as LoadPlan, context_for as context_for, context_loader as context_loader,
        plan_load as plan_load,
    )
    from .model_pool import (
        budget_from_setting as budget_from_setting, estimate_resident_bytes as estimate_resident_bytes,
    )
    from .routing import (
        ChatModels as ChatModels, Router as Router, is_encoder as is_encoder,
        search_model_id as search_model_id, small_model_id as small_model_id,
    )
    from .scheduler import Scheduler as Scheduler
