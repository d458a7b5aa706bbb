"""``inglenook keys``: named API keys for a server a team shares (create, list, revoke)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from inglenook.cli.terminal import print_table
from inglenook.engine import Paths


def add_commands(commands: Any) -> None:
    keys = commands.add_parser(
        "keys",
        help="named API keys for a shared server: create, list, revoke",
        description="Named API keys, each with optional limits. Only a hash of each key is stored: "
        "`create` shows the key once. A running server sees changes at once.",
    )
    actions = keys.add_subparsers(dest="keys_action", metavar="ACTION", required=True)
    create = actions.add_parser("create", help="make a key (shown once)")
    create.add_argument("name", metavar="NAME", help="who the key is for, e.g. alice or ci-bot")
    create.add_argument("--rpm", type=int, metavar="N", help="at most N requests per minute (default: no limit)")
    create.add_argument("--max-streams", type=int, metavar="N", help="at most N generations at once (default: no limit)")
    create.add_argument("--models", metavar="A,B", help="only these model names or ids (default: every model)")
    actions.add_parser("list", help="show the keys, their limits and use")
    revoke = actions.add_parser("revoke", help="stop a key working (its open streams end)")
    revoke.add_argument("name", metavar="NAME")
    keys.set_defaults(handler=cmd_keys)


def cmd_keys(args: argparse.Namespace, paths: Paths) -> int:
    from inglenook.engine import ApiKeys, KeyLimits, Store  # noqa: PLC0415 — keeps --help fast

    store = Store(paths.database)
    try:
        keys = ApiKeys(store)
        if args.keys_action == "create":
            models = tuple(m for m in (args.models or "").split(",") if m.strip())
            record, key = keys.create(args.name, KeyLimits(args.rpm, args.max_streams, models))
            print(f"Created the key {record.name!r}. It is shown only this once:\n\n    {key}\n")
            print("Clients send it as 'Authorization: Bearer KEY'.")
        elif args.keys_action == "revoke":
            keys.revoke(args.name)
            print(f"Revoked the key {args.name!r}; its next request gets 401 and its open streams end.")
        else:
            _print_keys(keys.list())
    finally:
        store.close()
    return 0


def _print_keys(records: list[Any]) -> None:
    if not records:
        print("No named keys. `inglenook keys create NAME` makes one.")
        return
    rows = [["NAME", "KEY", "REQ/MIN", "STREAMS", "MODELS", "REQUESTS", "LAST USED"]]
    for r in records:
        limits = r.limits
        used = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.last_used_at)) if r.last_used_at else "never"
        rows.append([
            r.name, r.prefix + "…", str(limits.requests_per_minute or "any"), str(limits.max_streams or "any"),
            ",".join(limits.models) or "all", str(r.requests), used,
        ])
    print_table(rows)
