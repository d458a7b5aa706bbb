"""`make wheel-check` (part of `make test`): the wheel holds every module, installed as a user gets it.

1. Copies what the build reads (pyproject.toml, README.md, the folders of pyproject's
   package-dir) to a scratch folder and builds the wheel there (`pip wheel --no-deps`), so
   a stale ``build/lib`` in the checkout can never lend the wheel a file it lost.
2. Compares the wheel with the folders: every ``.py`` file and every resource must be in it
   under its installed name. A subpackage left out of ``[tool.setuptools] packages`` fails here.
3. Installs it, not editable, into a fresh venv whose only other path is the dev venv's
   site-packages (a ``.pth`` line: nothing is downloaded, and the dev venv's editable hook,
   a ``.pth`` of its own, is not run from there), then from outside the checkout imports
   every installed module and runs both entry points (``inglenook --version`` and
   ``python -m inglenook --version``).

Exit status 0 when all holds; 1 with each problem on stderr otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP = "inglenook"  # the package whose folder holds links to the others (not followed here)

# Run by the fresh venv's interpreter: import every installed module, say which failed.
IMPORT_ALL = """
import importlib, json, pkgutil, sys, traceback
import inglenook
where = sys.argv[1]
if not inglenook.__file__.startswith(where):
    sys.exit(f"inglenook came from {inglenook.__file__}, not the installed wheel in {where}")
names = ["inglenook"] + sorted(m.name for m in pkgutil.walk_packages(inglenook.__path__, "inglenook."))
failed = {}
for name in names:
    if name.rsplit(".", 1)[-1] == "__main__":
        continue  # runs the program; the entry point check runs it instead
    try:
        importlib.import_module(name)
    except Exception:
        failed[name] = traceback.format_exc(limit=-3)
print(json.dumps({"imported": len(names) - len(failed), "failed": failed}))
"""


def package_dirs(root: Path) -> dict[str, str]:
    with open(root / "pyproject.toml", "rb") as file:
        return tomllib.load(file)["tool"]["setuptools"]["package-dir"]


def expected_files(root: Path) -> set[str]:
    """Every file the wheel must hold, by its path inside the wheel."""
    expected = set()
    for package, folder in package_dirs(root).items():
        source = root / folder
        prefix = Path(*package.split("."))
        files = source.glob("*.py") if package == TOP else source.rglob("*")
        for path in files:
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                expected.add((prefix / path.relative_to(source)).as_posix())
    return expected


def copy_build_inputs(root: Path, target: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(root / name, target / name)
    for folder in package_dirs(root).values():
        # symlinks=True: inglenook/'s links stay links (to the copied folders beside them).
        shutil.copytree(root / folder, target / folder, symlinks=True, ignore=ignore)


def build_wheel(root: Path, scratch: Path) -> Path:
    source, out = scratch / "src", scratch / "wheel"
    source.mkdir()
    copy_build_inputs(root, source)
    # The build's own warnings (setuptools' deprecations) only matter when it fails.
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(source)],
                           capture_output=True, text=True)
    if built.returncode != 0:
        raise SystemExit(f"wheel-check: building the wheel failed:\n{built.stdout}{built.stderr}")
    (wheel,) = out.glob("inglenook-*.whl")
    return wheel


def fresh_venv(scratch: Path, wheel: Path) -> Path:
    """A venv with the wheel installed and the dev venv's dependencies on its path; its python."""
    home = scratch / "venv"
    venv.EnvBuilder(with_pip=False).create(home)
    python = home / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                    "--quiet", str(wheel)], check=True)
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    dev = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site / "inglenook-dev-dependencies.pth").write_text("".join(f"{path}\n" for path in dev))
    return python


def check_installed(python: Path, scratch: Path, version: str) -> list[str]:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    env.pop("PYTHONPATH", None)
    site = str(scratch / "venv")
    problems = []
    done = subprocess.run([str(python), "-I", "-c", IMPORT_ALL, site], capture_output=True, text=True, env=env,
                          cwd=scratch, timeout=600)
    if done.returncode != 0:
        return [f"importing the installed package failed:\n{done.stderr.strip()}"]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    problems += [f"import {name} failed:\n{text}" for name, text in report["failed"].items()]
    print(f"wheel-check: imported {report['imported']} modules from the installed wheel")
    script = python.parent / ("inglenook.exe" if os.name == "nt" else "inglenook")
    for command in ([str(script), "--version"], [str(python), "-I", "-m", "inglenook", "--version"]):
        ran = subprocess.run(command, capture_output=True, text=True, env=env, cwd=scratch, timeout=300)
        if ran.returncode != 0 or version not in ran.stdout:
            problems.append(f"{' '.join(command)} -> {ran.returncode}: {ran.stdout.strip()} {ran.stderr.strip()}")
    return problems


def check(root: Path, scratch: Path) -> list[str]:
    wheel = build_wheel(root, scratch)
    with zipfile.ZipFile(wheel) as archive:
        held = {name for name in archive.namelist() if not name.startswith("inglenook-")}
    missing = sorted(expected_files(root) - held)
    if missing:
        return [f"not in {wheel.name}: {name}" for name in missing]
    print(f"wheel-check: {wheel.name} holds all {len(held)} files of the package folders")
    namespace: dict[str, str] = {}
    exec((root / TOP / "__init__.py").read_text(), namespace)  # noqa: S102 — our own file
    return check_installed(fresh_venv(scratch, wheel), scratch, namespace["__version__"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to build (default: this one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="inglenook-wheel-check-") as scratch:
        problems = check(args.root.resolve(), Path(scratch))
    for problem in problems:
        print(f"wheel-check: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
