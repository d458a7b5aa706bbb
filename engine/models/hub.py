"""Hugging Face hub client: search GGUF repos, list a repo's quantization files.

Everything goes through huggingface-hub (``HfApi``), so proxies, ``HF_ENDPOINT`` mirrors
and saved logins behave as they do for other tools. The endpoint is read when a client
is made (not when the library was imported), so ``HF_ENDPOINT`` set later still counts.
The token comes from the ``hf_token`` setting, else ``HF_TOKEN``, else the login saved
by ``hf auth login``.

Errors from the library become one ``DownloadError`` with a sentence a person can act
on, chosen by exception type (see ``hub_errors``).

Why about 400 lines: search, a repository's file listing, split-set grouping and the one
error mapping (``hub_errors``) all work on the same listing records and client setup;
downloads are in ``downloads``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlsplit

import httpx
from huggingface_hub import HfApi, ModelInfo, RepoFile, hf_hub_url
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

from ..base import DownloadError, GGUFInfo, ModelLoadError, is_projector_name, parse_gguf_header
from ..runtime import FitEstimate, LoadOptions, MachineMemory, ModelShape, estimate_fit, output_rows

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_QUANT = "Q4_K_M"
SORTS = {"downloads": "downloads", "likes": "likes", "updated": "last_modified", "trending": "trending_score"}

# Quantization names as they appear in file names, longest first so Q4_K_M wins over Q4_K.
QUANT_NAMES = (
    "IQ2_XXS", "IQ3_XXS", "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "IQ1_S", "IQ1_M", "IQ2_XS", "IQ2_S", "IQ2_M",
    "IQ3_XS", "IQ3_S", "IQ3_M", "IQ4_NL", "IQ4_XS", "Q2_K_S", "Q2_K_L", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q3_K_XL",
    "Q4_K_S", "Q4_K_M", "Q4_K_L", "Q4_K_XL", "Q5_K_S", "Q5_K_M", "Q5_K_L", "Q5_K_XL", "Q6_K_L", "Q6_K_XL",
    "Q8_K_XL", "MXFP4", "TQ1_0", "TQ2_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
    "Q8_0", "BF16", "F16", "F32",
)
_QUANT_IN_NAME = re.compile(r"(?<![A-Za-z0-9])(" + "|".join(QUANT_NAMES) + r")(?![A-Za-z0-9])", re.IGNORECASE)
_SPLIT = re.compile(r"^(?P<stem>.+)-(?P<part>\d{5})-of-(?P<total>\d{5})\.gguf$", re.IGNORECASE)
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9_.-]{1,96}$")

# Bits per weight of whole files at each quantization, from llama.cpp's quantize table
# (file sizes of Llama-3-8B). Used only when a repo does not say how many parameters it has.
NOMINAL_BPW: dict[str, float] = {
    "F32": 32.0, "F16": 16.0, "BF16": 16.0, "Q8_0": 8.5, "Q6_K": 6.57, "Q5_K_M": 5.7, "Q5_K_S": 5.57,
    "Q5_1": 6.04, "Q5_0": 5.57, "Q4_K_M": 4.9, "Q4_K_S": 4.67, "Q4_1": 5.11, "Q4_0": 4.64, "IQ4_NL": 4.5,
    "IQ4_XS": 4.25, "Q3_K_L": 4.31, "Q3_K_M": 4.0, "Q3_K_S": 3.65, "IQ3_M": 3.66, "IQ3_S": 3.44, "IQ3_XS": 3.3,
    "IQ3_XXS": 3.06, "Q2_K": 3.17, "Q2_K_S": 2.96, "IQ2_M": 2.7, "IQ2_S": 2.5, "IQ2_XS": 2.31, "IQ2_XXS": 2.06,
    "IQ1_M": 1.75, "IQ1_S": 1.56, "TQ1_0": 1.69, "TQ2_0": 2.06, "MXFP4": 4.25, "Q4_K_L": 5.1, "Q4_K_XL": 5.0,
    "Q3_K_XL": 4.4, "Q5_K_L": 5.9, "Q5_K_XL": 5.9, "Q6_K_L": 6.8, "Q6_K_XL": 6.8, "Q8_K_XL": 9.0, "Q2_K_L": 3.4,
    "Q4_0_4_4": 4.64, "Q4_0_4_8": 4.64, "Q4_0_8_8": 4.64, "Q3_K": 3.44, "Q4_K": 4.5, "Q5_K": 5.5,
}
# When Q4_K_M is missing, the closest 4-bit files, best first.
FOUR_BIT_PREFERENCE = ("Q4_K_M", "Q4_K_S", "IQ4_XS", "IQ4_NL", "Q4_K_L", "Q4_K_XL", "Q4_K", "Q4_0", "Q4_1", "MXFP4")


def resolve_token(setting: str | None = None) -> str | None:
    """The ``hf_token`` setting, else ``HF_TOKEN``; None lets huggingface-hub use a saved login."""
    token = (setting or "").strip() or os.environ.get("HF_TOKEN", "").strip()
    return token or None


def resolve_endpoint(endpoint: str | None = None) -> str:
    return (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def check_repo_id(repo: str) -> str:
    repo = repo.strip()
    if not _REPO_ID.match(repo) or ".." in repo:
        raise DownloadError(f"{repo!r} is not a Hugging Face repository name (expected OWNER/NAME)")
    return repo


def is_safe_remote_path(path: str) -> bool:
    """A repo file name we are willing to turn into a local file name.

    Rejects absolute paths, drive letters, backslashes, ``..`` and empty parts, control
    characters: a listing from a hostile mirror must not write outside the models folder.
    """
    if not path or len(path) > 1024 or "\\" in path or path.startswith("/") or ":" in path:
        return False
    if any(ord(ch) < 32 for ch in path):
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


def quant_from_name(path: str) -> str | None:
    """``Meta-Llama-3-8B-Instruct.Q4_K_M.gguf`` → ``Q4_K_M`` (the last match wins, file before folder)."""
    for piece in reversed(path.split("/")):
        matches = _QUANT_IN_NAME.findall(piece)
        if matches:
            return matches[-1].upper()
    return None


# -- results ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class HubModel:
    """One search result."""

    repo: str
    downloads: int | None
    likes: int | None
    last_modified: datetime | None
    licence: str | None
    gated: bool
    parameters: int | None = None
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class RemoteFile:
    path: str  # inside the repo, "/"-separated
    size: int
    sha256: str | None  # the LFS object id; None for files kept in git (never GGUF weights)


@dataclass(frozen=True)
class QuantOption:
    """One downloadable model: a single GGUF file, or every part of a split set."""

    quant: str
    files: tuple[RemoteFile, ...]
    parameters: int | None = None

    @property
    def name(self) -> str:
        """The first (or only) file: what llama.cpp is pointed at."""
        return self.files[0].path

    @property
    def display_name(self) -> str:
        match = _SPLIT.match(self.name.rsplit("/", 1)[-1])
        return f"{match['stem']}.gguf ({len(self.files)} parts)" if match else self.name.rsplit("/", 1)[-1]

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def is_split(self) -> bool:
        return len(self.files) > 1

    @property
    def bpw_is_nominal(self) -> bool:
        return not self.parameters

    @property
    def bits_per_weight(self) -> float | None:
        if self.parameters:
            return self.size * 8 / self.parameters
        return NOMINAL_BPW.get(self.quant)


@dataclass
class RepoListing:
    repo: str
    commit: str | None
    options: list[QuantOption]
    parameters: int | None = None
    architecture: str | None = None
    context_length: int | None = None
    licence: str | None = None
    gated: bool = False
    rejected: list[str] = field(default_factory=list)  # unsafe names, incomplete split sets
    # Vision projectors (mmproj*.gguf) in the repo: downloaded beside a model (Downloader.pull).
    projectors: list[RemoteFile] = field(default_factory=list)

    def by_quant(self) -> dict[str, list[QuantOption]]:
        """Options grouped by quantization, smallest quantization first."""
        groups: dict[str, list[QuantOption]] = {}
        for option in sorted(self.options, key=lambda o: (o.size, o.name)):
            groups.setdefault(option.quant, []).append(option)
        return groups

    def pick(self, wanted: str | None = None) -> QuantOption:
        """The option for ``wanted`` (a quant name or a file name); default Q4_K_M, else the
        closest 4-bit file."""
        if not self.options:
            raise DownloadError(f"{self.repo} has no GGUF model files")
        if wanted and wanted.lower().endswith(".gguf"):
            for option in self.options:
                if wanted in (option.name, option.name.rsplit("/", 1)[-1]):
                    return option
            raise DownloadError(f"{self.repo} has no GGUF file named {wanted!r}")
        groups = self.by_quant()
        if wanted:
            matches = groups.get(wanted.upper())
            if not matches:
                available = ", ".join(groups)
                raise DownloadError(f"{self.repo} has no {wanted.upper()} file; available: {available}")
            return matches[0]
        for quant in FOUR_BIT_PREFERENCE:
            if quant in groups:
                return groups[quant][0]
        known = [o for o in self.options if o.bits_per_weight]
        if known:
            return min(known, key=lambda o: abs((o.bits_per_weight or 0) - NOMINAL_BPW[DEFAULT_QUANT]))
        return sorted(self.options, key=lambda o: o.size)[0]


def group_files(files: list[RemoteFile], parameters: int | None = None) -> tuple[list[QuantOption], list[str]]:
    """GGUF files → options (split sets joined, in part order); also the names left out."""
    options: list[QuantOption] = []
    rejected: list[str] = []
    split_sets: dict[tuple[str, int], dict[int, RemoteFile]] = {}
    for remote in files:
        if not remote.path.lower().endswith(".gguf"):
            continue
        if not is_safe_remote_path(remote.path):
            log.warning("ignoring unsafe file name in listing: %r", remote.path)
            rejected.append(remote.path)
            continue
        base = remote.path.rsplit("/", 1)[-1].lower()
        if base.startswith("mmproj") or "imatrix" in base:
            continue  # vision projectors and importance matrices are not models by themselves
        match = _SPLIT.match(remote.path)
        if match:
            key = (match["stem"], int(match["total"]))
            split_sets.setdefault(key, {})[int(match["part"])] = remote
            continue
        options.append(QuantOption(quant_from_name(remote.path) or "unknown", (remote,), parameters))
    for (stem, total), parts in split_sets.items():
        if sorted(parts) != list(range(1, total + 1)):
            log.warning("split set %s is incomplete (%d of %d parts); ignoring it", stem, len(parts), total)
            rejected.append(f"{stem} ({len(parts)} of {total} parts)")
            continue
        ordered = tuple(parts[i] for i in range(1, total + 1))
        options.append(QuantOption(quant_from_name(stem) or "unknown", ordered, parameters))
    options.sort(key=lambda o: (o.size, o.name))
    return options, rejected


# -- errors ------------------------------------------------------------------------------------


@contextlib.contextmanager
def hub_errors(repo: str, token: str | None, endpoint: str = DEFAULT_ENDPOINT) -> Iterator[None]:
    """Turn huggingface-hub and network exceptions into one DownloadError each."""
    try:
        yield
    except GatedRepoError as exc:
        page = f"{endpoint}/{repo}"
        if token:
            message = f"{repo} is gated and this access token has not been granted access; request it at {page}"
        else:
            message = (f"{repo} is gated: accept its terms at {page}, then set an access token "
                       "(the hf_token setting or the HF_TOKEN environment variable)")
        raise DownloadError(message) from exc
    except RepositoryNotFoundError as exc:
        hint = "" if token else " (a private repository needs an access token: the hf_token setting or HF_TOKEN)"
        raise DownloadError(f"no model repository {repo} on Hugging Face{hint}") from exc
    except RevisionNotFoundError as exc:
        raise DownloadError(f"{repo} has no such revision") from exc
    except EntryNotFoundError as exc:
        message = f"a file is missing from {repo}; it may have been renamed or deleted, list the repo again"
        raise DownloadError(message) from exc
    except OfflineModeIsEnabled as exc:
        raise DownloadError("offline mode is on (HF_HUB_OFFLINE is set); unset it to reach Hugging Face") from exc
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        if status in (401, 403):
            raise DownloadError(f"Hugging Face refused access to {repo} ({status}); check your access token") from exc
        raise DownloadError(f"Hugging Face answered {status or 'an error'} for {repo}; try again later") from exc
    except httpx.HTTPError as exc:
        host = urlsplit(endpoint).netloc or endpoint
        raise DownloadError(f"cannot reach {host}: {exc.__class__.__name__}: {exc}") from exc


# -- the client --------------------------------------------------------------------------------


class HubClient:
    """Search and list. Thread-safe (huggingface-hub's session is shared and thread-safe)."""

    HEADER_FIRST_BYTES = 4 * 1024 * 1024
    HEADER_MAX_BYTES = 128 * 1024 * 1024

    def __init__(self, token: str | None = None, endpoint: str | None = None) -> None:
        self.token = token
        self.endpoint = resolve_endpoint(endpoint)
        self.api = HfApi(endpoint=self.endpoint, token=token)

    def errors(self, repo: str) -> contextlib.AbstractContextManager[None]:
        return hub_errors(repo, self.token, self.endpoint)

    def search(self, text: str = "", sort: str = "downloads", limit: int = 30) -> list[HubModel]:
        """GGUF repos matching ``text``; ``sort`` is downloads, likes, updated or trending."""
        if sort not in SORTS:
            raise DownloadError(f"unknown sort {sort!r}; use one of {', '.join(SORTS)}")
        with self.errors("search"):
            found = self.api.list_models(
                search=text or None, filter="gguf", sort=SORTS[sort], limit=limit,
                expand=["downloads", "likes", "lastModified", "tags", "gated", "gguf"],
            )
            return [_hub_model(info) for info in found]

    def list_files(self, repo: str, revision: str | None = None) -> RepoListing:
        """The repo's GGUF models with sizes and sha256 (LFS metadata), grouped into options."""
        repo = check_repo_id(repo)
        with self.errors(repo):
            info = self.api.model_info(repo, revision=revision, files_metadata=True)
        raw_gguf = getattr(info, "gguf", None)
        gguf = raw_gguf if isinstance(raw_gguf, dict) else {}
        parameters = gguf.get("total") if isinstance(gguf.get("total"), int) else None
        remote = [
            RemoteFile(s.rfilename, int((s.lfs.size if s.lfs else s.size) or 0), s.lfs.sha256 if s.lfs else None)
            for s in info.siblings or []
        ]
        options, rejected = group_files(remote, parameters)
        projectors = [f for f in remote if is_projector_name(f.path) and is_safe_remote_path(f.path)]
        return RepoListing(
            repo=repo, commit=info.sha, options=options, parameters=parameters,
            architecture=gguf.get("architecture"), context_length=gguf.get("context_length"),
            licence=_licence(info), gated=bool(info.gated), rejected=rejected, projectors=projectors,
        )

    def file_metadata(self, repo: str, paths: list[str], revision: str | None) -> dict[str, RemoteFile]:
        """Size and LFS sha256 of ``paths`` at ``revision`` (the paths-info endpoint)."""
        with self.errors(repo):
            infos = self.api.get_paths_info(repo, paths, revision=revision)
        found: dict[str, RemoteFile] = {}
        for item in infos:
            if not isinstance(item, RepoFile):
                continue  # a folder
            lfs = item.lfs
            found[item.path] = RemoteFile(item.path, int(lfs.size if lfs else item.size), lfs.sha256 if lfs else None)
        return found

    def read_header(self, repo: str, remote: RemoteFile, revision: str | None = None) -> GGUFInfo:
        """Parse a remote GGUF's header from its first megabytes (HTTP Range), growing as needed."""
        if not is_safe_remote_path(remote.path):
            raise DownloadError(f"refusing unsafe file name {remote.path!r}")
        url = hf_hub_url(repo, remote.path, revision=revision, endpoint=self.endpoint)
        headers = build_hf_headers(token=self.token)
        want = self.HEADER_FIRST_BYTES
        while True:
            want = min(want, remote.size)
            data = self._first_bytes(repo, url, {**headers, "Range": f"bytes=0-{want - 1}"}, want)
            try:
                return parse_gguf_header(data, remote.path.rsplit("/", 1)[-1], remote.size)
            except ModelLoadError:
                if len(data) >= remote.size or want >= self.HEADER_MAX_BYTES:
                    raise
                want *= 4

    def _first_bytes(self, repo: str, url: str, headers: dict[str, str], want: int) -> bytes:
        # Streamed and cut off at ``want``: a server that ignores Range must not make us read 5 GB.
        chunks: list[bytes] = []
        have = 0
        with self.errors(repo), get_session().stream("GET", url, headers=headers, timeout=60) as response:
            hf_raise_for_status(response)
            for chunk in response.iter_bytes(1024 * 1024):
                chunks.append(chunk)
                have += len(chunk)
                if have >= want:
                    break
        return b"".join(chunks)[:want]

    def shape(self, repo: str, listing: RepoListing, option: QuantOption | None = None) -> ModelShape:
        """The architecture numbers the fit estimate needs, from one file's header."""
        option = option or listing.pick()
        info = self.read_header(repo, option.files[0], listing.commit)
        # The first part of a split set holds only some tensors: the total size comes from the listing.
        shape = ModelShape.from_gguf(info)
        return dataclasses.replace(shape, weights_bytes=option.size, n_params=listing.parameters or shape.n_params)


def fit_options(
    listing: RepoListing, shape: ModelShape, machine: MachineMemory, context: int = 4096, kv_type: str = "f16",
    sequences: int = 1, speculative: str = "off",
) -> dict[str, FitEstimate]:
    """A fit estimate for every option of a repo (keyed by ``QuantOption.name``), from one shape:
    ``context`` KV cells in all over ``sequences`` answers at once (each its own window cache
    and window checkpoints), loaded for chat with the ``speculative`` setting (the logits
    rows a step asks for, ``output_rows``)."""
    outputs = output_rows(LoadOptions(speculative=speculative), sequences)
    return {o.name: estimate_fit(shape.with_weights(o.size), machine, context, kv_type, sequences=sequences,
                                 outputs=outputs)
            for o in listing.options}


def _licence(info: object) -> str | None:
    card = getattr(info, "card_data", None)
    licence = getattr(card, "license", None) if card is not None else None
    if isinstance(licence, str) and licence:
        return licence
    for tag in getattr(info, "tags", None) or []:
        if isinstance(tag, str) and tag.startswith("license:"):
            return tag.split(":", 1)[1]
    return None


def _hub_model(info: ModelInfo) -> HubModel:
    gguf = getattr(info, "gguf", None)
    total = gguf.get("total") if isinstance(gguf, dict) else None
    return HubModel(
        repo=info.id,
        downloads=getattr(info, "downloads", None),
        likes=getattr(info, "likes", None),
        last_modified=getattr(info, "last_modified", None),
        licence=_licence(info),
        gated=bool(getattr(info, "gated", False)),
        parameters=total if isinstance(total, int) else None,
        tags=tuple(getattr(info, "tags", None) or ()),
    )
