"""Speech models from the Hugging Face hub: Whisper in CTranslate2 folders (the faster-whisper and
distil-whisper repositories) and Piper voices (``rhasspy/piper-voices``).

Both are found, sized and downloaded like GGUFs: through ``HubClient`` (the same token,
endpoint and error mapping) and huggingface-hub's own download (resumable, checked against the
hub's ETag), into the folder the engine's ``Speech`` reads (``<models>/speech``):

* a Whisper repository becomes ``<models>/speech/<name>/`` (``model.bin``, ``config.json``,
  ``tokenizer.json``, vocabulary), named after the repository without its ``faster-`` prefix
  (``Systran/faster-whisper-base.en`` → ``whisper-base.en``);
* a voice becomes ``<models>/speech/voices/<id>/`` (``<id>.onnx``, ``<id>.onnx.json`` and its
  ``MODEL_CARD``, which names the voice's licence: each Piper voice has its own, from the data
  it was trained on).

Files are fetched into a hidden staging folder beside the target and the folder is renamed
into place only when every file is there, so ``Speech`` never sees half a model.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from huggingface_hub import hf_hub_download

from ..base import DownloadError, JobCancelled
from .hub import HubClient, HubModel, RemoteFile, _hub_model, _licence, check_repo_id, is_safe_remote_path

log = logging.getLogger(__name__)

VOICES_REPO = "rhasspy/piper-voices"
VOICES_INDEX = "voices.json"
# What faster-whisper loads from a CTranslate2 Whisper folder (the tokenizer in one of its forms).
WHISPER_REQUIRED = ("model.bin", "config.json")
WHISPER_OPTIONAL = ("tokenizer.json", "vocabulary.txt", "vocabulary.json", "preprocessor_config.json")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")

Progress = Callable[[int, int], None]  # (bytes done, bytes in all)


@dataclass(frozen=True)
class SpeechDownload:
    """A speech model on the hub, sized: what ``pull_speech`` fetches."""

    repo: str
    name: str  # the local id: the folder under <models>/speech (a voice: under voices/)
    kind: str  # "speech-to-text" or "text-to-speech"
    files: tuple[RemoteFile, ...]
    commit: str | None = None
    licence: str | None = None
    language: str = ""  # a voice's language code (en_GB); "" for Whisper
    quality: str = ""  # a voice's quality (x_low, low, medium, high)
    sample: str = ""  # a voice's recorded sample in the repository (samples/speaker_0.mp3), for Preview

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


def whisper_name(repo: str) -> str:
    """The local id of a Whisper repository: its name without ``faster-`` (``whisper-base.en``)."""
    name = repo.rsplit("/", 1)[-1]
    name = name.removeprefix("faster-")
    return name if _NAME.match(name) else re.sub(r"[^A-Za-z0-9_.-]", "-", name)[:96]


def search_whisper(client: HubClient, text: str = "", limit: int = 30) -> list[HubModel]:
    """Whisper models in CTranslate2 format on the hub (faster-whisper's and distil-whisper's)."""
    with client.errors("search"):
        # The hub's search matches the text inside repository names: "whisper base" finds nothing in
        # "faster-whisper-base", so the person's words are searched as they are and the
        # CTranslate2 repositories kept are those named for Whisper.
        found = client.api.list_models(
            search=text.strip() or "whisper", filter="ctranslate2",
            sort="downloads", limit=limit, expand=["downloads", "likes", "lastModified", "tags", "gated"],
        )
        return [_hub_model(info) for info in found if "whisper" in info.id.lower()]


def whisper_download(client: HubClient, repo: str, revision: str | None = None) -> SpeechDownload | None:
    """The Whisper model in ``repo`` with its files' sizes; None when the repository is not a
    CTranslate2 Whisper model (no ``model.bin`` and ``config.json`` at its root)."""
    repo = check_repo_id(repo)
    with client.errors(repo):
        info = client.api.model_info(repo, revision=revision, files_metadata=True)
    siblings = {s.rfilename: s for s in info.siblings or []}
    if not all(name in siblings for name in WHISPER_REQUIRED):
        return None
    if not any(name in siblings for name in ("tokenizer.json", "vocabulary.txt", "vocabulary.json")):
        return None
    files = tuple(
        RemoteFile(name, int((s.lfs.size if s.lfs else s.size) or 0), s.lfs.sha256 if s.lfs else None)
        for name, s in ((n, siblings[n]) for n in (*WHISPER_REQUIRED, *WHISPER_OPTIONAL) if n in siblings))
    return SpeechDownload(repo=repo, name=whisper_name(repo), kind="speech-to-text", files=files, commit=info.sha,
                          licence=_licence(info))


def piper_voices(client: HubClient, repo: str = VOICES_REPO, revision: str | None = None) -> list[SpeechDownload]:
    """Every voice listed in the repository's ``voices.json``, sorted by language, name and quality."""
    repo = check_repo_id(repo)
    with tempfile.TemporaryDirectory(prefix="inglenook-voices-") as scratch, client.errors(repo):
        index = hf_hub_download(repo, VOICES_INDEX, revision=revision, token=client.token, endpoint=client.endpoint,
                                local_dir=scratch)
        try:
            entries = json.loads(Path(index).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DownloadError(f"{repo}'s {VOICES_INDEX} cannot be read: {exc}") from None
    if not isinstance(entries, dict):
        raise DownloadError(f"{repo}'s {VOICES_INDEX} is not a list of voices")
    voices = [voice for key, entry in entries.items() if (voice := _voice(repo, key, entry)) is not None]
    return sorted(voices, key=lambda v: (v.language, v.name))


def _voice(repo: str, key: str, entry: Any) -> SpeechDownload | None:
    if not isinstance(entry, dict) or not _NAME.match(str(key)) or not isinstance(entry.get("files"), dict):
        return None
    files: list[RemoteFile] = []
    for path, meta in entry["files"].items():
        if not is_safe_remote_path(str(path)) or "/samples/" in f"/{path}":
            continue
        size = int(meta.get("size_bytes", 0)) if isinstance(meta, dict) else 0
        files.append(RemoteFile(str(path), size, None))
    names = {f.path.rsplit("/", 1)[-1] for f in files}
    if f"{key}.onnx" not in names or f"{key}.onnx.json" not in names:
        return None
    language = entry.get("language", {})
    code = str(language.get("code", "")) if isinstance(language, dict) else ""
    onnx = next(f.path for f in files if f.path.rsplit("/", 1)[-1] == f"{key}.onnx")
    # Piper's repository keeps a spoken sample beside each voice (not listed in voices.json).
    sample = f"{onnx.rsplit('/', 1)[0]}/samples/speaker_0.mp3" if "/" in onnx else "samples/speaker_0.mp3"
    return SpeechDownload(repo=repo, name=str(key), kind="text-to-speech", files=tuple(files),
                          language=code or str(key).split("-", 1)[0], quality=str(entry.get("quality", "")),
                          sample=sample)


def pull_speech(client: HubClient, download: SpeechDownload, folder: Path, progress: Progress | None = None,
                cancel: threading.Event | None = None) -> Path:
    """Fetch ``download`` into ``folder`` (``<models>/speech``) and return its installed folder.
    Already installed: returned at once. ``JobCancelled`` between files when ``cancel`` is set
    (what was fetched stays in the hub cache's resumable parts)."""
    if not _NAME.match(download.name):
        raise DownloadError(f"refusing unsafe model name {download.name!r}")
    parent = folder / "voices" if download.kind == "text-to-speech" else folder
    target = parent / download.name
    if target.is_dir():
        return target
    staging = parent / f".{download.name}.partial"
    staging.mkdir(parents=True, exist_ok=True)
    done, total = 0, download.size
    for remote in download.files:
        if cancel is not None and cancel.is_set():
            raise JobCancelled(f"the download of {download.name} was cancelled")
        if not is_safe_remote_path(remote.path):
            raise DownloadError(f"refusing unsafe file name {remote.path!r}")
        with client.errors(download.repo):
            # Into the staging folder itself (resumable there), not the shared hub cache: one copy on disk.
            fetched = hf_hub_download(download.repo, remote.path, revision=download.commit, token=client.token,
                                      endpoint=client.endpoint, local_dir=staging)
        # Flat in the model's folder: a voice's files sit deep in the repository's tree.
        os.replace(fetched, staging / remote.path.rsplit("/", 1)[-1])
        done += remote.size
        if progress is not None:
            progress(done, total)
    for leftover in staging.iterdir():  # the hub's bookkeeping (.cache) and the emptied tree
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
    os.replace(staging, target)
    log.info("installed %s %s from %s into %s", download.kind, download.name, download.repo, target)
    return target


def voice_sample(client: HubClient, voice: SpeechDownload, folder: Path) -> Path:
    """A voice's spoken sample (a few seconds of MP3) fetched into ``folder``: Preview before
    the voice itself (tens of megabytes) is downloaded."""
    if not voice.sample or not is_safe_remote_path(voice.sample):
        raise DownloadError(f"{voice.name} has no sample to preview")
    with client.errors(voice.repo):
        fetched = hf_hub_download(voice.repo, voice.sample, revision=voice.commit, token=client.token,
                                  endpoint=client.endpoint, local_dir=folder)
    return Path(fetched)
