"""Smaller findings of issue 45, through the official SDKs on a real server: Anthropic
``document`` blocks with a text, content, URL or file source are read or refused (never left
out unseen), and a ``file:`` URL in an error reads as ``file:<path>``."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from inglenook.engine.api.server import ApiServer

from .conftest import STARTER

pytestmark = pytest.mark.timeout(300)

FACT = "The lighthouse keeper's cat is called Bartholomew and sleeps on the lens. " * 20


@pytest.fixture
def claude(server: ApiServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url.removesuffix("/v1"), api_key="x", max_retries=0, timeout=300)


def counted(claude: anthropic.Anthropic, *blocks: dict[str, Any]) -> int:
    return claude.messages.count_tokens(model=STARTER, messages=[{"role": "user", "content": [  # type: ignore[misc]
        *blocks, {"type": "text", "text": "What is the cat called?"}]}]).input_tokens


def test_text_and_content_documents_are_read(claude: anthropic.Anthropic) -> None:
    bare = counted(claude)
    text_doc = counted(claude, {"type": "document", "title": "log.txt",
                                "source": {"type": "text", "media_type": "text/plain", "data": FACT}})
    content_doc = counted(claude, {"type": "document", "source": {"type": "content", "content": [
        {"type": "text", "text": FACT}]}})
    assert text_doc > bare + 200 and content_doc > bare + 200


@pytest.mark.parametrize("source, words", [
    ({"type": "url", "url": "https://example.com/report.pdf"}, "does not fetch documents by URL"),
    ({"type": "file", "file_id": "file_011"}, "keeps no uploaded files"),
])
def test_url_and_file_documents_are_a_400_that_says_what_to_send(claude: anthropic.Anthropic, source: dict[str, Any],
                                                                 words: str) -> None:
    with pytest.raises(anthropic.BadRequestError, match=words):
        claude.messages.create(model=STARTER, max_tokens=4, messages=[{"role": "user", "content": [  # type: ignore[misc]
            {"type": "document", "source": source}, {"type": "text", "text": "Summarise it."}]}])


def test_a_file_url_in_an_error_keeps_its_scheme(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=STARTER, max_tokens=2, messages=[{"role": "user", "content": [  # type: ignore[misc]
            {"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}, {"type": "text", "text": "What?"}]}])
    message = caught.value.response.json()["error"]["message"]
    assert "/etc/passwd" not in message and "fil<path>" not in message and "file:<path>" in message, message


def test_a_bad_input_file_is_named_where_the_client_put_it(client: openai.OpenAI) -> None:
    binary = __import__("base64").b64encode(bytes(range(256)) * 16).decode()
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=STARTER, max_output_tokens=16, instructions="Be brief.", input=[{  # type: ignore[misc]
            "role": "user", "content": [
                {"type": "input_text", "text": "What is this?"},
                {"type": "input_file", "filename": "photo.txt", "file_data": f"data:text/plain;base64,{binary}"}]}])
    error = caught.value.response.json()["error"]
    assert error["message"].startswith("input[0].content[1]: ") and error["param"] == "input", error
