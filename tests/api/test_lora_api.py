"""llama-server's LoRA surface on a real server: ``GET /lora-adapters`` and the ``lora`` field,
through the official openai SDK (``extra_body``) and raw httpx."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest

from inglenook.engine.api.server import ApiServer
from inglenook.engine.core.engine import Engine
from tests.api.conftest import STARTER
from tests.lora_files import GEMMA_TARGETS, TokenLogprobs, answers_differ, write_adapter

pytestmark = pytest.mark.api


@pytest.fixture
def client(engine: Engine, server: ApiServer) -> openai.OpenAI:
    # One thread per step: on a shared machine two spinning threads wait on each other far
    # longer than one takes alone (the answers are the same). A longer wait than the shared
    # fixture's too: these tests ask for several answers in a row.
    engine.update_settings(threads=1)
    return openai.OpenAI(base_url=server.url, api_key="not-needed", max_retries=0, timeout=1800)


def ask(client: openai.OpenAI, lora: list[dict] | None = None) -> tuple[str, TokenLogprobs]:
    """The answer and its tokens with their log-probabilities."""
    extra = {"lora": lora} if lora is not None else None
    reply = client.chat.completions.create(model=STARTER, messages=[{"role": "user", "content": "Name a colour."}],
                                           max_tokens=6, temperature=0, logprobs=True, extra_body=extra)
    choice = reply.choices[0]
    assert choice.logprobs is not None and choice.logprobs.content
    return choice.message.content or "", tuple((entry.token, entry.logprob) for entry in choice.logprobs.content)


def complete(server: ApiServer, lora: list[dict] | None = None) -> tuple[str, TokenLogprobs]:
    """``/v1/completions`` through raw httpx: the text and its tokens' log-probabilities."""
    body: dict = {"model": STARTER, "prompt": "My favourite colour is", "max_tokens": 8, "temperature": 0,
                  "logprobs": 0}
    if lora is not None:
        body["lora"] = lora
    reply = httpx.post(f"{server.url}/completions", timeout=1800, json=body)
    assert reply.status_code == 200, reply.text
    choice = reply.json()["choices"][0]
    logprobs = choice["logprobs"]
    return choice["text"], tuple(zip(logprobs["tokens"], logprobs["token_logprobs"], strict=True))


def test_adapters_are_listed_and_applied_per_request(engine: Engine, server: ApiServer, client: openai.OpenAI,
                                                     tmp_path: Path) -> None:
    engine.adapters.register_file(write_adapter(tmp_path / "colour-lora.gguf", seed=1))
    engine.adapters.register_file(write_adapter(tmp_path / "gemma-lora.gguf", architecture="gemma3",
                                                targets=GEMMA_TARGETS, blocks=range(1)))
    listed = httpx.get(server.url.removesuffix("/v1") + "/lora-adapters", timeout=30)
    assert listed.status_code == 200
    assert listed.json() == [
        {"id": 0, "path": "colour-lora.gguf", "name": "colour-lora", "scale": 0.0, "architecture": "llama",
         "base_model": None, "rank": 8},
        {"id": 1, "path": "gemma-lora.gguf", "name": "gemma-lora", "scale": 0.0, "architecture": "gemma3",
         "base_model": None, "rank": 8},
    ]
    assert str(tmp_path) not in listed.text  # names, never where the files lie

    # "Changed" is measured on the tokens' log-probabilities, not on greedy text: on some
    # CPUs' kernels the adapter moves them without changing which token wins (tests/lora_files.py).
    base = ask(client)
    adapted = ask(client, [{"id": 0, "scale": 1.0}])
    assert answers_differ(base[1], adapted[1]), (base, adapted)
    # The same configuration twice gives the same answer, to the last bit.
    assert ask(client, [{"id": "colour-lora", "scale": 1.0}]) == adapted  # by name too
    assert ask(client, [{"id": 0, "scale": 0.0}]) == base
    assert ask(client) == base

    # /v1/completions applies the adapter too (the same text on some CPUs, another likelihood).
    plain = complete(server)
    adapted_text = complete(server, [{"id": 0, "scale": 1.0}])
    assert answers_differ(plain[1], adapted_text[1]), (plain, adapted_text)
    assert complete(server) == plain


def test_unknown_or_unfitting_adapters_are_400s_in_the_api_shape(engine: Engine, server: ApiServer,
                                                                 client: openai.OpenAI, tmp_path: Path) -> None:
    engine.adapters.register_file(write_adapter(tmp_path / "gemma-lora.gguf", architecture="gemma3",
                                                targets=GEMMA_TARGETS, blocks=range(1)))
    for lora, words in (([{"id": 7, "scale": 1.0}], "no LoRA adapter 7"),
                        ([{"id": "nope", "scale": 1.0}], "no LoRA adapter 'nope'"),
                        ([{"id": 0, "scale": float("1e9")}], "scale must be between"),
                        ([{"id": 0, "scale": 1.0}], "made for the gemma3 architecture")):
        with pytest.raises(openai.BadRequestError) as refused:
            ask(client, lora)
        error = refused.value.body
        assert isinstance(error, dict) and error["param"] == "lora" and words in error["message"], error
        assert str(tmp_path) not in error["message"]
    assert ask(client)[0]  # the base model keeps answering
