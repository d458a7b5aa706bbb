"""Images through llama.cpp's libmtmd with the real SmolLM2 and a projector the tests write.

No small vision GGUF ships on PyPI, so ``tests/mmproj_writer.py`` writes a Gemma 3 style
projector with random weights whose output width is SmolLM2's 576, and places it beside a
link to the real SmolLM2 file: the engine pairs them as it pairs any model with its
``mmproj-*.gguf``. Everything after the projector's weights is real: Pillow's decoding,
libmtmd's preprocessing and encoder, the image's vectors in llama.cpp batches, the prefix
cache keyed by the image's content and state files across a restart. What random weights
cannot show is a sensible answer about the picture; the tests check behaviour instead
(which rows are read, what is cached, that restored state answers as a fresh prefill).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from inglenook.engine.base import ImageInput, InvalidRequest, decode_image, image_from_rgb
from inglenook.engine.base.sampling import SamplingParams
from inglenook.engine.runtime.model import LoadedModel
from inglenook.engine.runtime.model_loading import LoadOptions
from inglenook.engine.runtime.vision import is_image_id, mtmd_available
from inglenook.engine.store.statefile import SUFFIX

from ..mmproj_writer import write_mmproj, write_png
from ..prefix_rule import served
from .conftest import record_for
from .test_prefix_cache import ask, close, scheduler_at

pytestmark = pytest.mark.skipif(not mtmd_available()[0], reason=mtmd_available()[1] or "libmtmd")

GREEDY = SamplingParams(temperature=0.0, max_tokens=8, seed=3)
IMAGE_TOKENS = 16  # 64x64 pixels, 8x8 patches, pooled 2x2
QUESTION = ("Look at this picture from the bakery's shop window and describe in a few words what you see, "
            "mentioning colours, shapes and anything that looks like bread or cakes. ") * 3


@pytest.fixture(scope="module")
def vision_folder(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("vision-model")
    os.symlink(smollm2_path, folder / "SmolLM2-135M-Instruct-Q4_1.gguf")
    write_mmproj(folder / "mmproj-SmolLM2-135M-Instruct-f32.gguf")
    return folder


@pytest.fixture(scope="module")
def vision_record(vision_folder: Path):
    return record_for(vision_folder / "SmolLM2-135M-Instruct-Q4_1.gguf", "smolvision")


@pytest.fixture(scope="module")
def picture(tmp_path_factory: pytest.TempPathFactory) -> ImageInput:
    path = write_png(tmp_path_factory.mktemp("images") / "shot.png", seed=1)
    return decode_image(path.read_bytes())


def image_turn(image: ImageInput, text: str = QUESTION) -> list[dict]:
    return [{"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": text}]}]


def test_libmtmd_encodes_a_png_into_smollm2s_batch(vision_record, picture: ImageInput):
    model = LoadedModel(vision_record, LoadOptions(context_size=1024))
    try:
        prompt = model.chat_tokens(image_turn(picture))
        image_rows = [t for t in prompt if is_image_id(t)]
        assert len(image_rows) == IMAGE_TOKENS
        text_rows = [t for t in prompt if not is_image_id(t)]
        assert all(0 <= t < model.n_vocab for t in text_rows)
        events = list(model.generate(prompt, GREEDY))
        assert events[-1].usage.prompt_tokens == len(prompt)
        assert model.vision.table().encoder.timings.images_encoded == 1
        # The same picture again: the same placeholder ids, no second encoding.
        assert model.chat_tokens(image_turn(picture)) == prompt
        # Another picture: other ids, and other vectors from the encoder.
        other = decode_image(write_png(Path(vision_record.path).parent / "other.png", seed=2).read_bytes())
        other_prompt = model.chat_tokens(image_turn(other))
        other_rows = [t for t in other_prompt if is_image_id(t)]
        assert other_rows != image_rows
        table = model.vision.table()
        assert (table.rows(image_rows) != table.rows(other_rows)).any()
    finally:
        model.close()


def test_a_text_only_model_refuses_images_naming_itself(smollm2, picture: ImageInput):
    with pytest.raises(InvalidRequest, match="smollm2-135m-instruct:q4_1 is a text-only model"):
        smollm2.chat_tokens(image_turn(picture))


def test_greedy_answers_about_an_image_are_repeatable_and_image_dependent(vision_record, picture: ImageInput):
    model = LoadedModel(vision_record, LoadOptions(context_size=1024))
    try:
        prompt = model.chat_tokens(image_turn(picture))
        first = [t for e in model.generate(prompt, GREEDY, reuse_kv=False) for t in getattr(e, "token_ids", [])]
        again = [t for e in model.generate(prompt, GREEDY, reuse_kv=False) for t in getattr(e, "token_ids", [])]
        assert first and first == again
    finally:
        model.close()


def test_follow_ups_and_restarts_reuse_the_image_and_answer_as_a_fresh_prefill(vision_record, picture: ImageInput,
                                                                               tmp_path: Path):
    first = image_turn(picture)
    scheduler, cache = scheduler_at(tmp_path, vision_record)
    try:
        _, answer, _ = ask(scheduler, first, conversation_id=1)
        (model,) = scheduler.loaded_models()
        first_prompt = model.chat_tokens(first)
        image_end = max(i for i, t in enumerate(first_prompt) if is_image_id(t)) + 1
        follow_up = first + [{"role": "assistant", "content": answer}, {"role": "user", "content": "And the colours?"}]
        cached_ids, _, cached = ask(scheduler, follow_up, conversation_id=1)
        fresh_ids, _, fresh = ask(scheduler, follow_up, use_cache=False)
        assert cached.usage.cached_tokens >= image_end  # the image is in the reused prefix
        assert fresh.usage.cached_tokens == 0
        assert cached_ids == fresh_ids
        encoded_before_restart = model.vision.table().encoder.timings.images_encoded
        assert encoded_before_restart >= 1
    finally:
        close(scheduler, cache)
    assert list(tmp_path.glob(f"conv-*{SUFFIX}"))

    scheduler, cache = scheduler_at(tmp_path, vision_record)  # a restart: a fresh model, the same files
    try:
        restored_ids, _, restored = ask(scheduler, follow_up, conversation_id=1)
        (model,) = scheduler.loaded_models()
        assert restored.usage.cached_tokens >= image_end
        # Restored state answers as the fresh prefill did, and the image was never encoded again.
        assert restored_ids == fresh_ids
        assert model.vision.table().encoder.timings.images_encoded == 0
    finally:
        close(scheduler, cache)


def test_a_reused_prefix_that_ends_inside_an_image_answers_as_a_full_prefill(vision_record, picture: ImageInput):
    # Questions short enough that the slot's reusable prefix ends inside the image: it ends
    # on an aligned position (for a model with 32-token alignment, within the image's block
    # after a short first question) and leaves the prompt's last tokens to read again
    # (tests/prefix_rule.py: with a model that resumes anywhere, the follow-up must be
    # shorter than those tokens). How short depends on both, so the first pair that does it.
    model = LoadedModel(vision_record, LoadOptions(context_size=1024))
    try:
        long_follow_up = ("Which colours does it have? Name three of them, say which one covers most of the "
                          "picture, and whether any shapes or letters can be seen in it at all.")
        pairs = [(question, follow) for follow in (long_follow_up, "Colours?", "")
                 for question in ("What is this?", "What?", "")]
        for question, follow in pairs:
            first = image_turn(picture, question)
            prompt = model.chat_tokens(first)
            image_at = [i for i, t in enumerate(prompt) if is_image_id(t)]
            follow_up = first + [{"role": "assistant", "content": "A picture."}, {"role": "user", "content": follow}]
            longer = model.chat_tokens(follow_up)
            if image_at[0] < served(len(prompt), len(longer)) <= image_at[-1]:
                break
        list(model.generate(prompt, GREEDY))
        assert image_at[0] < model.kv.reusable_prefix(longer, model.slots[0]) <= image_at[-1]  # the case under test
        reused = answer_logprobs(model, longer, reuse_kv=True)
        slot = model.slots[0]
        assert slot.prefilled > image_at[-1]  # counted as prefilled, so the next turn may reuse it
        fresh = answer_logprobs(model, longer, reuse_kv=False)
        # The same tokens with the same log-probabilities as a full prefill of the prompt.
        assert reused == fresh
    finally:
        model.close()


def answer_logprobs(model: LoadedModel, prompt: list[int], reuse_kv: bool) -> list[tuple[int, float]]:
    sampling = SamplingParams(temperature=0.0, max_tokens=4, seed=3, logprobs=0)
    out = []
    for event in model.generate(prompt, sampling, reuse_kv=reuse_kv):
        for token, logprob in zip(getattr(event, "token_ids", []), getattr(event, "logprobs", None) or []):
            out.append((token, logprob.logprob))
    assert out
    return out


def test_an_image_question_beside_text_streams_agrees_with_its_lone_self(
        home, smollm2_path: Path, picture: ImageInput) -> None:
    from inglenook.engine.base.generation_events import Chunk
    from inglenook.engine.base.jobs import GenerateJob
    from inglenook.engine.core.engine import Engine

    from ..conftest import MODEL_CACHE
    from ..mmproj_writer import vision_copy_of_smollm2

    model = vision_copy_of_smollm2(smollm2_path, MODEL_CACHE / "smolvision")
    probe = SamplingParams(temperature=0.0, max_tokens=4, logprobs=0)
    with Engine() as engine:
        engine.update_settings(parallel_sequences=3, context_size=1024, prefill_chunk=32)
        (record,) = engine.import_path(model.parent).imported

        def submit(messages: list[dict], sampling: SamplingParams = probe):
            return engine.scheduler.submit(GenerateJob(record.id, sampling=sampling, messages=messages,
                                                       use_cache=False))

        def first(handle) -> tuple[int, float]:
            for event in handle:
                if isinstance(event, Chunk) and event.logprobs:
                    handle.cancel()
                    return event.token_ids[0], event.logprobs[0].logprob
            raise AssertionError("no token")

        # A short question: its prompt is read whole whatever the step's prefill budget, so
        # alone and beside streams it is read the same way (as the text batching tests do).
        question = image_turn(picture, "What is this?")
        alone = first(submit(question))
        long = SamplingParams(temperature=0.0, max_tokens=60)
        streams = [submit([{"role": "user", "content": f"Tell me about {topic}."}], long) for topic in ("owls", "snow")]
        beside = first(submit(question))
        streams[0].cancel()  # a Stop beside the image sequence
        assert streams[1].result()[0]
        assert beside[0] == alone[0] and abs(beside[1] - alone[1]) < 1e-2
        loaded = engine.scheduler.loaded_models()[0]
        assert not any(slot.busy for slot in loaded.slots)


def test_a_slow_image_encoding_does_not_stall_other_streams(home, smollm2_path: Path, picture: ImageInput) -> None:
    """The encoder runs on a thread of its own: while it works (held here until released),
    the step loop goes on feeding a text answer; the image question then answers as alone."""
    import threading

    from inglenook.engine.base.generation_events import Chunk
    from inglenook.engine.base.jobs import GenerateJob
    from inglenook.engine.core.engine import Engine

    from ..conftest import MODEL_CACHE
    from ..mmproj_writer import vision_copy_of_smollm2
    from ..polling import wait_until

    model = vision_copy_of_smollm2(smollm2_path, MODEL_CACHE / "smolvision")
    probe = SamplingParams(temperature=0.0, max_tokens=4, logprobs=0)
    with Engine() as engine:
        engine.update_settings(parallel_sequences=3, context_size=1024, prefill_chunk=32)
        (record,) = engine.import_path(model.parent).imported

        def submit(messages: list[dict], sampling: SamplingParams = probe):
            return engine.scheduler.submit(GenerateJob(record.id, sampling=sampling, messages=messages,
                                                       use_cache=False))

        assert [e for e in submit(image_turn(picture, "What is this?")) if isinstance(e, Chunk)]  # loads it
        (loaded,) = engine.scheduler.loaded_models()
        encoder = loaded.vision.table().encoder
        real_encode, release, started = encoder.encode, threading.Event(), threading.Event()

        def held_encode(span, n_embd):
            started.set()
            release.wait(timeout=300)
            return real_encode(span, n_embd)

        encoder.encode = held_encode
        other = image_from_rgb(picture.width, picture.height, bytes(reversed(picture.rgb)))
        stream = submit([{"role": "user", "content": "Tell me about owls."}],
                        SamplingParams(temperature=0.0, max_tokens=200))
        text: list[Chunk] = []
        try:
            wait_until(lambda: bool(_drain(stream, text)), timeout=120)
            image_question = submit(image_turn(other, "What is this?"))  # a new image: it must be encoded
            wait_until(started.is_set, timeout=120)
            before = len(text)
            # With the encoder held, the owl answer keeps coming: the step loop is not waiting.
            wait_until(lambda: len(_drain(stream, text)) >= before + 5, timeout=120)
            answer: list[Chunk] = []
            assert not _drain(image_question, answer)  # its rows wait for the encoder
        finally:
            release.set()
        wait_until(lambda: _drain(image_question, answer, ended=True) is not None and bool(answer), timeout=300)
        assert encoder.timings.images_encoded >= 2
        stream.cancel()
        again = [e for e in submit(image_turn(other, "What is this?")) if isinstance(e, Chunk)]
        # The same greedy answer as when it was encoded beside a stream.
        assert [c.token_ids for c in again] == [c.token_ids for c in answer]


def _drain(handle, into: list, ended: bool = False) -> list | None:
    """Add the chunks that arrived to ``into``, without waiting; with ``ended``, None until
    the job has ended."""
    from inglenook.engine.base.generation_events import Chunk
    from inglenook.engine.base.jobs import EMPTY, ENDED

    while True:
        event = handle.poll()
        if event is EMPTY:
            return None if ended else into
        if event is ENDED:
            return into
        if isinstance(event, Chunk):
            into.append(event)
