"""LoRA adapters on the real SmolLM2, through the engine's scheduler: the answer changes with
an adapter, returns to the base answer at scale 0 and without it (the same loaded model, no
reload), adapters made for another base model are refused with both names, files that are
not LoRA adapters are refused, and prefix-cache states never cross adapter sets."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest

from inglenook.engine.base.generation_events import Chunk, Finished
from inglenook.engine.base.jobs import GenerateJob
from inglenook.engine.base.lora import AdapterError, LoraSet
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.core.engine import Engine
from inglenook.engine.models.importers import import_path
from tests.lora_files import GEMMA_TARGETS, answers_differ, write_adapter

STARTER = "smollm2-135m-instruct:q4_1"
GREEDY = SamplingParams(temperature=0.0, max_tokens=10, logprobs=0)
PROMPT = [{"role": "user", "content": "Name a colour."}]


@pytest.fixture
def engine(home: Path, smollm2_path: Path):  # `home` sets INGLENOOK_HOME
    engine = Engine()
    # One thread: on a shared machine two spinning threads wait on each other far longer
    # than one takes alone (and the answers are the same).
    engine.update_settings(context_size=1024, parallel_sequences=2, threads=1)
    yield engine
    engine.close()


class Reply(NamedTuple):
    """A greedy answer with each token's log-probability. Equal replies come from one
    configuration run twice; whether two configurations differ is asked of the tokens'
    likelihoods (``answers_differ``), never of the greedy text alone, which two CPUs'
    kernels can break either way on a close call."""

    text: str
    tokens: tuple[tuple[str, float], ...]


def answer(engine: Engine, lora: LoraSet, use_cache: bool = True,
           messages: list[dict] | None = None) -> tuple[Reply, Finished]:
    job = GenerateJob(model_id=STARTER, sampling=GREEDY, lora=lora, use_cache=use_cache, messages=messages or PROMPT)
    text, logprobs, finished = "", [], None
    for event in engine.scheduler.submit(job):
        if isinstance(event, Chunk):
            text += event.text
            logprobs += event.logprobs or []
        elif isinstance(event, Finished):
            finished = event
    assert finished is not None and logprobs
    return Reply(text, tuple((entry.token, entry.logprob) for entry in logprobs)), finished


def moved(base: Reply, other: Reply) -> bool:
    return answers_differ(base.tokens, other.tokens)


def lora(engine: Engine, *uses: tuple[str, float]) -> LoraSet:
    return engine.adapters.lora_set(list(uses), engine.registry.get(STARTER))


def test_an_adapter_changes_the_answer_and_is_switched_off_without_a_reload(engine: Engine, tmp_path: Path) -> None:
    first = engine.adapters.register_file(write_adapter(tmp_path / "colour-lora.gguf", seed=1))
    second = engine.adapters.register_file(write_adapter(tmp_path / "other-lora.gguf", seed=2, strength=0.04))
    base, _ = answer(engine, LoraSet())
    model = engine.scheduler.loaded_models()[0]

    adapted, _ = answer(engine, lora(engine, (first.id, 1.0)))
    assert moved(base, adapted), (base, adapted)
    assert answer(engine, lora(engine, (first.id, 0.0)))[0] == base  # scale 0: the base model's answer
    assert answer(engine, LoraSet())[0] == base  # removed
    assert answer(engine, lora(engine, (first.id, 1.0)))[0] == adapted  # and back, the same answer
    both, _ = answer(engine, lora(engine, (first.id, 1.0), (second.id, 0.5)))  # two at once, with scales
    assert moved(base, both) and moved(adapted, both), (base, adapted, both)
    half, _ = answer(engine, lora(engine, (first.id, 0.5)))
    assert answer(engine, LoraSet())[0] == base
    assert moved(base, half), (base, half)

    # Every switch happened on the one model that was loaded first: no reload.
    assert engine.scheduler.loaded_models() == [model]
    assert model.context.adapters.loaded == 2


def test_adapters_for_another_base_model_are_refused_naming_both(engine: Engine, tmp_path: Path) -> None:
    base, _ = answer(engine, LoraSet())
    model = engine.registry.get(STARTER)
    gemma = engine.adapters.register_file(write_adapter(tmp_path / "gemma-lora.gguf", architecture="gemma3",
                                                        targets=GEMMA_TARGETS, blocks=range(2)))
    with pytest.raises(AdapterError) as refused:
        engine.adapters.lora_set([(gemma.id, 1.0)], model)
    assert "gemma3" in str(refused.value) and "llama" in str(refused.value)
    assert gemma.id in str(refused.value) and STARTER in str(refused.value)

    wide = engine.adapters.register_file(write_adapter(tmp_path / "wide-lora.gguf", targets={"attn_q": (640, 640)},
                                                       blocks=range(2)))
    with pytest.raises(AdapterError) as shapes:
        engine.adapters.lora_set([(wide.id, 1.0)], model)
    message = str(shapes.value)
    assert wide.id in message and STARTER in message and "576×576" in message and "640×4" not in message

    # Even when a job gets past the request checks, the runtime refuses it before llama.cpp
    # sees the file, and the model it was meant for keeps answering as before.
    unchecked = engine.adapters.lora_set([(wide.id, 1.0)])
    with pytest.raises(AdapterError, match="does not fit"):
        answer(engine, unchecked)
    assert answer(engine, LoraSet())[0] == base
    assert engine.scheduler.loaded_models()[0].lora_key == ""


def test_files_that_are_not_lora_adapters_get_a_clear_error(engine: Engine, tmp_path: Path, smollm2_path: Path) -> None:
    with pytest.raises(AdapterError, match="is not a LoRA adapter"):
        engine.adapters.register_file(smollm2_path)
    text = tmp_path / "notes.gguf"
    text.write_text("not a gguf at all")
    with pytest.raises(AdapterError, match="is not a LoRA adapter"):
        engine.adapters.register_file(text)
    vector = write_adapter(tmp_path / "cvec.gguf", adapter_type="control_vector", blocks=range(1))
    with pytest.raises(AdapterError, match="not a LoRA"):
        engine.adapters.register_file(vector)
    assert engine.adapters.list() == []


def test_importing_a_folder_takes_adapters_as_adapters_and_models_as_models(engine: Engine, tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    write_adapter(folder / "style-lora.gguf", blocks=range(2))
    (folder / "broken.gguf").write_bytes(b"GGUF")
    result = import_path(engine.registry, folder)
    assert [a.id for a in result.adapters] == ["style-lora"]
    assert not result.imported  # the adapter is not a model
    assert [p.name for p, _ in result.skipped] == ["broken.gguf"]
    assert engine.adapters.get(0).id == "style-lora" and engine.adapters.get("style-lora").rank == 8
    # A scan of the models folder leaves adapters alone too.
    write_adapter(engine.paths.models / "scanned-lora.gguf", blocks=range(1))
    assert [m.id for m in engine.registry.refresh()] == [STARTER]


def test_cache_keys_and_resident_states_never_cross_adapter_sets(engine: Engine, tmp_path: Path) -> None:
    adapter = engine.adapters.register_file(write_adapter(tmp_path / "cache-lora.gguf", seed=3))
    # A system prompt long enough for the API prefix cache to keep (one 64-token block and more).
    system = "You help at a bakery that sells rye bread, spelt loaves, cakes and pastries each morning. " * 5
    prompt = [{"role": "system", "content": system}, {"role": "user", "content": "Name a colour."}]
    base, base_done = answer(engine, LoraSet(), messages=prompt)
    model = engine.scheduler.loaded_models()[0]
    base_key = model.kv.state_key()

    one = lora(engine, (adapter.id, 1.0))
    adapted, adapted_done = answer(engine, one, messages=prompt)
    assert moved(base, adapted), (base, adapted)
    # Nothing computed without the adapter served the prompt with it ...
    assert adapted_done.usage.cached_tokens == 0
    adapted_key = model.kv.state_key()
    assert adapted_key != base_key and adapter.fingerprint in adapted_key
    half = lora(engine, (adapter.id, 0.5))
    answer(engine, half, messages=prompt)
    assert model.kv.state_key() not in (base_key, adapted_key)  # another scale, another key

    # ... and back on each set, its own states serve it again with the same answer.
    again, again_done = answer(engine, LoraSet(), messages=prompt)
    assert again == base and again_done.usage.cached_tokens > 0
    assert model.kv.state_key() == base_key
    assert answer(engine, one, messages=prompt)[0] == adapted
    assert base_done.usage.cached_tokens == 0
