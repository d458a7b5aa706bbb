"""``inglenook docs add|list|rm COLLECTION FILE…``: named collections of documents, and the
``--file``/``--collection`` attachments of ``inglenook run``.

A collection is a named set of files kept in the store as converted text (like a LocalDocs
folder): ``add`` converts a file only when its bytes changed since it was added, ``rm``
removes files or, with none named, the whole collection. ``inglenook run MODEL --collection
NAME`` attaches every document of a collection to the chat.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inglenook.cli.terminal import print_table, printable
from inglenook.engine import InglenookError, Paths, human_count, human_size

if TYPE_CHECKING:
    from inglenook.engine import ChatService, Document

EXIT_ERROR = 1


def add_commands(commands: Any) -> None:
    docs = commands.add_parser(
        "docs", help="collections of documents to chat with (PDF, Word, PowerPoint, Excel, CSV, HTML, text)",
        description="Keep documents in named collections; attach one to a chat with "
        "`inglenook run MODEL --collection NAME`, or attach files directly with `--file`.",
    )
    actions = docs.add_subparsers(dest="docs_command", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="add files to a collection (converted once; again only when changed)")
    add.add_argument("collection", metavar="COLLECTION")
    add.add_argument("files", metavar="FILE", nargs="+", type=Path)
    add.set_defaults(handler=cmd_docs_add)
    listing = actions.add_parser("list", help="list collections, or the files of one")
    listing.add_argument("collection", metavar="COLLECTION", nargs="?")
    listing.set_defaults(handler=cmd_docs_list)
    remove = actions.add_parser("rm", help="remove files from a collection, or the whole collection")
    remove.add_argument("collection", metavar="COLLECTION")
    remove.add_argument("files", metavar="FILE", nargs="*", type=Path)
    remove.set_defaults(handler=cmd_docs_rm)


def _engine(args: argparse.Namespace, paths: Paths):  # noqa: ANN202 — import deferred: keeps other commands fast
    from inglenook.engine import Engine  # noqa: PLC0415

    return Engine(paths, scan=False, crash_guard=args.crash_guard)


def cmd_docs_add(args: argparse.Namespace, paths: Paths) -> int:
    with _engine(args, paths) as engine:
        results = engine.chats.add_to_collection(args.collection, list(args.files))
        offer = engine.encoder_offer(online=False)  # the known size: no network call from here
    failed = 0
    for item in results:
        if item.outcome == "failed":
            failed += 1
            print(f"inglenook: {printable(item.path)}: {printable(item.detail)}", file=sys.stderr)
        else:
            print(f"{item.outcome:<10}{printable(item.path)}")
    if offer is not None and failed < len(results):
        print(f"inglenook: long documents are searched with the chat model; `{offer.pull_command}` downloads "
              f"{offer.name} ({human_size(offer.size_bytes)}), an embedding model that searches them better",
              file=sys.stderr)
    return EXIT_ERROR if failed else 0


def cmd_docs_list(args: argparse.Namespace, paths: Paths) -> int:
    with _engine(args, paths) as engine:
        collections = engine.chats.collections()
    if args.collection is not None:
        files = collections.get(args.collection.strip())
        if files is None:
            raise InglenookError(f"there is no collection named {args.collection!r}")
        rows = [["FILE", "KIND", "PAGES", "CHARACTERS"]]
        rows += [[f.path, f.kind, str(f.pages or ""), human_count(f.chars)] for f in files]
        print_table(rows)
        return 0
    if not collections:
        print("No collections yet. Add files with: inglenook docs add COLLECTION FILE…")
        return 0
    rows = [["COLLECTION", "FILES", "CHARACTERS"]]
    rows += [[name, str(len(files)), human_count(sum(f.chars for f in files))] for name, files in collections.items()]
    print_table(rows)
    return 0


def cmd_docs_rm(args: argparse.Namespace, paths: Paths) -> int:
    with _engine(args, paths) as engine:
        removed = engine.chats.remove_from_collection(args.collection, list(args.files))
    if args.files:
        print(f"removed {removed} file(s) from {args.collection}")
    else:
        print(f"removed the collection {args.collection} ({removed} file(s))")
    return 0


# -- run --file / --collection -----------------------------------------------------------


def documents_for_run(chats: ChatService, files: list[Path], collections: list[str]) -> list[Document]:
    """The documents ``run`` attaches: each ``--file`` converted (in the conversion worker),
    then each ``--collection``'s documents. A file that cannot be read stops the run with its
    reason before any question is asked."""
    from inglenook.engine import convert_file  # noqa: PLC0415 — only when a file is attached

    documents = []
    for path in files:
        document = convert_file(path)
        pages = f", {document.page_count} pages" if document.page_count else ""
        print(f"inglenook: read {document.name} ({document.kind}{pages}, {human_size(document.size)})", file=sys.stderr)
        for note in document.notes:
            print(f"inglenook: {document.name}: {note}", file=sys.stderr)
        documents.append(document)
    for name in collections:
        documents += chats.collection_documents(name)
    return documents
