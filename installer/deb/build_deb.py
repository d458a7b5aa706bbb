"""Turn the PyInstaller bundle (dist/inglenook/) into a .deb with dpkg-deb.

    python installer/deb/build_deb.py [--bundle dist/inglenook] [--out dist] [--version 0.1.0]

Layout: the bundle under /opt/inglenook, the launcher /usr/bin/inglenook, the desktop entry,
the hicolor icons (rendered by packaging/make_icons.py into build/icons), the AppStream
metainfo and the .gguf MIME type. Debian's triggers (desktop-file-utils, shared-mime-info,
hicolor-icon-theme) refresh their caches on install and removal, so the package needs no
maintainer scripts and removes cleanly; user data (~/.local/share/Inglenook, …) is never
touched by dpkg.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

log = logging.getLogger("build_deb")

ROOT = Path(__file__).resolve().parents[2]
PACKAGING = ROOT / "packaging"
HERE = Path(__file__).resolve().parent
METAINFO = "app.inglenook.Inglenook.metainfo.xml"

# What the bundle leaves to the system is found, not listed: `ldd` on every ELF file in the
# bundle (with LD_LIBRARY_PATH at _internal, as the PyInstaller bootloader sets it) names the
# libraries that resolve outside it (glibc, the GL/EGL dispatchers, libdrm, libxcb and
# libwayland: PyInstaller copies everything else), and `dpkg -S` the package of each.
# Every Qt plugin is in that walk, so a plugin that will load (xcb, wayland, the portal theme)
# cannot need an undeclared library; a library this machine lacks stops the build.
#
# On top of those, the packages app/qt_platform.py names when a library is missing at start:
# that check looks the libraries up before Qt starts, so the .deb declares them too.
LAUNCH_CHECK_DEPENDS = [
    "libgl1", "libegl1", "libfontconfig1", "libdbus-1-3",
    "libx11-6", "libx11-xcb1", "libxcb1", "libxkbcommon0", "libxkbcommon-x11-0",
    "libxcb-cursor0", "libxcb-icccm4", "libxcb-image0", "libxcb-keysyms1", "libxcb-randr0",
    "libxcb-render0", "libxcb-render-util0", "libxcb-shape0", "libxcb-shm0", "libxcb-sync1",
    "libxcb-util1", "libxcb-xfixes0", "libxcb-xkb1",
]
ELF_MAGIC = b"\x7fELF"


def elf_files(bundle: Path) -> list[Path]:
    found = []
    for path in sorted(bundle.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as handle:
                if handle.read(4) == ELF_MAGIC:
                    found.append(path)
    return found


def system_libraries(bundle: Path) -> dict[str, str | None]:
    """Each library a file in ``bundle`` links that resolves outside it: soname -> path
    (None: this machine does not have it)."""
    env = {**os.environ, "LD_LIBRARY_PATH": str(bundle / "_internal")}
    outside: dict[str, str | None] = {}
    for path in elf_files(bundle):
        done = subprocess.run(["ldd", str(path)], capture_output=True, text=True, env=env)
        for line in done.stdout.splitlines():
            name, arrow, target = line.strip().partition(" => ")
            if not arrow:
                continue  # the vDSO and the dynamic loader itself
            resolved = target.split(" (")[0].strip()
            if resolved == "not found":
                outside[name] = None
            elif not Path(resolved).resolve().is_relative_to(bundle.resolve()):
                outside[name] = resolved
    return outside


def package_of(library: str) -> str:
    """The Debian package that ships ``library`` (a path; /lib and /usr/lib are one on merged /usr)."""
    candidates = [library, os.path.realpath(library)]
    candidates += [c.replace("/usr/lib/", "/lib/", 1) if c.startswith("/usr/lib/") else c.replace("/lib/", "/usr/lib/", 1)
                   for c in list(candidates)]
    for candidate in candidates:
        done = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
        if done.returncode == 0:
            return done.stdout.split(":")[0].strip()
    raise SystemExit(f"no installed package ships {library}; the .deb cannot declare it")


# Where a system library may live; anything else outside the bundle (a build tree, a virtual
# environment) is on this machine only.
SYSTEM_LIBRARY_DIRS = ("/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/")


def broken_links(bundle: Path) -> list[str]:
    """Symbolic links in ``bundle`` whose target is not there (PyInstaller links a library's
    soname to where it collected it; a file dropped after that leaves the link dangling)."""
    return sorted(str(path.relative_to(bundle)) for path in bundle.rglob("*")
                  if path.is_symlink() and not path.exists())


def derived_depends(bundle: Path) -> list[str]:
    """The packages to declare. Stops the build when the bundle is not whole: a dangling link,
    a library that resolves nowhere (inside the bundle or on this machine), or one that
    resolves outside the bundle but not to a system library."""
    dangling = broken_links(bundle)
    if dangling:
        raise SystemExit(f"the bundle has links to files it does not hold: {', '.join(dangling)}")
    libraries = system_libraries(bundle)
    missing = sorted(name for name, path in libraries.items() if path is None)
    if missing:
        raise SystemExit(f"the bundle links {', '.join(missing)}, which this machine lacks: install the "
                         "packages that ship them (apt-get install …) so the .deb can declare them")
    stray = sorted(f"{name} ({path})" for name, path in libraries.items()
                   if path is not None and not path.startswith(SYSTEM_LIBRARY_DIRS))
    if stray:
        raise SystemExit(f"the bundle links {', '.join(stray)} from outside itself and outside the system's "
                         "library folders (a build tree or a virtual environment a user does not have): "
                         "the bundle must carry them")
    packages = {package_of(path) for path in libraries.values() if path is not None}
    return sorted(packages | set(LAUNCH_CHECK_DEPENDS))


def with_versions(packages: list[str]) -> list[str]:
    """glibc as new as the build machine's (the bundle's libraries were linked against it)."""
    glibc = (os.confstr("CS_GNU_LIBC_VERSION") or "glibc 2.36").split()[-1]
    return [f"libc6 (>= {glibc})" if name == "libc6" else name for name in packages]


def project_version() -> str:
    namespace: dict[str, str] = {}
    exec((ROOT / "inglenook" / "__init__.py").read_text(), namespace)  # noqa: S102 — our own file
    return namespace["__version__"]


def control_text(version: str, installed_kib: int, depends: list[str] | None = None) -> str:
    """``depends``: from derived_depends(bundle); without a bundle, the launch check's packages."""
    declared = with_versions(sorted(set(depends or []) | set(LAUNCH_CHECK_DEPENDS) | {"libc6"}))
    return "\n".join([
        "Package: inglenook",
        f"Version: {version}",
        "Section: utils",
        "Priority: optional",
        "Architecture: amd64",
        "Maintainer: The Inglenook developers <inglenook@localhost>",
        f"Installed-Size: {installed_kib}",
        f"Depends: {', '.join(declared)}",
        "Homepage: https://github.com/inglenook/inglenook",
        "Description: chat with language models on your own computer",
        " Inglenook runs GGUF language models through llama.cpp on this machine: a",
        " desktop chat app and a local OpenAI-compatible API from the same engine. A",
        " small starter model is included, so the first chat works offline.",
        "",
    ])


def launcher_text() -> str:
    return (HERE / "inglenook.sh").read_text()


def stage(bundle: Path, icons: Path, root: Path) -> None:
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(bundle, root / "opt" / "inglenook", symlinks=True)
    bin_dir = root / "usr" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "inglenook").write_text(launcher_text())
    (bin_dir / "inglenook").chmod(0o755)
    share = root / "usr" / "share"
    for source, target in (
        (PACKAGING / "inglenook.desktop", share / "applications" / "inglenook.desktop"),
        (PACKAGING / METAINFO, share / "metainfo" / METAINFO),
        (PACKAGING / "inglenook-gguf.xml", share / "mime" / "packages" / "inglenook-gguf.xml"),
        (HERE / "copyright", share / "doc" / "inglenook" / "copyright"),
    ):
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    shutil.copytree(icons / "hicolor", share / "icons" / "hicolor")
    for path in root.rglob("*"):  # dpkg installs modes as packed: no group/other write
        if not path.is_symlink():
            path.chmod(path.stat().st_mode & ~0o022)


def directory_kib(root: Path) -> int:
    total = sum(p.lstat().st_size for p in root.rglob("*") if p.is_file() or p.is_symlink())
    return (total + 1023) // 1024


# What a bundle never needs: bytecode caches (PyInstaller keeps the modules in its archive) and
# test suites that wheels carry.
NEEDLESS_FOLDERS = ("__pycache__", "tests", "test")


def bundled_twice(bundle: Path) -> list[list[str]]:
    """Groups of ELF files in ``bundle`` with the same content under different names (a
    library and its soname copied, not linked)."""
    by_content: dict[str, list[str]] = {}
    for path in elf_files(bundle):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        by_content.setdefault(digest, []).append(str(path.relative_to(bundle)))
    return [sorted(paths) for paths in by_content.values() if len(paths) > 1]


def needless_files(bundle: Path) -> list[str]:
    """Folders of bytecode caches or test suites in ``bundle``."""
    return sorted(str(path.relative_to(bundle)) for path in bundle.rglob("*")
                  if path.is_dir() and path.name in NEEDLESS_FOLDERS)


def check_lean(bundle: Path) -> None:
    """Stop the build when something is in the bundle twice, or should not be in it at all."""
    twice = bundled_twice(bundle)
    if twice:
        raise SystemExit("the bundle holds the same library under several names (link them instead): "
                         + "; ".join(" = ".join(group) for group in twice))
    needless = needless_files(bundle)
    if needless:
        raise SystemExit(f"the bundle holds caches or test suites: {', '.join(needless)}")


def upgrade_test_marker() -> str:
    """The file whose presence in ``_internal`` makes the bundle add the upgrade test's
    migration (packaging/inglenook_entry.py, the one place that reads it)."""
    return str(runpy.run_path(str(PACKAGING / "inglenook_entry.py"))["UPGRADE_TEST_MARKER"])


def build(bundle: Path, out: Path, version: str, icons: Path, upgrade_test: bool = False) -> Path:
    """The .deb of ``bundle``; ``upgrade_test``: the same bundle with the upgrade test's marker
    in it (one more migration), for `make package-upgrade` — no second PyInstaller run."""
    if not (bundle / "inglenook").is_file():
        raise SystemExit(f"no bundle at {bundle}: run `make package` (PyInstaller) first")
    if not (icons / "hicolor").is_dir():
        raise SystemExit(f"no icons in {icons}: run packaging/make_icons.py first")
    check_lean(bundle)
    root = ROOT / "build" / "deb" / "root"
    stage(bundle, icons, root)
    if upgrade_test:
        (root / "opt" / "inglenook" / "_internal" / upgrade_test_marker()).write_text(
            "The upgrade test's build: one more store migration (m999_upgrade_test_marker).\n")
    debian = root / "DEBIAN"
    debian.mkdir()
    depends = derived_depends(bundle)
    log.info("Depends (ldd of the bundle): %s", ", ".join(depends))
    (debian / "control").write_text(control_text(version, directory_kib(root), depends))
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"inglenook_{version}_amd64.deb"
    # Root-owned files whoever builds it. gzip, not xz: the quantized model and the libraries
    # barely shrink, and xz would take minutes longer; every dpkg reads gzip.
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-z6", "--build", str(root), str(target)],
                   check=True)
    return target


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description="Build the Inglenook .deb from the PyInstaller bundle.")
    parser.add_argument("--bundle", type=Path, default=ROOT / "dist" / "inglenook")
    parser.add_argument("--icons", type=Path, default=ROOT / "build" / "icons")
    parser.add_argument("--out", type=Path, default=ROOT / "dist")
    parser.add_argument("--version", default=os.environ.get("INGLENOOK_DEB_VERSION") or project_version())
    parser.add_argument("--upgrade-test", action="store_true",
                        help="the upgrade test's newer build: the bundle plus one dummy migration")
    args = parser.parse_args()
    target = build(args.bundle, args.out, args.version, args.icons, upgrade_test=args.upgrade_test)
    sizes = {"deb": str(target), "deb_bytes": target.stat().st_size,
             "installed_kib": directory_kib(ROOT / "build" / "deb" / "root")}
    print(json.dumps(sizes))  # the build's one line of output, for the Makefile
    return 0


if __name__ == "__main__":
    sys.exit(main())
