"""The ``Engine`` that assembles the rooms (store, registry, scheduler, chat) for a front end,
with its diagnostics, crash guard and RPC set-up.

May import: base, chat, documents, models, remote, runtime, scheduling, speech, store, tools, usage.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base import lazy_door

# Which module defines each name other packages (or the front door) use. Keep in step with
# the TYPE_CHECKING block below, which is what type checkers read (a test compares them).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "crashguard": ("CrashGuard", "LastCrash"),
    "diagnostics": ("DoctorReport", "SelfTest", "collect"),
    "engine": ("Engine", "EngineHealth", "open_engine"),
    "rpc_setup": ("attach_rpc_workers", "start_rpc_host"),
}

__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .crashguard import CrashGuard as CrashGuard, LastCrash as LastCrash
    from .diagnostics import DoctorReport as DoctorReport, SelfTest as SelfTest, collect as collect
    from .engine import Engine as Engine, EngineHealth as EngineHealth, open_engine as open_engine
    from .rpc_setup import attach_rpc_workers as attach_rpc_workers, start_rpc_host as start_rpc_host
