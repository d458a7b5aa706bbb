"""Tool calls with the real chat templates of popular GGUFs, carried by small synthetic GGUFs.

The templates are llama.cpp's own copies (``models/templates/*.jinja``, taken from the models'
published metadata), read from the pinned llama-cpp-python sdist that ``scripts/llama_build.py``
downloads for the build; nothing of them is kept in this repository. Each one is written into
a GGUF header, read back by our header reader, rendered by our template code with an
assistant turn that calls tools, and the text it renders — exactly what that model was trained
to write — is parsed back by ``tool_call_parser``, streamed and whole.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from inglenook.engine.base.gguf import read_gguf
from inglenook.engine.base.protocol import ChatCompletionRequest
from inglenook.engine.text.chat_template import ChatTemplate
from inglenook.engine.text.tool_call_parser import (
    ArgumentsDelta, CallDone, Event, TextPiece, ToolCallParser, implied_format, parameter_types,
)
from inglenook.engine.text.tool_calls import TemplateAbilities, engine_messages
from tests.gguf_writer import write_gguf

RECIPE = Path(__file__).resolve().parents[2] / "scripts" / "llama_build.py"

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "add", "description": "Add two integers", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}},
]
WEATHER = ("get_weather", {"city": "Paris", "unit": "celsius"})
ADD = ("add", {"a": 2, "b": 3})

# (template file, the format it implies, the tokens it opens and ends an assistant turn with,
# whether it renders two calls in one turn: Llama 3.1's template refuses that)
CASES = [
    ("Qwen-Qwen2.5-7B-Instruct", "hermes", True),
    ("NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "hermes", True),
    ("Qwen-Qwen3-0.6B", "hermes", True),
    ("Qwen3-Coder", "qwen3-coder", True),
    ("meta-llama-Llama-3.1-8B-Instruct", "llama3", False),
    ("meta-llama-Llama-3.2-3B-Instruct", "llama3", False),
    ("meta-llama-Llama-3.3-70B-Instruct", "llama3", False),
    ("mistralai-Mistral-Nemo-Instruct-2407", "mistral", True),
    ("Mistral-Small-3.2-24B-Instruct-2506", "mistral", True),
    ("unsloth-mistral-Devstral-Small-2507", "mistral", True),
]
# What may remain around the calls: end-of-turn tokens and an empty reasoning block.
END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "</s>", "<think>", "</think>")


def _recipe() -> Any:
    spec = importlib.util.spec_from_file_location("inglenook_llama_build", RECIPE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The named templates from the build's sdist (skipped, saying where it looked, if absent)."""
    recipe = _recipe()
    sdist = recipe.cache_root() / "sdists" / recipe.SDIST_NAME
    if not sdist.is_file():
        pytest.skip(f"the llama-cpp-python sdist the build fetches is not at {sdist} (run `make setup`)")
    wanted = {f"{name}.jinja" for name, _, _ in CASES}
    found: dict[str, str] = {}
    with tarfile.open(sdist) as archive:
        for member in archive:
            parts = member.name.split("/")
            if member.isfile() and parts[-2:-1] == ["templates"] and "llama.cpp/models" in member.name \
                    and parts[-1] in wanted:
                extracted = archive.extractfile(member)
                assert extracted is not None
                found[parts[-1].removesuffix(".jinja")] = extracted.read().decode()
    missing = sorted(n.removesuffix(".jinja") for n in wanted) if not found else \
        sorted(n.removesuffix(".jinja") for n in wanted if n.removesuffix(".jinja") not in found)
    assert not missing, f"{sdist} lacks these templates: {missing}"
    return found


def _carried_by_a_gguf(tmp_path: Path, source: str) -> str | None:
    path = write_gguf(tmp_path / "templated.gguf", {"tokenizer.chat_template": source})
    return read_gguf(path).chat_template


def _assistant_turn(template: ChatTemplate, calls: list[tuple[str, dict]]) -> str:
    """What the template renders for an assistant turn that makes ``calls``: the model's own format."""
    openai_messages: list[dict[str, Any]] = [
        {"role": "user", "content": "What is the weather in Paris, and what is 2 + 3?"},
        {"role": "assistant", "content": "", "tool_calls": [
            # Mistral's templates want ids of nine letters and digits.
            {"id": f"call{i:05d}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
            for i, (name, arguments) in enumerate(calls)]},
    ]
    request = ChatCompletionRequest.model_validate({"model": "m", "messages": openai_messages, "tools": TOOLS})
    messages = engine_messages(request.messages, TemplateAbilities.of(template.source), None)
    before = template.render(messages[:1], add_generation_prompt=True, tools=TOOLS)
    after = template.render(messages, add_generation_prompt=False, tools=TOOLS)
    assert after.startswith(before), "the template renders the conversation's start differently once it goes on"
    return after[len(before):]


def _parse(text: str, step: int) -> list[Event]:
    ids = (f"call_{i}" for i in itertools.count())
    parser = ToolCallParser(["get_weather", "add"], lambda: next(ids), parameter_types(TOOLS))
    events: list[Event] = []
    for i in range(0, len(text), step):
        events += parser.feed(text[i:i + step])
    return events + parser.finish()


@pytest.mark.parametrize(("name", "expected_format", "parallel"), CASES, ids=[c[0] for c in CASES])
def test_a_real_template_offers_tools_and_its_calls_are_parsed_back(
        templates: dict[str, str], tmp_path: Path, name: str, expected_format: str, parallel: bool) -> None:
    source = _carried_by_a_gguf(tmp_path, templates[name])
    assert source == templates[name]
    assert implied_format(source) == expected_format
    assert TemplateAbilities.of(source).tools
    template = ChatTemplate(source, bos_token="<s>", eos_token="</s>")
    offered = template.render([{"role": "user", "content": "Hi"}], tools=TOOLS)
    assert "get_weather" in offered and "Add two integers" in offered  # the tools reach the prompt
    calls = [WEATHER, ADD] if parallel else [WEATHER]
    written = _assistant_turn(template, calls)
    for step in (1, 7, len(written)):
        events = _parse(written, step)
        parsed = [(e.call.function.name, json.loads(e.call.function.arguments)) for e in events if isinstance(e, CallDone)]
        assert parsed == calls, (step, written)
        leftover = "".join(e.text for e in events if isinstance(e, TextPiece))
        for marker in END_OF_TURN:
            leftover = leftover.replace(marker, "")
        assert not leftover.strip(), (step, written, leftover)
    # JSON arguments stream as they are written, once the name is known: Mistral Nemo's
    # template writes "arguments" before "name" (sorted keys), so its calls come whole.
    name_first = "[ARGS]" in written or \
        written.find('"name"') < max(written.find('"arguments"'), written.find('"parameters"'))
    if expected_format != "qwen3-coder" and name_first:
        pieces = [e for e in _parse(written, 1) if isinstance(e, ArgumentsDelta) and e.index == 0]
        assert len(pieces) > 3, written
