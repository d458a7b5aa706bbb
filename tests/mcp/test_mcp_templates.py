"""The tools of a real MCP server (mcp-server-time) through popular tool-capable templates
(Qwen 2.5/3, Llama 3.x, Mistral), carried by synthetic GGUFs as in
tests/unit/test_real_chat_templates.py: the tools, a call and its result all reach the prompt."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from inglenook.engine.base import ChatMessage, FunctionCall, Tool, ToolCall
from inglenook.engine.text import ChatTemplate, TemplateAbilities, engine_messages, plan_tools
from inglenook.engine.tools import McpConnection, McpServerConfig, ToolSet
from tests.unit.test_real_chat_templates import _carried_by_a_gguf, templates  # noqa: F401 — the fixture

pytestmark = pytest.mark.timeout(120)

NAMES = ["Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen3-0.6B", "meta-llama-Llama-3.1-8B-Instruct",
         "meta-llama-Llama-3.2-3B-Instruct", "mistralai-Mistral-Nemo-Instruct-2407",
         "Mistral-Small-3.2-24B-Instruct-2506"]


@pytest.fixture(scope="module")
def time_tools(time_server_command: list[str]) -> Iterator[list[dict]]:
    command, *args = time_server_command
    connection = McpConnection(McpServerConfig("time", command=command, args=tuple(args))).start().wait_ready()
    yield ToolSet({t.name: t for t in connection.tools}, []).definitions()
    connection.close()


@pytest.mark.parametrize("name", NAMES)
def test_mcp_tools_calls_and_results_reach_the_prompt(templates: dict[str, str], time_tools: list[dict],  # noqa: F811
                                                      tmp_path: Path, name: str) -> None:
    source = _carried_by_a_gguf(tmp_path, templates[name])
    assert source is not None
    abilities = TemplateAbilities.of(source)
    plan = plan_tools([Tool.model_validate(t) for t in time_tools], "auto", abilities)
    assert plan is not None and plan.native
    history = [
        ChatMessage(role="user", content="What time is it in Tokyo?"),
        ChatMessage(role="assistant", content="", tool_calls=[ToolCall(
            id="call00000", function=FunctionCall(name="get_current_time", arguments='{"timezone": "Asia/Tokyo"}'))]),
        ChatMessage(role="tool", content='{"timezone": "Asia/Tokyo", "datetime": "2026-12-04T00:38:46+09:00"}',
                    tool_call_id="call00000", name="get_current_time"),
    ]
    prompt = ChatTemplate(source, bos_token="<s>", eos_token="</s>").render(
        engine_messages(history, abilities, plan), add_generation_prompt=True, tools=list(plan.tools))
    assert "get_current_time" in prompt and "convert_time" in prompt
    assert "IANA timezone name" in prompt  # the server's own descriptions
    assert "2026-12-04T00:38:46+09:00" in prompt  # the result
