"""Documents kept in the store: converted text by content hash, each conversation's
attachments, and named collections of files (like a LocalDocs folder or a Jan project).

A file added to a collection again is converted again only when its bytes changed: its
size and modification time are compared first, then its hash (a touched but unchanged file
is not converted twice). Tables from migration ``m013_documents``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..base import DocumentError, InvalidRequest, blocks_bounded, open_bounded
from ..store import Store
from .document import Document, Limits
from .recording import Recordings

log = logging.getLogger(__name__)

Converter = Callable[[Path], Document]


@dataclass(frozen=True)
class CollectionFile:
    collection: str
    path: str
    sha256: str
    name: str
    kind: str
    pages: int
    chars: int


@dataclass(frozen=True)
class Added:
    """What ``add_files`` did with one file: "added", "updated", "unchanged" or "failed"."""

    path: str
    outcome: str
    detail: str = ""


def file_sha256(path: Path, limit: int = Limits.max_file_bytes) -> str:
    """The sha256 of regular file ``path``: a device, a FIFO or a file over ``limit`` is
    ``DocumentError`` before a byte is hashed (``/dev/zero`` hashed forever, a 2 GB file for
    17 s before the converter refused it)."""
    digest = hashlib.sha256()
    with open_bounded(path, limit, path.name, error=DocumentError) as (handle, _status):
        for block in blocks_bounded(handle, limit, path.name, error=DocumentError):
            digest.update(block)
    return digest.hexdigest()


def link_outside_its_folder(path: Path) -> Path | None:
    """Where ``path`` leads when it is a symbolic link (or lies under one) to somewhere outside
    the folder that holds it; None when it does not. A link in a folder of documents that points
    at ``/etc/shadow`` is not a document of that folder."""
    given = Path(path).absolute()
    try:
        target = given.resolve(strict=False)
        folder = given.parent.resolve(strict=False)
    except (OSError, RuntimeError):  # a loop of links
        return given
    if target.parent == folder or folder in target.parents:
        return None
    return target if given.is_symlink() else None


def _checked_name(collection: str) -> str:
    name = collection.strip()
    if not name or len(name) > 100 or any(ord(c) < 32 for c in name):
        raise InvalidRequest("a collection needs a name of 1 to 100 printable characters", param="collection")
    return name


class DocumentLibrary:
    def __init__(self, store: Store) -> None:
        self.store = store
        # Copies of recordings attached as documents, beside the database in the data folder.
        self.recordings = Recordings(Path(store.path).parent / "recordings")

    # -- documents ----------------------------------------------------------------

    def keep(self, document: Document) -> None:
        with self.store.writing() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO documents (sha256, name, kind, size, text, pages, notes, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (document.sha256, document.name, document.kind, document.size, document.text,
                 json.dumps(list(document.pages)), json.dumps(list(document.notes)), time.time()),
            )

    def document(self, sha256: str) -> Document | None:
        with self.store.reading() as conn:
            row = conn.execute("SELECT sha256, name, kind, size, text, pages, notes FROM documents WHERE sha256 = ?",
                               (sha256,)).fetchone()
        if row is None:
            return None
        return Document(name=row[1], kind=row[2], sha256=row[0], size=row[3], text=row[4],
                        pages=tuple(json.loads(row[5] or "[]")), notes=tuple(json.loads(row[6] or "[]")))

    # -- conversations --------------------------------------------------------------

    def attach(self, conversation_id: int, documents: Iterable[Document]) -> None:
        """Add documents to a conversation's attachments (after those it has; once each)."""
        documents = list(documents)
        for document in documents:
            self.keep(document)
        with self.store.writing() as conn:
            row = conn.execute("SELECT COALESCE(MAX(position), -1) FROM conversation_documents WHERE conversation_id = ?",
                               (conversation_id,)).fetchone()
            position = int(row[0]) + 1
            for document in documents:
                added = conn.execute(
                    "INSERT OR IGNORE INTO conversation_documents (conversation_id, sha256, position) VALUES (?, ?, ?)",
                    (conversation_id, document.sha256, position),
                ).rowcount
                position += added

    def detach(self, conversation_id: int, sha256: str) -> None:
        with self.store.writing() as conn:
            conn.execute("DELETE FROM conversation_documents WHERE conversation_id = ? AND sha256 = ?",
                         (conversation_id, sha256))
        self.prune_recordings()

    def prune_recordings(self) -> int:
        """Delete the kept copies of recordings no chat and no collection holds any more (after
        a detach, a deleted chat, a removed collection); returns how many went."""
        with self.store.reading() as conn:
            held = {r[0] for r in conn.execute(
                "SELECT sha256 FROM conversation_documents UNION SELECT sha256 FROM collection_files")}
        return self.recordings.prune(held)

    def for_conversation(self, conversation_id: int) -> list[Document]:
        with self.store.reading() as conn:
            hashes = [r[0] for r in conn.execute(
                "SELECT sha256 FROM conversation_documents WHERE conversation_id = ? ORDER BY position",
                (conversation_id,))]
        return [d for d in (self.document(h) for h in hashes) if d is not None]

    # -- collections ------------------------------------------------------------------

    def add_files(self, collection: str, paths: Iterable[Path], convert: Converter) -> list[Added]:
        """Add (or refresh) files in a collection, converting only those whose bytes changed."""
        name = _checked_name(collection)
        with self.store.writing() as conn:
            conn.execute("INSERT OR IGNORE INTO document_collections (name, created_at) VALUES (?, ?)", (name, time.time()))
        results = []
        for path in paths:
            outside = link_outside_its_folder(Path(path))
            if outside is not None:
                results.append(Added(str(path), "failed", f"it is a link to {outside}, outside its folder; "
                                     "add that file by its own name if you mean it"))
                continue
            results.append(self._add_one(name, Path(path).resolve()))
        return results if not results else self._convert_pending(name, results, convert)

    def _add_one(self, collection: str, path: Path) -> Added:
        try:
            stat = path.stat()
        except OSError as exc:
            return Added(str(path), "failed", exc.strerror or str(exc))
        with self.store.reading() as conn:
            row = conn.execute("SELECT sha256, size, mtime FROM collection_files WHERE collection = ? AND path = ?",
                               (collection, str(path))).fetchone()
        if row is not None and row[1] == stat.st_size and row[2] == stat.st_mtime and self.document(row[0]) is not None:
            return Added(str(path), "unchanged")
        try:
            digest = file_sha256(path)
        except DocumentError as exc:
            return Added(str(path), "failed", str(exc))
        if row is not None and row[0] == digest and self.document(digest) is not None:
            self._record(collection, path, digest, stat.st_size, stat.st_mtime)
            return Added(str(path), "unchanged")
        return Added(str(path), "pending", "updated" if row is not None else "added")

    def _convert_pending(self, collection: str, results: list[Added], convert: Converter) -> list[Added]:
        done = []
        for item in results:
            if item.outcome != "pending":
                done.append(item)
                continue
            path = Path(item.path)
            try:
                stat = path.stat()
                document = convert(path)
            except DocumentError as exc:
                done.append(Added(item.path, "failed", str(exc)))
                continue
            except OSError as exc:
                done.append(Added(item.path, "failed", exc.strerror or str(exc)))
                continue
            self.keep(document)
            self._record(collection, path, document.sha256, stat.st_size, stat.st_mtime)
            done.append(Added(item.path, item.detail))
        return done

    def _record(self, collection: str, path: Path, sha256: str, size: int, mtime: float) -> None:
        with self.store.writing() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO collection_files (collection, path, sha256, size, mtime, added_at) "
                "VALUES (?, ?, ?, ?, ?, ?)", (collection, str(path), sha256, size, mtime, time.time()))

    def collections(self) -> dict[str, list[CollectionFile]]:
        with self.store.reading() as conn:
            names = [r[0] for r in conn.execute("SELECT name FROM document_collections ORDER BY name")]
            rows = conn.execute(
                "SELECT f.collection, f.path, f.sha256, d.name, d.kind, d.pages, LENGTH(d.text) FROM collection_files f "
                "JOIN documents d ON d.sha256 = f.sha256 ORDER BY f.collection, f.path").fetchall()
        found: dict[str, list[CollectionFile]] = {name: [] for name in names}
        for row in rows:
            found.setdefault(row[0], []).append(
                CollectionFile(row[0], row[1], row[2], row[3], row[4], len(json.loads(row[5] or "[]")), row[6]))
        return found

    def collection_documents(self, collection: str) -> list[Document]:
        files = self.collections().get(_checked_name(collection))
        if files is None:
            raise InvalidRequest(f"there is no collection named {collection!r}", param="collection")
        return [d for d in (self.document(f.sha256) for f in files) if d is not None]

    def remove(self, collection: str, paths: Iterable[Path] = ()) -> int:
        """Remove files from a collection, or (no paths) the whole collection; documents no
        longer in any collection or conversation go too. Returns how many files were removed."""
        return self.remove_collected(collection, paths)[0]

    def remove_collected(self, collection: str, paths: Iterable[Path] = ()) -> tuple[int, set[str]]:
        """``remove``, and the sha256 of the removed files' documents that are in no collection
        now (whose passages, vectors and cached states the caller may let go)."""
        name = _checked_name(collection)
        wanted = [str(Path(p).resolve()) for p in paths]
        with self.store.writing() as conn:
            if conn.execute("SELECT 1 FROM document_collections WHERE name = ?", (name,)).fetchone() is None:
                raise InvalidRequest(f"there is no collection named {collection!r}", param="collection")
            marks = ",".join("?" * len(wanted))
            touched = {r[0] for r in conn.execute(
                "SELECT sha256 FROM collection_files WHERE collection = ?" + (f" AND path IN ({marks})" if wanted else ""),
                (name, *wanted))}
            if wanted:
                removed = sum(conn.execute("DELETE FROM collection_files WHERE collection = ? AND path = ?",
                                           (name, p)).rowcount for p in wanted)
            else:
                removed = conn.execute("DELETE FROM collection_files WHERE collection = ?", (name,)).rowcount
                conn.execute("DELETE FROM document_collections WHERE name = ?", (name,))
            still = {r[0] for r in conn.execute("SELECT DISTINCT sha256 FROM collection_files")}
        self.remove_unused()
        return removed, touched - still

    def remove_unused(self) -> int:
        """Delete documents in no collection and no conversation (their passages, keyword
        entries and vectors follow by trigger); returns how many went."""
        with self.store.writing() as conn:
            removed = conn.execute("DELETE FROM documents WHERE sha256 NOT IN (SELECT sha256 FROM collection_files) "
                                   "AND sha256 NOT IN (SELECT sha256 FROM conversation_documents)").rowcount
        self.prune_recordings()
        return removed
