"""``inglenook worker``: offer this machine's CPU (and GPU) to another Inglenook over llama.cpp RPC.

It runs llama.cpp's own rpc-server until Ctrl-C. RPC has no authentication, so the worker
binds to loopback unless told otherwise, and a network address needs ``--allow-network``.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from typing import Any

from inglenook.engine import Paths


def add_commands(commands: Any) -> None:
    worker = commands.add_parser(
        "worker",
        help="offer this machine to another Inglenook as an RPC worker (llama.cpp rpc-server)",
        description="Offer this machine's CPU/GPU to a main Inglenook (`inglenook serve --rpc HOST:PORT`), which "
        "then puts some of a model's layers here. llama.cpp's RPC has NO authentication and no encryption: "
        "anyone who can reach the port can use it. The worker listens on 127.0.0.1 unless told otherwise.",
    )
    worker.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    worker.add_argument("--port", type=int, default=50052, help="port to listen on (default 50052, rpc-server's own)")
    worker.add_argument("--threads", type=int, default=0, help="CPU threads (default: llama.cpp's choice)")
    worker.add_argument("--allow-network", action="store_true",
                        help="acknowledge that a non-loopback worker is open to anyone who can reach it")
    worker.set_defaults(handler=cmd_worker)


def cmd_worker(args: argparse.Namespace, _paths: Paths) -> int:
    from inglenook.engine import RPC_NO_AUTH_WARNING, check_worker_host, worker_command, worker_env  # noqa: PLC0415

    if not 0 < args.port < 65536:
        print("inglenook worker: error: --port must be between 1 and 65535", file=sys.stderr)
        return 2
    check_worker_host(args.host, args.allow_network)
    command = worker_command(args.host, args.port, args.threads)
    if args.allow_network:
        print(f"Warning: {RPC_NO_AUTH_WARNING}", file=sys.stderr)
    process = subprocess.Popen(command, env=worker_env())
    print(f"Offering this machine as an RPC worker at {args.host}:{args.port} (rpc-server pid {process.pid}).",
          flush=True)
    print("Press Ctrl-C to stop.", file=sys.stderr, flush=True)

    def stop(*_: object) -> None:
        process.terminate()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        status = process.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if process.poll() is None:
            process.kill()
            process.wait()
    # Stopped by Ctrl-C or SIGTERM: a clean exit. Otherwise rpc-server's own status (it said why).
    return 0 if status in (0, -signal.SIGTERM, -signal.SIGINT) else 1
