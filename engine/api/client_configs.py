"""Configuration that points a coding agent at the local server: Codex CLI, Claude Code, opencode.

``client_setup`` says what each client needs (the file it reads, the one section of it that is
ours, environment variables, the command that starts it); ``write_client_config`` merges that section into
the user's file, keeping everything else and a timestamped backup of the old file. A file
that exists but cannot be read as its format (hand-edited TOML or JSON with a mistake) is
never rewritten: ``ClientConfigError`` says which file and why.

Formats, from each client's documentation:

* Codex: ``~/.codex/config.toml`` (``$CODEX_HOME``), top-level ``model`` and ``model_provider``
  and a ``[model_providers.<id>]`` table with ``base_url`` (ending in ``/v1``), ``wire_api =
  "responses"`` and ``env_key`` naming the variable that holds the key.
* Claude Code: the variables ``ANTHROPIC_BASE_URL`` (no ``/v1``), ``ANTHROPIC_AUTH_TOKEN``
  (sent as a bearer token) and ``ANTHROPIC_MODEL``, kept in the ``"env"`` object of
  ``~/.claude/settings.json`` (``$CLAUDE_CONFIG_DIR``).
* opencode: ``~/.config/opencode/opencode.json`` (``$XDG_CONFIG_HOME``), a ``provider.<id>``
  entry using ``@ai-sdk/openai-compatible`` with ``options.baseURL``/``apiKey`` and its
  ``models``, and ``"model": "<provider>/<model>"``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base import InglenookError, atomic_write_text

log = logging.getLogger(__name__)

PROVIDER_ID = "inglenook"
KEY_VARIABLE = "INGLENOOK_API_KEY"  # Codex reads the key from the variable env_key names
CLIENTS = ("codex", "claude", "opencode")
CLAUDE_PATIENCE_MS = "3600000"  # Claude Code's stream-idle and request timeouts (see _claude)
NO_KEY = "not-needed"  # clients that insist on a key get this when the server has none


class ClientConfigError(InglenookError):
    """A client's existing configuration file cannot be merged into (it is left alone)."""


@dataclass(frozen=True)
class Endpoint:
    """Where the local server answers and with what."""

    root: str  # http://127.0.0.1:8484, no /v1
    model: str
    api_key: str | None = None

    @property
    def v1(self) -> str:
        return self.root + "/v1"

    @classmethod
    def of(cls, host: str, port: int, model: str, api_key: str | None) -> "Endpoint":
        # A server listening on every address is reached on loopback from this machine.
        host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return cls(f"http://{host}:{port}", model, api_key or None)


@dataclass
class ClientSetup:
    client: str
    title: str
    path: Path  # the configuration file the client reads
    snippet: str  # the section that is ours, as the client's format writes it (printed, copied)
    base_url: str  # the URL the client is given
    env: dict[str, str] = field(default_factory=dict)  # set for the client when launched
    command: str = ""
    install_hint: str = ""

    def merged(self, existing: str | None) -> str:
        """The whole file with our section merged into ``existing`` (None: no file yet)."""
        return _MERGERS[self.client](self, existing)

    def shell_lines(self) -> list[str]:
        return [f"export {name}={_shell_quote(value)}" for name, value in self.env.items()]

    def copy_text(self) -> str:
        """What a person pastes: Claude Code's variables as shell lines, else the file's
        section (with the key's variable for Codex, when a key is set)."""
        if self.client == "claude":
            return "\n".join(self.shell_lines()) + "\n"
        extra = "".join(f"# {line}\n" for line in self.shell_lines())
        return self.snippet + (f"\n{extra}" if extra else "")


def client_setup(client: str, endpoint: Endpoint, home: Path | None = None) -> ClientSetup:
    if client not in CLIENTS:
        raise ClientConfigError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")
    home = home or Path.home()
    return _BUILDERS[client](endpoint, home)


def write_client_config(setup: ClientSetup) -> Path | None:
    """Merge our section into the client's file; returns the backup made of the old one."""
    path = setup.path
    existing = path.read_text(encoding="utf-8") if path.exists() else None
    merged = setup.merged(existing)
    if existing == merged:
        return None
    backup = None
    if existing is not None:
        backup = path.with_name(f"{path.name}.inglenook-backup-{time.strftime('%Y%m%d-%H%M%S')}")
        shutil.copy2(path, backup)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, merged)
    log.info("wrote the %s settings into %s (backup: %s)", setup.title, path, backup)
    return backup


# -- Codex CLI ------------------------------------------------------------------------------


def _codex(endpoint: Endpoint, home: Path) -> ClientSetup:
    folder = Path(os.environ["CODEX_HOME"]) if os.environ.get("CODEX_HOME") else home / ".codex"
    lines = [
        f"[model_providers.{PROVIDER_ID}]",
        'name = "Inglenook"',
        f"base_url = {_toml_string(endpoint.v1)}",
        'wire_api = "responses"',
    ]
    env = {}
    if endpoint.api_key:
        lines.append(f'env_key = "{KEY_VARIABLE}"')
        env[KEY_VARIABLE] = endpoint.api_key
    top = [f"model = {_toml_string(endpoint.model)}", f'model_provider = "{PROVIDER_ID}"']
    return ClientSetup(
        "codex", "Codex CLI", folder / "config.toml", "\n".join([*top, "", *lines]) + "\n", endpoint.v1, env, "codex",
        "npm install -g @openai/codex (or: brew install codex)",
    )


_TABLE_HEADER = re.compile(r"^\s*\[")
_OUR_TABLE = re.compile(r"^\s*\[\s*model_providers\s*\.\s*\"?" + PROVIDER_ID + r"\"?\s*\]\s*(#.*)?$")
_TOP_KEY = re.compile(r"^\s*(model|model_provider)\s*=")


def _merge_codex(setup: ClientSetup, existing: str | None) -> str:
    ours_top, ours_table = setup.snippet.split("\n\n", 1)
    if existing is None or not existing.strip():
        return setup.snippet
    _parse_or_refuse(setup.path, existing, tomllib.loads)
    lines = existing.splitlines()
    first_table = next((i for i, line in enumerate(lines) if _TABLE_HEADER.match(line)), len(lines))
    # Top-level keys: ours replace the user's model/model_provider, the rest stay as they are.
    head = [line for line in lines[:first_table] if not _TOP_KEY.match(line)]
    tables: list[str] = []
    skipping = False
    for line in lines[first_table:]:
        if _TABLE_HEADER.match(line):
            skipping = bool(_OUR_TABLE.match(line))  # our old table goes; the new one is appended
        if not skipping:
            tables.append(line)
    while head and not head[-1].strip():
        head.pop()
    while tables and not tables[-1].strip():
        tables.pop()
    parts = ["\n".join([*head, ours_top]) if head else ours_top]
    if tables:
        parts.append("\n".join(tables))
    parts.append(ours_table.rstrip("\n"))
    merged = "\n\n".join(parts) + "\n"
    try:  # what we write must read back as the client will read it
        parsed = tomllib.loads(merged)
    except tomllib.TOMLDecodeError:  # e.g. the provider also set with dotted keys elsewhere
        parsed = {}
    if parsed.get("model_provider") != PROVIDER_ID or PROVIDER_ID not in parsed.get("model_providers", {}):
        raise ClientConfigError(f"{setup.path} has a layout this merge does not handle; it was left as it is")
    return merged


# -- Claude Code ----------------------------------------------------------------------------


def _claude(endpoint: Endpoint, home: Path) -> ClientSetup:
    folder = Path(os.environ["CLAUDE_CONFIG_DIR"]) if os.environ.get("CLAUDE_CONFIG_DIR") else home / ".claude"
    env = {
        "ANTHROPIC_BASE_URL": endpoint.root,  # Claude Code adds /v1/messages itself
        "ANTHROPIC_AUTH_TOKEN": endpoint.api_key or NO_KEY,
        "ANTHROPIC_MODEL": endpoint.model,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": endpoint.model,  # its background tasks
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        # A first turn reads ~20,000 tokens of instructions: minutes of prefill on a CPU.
        # Claude Code gives up on a stream with no content event for 5 minutes (pings do not
        # count) and on a request after 10; an hour for both lets a slow machine answer.
        "CLAUDE_STREAM_IDLE_TIMEOUT_MS": CLAUDE_PATIENCE_MS,
        "API_TIMEOUT_MS": CLAUDE_PATIENCE_MS,
    }
    snippet = json.dumps({"env": env}, indent=2) + "\n"
    return ClientSetup("claude", "Claude Code", folder / "settings.json", snippet, endpoint.root, env, "claude",
                       "npm install -g @anthropic-ai/claude-code")


def _merge_claude(setup: ClientSetup, existing: str | None) -> str:
    data = _json_object(setup.path, existing)
    env = data.get("env")
    if env is not None and not isinstance(env, dict):
        raise ClientConfigError(f"{setup.path}: \"env\" is not an object; fix or remove it first")
    # ANTHROPIC_API_KEY next to the token makes Claude Code ask which one to use: ours wins.
    kept = {k: v for k, v in (env or {}).items() if k != "ANTHROPIC_API_KEY"}
    data["env"] = {**kept, **setup.env}
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


# -- opencode -------------------------------------------------------------------------------


def _opencode(endpoint: Endpoint, home: Path) -> ClientSetup:
    base = Path(os.environ["XDG_CONFIG_HOME"]) if os.environ.get("XDG_CONFIG_HOME") else home / ".config"
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "Inglenook",
        "options": {"baseURL": endpoint.v1, "apiKey": endpoint.api_key or NO_KEY},
        "models": {endpoint.model: {"name": endpoint.model}},
    }
    snippet = json.dumps({"provider": {PROVIDER_ID: provider}, "model": f"{PROVIDER_ID}/{endpoint.model}"}, indent=2)
    return ClientSetup("opencode", "opencode", base / "opencode" / "opencode.json", snippet + "\n", endpoint.v1, {}, "opencode",
                       "npm install -g opencode-ai (or: curl -fsSL https://opencode.ai/install | bash)")


def _merge_opencode(setup: ClientSetup, existing: str | None) -> str:
    data = _json_object(setup.path, existing)
    ours = json.loads(setup.snippet)
    providers = data.get("provider")
    if providers is not None and not isinstance(providers, dict):
        raise ClientConfigError(f"{setup.path}: \"provider\" is not an object; fix or remove it first")
    providers = dict(providers or {})
    previous = providers.get(PROVIDER_ID)
    entry = ours["provider"][PROVIDER_ID]
    if isinstance(previous, dict) and isinstance(previous.get("models"), dict):
        entry["models"] = {**previous["models"], **entry["models"]}  # models added before stay
    providers[PROVIDER_ID] = entry
    data.setdefault("$schema", "https://opencode.ai/config.json")
    data["provider"] = providers
    data["model"] = ours["model"]
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


# -- shared ---------------------------------------------------------------------------------


def _json_object(path: Path, existing: str | None) -> dict[str, Any]:
    if existing is None or not existing.strip():
        return {}
    data = _parse_or_refuse(path, existing, json.loads)
    if not isinstance(data, dict):
        raise ClientConfigError(f"{path} does not hold a JSON object; it was left as it is")
    return data


def _parse_or_refuse(path: Path, text: str, parse: Any) -> Any:
    try:
        return parse(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise ClientConfigError(
            f"{path} cannot be read ({exc}); it was left as it is — fix it, or use --print and edit it by hand"
        ) from None


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string literal is a valid TOML basic string


def _shell_quote(value: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9_./:@=+-]+", value):
        return value
    return "'" + value.replace("'", "'\\''") + "'"


_BUILDERS = {"codex": _codex, "claude": _claude, "opencode": _opencode}
_MERGERS = {"codex": _merge_codex, "claude": _merge_claude, "opencode": _merge_opencode}
