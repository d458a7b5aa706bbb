"""Model aliases: names clients send (``claude-sonnet-4-5``, ``gpt-5-codex``, ``fast``)
mapped to installed models.

Coding agents name the vendor models they were built for; an alias answers such a name
from a local model. The map lives in ``Settings.model_aliases`` (the settings table), keys
lower-case so a client's capitalisation does not matter. A name with no alias keeps the API's
usual behaviour (the default model, or 404 with strict model names).
"""

from __future__ import annotations

import logging
import re

from ..base import InvalidRequest
from ..store import Settings
from .registry import ModelRegistry

log = logging.getLogger(__name__)

MAX_ALIAS_CHARS = 200
# The routing alias: short prompts without tools go to a small model, others to the large
# one (routing.py). It is built in, so no alias may take its name.
ROUTING_ALIAS = "auto"
# Printable, no spaces: names like "claude-sonnet-4-5", "openai/gpt-5", "fast" or "gpt-5.1:latest".
_ALIAS_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$")


def alias_key(name: str) -> str:
    return name.strip().lower()


def lookup(settings: Settings, name: str) -> str | None:
    """The model id ``name`` is an alias of, or None."""
    if not name or not settings.model_aliases:
        return None
    return settings.model_aliases.get(alias_key(name))


def resolve_alias(settings: Settings, name: str) -> str:
    """``name``'s model id when it is an alias, else ``name`` unchanged."""
    target = lookup(settings, name)
    if target is not None:
        log.debug("model %r is an alias of %s", name, target)
        return target
    return name


def validated_name(name: str) -> str:
    key = alias_key(name)
    if key == ROUTING_ALIAS:
        raise InvalidRequest(f"{ROUTING_ALIAS!r} is the built-in routing alias (small model for short prompts); "
                             "choose another name")
    if not key or len(key) > MAX_ALIAS_CHARS or not _ALIAS_NAME.match(key):
        raise InvalidRequest(
            f"{name!r} cannot be an alias: use letters, digits and . _ : / @ + - "
            f"(at most {MAX_ALIAS_CHARS} characters, no spaces)"
        )
    return key


def with_alias(settings: Settings, registry: ModelRegistry, name: str, model: str) -> dict[str, str]:
    """The alias map with ``name`` → ``model`` (resolved to an installed model's id)."""
    key = validated_name(name)
    record = registry.resolve(resolve_alias(settings, model))  # ModelNotFound names the problem
    if key == record.id:
        raise InvalidRequest(f"{name!r} is already the id of that model")
    return {**settings.model_aliases, key: record.id}


def without_alias(settings: Settings, name: str) -> dict[str, str]:
    """The alias map without ``name``; InvalidRequest when there is no such alias."""
    key = alias_key(name)
    if key not in settings.model_aliases:
        raise InvalidRequest(f"there is no alias {name!r}; `inglenook alias --list` shows them")
    return {k: v for k, v in settings.model_aliases.items() if k != key}
