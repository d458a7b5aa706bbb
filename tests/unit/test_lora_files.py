"""The test adapters tests/lora_files.py writes are what the engine's reader calls a LoRA."""

from __future__ import annotations

from pathlib import Path

from inglenook.engine.base.gguf import read_gguf
from inglenook.engine.base.lora import adapter_header
from tests.lora_files import write_adapter


def test_written_adapter_reads_as_a_lora(tmp_path: Path) -> None:
    path = write_adapter(tmp_path / "tiny-lora.gguf", blocks=range(2), rank=4)
    header = adapter_header(read_gguf(path), path.name)
    assert header.architecture == "llama"
    assert header.rank == 4 and header.alpha == 16.0
    assert header.pairs["blk.1.attn_v.weight"] == ((576, 4), (4, 192))
