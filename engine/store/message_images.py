"""Images sent with chat messages: files in the data folder, linked from SQLite (m016).

Each image is kept as a PNG of the pixels the model read (``ImageInput``: decoded, EXIF
applied, downscaled), named by its pixel hash (``ImageInput.digest``). Lossless, so reading
the file back gives the same pixels and the same digest: a later turn or a reopened chat
puts the same image in the prompt and hits the prefix cache keyed by that hash. The same
picture in many messages (a branch, a copy, sent twice) is one file.

``message_images`` rows link a message to its images in order; a trigger drops a message's
rows with it, and ``collect`` removes the files no row names any more. Writing a file and
linking it happen under one lock with ``collect``, so a file is never removed between being
written and being linked.
"""

from __future__ import annotations

import io
import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..base import ImageInput, InvalidRequest, atomic_write_bytes, decode_image
from .store import Store

log = logging.getLogger(__name__)

PNG = "image/png"
_SUFFIX = ".png"


@dataclass(frozen=True)
class StoredImage:
    """One image of a message, as kept."""

    message_id: int
    position: int
    digest: str  # the pixel hash: the file's name and the image's key in the prefix cache
    mime: str
    size: int  # bytes of the file
    width: int
    height: int
    path: Path

    def read_bytes(self) -> bytes:
        return self.path.read_bytes()


def encode_png(image: ImageInput) -> bytes:
    """``image``'s pixels as a PNG (lossless: decoding it gives the same digest)."""
    from PIL import Image  # noqa: PLC0415 — Pillow loads only when an image is kept

    buffer = io.BytesIO()
    Image.frombytes("RGB", (image.width, image.height), image.rgb).save(buffer, "PNG", compress_level=6)
    return buffer.getvalue()


class MessageImages:
    """The images of messages: their files under ``folder`` and their rows in ``store``."""

    def __init__(self, store: Store, folder: Path) -> None:
        self.store = store
        self.folder = Path(folder)
        self._lock = threading.Lock()

    def path_of(self, digest: str) -> Path:
        if not digest or not all(c in "0123456789abcdef" for c in digest):
            raise ValueError(f"not an image digest: {digest!r}")
        return self.folder / digest[:2] / f"{digest}{_SUFFIX}"

    def attach(self, message_id: int, images: Iterable[ImageInput]) -> list[StoredImage]:
        """Keep ``images`` as the images of ``message_id``, in order (after any it has)."""
        kept: list[StoredImage] = []
        with self._lock:
            start = len(self.of_message(message_id))
            rows = []
            for offset, image in enumerate(images):
                path = self.path_of(image.digest)
                if not path.is_file():
                    atomic_write_bytes(path, encode_png(image))
                size = path.stat().st_size
                rows.append((message_id, start + offset, image.digest, PNG, size, image.width, image.height))
                kept.append(StoredImage(message_id, start + offset, image.digest, PNG, size, image.width,
                                        image.height, path))
            with self.store.writing() as conn:
                conn.executemany("INSERT INTO message_images (message_id, position, digest, mime, size, width, "
                                 "height) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        return kept

    def copy(self, from_message: int, to_message: int) -> list[StoredImage]:
        """Link ``from_message``'s images to ``to_message`` too (the same files)."""
        with self._lock, self.store.writing() as conn:
            conn.execute("INSERT INTO message_images (message_id, position, digest, mime, size, width, height) "
                         "SELECT ?, position, digest, mime, size, width, height FROM message_images "
                         "WHERE message_id = ?", [to_message, from_message])
        return self.of_message(to_message)

    def of_message(self, message_id: int) -> list[StoredImage]:
        with self.store.reading() as conn:
            rows = conn.execute("SELECT message_id, position, digest, mime, size, width, height FROM message_images "
                                "WHERE message_id = ? ORDER BY position", [message_id]).fetchall()
        return [self._stored(row) for row in rows]

    def of_conversation(self, conversation_id: int) -> dict[int, list[StoredImage]]:
        """Message id → its images, for every message of the conversation that has any."""
        with self.store.reading() as conn:
            rows = conn.execute(
                "SELECT i.message_id, i.position, i.digest, i.mime, i.size, i.width, i.height FROM message_images AS i "
                "JOIN messages AS m ON m.id = i.message_id WHERE m.conversation_id = ? "
                "ORDER BY i.message_id, i.position", [conversation_id]).fetchall()
        found: dict[int, list[StoredImage]] = {}
        for row in rows:
            found.setdefault(row[0], []).append(self._stored(row))
        return found

    def load(self, stored: StoredImage) -> ImageInput | None:
        """The image again, as the model reads it; None (logged) when its file is gone or
        unreadable: the message keeps its text."""
        try:
            data = stored.path.read_bytes()
            image = decode_image(data, what=f"the stored image {stored.digest[:12]}")
        except (OSError, InvalidRequest) as exc:
            log.warning("an image of message %d cannot be read (%s); the model sees its text only",
                        stored.message_id, exc)
            return None
        if image.digest != stored.digest:
            log.warning("the stored image %s has changed on disk; the model reads it as it is now", stored.digest[:12])
        return image

    def collect(self) -> int:
        """Remove the files no message names any more; returns how many went."""
        with self._lock:
            with self.store.reading() as conn:
                named = {row[0] for row in conn.execute("SELECT DISTINCT digest FROM message_images")}
            removed = 0
            for path in self._files():
                if path.stem not in named:
                    try:
                        path.unlink()
                        removed += 1
                    except OSError as exc:
                        log.warning("cannot remove the unused image %s: %s", path, exc)
        if removed:
            log.info("removed %d image file(s) no message uses", removed)
        return removed

    def _files(self) -> list[Path]:
        if not self.folder.is_dir():
            return []
        found: list[Path] = []
        for sub in os.scandir(self.folder):
            if sub.is_dir():
                found.extend(Path(f.path) for f in os.scandir(sub.path) if f.name.endswith(_SUFFIX))
        return found

    def _stored(self, row: tuple) -> StoredImage:
        message_id, position, digest, mime, size, width, height = row
        return StoredImage(message_id, position, digest, mime, size, width, height, self.path_of(digest))
