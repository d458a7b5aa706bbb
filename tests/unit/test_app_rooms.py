"""The window's rooms are its architecture (docs/ARCHITECTURE.md, "The window's rooms"):

- ``main``, ``window`` and ``desktop`` are the composition root; every other module lives in
  ``services``, ``controllers``, ``widgets``, ``text`` or a package under ``pages``.
- pages and widgets never import controllers, nor the worker lanes (``services.workers``):
  they run background work through ``services.operations`` and expose signals;
- controllers never build widgets: no class of theirs is a widget, and they call no widget
  class (``QFileDialog.getOpenFileName`` builds one). A widget is a QtWidgets class or an app
  class whose bases lead to one; a page module's dataclass or QObject is not;
- ``text`` holds no widgets (QtGui's text documents are text);
- nothing imports ``window`` but the composition root.

Files are parsed, not imported, so imports inside functions count like the others.
``KNOWN_DEBTS`` lists what still breaks a rule, each one by name; the test fails on a new
break and on a listed one that is gone (so the list only shrinks).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APP_DIR = ROOT / "app"
APP = "inglenook.app"
ROOT_MODULES = {"main", "window", "desktop"}
ROOMS = ("services", "controllers", "widgets", "text", "pages")
WIDGET_ROOMS = ("pages", "widgets")
WORKERS = f"{APP}.services.workers"

# (module under inglenook.app, what it does that a rule forbids). Each is work left, not a rule;
# none is left (the last, ActiveChat building tool call blocks, went to the chat page).
KNOWN_DEBTS: set[tuple[str, str]] = set()


@dataclass
class Module:
    name: str  # under inglenook.app, e.g. "pages.chat.page"
    tree: ast.Module
    imports: dict[str, str] = field(default_factory=dict)  # local name -> "module:object" or "module"

    @property
    def room(self) -> str:
        return self.name.split(".")[0]


def _absolute(node: ast.ImportFrom, name: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = f"{APP}.{name}".split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def app_modules() -> dict[str, Module]:
    found = {}
    for path in sorted(APP_DIR.rglob("*.py")):
        parts = path.relative_to(APP_DIR).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        if not name:
            continue  # app/__init__.py
        module = Module(name, ast.parse(path.read_text(encoding="utf-8")))
        for node in ast.walk(module.tree):
            if isinstance(node, ast.ImportFrom):
                source = _absolute(node, name, is_package)
                for alias in node.names:
                    module.imports[alias.asname or alias.name] = f"{source}:{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    module.imports[alias.asname or alias.name.split(".")[0]] = alias.name
        found[name] = module
    return found


def imported_modules(module: Module) -> set[str]:
    """The app modules ``module`` imports (``from pkg import mod`` names the module ``pkg.mod``)."""
    names = set()
    for target in module.imports.values():
        source, _, obj = target.partition(":")
        names.add(source)
        if obj[:1].islower():  # ``from pkg import mod``: the module pkg.mod (a function adds a harmless name)
            names.add(f"{source}.{obj}")
    return names


NOT_WIDGETS = {"QApplication", "QSizePolicy", "QStyle"}  # in QtWidgets, but the app, layout hints, a style


def is_widget_class(module: Module, name: str, seen: frozenset[str] = frozenset()) -> bool:
    """Whether ``name`` in ``module`` is a widget: a QtWidgets class, or an app class whose
    bases lead to one (a page module's dataclass or event filter is not a widget)."""
    target = module.imports.get(name, "")
    source, _, obj = target.partition(":")
    if source == "PySide6.QtWidgets":
        return obj not in NOT_WIDGETS
    if source.startswith(f"{APP}.") and source[len(APP) + 1:] in MODULES:
        return _defines_widget(MODULES[source[len(APP) + 1:]], obj, seen)
    return not target and _defines_widget(module, name, seen)  # a class of the module itself


def _defines_widget(module: Module, name: str, seen: frozenset[str]) -> bool:
    key = f"{module.name}:{name}"
    if key in seen:
        return False
    for node in module.tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return any(isinstance(base, ast.Name) and is_widget_class(module, base.id, seen | {key})
                       for base in node.bases)
    return False


def rule_breaks(module: Module) -> set[str]:
    """What in ``module`` breaks a rule of its room, each as a short phrase."""
    breaks = set()
    imported = imported_modules(module)
    if module.room in WIDGET_ROOMS:
        breaks |= {f"imports {name}" for name in imported
                   if name.startswith(f"{APP}.controllers.") or name == WORKERS}
    if module.room == "text":  # QtGui's text documents are text; widgets are not
        breaks |= {f"imports {name}" for name in imported if name.startswith("PySide6.QtWidgets")}
    if module.name not in ROOT_MODULES:
        breaks |= {f"imports {name}" for name in imported if name == f"{APP}.window"}
    if module.room == "controllers":
        for node in ast.walk(module.tree):
            if isinstance(node, ast.ClassDef):
                breaks |= {f"subclasses {base.id}" for base in node.bases
                           if isinstance(base, ast.Name) and is_widget_class(module, base.id)}
            elif isinstance(node, ast.Call):
                func = node.func.value if isinstance(node.func, ast.Attribute) else node.func
                if isinstance(func, ast.Name) and is_widget_class(module, func.id):
                    breaks.add(f"builds {func.id}")
    return breaks


MODULES = app_modules()


def test_every_module_lives_in_a_room() -> None:
    homeless = [name for name in MODULES if name not in ROOT_MODULES and name.split(".")[0] not in ROOMS]
    assert homeless == []
    pages = {name.split(".")[1] for name in MODULES if name.startswith("pages.") and name.count(".") >= 1}
    loose = [name for name in MODULES if name.count(".") == 1 and name.startswith("pages.")
             and name.split(".")[1] not in pages]
    assert loose == [], "each page is a package under pages/"


def test_the_rooms_keep_their_rules() -> None:
    found = {(name, phrase) for name, module in MODULES.items() for phrase in rule_breaks(module)}
    new = sorted(found - KNOWN_DEBTS)
    assert new == [], "a module breaks a rule of its room (docs/ARCHITECTURE.md, The window's rooms)"
    paid = sorted(KNOWN_DEBTS - found)
    assert paid == [], "a known debt is gone: take it off KNOWN_DEBTS"


def _module(name: str, source: str) -> Module:
    module = Module(name, ast.parse(source))
    for node in ast.walk(module.tree):
        if isinstance(node, ast.ImportFrom):
            source_module = _absolute(node, name, False)
            for alias in node.names:
                module.imports[alias.asname or alias.name] = f"{source_module}:{alias.name}"
    return module


@pytest.mark.parametrize(("name", "source", "phrase"), [
    ("pages.chat.page", "from inglenook.app.controllers.active_chat import ActiveChat",
     "imports inglenook.app.controllers.active_chat"),
    ("pages.chat.page", "from inglenook.app.controllers import answers", "imports inglenook.app.controllers.answers"),
    ("widgets.banner", "from inglenook.app.services.workers import Lane", "imports inglenook.app.services.workers"),
    ("pages.usage.page", "from ...services import workers", "imports inglenook.app.services.workers"),
    ("controllers.images", "from PySide6.QtWidgets import QFileDialog\ndef f():\n    QFileDialog.getOpenFileName()",
     "builds QFileDialog"),
    ("controllers.images", "from inglenook.app.widgets.image_viewer import ImageViewer\nImageViewer(None)",
     "builds ImageViewer"),
    ("controllers.images", "from PySide6.QtWidgets import QWidget\nclass Box(QWidget): pass", "subclasses QWidget"),
    ("controllers.images", "from PySide6.QtWidgets import QFrame\nclass Box(QFrame): pass\nclass Card(Box): pass\nCard()",
     "builds Card"),
    ("controllers.images", "from inglenook.app.pages.chat.tool_call_widget import ToolCallWidget\nToolCallWidget(1)",
     "builds ToolCallWidget"),
    ("services.tray", "from inglenook.app.window import MainWindow", "imports inglenook.app.window"),
    ("text.markdown", "from PySide6.QtWidgets import QLabel", "imports PySide6.QtWidgets"),
])
def test_a_break_of_each_rule_is_seen(name: str, source: str, phrase: str) -> None:
    assert phrase in rule_breaks(_module(name, source))


@pytest.mark.parametrize(("name", "source"), [
    ("pages.chat.page", "from inglenook.app.services.operations import Operations"),
    ("controllers.images", "from inglenook.app.widgets.image_viewer import ImageViewer\nviewer: ImageViewer"),
    ("controllers.images", "from inglenook.app.widgets.image_viewer import picture_of_input\npicture_of_input(1)"),
    ("controllers.images", "from inglenook.app.pages.chat.attachment_bar import CITE_SCHEME\nprint(CITE_SCHEME)"),
    ("controllers.active_chat", "from inglenook.app.pages.chat.assistant_editor import Choices\nChoices((), ())"),
    ("controllers.answers", "from inglenook.app.controllers.approvals import ApprovalBridge\nApprovalBridge()"),
    ("main", "from inglenook.app.window import MainWindow"),
])
def test_what_the_rules_allow_is_not_a_break(name: str, source: str) -> None:
    assert rule_breaks(_module(name, source)) == set()
