"""Images through every API family, with the official SDKs, on a real server and engine.

The vision model is a renamed copy of the real SmolLM2 with the projector the tests write
beside it (tests/mmproj_writer.py), imported as a person would import a folder; the starter
model stays text-only. Random projector weights mean the answers say nothing about the
picture: these tests check the request shapes, the image tokens counted in usage, and the
errors (a text-only model, a malformed or undecodable image) in each family's own shape.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from inglenook.engine.api.server import ApiServer
from inglenook.engine.core.engine import Engine
from inglenook.engine.runtime.vision import mtmd_available

from ..conftest import MODEL_CACHE
from ..mmproj_writer import vision_copy_of_smollm2, write_png
from .conftest import STARTER, serving

pytestmark = pytest.mark.api
needs_mtmd = pytest.mark.skipif(not mtmd_available()[0], reason=mtmd_available()[1] or "libmtmd")

IMAGE_TOKENS = 16


@pytest.fixture
def vision_engine(home, smollm2_path: Path) -> Iterator[tuple[Engine, str]]:
    model = vision_copy_of_smollm2(smollm2_path, MODEL_CACHE / "smolvision")
    engine = Engine()
    engine.update_settings(context_size=1024)
    result = engine.import_path(model.parent)
    (record,) = result.imported
    yield engine, record.id
    engine.close()


@pytest.fixture
def vision_server(vision_engine) -> Iterator[tuple[ApiServer, str]]:
    engine, model_id = vision_engine
    with serving(engine) as server:
        yield server, model_id


@pytest.fixture(scope="module")
def png_b64(tmp_path_factory: pytest.TempPathFactory) -> str:
    return base64.b64encode(write_png(tmp_path_factory.mktemp("img") / "shot.png").read_bytes()).decode()


@needs_mtmd
def test_models_list_says_vision_only_for_the_paired_model(vision_server) -> None:
    server, model_id = vision_server
    cards = {c["id"]: c for c in httpx.get(server.url + "/models", timeout=60).json()["data"]}
    assert "vision" in cards[model_id]["capabilities"]
    assert "vision" not in cards[STARTER]["capabilities"]


@needs_mtmd
def test_openai_chat_reads_an_image_url_data_url(vision_server, png_b64: str) -> None:
    server, model_id = vision_server
    client = openai.OpenAI(base_url=server.url, api_key="x", max_retries=0, timeout=300)
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png_b64}"}}
    text_only = client.chat.completions.create(model=model_id, max_tokens=4, temperature=0,
                                               messages=[{"role": "user", "content": "What is in the picture?"}])
    reply = client.chat.completions.create(
        model=model_id, max_tokens=4, temperature=0,
        messages=[{"role": "user", "content": [image, {"type": "text", "text": "What is in the picture?"}]}])
    assert reply.choices[0].finish_reason in ("stop", "length")
    # Usage counts the image's positions as prompt tokens.
    assert reply.usage.prompt_tokens >= text_only.usage.prompt_tokens + IMAGE_TOKENS


def test_each_family_refuses_images_for_a_text_only_model_with_a_400_naming_it(server: ApiServer, png_b64: str) -> None:
    oa = openai.OpenAI(base_url=server.url, api_key="x", max_retries=0, timeout=300)
    with pytest.raises(openai.BadRequestError) as caught:
        oa.chat.completions.create(model=STARTER, max_tokens=3, messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png_b64}"}},
            {"type": "text", "text": "What is this?"}]}])
    assert STARTER in caught.value.body["message"] and "text-only" in caught.value.body["message"]

    ant = anthropic.Anthropic(base_url=server.url.removesuffix("/v1"), api_key="x", max_retries=0, timeout=300)
    with pytest.raises(anthropic.BadRequestError) as refused:
        ant.messages.create(model=STARTER, max_tokens=3, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png_b64}},
            {"type": "text", "text": "What is this?"}]}])
    assert STARTER in str(refused.value)

    response = httpx.post(server.url + "/responses", timeout=300, json={"model": STARTER, "input": [
        {"role": "user", "content": [{"type": "input_image", "image_url": f"data:image/png;base64,{png_b64}"},
                                     {"type": "input_text", "text": "What is this?"}]}]})
    assert response.status_code == 400 and STARTER in response.json()["error"]["message"]


@needs_mtmd
def test_anthropic_and_responses_read_images_for_a_vision_model(vision_server, png_b64: str) -> None:
    server, model_id = vision_server
    ant = anthropic.Anthropic(base_url=server.url.removesuffix("/v1"), api_key="x", max_retries=0, timeout=300)
    message = ant.messages.create(model=model_id, max_tokens=4, temperature=0, messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png_b64}},
        {"type": "text", "text": "What is this?"}]}])
    assert message.usage.input_tokens >= IMAGE_TOKENS
    response = httpx.post(server.url + "/responses", timeout=300, json={"model": model_id, "max_output_tokens": 4,
                                                                         "input": [{"role": "user", "content": [
        {"type": "input_image", "image_url": f"data:image/png;base64,{png_b64}"},
        {"type": "input_text", "text": "What is this?"}]}]})
    assert response.status_code == 200, response.text
    assert response.json()["usage"]["input_tokens"] >= IMAGE_TOKENS


@pytest.mark.parametrize("url", [
    "data:image/png;base64,not*base64!",                                   # malformed base64
    "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 40).decode(),  # truncated PNG
    "data:image/png;base64," + base64.b64encode(b"plain text").decode(),  # not an image
    "https://example.com/cat.png",                                          # fetching is off
])
def test_bad_images_are_400s_never_500s(server: ApiServer, url: str) -> None:
    # Images are decoded (and refused) while the request is read, before any model is chosen.
    response = httpx.post(server.url + "/chat/completions", timeout=300, json={"model": STARTER, "max_tokens": 3,
        "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}]})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "messages"
