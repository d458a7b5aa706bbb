"""The lab's math on synthetic distributions, with both array backends."""

from __future__ import annotations

import numpy as np
import pytest

from inglenook.engine.lab.backend import NumpyBackend, select_backend
from inglenook.engine.lab.evaltext import make_windows, tokens_digest
from inglenook.engine.lab.metrics import compare_to_reference, quality_stats, summarize_reference
from inglenook.engine.lab.recommend import recommend
from inglenook.engine.lab.reference import load_reference, reference_path, save_reference
from inglenook.engine.lab.results import LabResult

RNG = np.random.default_rng(7)


def _logits(rows: int = 40, vocab: int = 300, scale: float = 4.0) -> np.ndarray:
    return (RNG.standard_normal((rows, vocab)) * scale).astype(np.float32)


def _exact_kl(p_logits: np.ndarray, q_logits: np.ndarray) -> np.ndarray:
    def log_softmax(x: np.ndarray) -> np.ndarray:
        x = x.astype(np.float64)
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    lp, lq = log_softmax(p_logits), log_softmax(q_logits)
    return (np.exp(lp) * (lp - lq)).sum(-1)


def test_a_distribution_compared_with_itself_has_zero_divergence_and_full_agreement() -> None:
    xp = NumpyBackend()
    logits = _logits()
    targets = RNG.integers(0, 300, size=len(logits))
    ref = summarize_reference(xp, logits, targets, k=32)
    same = compare_to_reference(xp, logits, targets, ref)
    assert np.abs(same.kld).max() < 1e-6
    assert same.same_top.all()
    np.testing.assert_allclose(same.nll, ref.nll)


def test_with_the_whole_vocabulary_kept_the_divergence_is_exact() -> None:
    xp = NumpyBackend()
    p, q = _logits(), _logits()
    targets = RNG.integers(0, 300, size=len(p))
    ref = summarize_reference(xp, p, targets, k=300)
    got = compare_to_reference(xp, q, targets, ref).kld
    np.testing.assert_allclose(got, _exact_kl(p, q), rtol=1e-4, atol=1e-5)


def test_top_k_divergence_is_a_close_lower_bound() -> None:
    xp = NumpyBackend()
    p = _logits(scale=6.0)  # peaked, like a language model's next-token distribution
    q = p + RNG.standard_normal(p.shape).astype(np.float32) * 0.5
    targets = RNG.integers(0, 300, size=len(p))
    exact = _exact_kl(p, q)
    estimate = compare_to_reference(xp, q, targets, summarize_reference(xp, p, targets, k=32)).kld
    assert (estimate >= -1e-9).all()
    assert (estimate <= exact + 1e-6).all()
    assert estimate.mean() > 0.8 * exact.mean()


def test_perplexity_of_a_uniform_model_is_the_vocabulary_size() -> None:
    xp = NumpyBackend()
    logits = np.zeros((10, 50), dtype=np.float32)
    ref = summarize_reference(xp, logits, np.arange(10), k=5)
    assert quality_stats(ref.nll, None, None).perplexity == pytest.approx(50.0, rel=1e-5)


def test_torch_backend_gives_the_numpy_numbers() -> None:
    pytest.importorskip("torch")
    torch_xp, numpy_xp = select_backend("torch"), NumpyBackend()
    p, q = _logits(), _logits()
    targets = RNG.integers(0, 300, size=len(p))
    results = []
    for xp in (numpy_xp, torch_xp):
        ref = summarize_reference(xp, p, targets, k=16)
        results.append((ref, compare_to_reference(xp, q, targets, ref)))
    (ref_np, cmp_np), (ref_t, cmp_t) = results
    np.testing.assert_array_equal(ref_np.top_index, ref_t.top_index)
    np.testing.assert_allclose(cmp_np.kld, cmp_t.kld, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cmp_np.nll, cmp_t.nll, rtol=1e-5)
    np.testing.assert_array_equal(cmp_np.same_top, cmp_t.same_top)


def test_reference_round_trips_through_disk_without_pickle(tmp_path) -> None:
    xp = NumpyBackend()
    chunks = [summarize_reference(xp, _logits(rows=n), RNG.integers(0, 300, size=n), k=8) for n in (5, 7)]
    path = reference_path(tmp_path, "f" * 32, "abc", 8)
    save_reference(path, chunks, "f" * 32, "abc")
    with np.load(path, allow_pickle=False) as data:
        assert all(data[name].dtype != object for name in data.files)
    loaded = load_reference(path, "f" * 32, "abc")
    assert loaded is not None and [len(c.nll) for c in loaded] == [5, 7]
    np.testing.assert_array_equal(loaded[1].top_index, chunks[1].top_index)
    assert load_reference(path, "e" * 32, "abc") is None  # another file's reference
    path.write_bytes(b"not a zip")
    assert load_reference(path, "f" * 32, "abc") is None


def test_windows_start_with_bos_and_score_their_second_half() -> None:
    windows = make_windows(list(range(100, 400)), window=64, bos=1)
    assert all(w.tokens[0] == 1 and len(w.tokens) == 64 for w in windows)
    assert len(windows) == 300 // 63  # the short tail is not scored
    assert windows[0].first_scored == 32 and len(windows[0].targets) == 31
    assert tokens_digest(windows) == tokens_digest(make_windows(list(range(100, 400)), 64, 1))
    assert len(make_windows(list(range(100, 400)), window=64, bos=1, max_tokens=126)) == 2


def _result(quant: str, size: int, same_top: float, ram: int, stale: bool = False) -> LabResult:
    r = LabResult(model_id=f"m:{quant.lower()}", path=f"/m/{quant}", quantization=quant, fingerprint="x",
                  size_bytes=size, bits_per_weight=size / 1e8, ram_bytes=ram, decode_tps=30.0, same_top=same_top)
    r.stale_reason = "changed" if stale else None
    return r


def test_recommendation_is_the_smallest_close_variant_that_fits() -> None:
    results = [_result("Q8_0", 800, 1.0, 900), _result("Q5_K_M", 500, 0.97, 600),
               _result("Q4_0", 400, 0.93, 500, stale=True), _result("Q2_K", 300, 0.7, 400)]
    choice = recommend(results, available_ram=10_000)
    assert choice is not None and choice.model_id == "m:q5_k_m"
    assert choice.line.startswith("Q5_K_M: 97.0% same top token, 30 tok/s, fits in RAM with")
    # When only the coarse one fits, it is named, with a warning.
    tight = recommend(results, available_ram=450)
    assert tight is not None and tight.model_id == "m:q2_k" and "no variant reaches 90%" in tight.line
    assert recommend(results, available_ram=100) is None
