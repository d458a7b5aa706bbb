#!/usr/bin/env python3
"""The Debian packages `make package-test` needs on the machine that builds and tests the .deb.

    python3 scripts/package_deps.py           # print the missing ones (exit 1 if any)
    python3 scripts/package_deps.py --install # apt-get install the missing ones (root; CI)

Two kinds: the libraries the bundle leaves to the system (installer/deb/build_deb.py checks
with ldd that each resolves, so it can declare it: the X11/xcb and GL libraries Qt's platform
plugins link, the Wayland client libraries) and the tools the installed-app tests drive it
with (Xvfb, xdotool, xwininfo, xwd, ImageMagick, unshare/nsenter, ip, trayer). Only what
`dpkg-query` does not already report installed is asked for, so a second run does nothing.
"""

from __future__ import annotations

import argparse
import logging
import os
import runpy
import subprocess
import sys
from pathlib import Path

log = logging.getLogger("package_deps")

ROOT = Path(__file__).resolve().parents[1]

# What the bundle's Qt plugins link besides the launch check's list: the Wayland plugin's
# client libraries and the GL/EGL dispatchers' own dependencies.
BUNDLE_LIBRARIES = ["libwayland-client0", "libwayland-cursor0", "libwayland-egl1", "libdrm2", "libglib2.0-0",
                    "libxcb-xinerama0", "libxcb-glx0", "libfreetype6", "libpulse0"]
# The packages of the tools the build and tests/package use (desktop_session.missing_tools):
# Xvfb, xauth, xdotool, xwininfo (x11-utils), xwd (x11-apps), convert (ImageMagick), unshare
# and nsenter (util-linux), ip (iproute2), readelf and strip (binutils), a sound server of the
# test's own (pulseaudio, pactl and parec: tests/audio_device.py), a system tray host
# (trayer: test_tray.py). Asked for by package, not by a name on PATH: a stand-in `convert` is
# not ImageMagick.
TOOLS = ["xvfb", "xauth", "xdotool", "x11-utils", "x11-apps", "imagemagick", "util-linux", "iproute2", "binutils",
         "pulseaudio", "pulseaudio-utils", "trayer"]


def wanted() -> list[str]:
    """The packages to install: those not installed."""
    build_deb = runpy.run_path(str(ROOT / "installer" / "deb" / "build_deb.py"))
    packages = set(build_deb["LAUNCH_CHECK_DEPENDS"]) | set(BUNDLE_LIBRARIES) | set(TOOLS)
    return sorted(package for package in packages if not installed(package))


def installed(package: str) -> bool:
    done = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True)
    return done.returncode == 0 and done.stdout.strip().endswith(" installed")


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="package_deps: %(message)s")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--install", action="store_true", help="apt-get install what is missing (needs root)")
    args = parser.parse_args()
    missing = wanted()
    if not missing:
        log.info("every package `make package-test` needs is installed")
        return 0
    if not args.install:
        log.info("missing: %s (apt-get install %s)", ", ".join(missing), " ".join(missing))
        return 1
    if os.geteuid() != 0:
        log.error("installing %s needs root", " ".join(missing))
        return 1
    log.info("installing %s", " ".join(missing))
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing], check=True, env=env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
