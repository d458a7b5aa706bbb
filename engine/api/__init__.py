"""The HTTP server: ``ApiServer``, the app that mounts every API family's routes, usage and
proxy routes, TLS and coding clients' configs.

May import: api.anthropic, api.openai, api.responses, api.shared, base, core, models, remote, speech, usage.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base import lazy_door

# Which module defines each name other packages (or the front door) use. Keep in step with
# the TYPE_CHECKING block below, which is what type checkers read (a test compares them).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "client_configs": (
        "CLIENTS", "ClientConfigError", "ClientSetup", "Endpoint", "client_setup", "write_client_config",
    ),
    "server": ("ApiServer",),
    "tls": ("TlsFiles",),
}

__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .client_configs import (
        CLIENTS as CLIENTS, ClientConfigError as ClientConfigError, ClientSetup as ClientSetup,
        Endpoint as Endpoint, client_setup as client_setup, write_client_config as write_client_config,
    )
    from .server import ApiServer as ApiServer
    from .tls import TlsFiles as TlsFiles
