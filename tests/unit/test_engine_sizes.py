"""No engine module over 600 lines and no engine function over 80: a module or a function
that grows past them holds more than one job, and is split by what depends on what (as
``docs/ARCHITECTURE.md`` describes each package's modules), not by line count.

Run as a script (``python tests/unit/test_engine_sizes.py``) it prints every module and
function over the limits, and the largest of each.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGINE_DIR = ROOT / "engine"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def module_lines() -> dict[str, int]:
    """Each engine module (relative to the repository) -> its lines."""
    return {str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
            for path in sorted(ENGINE_DIR.rglob("*.py"))}


def function_lines() -> dict[str, int]:
    """Each engine function and method ("engine/x.py:Class.method") -> its lines, decorators
    apart; a nested function counts on its own and inside the one that holds it."""
    found: dict[str, int] = {}
    for path in sorted(ENGINE_DIR.rglob("*.py")):
        relative = path.relative_to(ROOT)

        def visit(node: ast.AST, prefix: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    name = f"{prefix}{child.name}"
                    found[f"{relative}:{name}"] = (child.end_lineno or child.lineno) - child.lineno + 1
                    visit(child, f"{name}.")
                elif isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}{child.name}.")
                else:
                    visit(child, prefix)

        visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return found


def over(sizes: dict[str, int], limit: int) -> dict[str, int]:
    return {name: lines for name, lines in sizes.items() if lines > limit}


def test_no_engine_module_is_over_the_limit() -> None:
    assert over(module_lines(), MAX_MODULE_LINES) == {}


def test_no_engine_function_is_over_the_limit() -> None:
    assert over(function_lines(), MAX_FUNCTION_LINES) == {}


def test_the_check_sees_functions_methods_and_nested_ones() -> None:
    functions = function_lines()
    assert "engine/scheduling/scheduler.py:Scheduler.submit" in functions
    assert "engine/api/server.py:create_app" in functions
    assert any(name.startswith("engine/api/server.py:_add_health.") for name in functions)  # a route inside a step
    assert "engine/__init__.py" in module_lines()


if __name__ == "__main__":
    modules, functions = module_lines(), function_lines()
    print(f"{len(modules)} engine modules, {len(functions)} functions")
    for name, lines in {**over(modules, MAX_MODULE_LINES), **over(functions, MAX_FUNCTION_LINES)}.items():
        print(f"OVER  {name}: {lines}")
    print("largest modules:", ", ".join(f"{n} {c}" for n, c in sorted(modules.items(), key=lambda i: -i[1])[:5]))
    print("largest functions:", ", ".join(f"{n} {c}" for n, c in sorted(functions.items(), key=lambda i: -i[1])[:5]))
