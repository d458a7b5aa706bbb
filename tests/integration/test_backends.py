"""The portable llama.cpp build on the machine at hand: variant chosen, what it reports, and
that a lower variant (what an older CPU would get) runs the same model."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from inglenook.engine.runtime.backends import UNSAFE_VARIANTS
from inglenook.engine.runtime.model_loading import (FA_DECODE_GROUPED_HEADS, FA_K_ROWS_AS_STORED,
                                                     FA_TILES_FROM_32_ROWS, KV_CELLS_BY_POSITION,
                                                     STATE_SEQ_WINDOW_AT)
from inglenook.engine.runtime.native import backend_report, build_patches, llama_cpp_version
from tests.integration.test_cli import STARTER, inglenook


def test_the_build_is_portable_and_picks_the_best_safe_variant() -> None:
    report = backend_report()
    assert report.dispatch, "llama.cpp was not built by scripts/llama_build.py"
    names = {v.name for v in report.cpu_variants}
    assert "haswell" in names  # the AVX2 floor is always there
    assert not names & UNSAFE_VARIANTS  # no AMX module is even shipped
    runnable = [v for v in report.cpu_variants if v.runs_here]
    forced = os.environ.get("INGLENOOK_CPU_VARIANT")  # `make test-portable` forces the AVX2 floor
    assert report.cpu_variant == (forced or max(runnable, key=lambda v: v.score).name)
    assert report.cpu_features.get("AVX2") == "1"
    assert "CPU" in report.backends
    build = report.build
    assert "-DGGML_NATIVE=OFF" in build["cmake_args"] and "-DGGML_BACKEND_DL=ON" in build["cmake_args"]
    version, commit = llama_cpp_version()
    assert version.startswith("0.3.36+inglenook") and len(commit) == 40
    # The recipe's source patches are named in the build, so the engine knows what it runs.
    assert set(build["patches"]) == set(build_patches()) == {FA_TILES_FROM_32_ROWS, FA_K_ROWS_AS_STORED,
                                                             FA_DECODE_GROUPED_HEADS, KV_CELLS_BY_POSITION,
                                                             STATE_SEQ_WINDOW_AT}


@pytest.mark.parametrize("variant", ["haswell"])
def test_a_lower_cpu_variant_runs_the_same_model(home: Path, variant: str) -> None:
    """The AVX2-only module, as a Haswell-class machine would load it, answers too."""
    result = inglenook("run", STARTER, "What is the capital of France?", "--temperature", "0",
                       "--max-tokens", "12", home=home, env_extra={"INGLENOOK_CPU_VARIANT": variant})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    doctor = inglenook("doctor", "--json", "--no-self-test", home=home, env_extra={"INGLENOOK_CPU_VARIANT": variant})
    assert json.loads(doctor.stdout)["CPU"]["variant chosen"] == variant


def test_doctor_reports_versions_variant_and_a_self_test(home: Path) -> None:
    result = inglenook("doctor", "--json", home=home)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["Versions"]["llama.cpp commit"] == llama_cpp_version()[1]
    assert report["CPU"]["variant chosen"] == backend_report().cpu_variant
    assert "AVX2" in report["CPU"]["features used"]
    assert report["Backends"]["loaded"].startswith("CPU")
    test = report["self_test"]
    assert test["model_id"] == STARTER and not test["error"]
    assert test["tokens"] > 5 and test["tokens_per_s"] > 0
    text = inglenook("doctor", "--no-self-test", home=home).stdout
    assert "variant chosen:" in text and "llama.cpp commit:" in text


def test_once_the_engine_runs_numpy_no_longer_asks_for_huge_pages() -> None:
    """Window checkpoints and saved states are multi-MiB numpy copies on the token path; with
    numpy's huge-page advice a fault in one could wait tens of ms for the kernel."""
    import numpy as np

    from inglenook.engine.runtime.native import llama

    llama()
    core = getattr(np, "_core", None) or np.core  # numpy 2, numpy 1
    previous = core.multiarray._set_madvise_hugepage(False)  # returns the setting it replaces
    assert previous is False
