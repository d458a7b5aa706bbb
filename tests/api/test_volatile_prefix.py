"""A client that changes one line at the top of its system prompt every request (Claude
Code's attribution header does) still gets the rest of its prompt from the cache."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from inglenook.engine.core.engine import Engine
from inglenook.engine.text.volatile_prompt import VOLATILE_LINES

from .conftest import STARTER, serving

INSTRUCTIONS = "\n".join(
    f"Rule {i}: when the user asks about topic number {i}, answer briefly and politely, citing rule {i}."
    for i in range(60)
)


@pytest.fixture
def long_engine(home, smollm2_path) -> Iterator[Engine]:  # `home` sets INGLENOOK_HOME
    VOLATILE_LINES.clear()
    engine = Engine()
    engine.update_settings(context_size=4096)
    yield engine
    engine.close()


@pytest.fixture
def long_client(long_engine: Engine) -> Iterator[openai.OpenAI]:
    with serving(long_engine) as server:
        yield openai.OpenAI(base_url=server.url, api_key="x", max_retries=0, timeout=600)


def turn(client: openai.OpenAI, header: str, history: list[dict]) -> tuple[float, str]:
    messages = [{"role": "system", "content": f"{header}\n{INSTRUCTIONS}"}, *history]
    reply = client.chat.completions.create(model=STARTER, messages=messages, temperature=0, max_tokens=8)
    usage = reply.usage
    return usage.prompt_tokens_details.cached_tokens / usage.prompt_tokens, reply.choices[0].message.content


def test_second_turn_reads_over_90_percent_from_the_cache_despite_a_changing_header(long_client: openai.OpenAI) -> None:
    history = [{"role": "user", "content": "Tell me about topic 3."}]
    first, answer = turn(long_client, "x-anthropic-billing-header: cc_version=2.1.37.0d9; cc_entrypoint=cli; cch=fa690;", history)
    assert first == 0
    history += [{"role": "assistant", "content": answer}, {"role": "user", "content": "And topic 4?"}]
    second, _ = turn(long_client, "x-anthropic-billing-header: cc_version=2.1.37.0d9; cc_entrypoint=cli; cch=0aaa9;", history)
    assert second > 0.9


def test_a_header_that_does_not_look_volatile_is_learned_by_the_third_turn(long_client: openai.OpenAI) -> None:
    history = [{"role": "user", "content": "Tell me about topic 3."}]
    turn(long_client, "Session turn: 1", history)
    shares = []
    for n in (2, 3):
        history += [{"role": "assistant", "content": "Noted."}, {"role": "user", "content": f"And topic {n + 3}?"}]
        shares.append(turn(long_client, f"Session turn: {n}", history)[0])
    assert shares[0] < 0.5, "the second turn is where the change is first seen"
    assert shares[1] > 0.9
