"""The command line starts light: a command imports its own group's module and nothing else.

Behaviour, not timing: these tests look at which modules a start loads (``sys.modules`` in a
fresh interpreter), never at a clock. The real `inglenook run` is held to the same in
``tests/integration/test_cli_startup.py``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import inglenook.engine as engine_api
from inglenook.cli import COMMAND_MODULES, build_parser, main
from inglenook.engine import Engine, InglenookError, Paths


def _modules_after(code: str) -> list[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.parametrize("module", sorted(COMMAND_MODULES))
def test_the_command_table_names_what_each_module_adds(module: str) -> None:
    commands = argparse.ArgumentParser().add_subparsers()
    importlib.import_module(f"inglenook.cli.{module}").add_commands(commands)
    assert tuple(commands.choices) == COMMAND_MODULES[module]


def test_the_full_parser_has_every_command_once() -> None:
    full = build_parser()
    subparsers = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    grouped = [name for names in COMMAND_MODULES.values() for name in names]
    assert len(grouped) == len(set(grouped))
    assert list(subparsers.choices) == ["run", "list", "show", "rm", "doctor", *grouped]


@pytest.mark.parametrize(("argv", "module"), [
    (["run", "smollm2", "hi"], None),
    (["--debug", "list"], None),
    (["pull", "owner/repo"], "hub"),
    (["serve", "--port", "0"], "serve"),
    (["adapters", "list"], "adapters"),
])
def test_a_command_reads_only_its_own_groups_parser(argv: list[str], module: str | None) -> None:
    loaded = _modules_after(f"from inglenook.cli import build_parser\nbuild_parser({argv!r}).parse_args({argv!r})")
    groups = {m.removeprefix("inglenook.cli.") for m in loaded if m.startswith("inglenook.cli.")} & set(COMMAND_MODULES)
    assert groups == ({module} if module else set())


@pytest.mark.parametrize("argv", [["--help"], ["-h", "run"], ["no-such-command"], []])
def test_help_and_unknown_commands_list_every_group(argv: list[str]) -> None:
    parser = build_parser(argv)
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert {"pull", "serve", "adapters", "run"} <= set(subparsers.choices)


def test_importing_the_cli_loads_no_engine_room() -> None:
    """`import inglenook.cli` (every command's first step) loads the engine's light names only:
    no store, registry, runtime or scheduler, nor what they import; those come with the
    command that uses them."""
    loaded = _modules_after("import inglenook.cli")
    rooms = ("store.store", "models.registry", "runtime.model", "runtime.model_loading", "scheduling.scheduler",
             "core.engine", "chat.chat", "store.cache", "api.server")
    heavy = [m for m in loaded if m.removeprefix("inglenook.engine.") in rooms or m.startswith("inglenook.app")
             or m.split(".")[0] in ("sqlite_utils", "numpy", "jinja2", "llama_cpp", "pydantic", "httpx", "PySide6")]
    assert not heavy


def test_run_loads_its_model_with_one_sequence(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A terminal chat is one conversation: its engine loads models with one sequence, not the
    several the window and the API share (each a KV stream of the whole context)."""
    with Engine(Paths.under(home), scan=False, sequences=1) as engine:
        assert engine.load_options().parallel == 1
    with Engine(Paths.under(home), scan=False) as engine:
        assert engine.load_options().parallel == engine.settings.parallel_sequences > 1
    asked: list[object] = []

    def opened(*_args: object, **kwargs: object) -> Engine:
        asked.append(kwargs.get("sequences"))
        raise InglenookError("stop here")

    monkeypatch.setattr(engine_api, "Engine", opened)
    assert main(["run", "smollm2", "hi"]) == 1
    assert asked == [1]
