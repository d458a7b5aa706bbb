"""``inglenook serve``: the OpenAI-compatible API without the desktop app.

Flags override the stored settings for this run only. The process serves until Ctrl-C or
SIGTERM, then lets in-flight streams end cleanly and exits with status 0.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Any

from inglenook.engine import Paths

API_KEY_VARIABLE = "INGLENOOK_API_KEY"
MIN_CONTEXT, MAX_CONTEXT = 256, 1_048_576  # the Settings page offers the same range


def add_commands(commands: Any) -> None:
    serve = commands.add_parser(
        "serve",
        help="serve the OpenAI-compatible API (headless)",
        description="Serve the OpenAI-compatible API at http://HOST:PORT/v1 until Ctrl-C. "
        "Flags override the saved settings for this run.",
    )
    serve.add_argument("--host", help="address to listen on (default: the saved setting, 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (default: the saved setting, 8484; 0 picks a free one)")
    serve.add_argument("--model", metavar="ID", help="model that answers requests naming an unknown model; loaded at start")
    serve.add_argument(
        "--api-key", metavar="KEY",
        help=f"require this key as 'Authorization: Bearer KEY' (or set {API_KEY_VARIABLE}); "
        "needed to listen on a non-loopback address",
    )
    serve.add_argument(
        "--cors-origin", dest="cors_origins", action="append", metavar="ORIGIN",
        help="allow browser pages from this origin, e.g. http://localhost:3000 (repeatable)",
    )
    serve.add_argument(
        "--allowed-host", dest="allowed_hosts", action="append", metavar="HOST",
        help="also answer requests addressed to this host name (repeatable)",
    )
    serve.add_argument(
        "--context", type=int, metavar="N",
        help="tokens of context per answer for every model this run serves (default: each model's "
        "setting, else what the model and free memory allow)",
    )
    serve.add_argument("--tls-cert", metavar="PATH", help="serve HTTPS with this certificate (PEM; needs --tls-key)")
    serve.add_argument("--tls-key", metavar="PATH", help="the certificate's private key (PEM)")
    serve.add_argument(
        "--rpc", metavar="HOST:PORT,…",
        help="split models over these RPC workers (`inglenook worker` on each) and this machine, by free memory; "
        "the split model runs in a child process, so a worker that disappears ends only the answer in flight",
    )
    serve.add_argument("--rpc-direct", metavar="HOST:PORT,…", help=argparse.SUPPRESS)  # that child process
    serve.add_argument("--strict-model-names", action="store_true", default=None,
                       help="answer unknown model names with 404 instead of the default model")
    serve.add_argument("--fetch-image-urls", action="store_true",
                       help="fetch http(s) image URLs that requests name (public addresses only; saved setting "
                       "api_fetch_image_urls; off by default)")
    serve.set_defaults(handler=cmd_serve)


def cmd_serve(args: argparse.Namespace, paths: Paths) -> int:
    from inglenook.engine import ApiServer, Engine, TlsFiles, attach_rpc_workers, start_rpc_host  # noqa: PLC0415

    if args.context is not None and not MIN_CONTEXT <= args.context <= MAX_CONTEXT:
        print(f"inglenook serve: error: --context must be between {MIN_CONTEXT} and {MAX_CONTEXT}", file=sys.stderr)
        return 2
    with Engine(paths, crash_guard=args.crash_guard) as engine:
        if args.context is not None:
            # This run only: the saved settings (and each model's own) stay as they are.
            engine.override_settings(context_size=args.context, model_context={})
        if args.fetch_image_urls:
            engine.override_settings(api_fetch_image_urls=True)  # this run only, like --context
        default_model = engine.resolve_model(args.model).id if args.model else None
        tls = TlsFiles.from_paths(args.tls_cert or engine.settings.tls_cert, args.tls_key or engine.settings.tls_key)
        rpc_host = None
        if args.rpc_direct:
            split = attach_rpc_workers(engine, args.rpc_direct, default_model)
            print(f"RPC split: {split.label}", file=sys.stderr, flush=True)
        elif args.rpc:
            print("Starting the model split over the RPC workers…", file=sys.stderr, flush=True)
            rpc_host = start_rpc_host(engine, args.rpc, default_model)
            print(f"RPC split: {rpc_host.split or 'as the workers allow'}", file=sys.stderr, flush=True)
        server = ApiServer.from_settings(
            engine,
            host=args.host, port=args.port, api_key=args.api_key or os.environ.get(API_KEY_VARIABLE) or None,
            cors_origins=args.cors_origins, allowed_hosts=args.allowed_hosts,
            strict_model_names=args.strict_model_names, default_model=default_model, tls=tls,
            route_all=rpc_host.endpoint if rpc_host is not None else None,
        )
        server.start()
        try:
            if default_model and rpc_host is None:
                engine.load_model(default_model)  # loads in the background; requests queue behind it
            print(f"Serving the OpenAI-compatible API at {server.url}", flush=True)
            print("Press Ctrl-C to stop.", file=sys.stderr, flush=True)
            _wait_for_signal()
        finally:
            print("Stopping…", file=sys.stderr, flush=True)
            server.stop()
            if rpc_host is not None:
                rpc_host.stop()
    return 0


def _wait_for_signal() -> None:
    stop = threading.Event()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):  # a timed wait lets signals through on every platform
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
