"""Importing GGUFs already on disk: picked files and folders, the HF cache, LM Studio, Ollama."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inglenook.cli import main
from inglenook.engine.models import importers
from inglenook.engine.models.registry import ModelRegistry
from inglenook.engine.store.paths import Paths
from tests.gguf_writer import write_gguf

OLLAMA_HEX = "ab" * 32


def tiny(path: Path, name: str = "Tiny") -> Path:
    return write_gguf(path, metadata={"general.name": name, "general.file_type": 15})


def make_hf_cache(root: Path, model: Path) -> Path:
    repo = root / "models--someone--Tiny-GGUF"
    blob = repo / "blobs" / ("c" * 64)
    blob.parent.mkdir(parents=True)
    blob.symlink_to(model)
    for commit in ("1" * 40, "2" * 40):  # two snapshots of the same blob
        snapshot = repo / "snapshots" / commit
        snapshot.mkdir(parents=True)
        (snapshot / "tiny-Q4_K_M.gguf").symlink_to(Path("../../blobs") / ("c" * 64))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("2" * 40)
    return root


def make_ollama(root: Path, model: Path) -> Path:
    blobs = root / "blobs"
    blobs.mkdir(parents=True)
    (blobs / f"sha256-{OLLAMA_HEX}").symlink_to(model)
    manifests = root / "manifests" / "registry.ollama.ai"
    good = manifests / "library" / "smollm2" / "135m"
    good.parent.mkdir(parents=True)
    good.write_text(json.dumps({"schemaVersion": 2, "layers": [
        {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "d" * 64, "size": 10},
        {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{OLLAMA_HEX}", "size": 1},
    ]}))
    hostile = manifests / "library" / "evil" / "latest"
    hostile.parent.mkdir(parents=True)
    hostile.write_text(json.dumps({"layers": [
        {"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:../../../../etc/passwd"}]}))
    missing = manifests / "library" / "gone" / "latest"
    missing.parent.mkdir(parents=True)
    missing.write_text(json.dumps({"layers": [
        {"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:" + "e" * 64}]}))
    (manifests / "library" / "broken").mkdir()
    (manifests / "library" / "broken" / "latest").write_text("{not json")
    return root


def test_import_a_picked_file_in_place(paths: Paths, registry: ModelRegistry, smollm2_path: Path) -> None:
    result = importers.import_path(registry, smollm2_path)
    assert [r.path for r in result.imported] == [smollm2_path]
    assert result.imported[0].source == "import"
    assert list(paths.models.rglob("*.gguf")) == []  # nothing copied
    again = importers.import_path(registry, smollm2_path)
    assert again.imported == [] and [r.id for r in again.already] == [result.imported[0].id]


def test_import_a_folder_skips_what_is_not_gguf(registry: ModelRegistry, tmp_path: Path) -> None:
    folder = tmp_path / "picked"
    tiny(folder / "a" / "alpha-Q4_K_M.gguf")
    tiny(folder / "beta-Q4_K_M.gguf", name="Beta")  # other content: one content is one record
    (folder / "mmproj-beta-f16.gguf").write_bytes(b"GGUF")  # a vision projector: not a model
    (folder / "broken-Q4_0.gguf").write_bytes(b"<html>not a model</html>" * 10)
    result = importers.import_path(registry, folder)
    assert sorted(r.id for r in result.imported) == ["alpha:q4_k_m", "beta:q4_k_m"]
    assert [p.name for p, _ in result.skipped] == ["broken-Q4_0.gguf"]
    assert "not a GGUF file" in result.skipped[0][1]


def test_scan_finds_hf_cache_lmstudio_and_ollama(registry: ModelRegistry, tmp_path: Path, smollm2_path: Path) -> None:
    hf = make_hf_cache(tmp_path / "hf", tiny(tmp_path / "store" / "tiny.bin"))
    lmstudio = tmp_path / "lmstudio"
    tiny(lmstudio / "publisher" / "Repo-GGUF" / "studio-model-Q4_K_M.gguf", name="Studio")  # other content
    tiny(lmstudio / "publisher" / "Repo-GGUF" / "studio-model-Q4_K_M-00002-of-00002.gguf")
    ollama = make_ollama(tmp_path / "ollama", smollm2_path)

    found = importers.find_known_places(hf, [lmstudio, tmp_path / "absent"], ollama)
    assert [(f.origin, f.path.name) for f in found] == [
        (importers.HF_CACHE, "tiny-Q4_K_M.gguf"),
        (importers.LM_STUDIO, "studio-model-Q4_K_M.gguf"),
        (importers.OLLAMA, f"sha256-{OLLAMA_HEX}"),
    ]
    assert found[0].path.parent.name == "2" * 40  # the snapshot refs/main points to

    result = importers.scan_known_places(registry, hf, [lmstudio], ollama)
    ids = sorted(r.id for r in result.imported)
    assert ids == ["smollm2-135m:q4_1", "studio-model:q4_k_m", "tiny:q4_k_m"]
    assert all(r.source == "import" for r in result.imported)
    ollama_record = registry.resolve("smollm2-135m:q4_1")
    assert ollama_record.path == ollama / "blobs" / f"sha256-{OLLAMA_HEX}"
    assert ollama_record.name == "smollm2-135m"
    # Scanning again adds nothing.
    again = importers.scan_known_places(registry, hf, [lmstudio], ollama)
    assert again.imported == [] and len(again.already) == 3


def test_missing_places_find_nothing(tmp_path: Path) -> None:
    assert importers.find_known_places(tmp_path / "a", [tmp_path / "b"], tmp_path / "c") == []


def test_cli_import_path_and_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str], smollm2_path: Path) -> None:
    fake_home = tmp_path / "user"
    monkeypatch.setenv("HOME", str(fake_home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("OLLAMA_MODELS", raising=False)
    make_hf_cache(fake_home / ".cache" / "huggingface" / "hub", tiny(tmp_path / "store" / "tiny.bin"))
    tiny(fake_home / ".lmstudio" / "models" / "pub" / "R" / "studio-Q8_0.gguf", name="Studio")  # other contents
    make_ollama(fake_home / ".ollama" / "models", smollm2_path)
    picked = tiny(tmp_path / "picked" / "mine-Q4_K_M.gguf", name="Mine")

    assert main(["import", str(picked)]) == 0
    assert "imported mine:q4_k_m" in capsys.readouterr().out
    assert main(["import", "--scan"]) == 0
    out = capsys.readouterr().out
    for model_id in ("tiny:q4_k_m", "studio:q4_k_m"):
        assert f"imported {model_id}" in out
    # The Ollama blob is the very file of the starter model, which the engine registered already.
    assert "already there: smollm2-135m-instruct:q4_1" in out
    assert main(["import", str(tmp_path / "nowhere.gguf")]) == 1
    assert main(["import"]) == 1
