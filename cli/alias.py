"""``inglenook alias``: names clients send (``claude-sonnet-4-5``, ``fast``) mapped to installed models."""

from __future__ import annotations

import argparse
from typing import Any

from inglenook.cli.terminal import print_table
from inglenook.engine import Paths


def add_commands(commands: Any) -> None:
    alias = commands.add_parser(
        "alias",
        help="answer requests for a model name (e.g. claude-sonnet-4-5) with an installed model",
        description="Map a model name that clients send to an installed model: `inglenook alias NAME MODEL`. "
        "The API answers requests for NAME from MODEL. Names with no alias keep the usual behaviour "
        "(the default model, or 404 with --strict-model-names).",
    )
    alias.add_argument("name", metavar="NAME", nargs="?", help="the name clients send, e.g. gpt-5-codex or fast")
    alias.add_argument("model", metavar="MODEL", nargs="?", help="an installed model id (see `inglenook list`)")
    alias.add_argument("--list", action="store_true", help="show the aliases")
    alias.add_argument("--remove", metavar="NAME", help="remove the alias NAME")
    alias.set_defaults(handler=cmd_alias, parser=alias)


def cmd_alias(args: argparse.Namespace, paths: Paths) -> int:
    from inglenook.engine import Engine, without_alias  # noqa: PLC0415 — keeps --help fast

    if args.remove and (args.name or args.model or args.list):
        args.parser.error("--remove takes only the alias to remove")
    if not args.remove and not args.list and not (args.name and args.model):
        args.parser.error("give NAME and MODEL, --list, or --remove NAME")
    with Engine(paths, scan=not (args.list or args.remove), crash_guard=args.crash_guard) as engine:
        if args.remove:
            engine.update_settings(model_aliases=without_alias(engine.settings, args.remove))
            print(f"Removed the alias {args.remove.strip().lower()}.")
            return 0
        if args.name:
            aliases = engine.add_alias(args.name, args.model)
            key = args.name.strip().lower()
            print(f"Requests for {key} are answered by {aliases[key]}.")
            if not args.list:
                return 0
        aliases = engine.settings.model_aliases
        if not aliases:
            print("No aliases. `inglenook alias NAME MODEL` adds one.")
            return 0
        print_table([["ALIAS", "MODEL"], *([name, target] for name, target in sorted(aliases.items()))])
    return 0
