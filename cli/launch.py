"""``inglenook launch codex|claude|opencode``: point a coding agent at the local server, then start it.

The client's settings (base URL and key from the saved API settings, the model) are merged
into its own configuration file, with a backup of the file as it was; ``--print`` shows them
instead of writing anything.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from typing import Any

from inglenook.engine import CLIENTS, Paths

_TITLES = {"codex": "Codex CLI", "claude": "Claude Code", "opencode": "opencode"}


def add_commands(commands: Any) -> None:
    launch = commands.add_parser(
        "launch",
        help="configure a coding agent (codex, claude, opencode) for the local server and start it",
        description="Write the client's configuration so it talks to this machine's Inglenook server "
        "(base URL and key from the saved API settings), keeping a backup of the file it had, then start "
        "the client if it is installed.",
    )
    launch.add_argument("client", choices=CLIENTS, help="which client: " + ", ".join(f"{k} ({v})" for k, v in _TITLES.items()))
    launch.add_argument("--model", metavar="ID", help="installed model id or alias (default: the default model)")
    launch.add_argument("--print", dest="print_only", action="store_true",
                        help="print the settings instead of writing them or starting the client")
    launch.add_argument("--no-start", action="store_true", help="write the settings but do not start the client")
    launch.set_defaults(handler=cmd_launch)


def cmd_launch(args: argparse.Namespace, paths: Paths) -> int:
    from inglenook.engine import Endpoint, Engine, client_setup, write_client_config  # noqa: PLC0415

    with Engine(paths, crash_guard=args.crash_guard) as engine:
        model = _model_name(engine, args.model)
        s = engine.settings
        endpoint = Endpoint.of(s.api_host, s.api_port, model, s.api_key)
    setup = client_setup(args.client, endpoint)
    if args.print_only:
        print(f"# {setup.title}: {setup.path}")
        print(setup.snippet, end="")
        if setup.env:
            print(f"\n# environment for {setup.command}")
            print("\n".join(setup.shell_lines()))
        return 0
    backup = write_client_config(setup)
    print(f"{setup.title} now uses {setup.base_url} with the model {model} ({setup.path}).")
    if backup is not None:
        print(f"The previous file is kept as {backup}.")
    if not _server_answers(endpoint.root):
        print("The server is not running: start it with `inglenook serve` (or the desktop app).", file=sys.stderr)
    if args.no_start:
        return 0
    executable = shutil.which(setup.command)
    if executable is None:
        print(f"{setup.title} is not installed (no `{setup.command}` on PATH). Install it: {setup.install_hint}")
        return 0
    sys.stdout.flush()
    return subprocess.call([executable], env={**os.environ, **setup.env})  # the client found on PATH


def _model_name(engine: Any, wanted: str | None) -> str:
    """An alias as given (the server maps it), else the installed model's id."""
    if wanted and wanted.strip().lower() in engine.settings.model_aliases:
        return wanted.strip().lower()
    return engine.resolve_model(wanted).id if wanted else engine.default_model_id()


def _server_answers(root: str) -> bool:
    import httpx  # noqa: PLC0415

    try:
        return httpx.get(root + "/health", timeout=2.0).status_code < 500
    except httpx.HTTPError:
        return False
