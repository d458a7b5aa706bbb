"""Other machines: remote engines reached over HTTP, their catalogue, RPC workers that lend
their compute and the host process that runs models over them.

May import: base, runtime, store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base import lazy_door

# Which module defines each name other packages (or the front door) use. Keep in step with
# the TYPE_CHECKING block below, which is what type checkers read (a test compares them).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "catalogue": ("REMOTE_SOURCE", "RemoteCatalogue", "keyring_available"),
    "remote": (
        "RemoteAnswer", "RemoteEndpoint", "RemoteEngine", "RemoteEngineError", "SEPARATOR",
        "status_failure", "timeouts", "transport_failure",
    ),
    "rpc": (
        "RPC_NO_AUTH_WARNING", "RpcError", "Worker", "attach_workers", "check_worker_host", "parse_workers",
        "worker_command", "worker_env", "worker_reachable",
    ),
    "rpc_host": ("CHILD_VARIABLE", "RpcHost", "watch_parent"),
}

__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .catalogue import (
        REMOTE_SOURCE as REMOTE_SOURCE, RemoteCatalogue as RemoteCatalogue,
        keyring_available as keyring_available,
    )
    from .remote import (
        SEPARATOR as SEPARATOR, RemoteAnswer as RemoteAnswer, RemoteEndpoint as RemoteEndpoint,
        RemoteEngine as RemoteEngine, RemoteEngineError as RemoteEngineError,
        status_failure as status_failure, timeouts as timeouts, transport_failure as transport_failure,
    )
    from .rpc import (
        RPC_NO_AUTH_WARNING as RPC_NO_AUTH_WARNING, RpcError as RpcError, Worker as Worker,
        attach_workers as attach_workers, check_worker_host as check_worker_host,
        parse_workers as parse_workers, worker_command as worker_command, worker_env as worker_env,
        worker_reachable as worker_reachable,
    )
    from .rpc_host import CHILD_VARIABLE as CHILD_VARIABLE, RpcHost as RpcHost, watch_parent as watch_parent
