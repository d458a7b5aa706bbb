"""Before Qt starts on Linux: name the system package a missing X11 library comes from.

Qt's xcb platform plugin links a dozen small X libraries that minimal desktops and
containers often lack; without one, Qt prints "could not load the Qt platform plugin" and
aborts with a core dump. Checking the same libraries first lets the app say which Debian /
Ubuntu package to install (the .deb declares them all; a bundle unpacked by hand does not).
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys

log = logging.getLogger(__name__)

# What Qt 6's libqxcb.so and libQt6XcbQpa link beyond libc, from `ldd` on the bundled
# plugin, with the Debian package that ships each (installer/deb/build_deb.py declares them).
XCB_LIBRARIES: dict[str, str] = {
    "libxcb.so.1": "libxcb1",
    "libX11.so.6": "libx11-6",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libGL.so.1": "libgl1",
    "libEGL.so.1": "libegl1",
    "libfontconfig.so.1": "libfontconfig1",
    "libdbus-1.so.3": "libdbus-1-3",
}


def uses_xcb(environ: dict[str, str] | None = None) -> bool:
    """Whether Qt will try its xcb plugin: Linux, and no other platform asked for."""
    env = os.environ if environ is None else environ
    if not sys.platform.startswith("linux"):
        return False
    platform = env.get("QT_QPA_PLATFORM", "")
    if platform:
        return platform.split(":")[0].split(";")[0] == "xcb"
    # Qt 6 prefers wayland only inside a Wayland session; otherwise it is xcb.
    return not env.get("WAYLAND_DISPLAY")


def missing_libraries(libraries: dict[str, str] = XCB_LIBRARIES) -> dict[str, str]:
    """The libraries the dynamic loader cannot find, with the package for each."""
    missing: dict[str, str] = {}
    for soname, package in libraries.items():
        try:
            ctypes.CDLL(soname)
        except OSError as exc:
            log.debug("cannot load %s: %s", soname, exc)
            missing[soname] = package
    return missing


def explain_missing(missing: dict[str, str]) -> str:
    packages = " ".join(sorted(set(missing.values())))
    return (
        "Inglenook cannot open its window: Qt's xcb platform plugin needs system libraries "
        f"that are not installed ({', '.join(sorted(missing))}).\n"
        f"Install them with:\n    sudo apt install {packages}\n"
        "(Fedora: sudo dnf install xcb-util-cursor xcb-util-wm xcb-util-keysyms libxkbcommon-x11)"
    )


def check_platform_libraries() -> str | None:
    """None when Qt can start here; otherwise the message to print before giving up."""
    if not uses_xcb():
        return None
    missing = missing_libraries()
    return explain_missing(missing) if missing else None
