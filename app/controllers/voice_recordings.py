"""Recordings of spoken messages, kept only where the person chose to keep them (issue 42, item 6).

A spoken message is an ordinary message: its words are what the chat stores, searches and
resumes. With ``Settings.voice_keep_recordings`` on, the audio it was heard from is kept too,
as a WAV file beside the chat's data: ``<data>/spoken/<conversation id>/<message id>.wav``,
written atomically on the disk lane once the message has its id (when its answer starts).

What was said waits here (``offer``) until the next message is sent; dictated words that were
replaced by typing before sending still count as that message's recording. Recordings of
chats that no longer exist are deleted when the window opens and when it closes (``sweep``):
a chat deleted with Undo offered is deleted for good only after a few seconds, and the sweep
after the last such delete goes with it.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject

from inglenook.engine import Message, Settings, atomic_write_bytes

from inglenook.app.controllers.answers import ChatController
from inglenook.app.controllers.voice_input import wav_of
from inglenook.app.services.app_engine import AppEngine
from inglenook.app.services.operations import Operations

log = logging.getLogger(__name__)


def recording_path(folder: Path, conversation_id: int, message_id: int) -> Path:
    return folder / str(conversation_id) / f"{message_id}.wav"


def sweep(folder: Path, conversations: set[int]) -> int:
    """Delete the recordings of every conversation not in ``conversations``; how many folders went."""
    if not folder.is_dir():
        return 0
    gone = 0
    for child in folder.iterdir():
        if child.is_dir() and child.name.isdigit() and int(child.name) not in conversations:
            shutil.rmtree(child, ignore_errors=True)
            gone += 1
    return gone


class SpokenRecordings(QObject):
    def __init__(self, engine: AppEngine, operations: Operations, chat: ChatController,
                 settings: Callable[[], Settings], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine, self.operations, self.settings = engine, operations, settings
        # Not <data>/recordings: that folder holds the copies of recordings attached as documents,
        # pruned by their hash (engine/documents/recording.py).
        self.folder = engine.paths.data / "spoken"
        self._waiting: np.ndarray | None = None
        chat.answer_started.connect(self._answer_started)

    def offer(self, samples: np.ndarray) -> None:
        """What the person said for the next message (kept only if the setting is on)."""
        self._waiting = samples if self.settings().voice_keep_recordings else None

    def _answer_started(self, conversation_id: int, messages: list[Message]) -> None:
        samples, self._waiting = self._waiting, None
        question = next((m for m in reversed(messages) if m.role == "user"), None)
        if samples is None or question is None or not self.settings().voice_keep_recordings:
            return
        target = recording_path(self.folder, conversation_id, question.id)

        def keep() -> Path:
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(target, wav_of(samples))
            return target

        self.operations.run("disk", keep)

    def sweep(self) -> None:
        """On the disk lane: recordings of deleted chats go."""
        chats, folder = self.engine.chats, self.folder

        def work() -> int:
            return sweep(folder, {c.id for c in chats.conversations()})

        def done(gone: int) -> None:
            if gone:
                log.info("deleted the recordings of %d deleted chats", gone)

        self.operations.run("disk", work, done)
