"""Headers read once per model version, and never a stale or failed one."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from inglenook.engine.base.errors import ModelLoadError
from inglenook.engine.base.model_record import ModelRecord
from inglenook.engine.runtime.gguf_headers import checked_header, header_of

from tests.gguf_writer import write_gguf


def record_at(path: Path, fingerprint: str) -> ModelRecord:
    return ModelRecord("m:q4_0", path, "m", "llama", "Q4_0", 1, 256, path.stat().st_size if path.exists() else 1,
                       fingerprint, "scan")


def test_one_parse_per_version(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf", metadata={"general.name": "first"})
    record = record_at(path, "fp-first")
    assert header_of(record) is header_of(record)
    # The file changes; the registry gives it a new fingerprint, and the header is read again.
    write_gguf(path, metadata={"general.name": "second"})
    changed = dataclasses.replace(record, fingerprint="fp-second")
    assert header_of(changed) is not header_of(record)
    assert header_of(changed).metadata["general.name"] == "second"


def test_a_failed_read_is_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "late.gguf"
    record = record_at(path, "fp-late")
    with pytest.raises(ModelLoadError):
        header_of(record)
    write_gguf(path, metadata={"general.name": "arrived"})
    assert header_of(record).metadata["general.name"] == "arrived"


def test_a_load_reuses_the_header_only_while_the_file_is_unchanged(tmp_path: Path) -> None:
    """``checked_header`` (a load's validation) takes the header parsed moments before when the
    file is the same one, untouched since; a file rewritten in place is parsed again."""
    path = write_gguf(tmp_path / "m.gguf", metadata={"general.name": "first"})
    record = record_at(path, "fp-same")
    estimated = header_of(record)
    assert checked_header(record) is estimated
    write_gguf(path, metadata={"general.name": "rewritten, same fingerprint until the next scan"})
    os.utime(path, ns=(1, 1))  # whatever the clock's resolution, the modification time differs
    fresh = checked_header(record)
    assert fresh is not estimated
    assert fresh.metadata["general.name"].startswith("rewritten")
    assert checked_header(record) is fresh
    path.unlink()
    with pytest.raises(ModelLoadError):
        checked_header(record)
