"""Grouping installed files into variants, and the hub's other quant files for a download."""

from __future__ import annotations

from pathlib import Path

import pytest
from huggingface_hub import constants

from inglenook.engine.core.engine import Engine
from inglenook.engine.lab.lab import QuantLab
from inglenook.engine.store.paths import Paths
from tests.hubmock import HubMock, MockFile, MockRepo

from .conftest import open_lab_engine

REPO = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"


def test_variants_of_one_model_are_grouped_most_precise_first(
    variant_files: dict[str, Path], gemma_path: Path, tmp_path: Path
) -> None:
    engine = open_lab_engine(tmp_path / "home", variant_files)
    try:
        engine.registry.register_file(gemma_path)
        lab = QuantLab.for_engine(engine)
        group = lab.variants("smollm2-135m-instruct:q4_0", with_hub=False)
        assert [v.quantization for v in group.variants] == ["Q8_0", "Q4_1", "Q4_0", "Q2_K"]
        assert group.reference.quantization == "Q8_0"
        assert "Q8_0" not in group.creatable() and "Q4_K_M" in group.creatable()
        names = sorted(len(g.variants) for g in lab.groups())
        assert names == [1, 4]  # gemma stands alone
    finally:
        engine.close()


def test_a_downloaded_model_lists_the_other_files_of_its_repo(
    variant_files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    smol = MockFile("SmolLM2-135M-Instruct.Q4_1.gguf", variant_files["Q4_1"])
    q8 = MockFile("SmolLM2-135M-Instruct.Q8_0.gguf", variant_files["Q8_0"])
    with HubMock() as mock:
        mock.add(MockRepo(REPO, [smol, q8], gguf={"total": 134515008, "architecture": "llama"}))
        monkeypatch.setenv("HF_ENDPOINT", mock.endpoint)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(constants, "ENDPOINT", mock.endpoint)
        paths = Paths.under(tmp_path / "home").ensure()
        placed = paths.models / Path(*REPO.split("/")) / smol.path
        placed.parent.mkdir(parents=True)
        placed.symlink_to(variant_files["Q4_1"])
        with Engine(paths, scan=False) as engine:
            record = engine.registry.register_file(placed, source="download")
            group = QuantLab.for_engine(engine).variants(record.id)
    assert group.hub_files == ["Q8_0: SmolLM2-135M-Instruct.Q8_0.gguf"]
    assert REPO in group.hub_note


def test_a_file_not_from_the_hub_says_why_there_is_no_listing(variant_files: dict[str, Path], tmp_path: Path) -> None:
    engine = open_lab_engine(tmp_path / "home", variant_files)
    try:
        group = QuantLab.for_engine(engine).variants("smollm2-135m-instruct:q4_1")
    finally:
        engine.close()
    assert group.hub_files == [] and "not downloaded" in group.hub_note


def test_a_finer_file_made_from_a_coarser_one_is_said_to_gain_nothing(tmp_path: Path) -> None:
    from inglenook.engine import ModelRecord
    from inglenook.engine.lab.variants import Variant, VariantGroup

    record = ModelRecord(id="m:q4_k_m", path=tmp_path / "m.gguf", name="m", architecture="llama",
                         quantization="Q4_K_M", parameter_count=1, context_length=None, size_bytes=1,
                         fingerprint="f", source="import")
    group = VariantGroup(("m",), "m", [Variant(record, 4.85)])
    assert "Q8_0" in group.creatable()  # still offered, as a reference copy
    assert group.gains_nothing("Q8_0") and group.gains_nothing("q4_k_m")
    assert not group.gains_nothing("Q2_K") and not group.gains_nothing("Q4_0")
