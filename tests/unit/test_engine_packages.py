"""The engine's packages are its architecture: each imports another only through its door
(the package's ``__init__``), only the packages it declares, and never in a circle.

Every engine file is parsed, not imported, so imports inside functions and under
``TYPE_CHECKING`` count like the others: a cycle hidden in a function is still a cycle.
``ALLOWED`` is the table ``docs/ARCHITECTURE.md`` shows and each package's docstring repeats;
the tests below hold all three to the code.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENGINE_DIR = ROOT / "engine"
ENGINE = "inglenook.engine"
LEAF = "base"
MAX_MODULES = 25

# Package -> the packages its modules may import (through their doors). Lower rooms first.
ALLOWED: dict[str, tuple[str, ...]] = {
    "base": (),
    "text": ("base",),
    "runtime": ("base", "text"),
    "store": ("base",),
    "documents": ("base", "store"),
    "models": ("base", "runtime", "store"),
    "scheduling": ("base", "models", "runtime", "store"),
    "usage": ("base", "store", "text"),
    "remote": ("base", "runtime", "store"),
    "tools": ("base", "store"),
    "chat": ("base", "documents", "models", "remote", "runtime", "scheduling", "store", "text", "tools", "usage"),
    "lab": ("base", "models", "runtime", "store"),
    "speech": ("base",),
    "core": ("base", "chat", "documents", "models", "remote", "runtime", "scheduling", "speech", "store", "tools",
             "usage"),
    "api.shared": ("base", "core", "documents", "models", "runtime", "scheduling", "speech", "store", "text",
                   "tools", "usage"),
    "api.openai": ("api.shared", "base", "core", "models", "store", "text"),
    "api.responses": ("api.shared", "base", "store", "text", "tools"),
    "api.anthropic": ("api.shared", "base", "text"),
    "api": ("api.anthropic", "api.openai", "api.responses", "api.shared", "base", "core", "models", "remote",
            "speech", "usage"),
}


def engine_files() -> dict[str, tuple[Path, bool]]:
    """Each engine module's dotted name (under ``inglenook.engine``) -> (file, is a package)."""
    found = {}
    for path in sorted(ENGINE_DIR.rglob("*.py")):
        parts = path.relative_to(ENGINE_DIR).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join((ENGINE, *(parts[:-1] if is_package else parts)))
        found[name] = (path, is_package)
    return found


def packages_of(files: dict[str, tuple[Path, bool]]) -> set[str]:
    """The engine's packages, named relative to it ("runtime", "api.shared")."""
    return {name.removeprefix(ENGINE + ".") for name, (_, is_package) in files.items() if is_package and name != ENGINE}


def package_of(module: str, packages: set[str]) -> str | None:
    """The innermost package that holds ``module`` (a package holds itself); None for the root."""
    relative = module.removeprefix(ENGINE + ".") if module.startswith(ENGINE + ".") else ""
    best = None
    for package in packages:
        if (relative == package or relative.startswith(package + ".")) and (best is None or len(package) > len(best)):
            best = package
    return best


def _absolute(node: ast.ImportFrom, module_name: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module_name.split(".") if is_package else module_name.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _loads_a_module(call: ast.Call) -> bool:
    """``importlib.import_module(…)`` or ``__import__(…)`` (not, say, ``logging.getLogger``)."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    return name in ("import_module", "__import__")


def imported_modules(source: str, module_name: str, is_package: bool, modules: set[str]) -> list[tuple[int, str]]:
    """(line, absolute module) for every engine import in ``source``, wherever it is: module
    level, inside functions, under ``TYPE_CHECKING``, or loaded by name with importlib. A
    module imported by name from its package (``from pkg import module``) counts as the module."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(node, module_name, is_package)
            found.append((node.lineno, target))
            found += [(node.lineno, f"{target}.{a.name}") for a in node.names if f"{target}.{a.name}" in modules]
        elif isinstance(node, ast.Call) and _loads_a_module(node) and node.args and isinstance(node.args[0], ast.Constant):
            value = node.args[0].value
            if isinstance(value, str) and value.startswith(ENGINE + "."):
                found.append((node.lineno, value))
    return [(line, target) for line, target in found if target == ENGINE or target.startswith(ENGINE + ".")]


def violations(source: str, module_name: str, is_package: bool, packages: set[str], modules: set[str],
               allowed: dict[str, tuple[str, ...]]) -> tuple[list[str], set[tuple[str, str]]]:
    """What is wrong with ``source``'s engine imports, and the package edges it adds."""
    problems: list[str] = []
    edges: set[tuple[str, str]] = set()
    here = package_of(module_name, packages)
    if here is None:
        return problems, edges  # the front door (inglenook.engine itself) may name every package's door
    for line, target in imported_modules(source, module_name, is_package, modules):
        there = package_of(target, packages)
        if there is None:
            problems.append(f"line {line}: imports {ENGINE} (the front ends' door, above every package)")
            continue
        if there == here:
            continue
        edges.add((here, there))
        if target != f"{ENGINE}.{there}":
            problems.append(f"line {line}: {target} is past the door of {there} (import from {ENGINE}.{there})")
        if there not in allowed.get(here, ()):
            problems.append(f"line {line}: {here} may not import {there} (ALLOWED[{here!r}])")
    return problems, edges


def cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """Each set of packages that import one another in a circle (strongly connected, 2 or more)."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    order: list[str] = []
    seen: set[str] = set()

    def visit(node: str, into: dict[str, set[str]], out: list[str]) -> None:
        stack = [(node, iter(sorted(into[node])))]
        seen.add(node)
        while stack:
            current, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                out.append(current)
            elif child not in seen:
                seen.add(child)
                stack.append((child, iter(sorted(into[child]))))

    for node in sorted(graph):
        if node not in seen:
            visit(node, graph, order)
    reverse: dict[str, set[str]] = {node: set() for node in graph}
    for a, targets in graph.items():
        for b in targets:
            reverse[b].add(a)
    seen = set()
    found = []
    for node in reversed(order):
        if node not in seen:
            component: list[str] = []
            visit(node, reverse, component)
            if len(component) > 1:
                found.append(sorted(component))
    return found


def scan() -> tuple[list[str], set[tuple[str, str]]]:
    files = engine_files()
    packages = packages_of(files)
    problems: list[str] = []
    edges: set[tuple[str, str]] = set()
    for name, (path, is_package) in files.items():
        found, added = violations(path.read_text(encoding="utf-8"), name, is_package, packages, set(files), ALLOWED)
        problems += [f"{path.relative_to(ROOT)}: {p}" for p in found]
        edges |= added
    return problems, edges


def test_every_import_goes_through_a_declared_door() -> None:
    problems, _ = scan()
    assert not problems, "\n".join(problems)


def test_no_cycle_between_packages() -> None:
    _, edges = scan()
    assert cycles(edges) == []
    assert cycles({(a, b) for a, targets in ALLOWED.items() for b in targets}) == []


def module_edges() -> set[tuple[str, str]]:
    """Imports between the modules of one package (the package's own door apart), counted
    wherever they stand: a type imported under ``TYPE_CHECKING`` is a dependency too."""
    files = engine_files()
    edges: set[tuple[str, str]] = set()
    for name, (path, is_package) in files.items():
        if is_package:
            continue
        package = name.rsplit(".", 1)[0]
        for _, target in imported_modules(path.read_text(encoding="utf-8"), name, False, set(files)):
            if target in files and not files[target][1] and target != name and target.rsplit(".", 1)[0] == package:
                edges.add((name.removeprefix(ENGINE + "."), target.removeprefix(ENGINE + ".")))
    return edges


def test_no_cycle_between_modules_of_a_package() -> None:
    """Inside a package too each module stands on those below it: the chat service on its
    turn and the context protocol its helpers take, the model on its decoder and the view
    its sequences take, never the other way round."""
    edges = module_edges()
    assert cycles(edges) == []
    assert ("chat.tool_turn", "chat.turn") in edges and ("chat.chat", "chat.tool_turn") in edges
    assert ("runtime.sequence", "runtime.model_view") in edges and ("runtime.model", "runtime.decoder") in edges


def test_the_table_names_every_package_and_only_them() -> None:
    assert set(ALLOWED) == packages_of(engine_files())


def test_the_leaf_imports_nothing_of_the_engine() -> None:
    assert ALLOWED[LEAF] == ()
    for name, (path, is_package) in engine_files().items():
        if name == f"{ENGINE}.{LEAF}" or name.startswith(f"{ENGINE}.{LEAF}."):
            outside = [t for _, t in imported_modules(path.read_text(encoding="utf-8"), name, is_package, set())
                       if not t.startswith(f"{ENGINE}.{LEAF}")]
            assert outside == [], f"{path.relative_to(ROOT)} imports {outside}"


def test_no_package_is_a_flat_folder_again() -> None:
    for package in packages_of(engine_files()):
        folder = ENGINE_DIR.joinpath(*package.split("."))
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        assert len(modules) <= MAX_MODULES, f"{package} has {len(modules)} modules"
    assert [p.name for p in ENGINE_DIR.glob("*.py")] == ["__init__.py"], "every engine module lives in a package"


def test_the_check_catches_each_way_around_a_door() -> None:
    packages = {"base", "runtime", "chat", "api", "api.shared"}
    modules = {f"{ENGINE}.{m}" for m in ("runtime.model", "runtime.sequence", "runtime.gbnf", "chat.chat", "chat.titles")}
    allowed = {"base": (), "runtime": ("base",), "chat": ("base", "runtime"), "api.shared": ("base",),
               "api": ("api.shared", "base")}
    bad = {
        # past the door, at module level, in a function, under TYPE_CHECKING
        "from ..runtime.model import LoadedModel": "inglenook.engine.chat.chat",
        "def f():\n    from ..runtime.model import LoadedModel": "inglenook.engine.chat.chat",
        "if TYPE_CHECKING:\n    from ..runtime.sequence import KvSlot": "inglenook.engine.chat.chat",
        "import inglenook.engine.runtime.model": "inglenook.engine.chat.chat",
        "from inglenook.engine.runtime import model": "inglenook.engine.chat.chat",
        "import importlib\nimportlib.import_module('inglenook.engine.runtime.model')": "inglenook.engine.chat.chat",
        # a package it may not import (upwards: the way a cycle starts), through the door all the same
        "from ..chat import ChatService": "inglenook.engine.runtime.model",
        "def f():\n    from ..chat import ChatService": "inglenook.engine.runtime.model",
        # the leaf importing anything of the engine
        "from ..runtime import LoadedModel": "inglenook.engine.base.jobs",
        # a sub-package reaching up to its parent (which imports it)
        "from .. import ApiServer": "inglenook.engine.api.shared.service",
        # the front ends' door, from inside the engine
        "from inglenook.engine import Engine": "inglenook.engine.chat.chat",
    }
    for source, module_name in bad.items():
        problems, _ = violations(source, module_name, False, packages, modules, allowed)
        assert problems, source
    good = {
        "from ..runtime import LoadedModel\nfrom .titles import title_from": "inglenook.engine.chat.chat",
        "def f():\n    from ..base import JobCancelled": "inglenook.engine.runtime.model",
        "from .shared import ApiService": "inglenook.engine.api.server",  # api -> api.shared, through its door
        "from . import gbnf": "inglenook.engine.runtime.sequence",
    }
    for source, module_name in good.items():
        assert violations(source, module_name, False, packages, modules, allowed)[0] == [], source
    # a cycle hidden in functions still shows as edges both ways
    _, one = violations("def f():\n    from ..chat import X", "inglenook.engine.runtime.m", False, packages, modules, allowed)
    _, two = violations("from ..runtime import Y", "inglenook.engine.chat.m", False, packages, modules, allowed)
    assert cycles(one | two) == [["chat", "runtime"]]
    assert cycles({("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")}) == [["a", "b", "c"]]
    assert cycles({("a", "b"), ("b", "c")}) == []


def _type_checking_names(path: Path) -> dict[str, str]:
    typed: dict[str, str] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.level == 1, ast.dump(stmt)
                for alias in stmt.names:
                    assert alias.asname == alias.name, f"{alias.name}: re-export it as itself"
                    typed[alias.name] = stmt.module or ""
    return typed


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_each_door_serves_what_it_lists(package: str) -> None:
    """A door's lazy table and its TYPE_CHECKING imports agree, every name resolves to the
    module the table names, and its docstring's second line repeats ``ALLOWED``."""
    door = importlib.import_module(f"{ENGINE}.{package}")
    table = {name: module for module, names in door._EXPORTS.items() for name in names}
    assert _type_checking_names(Path(door.__file__)) == table
    for name, module in table.items():
        value = getattr(door, name)
        defined_in = getattr(value, "__module__", None)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert defined_in == f"{ENGINE}.{package}.{module}", f"{package}.{name} comes from {defined_in}"
    doc = door.__doc__ or ""
    declared = re.search(r"May import: (.*)\.", doc) if ALLOWED[package] else None
    if ALLOWED[package]:
        assert declared is not None and tuple(declared.group(1).split(", ")) == ALLOWED[package], doc
    else:
        assert "Imports nothing from the rest of the engine" in doc


def test_the_architecture_document_shows_the_table() -> None:
    """docs/ARCHITECTURE.md's package map lists each package with what it may import."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z/]+)/` \|[^|]*\| ([^|]*) \|$", text, re.MULTILINE)
    shown = {folder.replace("/", "."): () if imports.strip() == "—"
             else tuple(p.strip().replace("/", ".") for p in imports.split(",")) for folder, imports in rows}
    assert shown == ALLOWED
