"""Speech models in the terminal: ``inglenook pull`` for Whisper repositories and Piper voices,
``inglenook voices`` to list the voices on the hub by language and quality.

``pull`` tries a repository as GGUF models first (``hub.cmd_pull``); a repository without GGUF
files that holds a CTranslate2 Whisper model is pulled here instead, and
``rhasspy/piper-voices:<voice id>`` pulls one voice. Both land under ``<models>/speech``, where
``inglenook transcribe --model`` and ``inglenook say --voice`` (and the API) find them.
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

from inglenook.cli.terminal import print_table, run_interruptibly
from inglenook.engine import (
    VOICES_REPO, DownloadError, HubClient, JobCancelled, Paths, Settings, SpeechDownload, Store, human_size,
    piper_voices, pull_speech, resolve_token, whisper_download,
)

EXIT_CANCELLED = 130


def add_commands(commands: Any) -> None:
    voices = commands.add_parser("voices", help=f"list the Piper voices on Hugging Face ({VOICES_REPO})")
    voices.add_argument("language", nargs="?", default="", help="a language code to show only, e.g. en or en_GB")
    voices.set_defaults(handler=cmd_voices)


def speech_folder(paths: Paths) -> Any:
    return paths.models / "speech"


def hub_client(paths: Paths) -> HubClient:
    store = Store(paths.database)
    try:
        token = resolve_token(Settings.load(store).hf_token)
    finally:
        store.close()
    return HubClient(token=token)


def find_voice(client: HubClient, voice: str | None, revision: str | None = None) -> SpeechDownload:
    if not voice:
        raise DownloadError(f"name the voice: {VOICES_REPO}:VOICE (`inglenook voices` lists them)")
    for candidate in piper_voices(client, VOICES_REPO, revision):
        if candidate.name == voice:
            return candidate
    raise DownloadError(f"{VOICES_REPO} has no voice {voice!r} (`inglenook voices` lists them)")


def pull_download(client: HubClient, download: SpeechDownload, paths: Paths) -> int:
    """Fetch ``download`` with a progress line; Ctrl-C stops between files."""
    print(f"pulling {download.repo}: {download.name} ({download.kind}, {human_size(download.size)})", file=sys.stderr)
    cancel = threading.Event()

    def progress(done: int, total: int) -> None:
        print(f"  {human_size(done)}/{human_size(total)}", file=sys.stderr)

    _path, error = run_interruptibly(
        lambda: pull_speech(client, download, speech_folder(paths), progress, cancel), cancel,
        "inglenook-pull-speech", lambda: print("cancelling…", file=sys.stderr))
    if isinstance(error, JobCancelled):
        print("download stopped; run the same command again to resume it", file=sys.stderr)
        return EXIT_CANCELLED
    if error is not None:
        raise error
    use = (f"inglenook say --voice {download.name} TEXT" if download.kind == "text-to-speech"
           else f"inglenook transcribe --model {download.name} FILE")
    print(f"ready: {download.name}  (`{use}`)")
    return 0


def print_speech_files(client: HubClient, repo: str, revision: str | None) -> bool:
    """``inglenook files`` for a Whisper repository: its files and sizes (False: not one)."""
    found = whisper_download(client, repo, revision)
    if found is None:
        return False
    rows = [("FILE", "SIZE")] + [(f.path, human_size(f.size)) for f in found.files]
    print_table(rows)
    print(f"\nA Whisper model for speech to text, {human_size(found.size)} in all"
          + (f" ({found.licence})" if found.licence else "") + f"; `inglenook pull {repo}` installs it as "
          f"{found.name}.")
    return True


def cmd_voices(args: argparse.Namespace, paths: Paths) -> int:
    wanted = args.language.strip().lower()
    voices = [v for v in piper_voices(hub_client(paths))
              if not wanted or v.language.lower() == wanted or v.language.lower().split("_")[0] == wanted]
    if not voices:
        print(f"No voices found for {args.language!r}." if wanted else "No voices found.")
        return 0
    rows = [("VOICE", "LANGUAGE", "QUALITY", "SIZE")]
    rows += [(v.name, v.language, v.quality or "?", human_size(v.size)) for v in voices]
    print_table(rows)
    print(f"\n`inglenook pull {VOICES_REPO}:VOICE` downloads one; each voice has its own licence (its MODEL_CARD).")
    return 0
