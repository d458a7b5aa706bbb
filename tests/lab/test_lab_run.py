"""The lab measuring real SmolLM2 variants made by the quantizer."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import numpy as np
import pytest

from inglenook.cli import main
from inglenook.engine.core.engine import Engine
from inglenook.engine.lab.backend import NumpyBackend
from inglenook.engine.lab.evaltext import EvalText
from inglenook.engine.lab.lab import LabReport, QuantLab
from inglenook.engine.lab.measure import evaluate_against, evaluate_reference
from inglenook.engine.lab.results import LabResult
from inglenook.engine.store.paths import Paths

from .conftest import SMALL, by_quant, open_lab_engine

pytestmark = pytest.mark.integration


def test_every_variant_is_measured_against_the_most_precise(measured: LabReport) -> None:
    results = by_quant(measured)
    assert set(results) == {"Q8_0", "Q4_1", "Q4_0", "Q2_K"}
    assert measured.reference_id == "smollm2-135m-instruct:q8_0"
    ref = results["Q8_0"]
    assert ref.is_reference and ref.kld_mean == 0.0 and ref.same_top == 1.0
    for r in results.values():
        assert r.size_bytes > 0 and r.bits_per_weight > 2
        assert r.load_s is not None and r.load_s > 0
        assert r.ram_bytes is not None and r.ram_bytes > 0
        assert r.vram_bytes is None  # a CPU build
        assert r.prompt_tps and r.prompt_tps > 0 and r.decode_tps and r.decode_tps > 0
        assert r.positions == 3 * 64 - 3  # three windows, second halves scored
        assert not r.stale


def test_coarser_quantizations_diverge_more(measured: LabReport) -> None:
    r = by_quant(measured)
    assert 0 < r["Q4_1"].kld_mean < r["Q4_0"].kld_mean < r["Q2_K"].kld_mean
    assert r["Q2_K"].kld_p99 > r["Q2_K"].kld_mean
    assert r["Q2_K"].same_top < r["Q4_1"].same_top <= 1.0


def test_perplexity_is_finite(measured: LabReport) -> None:
    for r in measured.results:
        assert math.isfinite(r.perplexity) and 1 < r.perplexity < 1000


def test_a_variant_compared_with_itself_diverges_by_nothing(variant_files: dict[str, Path], tmp_path: Path) -> None:
    engine = open_lab_engine(tmp_path / "self", variant_files)
    try:
        lab = QuantLab.for_engine(engine)
        record = engine.registry.resolve("smollm2-135m-instruct:q4_0")
        model = lab.load(record, SMALL.window, SMALL.decode_tokens)
        try:
            run = lab.prepare([record.id], config=SMALL)
            windows = run._windows(model)  # the run's own window cutting
            xp, cancel = NumpyBackend(), threading.Event()
            reference = evaluate_reference(model, windows, xp, SMALL, cancel, lambda _f: None)
            again = evaluate_against(model, windows, reference, xp, cancel, lambda _f: None)
        finally:
            model.close()
    finally:
        engine.close()
    assert np.abs(again.kld).max() < 1e-5
    assert again.same_top.all()
    np.testing.assert_allclose(again.nll, np.concatenate([c.nll for c in reference]), rtol=1e-6)


def test_results_persist_and_a_rerun_is_deterministic(measured: LabReport, measured_home: Path,
                                                      variant_files: dict[str, Path]) -> None:
    engine = open_lab_engine(measured_home, variant_files)
    try:
        lab = QuantLab.for_engine(engine)
        saved = {r.quantization: r for r in lab.saved("smollm2-135m-instruct:q4_0", config=SMALL)}
        assert set(saved) == {"Q8_0", "Q4_1", "Q4_0", "Q2_K"}
        assert not any(r.stale for r in saved.values())
        first = by_quant(measured)["Q4_0"]
        assert saved["Q4_0"].perplexity == first.perplexity
        # The reference's distributions are on disk: a second run reuses them.
        assert len(list((measured_home / "cache" / "lab").glob("ref-*.npz"))) == 1
        again = lab.run(["smollm2-135m-instruct:q4_0"], config=SMALL)
    finally:
        engine.close()
    assert again.error is None
    rerun = {r.quantization: r for r in again.results}["Q4_0"]
    assert rerun.perplexity == pytest.approx(first.perplexity, rel=1e-9)
    assert rerun.kld_mean == pytest.approx(first.kld_mean, rel=1e-9)
    assert rerun.same_top == first.same_top


def test_results_are_marked_stale_when_the_file_or_the_settings_change(
    variant_files: dict[str, Path], tmp_path: Path
) -> None:
    home = tmp_path / "stale"
    models = Paths.under(home).models
    models.mkdir(parents=True)
    copy = models / "Copy-135M.Q4_0.gguf"
    copy.write_bytes(variant_files["Q4_0"].read_bytes())
    with Engine(Paths.under(home)) as engine:
        lab = QuantLab.for_engine(engine)
        record = engine.registry.resolve("copy-135m:q4_0")
        eval_text = EvalText.load()
        settings = lab.settings_for(eval_text, SMALL)
        lab.results.save(LabResult(model_id=record.id, path=str(record.path), quantization="Q4_0",
                                   fingerprint=record.fingerprint, size_bytes=record.size_bytes,
                                   bits_per_weight=4.5, perplexity=20.0), lab.machine, settings)
        assert [r.stale for r in lab.saved(record.id, eval_text, SMALL)] == [False]
        engine.update_settings(threads=settings.threads + 1)
        (changed,) = lab.saved(record.id, eval_text, SMALL)
        assert changed.stale and "threads" in changed.stale_reason
        engine.update_settings(threads=0)
        copy.write_bytes(variant_files["Q2_K"].read_bytes())  # replaced by another quantization
        new = engine.registry.register_file(copy)
        (replaced,) = lab.saved(new.id, eval_text, SMALL)
        assert replaced.stale and "file has changed" in replaced.stale_reason
    # Reopening the profile shows the same verdict at once.
    with Engine(Paths.under(home)) as engine:
        (reopened,) = QuantLab.for_engine(engine).saved(new.id, eval_text, SMALL)
        assert reopened.perplexity == 20.0 and reopened.stale


def test_a_run_can_be_cancelled(variant_files: dict[str, Path], tmp_path: Path) -> None:
    engine = open_lab_engine(tmp_path / "cancel", variant_files)
    try:
        lab = QuantLab.for_engine(engine)
        started = threading.Event()
        run = lab.start(["smollm2-135m-instruct:q2_k"], config=SMALL, on_progress=lambda _p: started.set())
        started.wait(60)
        run.cancel()
        report = run.wait(120)
    finally:
        engine.close()
    assert run.done and report.cancelled and report.error is None


def test_terminal_creates_measures_and_prints_json(tmp_path: Path, home: Path, capsys: pytest.CaptureFixture) -> None:
    args = ["lab", "smollm2-135m-instruct:q4_1", "--create", "Q4_0", "--window", "128", "--max-tokens", "256", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    quants = {r["quantization"]: r for r in out["results"]}
    assert set(quants) == {"Q4_1", "Q4_0"}
    assert out["reference"] == "smollm2-135m-instruct:q4_1"
    assert quants["Q4_0"]["kld_mean"] > 0 and quants["Q4_1"]["is_reference"]
    assert (home / "models" / "SmolLM2-135M-Instruct.Q4_0.gguf").is_file()
    # The table view of the saved numbers, without measuring again.
    assert main(["lab", "smollm2-135m-instruct:q4_1", "--all", "--saved", "--window", "128", "--max-tokens", "256"]) == 0
    table = capsys.readouterr().out
    assert "Q4_0" in table and "reference" in table and "SAME TOP" in table


def test_files_named_by_path_group_whatever_was_registered_before(variant_files: dict[str, Path], home: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    """A fresh home knows only the starter; the other two files are named by path, the
    last one after the starter. Each is registered before the group forms, so all three are
    variants of one model (the old code formed the group from the first file alone and
    refused the third: "…:q2_k is not a variant of smollm2-135m-instruct")."""
    args = ["lab", str(variant_files["Q8_0"]), "smollm2-135m-instruct:q4_1", str(variant_files["Q2_K"]),
            "--window", "128", "--max-tokens", "256", "--json"]
    assert main(args) == 0, capsys.readouterr().err
    out = json.loads(capsys.readouterr().out)
    assert {r["quantization"] for r in out["results"]} == {"Q8_0", "Q4_1", "Q2_K"}
    assert out["reference"] == "smollm2-135m-instruct:q8_0"
