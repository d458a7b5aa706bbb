"""Variants of one model: the same base model at different quantizations.

Two files are variants of each other when their architecture, parameter count, tokenizer
(kind and vocabulary size) and base name agree. The most precise one (most bits per
weight) is the reference the others are compared against.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base import ModelLoadError, ModelRecord, read_gguf
from ..models import ModelRegistry
from .quantize import CREATABLE, SOURCE_RANK

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Variant:
    record: ModelRecord
    bits_per_weight: float

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def quantization(self) -> str:
        return self.record.quantization


@dataclass
class VariantGroup:
    key: tuple[Any, ...]
    name: str
    variants: list[Variant]  # most precise first
    hub_files: list[str] = field(default_factory=list)
    hub_note: str = ""

    @property
    def reference(self) -> Variant:
        return self.variants[0]

    def get(self, model_id: str) -> Variant | None:
        return next((v for v in self.variants if v.id == model_id), None)

    def creatable(self) -> list[str]:
        """Quantizations that could be made locally from the most precise file present."""
        present = {v.quantization.upper() for v in self.variants}
        top = SOURCE_RANK.get(self.reference.quantization.upper(), self.reference.bits_per_weight)
        # Q8_0 is offered even above the source's precision: it cannot recover lost detail,
        # but it holds the source's weights almost exactly, a fair reference for coarser ones.
        return [q for q in CREATABLE if q not in present and (CREATABLE[q] < top or q == "Q8_0")]

    def gains_nothing(self, quantization: str) -> bool:
        """Whether making ``quantization`` from the reference cannot be better than the reference:
        as many bits as it has, or more (Q8_0 from a 4-bit file holds the same 4-bit detail)."""
        top = SOURCE_RANK.get(self.reference.quantization.upper(), self.reference.bits_per_weight)
        return CREATABLE.get(quantization.upper(), 0.0) >= top


def _base_name(metadata: dict[str, Any]) -> str | None:
    """The model's own name from its metadata, quant suffix stripped; None when it has none.

    Never the registry id: ids are per file (``…-2`` for a second file), not per model."""
    for key in ("general.basename", "general.name"):
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            name = value.strip().lower()
            # Names often carry the quant ("... Q4_K_M"); strip it so variants meet.
            name = re.sub(r"[-_. ]?(q\d(_k)?(_[a-z0-9]+)?|f16|bf16|f32|iq\d\w*)$", "", name)
            return re.sub(r"[^a-z0-9]+", "-", name).strip("-") or None
    return None


def group_key(record: ModelRecord) -> tuple[Any, ...]:
    """What the model is: architecture, size, shape, tokenizer and name, whatever the file is called."""
    info = read_gguf(record.path)
    metadata = info.metadata
    tokenizer = (metadata.get("tokenizer.ggml.model"), metadata.get("tokenizer.ggml.pre"), info.vocab_size)
    shape = (info.block_count, info.arch_value("embedding_length"))
    return (info.architecture, info.parameter_count, shape, tokenizer, _base_name(metadata))


def find_variants(registry: ModelRegistry, model_id: str, with_hub: bool = True) -> VariantGroup:
    """All installed variants of ``model_id``'s base model (itself included)."""
    target = registry.resolve(model_id)
    key = group_key(target)
    members: list[Variant] = []
    for record in registry.list():
        # Cheap filter before reading headers: parameter counts must match exactly.
        if record.architecture != target.architecture or record.parameter_count != target.parameter_count:
            continue
        try:
            if record.id != target.id and group_key(record) != key:
                continue
        except ModelLoadError as exc:
            log.warning("skipping %s while grouping variants: %s", record.id, exc)
            continue
        members.append(Variant(record, float(record.metadata.get("bits_per_weight") or 0.0)))
    members.sort(key=lambda v: (-v.bits_per_weight, v.id))
    group = VariantGroup(key=key, name=target.base_id, variants=members)
    if with_hub:
        group.hub_files, group.hub_note = hub_quant_files(target, registry.paths.models)
    return group


def all_groups(registry: ModelRegistry) -> list[VariantGroup]:
    """Every installed model, grouped into variants (for the model picker)."""
    groups: list[VariantGroup] = []
    seen: set[str] = set()
    for record in registry.list():
        if record.id in seen:
            continue
        try:
            group = find_variants(registry, record.id, with_hub=False)
        except ModelLoadError as exc:
            log.warning("skipping %s: %s", record.id, exc)
            continue
        seen.update(v.id for v in group.variants)
        groups.append(group)
    return groups


def hub_repo_of(record: ModelRecord, models_dir: Path) -> str | None:
    """``owner/name`` for files the downloader placed at ``<models>/<owner>/<name>/...``."""
    if record.source != "download":
        return None
    try:
        parts = record.path.relative_to(models_dir).parts
    except ValueError:
        return None
    return f"{parts[0]}/{parts[1]}" if len(parts) >= 3 else None


def hub_quant_files(record: ModelRecord, models_dir: Path) -> tuple[list[str], str]:
    """Other quant files in the model's Hugging Face repository, if the hub client can tell.

    Optional on purpose: without the hub client (``models/hub.py``), for a file not downloaded from
    the hub, or offline, the lab still works with what is installed, and says why the list
    is empty.
    """
    repo = hub_repo_of(record, models_dir)
    if repo is None:
        return [], "not downloaded from the Hugging Face hub, so there is no repository to list"
    try:
        from ..models import HubClient  # noqa: PLC0415 — optional: the hub client loads only here

        client = HubClient()
    except (ImportError, AttributeError):
        return [], "the hub client is not available in this build"
    try:
        listing = client.list_files(repo)
    except Exception as exc:  # noqa: BLE001 — offline, gated, renamed: the lab must not fail because of the hub
        log.info("could not list %s on the hub: %s", repo, exc)
        return [], f"could not list {repo}: {exc}"
    installed = record.path.name
    names = [f"{option.quant}: {option.display_name}" for option in listing.options
             if option.name.rsplit("/", 1)[-1] != installed]
    return names, f"other files in {repo}"
