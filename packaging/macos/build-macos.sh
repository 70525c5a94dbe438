#!/usr/bin/env bash
# Builds the Workbench viewer for macOS: "Workbench Viewer.app" (PyInstaller), checked with --smoke,
# in a disk image, OUT_DIR/workbench-viewer-VERSION-macos-ARCH.dmg (drag the app to Applications).
# NOT RUN in this project's CI (no Mac there); .github/workflows/viewer-packages.yml runs it on a
# GitHub-hosted macOS runner. The app is signed ad hoc (PyInstaller), not notarized: Gatekeeper asks
# before the first start (right-click > Open) until a Developer ID signs and notarizes it.
# Usage: packaging/macos/build-macos.sh [OUT_DIR]      (PYTHON=python3.12 picks the Python)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "${1:-$REPO/out}"
OUT=$(cd "${1:-$REPO/out}" && pwd)
PYTHON=${PYTHON:-python3}
WORK="$OUT/.build"
rm -rf "$WORK"

"$PYTHON" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
"$VPY" -m pip install -q --upgrade pip
# Pillow lets PyInstaller turn the PNG icon into the bundle's .icns
"$VPY" -m pip install -q "$REPO[gui]" pyinstaller==6.22.3 pillow
if "$VPY" -c 'import importlib.util as u, sys; sys.exit(not any(u.find_spec(m) for m in ("torch", "transformers")))'; then
    echo "torch or transformers got into the build environment" >&2
    exit 1
fi
VERSION=$("$VPY" -c 'from importlib.metadata import version; print(version("llm-workbench"))')

"$WORK/venv/bin/pyinstaller" --noconfirm --log-level WARN --distpath "$WORK/dist" --workpath "$WORK/pyi" \
    "$REPO/packaging/workbench-viewer.spec"
APP="$WORK/dist/Workbench Viewer.app"
# the smoke test on the runner's desktop (Qt's cocoa platform)
QT_QPA_PLATFORM=cocoa "$APP/Contents/MacOS/workbench-viewer" --smoke

STAGE="$WORK/dmg"
mkdir -p "$STAGE"
cp -R "$APP" "$STAGE/"
ln -s /Applications "$STAGE/Applications"
DMG="$OUT/workbench-viewer-$VERSION-macos-$(uname -m).dmg"
hdiutil create -volname "Workbench Viewer $VERSION" -srcfolder "$STAGE" -ov -format UDZO "$DMG"
ls -l "$DMG"
