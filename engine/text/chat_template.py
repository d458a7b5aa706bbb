"""Render chat messages into a prompt with the model's own Jinja chat template.

Templates come from downloaded files, so they run in Jinja's immutable sandbox (no
attribute access to Python internals, no file or network access) with a budget
(``template_sandbox``: no single step may make a huge value, ranges are counted), a time
limit and the job's cancel event (``interrupt``), and a cap on what they write: a
template that would wedge the scheduler's thread or exhaust memory fails the request.
"""

from __future__ import annotations

import datetime
import logging
import threading
from functools import lru_cache
from typing import Any

import jinja2

from ..base import InvalidRequest, JobCancelled, ModelLoadError
from .interrupt import Interrupted, run_interruptible
from .template_sandbox import MAX_TEXT_CHARS, BoundedSandbox, TemplateBudgetExceeded, end_budget, new_budget

log = logging.getLogger(__name__)

# Real templates render a conversation in milliseconds (50,000 messages in well under a
# second); this only stops templates that loop without end.
RENDER_TIME_LIMIT_S = 10.0

# ChatML: what many small instruct models use, and a readable fallback for the rest.
FALLBACK_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

FALLBACK_STOPS = ("<|im_end|>", "<|im_start|>")


def _raise_exception(message: str) -> None:
    raise InvalidRequest(f"the model's chat template rejected the messages: {message}")


def _strftime_now(fmt: str) -> str:
    return datetime.datetime.now().strftime(fmt)


@lru_cache(maxsize=16)
def _compile(source: str) -> jinja2.Template:
    env = BoundedSandbox(trim_blocks=True, lstrip_blocks=True, undefined=jinja2.ChainableUndefined)
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    try:
        return env.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise ModelLoadError(f"the model's chat template does not parse: {exc}") from exc


class ChatTemplate:
    def __init__(self, source: str | None, bos_token: str = "", eos_token: str = "",
                 time_limit_s: float = RENDER_TIME_LIMIT_S) -> None:
        if source is None:
            log.warning("the model has no chat template; using ChatML as a fallback")
        self.source = source or FALLBACK_TEMPLATE
        self.is_fallback = source is None
        # The fallback's turn markers are plain text in most vocabularies that need a fallback
        # (a base model's): nothing ends its answer at "<|im_end|>" unless it is a stop string.
        self.stop_strings: tuple[str, ...] = FALLBACK_STOPS if self.is_fallback else ()
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.time_limit_s = time_limit_s
        self._template = _compile(self.source)

    def render(
        self,
        messages: list[dict[str, Any]],
        add_generation_prompt: bool = True,
        tools: list[dict[str, Any]] | None = None,
        cancel: threading.Event | None = None,
        **extra: Any,
    ) -> str:
        """The prompt text. ``cancel`` (the job's) stops a render that is under way."""
        values = {
            "messages": messages, "add_generation_prompt": add_generation_prompt, "bos_token": self.bos_token,
            "eos_token": self.eos_token, "tools": tools, **extra,
        }
        try:
            return run_interruptible(lambda: self._render(values), self.time_limit_s, cancel)
        except Interrupted as exc:
            if exc.reason == "cancelled":
                raise JobCancelled("the request was cancelled while its prompt was being prepared") from None
            raise InvalidRequest(
                f"the model's chat template did not finish within {self.time_limit_s:g} s; it may loop without end"
            ) from None
        except TemplateBudgetExceeded as exc:
            raise InvalidRequest(f"the model's chat template was stopped: {exc}") from None
        except MemoryError:
            raise InvalidRequest("the model's chat template ran out of memory on these messages") from None
        except RecursionError:
            raise InvalidRequest("the model's chat template recursed too deeply on these messages") from None
        except InvalidRequest:
            raise
        except jinja2.TemplateError as exc:
            raise InvalidRequest(f"the model's chat template failed on these messages: {exc}") from exc

    def _render(self, values: dict[str, Any]) -> str:
        token = new_budget()
        try:
            parts: list[str] = []
            written = 0
            for part in self._template.generate(**values):
                written += len(part)
                if written > MAX_TEXT_CHARS:
                    raise TemplateBudgetExceeded(f"it wrote more than {MAX_TEXT_CHARS:,} characters")
                parts.append(part)
            return "".join(parts)
        finally:
            end_budget(token)
