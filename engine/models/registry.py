"""The local model registry: which GGUF files Inglenook can run, and what they are.

Models come from the models directory (scanned), files the user registered in place
(imported, never copied), and the bundled starter model. Each gets a stable,
human-readable id such as ``smollm2-135m-instruct:q4_1`` and a content fingerprint.

One file content is one record, however many paths lead to it: a second path with the same
fingerprint (a copy, a link, an Ollama blob also in the HF cache) is kept as another path of
that record, and takes over when the record's own file goes. Containment checks (may this
file be deleted?) resolve both sides first, never compare paths as text. A file that
llama.cpp refused is kept with its ``problem`` (shown by ``list`` and the Models page) until
it loads.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time
from pathlib import Path

from ..base import (
    FILE_TYPES, GGUFInfo, ModelLoadError, ModelNotFound, ModelRecord, fingerprint_file, is_projector_name,
    read_gguf,
)
from ..store import Paths, Store
from .starter import find_starter_model

log = logging.getLogger(__name__)

_QUANT_NAMES = sorted({*FILE_TYPES.values(), "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "Q3_K", "Q4_K", "Q5_K"}, key=len, reverse=True)
_QUANT_SUFFIX = re.compile(r"[-_. ](" + "|".join(re.escape(q) for q in _QUANT_NAMES) + r")$", re.IGNORECASE)
STARTER_REMOVED_KEY = "starter_removed"
#: Architectures whose GGUFs are embedding models (encoders): the chat search uses them without
#: its corrections, and routing never picks them to answer.
EMBEDDING_ARCHITECTURES = frozenset({"bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "jina-bert-v3",
                                     "modern-bert", "neo-bert", "t5encoder"})
_SHARD = re.compile(r"-(\d{5})-of-(\d{5})$")

def model_id_for(path: Path, info: GGUFInfo) -> str:
    """``<file stem without quant and shard suffix, slugged>:<quant>``."""
    stem = _SHARD.sub("", path.name.removesuffix(".gguf"))
    stem = _QUANT_SUFFIX.sub("", stem)
    base = re.sub(r"[^a-z0-9.]+", "-", stem.lower()).strip("-.") or info.architecture
    return f"{base}:{info.quantization.lower()}"


def unrunnable_reason(info: GGUFInfo) -> str | None:
    """Why llama.cpp would refuse this file for certain, seen from its header alone."""
    if info.metadata.get("general.type") == "adapter":
        return "it is a LoRA adapter, not a model (`inglenook import` adds it as an adapter)"
    if info.architecture == "clip":
        return "it is a vision projector (an mmproj file), read beside the model it belongs to, not run on its own"
    if not info.tensors:
        return "it holds no tensors (a vocabulary-only or empty file)"
    unknown = sorted({t.ggml_type for t in info.tensors if t.n_bytes is None})
    if unknown:
        return f"it uses tensor types this build does not know ({', '.join(map(str, unknown))})"
    if "general.architecture" not in info.metadata:
        return "it does not name its architecture"
    return None


def is_secondary_shard(path: Path) -> bool:
    match = _SHARD.search(path.name.removesuffix(".gguf"))
    return bool(match and match.group(1) != "00001")


class ModelRegistry:
    """Lists, registers, resolves and removes local models. Thread-safe."""

    def __init__(self, store: Store, paths: Paths, extra_dirs: list[str] | None = None) -> None:
        self.store = store
        self.paths = paths
        self.extra_dirs = [Path(d) for d in extra_dirs or []]
        self._lock = threading.RLock()

    # -- discovery ------------------------------------------------------------------

    def refresh(self) -> list[ModelRecord]:
        """Register the starter model and every GGUF in the scanned folders; drop vanished files."""
        with self._lock:
            starter = find_starter_model()
            # A user who removed the starter model does not want it back on every start.
            if starter is not None and not self.store.get_setting(STARTER_REMOVED_KEY, False):
                self._try_register(starter, "starter")
            for folder in [self.paths.models, *self.extra_dirs]:
                for path in sorted(folder.rglob("*.gguf")) if folder.is_dir() else []:
                    if self.paths.downloads in path.parents or is_secondary_shard(path) or is_projector_name(path):
                        continue  # a projector is read beside its model, never listed as one
                    self._try_register(path, "scan")
            self._forget_vanished()
            return self.list()

    def _forget_vanished(self) -> None:
        """A record whose file is gone moves to another path to its content, or is dropped."""
        others: dict[str, list[Path]] = {}
        for extra, model_id in self.store.model_paths().items():
            if Path(extra).is_file():
                others.setdefault(model_id, []).append(Path(extra))
            else:
                self.store.delete_model_path(extra)
        for record in self.list():
            if record.path.is_file():
                continue
            replacement = next((p for p in others.get(record.id, []) if self._same_content(p, record)), None)
            if replacement is not None:
                log.info("model file of %s is gone; using %s, a path to the same content", record.id, replacement.name)
                self.store.move_model(record.id, str(replacement))
            else:
                log.info("model file of %s is gone; removing it from the registry", record.id)
                self.store.delete_model(record.id)

    @staticmethod
    def _same_content(path: Path, record: ModelRecord) -> bool:
        try:
            size = path.stat().st_size
            return size == record.size_bytes and fingerprint_file(path, size) == record.fingerprint
        except (OSError, ModelLoadError):
            return False

    def _try_register(self, path: Path, source: str) -> None:
        try:
            self.register_file(path, source=source)
        except ModelLoadError as exc:
            log.warning("skipping %s: %s", path, exc)
        except OSError as exc:  # unreadable, vanished mid-scan: one bad file never stops the listing
            log.warning("skipping %s: %s", path, exc.strerror or exc)

    def register_file(self, path: Path | str, source: str = "import", display_name: str | None = None) -> ModelRecord:
        """Add a GGUF file in place (no copy). Validates the header first.

        A file whose content is already registered (by fingerprint) under another path is
        not a second model: the existing record is returned, and the path remembered as
        another way to it. ``display_name`` names a file whose own name says nothing (an
        Ollama blob is ``sha256-…``); the id is then derived from it instead of the file name."""
        path = _canonical(path)
        with self._lock:
            stat = path.stat() if path.is_file() else None
            existing = self._by_path(path)
            if existing and stat and existing.size_bytes == stat.st_size and existing.mtime == stat.st_mtime:
                return existing
            if existing and existing.path != path:
                # A path we knew as another way to a record's content has changed: re-examine it.
                self.store.delete_model_path(str(path))
                existing = None
            info = read_gguf(path)
            reason = unrunnable_reason(info)
            if reason is not None:
                raise ModelLoadError(f"{path.name} cannot be run: {reason}")
            named = Path(f"{display_name}.gguf") if display_name else path
            record = ModelRecord.describe(
                info,
                model_id=existing.id if existing else "",
                source=existing.source if existing and source == "scan" else source,
                name=named.name.removesuffix(".gguf"),
                added_at=existing.added_at if existing else time.time(),
            )
            same = self._by_fingerprint(record.fingerprint, record.size_bytes, besides=path)
            if same is not None:
                if existing is not None:
                    self.store.delete_model(existing.id)
                log.info("%s has the same content as %s; not registered twice", path.name, same.id)
                if source == "download" and same.source != "download":
                    # Downloaded on purpose: the record now names Inglenook's own copy (which
                    # `rm` may delete); the path it had is kept as another path to it.
                    promoted = dataclasses.replace(same, path=path, source="download", mtime=record.mtime)
                    self.store.upsert_model(promoted.to_row())
                    self.store.add_model_path(str(same.path), same.id)
                    return promoted
                self.store.add_model_path(str(path), same.id)
                return same
            if not record.id:
                record.id = self._unique_id(model_id_for(named, info), path)
            self.store.upsert_model(record.to_row())
            log.info("registered model %s (%s)", record.id, path.name)
            return record

    def _by_path(self, path: Path) -> ModelRecord | None:
        records = self.list()
        for record in records:
            if record.path == path:
                return record
        model_id = self.store.model_paths().get(str(path))
        return next((r for r in records if r.id == model_id), None) if model_id else None

    def _by_fingerprint(self, fingerprint: str, size: int, besides: Path) -> ModelRecord | None:
        for record in self.list():
            if record.fingerprint == fingerprint and record.size_bytes == size and record.path != besides:
                if record.path.is_file():
                    return record
        return None

    def _unique_id(self, wanted: str, path: Path) -> str:
        taken = {r.id: r.path for r in self.list()}
        candidate, n = wanted, 2
        while candidate in taken and taken[candidate] != path:
            base, _, quant = wanted.partition(":")
            candidate = f"{base}-{n}:{quant}"
            n += 1
        return candidate

    def mark_problem(self, model_id: str, problem: str | None) -> None:
        """Record why ``model_id`` failed to load (None: it loaded); unknown ids are ignored."""
        problem = problem[:500] if problem else None
        with self._lock:
            current = next((r for r in self.list() if r.id == model_id), None)
            if current is not None and current.problem != problem:
                self.store.set_model_problem(model_id, problem)

    def paths_of(self, record: ModelRecord) -> list[Path]:
        """Every known path to ``record``'s content, its own first."""
        extra = sorted(Path(p) for p, model_id in self.store.model_paths().items() if model_id == record.id)
        return [record.path, *extra]

    # -- queries --------------------------------------------------------------------

    def list(self) -> list[ModelRecord]:
        return [ModelRecord.from_row(r) for r in self.store.model_rows()]

    def get(self, model_id: str) -> ModelRecord:
        for record in self.list():
            if record.id == model_id:
                return record
        raise ModelNotFound(f"no local model named {model_id!r}")

    def resolve(self, name: str) -> ModelRecord:
        """Find a model by id, by id without the quant (when unambiguous), or by file path."""
        records = self.list()
        wanted = name.strip().lower()
        for record in records:
            if record.id == wanted:
                return record
        same_base = [r for r in records if r.base_id == wanted]
        if not same_base:
            # "smollm2" finds "smollm2-135m-instruct:q4_1" when no other model starts that way.
            same_base = [r for r in records if r.id.startswith(wanted + "-")]
        if len(same_base) == 1:
            return same_base[0]
        if len(same_base) > 1:
            options = ", ".join(r.id for r in same_base)
            raise ModelNotFound(f"{name!r} matches several models: {options}")
        if name.endswith(".gguf") or "/" in name or "\\" in name:
            path = Path(name).expanduser()
            if not path.exists():
                raise ModelLoadError(f"model file not found: {name}")
            return self.register_file(path)
        raise ModelNotFound(f"no local model named {name!r}; `inglenook list` shows the installed ones")

    def owns_file(self, record: ModelRecord) -> bool:
        """True when ``record``'s file is Inglenook's to delete: its directory entry really lies
        inside the models folder (the folder path resolved, links and ``..`` followed, never
        compared as text), and Inglenook downloaded, made or found it there. Never the starter
        model, never an imported file. Deleting a link there removes the link, not its target."""
        return record.source in _OWNED_SOURCES and self._inside_models(record.path)

    def _inside_models(self, path: Path) -> bool:
        try:
            entry = path.parent.resolve(strict=True) / path.name
            models = self.paths.models.resolve(strict=True)
        except (OSError, RuntimeError):
            return False
        return models in entry.parents and (entry.is_symlink() or entry.is_file())

    def remove(self, model_id: str, delete_file: bool | None = None) -> ModelRecord:
        """Forget a model. Its file is deleted only when ``owns_file`` says so (``delete_file``
        False keeps it even then); imported files, the starter model and anything outside the
        models folder are only forgotten. Other paths to the same content inside the models
        folder (a download of the starter model, say) are deleted with it."""
        with self._lock:
            record = self.resolve(model_id)
            others = self.paths_of(record)[1:]
            if record.source == "starter":
                self.store.set_setting(STARTER_REMOVED_KEY, True)
            elif delete_file is not False and self.owns_file(record):
                record.path.unlink(missing_ok=True)
            if delete_file is not False:
                for other in others:
                    if self._inside_models(other):
                        other.unlink(missing_ok=True)
            self.store.delete_model(record.id)
            return record


#: Sources whose files live in Inglenook's models folder because Inglenook put or found them there.
_OWNED_SOURCES = ("download", "quantized", "scan")


def _canonical(path: Path | str) -> Path:
    """``path`` made absolute, as given: links are kept (an Ollama blob is a link), so a record
    names the path the user or the scan knows. Whatever decides on a file's real location
    (``owns_file``) resolves it at that moment instead."""
    return Path(path).expanduser().absolute()
