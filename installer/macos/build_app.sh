#!/bin/sh
# Inglenook for macOS: Inglenook.app (the PyInstaller bundle, packaging/inglenook.spec's BUNDLE
# step) and a drag-to-Applications .dmg made with hdiutil.
#
#   installer/macos/build_app.sh            # from the checkout's root, on a Mac, after `make setup-dev`
#
# Needs macOS 12 or newer, Xcode's command line tools (codesign, hdiutil ship with macOS), and
# the project's .venv with llama-cpp-python built by scripts/llama_build.py (Metal/CPU) and the
# starter model package. The .app is signed ad hoc ("-"): it runs on the machine that built it;
# to give it to others, sign with a Developer ID and notarize (xcrun notarytool), which needs an
# Apple developer account. Not run yet: this Linux machine has neither hdiutil nor codesign.
# The spec stops unless the bundle holds the native parts packaging/engine_libraries.py names for
# darwin: libllama, libggml, libggml-base, libmtmd (images) and libpdfium (PDFs) as .dylib files,
# and voice's: libctranslate2 (Whisper), ONNX Runtime (its voice-activity model, built into the
# extension module on macOS), PyAV's FFmpeg (libavcodec, libavformat in av/.dylibs).
set -eu

cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
VERSION=$("$PY" -c 'import inglenook; print(inglenook.__version__)')
DMG="dist/Inglenook-$VERSION.dmg"

if [ "$(uname -s)" != "Darwin" ]; then
    echo "build_app.sh makes a macOS .app and .dmg: run it on a Mac (hdiutil and codesign are macOS tools)." >&2
    exit 2
fi

"$PY" -m pip install --quiet 'pyinstaller>=6.10,<7'
"$PY" packaging/make_icons.py build/icons
"$PY" -m PyInstaller --noconfirm --log-level WARN --distpath dist --workpath build/pyinstaller packaging/inglenook.spec
APP=dist/Inglenook.app
test -d "$APP" || { echo "PyInstaller did not make $APP" >&2; exit 1; }

codesign --force --deep --sign - "$APP"
codesign --verify --deep --strict "$APP"

# The disk image: the app and a link to /Applications, to drag it onto.
STAGE=build/dmg
rm -rf "$STAGE"
mkdir -p "$STAGE"
cp -R "$APP" "$STAGE/"
ln -s /Applications "$STAGE/Applications"
rm -f "$DMG"
hdiutil create -volname "Inglenook $VERSION" -srcfolder "$STAGE" -ov -format UDZO "$DMG"
echo "built $APP and $DMG ($(du -sh "$APP" | cut -f1) installed)"
