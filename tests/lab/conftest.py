"""Fixtures for the lab: SmolLM2 variants made once per session with llama.cpp's quantizer,
and one measured run of all of them that several tests read."""

from __future__ import annotations

from pathlib import Path

import pytest

from inglenook.engine.core.engine import Engine
from inglenook.engine.lab.lab import LabReport, QuantLab
from inglenook.engine.lab.measure import MeasureConfig
from inglenook.engine.lab.quantize import output_path, quantize
from inglenook.engine.store.paths import Paths

# Small enough for two shared cores: three windows of 128 tokens, half of each scored.
SMALL = MeasureConfig(window=128, max_eval_tokens=384, prompt_tokens=48, decode_tokens=8)


@pytest.fixture(scope="session")
def variant_files(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Q8_0, Q4_0 and Q2_K made from the starter's Q4_1 (the Q8_0 holds Q4_1's weights)."""
    folder = tmp_path_factory.mktemp("lab-variants")
    files = {"Q4_1": smollm2_path}
    for quant in ("Q8_0", "Q4_0", "Q2_K"):
        files[quant] = quantize(smollm2_path, output_path(smollm2_path, quant, folder), quant)
    return files


def open_lab_engine(home: Path, variant_files: dict[str, Path]) -> Engine:
    engine = Engine(Paths.under(home))
    for quant, path in variant_files.items():
        if quant != "Q4_1":  # the starter registers itself
            engine.registry.register_file(path)
    return engine


@pytest.fixture(scope="session")
def measured_home(variant_files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lab-home")


@pytest.fixture(scope="session")
def measured(measured_home: Path, variant_files: dict[str, Path]) -> LabReport:
    """All four variants measured once, with the small configuration."""
    engine = open_lab_engine(measured_home, variant_files)
    try:
        lab = QuantLab.for_engine(engine)
        ids = [v.id for v in lab.variants("smollm2-135m-instruct:q4_1").variants]
        report = lab.run(ids, config=SMALL)
    finally:
        engine.close()
    assert report.error is None, report.error
    return report


def by_quant(report: LabReport) -> dict:
    return {r.quantization: r for r in report.results}
