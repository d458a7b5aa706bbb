"""The ``inglenook`` command: terminal chat and model management.

This is a front end: it parses arguments, calls the engine, and prints. Errors the engine
raises on purpose become one line on stderr and a non-zero exit status, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import logging
import signal
import sqlite3
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from inglenook import __version__
from inglenook.cli.log_file import LogFileHandler
from inglenook.cli.terminal import ProgressLine, print_table
from inglenook.engine import CrashGuard, InglenookError, Paths, StoreError, human_count, human_size

if TYPE_CHECKING:
    from inglenook.engine import ImageInput, PromptProgress

log = logging.getLogger("inglenook.cli")

EXIT_ERROR = 1
EXIT_USAGE = 2
# Disk and permission failures that reach the CLI untyped still become one line, not a traceback.
_STORAGE_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT, errno.EIO}

# The command groups that live in modules of their own (inglenook.cli.<module>), in `--help`'s
# order, with the commands each adds. A command's run imports only its own group's module, and
# that module imports the engine rooms it needs when its command runs: `inglenook run` starts
# without reading the parsers of `serve`, `keys` or `pull` (issue 27: start-up). Help, no
# command (the app) or an unknown one imports them all. A test holds this table to the modules.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "serve": ("serve",),
    "alias": ("alias",),
    "usage": ("usage",),
    "keys": ("keys",),
    "worker": ("worker",),
    "launch": ("launch",),
    "lab": ("lab",),
    "hub": ("pull", "search", "files", "import"),
    "adapters": ("adapters",),
    "mcp": ("mcp",),
    "docs": ("docs",),
    "voice": ("transcribe", "say"),
    "speech_pull": ("voices",),
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args, extra = parser.parse_known_args(argv)
    if args.command == "run" and args.prompt is None and len(extra) == 1 and not extra[0].startswith("-"):
        # `run MODEL --file a.pdf "question"`: argparse gives the optional PROMPT up when an
        # option separates it from MODEL, so it arrives here as an extra word.
        args.prompt, extra = extra[0], []
    if getattr(args, "mcp_action", None) == "add":
        from inglenook.cli.mcp import command_after_options  # noqa: PLC0415

        extra = command_after_options(args, extra)
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command is None:
        return gui_main()
    try:
        paths = Paths.default().ensure()
        setup_logging(paths, debug=args.debug)
        with start_crash_guard(paths, "server" if args.command == "serve" else "terminal") as guard:
            args.crash_guard = guard
            return args.handler(args, paths)
    except InglenookError as exc:
        print(f"inglenook: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except sqlite3.Error as exc:
        # The store maps its own failures; this catches any other module's direct query.
        log.debug("database failure", exc_info=exc)
        print(f"inglenook: error: the database cannot be used: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:
        if exc.errno not in _STORAGE_ERRNOS:
            raise
        log.debug("storage failure", exc_info=exc)
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"inglenook: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130


def gui_main() -> int:
    from inglenook.app.main import run_app  # noqa: PLC0415 — Qt is only loaded for the GUI

    return run_app()


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv``: every command when ``argv`` is None (or names none of them),
    else the commands of this module and those of the group ``argv``'s command belongs to."""
    parser = argparse.ArgumentParser(
        prog="inglenook",
        description="Run language models on your own machine. With no command, opens the desktop app.",
    )
    parser.add_argument("--version", action="version", version=f"inglenook {__version__}")
    parser.add_argument("--debug", action="store_true", help="log engine and llama.cpp details to stderr")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = commands.add_parser("run", help="chat with a model in the terminal")
    run.add_argument("model", metavar="MODEL", help="model id (see `inglenook list`) or a path to a .gguf file")
    run.add_argument("prompt", metavar="PROMPT", nargs="?", help="answer this once and exit")
    run.add_argument("--system", help="system prompt for a new conversation")
    run.add_argument("--max-tokens", type=int, help="most tokens to generate per answer")
    run.add_argument("--temperature", type=float, help="sampling temperature (0 = greedy)")
    run.add_argument("--seed", type=int, help="random seed, for repeatable answers")
    run.add_argument(
        "--continue", dest="continue_id", nargs="?", const="last", metavar="CONVERSATION_ID",
        help="continue the last conversation, or the one with this id",
    )
    run.add_argument("--file", dest="files", action="append", type=Path, default=[], metavar="FILE",
                     help="attach a document (PDF, DOCX, PPTX, XLSX, CSV, HTML, text, code); repeat for several")
    run.add_argument("--collection", dest="collections", action="append", default=[], metavar="NAME",
                     help="attach every document of a collection (see `inglenook docs`)")
    run.add_argument("--image", action="append", default=[], metavar="FILE",
                     help="an image (PNG, JPEG, WebP, GIF) for a vision model to read with PROMPT; repeatable")
    run.add_argument("--no-cache", action="store_true", help="do not reuse any cached prompt state")
    run.add_argument("--verbose", action="store_true", help="print token counts and speed to stderr")
    run.set_defaults(handler=cmd_run)

    listing = commands.add_parser("list", help="list installed models")
    listing.set_defaults(handler=cmd_list)

    show = commands.add_parser("show", help="show a model's details")
    show.add_argument("model", metavar="MODEL")
    show.set_defaults(handler=cmd_show)

    remove = commands.add_parser("rm", help="remove a model")
    remove.add_argument("model", metavar="MODEL")
    remove.set_defaults(handler=cmd_rm)
    doctor = commands.add_parser(
        "doctor", help="what this installation runs: versions, CPU variant, GPUs, a self-test",
        description="Print versions (with the llama.cpp commit), the CPU variant and features in use, "
        "threads, backends and GPUs with free memory, and a 2-second self-test generation. "
        "Paste it into a bug report.",
    )
    doctor.add_argument("--json", action="store_true", help="print JSON instead of text")
    doctor.add_argument("--no-self-test", action="store_true", help="skip the test generation")
    doctor.set_defaults(handler=cmd_doctor)
    for module in _command_modules(argv, own=commands.choices):
        importlib.import_module(f"{__name__}.{module}").add_commands(commands)
    return parser


def _command_modules(argv: Sequence[str] | None, own: Iterable[str]) -> list[str]:
    """The group modules a parser for ``argv`` needs. The command is its first word that is not
    an option (the top level's options take no values); a help option before it lists them all."""
    command = None
    for word in argv or ():
        if word in ("-h", "--help"):
            break
        if not word.startswith("-"):
            command = word
            break
    if command is not None and command in own:
        return []
    wanted = [module for module, names in COMMAND_MODULES.items() if command in names]
    return wanted or list(COMMAND_MODULES)


def setup_logging(paths: Paths, debug: bool = False) -> None:
    root = logging.getLogger()
    if getattr(root, "_inglenook_configured", False):
        return
    root.setLevel(logging.DEBUG if debug else logging.INFO)
    try:
        file_handler = LogFileHandler(str(paths.logs / "inglenook.log"), max_bytes=5_000_000, backup_count=3)
    except OSError as exc:
        raise StoreError(f"cannot write logs in {paths.logs}: {exc.strerror}") from exc
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(file_handler)
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(logging.DEBUG if debug else logging.WARNING)
    console.setFormatter(logging.Formatter("inglenook: %(levelname)s: %(message)s"))
    if not debug:
        console.addFilter(lambda record: not record.name.startswith("inglenook.llama"))
    root.addHandler(console)
    root._inglenook_configured = True  # type: ignore[attr-defined]  # a mark on the root logger: set up once a process


@contextlib.contextmanager
def start_crash_guard(paths: Paths, front_end: str) -> Iterator[CrashGuard]:
    """Watch this run for native crashes; first say so if the last run ended in one."""
    guard = CrashGuard(paths.logs, front_end, __version__)
    for crash in guard.start():
        print(f"inglenook: {crash.message()}", file=sys.stderr)
        if crash.fault_log is not None:
            print(f"inglenook: to read it: less {crash.fault_log}   (the full log: {paths.logs / 'inglenook.log'})",
                  file=sys.stderr)
    try:
        yield guard
    finally:
        guard.stop()


def _open_engine(args: argparse.Namespace, paths: Paths, sequences: int | None = None):  # noqa: ANN202 — import deferred: keeps --help fast
    from inglenook.engine import Engine  # noqa: PLC0415

    engine = Engine(paths, crash_guard=args.crash_guard, sequences=sequences)
    if engine.database_set_aside is not None:
        recovered = ", ".join(f"{n} {table}" for table, n in engine.database_salvaged.items() if n)
        print(f"inglenook: the database was damaged; recovered {recovered or 'nothing'}. "
              f"The damaged file is kept as {engine.database_set_aside}", file=sys.stderr)
    return engine


# -- doctor ---------------------------------------------------------------------------


def cmd_doctor(args: argparse.Namespace, paths: Paths) -> int:
    import json  # noqa: PLC0415

    from inglenook.engine import collect  # noqa: PLC0415 — loads llama.cpp

    from inglenook.cli.sound_check import sound_devices, sound_rows  # noqa: PLC0415

    with _open_engine(args, paths) as engine:
        report = collect(engine, self_test_s=0.0 if args.no_self_test else 2.0)
    sound = sound_devices()
    report.sections.append(("Sound", sound_rows(sound)))
    report.details["sound"] = sound
    if args.json:
        print(json.dumps(report.as_dict(), indent=2, default=str))
    else:
        sys.stdout.write(report.as_text())
    failed = report.self_test is not None and bool(report.self_test.error)
    return EXIT_ERROR if failed else 0


# -- run ------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace, paths: Paths) -> int:
    # One conversation: its model loads with one sequence, not the app's several (issue 27).
    with _open_engine(args, paths, sequences=1) as engine:
        record = engine.resolve_model(args.model)
        documents = []
        if args.files or args.collections:
            from inglenook.cli.docs import documents_for_run  # noqa: PLC0415 — only when documents are attached

            # Read before the conversation exists: a file that cannot be read leaves nothing behind.
            documents = documents_for_run(engine.chats, args.files, args.collections)
        conversation = _conversation_for(engine, args, record.id)
        if documents:
            engine.chats.attach_documents(conversation.id, documents)
        overrides = {
            "max_tokens": args.max_tokens,
            "temperature": args.temperature,
            "seed": args.seed,
        }
        overrides = {k: v for k, v in overrides.items() if v is not None}
        if args.image and args.prompt is None:
            raise InglenookError("--image needs a PROMPT to go with it")
        if args.prompt is not None:
            return _answer(engine, conversation.id, args.prompt, overrides, args, _read_images(args.image))
        return _repl(engine, conversation.id, overrides, args)


def _conversation_for(engine, args: argparse.Namespace, model_id: str):  # noqa: ANN001, ANN202
    if args.continue_id is None:
        return engine.chats.new_conversation(model_id=model_id, system_prompt=args.system)
    if args.continue_id == "last":
        conversation = engine.latest_conversation()
        if conversation is None:
            raise InglenookError("there is no conversation to continue yet")
    else:
        try:
            conversation = engine.conversation(int(args.continue_id))
        except ValueError:
            raise InglenookError(f"conversation id must be a number, got {args.continue_id!r}") from None
    changes = {"model_id": model_id}
    if args.system is not None:
        changes["system_prompt"] = args.system
    return engine.update_conversation(conversation.id, **changes)


@contextlib.contextmanager
def _ctrl_c_cancels(turn) -> Iterator[None]:  # noqa: ANN001
    """While an answer streams, Ctrl-C stops the answer instead of the program."""
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, lambda *_: turn.cancel())
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _read_images(files: list[str]) -> list["ImageInput"]:
    """The ``--image`` files, decoded (and checked) before anything is sent."""
    from inglenook.engine import decode_image, read_image_file  # noqa: PLC0415

    # Checked before it is read: a device, a FIFO or a 2 GB file is refused at once.
    return [decode_image(read_image_file(name, what=f"the image {name}"), what=name) for name in files]


def _answer(engine, conversation_id: int, text: str, overrides: dict, args: argparse.Namespace,  # noqa: ANN001
            images: list["ImageInput"] | None = None) -> int:
    turn = engine.chats.send(conversation_id, text, use_cache=not args.no_cache, images=images or None, **overrides)
    out = sys.stdout
    # A long prompt is read for minutes on a CPU: say how far on stderr (a terminal only),
    # and erase it before the answer prints.
    reading = ProgressLine(sys.stderr)

    def show(progress: PromptProgress) -> None:
        if progress.worth_showing:
            reading.show(progress.describe())

    turn.on_progress = show
    try:
        with _ctrl_c_cancels(turn):
            for chunk in turn:
                reading.clear()
                out.write(chunk.text)
                out.flush()
    finally:
        reading.clear()
    out.write("\n")
    out.flush()
    finished = turn.finished
    if finished is not None and finished.finish_reason == "cancelled":
        print("[stopped]", file=sys.stderr)
    if args.verbose and finished is not None:
        _print_stats(finished)
    return 0


def _print_stats(finished) -> None:  # noqa: ANN001
    usage, timings = finished.usage, finished.timings
    new_tokens = usage.prompt_tokens - usage.cached_tokens
    lines = [
        ("model", finished.model_id),
        ("prompt tokens", f"{usage.prompt_tokens}"),
        ("cached prompt tokens", f"{usage.cached_tokens}"),
        ("prompt eval rate", f"{timings.prompt_tps(new_tokens):.2f} tokens/s"),
        ("time to first token", f"{timings.ttft_s * 1000:.1f} ms"),
        ("completion tokens", f"{usage.completion_tokens}"),
        ("eval rate", f"{finished.tokens_per_s:.2f} tokens/s"),
        ("finish reason", finished.finish_reason),
    ]
    for label, value in lines:
        print(f"{label + ':':<22}{value}", file=sys.stderr)


def _repl(engine, conversation_id: int, overrides: dict, args: argparse.Namespace) -> int:  # noqa: ANN001
    print(f"Chatting in conversation {conversation_id}. Type /bye or press Ctrl-D to leave.", file=sys.stderr)
    while True:
        try:
            line = input(">>> ")
        except EOFError:
            print(file=sys.stderr)
            return 0
        except KeyboardInterrupt:
            print("\nUse Ctrl-D or /bye to leave.", file=sys.stderr)
            continue
        text = line.strip()
        if not text:
            continue
        if text in ("/bye", "/exit", "/quit"):
            return 0
        try:
            _answer(engine, conversation_id, line, overrides, args)
        except InglenookError as exc:
            print(f"inglenook: error: {exc}", file=sys.stderr)


# -- model management -------------------------------------------------------------------


def cmd_list(args: argparse.Namespace, paths: Paths) -> int:
    with _open_engine(args, paths) as engine:
        models = engine.models()
    if not models:
        print("No models installed. `inglenook pull REPO` downloads one.")
        return 0
    rows = [("ID", "QUANT", "SIZE", "PARAMS", "CONTEXT", "SOURCE")]
    for m in models:
        rows.append((m.id, m.quantization, human_size(m.size_bytes), human_count(m.parameter_count),
                     str(m.context_length or "?"), m.source))
    print_table(rows)
    for m in models:
        if not m.usable:
            print(f"{m.id} cannot be used: {m.problem}")
    return 0


def cmd_show(args: argparse.Namespace, paths: Paths) -> int:
    from inglenook.engine import read_gguf  # noqa: PLC0415

    with _open_engine(args, paths) as engine:
        record = engine.resolve_model(args.model)
        plan = engine.load_plan(record.id)
    info = read_gguf(record.path)
    fields = [
        ("id", record.id),
        ("path", str(record.path)),
        ("architecture", info.architecture),
        ("parameters", f"{human_count(info.parameter_count)} ({info.parameter_count:,})"),
        ("quantization", f"{info.quantization} ({info.bits_per_weight:.2f} bits per weight)"),
        ("context length", str(info.context_length or "unknown")),
        ("layers", str(info.block_count or "unknown")),
        ("size", human_size(info.file_size)),
        ("fingerprint", record.fingerprint),
        ("chat template", "built in" if info.chat_template else "none (ChatML fallback)"),
        ("vision", _vision_line(info)),
        ("special tokens", ", ".join(f"{k}={v[1]!r}" for k, v in info.special_tokens.items()) or "none"),
        ("license", str(info.metadata.get("general.license", "unknown"))),
        ("source", record.source),
        # What a load would take now, said before loading (a context set by hand included).
        ("loads with", plan.label),
    ]
    for label, value in fields:
        print(f"{label + ':':<16}{value}")
    return 0


def _vision_line(info) -> str:  # noqa: ANN001 — GGUFInfo, imported lazily
    from inglenook.engine import find_projector  # noqa: PLC0415

    try:
        projector = find_projector(info)
    except InglenookError as exc:  # a projector of another size beside it
        return f"no: {exc}"
    if projector is None:
        return "no (text only: no mmproj-*.gguf beside it)"
    return f"yes, with {projector.path.name} ({projector.projector_type})"


def cmd_rm(args: argparse.Namespace, paths: Paths) -> int:
    with _open_engine(args, paths) as engine:
        record = engine.resolve_model(args.model)
        deletes = record.source != "starter" and engine.owns_model_file(record)
        engine.remove_model(record.id)
    if deletes:
        print(f"removed {record.id} and deleted its file")
    else:
        # Only files Inglenook put in (or found in) its own models folder are ever deleted.
        print(f"removed {record.id} from the list; its file was kept: {record.path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
