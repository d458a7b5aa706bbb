"""Recordings as documents: a transcript's timed segments into a ``Document`` whose text carries
the times, so passages are labelled by them and answers cite them (``[meeting.m4a, 12:31]``).

The text is a run of sections, each opened by a heading that is only a clock (``## 12:31``):
``passages.split_passages`` reads such a heading as a label, like ``## Page 3``, so a passage
of a recording is cited by the time its words start. Sections are cut at segment bounds every
``SECTION_SECONDS`` or ``SECTION_CHARS``, whichever comes first, so a citation lands within
about half a minute of the words it names.

Transcribing is the speech room's work (Whisper on the speech lane); this module does not
import it: ``read_recording`` takes the transcription as a function, so documents stay free
of speech and the caller decides the lane, the progress and the cancelling. The original
file is copied into a folder the document store owns (``Recordings``), named by its hash,
so a cited time can be played back even after the person moves or deletes their copy.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path, PurePath
from typing import Protocol

from ..base import DocumentError, blocks_bounded, open_bounded
from .document import Document

log = logging.getLogger(__name__)

AUDIO_KIND = "audio"
# The containers the README promises (what PyAV reads for Whisper); video files give their sound.
RECORDING_SUFFIXES = (".wav", ".mp3", ".m4a", ".ogg", ".oga", ".opus", ".flac", ".webm", ".mp4", ".aac")
SECTION_SECONDS = 30.0
MAX_RECORDING_BYTES = 4 * 1024**3  # hashing is bounded like any document's; hours of audio fit
SECTION_CHARS = 900
_CLOCK = re.compile(r"^(?:(\d+):)?([0-5]?\d):([0-5]\d)$")


class TimedText(Protocol):
    """One recognised segment (``speech.Segment`` is one)."""

    @property
    def start(self) -> float: ...
    @property
    def end(self) -> float: ...
    @property
    def text(self) -> str: ...


class TimedTranscript(Protocol):
    """What a transcription gives back (``speech.Transcript`` is one)."""

    @property
    def duration(self) -> float: ...
    @property
    def segments(self) -> Sequence[TimedText]: ...


def is_recording_name(name: str | PurePath) -> bool:
    """Whether a file's name says it is a recording (the bytes decide later: PyAV probes them)."""
    return PurePath(name).suffix.lower() in RECORDING_SUFFIXES


def clock(seconds: float) -> str:
    """``12:31`` under an hour, ``1:02:03`` past it (whole seconds, rounded down)."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def parse_clock(text: str) -> float | None:
    """Seconds from ``12:31`` or ``1:02:03`` (what a citation names); None for anything else."""
    match = _CLOCK.match(text.strip())
    if match is None:
        return None
    hours, minutes, secs = (int(part) if part else 0 for part in match.groups())
    return float(hours * 3600 + minutes * 60 + secs)


def is_clock(text: str) -> bool:
    return parse_clock(text) is not None


def timed_text(segments: Sequence[TimedText]) -> str:
    """Segments as sections headed by the time their first words start."""
    sections: list[tuple[float, list[str]]] = []
    for segment in segments:
        words = segment.text.strip()
        if not words:
            continue
        if sections:
            start, parts = sections[-1]
            size = sum(len(p) + 1 for p in parts)
            if segment.start - start < SECTION_SECONDS and size + len(words) <= SECTION_CHARS:
                parts.append(words)
                continue
        sections.append((segment.start, [words]))
    return "\n\n".join(f"## {clock(start)}\n\n{' '.join(parts)}" for start, parts in sections)


def recording_document(name: str, sha256: str, size: int, transcript: TimedTranscript) -> Document:
    """The document of a transcribed recording; ``DocumentError`` when nothing was said in it."""
    text = timed_text(transcript.segments)
    if not text:
        raise DocumentError(f"{name} holds no speech that could be recognised")
    return Document(name=name, kind=AUDIO_KIND, sha256=sha256, size=size, text=text,
                    notes=(f"a recording of {clock(transcript.duration)}, transcribed with its times",))


def _file_sha256(path: Path) -> str:
    """The recording's identity, read with the same bounds as a document's (a regular file
    within ``MAX_RECORDING_BYTES``; a FIFO or a device is refused before a byte is read)."""
    digest = hashlib.sha256()
    with open_bounded(path, MAX_RECORDING_BYTES, path.name, error=DocumentError) as (handle, _status):
        for block in blocks_bounded(handle, MAX_RECORDING_BYTES, path.name, error=DocumentError):
            digest.update(block)
    return digest.hexdigest()


class Recordings:
    """The recordings attached as documents, one file per recording named by its hash (its
    suffix kept, which players use to pick a demuxer), under the data folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def keep(self, source: Path, sha256: str) -> Path:
        """A copy of ``source`` owned here (written to a temporary name, then renamed)."""
        suffix = source.suffix.lower() if is_recording_name(source) else ".audio"
        target = self.folder / f"{sha256}{suffix}"
        if target.is_file():
            return target
        self.folder.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.partial")
        with open(source, "rb") as reader, open(partial, "wb") as writer:
            shutil.copyfileobj(reader, writer, 1024 * 1024)
            writer.flush()
            os.fsync(writer.fileno())
        os.replace(partial, target)
        return target

    def find(self, sha256: str) -> Path | None:
        if not re.fullmatch(r"[0-9a-f]{64}", sha256):
            return None
        found = sorted(self.folder.glob(f"{sha256}.*")) if self.folder.is_dir() else []
        return next((p for p in found if not p.name.endswith(".partial")), None)

    def prune(self, wanted: set[str]) -> int:
        """Delete the copies of recordings no longer among ``wanted`` (documents still kept)."""
        if not self.folder.is_dir():
            return 0
        removed = 0
        for path in self.folder.iterdir():
            if path.is_file() and path.name.split(".", 1)[0] not in wanted and not path.name.startswith("."):
                path.unlink(missing_ok=True)
                removed += 1
        return removed


def read_recording(path: Path, transcribe: Callable[[Path], TimedTranscript], recordings: Recordings | None,
                   cancelled: Callable[[], bool] = lambda: False) -> Document:
    """Transcribe ``path`` (``transcribe`` runs Whisper, on whatever lane the caller chose),
    keep a copy of it in ``recordings`` (None: not kept; an API request's file is not played
    back), and return its document. A transcription stopped part way raises
    ``DocumentError``: half a meeting is not kept as if it were the whole."""
    sha256 = _file_sha256(path)
    transcript = transcribe(path)
    if cancelled():
        raise DocumentError(f"reading {path.name} was stopped")
    document = recording_document(path.name, sha256, path.stat().st_size, transcript)
    if recordings is not None:
        recordings.keep(path, sha256)
    log.info("recording %s: %d characters from %.0f s", path.name, len(document.text), transcript.duration)
    return document
