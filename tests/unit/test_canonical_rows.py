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

from inglenook.engine.runtime.model_loading import (FA_TILES_FROM_32_ROWS, PATCHED_TILE_ROWS, LoadOptions,
                                                     canonical_rows)
from inglenook.engine.runtime.slots import FA_TILE_ROWS

ROOT = Path(__file__).resolve().parents[2]
PATCHED = frozenset({FA_TILES_FROM_32_ROWS})


def test_upstream_flash_attention_needs_a_whole_tile() -> None:
    assert canonical_rows(LoadOptions(), "f16", True) == FA_TILE_ROWS
    assert canonical_rows(LoadOptions(), "f16", False) == 2  # without flash attention only decode differs
    assert canonical_rows(LoadOptions(), "q8_0", True) == 2  # a quantized cache never tiles


def test_the_patch_halves_the_rule_on_the_cpu_for_full_attention_caches() -> None:
    # The patched kernel tiles from 32 rows, and a tile's rows do not change each other's
    # results: 32 rows suffice on the CPU.
    assert PATCHED_TILE_ROWS == 32
    assert canonical_rows(LoadOptions(), "f16", True, patches=PATCHED) == PATCHED_TILE_ROWS
    # A window-sized cache restored at a 32- but not 64-aligned checkpoint puts its cells in
    # other KV tiles than a full prefill: 64 stays its rule. GPU kernels are not patched.
    assert canonical_rows(LoadOptions(), "f16", True, patches=PATCHED, window_cache=True) == FA_TILE_ROWS
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
    assert set(recipe.recipe(False)["patches"]) == {FA_TILES_FROM_32_ROWS}
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
    with pytest.raises(SystemExit, match="exactly once"):  # a second time: the texts are gone
        recipe.patch_source(source)
