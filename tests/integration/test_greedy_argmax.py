"""Greedy decoding picks its token with an argmax over the logits instead of llama.cpp's
sampler chain (``NativeSampler._argmax_token``): it must pick the chain's token at every
position, with and without a logit bias, on both test models' real logits."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.runtime.model import LoadedModel
from inglenook.engine.runtime.model_loading import LoadOptions
from inglenook.engine.runtime.native_sampler import NativeSampler, _plain_greedy

from .conftest import GPU_LAYERS, record_for


# The logits after every position of a text are read here: contexts loaded for that
# (every_logit), in place of the chat contexts conftest.py loads.
def every_logit_model(path: Path, model_id: str) -> Iterator[LoadedModel]:
    model = LoadedModel(record_for(path, model_id),
                        LoadOptions(context_size=1024, gpu_layers=GPU_LAYERS, every_logit=True))
    yield model
    model.close()


@pytest.fixture(scope="module")
def smollm2(smollm2_path: Path) -> Iterator[LoadedModel]:
    yield from every_logit_model(smollm2_path, "smollm2-135m-instruct:q4_1")


@pytest.fixture(scope="module")
def gemma(gemma_path: Path) -> Iterator[LoadedModel]:
    yield from every_logit_model(gemma_path, "gemma-3-270m:q4_k_m")

TEXT = "The kettle sang on the hob while the cat watched the rain run down the window."


def _biases(logits: np.ndarray) -> list[dict[int, float]]:
    """No bias; the top token banned; a low-ranked token lifted to the top; several at once;
    only tokens other than the top one lowered (the argmax of the unbiased row stands)."""
    order = np.argsort(-logits[-1])
    top, low = int(order[0]), int(order[500])
    lift = float(logits[-1][top] - logits[-1][low]) + 0.5
    return [{}, {top: -100.0}, {low: lift}, {top: -100.0, low: lift, int(order[1]): -3.0},
            {int(order[1]): -100.0, int(order[2]): -0.5}]


@pytest.mark.parametrize("model_name", ["smollm2", "gemma"])
def test_the_argmax_picks_the_chains_token(model_name: str, request: pytest.FixtureRequest) -> None:
    model: LoadedModel = request.getfixturevalue(model_name)
    tokens = model.tokenize(TEXT)
    logits = model.logits_for(tokens)  # leaves every row's logits in the context
    lib, ctx = model.context.lib, model.context.ctx
    for bias in _biases(logits):
        sampler = NativeSampler(lib, model.context.vocab, model.n_vocab,
                                SamplingParams(temperature=0.0, logit_bias=bias).validated(model.n_vocab))
        try:
            assert sampler._argmax  # the fast path is the one under test
            for row in range(len(tokens)):
                chain_token = lib.llama_sampler_sample(sampler.chain, ctx, row)
                assert sampler.sample(ctx, row) == chain_token, (bias, row)
        finally:
            sampler.free()
    # The logits llama.cpp holds are left as the model wrote them (logprobs read them after).
    for row in range(len(tokens)):
        again = np.ctypeslib.as_array(lib.llama_get_logits_ith(ctx, row), shape=(model.n_vocab,))
        assert np.array_equal(again, logits[row]), row


def test_a_sampler_with_state_keeps_the_chain() -> None:
    # Penalties remember the tokens drawn and a grammar constrains them: those stay on the chain.
    assert _plain_greedy(SamplingParams(temperature=0.0))
    assert not _plain_greedy(SamplingParams(temperature=0.0, repeat_penalty=1.1))
    assert not _plain_greedy(SamplingParams(temperature=0.0, presence_penalty=0.5))
    assert not _plain_greedy(SamplingParams(temperature=0.0, grammar='root ::= "a"'))
    assert not _plain_greedy(SamplingParams(temperature=0.7))
