"""Use GGUF models that are already on disk, in place (nothing is copied).

Sources:

* a file or folder the user picks (``import_path``);
* the Hugging Face cache (``HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
  ``~/.cache/huggingface/hub``): ``models--owner--name/snapshots/<commit>/<file>.gguf``;
* LM Studio's models folder (``~/.lmstudio/models``, ``~/.cache/lm-studio/models``);
* Ollama's store (``$OLLAMA_MODELS``, else ``~/.ollama/models``): a manifest under
  ``manifests/registry.ollama.ai/<namespace>/<model>/<tag>`` names its weights layer
  (media type ``application/vnd.ollama.image.model``) by digest, stored as
  ``blobs/sha256-<hex>`` — a GGUF file with no extension.

Every root is a parameter, so tests (and the GUI's "choose a folder") point them
anywhere. Each model is registered with ``ModelRegistry.register_file(source="import")``;
files that are not valid GGUF are reported as skipped, never registered.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..base import AdapterError, ModelLoadError, ModelRecord, read_gguf
from .lora_registry import AdapterRecord, AdapterRegistry, is_adapter
from .registry import ModelRegistry, is_secondary_shard

log = logging.getLogger(__name__)

HF_CACHE = "Hugging Face cache"
LM_STUDIO = "LM Studio"
OLLAMA = "Ollama"
PICKED = "chosen by you"

OLLAMA_MODEL_MEDIA_TYPE = "application/vnd.ollama.image.model"
_OLLAMA_DIGEST = re.compile(r"^sha256[:-]([0-9a-f]{64})$")
_MANIFEST_BYTES_LIMIT = 1024 * 1024


@dataclass(frozen=True)
class FoundModel:
    """A GGUF that could be imported."""

    path: Path
    origin: str  # HF_CACHE | LM_STUDIO | OLLAMA | PICKED
    display_name: str | None = None  # for files whose own name says nothing (Ollama blobs)


@dataclass
class ImportResult:
    imported: list[ModelRecord] = field(default_factory=list)
    already: list[ModelRecord] = field(default_factory=list)  # registered before, under any path
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # (path, reason)
    # LoRA adapters among the files (general.type "adapter"): imported as adapters, not models.
    adapters: list[AdapterRecord] = field(default_factory=list)


# -- where to look ---------------------------------------------------------------------------


def default_hf_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "huggingface" / "hub"


def default_lmstudio_dirs() -> list[Path]:
    return [Path.home() / ".lmstudio" / "models", Path.home() / ".cache" / "lm-studio" / "models"]


def default_ollama_dir() -> Path:
    if os.environ.get("OLLAMA_MODELS"):
        return Path(os.environ["OLLAMA_MODELS"]).expanduser()
    return Path.home() / ".ollama" / "models"


# -- finding -----------------------------------------------------------------------------------


def _is_model_file(path: Path) -> bool:
    name = path.name.lower()
    return (name.endswith(".gguf") and not name.startswith("mmproj") and not is_secondary_shard(path)
            and path.is_file())


def find_in_folder(folder: Path, origin: str = PICKED) -> list[FoundModel]:
    """GGUF model files under ``folder`` (first parts of split sets only; no vision projectors)."""
    if not folder.is_dir():
        return []
    return [FoundModel(p, origin) for p in sorted(folder.rglob("*.gguf")) if _is_model_file(p)]


def find_in_hf_cache(cache: Path | None = None) -> list[FoundModel]:
    """GGUFs in the Hugging Face cache; one path per blob, preferring the snapshot ``refs/main`` names."""
    cache = cache if cache is not None else default_hf_cache()
    found: list[FoundModel] = []
    for repo_dir in sorted(cache.glob("models--*")) if cache.is_dir() else []:
        snapshots = repo_dir / "snapshots"
        main = _read_small(repo_dir / "refs" / "main")
        ordered = sorted(snapshots.iterdir(), key=lambda d: d.name != main) if snapshots.is_dir() else []
        seen_blobs: set[Path] = set()
        for snapshot in ordered:
            for path in sorted(snapshot.rglob("*.gguf")):
                if not _is_model_file(path):
                    continue
                blob = path.resolve()
                if blob in seen_blobs:
                    continue
                seen_blobs.add(blob)
                found.append(FoundModel(path, HF_CACHE))
    return found


def find_in_lmstudio(dirs: list[Path] | None = None) -> list[FoundModel]:
    found: list[FoundModel] = []
    for folder in dirs if dirs is not None else default_lmstudio_dirs():
        found += find_in_folder(folder, LM_STUDIO)
    return found


def find_in_ollama(root: Path | None = None) -> list[FoundModel]:
    """Ollama models whose weights layer is a blob in the store. Digests are checked against
    ``sha256:<64 hex>``, so a manifest cannot point outside ``blobs/``."""
    root = root if root is not None else default_ollama_dir()
    manifests = root / "manifests"
    found: list[FoundModel] = []
    for manifest in sorted(manifests.rglob("*")) if manifests.is_dir() else []:
        if not manifest.is_file():
            continue
        relative = manifest.relative_to(manifests).parts  # (registry, namespace, model, tag)
        if len(relative) < 3:
            continue
        model, tag = relative[-2], relative[-1]
        namespace = relative[-3] if len(relative) >= 3 else "library"
        try:
            if manifest.stat().st_size > _MANIFEST_BYTES_LIMIT:
                raise ValueError("manifest too large")
            layers = json.loads(manifest.read_text("utf-8")).get("layers", [])
        except (OSError, ValueError, AttributeError) as exc:
            log.warning("skipping unreadable Ollama manifest %s: %s", manifest, exc)
            continue
        for layer in layers if isinstance(layers, list) else []:
            if not isinstance(layer, dict) or layer.get("mediaType") != OLLAMA_MODEL_MEDIA_TYPE:
                continue
            match = _OLLAMA_DIGEST.match(str(layer.get("digest", "")))
            if not match:
                log.warning("skipping Ollama manifest %s: bad digest %r", manifest, layer.get("digest"))
                continue
            blob = root / "blobs" / f"sha256-{match.group(1)}"
            if blob.is_file():
                label = model if namespace == "library" else f"{namespace}-{model}"
                found.append(FoundModel(blob, OLLAMA, display_name=f"{label}-{tag}"))
    return found


def find_known_places(
    hf_cache: Path | None = None, lmstudio_dirs: list[Path] | None = None, ollama_dir: Path | None = None,
) -> list[FoundModel]:
    """Everything ``inglenook import --scan`` would import, without importing it."""
    return find_in_hf_cache(hf_cache) + find_in_lmstudio(lmstudio_dirs) + find_in_ollama(ollama_dir)


# -- importing ---------------------------------------------------------------------------------


def import_found(registry: ModelRegistry, found: list[FoundModel]) -> ImportResult:
    """Register each model in place. A file registered before (under any path) is not added twice.
    LoRA adapters among them go to the adapter registry (``result.adapters``)."""
    result = ImportResult()
    known = {_real(r.path): r for r in registry.list()}
    adapters = AdapterRegistry(registry.store)
    for item in found:
        real = _real(item.path)
        if real not in known and _import_adapter(adapters, item.path, result):
            continue
        if real in known:
            if known[real] not in result.imported + result.already:
                result.already.append(known[real])
            continue
        before = {r.id for r in registry.list()}
        try:
            record = registry.register_file(item.path, source="import", display_name=item.display_name)
        except ModelLoadError as exc:
            result.skipped.append((item.path, str(exc)))
            continue
        except OSError as exc:
            result.skipped.append((item.path, exc.strerror or str(exc)))
            continue
        known[real] = record
        # The same content under another path is the record already there, not a new model.
        if record.id in before:
            if record not in result.imported + result.already:
                result.already.append(record)
        else:
            result.imported.append(record)
    return result


def _import_adapter(adapters: AdapterRegistry, path: Path, result: ImportResult) -> bool:
    """True when ``path`` is an adapter (then registered, or skipped with the reason)."""
    try:
        if not is_adapter(read_gguf(path)):
            return False
        result.adapters.append(adapters.register_file(path))
    except ModelLoadError:
        return False  # not a readable GGUF: the model registry says why, as before
    except AdapterError as exc:
        result.skipped.append((path, str(exc)))
    return True


def import_path(registry: ModelRegistry, path: Path | str) -> ImportResult:
    """A file (any name: Ollama blobs have no extension) or every GGUF under a folder."""
    path = Path(path).expanduser()
    if path.is_dir():
        found = find_in_folder(path)
        if not found:
            return ImportResult(skipped=[(path, "no .gguf files in this folder")])
        return import_found(registry, found)
    if not path.exists():
        return ImportResult(skipped=[(path, "no such file or folder")])
    return import_found(registry, [FoundModel(path, PICKED)])


def scan_known_places(
    registry: ModelRegistry, hf_cache: Path | None = None, lmstudio_dirs: list[Path] | None = None,
    ollama_dir: Path | None = None,
) -> ImportResult:
    return import_found(registry, find_known_places(hf_cache, lmstudio_dirs, ollama_dir))


def _real(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path


def _read_small(path: Path) -> str | None:
    try:
        return path.read_text("utf-8").strip()[:100] if path.is_file() else None
    except OSError:
        return None
