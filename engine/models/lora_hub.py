"""LoRA adapters from a Hugging Face repo: find the GGUF adapters in it, download, import.

A repo is listed as for models (``HubClient.list_files``); each GGUF's header is read with a
Range request, and only files whose header says ``general.type = "adapter"`` are fetched, so a
repo that mixes a model and its adapters costs no model download. Files go through
huggingface-hub's own download (resumable, checked against the hub's ETag/sha256) into
``<data>/adapters/<owner>/<repo>/``, then into the adapter registry (``source="download"``).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from huggingface_hub import hf_hub_download

from ..base import AdapterError, DownloadError, JobCancelled, ModelLoadError
from .hub import HubClient, RemoteFile, check_repo_id, is_safe_remote_path
from .lora_registry import AdapterImport, AdapterRegistry

log = logging.getLogger(__name__)


def adapter_files(client: HubClient, repo: str, revision: str | None = None) -> tuple[list[RemoteFile], str | None]:
    """The repo's GGUF adapters (by their headers) and the commit listed."""
    listing = client.list_files(repo, revision)
    found = []
    for option in listing.options:
        remote = option.files[0]
        if option.is_split or not is_safe_remote_path(remote.path):
            continue  # adapters are small single files
        try:
            header = client.read_header(repo, remote, listing.commit)
        except ModelLoadError as exc:
            log.info("%s/%s is not a readable GGUF: %s", repo, remote.path, exc)
            continue
        if header.metadata.get("general.type") == "adapter":
            found.append(remote)
    return found, listing.commit


def pull_adapters(adapters: AdapterRegistry, client: HubClient, repo: str, folder: Path,
                  revision: str | None = None, cancel: threading.Event | None = None) -> AdapterImport:
    """Download every GGUF adapter of ``repo`` into ``folder/<owner>/<repo>`` and import it.
    ``DownloadError`` when the repo holds none (or the hub fails); a file that is not a LoRA
    (a control vector, say) is in ``skipped`` with the reason."""
    repo = check_repo_id(repo)
    files, commit = adapter_files(client, repo, revision)
    if not files:
        raise DownloadError(f"{repo} holds no GGUF LoRA adapters (no GGUF file there has general.type 'adapter')")
    target = folder / repo.replace("/", "--")
    result = AdapterImport()
    for remote in files:
        if cancel is not None and cancel.is_set():
            raise JobCancelled("the adapter download was cancelled")
        with client.errors(repo):
            local = hf_hub_download(repo, remote.path, revision=commit, local_dir=target,
                                    token=client.token, endpoint=client.endpoint)
        try:
            record = adapters.register_file(Path(local), source="download")
        except AdapterError as exc:
            result.skipped.append((Path(local), str(exc)))
            continue
        result.imported.append(record)
    return result
