"""The Models page screenshot (docs/models.png): a search, a repo's quant table, a download running.

The hub is tests/hubmock.py on loopback (no internet needed), driven through the app's real
code path. The selected repo serves real files: gemma-3-270m Q4_K_M (the test model) and
other quantizations made from it here with llama.cpp's quantizer, so sizes, bits per weight
and fit badges are computed, not typed in. The other search results only fill the list;
their download and like counts are illustrative.

Used by scripts/screenshots.py; on its own: ``.venv/bin/python scripts/models_shot.py [--out docs]``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PySide6.QtWidgets import QApplication

    from inglenook.app.window import MainWindow
    from tests.hubmock import HubMock

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # tests.hubmock

SHOWN_REPO = "unsloth/gemma-3-270m-it-GGUF"
REQUANTS = ("Q3_K_M", "Q5_K_M", "Q6_K", "Q8_0")
LIST_ONLY = [  # (repo, downloads, likes, updated, licence): search results only
    ("Qwen/Qwen2.5-0.5B-Instruct-GGUF", 182_000, 160, "2024-09-20T10:00:00.000Z", "apache-2.0"),
    ("bartowski/Llama-3.2-1B-Instruct-GGUF", 96_400, 121, "2024-10-02T10:00:00.000Z", "llama3.2"),
    ("TheBloke/TinyLlama-1.1B-Chat-v1.0-GGUF", 61_900, 157, "2023-12-31T10:00:00.000Z", "apache-2.0"),
    ("unsloth/Qwen3-0.6B-GGUF", 48_300, 74, "2025-05-02T10:00:00.000Z", "apache-2.0"),
    ("microsoft/Phi-3-mini-4k-instruct-gguf", 41_700, 505, "2024-07-02T10:00:00.000Z", "mit"),
]


def requantize(source: Path, folder: Path) -> list[tuple[str, Path]]:
    """Other quantizations of ``source``, made with llama.cpp (a few seconds each)."""
    import llama_cpp

    made = [("Q4_K_M", source)]
    for quant in REQUANTS:
        target = folder / f"gemma-3-270m-it-{quant}.gguf"
        if not target.is_file():
            params = llama_cpp.llama_model_quantize_default_params()
            params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{quant}")
            params.allow_requantize = True
            params.nthread = 2
            if llama_cpp.llama_model_quantize(str(source).encode(), str(target).encode(), params) != 0:
                raise RuntimeError(f"llama.cpp could not make {quant}")
        made.append((quant, target))
    return made


def start_hub(gemma: Path, smol: Path | None, work: Path) -> HubMock:
    from huggingface_hub import constants

    from tests.hubmock import HubMock, MockFile, MockRepo

    hub = HubMock().__enter__()
    files = [MockFile(f"gemma-3-270m-it-{quant}.gguf", path) for quant, path in requantize(gemma, work)]
    hub.add(MockRepo(SHOWN_REPO, files, downloads=73_200, likes=118, licence="gemma",
                     last_modified="2025-08-14T09:30:00.000Z",
                     gguf={"total": 268_098_176, "architecture": "gemma3", "context_length": 32_768}))
    if smol is not None:
        hub.add(MockRepo("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", [MockFile("SmolLM2-135M-Instruct.Q4_1.gguf", smol)],
                         downloads=22_800, likes=43, licence="apache-2.0", last_modified="2025-03-01T12:00:00.000Z",
                         gguf={"total": 134_515_008, "architecture": "llama", "context_length": 8192}))
    for repo, downloads, likes, updated, licence in LIST_ONLY:
        hub.add(MockRepo(repo, [], downloads=downloads, likes=likes, last_modified=updated, licence=licence,
                         listing_only=[{"rfilename": "model-Q4_K_M.gguf", "size": 1}]))
    os.environ["HF_ENDPOINT"] = hub.endpoint
    os.environ.pop("HF_TOKEN", None)
    constants.ENDPOINT = hub.endpoint
    constants.HF_HUB_OFFLINE = False
    constants.HF_HUB_DISABLE_IMPLICIT_TOKEN = True
    constants.HUGGINGFACE_CO_URL_TEMPLATE = hub.endpoint + "/{repo_id}/resolve/{revision}/{filename}"
    return hub


def shoot_models(app: QApplication, window: MainWindow, out: Path, wait: Callable[..., None],
                 settle: Callable[..., None]) -> Path:
    """Search, open the shown repo, start a download, and grab the window mid-way."""
    gemma = Path.home() / ".cache" / "inglenook-test-models" / "gemma-3-270m-q4_k_m.gguf"
    from inglenook.engine import find_starter_model

    work = Path(tempfile.mkdtemp(prefix="inglenook-shot-hub-"))
    hub = start_hub(gemma, find_starter_model(), work)
    try:
        page = window.models_page
        page.confirm = False
        window.show_page("models")
        page.show_tab(page.DISCOVER)
        browser = page.browser
        browser.run_search()
        wait(app, lambda: browser.list.count() > 0)

        # An interrupted download first, so the list shows Resume and Discard too.
        hub.blob_delay_s = 0.02
        browser.select_repo("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF")
        wait(app, lambda: browser.panel.details is not None)
        browser.panel.table.buttons["SmolLM2-135M-Instruct.Q4_1.gguf"].click()
        _job, card = next(iter(page.downloads.jobs.values()))
        wait(app, lambda: card.bar.value() > 380)
        card.cancel_button.click()
        wait(app, lambda: not page.downloads.jobs and bool(page.downloads.pending_cards))

        browser.select_repo(SHOWN_REPO)
        wait(app, lambda: browser.panel.details is not None and browser.panel.details.listing.repo == SHOWN_REPO)
        hub.blob_delay_s = 0.12  # a steady, readable speed
        browser.panel.table.buttons["gemma-3-270m-it-Q5_K_M.gguf"].click()
        _job, card = next(iter(page.downloads.jobs.values()))
        wait(app, lambda: card.bar.value() > 520 and "left" in card.status.text())
        browser.list.setFocus()
        settle(app, 0.3)
        path = out / "models.png"
        window.grab().save(str(path))
        page.shutdown()
        wait(app, lambda: not page.downloads.jobs)
        return path
    finally:
        hub.__exit__(None, None, None)


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="docs")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from screenshots import settle, shoot_alone, wait

    def shoot(app, window) -> None:  # noqa: ANN001
        wait(app, lambda: bool(window.models))
        print(shoot_models(app, window, out, wait, settle))

    shoot_alone("inglenook-shots-", shoot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
