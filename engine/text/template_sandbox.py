"""A Jinja sandbox with a budget: chat templates from downloaded files may not exhaust the
machine.

Jinja's immutable sandbox blocks escapes (no Python internals, no files), but a template
is still a program: ``{{ 'A' * 3000000000 }}`` asks for 3 GB in one C call and nested
``range(100000)`` loops never end. Every way a template can make a large value in one
step is bounded here before it happens — repetition, concatenation, padding, replacing,
``%`` and ``format`` widths, powers, ranges — against ``MAX_TEXT_CHARS``, and the ranges a
render creates share ``MAX_RANGE_ITEMS``. What is left (Python loops) is bounded in time
by the caller (``interrupt.run_interruptible``).
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import jinja2
import jinja2.filters
from jinja2.sandbox import ImmutableSandboxedEnvironment
from markupsafe import Markup

# A prompt of the largest contexts (1M tokens) is a few million characters; a request body
# is at most 16 MB. Nothing a template should make comes near this.
MAX_TEXT_CHARS = 32_000_000
# Items of all the ranges one render may create (nested loops over ranges multiply).
MAX_RANGE_ITEMS = 1_000_000
MAX_POWER_BITS = 4096

# A width or precision of five digits or more in a %-format or a format spec.
_WIDE_SPEC = re.compile(r"%[-+ #0]*\d{5,}|%[-+ #0]*\d*\.\d{5,}|\{[^{}]*:[^{}]*\d{5,}[^{}]*\}")


class TemplateBudgetExceeded(Exception):
    """The template tried to make something larger than the sandbox allows."""


@dataclass
class _Budget:
    range_items: int = 0


_budget: contextvars.ContextVar[_Budget] = contextvars.ContextVar("template_budget")


def new_budget() -> contextvars.Token:
    """Start counting for one render; hand the token to ``end_budget``."""
    return _budget.set(_Budget())


def end_budget(token: contextvars.Token) -> None:
    _budget.reset(token)


def _refuse(what: str) -> TemplateBudgetExceeded:
    return TemplateBudgetExceeded(f"{what} (the limit is {MAX_TEXT_CHARS:,} characters)")


def _check_size(size: int, what: str) -> None:
    if size > MAX_TEXT_CHARS:
        raise _refuse(f"the template tried to make {what} of {size:,} items")


def _check_format(fmt: str) -> None:
    if _WIDE_SPEC.search(fmt):
        raise _refuse("the template used a format width or precision of 10,000 or more")


def _bounded_range(*args: int) -> range:
    values = range(*args)
    budget = _budget.get(None)
    used = len(values) + (budget.range_items if budget else 0)
    if len(values) > 100_000 or used > MAX_RANGE_ITEMS:
        raise TemplateBudgetExceeded(
            f"the template's loops asked for {used:,} range items; the limit is {MAX_RANGE_ITEMS:,}"
        )
    if budget is not None:
        budget.range_items = used
    return values


def _bounded_join(parts: Iterable[Any], markup: bool = False) -> str:
    """Jinja's ``str_join`` / ``markup_join`` (with ``markup``: escaping when any part is
    markup), refusing a result over the limit before it is built."""
    values = list(parts)
    pieces = [str(p) for p in values]
    _check_size(sum(map(len, pieces)), "a string")
    if markup and any(hasattr(v, "__html__") for v in values):
        return Markup("").join(values)
    return "".join(pieces)


def _replaced_size(text: str, old: str, new: str, count: int | None = None) -> int:
    hits = text.count(old) if old else len(text) + 1
    if count is not None and count >= 0:
        hits = min(hits, count)
    return len(text) + hits * (len(new) - len(old))


def _check_str_method(owner: str, name: str, args: tuple, kwargs: dict) -> None:
    if name in ("center", "ljust", "rjust", "zfill") and args and isinstance(args[0], int):
        _check_size(args[0], "a padded string")
    elif name == "expandtabs":
        tab = args[0] if args and isinstance(args[0], int) else kwargs.get("tabsize", 8)
        if isinstance(tab, int):
            _check_size(len(owner) + owner.count("\t") * max(tab, 0), "a string")
    elif name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        count = args[2] if len(args) > 2 and isinstance(args[2], int) else None
        _check_size(_replaced_size(owner, args[0], args[1], count), "a string")
    elif name in ("format", "format_map"):
        _check_format(owner)


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, with every one-step amplifier bounded."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.globals["range"] = _bounded_range
        self.concat = _bounded_join  # type: ignore[method-assign] # {% set %} blocks, macros and call blocks join through it
        self.filters["center"] = _center
        self.filters["indent"] = _indent
        self.filters["replace"] = _replace
        self.filters["format"] = _format

    def from_string(self, source: Any, *args: Any, **kwargs: Any) -> jinja2.Template:
        template = super().from_string(source, *args, **kwargs)
        # ``a ~ b`` compiles to a call of these names in the template's module; it is the one
        # concatenation the operator hooks do not see.
        namespace = template.root_render_func.__globals__
        namespace["str_join"] = _bounded_join
        namespace["markup_join"] = lambda parts: _bounded_join(parts, markup=True)
        return template

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                if isinstance(seq, str | list | tuple) and isinstance(times, int):
                    _check_size(len(seq) * max(times, 0), "a repeated sequence")
        elif operator == "+" and isinstance(left, str | list | tuple) and isinstance(right, str | list | tuple):
            _check_size(len(left) + len(right), "a joined sequence")
        elif operator == "**" and isinstance(left, int) and isinstance(right, int) and abs(left) > 1:
            if right * abs(left).bit_length() > MAX_POWER_BITS:
                raise TemplateBudgetExceeded(f"the template tried to compute a power of more than {MAX_POWER_BITS} bits")
        elif operator == "%" and isinstance(left, str):
            _check_format(left)
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 — Jinja's own signature
        bound = getattr(__obj, "__wrapped__", __obj)  # the sandbox wraps str.format
        owner = getattr(bound, "__self__", None)
        if isinstance(owner, str):
            _check_str_method(owner, getattr(bound, "__name__", ""), args, kwargs)
        return super().call(__context, __obj, *args, **kwargs)


def _center(value: Any, width: int = 80) -> str:
    if isinstance(width, int):
        _check_size(width, "a padded string")
    return jinja2.filters.do_center(value, width)


def _indent(value: Any, width: int | str = 4, first: bool = False, blank: bool = False) -> str:
    if isinstance(width, int):
        text = str(value)
        _check_size(len(text) + (text.count("\n") + 1) * width, "an indented string")
    return jinja2.filters.do_indent(value, width, first, blank)


@jinja2.pass_eval_context
def _replace(eval_ctx: Any, value: Any, old: str, new: str, count: int | None = None) -> str:
    _check_size(_replaced_size(str(value), str(old), str(new), count), "a string")
    return jinja2.filters.do_replace(eval_ctx, value, old, new, count)


def _format(value: Any, *args: Any, **kwargs: Any) -> str:
    _check_format(str(value))
    return jinja2.filters.do_format(value, *args, **kwargs)
