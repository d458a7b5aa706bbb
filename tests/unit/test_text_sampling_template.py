from __future__ import annotations

import math

import pytest

from inglenook.engine.chat_template import ChatTemplate
from inglenook.engine.errors import InvalidRequest
from inglenook.engine.sampling import SamplingParams
from inglenook.engine.textstream import TextStream


def _feed_all(stream: TextStream, pieces: list[bytes]) -> tuple[str, bool]:
    out = []
    for piece in pieces:
        result = stream.feed(piece)
        out.append(result.text)
        if result.stopped:
            return "".join(out), True
    return "".join(out) + stream.flush(), False


def test_characters_split_across_tokens_come_out_whole() -> None:
    snowman = "☃".encode()
    stream = TextStream()
    texts = [stream.feed(snowman[:1]).text, stream.feed(snowman[1:2]).text, stream.feed(snowman[2:] + b"!").text]
    assert texts == ["", "", "☃!"]


def test_stop_string_across_chunks_is_cut_and_never_leaks() -> None:
    text, stopped = _feed_all(TextStream(("###",)), [b"Hello #", b"#", b"# world"])
    assert (text, stopped) == ("Hello ", True)


def test_held_back_prefix_is_released_when_it_is_not_a_stop() -> None:
    stream = TextStream(("</end>",))
    assert stream.feed(b"a </e").text == "a "
    assert stream.feed(b"lse>").text == "</else>"
    text, stopped = _feed_all(TextStream(("STOP",)), [b"ST"])
    assert (text, stopped) == ("ST", False)


@pytest.mark.parametrize(
    ("field", "value"),
    [("temperature", math.nan), ("temperature", -1.0), ("top_p", 1.5), ("max_tokens", -5), ("max_tokens", 0),
     ("top_k", 2.5), ("seed", "x"), ("presence_penalty", 3.0), ("logprobs", 50)],
)
def test_bad_sampling_values_name_the_parameter(field: str, value: object) -> None:
    with pytest.raises(InvalidRequest) as caught:
        SamplingParams.from_dict({field: value})
    assert caught.value.param == field


def test_logit_bias_outside_the_vocabulary_is_rejected() -> None:
    params = SamplingParams.from_dict({"logit_bias": {"5": 10, "70000": -100}})
    with pytest.raises(InvalidRequest, match="outside the vocabulary"):
        params.validated(n_vocab=1000)


def test_stop_accepts_a_string_or_a_list() -> None:
    assert SamplingParams.from_dict({"stop": "END"}).stop == ("END",)
    assert SamplingParams.from_dict({"stop": ["a", "b"]}).stop == ("a", "b")


def test_template_renders_and_runs_sandboxed() -> None:
    template = ChatTemplate("{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}")
    assert template.render([{"role": "user", "content": "hi"}]) == "[user] hi\n"
    hostile = ChatTemplate("{{ ''.__class__.__mro__[1].__subclasses__() }}")
    with pytest.raises(InvalidRequest):
        hostile.render([])


def test_template_raise_exception_becomes_invalid_request() -> None:
    template = ChatTemplate("{{ raise_exception('roles must alternate') }}")
    with pytest.raises(InvalidRequest, match="roles must alternate"):
        template.render([{"role": "user", "content": "x"}])


def test_missing_template_falls_back_to_chatml() -> None:
    template = ChatTemplate(None)
    assert template.is_fallback
    text = template.render([{"role": "user", "content": "hi"}])
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_an_incomplete_character_at_the_end_is_dropped() -> None:
    stream = TextStream()
    assert stream.feed(b"ok \xf0\x9f").text == "ok "
    assert stream.flush() == ""
