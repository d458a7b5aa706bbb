"""Admitting a generate job into a free sequence: its prompt as tokens, the part of it every
chat with the same documents shares, the saved prompt state that covers its start, and the
state saved again when it ends.

The scheduler's loop decides *when* a job may start (its model resident, a sequence free, its
adapters in use); this module is *how* it starts, and knows nothing of the loop's queues.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from dataclasses import dataclass

from ..base import GenerateJob, InglenookError, JobHandle, PromptProgress, SamplingParams, Usage
from ..runtime import KvSlot
from ..store import PrefixCache
from .batched import BatchedModel, SteppedSequence

log = logging.getLogger(__name__)


@dataclass
class Running:
    """An admitted generate job: its handle, its sequence, what the prefix cache needs."""

    handle: JobHandle
    sequence: SteppedSequence
    prompt_tokens: int
    use_cache: bool
    shared_tokens: int = 0  # the prompt's leading tokens every chat with its documents shares


def capped(sampling: SamplingParams, cap: int | None, room: int) -> SamplingParams:
    """``sampling`` with a job's ``token_cap`` as its max_tokens, clipped to ``room`` (the
    context left after the prompt). With no room the prompt alone is too long: the model
    refuses it with its own error (ContextLengthExceeded)."""
    if cap is None or sampling.max_tokens is not None or room < 1:
        return sampling
    return dataclasses.replace(sampling, max_tokens=min(cap, room))


def prompt_tokens(model: BatchedModel, job: GenerateJob, cancel: threading.Event) -> list[int]:
    """The job's prompt as tokens. The model stops early (and says so) once a prompt
    cannot fit its context, and ``cancel`` ends the preparation of a huge one."""
    if job.messages is not None:
        tokens = model.chat_tokens(job.messages, tools=job.tools, cancel=cancel, options=job.template_options)
        if job.answer_prefix:
            # Text, not special tokens: an answer that mentions "<|im_end|>" continues as text.
            tokens += model.tokenize(job.answer_prefix, add_special=False, parse_special=False)
        return tokens
    if job.text is not None:
        return model.prompt_tokens(job.text, cancel=cancel)
    return list(job.tokens or [])


def shared_tokens(model: BatchedModel, job: GenerateJob, prompt: list[int], cancel: threading.Event) -> int:
    """How many leading tokens of ``prompt`` are the job's shared messages (its documents):
    the tokens those messages render to alone, as far as they agree with the prompt."""
    if not job.shared_messages or job.messages is None or len(job.messages) <= job.shared_messages:
        return 0
    try:
        alone = model.chat_tokens(job.messages[: job.shared_messages], tools=job.tools, cancel=cancel,
                                  options=job.template_options)
    except InglenookError as exc:  # a template that wants a user turn: no shared prefix, a normal turn
        log.debug("the shared messages do not render alone (%s); not keeping them as a prefix", exc)
        return 0
    limit = min(len(alone), len(prompt))
    common = 0
    while common < limit and alone[common] == prompt[common]:
        common += 1
    return common


def open_job(model: BatchedModel, handle: JobHandle, job: GenerateJob, cache: PrefixCache | None) -> Running | None:
    """Open ``job``'s sequence on a free slot of ``model``, its prompt's start restored from
    ``cache``; None when no slot suits it yet (it waits for the next free one)."""
    prompt = prompt_tokens(model, job, handle.cancel_event)
    slot = model.pick_slot(prompt)
    if slot is None:
        return None
    # Measured with or without the cache: a prompt's shared block is read apart either way,
    # so a cold answer and a restored one read the same chunks (``shared_boundary``).
    shared = shared_tokens(model, job, prompt, handle.cancel_event)
    if cache is not None and job.use_cache:
        _restore(cache, model, slot, prompt, job, shared)
    sampling = capped(job.sampling, job.token_cap, model.n_ctx - len(prompt))
    sequence = model.open_sequence(prompt, sampling, handle.cancel_event, handle.submitted_at,
                                   reuse_kv=job.use_cache, slot=slot, shared=shared,
                                   template_stops=model.chat_stops if job.messages is not None else ())
    cached = sequence.usage.cached_tokens
    log.debug("job %d: a prompt of %d tokens, %d of them cached (%d shared), %d to read",
              handle.id, len(prompt), cached, shared, len(prompt) - cached)
    handle.prompt_usage = Usage(prompt_tokens=len(prompt), cached_tokens=cached)
    # The first progress event: the prompt fits and its cached prefix is restored, so
    # the HTTP API can open a stream now (errors before this point become HTTP errors).
    handle._put(PromptProgress(cached, len(prompt), cached, 0.0))
    return Running(handle, sequence, len(prompt), job.use_cache, shared)


def _restore(cache: PrefixCache, model: BatchedModel, slot: KvSlot, prompt: list[int], job: GenerateJob,
             shared: int) -> None:
    try:
        cache.restore(model.slot_view(slot), prompt, job.conversation_id, shared=shared)
    except Exception:  # a cache fault costs a full prefill, never the answer
        log.exception("restoring a saved prompt state failed; prefilling instead")
        model.free_slot(slot)


def save_prompt_state(cache: PrefixCache, model: BatchedModel, running: Running) -> None:
    """Save the finished job's prompt state (reserved with ``cache.reserve_save`` before its
    answer was delivered); a failure is logged, never the answer's."""
    job = running.handle.job
    assert isinstance(job, GenerateJob)
    try:
        cache.save(model.slot_view(running.sequence.slot), running.prompt_tokens, job.conversation_id,
                   reserved=True, shared=running.shared_tokens, documents=job.shared_documents)
    except Exception:
        log.exception("saving the prompt state failed")
