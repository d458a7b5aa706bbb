"""The HTTP API sees the engine only through ``ApiEngine`` (``api/shared/api_engine.py``).

Every module under ``engine/api`` is parsed, not imported: on anything the code calls
``engine`` (a name, or an ``.engine`` attribute such as ``service.engine``) only the
Protocol's members may be used, and ``core.Engine`` itself is never imported there. The real
``Engine`` is then checked to offer every member, so the API runs against it unchanged
(mypy checks the signatures wherever an ``Engine`` is handed to ``ApiServer``); the API tests
in ``tests/api`` are the behaviour check, against real servers.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from inglenook.engine import Engine, Paths
from inglenook.engine.api.shared.api_engine import ApiEngine

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "engine" / "api"


def protocol_members() -> set[str]:
    """The names ``ApiEngine`` declares (methods and properties), read from its class body."""
    return {name for name, value in vars(ApiEngine).items()
            if not name.startswith("_") and (callable(value) or isinstance(value, property))}


def _is_engine(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "engine") or (
        isinstance(node, ast.Attribute) and node.attr == "engine")


def reach_violations(source: str, allowed: set[str]) -> list[str]:
    """Each use of an engine attribute outside ``allowed``, and each import of ``Engine``."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _is_engine(node.value) and node.attr not in allowed:
            problems.append(f"line {node.lineno}: engine.{node.attr} is not a member of ApiEngine")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[-1] in ("core", "engine"):
            if any(alias.name == "Engine" for alias in node.names):
                problems.append(f"line {node.lineno}: imports Engine (type it as ApiEngine)")
    return problems


def _api_files() -> list[Path]:
    return sorted(API.rglob("*.py"))


def test_the_protocol_is_small_and_read_from_its_class() -> None:
    members = protocol_members()
    assert {"submit_many", "resolve_model", "models", "health", "settings"} <= members
    assert len(members) <= 15, f"ApiEngine has grown to {len(members)} members: {sorted(members)}"


@pytest.mark.parametrize("path", _api_files(), ids=lambda p: str(p.relative_to(API)))
def test_the_api_uses_only_the_protocol(path: Path) -> None:
    problems = reach_violations(path.read_text(encoding="utf-8"), protocol_members())
    assert not problems, f"{path.relative_to(ROOT)}:\n  " + "\n  ".join(problems)


def test_the_check_catches_a_reach_past_the_protocol() -> None:
    allowed = protocol_members()
    bad = [
        "handle = service.engine.scheduler.submit(job)",
        "def f(engine):\n    return engine.registry.list()",
        "usage = self.engine.cache.usage()",
        "from ...core import Engine",
        "from inglenook.engine.core.engine import Engine",
    ]
    for source in bad:
        assert reach_violations(source, allowed), source
    good = "engine.submit_many(jobs)\nservice.engine.resolve_model(name)\nnames.engine.adapters\nengine.health().queue_depth"
    assert reach_violations(good, allowed) == []


def test_the_engine_offers_every_member(tmp_path: Path) -> None:
    """``Engine`` has each member, of the same kind: a method where the Protocol has one, an
    attribute or property where it has a property."""
    with Engine(Paths.under(tmp_path), scan=False, sequences=1) as engine:
        for name in protocol_members():
            declared = vars(ApiEngine)[name]
            assert hasattr(engine, name), f"Engine lacks {name}"
            if isinstance(declared, property):
                assert not inspect.ismethod(getattr(engine, name)), f"Engine.{name} should be a value"
            else:
                assert inspect.ismethod(getattr(engine, name)), f"Engine.{name} should be a method"
        assert engine.health().queue_depth == 0
        assert engine.loaded_contexts() == {}
