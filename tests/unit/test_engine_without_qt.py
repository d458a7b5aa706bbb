"""Rule 1 of the house: the engine never imports Qt."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import inglenook.engine


def test_every_engine_module_imports_with_pyside6_blocked() -> None:
    found = pkgutil.walk_packages(inglenook.engine.__path__, prefix="inglenook.engine.")
    modules = [m.name for m in found]
    assert "inglenook.engine.lab.lab" in modules, "subpackages are walked too"
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('PySide6', 'shiboken6', 'PyQt5', 'PyQt6'):\n"
        "            raise ImportError('Qt is blocked in the engine: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        f"for name in {modules!r}:\n"
        "    __import__(name)\n"
        "assert not any(m.startswith('PySide6') for m in sys.modules)\n"
        "print('ok', len(sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok")
