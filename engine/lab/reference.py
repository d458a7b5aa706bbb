"""The reference model's distributions, computed once and kept on disk compactly.

One ``.npz`` per (reference file, evaluation windows, k): top-k token ids and
log-probabilities per scored position, plus the reference's own negative log-likelihoods.
Written atomically; read with ``allow_pickle=False`` (plain arrays only, never objects).
"""

from __future__ import annotations

import logging
import zipfile
from pathlib import Path

import numpy as np

from ..base import atomic_writer
from .metrics import ReferenceChunk

log = logging.getLogger(__name__)

FORMAT_VERSION = 1


def reference_path(cache_dir: Path, fingerprint: str, windows_digest: str, k: int) -> Path:
    return cache_dir / f"ref-{fingerprint[:16]}-{windows_digest}-k{k}.npz"


def save_reference(path: Path, chunks: list[ReferenceChunk], fingerprint: str, windows_digest: str) -> None:
    with atomic_writer(path) as handle:
        np.savez(
            handle,
            version=np.asarray([FORMAT_VERSION], dtype=np.int32),
            fingerprint=np.asarray(fingerprint),
            windows=np.asarray(windows_digest),
            offsets=np.cumsum([0] + [len(c.nll) for c in chunks]).astype(np.int64),
            top_index=np.concatenate([c.top_index for c in chunks]),
            top_logprob=np.concatenate([c.top_logprob for c in chunks]),
            nll=np.concatenate([c.nll for c in chunks]),
        )


def load_reference(path: Path, fingerprint: str, windows_digest: str) -> list[ReferenceChunk] | None:
    """The saved chunks (one per window), or None when missing, damaged or for other inputs."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            if int(data["version"][0]) != FORMAT_VERSION:
                return None
            if str(data["fingerprint"]) != fingerprint or str(data["windows"]) != windows_digest:
                return None
            offsets = data["offsets"]
            index, logprob, nll = data["top_index"], data["top_logprob"], data["nll"]
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        log.warning("ignoring a damaged reference file %s: %s", path.name, exc)
        return None
    return [
        ReferenceChunk(index[a:b], logprob[a:b], nll[a:b])
        for a, b in zip(offsets[:-1], offsets[1:])
    ]
