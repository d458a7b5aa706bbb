"""The lazy door every engine package's ``__init__`` is built with (PEP 562).

A package lists which of its modules defines each name it exports; a name's module is
imported on first use, so importing a package (and ``inglenook.engine`` above them all)
loads nothing heavy: FastAPI, numpy and llama.cpp come in only with the modules that use
them, as they did when the engine was one folder.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_door(
    package: str, exports: Mapping[str, tuple[str, ...]]
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` for ``package``, whose module
    ``package.<module>`` defines each name in ``exports[<module>]``."""
    module_of = {name: module for module, names in exports.items() for name in names}
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value  # later look-ups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *module_of})

    return sorted(module_of), __getattr__, __dir__
