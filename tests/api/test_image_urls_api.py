"""Image URLs through every API family (issue 31), with the official SDKs, on a real server:
refused by default, and refused as loopback even when fetching is on, each as a 400 in the
family's own shape, before anything reaches the image's server (a real one on loopback)."""

from __future__ import annotations

import anthropic
import openai
import pytest

from ..image_server import image_server
from ..mmproj_writer import write_png
from .conftest import STARTER

pytestmark = pytest.mark.api


def _ask_every_family(server, url: str) -> dict[str, str]:
    """Each family's 400 message for a question with the image at ``url``."""
    said: dict[str, str] = {}
    client = openai.OpenAI(base_url=server.url, api_key="x", max_retries=0, timeout=120)
    with pytest.raises(openai.BadRequestError) as chat:
        client.chat.completions.create(model=STARTER, max_tokens=4, messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "What is this?"}]}])
    said["chat"] = chat.value.body["message"]
    with pytest.raises(openai.BadRequestError) as responses:
        client.responses.create(model=STARTER, max_output_tokens=16, input=[{"role": "user", "content": [
            {"type": "input_image", "image_url": url}, {"type": "input_text", "text": "What is this?"}]}])
    said["responses"] = responses.value.body["message"]
    claude = anthropic.Anthropic(base_url=server.url.removesuffix("/v1"), api_key="x", max_retries=0, timeout=120)
    with pytest.raises(anthropic.BadRequestError) as messages:
        claude.messages.create(model=STARTER, max_tokens=4, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "url", "url": url}}, {"type": "text", "text": "What is this?"}]}])
    assert messages.value.body["type"] == "error" and messages.value.body["error"]["type"] == "invalid_request_error"
    said["messages"] = messages.value.body["error"]["message"]
    return said


def test_image_urls_are_refused_by_default_and_loopback_always(engine, server, tmp_path) -> None:
    png = write_png(tmp_path / "shot.png").read_bytes()
    with image_server(png) as images:
        url = f"{images.url}/shot.png"
        assert not engine.settings.api_fetch_image_urls
        for family, message in _ask_every_family(server, url).items():
            assert "fetching image URLs is off" in message, family
        engine.update_settings(api_fetch_image_urls=True)
        for family, message in _ask_every_family(server, url).items():
            assert "is a loopback address" in message and "public addresses only" in message, family
        # A name that resolves to the machine itself is refused the same way.
        for family, message in _ask_every_family(server, f"http://localhost:{images.port}/shot.png").items():
            assert "loopback address" in message, family
        assert images.requests == []  # nothing reached the image's server
