"""Files in API requests (issue 30): OpenAI ``file`` content parts, Responses ``input_file``
and Anthropic ``document`` blocks with base64 data, read by the real conversion worker and
placed first, so the same file in a later request — from any family — is served from the
prompt cache. The official SDKs against a real server and the starter model."""

from __future__ import annotations

import base64
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from inglenook.engine.api.server import ApiServer

from ..document_files import report_pdf
from .conftest import STARTER


@pytest.fixture
def pdf_base64(tmp_path: Path) -> str:
    return base64.b64encode(report_pdf(tmp_path / "report.pdf", n_pages=3).read_bytes()).decode()


def file_message(data: str, question: str) -> dict:
    return {"role": "user", "content": [
        {"type": "file", "file": {"filename": "report.pdf", "file_data": f"data:application/pdf;base64,{data}"}},
        {"type": "text", "text": question},
    ]}


def test_the_same_file_in_three_api_families_is_read_once(server: ApiServer, client: openai.OpenAI,
                                                          pdf_base64: str) -> None:
    first = client.chat.completions.create(model=STARTER, messages=[file_message(pdf_base64, "Title of section 2?")],
                                           temperature=0, max_tokens=4)
    assert first.usage is not None and first.usage.prompt_tokens > 250  # the document is in the prompt
    second = client.chat.completions.create(model=STARTER, messages=[file_message(pdf_base64, "Who sold most?")],
                                            temperature=0, max_tokens=4)
    assert second.usage is not None and second.usage.prompt_tokens_details is not None
    assert second.usage.prompt_tokens_details.cached_tokens >= 128  # the document's block, from the cache

    claude = anthropic.Anthropic(base_url=server.url.removesuffix("/v1"), api_key="x", max_retries=0, timeout=300)
    message = claude.messages.create(model=STARTER, max_tokens=4, temperature=0, messages=[{"role": "user", "content": [
        {"type": "document", "title": "report.pdf",
         "source": {"type": "base64", "media_type": "application/pdf", "data": pdf_base64}},
        {"type": "text", "text": "What is on page 3?"},
    ]}])
    assert (message.usage.cache_read_input_tokens or 0) >= 128  # the same block, whichever family sent it

    response = client.responses.create(model=STARTER, max_output_tokens=16, temperature=0, input=[{
        "role": "user", "content": [
            {"type": "input_file", "filename": "report.pdf", "file_data": f"data:application/pdf;base64,{pdf_base64}"},
            {"type": "input_text", "text": "Name a region."},
        ]}])
    assert response.usage is not None and response.usage.input_tokens_details.cached_tokens >= 128


def test_a_bad_file_is_a_400_that_says_why(server: ApiServer) -> None:
    binary = base64.b64encode(bytes(range(256)) * 16).decode()
    body = {"model": STARTER, "max_tokens": 4, "messages": [
        {"role": "user", "content": [{"type": "file", "file": {"filename": "photo.txt", "file_data": binary}},
                                     {"type": "text", "text": "What is this?"}]}]}
    reply = httpx.post(f"{server.url}/chat/completions", json=body, timeout=120)
    assert reply.status_code == 400
    assert "photo.txt is a binary file" in reply.json()["error"]["message"]
    body["messages"][0]["content"][0]["file"] = {"file_id": "file-123"}
    reply = httpx.post(f"{server.url}/chat/completions", json=body, timeout=120)
    assert reply.status_code == 400 and "keeps no uploaded files" in reply.json()["error"]["message"]
