"""Reasoning first, then text and calls: the answer splitter the API front ends share."""

from __future__ import annotations

import json

from inglenook.engine.base.protocol import Tool
from inglenook.engine.text.answer_split import AnswerSplitter, split_answer
from inglenook.engine.text.tool_call_parser import ArgumentsDelta, CallStarted
from inglenook.engine.text.tool_calls import TemplateAbilities, plan_tools

TOOLS = [Tool.model_validate({"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}})]


def test_reasoning_then_a_call_streams_apart() -> None:
    plan = plan_tools(TOOLS, "auto", TemplateAbilities())
    splitter = AnswerSplitter(plan, parallel=True)
    written = '<think>I should add.</think>\n<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'
    pieces = [splitter.feed(written[i:i + 4]) for i in range(0, len(written), 4)] + [splitter.finish()]
    assert "".join(p.reasoning for p in pieces) == "I should add."
    assert "".join(p.text for p in pieces) == ""
    events = [e for p in pieces for e in p.call_events]
    assert [e.name for e in events if isinstance(e, CallStarted)] == ["add"]
    assert json.loads("".join(e.text for e in events if isinstance(e, ArgumentsDelta))) == {"a": 1, "b": 2}
    assert [c.function.name for c in splitter.calls] == ["add"]


def test_a_prompt_that_opens_the_block_and_no_tools() -> None:
    reasoning, text, calls = split_answer("Hmm, 2+2.\n</think>\n\n4", None, False, reasoning_inside="</think>")
    assert (reasoning, text, calls) == ("Hmm, 2+2.\n", "4", [])


def test_a_template_that_opens_reasoning_in_the_prompt_is_recognised() -> None:
    template = ("{% for m in messages %}<|user|>{{ m.content }}\n{% endfor %}"
                "{% if add_generation_prompt %}<|assistant|><think>\n{% endif %}")
    assert TemplateAbilities.of(template).opens_reasoning == "</think>"
    assert TemplateAbilities.of("{% for m in messages %}{{ m.content }}{% endfor %}").opens_reasoning is None


QWEN3_LIKE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
)


def test_reasoning_can_be_turned_off_where_the_template_supports_it() -> None:
    import pytest

    from inglenook.engine.api.shared.requests import template_options
    from inglenook.engine.base.errors import InvalidRequest
    from inglenook.engine.base.protocol import ChatCompletionRequest
    from inglenook.engine.text.chat_template import ChatTemplate

    def request(**extra: object) -> ChatCompletionRequest:
        return ChatCompletionRequest.model_validate({"messages": [{"role": "user", "content": "hi"}], **extra})

    off = template_options(request(reasoning_effort="none"))
    assert off["enable_thinking"] is False
    assert template_options(request(chat_template_kwargs={"enable_thinking": False})) == {"enable_thinking": False}
    assert template_options(request()) == {}
    with pytest.raises(InvalidRequest):
        template_options(request(chat_template_kwargs={"messages": []}))
    template = ChatTemplate(QWEN3_LIKE)
    prompt = template.render([{"role": "user", "content": "hi"}], **off)
    assert prompt.endswith("<think>\n\n</think>\n\n"), "the template closes the block: the model answers directly"
    assert not template.render([{"role": "user", "content": "hi"}]).endswith("</think>\n\n")
