from __future__ import annotations

import math
import threading

import pytest

from inglenook.engine.base.errors import InvalidRequest, JobCancelled
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.text.chat_template import ChatTemplate
from inglenook.engine.text.interrupt import Interrupted, run_interruptible
from inglenook.engine.text.textstream import TextStream


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


# -- the bounded sandbox (issue 14, item 7) ------------------------------------------------

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("{{ 'A' * 3000000000 }}", "repeated"),
        ("{{ [0] * 3000000000 }}", "repeated"),
        ("{{ 3000000000 * 'A' }}", "repeated"),
        ("{% set ns = namespace(s='ab') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "string"),
        ("{% set ns = namespace(s='ab') %}{% for i in range(60) %}{% set ns.s = ns.s + ns.s %}{% endfor %}", "joined"),
        ("{{ 'x' | center(3000000000) }}", "padded"),
        ("{{ 'x'.ljust(3000000000) }}", "padded"),
        ("{{ ('a' * 1000000).replace('a', 'b' * 100) }}", "string"),
        ("{{ ('a' * 1000000) | replace('a', 'b' * 100) }}", "string"),
        ("{{ 'a\nb' | indent(3000000000) }}", "indented"),
        ("{{ '%999999999d' % 1 }}", "width"),
        ("{{ '{:>999999999}'.format(1) }}", "width"),
        ("{{ '%999999999d' | format(1) }}", "width"),
        ("{{ 10 ** 100000000 }}", "power"),
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "range items"),
        ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "recursed"),
    ],
)
def test_templates_that_would_exhaust_the_machine_are_refused(source: str, words: str) -> None:
    with pytest.raises(InvalidRequest, match=words):
        ChatTemplate(source).render(MESSAGES)


def test_ordinary_uses_of_the_bounded_operations_still_work() -> None:
    source = (
        "{{ '=' * 3 }}{{ [1, 2] + [3] }}{{ 'a' ~ 'b' }}{{ 'x' | center(5) }}{{ '%05d' % 42 }}"
        "{{ '{:>4}'.format(7) }}{{ 2 ** 10 }}{{ range(3) | list }}{{ 'a b' | replace(' ', '_') }}"
        "{{ 'l1\nl2' | indent(2) }}{% set block %}in{{ 'side' }}{% endset %}{{ block }}"
    )
    assert ChatTemplate(source).render(MESSAGES) == "===[1, 2, 3]ab  x  00042   71024[0, 1, 2]a_bl1\n  l2inside"


def test_a_template_that_loops_without_end_is_stopped_by_its_time_limit() -> None:
    endless = "{% for a in messages * 100000 %}{% for b in messages * 100000 %}{% endfor %}{% endfor %}"
    with pytest.raises(InvalidRequest, match="did not finish within 0.5 s"):
        ChatTemplate(endless, time_limit_s=0.5).render(MESSAGES)


def test_cancel_stops_a_render_under_way() -> None:
    endless = "{% for a in messages * 100000 %}{% for b in messages * 100000 %}{% endfor %}{% endfor %}"
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    with pytest.raises(JobCancelled):
        ChatTemplate(endless, time_limit_s=600).render(MESSAGES, cancel=cancel)


def test_many_renders_leave_no_interrupt_behind() -> None:
    template = ChatTemplate(None)
    for _ in range(200):
        template.render(MESSAGES)
    # An interrupt fired late would surface in the next Python code of this thread.
    assert sum(range(100_000)) == 4_999_950_000


def test_interruptible_work_returns_its_value_and_passes_its_errors() -> None:
    assert run_interruptible(lambda: 42, 5.0) == 42
    with pytest.raises(ZeroDivisionError):
        run_interruptible(lambda: 1 / 0, 5.0)
    done = threading.Event()
    done.set()
    with pytest.raises(Interrupted, match="cancelled"):
        run_interruptible(lambda: 42, 5.0, done)
