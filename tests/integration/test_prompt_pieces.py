"""Long prompts tokenize in pieces (issue 14, item 3): the pieces give exactly the tokens
of the whole, on both test vocabularies (SmolLM2's BPE with control tokens, gemma-3's
SentencePiece with whitespace runs as user-defined tokens), with and without special
token parsing; a prompt that cannot fit stops early, and cancel stops the work."""

from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inglenook.engine.base.errors import ContextLengthExceeded, JobCancelled
from inglenook.engine.runtime.model import LoadedModel

pytestmark = pytest.mark.integration

# Text that exercises every kind of cut: special tokens of both vocabularies, look-alikes,
# whitespace runs before and after them, multi-byte characters.
FRAGMENTS = [
    "a", " ", "\n", "  ", "\n\n\n", "\t", "hello", "world.", "é", "日本", "🙂", "x\n\n",
    "<|im_start|>", "<|im_end|>", "<start_of_turn>", "<end_of_turn>", "<bos>", "<s>", "</s>", "<b>", "</p>",
    "<unused12>", "<|im", "_start|>",
]

texts = st.lists(st.sampled_from(FRAGMENTS), min_size=0, max_size=120).map("".join)


def piecewise(model: LoadedModel, text: str, parse_special: bool, min_chars: int) -> list[int]:
    cutter = model.context.vocabulary.cutter(parse_special)
    assert cutter is not None
    tokens: list[int] = []
    for i, piece in enumerate(cutter.pieces(text, min_chars)):
        tokens.extend(model.tokenize(piece, add_special=i == 0, parse_special=parse_special))
    return tokens


@pytest.mark.parametrize("which", ["smollm2", "gemma"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts, parse_special=st.booleans(), min_chars=st.integers(1, 40))
def test_pieces_tokenize_exactly_like_the_whole(request: pytest.FixtureRequest, which: str, text: str,
                                                parse_special: bool, min_chars: int) -> None:
    model: LoadedModel = request.getfixturevalue(which)
    whole = model.tokenize(text, add_special=True, parse_special=parse_special)
    assert piecewise(model, text, parse_special, min_chars) == whole


@pytest.mark.parametrize("which", ["smollm2", "gemma"])
def test_a_long_chat_is_cut_into_many_pieces_with_the_same_tokens(request: pytest.FixtureRequest, which: str) -> None:
    model: LoadedModel = request.getfixturevalue(which)
    messages = [{"role": "user" if i % 2 else "assistant", "content": f"message {i}\n  with  spaces\n"} for i in range(300)]
    text = model.chat_template.render(messages)
    pieces = list(model.context.vocabulary.cutter(True).pieces(text, 64))
    assert len(pieces) > 50 and "".join(pieces) == text
    assert piecewise(model, text, True, 64) == model.tokenize(text, add_special=True, parse_special=True)


@pytest.mark.parametrize("content", ["a", "a\n ", " \n"])
def test_a_prompt_that_cannot_fit_stops_within_a_piece_of_the_context(smollm2: LoadedModel, content: str) -> None:
    messages = [{"role": "user", "content": content} for _ in range(50_000)]
    with pytest.raises(ContextLengthExceeded) as caught:
        smollm2.chat_tokens(messages)
    # The whole prompt is about 300,000 tokens; counting stopped soon after the context.
    assert smollm2.n_ctx < caught.value.prompt_tokens < 20_000
    with pytest.raises(ContextLengthExceeded):
        smollm2.prompt_tokens("word " * 50_000)


def test_cancel_stops_the_preparation_of_a_prompt(smollm2: LoadedModel) -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(JobCancelled):
        smollm2.chat_tokens([{"role": "user", "content": "hi"}], cancel=cancel)
    with pytest.raises(JobCancelled):
        smollm2.prompt_tokens("word " * 50_000, cancel=cancel)


def test_prompts_that_fit_are_unchanged(smollm2: LoadedModel) -> None:
    messages = [{"role": "user", "content": "Say hello."}]
    text = smollm2.chat_template.render(messages)
    assert smollm2.chat_tokens(messages) == smollm2.tokenize(text, add_special=smollm2.add_bos, parse_special=True)
