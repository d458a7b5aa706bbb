"""llama.cpp's RPC backend: workers that lend this machine's CPU/GPU, and attaching to them.

A worker is llama.cpp's own ``rpc-server`` (built by ``scripts/llama_build.py rpc`` into
llama_cpp/lib). RPC has no authentication and no encryption: anyone who can reach a
worker's port can run code-sized payloads on it and read what it holds, so a worker binds
to loopback unless the user acknowledges the network (``--allow-network``).

``attach_workers`` loads the RPC module into this process's ggml and registers each worker
as a device; llama.cpp then puts the offloaded layers on those devices (in proportion to
their free memory) and keeps the rest on the local one. ggml aborts the whole process when
a worker it is using disappears, so the engine attaches workers only in a child process
(``rpc_host``), never in the window's or the server's own process.
"""

from __future__ import annotations

import ctypes
import ipaddress
import logging
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..base import InglenookError, InvalidRequest
from ..runtime import Device, library_dir

log = logging.getLogger(__name__)

DEFAULT_PORT = 50052  # rpc-server's own default
SERVER_NAME = "rpc-server"
MODULE_NAME = "libggml-rpc.so"
REACH_TIMEOUT_S = 3.0
RPC_NO_AUTH_WARNING = (
    "llama.cpp's RPC has no authentication and no encryption: anyone who can reach a worker's port "
    "can use it and read what it holds. Offer workers only on a network you trust."
)


class RpcError(InglenookError):
    """A worker cannot be started or reached, or this build has no RPC backend."""

    code = "rpc_error"


@dataclass(frozen=True)
class Worker:
    host: str
    port: int

    @property
    def endpoint(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_workers(value: str | Iterable[str]) -> list[Worker]:
    """``"a:50052,b:50052"`` (or a list of such) into workers; a bad one is a clear error."""
    items = value.split(",") if isinstance(value, str) else list(value)
    workers = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidRequest(f"a worker is HOST:PORT, e.g. 192.168.1.20:{DEFAULT_PORT}; got {item!r}", param="rpc")
        workers.append(Worker(host, int(port)))
    if len({w.endpoint for w in workers}) != len(workers):
        raise InvalidRequest("the same worker is listed twice", param="rpc")
    return workers


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_worker_host(host: str, allow_network: bool) -> None:
    if not is_loopback(host) and not allow_network:
        raise RpcError(
            f"refusing to offer this machine on {host}: {RPC_NO_AUTH_WARNING} "
            "Add --allow-network to do it anyway, or keep the default 127.0.0.1."
        )


def server_binary(lib_dir: Path | None = None) -> Path:
    path = (lib_dir or library_dir()) / SERVER_NAME
    if not path.is_file():
        raise RpcError(f"this build has no {SERVER_NAME}; build it with `python scripts/llama_build.py rpc`")
    return path


def worker_command(host: str, port: int, threads: int = 0, lib_dir: Path | None = None) -> list[str]:
    command = [str(server_binary(lib_dir)), "--host", host, "--port", str(port)]
    if threads > 0:
        command += ["--threads", str(threads)]
    return command


def worker_env(lib_dir: Path | None = None) -> dict[str, str]:
    """The server copied into llama_cpp/lib uses the wheel's libraries and CPU variants there."""
    lib = str(lib_dir or library_dir())
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (lib, env.get("LD_LIBRARY_PATH", "")) if p)
    return env


def worker_reachable(worker: Worker, timeout_s: float = REACH_TIMEOUT_S) -> bool:
    try:
        with socket.create_connection((worker.host, worker.port), timeout=timeout_s):
            return True
    except OSError:
        return False


_attached: dict[str, int] = {}  # endpoint -> its ggml registry handle, for this process


def attach_workers(workers: list[Worker]) -> list[Device]:
    """Register each worker as a ggml device in this process (see the module's note: only in a
    child process); returns the RPC devices with their free memory."""
    from ..runtime import backend_report  # noqa: PLC0415 — loads llama.cpp

    report = backend_report()
    ggml = report.ggml
    if ggml is None:
        raise RpcError("llama.cpp's backends are not loaded")
    lib = ggml.lib
    lib.ggml_backend_register.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_register.restype = None
    module = report.library_dir / MODULE_NAME
    rpc_reg = _rpc_registry(lib)
    if rpc_reg is None:
        if not module.is_file():
            raise RpcError(f"this build has no RPC backend ({MODULE_NAME}); build it with "
                           "`python scripts/llama_build.py rpc`")
        if not lib.ggml_backend_load(str(module).encode()):
            raise RpcError(f"llama.cpp's RPC backend {MODULE_NAME} did not load")
        rpc_reg = _rpc_registry(lib)
    address = lib.ggml_backend_reg_get_proc_address(rpc_reg, b"ggml_backend_rpc_add_server")
    if not address:
        raise RpcError("this RPC backend cannot add servers")
    add_server = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)(address)
    for worker in workers:
        if worker.endpoint in _attached:
            continue
        # ggml aborts the process when it cannot connect, so look before it leaps.
        if not worker_reachable(worker):
            raise RpcError(f"the RPC worker {worker.endpoint} is not reachable; is `inglenook worker` running there?")
        handle = add_server(worker.endpoint.encode())
        if not handle:
            raise RpcError(f"the RPC worker {worker.endpoint} offers no device")
        lib.ggml_backend_register(handle)
        _attached[worker.endpoint] = int(handle)
        log.info("attached RPC worker %s", worker.endpoint)
    return [d for d in backend_report(refresh=True).devices if d.backend == "RPC"]


def _rpc_registry(lib: ctypes.CDLL) -> int | None:
    for index in range(lib.ggml_backend_reg_count()):
        reg = lib.ggml_backend_reg_get(index)
        if lib.ggml_backend_reg_name(reg) == b"RPC":
            return int(reg)
    return None
