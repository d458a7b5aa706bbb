"""The wheel's package list: explicit in pyproject.toml, so these tests make sure it cannot
silently leave a subpackage out (issue 12, item 5)."""

from __future__ import annotations

import re
import runpy
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "wheel_check.py"


def _setuptools_config(root: Path) -> dict:
    with open(root / "pyproject.toml", "rb") as file:
        return tomllib.load(file)["tool"]["setuptools"]


def test_every_folder_with_an_init_is_a_listed_package() -> None:
    config = _setuptools_config(ROOT)
    found = set()
    for package, folder in config["package-dir"].items():
        source = ROOT / folder
        inits = [source / "__init__.py"] if package == "inglenook" else sorted(source.rglob("__init__.py"))
        for init in inits:
            parts = init.parent.relative_to(source).parts
            found.add(".".join((package, *parts)))
    assert found == set(config["packages"])
    assert {"inglenook.cli", "inglenook.engine.lab"} <= found  # the walk reaches the nested ones


def test_the_wheel_check_fails_when_a_subpackage_is_left_out(tmp_path: Path) -> None:
    """The check itself can fail: a copy of the project whose list forgets engine.lab."""
    copy = tmp_path / "project"
    copy.mkdir()
    runpy.run_path(str(SCRIPT))["copy_build_inputs"](ROOT, copy)  # what the check itself copies
    pyproject = copy / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    forgetful = re.sub(r'\s*"inglenook\.engine\.lab",', "", text, count=1)
    assert forgetful != text
    pyproject.write_text(forgetful, encoding="utf-8")

    done = subprocess.run([sys.executable, str(SCRIPT), "--root", str(copy)], capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r"not in inglenook-\S+\.whl: inglenook/engine/lab/__init__\.py", done.stderr), done.stderr
    assert "inglenook/engine/core/engine.py" not in done.stderr  # only what was left out is named
