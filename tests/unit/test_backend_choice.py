"""Choosing llama.cpp's CPU variant: the best safe one, or a clear error naming what is missing."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from inglenook.engine.base.errors import ModelLoadError, UnsupportedCpu
from inglenook.engine.runtime import backends
from inglenook.engine.runtime.backends import CpuVariant, choose_cpu_variant, missing_cpu_features, variant_name
from inglenook.engine.runtime.model_loading import fewer_gpu_layers

HASWELL_FLAGS = {"sse4_2", "avx", "avx2", "fma", "f16c", "bmi2"}


def variants(**scores: int) -> list[CpuVariant]:
    return [CpuVariant(name, Path(f"libggml-cpu-{name}.so"), score) for name, score in scores.items()]


def test_the_best_scoring_variant_wins() -> None:
    chosen = choose_cpu_variant(variants(haswell=64, skylakex=192, zen4=0))
    assert chosen.name == "skylakex"


def test_an_amx_variant_is_never_chosen_even_when_it_scores_best() -> None:
    chosen = choose_cpu_variant(variants(haswell=64, zen4=1984, sapphirerapids=4000))
    assert chosen.name == "zen4"


def test_a_forced_variant_must_run_here() -> None:
    assert choose_cpu_variant(variants(haswell=64, zen4=1984), forced="haswell").name == "haswell"
    with pytest.raises(UnsupportedCpu, match="cannot run on this CPU"):
        choose_cpu_variant(variants(haswell=64, zen4=0), forced="zen4")


def test_a_cpu_without_avx2_gets_a_message_naming_what_it_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    old_core2 = {"sse4_1", "ssse3", "sse2"}
    with pytest.raises(UnsupportedCpu) as caught:
        choose_cpu_variant(variants(haswell=0, skylakex=0), cpu_flags=old_core2)
    message = str(caught.value)
    assert "AVX2" in message and "FMA" in message and "Haswell" in message
    # It is a load error, so every front end already shows it as one.
    assert isinstance(caught.value, ModelLoadError)


def test_missing_features_are_read_from_cpu_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    assert missing_cpu_features(HASWELL_FLAGS) == []
    assert missing_cpu_features(HASWELL_FLAGS - {"avx2"}) == ["AVX2"]
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    assert missing_cpu_features({"fp", "asimd"}) == []  # arm64 has no x86 floor


def test_variant_names_come_from_module_file_names() -> None:
    assert variant_name(Path("libggml-cpu-zen4.so")) == "zen4"
    assert variant_name(Path("ggml-cpu-haswell.dll")) == "haswell"


def test_no_variant_at_all_names_what_was_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends, "read_cpu_flags", lambda: set())
    with pytest.raises(UnsupportedCpu, match="tried: haswell"):
        choose_cpu_variant(variants(haswell=0))


def test_a_load_that_does_not_fit_retries_with_fewer_gpu_layers() -> None:
    steps = [33]
    while steps[-1] > 0:
        steps.append(fewer_gpu_layers(steps[-1]))
    assert steps == [33, 16, 8, 4, 2, 1, 0]


class _NoDeviceGgml:
    """A ggml registry whose GPU module loads, logs why it has no device, and adds none."""

    def __init__(self) -> None:
        self.lib = self

    def ggml_backend_load(self, path: bytes) -> int:
        import logging

        logging.getLogger(backends.LLAMA_LOGGER).error("ggml_cuda_init: failed to initialize CUDA: no driver")
        return 1

    def devices(self) -> list:
        return []


def test_a_gpu_module_with_no_device_says_why_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "libggml-cuda.so").write_bytes(b"")
    monkeypatch.setattr(backends, "_dlopen_error", lambda _path: None)
    monkeypatch.setattr(backends, "_preload_nvidia_wheels", lambda: None)
    not_used = backends._load_gpu_modules(_NoDeviceGgml(), tmp_path)
    reason = not_used["libggml-cuda.so"]
    assert reason == "it found no usable device (ggml_cuda_init: failed to initialize CUDA: no driver)"
    warnings = [r.getMessage() for r in caplog.records if r.name == backends.__name__ and r.levelname == "WARNING"]
    assert warnings == [f"backend libggml-cuda.so not used, running on the CPU: {reason}"]
