"""How many files and images one request may carry (issue 45), through the official SDKs on a
real server: one over the bound is a 400 naming it in every family, before any file is
converted; at the bound the request is answered."""

from __future__ import annotations

import base64
from typing import Any

import anthropic
import openai
import pytest

from inglenook.engine.api.server import ApiServer
from inglenook.engine.api.shared.part_limits import MAX_FILE_PARTS, MAX_IMAGE_PARTS

from ..mmproj_writer import write_png
from .conftest import STARTER

pytestmark = pytest.mark.timeout(300)


def note(n: int) -> str:
    return base64.b64encode(f"Note {n}: the cat is called Miso.\n".encode()).decode()


def chat_files(count: int) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "file", "file": {"filename": f"n{n}.txt", "file_data": note(n)}}
                                   for n in range(count)]
    return [{"role": "user", "content": [*parts, {"type": "text", "text": "The cat's name?"}]}]


def test_files_over_the_bound_are_a_400_in_every_family(server: ApiServer, client: openai.OpenAI) -> None:
    over = MAX_FILE_PARTS + 1
    with pytest.raises(openai.BadRequestError, match=f"at most {MAX_FILE_PARTS}"):
        client.chat.completions.create(model=STARTER, messages=chat_files(over), max_tokens=2)  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError, match=f"at most {MAX_FILE_PARTS}"):
        client.responses.create(model=STARTER, max_output_tokens=16, input=[{"role": "user", "content": [
            *({"type": "input_file", "filename": f"n{n}.txt", "file_data": f"data:text/plain;base64,{note(n)}"}
              for n in range(over)), {"type": "input_text", "text": "The cat's name?"}]}])  # type: ignore[misc]
    claude = anthropic.Anthropic(base_url=server.url.removesuffix("/v1"), api_key="x", max_retries=0, timeout=300)
    with pytest.raises(anthropic.BadRequestError, match=f"at most {MAX_FILE_PARTS}"):
        claude.messages.create(model=STARTER, max_tokens=2, messages=[{"role": "user", "content": [
            *({"type": "document", "source": {"type": "base64", "media_type": "text/plain", "data": note(n)}}
              for n in range(over)), {"type": "text", "text": "The cat's name?"}]}])  # type: ignore[misc]


def test_files_at_the_bound_are_read(client: openai.OpenAI) -> None:
    answer = client.chat.completions.create(model=STARTER, messages=chat_files(MAX_FILE_PARTS),  # type: ignore[arg-type]
                                            max_tokens=2, temperature=0)
    assert answer.usage is not None and answer.usage.prompt_tokens > 10 * MAX_FILE_PARTS


def test_images_over_the_bound_are_a_400_in_every_family(server: ApiServer, client: openai.OpenAI,
                                                         tmp_path: Any) -> None:
    png = base64.b64encode(write_png(tmp_path / "p.png").read_bytes()).decode()
    over = MAX_IMAGE_PARTS + 1
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}}
    with pytest.raises(openai.BadRequestError, match=f"at most {MAX_IMAGE_PARTS}"):
        client.chat.completions.create(model=STARTER, max_tokens=2, messages=[{"role": "user", "content": [  # type: ignore[misc]
            *([image] * over), {"type": "text", "text": "What is shown?"}]}])
    with pytest.raises(openai.BadRequestError, match=f"at most {MAX_IMAGE_PARTS}"):
        client.responses.create(model=STARTER, max_output_tokens=16, input=[{"role": "user", "content": [
            *([{"type": "input_image", "image_url": f"data:image/png;base64,{png}"}] * over),
            {"type": "input_text", "text": "What is shown?"}]}])  # type: ignore[misc]
    claude = anthropic.Anthropic(base_url=server.url.removesuffix("/v1"), api_key="x", max_retries=0, timeout=300)
    with pytest.raises(anthropic.BadRequestError, match=f"at most {MAX_IMAGE_PARTS}"):
        claude.messages.create(model=STARTER, max_tokens=2, messages=[{"role": "user", "content": [
            *([{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}] * over),
            {"type": "text", "text": "What is shown?"}]}])  # type: ignore[misc]
