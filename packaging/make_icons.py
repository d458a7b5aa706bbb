"""Render the app icon for every platform from ``resources/inglenook.svg``, at build time.

Writes, into the output folder: ``hicolor/<n>x<n>/apps/inglenook.png`` (the freedesktop icon
theme layout the .deb installs), ``inglenook.ico`` (Windows) and ``inglenook.icns`` (macOS).
Both container formats hold PNG images, which every supported Windows (Vista on) and macOS
(10.7 on) reads, so Qt's SVG renderer is the only drawing tool needed (no Pillow).

    python packaging/make_icons.py build/icons
"""

from __future__ import annotations

import argparse
import logging
import os
import struct
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # runs in builds with no display

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

log = logging.getLogger("make_icons")

ROOT = Path(__file__).resolve().parent.parent
SVG = ROOT / "resources" / "inglenook.svg"
HICOLOR_SIZES = (16, 22, 24, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
# ICNS element types holding PNG data, by pixel size (Apple's "Icon Composer" types).
ICNS_TYPES = ((16, b"icp4"), (32, b"icp5"), (64, b"icp6"), (128, b"ic07"), (256, b"ic08"), (512, b"ic09"),
              (1024, b"ic10"))


def render_png(renderer: QSvgRenderer, size: int) -> bytes:
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG"):
        raise RuntimeError(f"could not encode a {size}px PNG")
    return bytes(data.data())


def ico_bytes(pngs: dict[int, bytes]) -> bytes:
    """An ICO directory of PNG images (a width/height byte of 0 means 256)."""
    sizes = sorted(pngs)
    header = struct.pack("<HHH", 0, 1, len(sizes))
    offset = len(header) + 16 * len(sizes)
    entries, payload = b"", b""
    for size in sizes:
        png = pngs[size]
        side = 0 if size >= 256 else size
        entries += struct.pack("<BBBBHHII", side, side, 0, 0, 1, 32, len(png), offset + len(payload))
        payload += png
    return header + entries + payload


def icns_bytes(pngs: dict[int, bytes]) -> bytes:
    """An ICNS file: a big-endian 'icns' header, then one (type, length, PNG) element per size."""
    body = b"".join(kind + struct.pack(">I", 8 + len(pngs[size])) + pngs[size] for size, kind in ICNS_TYPES)
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def make_icons(out: Path, svg: Path = SVG) -> list[Path]:
    app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])  # noqa: F841 — QImage fonts need one
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise RuntimeError(f"{svg} is not an SVG Qt can render")
    sizes = sorted(set(HICOLOR_SIZES) | set(ICO_SIZES) | {size for size, _ in ICNS_TYPES})
    pngs = {size: render_png(renderer, size) for size in sizes}
    written: list[Path] = []
    for size in HICOLOR_SIZES:
        target = out / "hicolor" / f"{size}x{size}" / "apps" / "inglenook.png"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(pngs[size])
        written.append(target)
    scalable = out / "hicolor" / "scalable" / "apps" / "inglenook.svg"
    scalable.parent.mkdir(parents=True, exist_ok=True)
    scalable.write_bytes(svg.read_bytes())
    for name, data in (("inglenook.ico", ico_bytes({s: pngs[s] for s in ICO_SIZES})),
                       ("inglenook.icns", icns_bytes(pngs))):
        (out / name).write_bytes(data)
        written.append(out / name)
    return [scalable, *written]


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to write the icons into")
    args = parser.parse_args()
    written = make_icons(args.out)
    log.info("wrote %d icon files into %s", len(written), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
