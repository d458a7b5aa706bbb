"""The test-only logit jitter (issue 39): off unless its variable is set, and when set, every
logits row llama.cpp writes carries exactly the noise of its position and token. That a
restored prompt and a full prefill (or a sequence alone and in a batch) still agree under it
is checked by the exactness tests themselves (test_default_cache_exact, test_batching, …),
which `make test-portable` runs with the jitter on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inglenook.engine.runtime import logit_jitter
from inglenook.engine.runtime.logit_jitter import ENVIRONMENT, LogitJitter
from inglenook.engine.runtime.model import LoadedModel
from inglenook.engine.runtime.model_loading import LoadOptions

from .conftest import record_for

PROMPT = "The capital of France is Paris. The capital of Italy is"


def load(path: Path) -> LoadedModel:
    return LoadedModel(record_for(path, "smollm2-135m-instruct:q4_1"), LoadOptions(context_size=512, parallel=2, every_logit=True))


def test_no_variable_means_no_jitter(smollm2_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENVIRONMENT, raising=False)
    model = load(smollm2_path)
    try:
        assert model.context.jitter is None
    finally:
        model.close()
    monkeypatch.setenv(ENVIRONMENT, "0")
    assert LogitJitter.from_environment(100) is None


def test_each_row_carries_the_noise_of_its_position_and_token(smollm2_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENVIRONMENT, raising=False)
    plain = load(smollm2_path)
    try:
        tokens = plain.tokenize(PROMPT, add_special=True, parse_special=False)
        reference = plain.logits_for(tokens)
    finally:
        plain.close()
    monkeypatch.setenv(ENVIRONMENT, "0.5,7")
    jittered = load(smollm2_path)
    try:
        assert jittered.context.jitter is not None and jittered.context.jitter.scale == 0.5
        perturbed = jittered.logits_for(tokens)
        expected = LogitJitter(jittered.n_vocab, 0.5, 7)
        for position, token in enumerate(tokens):
            np.testing.assert_allclose(perturbed[position] - reference[position],
                                       expected.noise_for(position, token), atol=1e-4)
    finally:
        jittered.close()


def test_the_default_scale_is_the_documented_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENVIRONMENT, "1")
    jitter = LogitJitter.from_environment(1000)
    assert jitter is not None and jitter.scale == logit_jitter.DEFAULT_SCALE
    monkeypatch.setenv(ENVIRONMENT, "x")
    with pytest.raises(ValueError, match=ENVIRONMENT):
        LogitJitter.from_environment(1000)
