"""How many rows a prompt chunk needs for its KV to be a full prefill's (``canonical_rows``),
with and without the recipe's flash-attention patch; and that the recipe's patch applies to
the pinned source exactly (scripts/llama_build.py)."""

from __future__ import annotations

import importlib.util
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

from inglenook.engine.base.gguf import GGUFInfo, TensorInfo
from inglenook.engine.runtime.model_loading import (FA_DECODE_GROUPED_HEADS, FA_K_ROWS_AS_STORED, FA_TILES_FROM_32_ROWS,
                                                     KV_CELLS_BY_POSITION, PATCHED_TILE_ROWS, STATE_SEQ_WINDOW_AT,
                                                     LoadOptions,
                                                     canonical_rows, prefill_alignment)
from inglenook.engine.runtime.slots import FA_TILE_ROWS, PREFILL_ALIGN

ROOT = Path(__file__).resolve().parents[2]
PATCHED = frozenset({FA_TILES_FROM_32_ROWS})


Q4_1, Q8_0, Q4_K, F32 = 3, 8, 12, 0


def weights(*tensors: tuple[str, int]) -> GGUFInfo:
    """A header with these 2-D weights (name, ggml type) and a 1-D norm."""
    infos = [TensorInfo(name, (576, 576), kind, 0) for name, kind in tensors]
    infos.append(TensorInfo("blk.0.attn_norm.weight", (576,), F32, 0))
    return GGUFInfo(path=Path("model.gguf"), version=3, file_size=0, metadata={}, tensors=infos, data_offset=0)


def test_weights_computed_row_by_row_let_a_restore_resume_anywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    # SmolLM2's file: Q4_1 matrices, its Q8_0 embeddings only looked up (and tied to the output).
    smollm2 = weights(("token_embd.weight", Q8_0), ("blk.0.attn_q.weight", Q4_1), ("blk.0.ffn_up.weight", Q4_1))
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    assert prefill_alignment(smollm2, offloads=False) == 1
    # Layers on a GPU, whose kernels tile rows: the safe rule.
    assert prefill_alignment(smollm2, offloads=True) == PREFILL_ALIGN
    # One matrix of a repacked type (gemma-3's Q4_K, rows in groups of 4) is enough to need it.
    mixed = weights(("blk.0.attn_q.weight", Q4_1), ("blk.0.ffn_down.weight", Q4_K))
    assert prefill_alignment(mixed, offloads=False) == PREFILL_ALIGN
    # A Q8_0 matrix that writes KV goes through llamafile's tiles or a repacked layout.
    assert prefill_alignment(weights(("blk.0.attn_k.weight", Q8_0)), offloads=False) == PREFILL_ALIGN
    # ARM's int8 matrix kernels take rows in pairs.
    monkeypatch.setattr("platform.machine", lambda: "aarch64")
    assert prefill_alignment(smollm2, offloads=False) == PREFILL_ALIGN


def test_upstream_flash_attention_needs_a_whole_tile() -> None:
    assert canonical_rows(LoadOptions(), "f16", True) == FA_TILE_ROWS
    assert canonical_rows(LoadOptions(), "f16", False) == 2  # without flash attention only decode differs
    assert canonical_rows(LoadOptions(), "q8_0", True) == 2  # a quantized cache never tiles


def test_the_patch_halves_the_rule_on_the_cpu_for_full_attention_caches() -> None:
    # The patched kernel tiles from 32 rows, and a tile's rows do not change each other's
    # results: 32 rows suffice on the CPU.
    assert PATCHED_TILE_ROWS == 32
    assert canonical_rows(LoadOptions(), "f16", True, patches=PATCHED) == PATCHED_TILE_ROWS
    # A window-sized cache keeps one tile unless its cells sit by position and its
    # checkpoints can be taken inside a chunk (else the prompt's end would be two small
    # chunks). GPU kernels are not patched.
    for patches in (PATCHED, PATCHED | {KV_CELLS_BY_POSITION}, PATCHED | {STATE_SEQ_WINDOW_AT}):
        assert canonical_rows(LoadOptions(), "f16", True, patches=patches, window_cache=True) == FA_TILE_ROWS
    window_ready = PATCHED | {KV_CELLS_BY_POSITION, STATE_SEQ_WINDOW_AT}
    assert canonical_rows(LoadOptions(), "f16", True, patches=window_ready, window_cache=True) == PATCHED_TILE_ROWS
    assert canonical_rows(LoadOptions(), "f16", True, patches=window_ready, window_cache=True,
                          offloads=True) == FA_TILE_ROWS
    assert canonical_rows(LoadOptions(), "f16", True, patches=PATCHED, offloads=True) == FA_TILE_ROWS
    assert canonical_rows(LoadOptions(), "q8_0", True, patches=PATCHED) == 2


def _recipe() -> ModuleType:
    spec = importlib.util.spec_from_file_location("llama_build", ROOT / "scripts" / "llama_build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["llama_build"] = module
    spec.loader.exec_module(module)
    return module


def test_the_recipe_names_its_patches_and_upstream_builds_without_them() -> None:
    recipe = _recipe()
    assert set(recipe.recipe(False)["patches"]) == {FA_TILES_FROM_32_ROWS, FA_K_ROWS_AS_STORED,
                                                    FA_DECODE_GROUPED_HEADS, KV_CELLS_BY_POSITION,
                                                    STATE_SEQ_WINDOW_AT}
    recipe.UPSTREAM["value"] = True
    try:
        assert recipe.recipe(False)["patches"] == {}
    finally:
        recipe.UPSTREAM["value"] = False


def test_the_patch_applies_to_the_pinned_source_exactly_once(tmp_path: Path) -> None:
    recipe = _recipe()
    sdist = recipe.cache_root() / "sdists" / recipe.SDIST_NAME
    if not sdist.exists():
        pytest.skip("the pinned sdist is not in the build cache (make setup downloads it)")
    edited = {relative for edits in recipe.SOURCE_PATCHES.values() for relative, _old, _new in edits}
    prefix = f"llama_cpp_python-{recipe.LLAMA_CPP_PYTHON_VERSION}/vendor/llama.cpp/"
    with tarfile.open(sdist) as archive:
        members = [archive.getmember(prefix + relative) for relative in sorted(edited)]
        archive.extractall(tmp_path, members=members, filter="data")
    source = tmp_path / f"llama_cpp_python-{recipe.LLAMA_CPP_PYTHON_VERSION}"
    recipe.patch_source(source)
    text = (source / "vendor" / "llama.cpp" / "ggml/src/ggml-cpu/ops.cpp").read_text()
    assert "neq1 >= 32);" in text and "simd_gemm(VKQ32, KQ, V32, tile_rows, KV_TILE_SZ, DV);" in text
    # The second patch: cache rows widened as stored, multiplying the transposed query tile,
    # and one more score block in the scratch that ggml-cpu.c sizes.
    assert "simd_gemm(KQT, K_f32, (const float *)Q_q, kv_tile, DK, tile_rows);" in text
    assert "K_f32[dk * KV_TILE_SZ + tk]" not in text
    scratch = (source / "vendor" / "llama.cpp" / "ggml/src/ggml-cpu/ggml-cpu.c").read_text()
    assert "3*GGML_FA_TILE_Q*GGML_FA_TILE_KV" in scratch
    with pytest.raises(SystemExit, match="exactly once"):  # a second time: the texts are gone
        recipe.patch_source(source)
