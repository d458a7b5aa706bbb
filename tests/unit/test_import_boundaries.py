"""Rule 2 of the house: front ends use only the engine's public API (``inglenook.engine``).

Every module of the GUI (``app/`` → ``inglenook.app``) and the terminal (``cli/`` → ``inglenook.cli``) is
parsed, not imported, so the check is quick and sees imports inside functions too.

Imports are half of it: a front end that imports only ``Engine`` could still reach through
it (``engine.scheduler.load``, ``engine.store.set_aside``). So on anything the code calls the
engine (``engine``, ``self.engine``, ``window._engine``…) it may use only the ``Engine``'s
own methods and properties, and the public parts it hands out — ``chats``, ``adapters``,
``paths`` and the ``settings`` value, whose types the front door exports — and never assign
one of its attributes.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import inglenook.engine as engine_api
from inglenook.engine import Engine

ROOT = Path(__file__).resolve().parents[2]
ENGINE = "inglenook.engine"
# Where each front end's files live, and the package they are installed as.
# (rglob does not follow inglenook/'s links to the layer folders, so each file is read once.)
FRONT_ENDS = {ROOT / "app": "inglenook.app", ROOT / "cli": "inglenook.cli", ROOT / "inglenook": "inglenook"}
# The Engine's attributes a front end may hold and use, with the type each one is (in the front
# door's __all__). The rest — scheduler, store, registry, cache, usage, background — are rooms
# behind the Engine's methods.
PUBLIC_PARTS = {"chats": "ChatService", "adapters": "AdapterRegistry", "paths": "Paths", "settings": "Settings"}
# What code names the engine by.
ENGINE_NAMES = {"engine", "_engine"}


def _front_end_files() -> list[tuple[Path, str]]:
    files = []
    for folder, package in FRONT_ENDS.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            files.append((path, ".".join((package, *parts))))
    return files


def _absolute(node: ast.ImportFrom, module_name: str, is_package: bool) -> str:
    """The absolute module a ``from … import`` names, relative ones resolved."""
    if node.level == 0:
        return node.module or ""
    base = module_name.split(".") if is_package else module_name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def boundary_violations(source: str, module_name: str, is_package: bool = False) -> list[str]:
    """Each import in ``source`` that reaches past ``inglenook.engine``'s public names."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == ENGINE or alias.name.startswith(ENGINE + "."):
                    problems.append(f"line {node.lineno}: import {alias.name} (use `from {ENGINE} import …`)")
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(node, module_name, is_package)
            if target.startswith(ENGINE + "."):
                problems.append(f"line {node.lineno}: from {target} import … (a submodule of the engine)")
            elif target == ENGINE:
                private = [a.name for a in node.names if a.name not in engine_api.__all__]
                if private:
                    problems.append(f"line {node.lineno}: {', '.join(private)} not in {ENGINE}.__all__")
            elif target == "inglenook" and any(a.name == "engine" for a in node.names):
                problems.append(f"line {node.lineno}: the engine package imported as a module")
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            name = node.args[0].value
            if isinstance(name, str) and name.startswith(ENGINE + "."):
                problems.append(f"line {node.lineno}: {name!r} loaded dynamically")
    return problems


def engine_members() -> set[str]:
    """What a front end may use on an ``Engine``: its public methods and properties, and the
    public parts it hands out."""
    own = {name for name, value in vars(Engine).items()
           if not name.startswith("_") and (callable(value) or isinstance(value, property))}
    return own | set(PUBLIC_PARTS)


def _names_the_engine(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id in ENGINE_NAMES) or (
        isinstance(node, ast.Attribute) and node.attr in ENGINE_NAMES)


def reach_violations(source: str, allowed: set[str] | None = None) -> list[str]:
    """Each attribute chain in ``source`` that reaches past the ``Engine``'s public API into
    one of its rooms, and each assignment to an attribute of the engine."""
    allowed = engine_members() if allowed is None else allowed
    problems = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Attribute) and _names_the_engine(node.value)):
            continue
        if not isinstance(node.ctx, ast.Load):
            problems.append(f"line {node.lineno}: assigns engine.{node.attr} (ask the Engine to change it)")
        elif node.attr not in allowed:
            problems.append(f"line {node.lineno}: engine.{node.attr} reaches into the engine "
                            "(add an Engine method for what is needed)")
    return problems


@pytest.mark.parametrize("path, module_name", _front_end_files(), ids=lambda v: getattr(v, "name", None) or str(v))
def test_front_ends_ask_the_engine_and_never_reach_through_it(path: Path, module_name: str) -> None:
    problems = reach_violations(path.read_text(encoding="utf-8"))
    assert not problems, f"{path.relative_to(ROOT)}:\n  " + "\n  ".join(problems)


def test_the_reach_check_catches_each_way_into_the_engine() -> None:
    bad = [
        "self.engine.scheduler.load(model_id)",
        "engine.store.set_aside",
        "registry = self.engine.registry\nregistry.remove(model_id)",
        "window.engine.background.add_title_listener(f)",
        "hub = ModelStateHub(engine.scheduler)",
        "self._engine.cache.clear()",
        "engine.settings = engine.settings.save(store, theme='dark')",  # a write, even of a public part
        "del engine.chats",
    ]
    for source in bad:
        assert reach_violations(source), source
    good = ("engine.load_model(model_id)\nself.engine.settings.theme\nengine.chats.send(1, 'hi')\n"
            "window.engine.paths.logs\nengine.adapters.list()\nengine.update_settings(theme='dark')\n"
            "server.scheduler  # not the engine\nself.engine_page.store")
    assert reach_violations(good) == []


def test_the_public_parts_are_public_types() -> None:
    """What front ends may hold of the Engine is itself in the front door, and is there."""
    assert set(PUBLIC_PARTS.values()) <= set(engine_api.__all__)
    assert not set(PUBLIC_PARTS) & {name for name in vars(Engine) if not name.startswith("_")}, \
        "a public part that is also a method or property needs no entry here"
    assert {"scheduler", "store", "registry", "background", "cache", "usage"}.isdisjoint(engine_members())


@pytest.mark.parametrize("path, module_name", _front_end_files(), ids=lambda v: getattr(v, "name", None) or str(v))
def test_front_ends_import_only_the_public_engine_api(path: Path, module_name: str) -> None:
    problems = boundary_violations(path.read_text(encoding="utf-8"), module_name, path.name == "__init__.py")
    assert not problems, f"{path.relative_to(ROOT)}:\n  " + "\n  ".join(problems)


def test_the_check_catches_each_way_around_the_boundary() -> None:
    bad = {
        "from inglenook.engine.core.engine import Engine": "inglenook.app.window",
        "import inglenook.engine.store.store": "inglenook.app.window",
        "from ..engine.store import Message": "inglenook.app.window",  # relative escape from app/
        "from ..engine import Engine\nfrom .engine.core import Engine": "inglenook.cli",
        "from .. import engine": "inglenook.app.window",
        "from inglenook.engine import importers": "inglenook.cli.hub",  # a module, not a public name
        "def f():\n    from inglenook.engine.api.server import ApiServer": "inglenook.app.services.server_control",
        "import importlib\nimportlib.import_module('inglenook.engine.lab')": "inglenook.app.pages.settings.dialog",
    }
    for source, module_name in bad.items():
        assert boundary_violations(source, module_name), source
    good = "from inglenook.engine import Engine, Message\nfrom . import theme\nfrom .tasks import Workers"
    assert boundary_violations(good, "inglenook.app.window") == []


def test_every_public_name_resolves_and_none_is_a_module() -> None:
    assert len(engine_api.__all__) == len(set(engine_api.__all__)) > 40
    for name in engine_api.__all__:
        value = getattr(engine_api, name)
        assert not isinstance(value, ModuleType), name
    with pytest.raises(AttributeError):
        engine_api.no_such_name  # noqa: B018


def test_the_lazy_table_and_the_type_checkers_view_agree() -> None:
    """``_EXPORTS`` serves names at run time; the TYPE_CHECKING imports serve type checkers."""
    tree = ast.parse(Path(engine_api.__file__).read_text(encoding="utf-8"))
    typed: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.level == 1
                for alias in stmt.names:
                    assert alias.asname == alias.name, f"{alias.name}: re-export it as itself"
                    typed[alias.name] = stmt.module or ""
    assert typed == engine_api._MODULE_OF


def test_importing_the_engine_loads_neither_qt_nor_llama_cpp() -> None:
    """The package itself is light; its modules import llama.cpp inside functions only."""
    code = (
        "import sys, inglenook.engine as e\n"
        "heavy = ('llama_cpp', 'PySide6', 'fastapi', 'numpy')\n"
        "assert not [m for m in sys.modules if m.split('.')[0] in heavy], sorted(sys.modules)\n"
        "for name in e.__all__:\n"
        "    getattr(e, name)\n"
        "assert not [m for m in sys.modules if m.split('.')[0] in ('llama_cpp', 'PySide6')]\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
