"""The Messages API's translation to the chat plan, its stop-sequence watch and error shape."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inglenook.engine.api.anthropic.out import StopWatch, TokenCounts
from inglenook.engine.api.anthropic.protocol import MessagesRequest, chat_request, stop_sequences
from inglenook.engine.api.shared.anthropic_errors import anthropic_error, error_type, is_messages_path
from inglenook.engine.base.errors import InvalidRequest, ModelNotFound, QueueFull
from inglenook.engine.base.protocol import NamedToolChoice

WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def request(**fields: object) -> MessagesRequest:
    return MessagesRequest.model_validate({"model": "m", "max_tokens": 8, **fields})


def test_system_blocks_become_one_system_message() -> None:
    body = request(system=[{"type": "text", "text": "One."}, {"type": "text", "text": "Two.", "cache_control": {"type": "ephemeral"}}],
                   messages=[{"role": "user", "content": "Hi"}])
    messages = chat_request(body).messages
    assert [(m.role, m.content) for m in messages] == [("system", "One.\n\nTwo."), ("user", "Hi")]


def test_system_messages_between_turns_as_claude_code_sends_them() -> None:
    body = request(system="You are an agent.", messages=[
        {"role": "user", "content": [{"type": "text", "text": "Say hello."}]},
        {"role": "system", "content": "Available agent types: Explore, Plan."},
        {"role": "assistant", "content": "Hello."},
        {"role": "system", "content": [{"type": "text", "text": "The user is back."}]},
        {"role": "user", "content": "Again."},
    ])
    messages = chat_request(body).messages
    assert [(m.role, m.content) for m in messages] == [
        ("system", "You are an agent.\n\nAvailable agent types: Explore, Plan."),  # before any answer: joins the prompt
        ("user", "Say hello."), ("assistant", "Hello."), ("system", "The user is back."), ("user", "Again."),
    ]


def test_tool_use_and_tool_result_blocks_become_calls_and_tool_messages_in_order() -> None:
    body = request(
        tools=[WEATHER],
        messages=[
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "two calls", "signature": "sig"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Rome"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": True,
                 "content": [{"type": "text", "text": "no station"}, {"type": "text", "text": "try later"}]},
                {"type": "text", "text": "And tomorrow?"},
            ]},
        ],
    )
    messages = chat_request(body).messages
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool", "user"]
    assistant = messages[1]
    assert assistant.content == "Let me look."  # the thinking block is left out
    assert [(c.id, c.function.name, c.function.arguments) for c in assistant.tool_calls or []] == [
        ("toolu_1", "get_weather", '{"city": "Paris"}'), ("toolu_2", "get_weather", '{"city": "Rome"}'),
    ]
    assert (messages[2].tool_call_id, messages[2].content) == ("toolu_1", "sunny")
    assert (messages[3].tool_call_id, messages[3].content) == ("toolu_2", "Error: no station\ntry later")
    assert messages[4].content == "And tomorrow?"


def test_server_tools_are_left_out_with_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    with caplog.at_level(logging.INFO, logger="inglenook.engine.api.anthropic.protocol"):
        tools = chat_request(request(tools=[WEATHER, search], messages=[{"role": "user", "content": "Hi"}])).tools
    assert [t.function.name for t in tools or []] == ["get_weather"]
    assert "web_search" in caplog.text
    only_server = chat_request(request(tools=[search], messages=[{"role": "user", "content": "Hi"}]))
    assert only_server.tools is None


def test_long_tool_names_of_mcp_servers_are_accepted() -> None:
    name = "mcp__" + "x" * 100
    tools = chat_request(request(tools=[{**WEATHER, "name": name}], messages=[{"role": "user", "content": "Hi"}])).tools
    assert tools is not None and tools[0].function.name == name


@pytest.mark.parametrize(("choice", "expected"), [
    ({"type": "auto"}, None),
    ({"type": "any"}, "required"),
    ({"type": "none"}, "none"),
])
def test_tool_choice_maps_to_chat_tool_choice(choice: dict, expected: object) -> None:
    body = request(tools=[WEATHER], tool_choice=choice, messages=[{"role": "user", "content": "Hi"}])
    assert chat_request(body).tool_choice == expected


def test_named_tool_choice_and_disabled_parallel_calls() -> None:
    body = request(tools=[WEATHER], tool_choice={"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
                   messages=[{"role": "user", "content": "Hi"}])
    chat = chat_request(body)
    assert isinstance(chat.tool_choice, NamedToolChoice) and chat.tool_choice.function.name == "get_weather"
    assert chat.parallel_tool_calls is False


@pytest.mark.parametrize(("fields", "fragment"), [
    ({"messages": [{"role": "user", "content": [{"type": "tool_result"}]}]}, "tool_use_id"),
    ({"messages": [{"role": "assistant", "content": [{"type": "tool_use", "input": {}}]}]}, "id and a name"),
    ({"messages": [{"role": "user", "content": [{"type": "hologram"}]}]}, "hologram"),
    ({"messages": [{"role": "user", "content": "Hi"}], "tools": [{"name": "no_schema"}]}, "input_schema"),
    ({"messages": [{"role": "user", "content": "Hi"}], "tool_choice": {"type": "tool"}}, "name"),
    ({"messages": [{"role": "user", "content": "Hi"}], "system": [{"type": "image"}]}, "system"),
])
def test_unsupported_input_is_a_clear_error(fields: dict, fragment: str) -> None:
    with pytest.raises(InvalidRequest, match=fragment):
        chat_request(request(**fields))


def test_user_images_go_to_the_model_and_tool_result_images_are_left_out_with_a_note(
        caplog: pytest.LogCaptureFixture) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    document = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "Plain notes."}}
    body = request(messages=[
        {"role": "user", "content": [image, {"type": "text", "text": "What is this?"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [image, document]}]},
    ])
    with caplog.at_level(logging.INFO, logger="inglenook.engine.api.anthropic.protocol"):
        messages = chat_request(body).messages
    # A user's image is read by a vision model (a text-only one answers 400 naming itself).
    assert [(p.type, p.text, p.image_url) for p in messages[0].content] == [
        ("image_url", None, {"url": "data:image/png;base64,iVBORw0KGgo="}), ("text", "What is this?", None)]
    assert messages[2].content == "[image left out: this model reads text only]\nPlain notes."
    assert "image block is left out" in caplog.text


def test_stop_sequences_are_bounded() -> None:
    assert stop_sequences(request(messages=[{"role": "user", "content": "Hi"}], stop_sequences=["\n\n"])) == ("\n\n",)
    with pytest.raises(InvalidRequest, match="at most"):
        stop_sequences(request(messages=[{"role": "user", "content": "Hi"}], stop_sequences=["a"] * 17))
    with pytest.raises(InvalidRequest, match="between 1"):
        stop_sequences(request(messages=[{"role": "user", "content": "Hi"}], stop_sequences=[""]))


def test_stop_watch_names_the_first_stop_sequence_even_across_pieces() -> None:
    watch = StopWatch(("END", "STOP"))
    shown = "".join(watch.feed(p) for p in ["Hello S", "TO", "P and END"])
    assert (shown, watch.matched) == ("Hello ", "STOP")
    assert watch.flush() == ""


@settings(max_examples=50, deadline=None)
@given(
    text=st.text(alphabet="abXY", max_size=30),
    stops=st.lists(st.text(alphabet="abXY", min_size=1, max_size=3), min_size=1, max_size=3),
    cuts=st.lists(st.integers(min_value=0, max_value=30), max_size=5),
)
def test_stop_watch_matches_a_single_search_of_the_whole_text(text: str, stops: list[str], cuts: list[int]) -> None:
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    watch = StopWatch(tuple(stops))
    shown = "".join(watch.feed(text[a:b]) for a, b in zip(bounds, bounds[1:])) + watch.flush()
    hits = [(text.find(s), s) for s in stops if s in text]
    if hits:
        first = min(hits)
        assert shown == text[: first[0]]
        assert watch.matched is not None and text.find(watch.matched) == first[0]
    else:
        assert (shown, watch.matched) == (text, None)


def test_usage_counts_cache_reads_apart_from_new_input() -> None:
    assert TokenCounts(prompt=100, cached=80, output=5).usage() == {
        "input_tokens": 20, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 80, "output_tokens": 5,
    }


def test_errors_take_anthropics_shape_and_statuses() -> None:
    status, body, headers = anthropic_error(QueueFull("busy", retry_after_s=3))
    assert (status, body["error"]["type"], headers.get("Retry-After")) == (529, "overloaded_error", "3")
    status, body, _ = anthropic_error(ModelNotFound("the model 'x' does not exist"))
    assert (status, body) == (404, {"type": "error", "error": {"type": "not_found_error", "message": "the model 'x' does not exist"}})
    assert [error_type(s) for s in (400, 401, 403, 413, 422, 500, 503)] == [
        "invalid_request_error", "authentication_error", "permission_error", "request_too_large",
        "invalid_request_error", "api_error", "api_error",
    ]
    assert is_messages_path("/v1/messages") and is_messages_path("/v1/messages/count_tokens")
    assert not is_messages_path("/v1/messagesx") and not is_messages_path("/v1/chat/completions")
