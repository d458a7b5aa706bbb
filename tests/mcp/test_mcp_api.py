"""MCP tools through the Responses API, run by Inglenook: the real SmolLM2 (its call forced with
``tool_choice``), the real mcp-server-time over stdio, a real server on loopback, called with
the official ``openai`` SDK (``client.responses.create``) and raw httpx (errors, SSE events).

Only servers the person allowed for API clients run; a call runs at once when the request
says ``require_approval: never`` or the person allowed the tool always, and otherwise comes
back as an ``mcp_approval_request`` that a follow-up request approves or declines."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from inglenook.engine.api.server import ApiServer
from inglenook.engine.core.engine import Engine
from inglenook.engine.tools import ALWAYS, McpServerConfig, Permissions

from ..api.conftest import STARTER, serving

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

QUESTION = "What time is it in Tokyo? Use the timezone Asia/Tokyo."
FORCED = {"type": "mcp", "server_label": "time", "name": "get_current_time"}


def time_tool(**extra: Any) -> dict[str, Any]:
    return {"type": "mcp", "server_label": "time", "allowed_tools": ["get_current_time"], **extra}


@pytest.fixture
def engine(home: Path, smollm2_path: Path, time_server_command: list[str]) -> Iterator[Engine]:
    engine = Engine()
    engine.update_settings(context_size=2048)
    engine.tools.servers.add(McpServerConfig("time", command=time_server_command[0],
                                             args=tuple(time_server_command[1:]), allow_api=True))
    yield engine
    engine.close()


@pytest.fixture
def server(engine: Engine) -> Iterator[ApiServer]:
    with serving(engine) as server:
        yield server


@pytest.fixture
def client(server: ApiServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key="not-needed", max_retries=0, timeout=300)


def ask(client: openai.OpenAI, **fields: Any) -> Any:
    return client.responses.create(**{"model": STARTER, "temperature": 0, "max_output_tokens": 40,
                                      "input": QUESTION, **fields})


def types(response: Any) -> list[str]:
    return [item.type for item in response.output]


def test_a_call_the_request_exempts_runs_here_and_the_model_answers(client: openai.OpenAI) -> None:
    response = ask(client, tools=[time_tool(require_approval="never")], tool_choice=FORCED, max_tool_calls=1)

    assert types(response)[:2] == ["mcp_list_tools", "mcp_call"] and types(response)[-1] == "message"
    listing, call = response.output[0], response.output[1]
    assert listing.server_label == "time" and [t.name for t in listing.tools] == ["get_current_time"]
    assert call.server_label == "time" and call.name == "get_current_time" and call.status == "completed"
    assert json.loads(call.output)["timezone"] == json.loads(call.arguments)["timezone"]
    assert response.output[-1].content[0].text.strip()  # the second round answered in words
    # max_output_tokens holds for the whole response: 40 may cut the answer short ("incomplete").
    assert response.status in ("completed", "incomplete") and response.usage.input_tokens > 0

    # Continued: the list is not sent again, and the earlier call replays as a call and its result.
    again = ask(client, tools=[time_tool(require_approval="never")], previous_response_id=response.id,
                input="Thanks. And say it once more.", tool_choice="none")
    assert "mcp_list_tools" not in types(again) and types(again) == ["message"]


def test_a_call_needing_approval_waits_for_the_client(client: openai.OpenAI, engine: Engine) -> None:
    first = ask(client, tools=[time_tool()], tool_choice=FORCED)
    assert types(first) == ["mcp_list_tools", "mcp_approval_request"]
    asked = first.output[1]
    assert asked.server_label == "time" and asked.name == "get_current_time" and json.loads(asked.arguments)

    approved = ask(client, tools=[time_tool()], previous_response_id=first.id, tool_choice="none",
                   input=[{"type": "mcp_approval_response", "approval_request_id": asked.id, "approve": True}])
    assert types(approved) == ["mcp_call", "message"]
    call = approved.output[0]
    assert call.approval_request_id == asked.id and call.status == "completed" and call.output

    declined = ask(client, tools=[time_tool()], previous_response_id=first.id, tool_choice="none",
                   input=[{"type": "mcp_approval_response", "approval_request_id": asked.id, "approve": False,
                           "reason": "not now"}])
    assert types(declined) == ["message"]  # nothing ran

    # "Always allow" from a chat (the person's choice) lets it run without asking.
    Permissions(engine.store).remember("time", "get_current_time", 0, ALWAYS)
    trusted = ask(client, tools=[time_tool()], tool_choice=FORCED, max_tool_calls=1)
    assert types(trusted)[:2] == ["mcp_list_tools", "mcp_call"] and trusted.output[1].status == "completed"


def test_the_stream_carries_mcp_events(server: ApiServer) -> None:
    body = {"model": STARTER, "input": QUESTION, "temperature": 0, "max_output_tokens": 40, "stream": True,
            "tools": [time_tool(require_approval="never")], "tool_choice": FORCED, "max_tool_calls": 1}
    with httpx.Client(timeout=300) as http:
        reply = http.post(f"{server.url}/responses", json=body)
    assert reply.status_code == 200
    events = [json.loads(block.split("data: ", 1)[1]) for block in reply.text.split("\n\n")
              if block.startswith("event: ")]
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    for expected in ("response.mcp_list_tools.completed", "response.mcp_call.in_progress",
                     "response.mcp_call.completed", "response.output_text.delta"):
        assert expected in kinds, kinds
    assert kinds.index("response.mcp_call.completed") < kinds.index("response.output_text.delta")
    assert "response.function_call_arguments.delta" not in kinds  # the call is ours, not the client's
    final = events[-1]
    assert final["type"] in ("response.completed", "response.incomplete")  # 40 tokens a round
    assert [i["type"] for i in final["response"]["output"]][:2] == ["mcp_list_tools", "mcp_call"]


@pytest.mark.parametrize("tool, words", [
    ({"type": "mcp", "server_label": "time"}, "inglenook mcp allow-api time on"),
    ({"type": "mcp", "server_label": "nowhere"}, "no MCP server named 'nowhere'"),
    ({"type": "mcp", "server_label": "docs", "server_url": "https://example.com/mcp"}, "server_url"),
])
def test_servers_that_cannot_be_used_are_refused(server: ApiServer, engine: Engine, tool: dict[str, Any],
                                                 words: str) -> None:
    engine.tools.servers.update("time", allow_api=False)
    body = {"model": STARTER, "input": QUESTION, "max_output_tokens": 4, "tools": [tool]}
    reply = httpx.post(f"{server.url}/responses", json=body, timeout=60)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert words in error["message"] and error["param"] == "tools" and error["type"] == "invalid_request_error"


def test_max_output_tokens_holds_for_the_whole_response(client: openai.OpenAI) -> None:
    """Issue 45: the rounds together write at most ``max_output_tokens`` (each round had its own)."""
    response = ask(client, tools=[time_tool(require_approval="never")], tool_choice=FORCED, max_tool_calls=1,
                   max_output_tokens=44)
    assert types(response)[0] == "mcp_list_tools"  # then, on this machine, a call and an answer cut short
    assert response.usage.output_tokens <= 44
    if response.status == "incomplete":
        assert response.incomplete_details.reason == "max_output_tokens"
