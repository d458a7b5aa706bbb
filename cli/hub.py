"""Terminal commands for getting models: ``pull``, ``search``, ``files``, ``import``.

Registered by ``add_commands`` from ``inglenook.cli.build_parser``. The download runs in a
worker thread so that Ctrl-C only sets the cancel event: the partial file is flushed and
kept, and the same ``pull`` later resumes it.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from inglenook.cli.terminal import print_table, run_interruptibly
from inglenook.engine import InglenookError, JobCancelled, Paths, human_duration, human_size

EXIT_CANCELLED = 130


def add_commands(commands: Any) -> None:
    pull = commands.add_parser("pull", help="download a GGUF model, a Whisper model or a Piper voice from Hugging Face")
    pull.add_argument("spec", metavar="REPO[:QUANT]",
                      help="e.g. bartowski/Llama-3.2-3B-Instruct-GGUF:Q4_K_M (default Q4_K_M, else the closest 4-bit "
                      "file); Systran/faster-whisper-base.en (speech to text); rhasspy/piper-voices:en_GB-alan-medium")
    pull.add_argument("--revision", help="branch, tag or commit (default: main)")
    pull.set_defaults(handler=cmd_pull)

    search = commands.add_parser("search", help="search Hugging Face for GGUF models")
    search.add_argument("text", metavar="TEXT", nargs="?", default="")
    search.add_argument("--sort", choices=("downloads", "likes", "updated", "trending"), default="downloads")
    search.add_argument("--limit", type=int, default=20)
    search.add_argument("--speech", action="store_true", help="Whisper models in CTranslate2 format instead")
    search.set_defaults(handler=cmd_search)

    files = commands.add_parser("files", help="list a Hugging Face repo's GGUF files and whether each fits here")
    files.add_argument("repo", metavar="REPO")
    files.add_argument("--context", type=int, help="context size for the fit estimate (default: the setting)")
    files.add_argument("--revision", help="branch, tag or commit (default: main)")
    files.set_defaults(handler=cmd_files)

    importing = commands.add_parser("import", help="use GGUF files already on disk, without copying them")
    importing.add_argument("path", metavar="PATH", nargs="?", help="a .gguf file or a folder")
    importing.add_argument("--scan", action="store_true",
                           help="import from the Hugging Face cache, LM Studio and Ollama")
    importing.set_defaults(handler=cmd_import)


def parse_spec(spec: str) -> tuple[str, str | None]:
    """``owner/name[:QUANT]``, also accepting ``hf.co/…`` and ``https://huggingface.co/…``."""
    text = spec.strip()
    for prefix in ("https://huggingface.co/", "http://huggingface.co/", "huggingface.co/", "hf.co/"):
        if text.startswith(prefix):
            text = text[len(prefix):]
    repo, _, quant = text.partition(":")
    return repo.strip("/"), quant or None


def _engine(paths: Paths):  # noqa: ANN202 — deferred import keeps --help fast
    from inglenook.engine import Engine  # noqa: PLC0415

    return Engine(paths)


# -- pull ------------------------------------------------------------------------------------


def cmd_pull(args: argparse.Namespace, paths: Paths) -> int:
    from inglenook.engine import VOICES_REPO, downloader_for, whisper_download  # noqa: PLC0415

    from inglenook.cli.speech_pull import find_voice, pull_download  # noqa: PLC0415 — speech repos only

    repo, quant = parse_spec(args.spec)
    with _engine(paths) as engine:
        downloader = downloader_for(engine)
        if repo == VOICES_REPO:  # rhasspy/piper-voices:VOICE — one voice of Piper's repository
            return pull_download(downloader.hub, find_voice(downloader.hub, quant, args.revision), paths)
        listing = downloader.hub.list_files(repo, revision=args.revision)
        if not listing.options:  # no GGUF files: a CTranslate2 Whisper model, or nothing we pull
            whisper = whisper_download(downloader.hub, repo, revision=args.revision)
            if whisper is not None:
                return pull_download(downloader.hub, whisper, paths)
        option = listing.pick(quant)
        print(f"pulling {listing.repo}: {option.display_name} ({option.quant}, {human_size(option.size)})",
              file=sys.stderr)
        bar = ProgressBar(sys.stderr)
        cancel = threading.Event()

        def interrupted() -> None:
            bar.finish()
            print("cancelling… (press Ctrl-C again to quit at once)", file=sys.stderr)

        record, error = run_interruptibly(
            lambda: downloader.download(listing.repo, option, commit=listing.commit, progress=bar, cancel=cancel),
            cancel, "inglenook-pull", interrupted)
        bar.finish()
        if isinstance(error, JobCancelled) or (cancel.is_set() and record is None):
            print("download stopped; run the same command again to resume it", file=sys.stderr)
            return EXIT_CANCELLED
        if error is not None:
            raise error
        assert record is not None
    print(f"ready: {record.id}  (`inglenook run {record.id}`)")
    return 0


class ProgressBar:
    """A one-line progress bar on a terminal (plain lines every 10% when not a terminal)."""

    WIDTH = 28

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.last_draw = 0.0
        self.last_decile = -1
        self.drawn = False

    def __call__(self, event: Any) -> None:
        now = time.monotonic()
        final = event.phase == "done"
        if self.tty:
            if not final and now - self.last_draw < 0.1:
                return
            self.last_draw = now
            self.stream.write("\r" + self.render(event) + "\x1b[K")
            self.drawn = True
        else:
            decile = int(event.fraction * 10)
            if decile == self.last_decile and not final:
                return
            self.last_decile = decile
            self.stream.write(self.render(event) + "\n")
        self.stream.flush()

    def render(self, event: Any) -> str:
        filled = int(event.fraction * self.WIDTH)
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        text = f"[{bar}] {event.fraction * 100:5.1f}%  {human_size(event.done_bytes)}/{human_size(event.total_bytes)}"
        if event.phase == "downloading":
            if event.bytes_per_s > 0:
                text += f"  {human_size(event.bytes_per_s)}/s"
            if event.eta_s is not None:
                text += f"  {human_duration(event.eta_s)} left"
        elif event.phase == "verifying":
            text += "  verifying sha256"
        if event.parts > 1:
            text += f"  (part {event.part} of {event.parts})"
        return text

    def finish(self) -> None:
        if self.tty and self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False


# -- search and files ------------------------------------------------------------------------------


def cmd_search(args: argparse.Namespace, paths: Paths) -> int:
    from inglenook.engine import HubClient, Settings, Store, resolve_token  # noqa: PLC0415

    store = Store(paths.database)
    try:
        token = resolve_token(Settings.load(store).hf_token)
    finally:
        store.close()
    client = HubClient(token=token)
    if args.speech:
        from inglenook.engine import search_whisper  # noqa: PLC0415

        results = search_whisper(client, args.text, limit=args.limit)
    else:
        results = client.search(args.text, sort=args.sort, limit=args.limit)
    if not results:
        print(f"No {'Whisper' if args.speech else 'GGUF'} models found for {args.text!r}.")
        return 0
    rows = [("REPO", "DOWNLOADS", "LIKES", "UPDATED", "LICENCE")]
    for model in results:
        rows.append((
            model.repo + (" (gated)" if model.gated else ""),
            str(model.downloads if model.downloads is not None else "?"),
            str(model.likes if model.likes is not None else "?"),
            model.last_modified.date().isoformat() if model.last_modified else "?",
            model.licence or "?",
        ))
    print_table(rows)
    print("\n`inglenook files REPO` lists a repo's files; `inglenook pull REPO[:QUANT]` downloads one.")
    return 0


def cmd_files(args: argparse.Namespace, paths: Paths) -> int:
    from inglenook.engine import detect_machine, downloader_for, fit_options  # noqa: PLC0415

    with _engine(paths) as engine:
        hub = downloader_for(engine).hub
        context = args.context or engine.settings.context_size
        # Every answer the model runs at once has its own KV cache of the context size.
        sequences = max(1, engine.settings.parallel_sequences)
        kv_cells = context * sequences
        kv_type = engine.settings.kv_cache_type
        speculative = engine.settings.speculative
    listing = hub.list_files(args.repo, revision=args.revision)
    if not listing.options:
        from inglenook.cli.speech_pull import print_speech_files  # noqa: PLC0415 — speech repos only

        if not print_speech_files(hub, listing.repo, args.revision):
            print(f"{listing.repo} has no GGUF model files.")
        return 0
    fits: dict[str, Any] = {}
    try:
        shape = hub.shape(listing.repo, listing)
        fits = fit_options(listing, shape, detect_machine(), kv_cells, kv_type, sequences, speculative)
    except InglenookError as exc:
        print(f"(no fit estimate: {exc})", file=sys.stderr)
    rows = [("QUANT", "FILE", "SIZE", "BITS/WEIGHT", f"FIT AT {context} TOKENS")]
    for quant, options in listing.by_quant().items():
        for option in options:
            bpw = option.bits_per_weight
            bpw_text = "?" if bpw is None else f"{bpw:.2f}" + ("*" if option.bpw_is_nominal else "")
            estimate = fits.get(option.name)
            rows.append((quant, option.display_name, human_size(option.size), bpw_text,
                         estimate.label if estimate else "?"))
    print_table(rows)
    if any(o.bpw_is_nominal for o in listing.options):
        print("* nominal bits per weight for the quantization type (the repo does not state its parameter count)")
    return 0


# -- import ---------------------------------------------------------------------------------------


def cmd_import(args: argparse.Namespace, paths: Paths) -> int:
    if not args.path and not args.scan:
        raise InglenookError("give a PATH to import, or --scan to look in the Hugging Face cache, LM Studio and Ollama")
    with _engine(paths) as engine:
        if args.scan:
            result = engine.scan_known_places()
        else:
            result = engine.import_path(Path(args.path))
    for record in result.imported:
        print(f"imported {record.id}  ({record.path})")
    for record in result.already:
        print(f"already there: {record.id}  ({record.path})")
    for adapter in result.adapters:  # LoRA adapter files are imported as adapters
        print(f"imported LoRA adapter {adapter.id}  ({adapter.path})")
    for path, reason in result.skipped:
        print(f"skipped {path}: {reason}", file=sys.stderr)
    if not (result.imported or result.already or result.skipped or result.adapters):
        print("No GGUF models found in the Hugging Face cache, LM Studio or Ollama.")
    return 0 if result.imported or result.already or result.adapters or not result.skipped else 1
