"""Embedding jobs admitted to the scheduler: one input embedded per pass of its loop, so the
running answers keep streaming between a long list's inputs."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from ..base import JOB_DONE, EmbedJob, Embeddings, Finished, InglenookError, JobHandle, Timings, Usage
from .batched import BatchedModel
from .model_pool import Key

log = logging.getLogger(__name__)


@dataclass
class _Embedding:
    """An admitted embedding job and the vectors it has so far."""

    handle: JobHandle
    model: BatchedModel
    vectors: list[list[float]] = field(default_factory=list)
    prompt_tokens: int = 0


class EmbeddingJobs:
    """The embedding jobs in progress, advanced by the scheduler's worker between steps."""

    def __init__(self) -> None:
        self._jobs: list[_Embedding] = []

    def __bool__(self) -> bool:
        return bool(self._jobs)

    def add(self, handle: JobHandle, model: BatchedModel) -> None:
        self._jobs.append(_Embedding(handle, model))

    def cancel_all(self) -> None:
        for embedding in self._jobs:
            embedding.handle.cancel()

    def model_keys(self) -> set[Key]:
        """The pool keys of the embedding contexts in use (not to be unloaded)."""
        return {(e.model.record.id, e.model.options.pooling) for e in self._jobs}

    def handles(self) -> list[JobHandle]:
        return [e.handle for e in self._jobs]

    def embed_next(self, beat: Callable[[EmbedJob], None], ended: Callable[[Key], None]) -> None:
        """Embed the next input of every job; ``beat(job)`` before each input (its own unit
        of work), ``ended(key)`` after a job ends, with its model's pool key."""
        for embedding in list(self._jobs):
            if self._embed_one(embedding, beat):
                embedding.handle._put(JOB_DONE)
                self._jobs.remove(embedding)
                ended((embedding.model.record.id, embedding.model.options.pooling))

    @staticmethod
    def _embed_one(embedding: _Embedding, beat: Callable[[EmbedJob], None]) -> bool:
        """Embed ``embedding``'s next input; whether the job has ended (done, cancelled or failed)."""
        handle, model = embedding.handle, embedding.model
        job = handle.job
        assert isinstance(job, EmbedJob)
        try:
            if handle.cancelled:
                handle._put(Finished("cancelled", Usage(), Timings(), job.model_id))
                return True
            text = job.inputs[len(embedding.vectors)]
            beat(job)
            embedding.vectors.append(model.embed(text))
            embedding.prompt_tokens += len(model.tokenize(text))
            if len(embedding.vectors) < len(job.inputs):
                return False
            handle._put(Embeddings(embedding.vectors, embedding.prompt_tokens, model.record.id))
        except InglenookError as exc:
            handle._put(exc)
        except Exception as exc:  # an engine bug must not kill the worker
            log.exception("job %d failed", handle.id)
            handle._put(InglenookError(f"internal error: {exc.__class__.__name__}"))
        return True
