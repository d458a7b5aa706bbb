"""Documents: files into text for a model (PDF, DOCX, PPTX, XLSX, CSV, HTML, Markdown, text and
source code, told apart by their bytes; recordings through a transcription handed in, their
text headed by times), converted in a worker process under limits on
time, memory and size, and placed whole before a conversation in a stable block; kept in the
store by content hash, per conversation and in named collections.

May import: base, store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base import lazy_door

# Which module defines each name other packages (or the front door) use. Keep in step with
# the TYPE_CHECKING block below, which is what type checkers read (a test compares them).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "document": ("Document", "Limits"),
    "library": ("Added", "CollectionFile", "DocumentLibrary"),
    "passage_index": ("FoundPassage", "PassageIndex"),
    "passages": ("Passage", "split_passages"),
    "prompt": ("documents_block", "with_documents"),
    "recording": ("AUDIO_KIND", "Recordings", "clock", "is_recording_name", "parse_clock", "read_recording",
                  "recording_document"),
    "worker": ("convert_bytes_safely", "convert_file"),
}

__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .document import Document as Document, Limits as Limits
    from .library import Added as Added, CollectionFile as CollectionFile, DocumentLibrary as DocumentLibrary
    from .passage_index import FoundPassage as FoundPassage, PassageIndex as PassageIndex
    from .passages import Passage as Passage, split_passages as split_passages
    from .prompt import documents_block as documents_block, with_documents as with_documents
    from .recording import (
        AUDIO_KIND as AUDIO_KIND, Recordings as Recordings, clock as clock, is_recording_name as is_recording_name,
        parse_clock as parse_clock, read_recording as read_recording, recording_document as recording_document,
    )
    from .worker import convert_bytes_safely as convert_bytes_safely, convert_file as convert_file
