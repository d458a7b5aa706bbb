"""The window asks the engine only what ``AppEngine`` (app/services/app_engine.py) lists.

Every app/ file is parsed: on anything named ``engine`` or ``_engine`` (``self.engine``,
``window.engine``…) each attribute used must be a member of the protocol, and the reaches
through the engine's objects that the protocol replaced must not come back. mypy checks, in
app_engine.py itself, that ``Engine`` satisfies the protocol; this test checks each member
exists on ``Engine`` with the same parameters, so the two lists cannot drift at run time either.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from inglenook.app.services.app_engine import AppEngine
from inglenook.engine import Engine

APP_DIR = Path(__file__).resolve().parents[2] / "app"
ENGINE_NAMES = {"engine", "_engine"}
MEMBERS = {name for name in dir(AppEngine) if not name.startswith("_")} | set(AppEngine.__annotations__)
# Reaches through the engine's objects that the facade's methods replaced.
REPLACED = ("chats.remotes.records", "chats.tools.servers", "chats.passages_used", "chats.client")


def _chain(node: ast.AST) -> list[str]:
    """``self.engine.chats.tools`` -> ["self", "engine", "chats", "tools"]."""
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        names.append(node.id)
    return names[::-1]


def engine_uses(source: str) -> list[tuple[int, str]]:
    """Each (line, path after the engine) of an attribute chain on an engine, longest only."""
    tree = ast.parse(source)
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    uses = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or id(node) in inner:
            continue
        chain = _chain(node)
        for i, name in enumerate(chain[:-1]):
            if name in ENGINE_NAMES:
                uses.append((node.lineno, ".".join(chain[i + 1:])))
                break
    return uses


def app_problems(source: str) -> list[str]:
    problems = []
    for line, path in engine_uses(source):
        member = path.split(".")[0]
        if member not in MEMBERS:
            problems.append(f"line {line}: engine.{member} is not in AppEngine")
        if path.startswith(REPLACED):
            problems.append(f"line {line}: engine.{path} reaches through the engine (use its method)")
    return problems


@pytest.mark.parametrize("path", sorted(APP_DIR.rglob("*.py")), ids=lambda p: str(p.relative_to(APP_DIR)))
def test_the_window_asks_the_engine_only_what_app_engine_lists(path: Path) -> None:
    assert app_problems(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(("source", "expected"), [
    ("self.engine.scheduler.load(x)", "engine.scheduler is not in AppEngine"),
    ("engine.chats.remotes.records()", "engine.chats.remotes.records reaches through"),
    ("window._engine.chats.tools.servers.all()", "engine.chats.tools.servers.all reaches through"),
    ("engine.chats.client = 'window'", "engine.chats.client reaches through"),
])
def test_a_reach_past_the_protocol_is_seen(source: str, expected: str) -> None:
    assert any(expected in problem for problem in app_problems(source))


def test_what_the_protocol_lists_passes() -> None:
    assert app_problems("engine.remote_models()\nself.engine.chats.rename(1, 't')\nengine.name_client('w')") == []


@pytest.mark.parametrize("name", sorted(MEMBERS))
def test_each_member_is_the_engines_own(name: str) -> None:
    wanted = getattr(AppEngine, name, None)
    if wanted is None:  # an attribute the engine sets in __init__ (chats, settings, paths, adapters)
        assert name in inspect.getsource(Engine.__init__), f"Engine sets no {name}"
        return
    have = getattr(Engine, name)
    if isinstance(wanted, property):  # a part made on first use (speech)
        assert isinstance(have, property), f"Engine.{name} is not a property"
        return
    assert list(inspect.signature(have).parameters) == list(inspect.signature(wanted).parameters)
