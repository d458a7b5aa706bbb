"""What is kept on disk: the SQLite store, its migrations and salvage, settings, the data
folders (paths), images sent with messages, KV state files and the prefix cache over them.

May import: base.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base import lazy_door

# Which module defines each name other packages (or the front door) use. Keep in step with
# the TYPE_CHECKING block below, which is what type checkers read (a test compares them).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "cache": ("CacheUsage", "MIB", "PrefixCache"),
    "message_images": ("MessageImages", "StoredImage", "encode_png"),
    "paths": ("DiskState", "Paths", "disk_state"),
    "records": ("Conversation", "Message"),
    "settings": ("AUTO_CONTEXT", "NOMINAL_AUTO_CONTEXT", "Settings"),
    "sqlite_tables": ("table_named",),
    "store": ("Store",),
}

__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .cache import MIB as MIB, CacheUsage as CacheUsage, PrefixCache as PrefixCache
    from .message_images import (
        MessageImages as MessageImages, StoredImage as StoredImage, encode_png as encode_png,
    )
    from .paths import DiskState as DiskState, Paths as Paths, disk_state as disk_state
    from .settings import (
        AUTO_CONTEXT as AUTO_CONTEXT, NOMINAL_AUTO_CONTEXT as NOMINAL_AUTO_CONTEXT, Settings as Settings,
    )
    from .sqlite_tables import table_named as table_named
    from .records import Conversation as Conversation, Message as Message
    from .store import Store as Store
