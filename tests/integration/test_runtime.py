"""The runtime against real GGUF models: SmolLM2-135M-Instruct (Q4_1) and gemma-3-270m (Q4_K_M)."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from inglenook.engine.base.errors import ContextLengthExceeded, InvalidRequest
from inglenook.engine.base.generation_events import Chunk, Finished
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.runtime.model import LoadedModel

GREEDY = SamplingParams(temperature=0.0, max_tokens=24, seed=7)
QUESTION = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]


def run(model: LoadedModel, prompt: list[int], sampling: SamplingParams, **kwargs) -> tuple[str, Finished, list[Chunk]]:
    events = list(model.generate(prompt, sampling, **kwargs))
    chunks = [e for e in events if isinstance(e, Chunk)]
    finished = events[-1]
    assert isinstance(finished, Finished)
    return "".join(c.text for c in chunks), finished, chunks


def test_smollm2_answers_a_chat_deterministically(smollm2: LoadedModel) -> None:
    prompt = smollm2.chat_tokens(QUESTION)
    first, finished, _ = run(smollm2, prompt, GREEDY, reuse_kv=False)
    second, _, _ = run(smollm2, prompt, GREEDY, reuse_kv=False)
    assert "Paris" in first
    assert first == second
    assert finished.usage.prompt_tokens == len(prompt)
    assert 0 < finished.usage.completion_tokens <= 24
    assert finished.timings.ttft_s > 0 and finished.tokens_per_s > 0


def test_smollm2_uses_its_own_chat_template(smollm2: LoadedModel) -> None:
    assert not smollm2.chat_template.is_fallback
    text = smollm2.chat_template.render(QUESTION)
    assert text.startswith("<|im_start|>system") and text.endswith("<|im_start|>assistant\n")
    # Special tokens in the template are parsed as single tokens.
    assert smollm2.chat_tokens(QUESTION)[0] == smollm2.info.special_tokens["bos"][0]


def test_seeded_sampling_repeats_and_different_seeds_differ(smollm2: LoadedModel) -> None:
    prompt = smollm2.chat_tokens([{"role": "user", "content": "Write a short poem about the sea."}])
    hot = SamplingParams(temperature=1.2, top_k=0, top_p=1.0, min_p=0.0, max_tokens=20)
    a, _, _ = run(smollm2, prompt, hot.with_overrides(seed=1))
    b, _, _ = run(smollm2, prompt, hot.with_overrides(seed=1))
    c, _, _ = run(smollm2, prompt, hot.with_overrides(seed=2))
    assert a == b
    assert a != c


def test_max_tokens_and_stop_strings(smollm2: LoadedModel) -> None:
    prompt = smollm2.chat_tokens([{"role": "user", "content": "Count from 1 to 20, separated by commas."}])
    _, finished, _ = run(smollm2, prompt, SamplingParams(temperature=0.0, max_tokens=5))
    assert finished.finish_reason == "length" and finished.usage.completion_tokens == 5
    full, _, _ = run(smollm2, prompt, SamplingParams(temperature=0.0, max_tokens=60))
    assert "5" in full
    cut, finished, _ = run(smollm2, prompt, SamplingParams(temperature=0.0, max_tokens=60, stop=("5",)))
    assert finished.finish_reason == "stop"
    assert "5" not in cut and full.startswith(cut)


def test_chunks_are_valid_utf8_even_for_multibyte_characters(smollm2: LoadedModel) -> None:
    prompt = smollm2.chat_tokens([{"role": "user", "content": "Repeat exactly: 日本語 ☃ 🎉 café"}])
    text, _, chunks = run(smollm2, prompt, SamplingParams(temperature=0.0, max_tokens=40))
    for chunk in chunks:
        chunk.text.encode("utf-8")  # would raise on lone surrogates
        assert "\ufffd" not in chunk.text
    assert any(ord(ch) > 127 for ch in text)


def test_context_overflow_raises_instead_of_dropping_history(smollm2: LoadedModel) -> None:
    long_prompt = smollm2.tokenize("word " * 2000)
    with pytest.raises(ContextLengthExceeded) as caught:
        list(smollm2.generate(long_prompt, GREEDY))
    assert caught.value.context_size == smollm2.n_ctx
    short = smollm2.tokenize("hello")
    with pytest.raises(ContextLengthExceeded):
        list(smollm2.generate(short, SamplingParams(max_tokens=smollm2.n_ctx)))


def test_out_of_vocabulary_tokens_never_reach_llama_cpp(smollm2: LoadedModel) -> None:
    with pytest.raises(InvalidRequest):
        list(smollm2.generate([1, smollm2.n_vocab + 5], GREEDY))
    with pytest.raises(InvalidRequest):
        list(smollm2.generate([-1], GREEDY))


def test_cancel_stops_within_a_decode_step(smollm2: LoadedModel) -> None:
    prompt = smollm2.chat_tokens([{"role": "user", "content": "Tell me a very long story."}])
    cancel = threading.Event()
    seen = 0
    finished = None
    for event in smollm2.generate(prompt, SamplingParams(temperature=0.0, max_tokens=200), cancel):
        if isinstance(event, Chunk):
            seen += len(event.token_ids)
            if seen >= 3:
                cancel.set()
        else:
            finished = event
    assert finished is not None and finished.finish_reason == "cancelled"
    assert finished.usage.completion_tokens <= 4


def test_prefix_reuse_gives_identical_output(smollm2: LoadedModel) -> None:
    # Longer than the 64 tokens every prompt reads again, so that some of it is reused.
    history = [{"role": "system", "content": "You answer questions about a fruit market in a few words. " * 8},
               {"role": "user", "content": "Name a fruit."}]
    prompt = smollm2.chat_tokens(history)
    run(smollm2, prompt, GREEDY)
    longer = smollm2.chat_tokens(history + [{"role": "assistant", "content": "Apple."},
                                            {"role": "user", "content": "Another one?"}])
    cached_text, cached, _ = run(smollm2, longer, GREEDY, reuse_kv=True)
    fresh_text, fresh, _ = run(smollm2, longer, GREEDY, reuse_kv=False)
    assert cached.usage.cached_tokens > 0 and fresh.usage.cached_tokens == 0
    assert cached_text == fresh_text


def test_logprobs_are_reported(smollm2: LoadedModel) -> None:
    prompt = smollm2.chat_tokens(QUESTION)
    _, _, chunks = run(smollm2, prompt, SamplingParams(temperature=0.0, max_tokens=4, logprobs=3))
    entries = [lp for c in chunks for lp in (c.logprobs or [])]
    assert len(entries) == 4
    for entry in entries:
        assert entry.logprob <= 0.0 and len(entry.top) == 3
        # Greedy picks the most likely token.
        assert entry.top[0][2] == pytest.approx(entry.logprob, abs=1e-4)


def test_gemma_base_model_completes_text_deterministically(gemma: LoadedModel) -> None:
    assert gemma.info.architecture == "gemma3"
    assert gemma.record.quantization == "Q4_K_M"
    prompt = gemma.tokenize("Question: What is the capital of France?\nAnswer: The capital of France is")
    first, finished, _ = run(gemma, prompt, SamplingParams(temperature=0.0, max_tokens=12), reuse_kv=False)
    second, _, _ = run(gemma, prompt, SamplingParams(temperature=0.0, max_tokens=12), reuse_kv=False)
    assert first == second
    assert "Paris" in first
    assert finished.usage.completion_tokens > 0


def test_gemma_prefix_reuse_gives_the_logits_of_a_full_prefill(gemma: LoadedModel) -> None:
    """gemma-3-270m's K-quant kernels group a batch's rows by 4 and take leftover rows
    another way; read in aligned chunks (runtime/slots.py), a restored prefix still gives a
    full prefill's log-probabilities exactly (earlier configurations differed by up to 0.18)."""
    base = gemma.tokenize("A list of colours: red, green, blue, yellow, orange, purple, " * 10)
    run(gemma, base, SamplingParams(temperature=0.0, max_tokens=4))
    longer = base + gemma.tokenize("brown, black, white,", add_special=False)
    three = SamplingParams(temperature=0.0, max_tokens=2, logprobs=3)
    _, cached_done, cached = run(gemma, longer, three, reuse_kv=True)
    _, fresh_done, fresh = run(gemma, longer, three, reuse_kv=False)
    assert cached_done.usage.cached_tokens > 0 and fresh_done.usage.cached_tokens == 0
    assert cached[0].logprobs == fresh[0].logprobs


def test_logits_for_every_position_match_generation(smollm2: LoadedModel) -> None:
    tokens = smollm2.tokenize("The sun rises in the east and sets in the")
    # A chat context's buffers hold a step's rows only (llama.cpp would abort on more): it
    # says so instead of decoding.
    with pytest.raises(ValueError, match="every_logit"):
        smollm2.logits_for(tokens)
    model = LoadedModel(smollm2.record, dataclasses.replace(smollm2.options, every_logit=True))
    try:
        logits = model.logits_for(tokens)
        assert logits.shape == (len(tokens), model.n_vocab)
        greedy_next = int(logits[-1].argmax())
        _, _, chunks = run(model, tokens, SamplingParams(temperature=0.0, max_tokens=1), reuse_kv=False)
        assert chunks[0].token_ids[0] == greedy_next
    finally:
        model.close()


def test_grammar_constrains_output_even_when_the_model_wants_otherwise(smollm2: LoadedModel) -> None:
    prompt = smollm2.chat_tokens([{"role": "user", "content": "Write a sentence about the sea."}])
    digits = SamplingParams(temperature=0.0, max_tokens=8, grammar='root ::= [0-9]+ "."')
    text, _, _ = run(smollm2, prompt, digits)
    assert text and text.rstrip(".").isdigit()
    hot = SamplingParams(temperature=1.0, seed=3, max_tokens=8, grammar='root ::= ("yes" | "no")')
    answer, finished, _ = run(smollm2, prompt, hot)
    assert answer in ("yes", "no") and finished.finish_reason == "stop"


def test_a_grammar_that_does_not_parse_is_invalid_request(smollm2: LoadedModel) -> None:
    with pytest.raises(InvalidRequest):
        list(smollm2.generate(smollm2.tokenize("hi"), SamplingParams(grammar="root ::= (")))
