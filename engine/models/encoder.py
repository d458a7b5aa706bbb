"""The embedding model recommended for search when none is installed (issue 30, item 4).

Document and chat search embed text with the smallest installed encoder (a BERT-family GGUF,
``registry.EMBEDDING_ARCHITECTURES``); without one they fall back to a chat model, which is
slower and a poorer judge of meaning. Front ends offer this one in its place.

The recommendation is nomic-embed-text v1.5 at Q4_K_M, from Nomic's own GGUF repository: a
``nomic-bert`` encoder that llama.cpp supports (its model card says the files are compatible
with llama.cpp as of commit 4524290e8, and the file's page on huggingface.co shows it as an
LFS file of 84.1 MB, sha256 d4e38889…95ac: read through a documentation search of
https://huggingface.co/nomic-ai/nomic-embed-text-v1.5-GGUF and its file pages). The hub's listing gives the exact
size when it can be reached; ``KNOWN_SIZE`` (those 84.1 MB) is only for offline answers, and
the download itself always takes sizes and sha256 from the hub (``Downloader._authoritative``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..base import DownloadError, ModelRecord
from .hub import HubClient, QuantOption, RemoteFile
from .registry import EMBEDDING_ARCHITECTURES, ModelRegistry

log = logging.getLogger(__name__)

REPO = "nomic-ai/nomic-embed-text-v1.5-GGUF"
FILE = "nomic-embed-text-v1.5.Q4_K_M.gguf"
NAME = "nomic-embed-text v1.5"
KNOWN_SIZE = 84_100_000  # 84.1 MB as the hub's file page states it (see above)
QUANT = "Q4_K_M"


@dataclass(frozen=True)
class EncoderOffer:
    """The recommended encoder: where it is, how large, and what a download of it takes."""

    repo: str
    file: str
    name: str
    size_bytes: int
    option: QuantOption  # what ``Downloader.download`` is given
    commit: str | None = None  # the listing's commit when the hub was read, else the newest
    listed: bool = False  # True: the size is the hub's listing of now; False: the known size

    @property
    def pull_command(self) -> str:
        """The terminal's download of it (``pull`` picks Q4_K_M by default)."""
        return f"inglenook pull {self.repo}"


def installed_encoder(registry: ModelRegistry) -> ModelRecord | None:
    """The smallest usable installed embedding model, or None."""
    encoders = [m for m in registry.list() if m.usable and m.architecture in EMBEDDING_ARCHITECTURES]
    return min(encoders, key=lambda m: (m.size_bytes, m.id)) if encoders else None


def known_offer() -> EncoderOffer:
    """The recommendation with the size known from when it was chosen (no network)."""
    option = QuantOption(QUANT, (RemoteFile(FILE, KNOWN_SIZE, None),))
    return EncoderOffer(REPO, FILE, NAME, KNOWN_SIZE, option)


def recommended_encoder(hub: HubClient | None) -> EncoderOffer:
    """The recommendation, its size from ``hub``'s file listing when it answers (the real
    huggingface-hub ``model_info`` call), else the known size."""
    if hub is None:
        return known_offer()
    try:
        listing = hub.list_files(REPO)
        option = listing.pick(FILE)
    except DownloadError as exc:
        log.info("the hub's listing of %s is unavailable (%s); offering it at its known size", REPO, exc)
        return known_offer()
    return EncoderOffer(listing.repo, option.name, NAME, option.size, option, listing.commit, listed=True)
