from __future__ import annotations

import struct
from pathlib import Path

import pytest

from inglenook.engine.base.errors import ModelLoadError, ModelNotFound
from inglenook.engine.base.gguf import read_gguf
from inglenook.engine.models.registry import ModelRegistry, model_id_for
from inglenook.engine.store.paths import Paths
from inglenook.engine.store.store import Store
from tests.gguf_writer import write_gguf


def test_reads_metadata_without_weights(tmp_path: Path) -> None:
    path = write_gguf(
        tmp_path / "tiny.gguf",
        metadata={"tokenizer.chat_template": "{{ messages }}", "tokenizer.ggml.tokens": ["<s>", "</s>", "a"],
                  "tokenizer.ggml.bos_token_id": 0, "tokenizer.ggml.eos_token_id": 1},
    )
    info = read_gguf(path)
    assert info.architecture == "llama"
    assert info.parameter_count == 64
    assert info.quantization == "F32"
    assert info.context_length == 256
    assert info.chat_template == "{{ messages }}"
    assert info.special_tokens == {"bos": (0, "<s>"), "eos": (1, "</s>")}
    assert info.vocab_size == 3


@pytest.mark.parametrize("block", [9, 23, 64, 1 << 18])
def test_long_vocabularies_are_walked_in_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    """The block walk over a vocabulary and its merges finds the same special tokens whatever
    the block size: strings cut by a block's end, longer than a block, or empty."""
    monkeypatch.setattr("inglenook.engine.base.gguf._WALK_BLOCK", block)
    tokens = [f"t{i}" * (i % 7) for i in range(600)]  # over 512 items: skipped, not kept
    tokens[3], tokens[555], tokens[599] = "<s>", "x" * 100, "</s>"
    merges = [f"m {i}" for i in range(700)]
    path = write_gguf(tmp_path / "vocab.gguf", metadata={
        "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.bos_token_id": 3, "tokenizer.ggml.eos_token_id": 599,
        "tokenizer.ggml.padding_token_id": 555, "tokenizer.chat_template": "after the arrays",
    })
    info = read_gguf(path)
    assert info.special_tokens == {"bos": (3, "<s>"), "eos": (599, "</s>"), "padding": (555, "x" * 100)}
    assert info.vocab_size == 600
    assert info.chat_template == "after the arrays"
    # Cut inside the merges, the walk reports the truncation as the string-by-string one did.
    data = path.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: data.index(b"m 650")])
    with pytest.raises(ModelLoadError, match="truncated"):
        read_gguf(cut)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"magic": b"GGML"}, "bad magic"),
        ({"version": 1}, "GGUF version 1"),
        ({"version": 99}, "GGUF version 99"),
        ({"truncate_to": 200}, "truncated"),
    ],
)
def test_malformed_headers_are_model_load_errors(tmp_path: Path, kwargs: dict, message: str) -> None:
    path = write_gguf(tmp_path / "bad.gguf", **kwargs)
    with pytest.raises(ModelLoadError, match=message):
        read_gguf(path)


def test_truncated_tensor_data_is_detected(tmp_path: Path) -> None:
    full = write_gguf(tmp_path / "full.gguf", tensors=[("w", (64, 64))])
    size = full.stat().st_size
    cut = write_gguf(tmp_path / "cut.gguf", tensors=[("w", (64, 64))], truncate_to=size - 100)
    read_gguf(full)
    with pytest.raises(ModelLoadError, match="truncated"):
        read_gguf(cut)


def test_absurd_counts_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "absurd.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 2**40, 2**40) + b"\0" * 64)
    with pytest.raises(ModelLoadError, match="absurd counts"):
        read_gguf(path)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 2**50) + b"x" * 64)
    with pytest.raises(ModelLoadError):
        read_gguf(path)


def test_not_a_gguf_and_missing_files(tmp_path: Path) -> None:
    text = tmp_path / "notes.gguf"
    text.write_text("hello, I am a text file pretending to be a model")
    with pytest.raises(ModelLoadError, match="not a GGUF file"):
        read_gguf(text)
    with pytest.raises(ModelLoadError, match="not found"):
        read_gguf(tmp_path / "nowhere.gguf")


def test_model_ids_are_stable_and_readable(tmp_path: Path) -> None:
    info = read_gguf(write_gguf(tmp_path / "x.gguf", metadata={"general.file_type": 3}))
    assert model_id_for(Path("SmolLM2-135M-Instruct.Q4_1.gguf"), info) == "smollm2-135m-instruct:q4_1"
    assert model_id_for(Path("gemma-3-270m-q4_1.gguf"), info) == "gemma-3-270m:q4_1"
    assert model_id_for(Path("Big-Model-Q4_1-00001-of-00003.gguf"), info) == "big-model:q4_1"


def _registry(home: Path) -> ModelRegistry:
    paths = Paths.under(home).ensure()
    return ModelRegistry(Store(paths.database), paths)


def test_registry_scans_registers_and_resolves(home: Path, tmp_path: Path) -> None:
    registry = _registry(home)
    models = registry.paths.models
    write_gguf(models / "alpha-Q4_0.gguf", metadata={"general.file_type": 2})
    write_gguf(models / "alpha-Q8_0.gguf", metadata={"general.file_type": 7})
    write_gguf(models / "beta.Q4_1.gguf", metadata={"general.file_type": 3})
    (models / "broken.gguf").write_text("not a model")
    write_gguf(models / ".partial" / "half.gguf")
    ids = {m.id for m in registry.refresh()} - {"smollm2-135m-instruct:q4_1"}
    assert ids == {"alpha:q4_0", "alpha:q8_0", "beta:q4_1"}
    assert registry.resolve("beta").id == "beta:q4_1"
    assert registry.resolve("ALPHA:Q8_0").id == "alpha:q8_0"
    with pytest.raises(ModelNotFound, match="several"):
        registry.resolve("alpha")
    with pytest.raises(ModelNotFound):
        registry.resolve("gpt-4o")
    outside = write_gguf(tmp_path / "elsewhere" / "gamma-F32.gguf")
    imported = registry.resolve(str(outside))
    assert imported.id == "gamma:f32" and imported.source == "import" and imported.path == outside
    assert len(imported.fingerprint) == 32


def test_fingerprint_changes_with_content(home: Path) -> None:
    registry = _registry(home)
    path = write_gguf(registry.paths.models / "m-F32.gguf")
    first = registry.register_file(path).fingerprint
    write_gguf(path, metadata={"general.name": "changed"})
    assert registry.register_file(path).fingerprint != first


def test_remove_deletes_owned_files_but_keeps_imported_ones(home: Path, tmp_path: Path) -> None:
    registry = _registry(home)
    owned = write_gguf(registry.paths.models / "own-F32.gguf")
    imported = write_gguf(tmp_path / "theirs-F32.gguf", metadata={"general.name": "Theirs"})  # other content
    registry.refresh()
    registry.register_file(imported)
    registry.remove("own:f32")
    registry.remove("theirs:f32")
    assert not owned.exists() and imported.exists()
    remaining = {m.id for m in registry.list()}
    assert "own:f32" not in remaining and "theirs:f32" not in remaining


def test_vanished_files_leave_the_registry(home: Path) -> None:
    registry = _registry(home)
    path = write_gguf(registry.paths.models / "gone-F32.gguf")
    registry.refresh()
    path.unlink()
    assert "gone:f32" not in {m.id for m in registry.refresh()}


def test_a_unique_name_prefix_resolves(home: Path) -> None:
    registry = _registry(home)
    write_gguf(registry.paths.models / "delta-7b-instruct-Q4_1.gguf", metadata={"general.file_type": 3})
    registry.refresh()
    assert registry.resolve("delta").id == "delta-7b-instruct:q4_1"
    assert registry.resolve("delta-7b").id == "delta-7b-instruct:q4_1"
    with pytest.raises(ModelNotFound):
        registry.resolve("delt")


def test_a_removed_starter_model_stays_removed(home: Path) -> None:
    registry = _registry(home)
    starter = [m for m in registry.refresh() if m.source == "starter"]
    assert starter, "the starter model package is installed by `make test`"
    registry.remove(starter[0].id)
    assert starter[0].path.exists()  # never deletes the package's file
    assert starter[0].id not in {m.id for m in registry.refresh()}
