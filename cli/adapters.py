"""``inglenook adapters list|import|pull|rm``: the LoRA adapters chats and API requests may use.

``inglenook import`` takes adapter files and folders too (they are told apart by their GGUF
header); ``adapters pull REPO`` fetches the GGUF adapters of a Hugging Face repo.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inglenook.cli.terminal import print_table
from inglenook.engine import Paths, human_size

if TYPE_CHECKING:  # the adapter registry brings the store and the model registry: not at every command's start
    from inglenook.engine import AdapterImport


def add_commands(commands: Any) -> None:
    adapters = commands.add_parser(
        "adapters", help="LoRA adapters: list, import a file or folder, pull from Hugging Face, remove",
        description="LoRA adapters (GGUF files with general.type 'adapter') applied on top of a model: per "
        "chat in the window's chat settings, per request with the API's lora field.",
    )
    actions = adapters.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    listing = actions.add_parser("list", help="the imported adapters, numbered as GET /lora-adapters numbers them")
    listing.set_defaults(handler=cmd_list)
    imported = actions.add_parser("import", help="import an adapter file, or every adapter under a folder, in place")
    imported.add_argument("path", metavar="PATH")
    imported.set_defaults(handler=cmd_import)
    pull = actions.add_parser("pull", help="download the GGUF adapters of a Hugging Face repo")
    pull.add_argument("repo", metavar="OWNER/REPO")
    pull.add_argument("--revision", default=None, help="a branch, tag or commit (default: main)")
    pull.set_defaults(handler=cmd_pull)
    remove = actions.add_parser("rm", help="forget an adapter (its file is kept)")
    remove.add_argument("adapter", metavar="ADAPTER")
    remove.set_defaults(handler=cmd_rm)


def _engine(paths: Paths):  # noqa: ANN202 — deferred import keeps --help fast
    from inglenook.engine import Engine  # noqa: PLC0415

    return Engine(paths, scan=False)


def cmd_list(_args: argparse.Namespace, paths: Paths) -> int:
    with _engine(paths) as engine:
        records = engine.adapters.list()
    if not records:
        print("No LoRA adapters; `inglenook adapters import PATH` or `inglenook adapters pull REPO` adds one.")
        return 0
    print_table([["#", "ADAPTER", "BASE", "RANK", "SIZE", "FILE"],
                 *([str(i), r.id, r.base_model or r.architecture, str(r.rank), human_size(r.size_bytes), str(r.path)]
                   for i, r in enumerate(records))])
    return 0


def cmd_import(args: argparse.Namespace, paths: Paths) -> int:
    with _engine(paths) as engine:
        result = engine.adapters.import_path(Path(args.path))
    return _report(result)


def cmd_pull(args: argparse.Namespace, paths: Paths) -> int:
    from inglenook.engine import HubClient, pull_adapters, resolve_token  # noqa: PLC0415

    with _engine(paths) as engine:
        client = HubClient(token=resolve_token(engine.settings.hf_token))
        result = pull_adapters(engine.adapters, client, args.repo, engine.paths.data / "adapters", args.revision)
    return _report(result)


def cmd_rm(args: argparse.Namespace, paths: Paths) -> int:
    with _engine(paths) as engine:
        record = engine.adapters.remove(args.adapter)
    print(f"removed {record.id} (the file {record.path} is kept)")
    return 0


def _report(result: AdapterImport) -> int:
    for record in result.imported:
        print(f"imported adapter {record.id}  ({record.architecture}, rank {record.rank}, {record.path})")
    for record in result.already:
        print(f"already there: {record.id}  ({record.path})")
    for path, reason in result.skipped:
        print(f"skipped {path}: {reason}", file=sys.stderr)
    return 0 if result.imported or result.already else 1
