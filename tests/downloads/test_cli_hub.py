"""`inglenook pull`, `search`, `files` against the local hub, including Ctrl-C and resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from inglenook.cli import main
from inglenook.cli.hub import parse_spec
from inglenook.engine.runtime.fit import detect_machine
from inglenook.engine.store.paths import Paths
from tests.downloads.conftest import GATED_REPO, GEMMA_REPO, SMOL_REPO
from tests.hubmock import HubMock

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_parse_spec() -> None:
    assert parse_spec("owner/name:Q5_K_M") == ("owner/name", "Q5_K_M")
    assert parse_spec("hf.co/owner/name") == ("owner/name", None)
    assert parse_spec("https://huggingface.co/owner/name:IQ4_XS") == ("owner/name", "IQ4_XS")


def test_search_lists_repos_sorted(hub: HubMock, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "", "--sort", "likes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["REPO", "DOWNLOADS", "LIKES", "UPDATED", "LICENCE"]
    assert lines[1].split()[:5] == [GEMMA_REPO, "900", "120", "2025-08-14", "gemma"]
    assert lines[2].startswith(SMOL_REPO)
    assert any(line.startswith(f"{GATED_REPO} (gated)") for line in lines)


def test_files_shows_quant_size_bits_and_fit(hub: HubMock, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["files", SMOL_REPO, "--context", "2048"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["QUANT", "FILE", "SIZE", "BITS/WEIGHT", "FIT", "AT", "2048", "TOKENS"]
    row = out[1].split()
    assert row[:4] == ["Q4_1", "SmolLM2-135M-Instruct.Q4_1.gguf", "98.4", "MB"]
    assert row[4] == f"{98362432 * 8 / 134515008:.2f}"
    # 98 MB fits any GPU whole, and this machine's RAM when there is none.
    assert " ".join(row[5:]) == ("fits on GPU" if detect_machine().has_gpu else "CPU only")


def test_pull_then_list(hub: HubMock, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pull", f"{SMOL_REPO}:Q4_1"]) == 0
    captured = capsys.readouterr()
    assert "ready: smollm2-135m-instruct" in captured.out
    assert "100.0%" in captured.err and "verifying sha256" in captured.err
    assert main(["list"]) == 0
    assert "download" in capsys.readouterr().out


def test_pull_errors_are_one_line(hub: HubMock, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pull", f"{SMOL_REPO}:Q8_0"]) == 1
    assert capsys.readouterr().err.strip() == (
        f"inglenook: error: {SMOL_REPO} has no Q8_0 file; available: Q4_1"
    )


def test_ctrl_c_stops_a_pull_and_the_next_pull_resumes(hub: HubMock, home: Path) -> None:
    hub.blob_delay_s = 0.1  # about 10 MB/s, so the interrupt lands mid-file
    env = {**os.environ, "INGLENOOK_HOME": str(home), "HF_ENDPOINT": hub.endpoint,
           "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1", "PYTHONPATH": str(REPO_ROOT)}
    env.pop("HF_HUB_OFFLINE", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "inglenook", "pull", SMOL_REPO], env=env, cwd=REPO_ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # Shells start background jobs with SIGINT ignored; a person's Ctrl-C is not.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )
    staging = Paths.under(home).downloads
    deadline = time.monotonic() + 60
    while not any(p.stat().st_size > 0 for p in staging.glob("*.part")):
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    _out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "run the same command again to resume" in err
    kept = next(staging.glob("*.part")).stat().st_size
    assert 0 < kept < 98362432

    hub.blob_delay_s = 0.0
    assert main(["pull", SMOL_REPO]) == 0
    assert hub.blob_gets()[-1].range == f"bytes={kept}-"
    assert list(staging.glob("*.part")) == []
