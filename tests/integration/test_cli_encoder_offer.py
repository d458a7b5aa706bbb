"""``inglenook docs add`` suggests the recommended embedding model while none is installed
(issue 30, item 4): one line with its ``inglenook pull`` command and size, from what the
engine knows (no network); gone once an encoder is imported."""

from __future__ import annotations

from pathlib import Path

from inglenook.engine import human_size
from inglenook.engine.models import encoder
from tests.encoder_writer import write_encoder

from .test_cli import inglenook


def test_docs_add_suggests_the_encoder_until_one_is_installed(home: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\nThe boiler is serviced every October.\n", encoding="utf-8")
    # HF_ENDPOINT at a closed port: a listing asked for here would fail the command or hang.
    offline = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "1"}
    added = inglenook("docs", "add", "house", str(notes), home=home, env_extra=offline)
    assert added.returncode == 0, added.stderr
    assert added.stdout.split() == ["added", str(notes)]  # stdout stays the list of files
    suggestion = [line for line in added.stderr.splitlines() if "inglenook pull" in line]
    assert len(suggestion) == 1, added.stderr
    assert f"`inglenook pull {encoder.REPO}`" in suggestion[0]
    assert f"({human_size(encoder.KNOWN_SIZE)})" in suggestion[0]

    imported = inglenook("import", str(write_encoder(tmp_path / "mine-F32.gguf")), home=home)
    assert imported.returncode == 0, imported.stderr
    again = inglenook("docs", "add", "house", str(notes), home=home, env_extra=offline)
    assert again.returncode == 0 and "inglenook pull" not in again.stderr, again.stderr
