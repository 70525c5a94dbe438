#!/usr/bin/env bash
# Builds the analysts' viewer for Linux from this checkout (packaging/README.md):
#   OUT_DIR/workbench-viewer-VERSION-linux-ARCH.tar.gz   the app folder, run in place
#   OUT_DIR/workbench-viewer_VERSION_DEBARCH.deb         the same under /opt/workbench-viewer, with a
#                                                        launcher on the PATH, a menu entry and an icon
# Usage: packaging/build-linux.sh [OUT_DIR]        (default: out/; PYTHON=python3.12 picks the Python)
# Needs: Python >= 3.10 with venv, dpkg-deb, network access to PyPI (or a pip cache/index) — never torch.
# The app is built in a fresh virtual environment that holds only `pip install '.[gui]'` and
# PyInstaller, from the files git tracks (plus untracked, not ignored ones), so what a developer
# installed elsewhere cannot leak in. Takes 1.5-2.5 minutes on 2 cores.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(realpath -m "${1:-$REPO/out}")
PYTHON=${PYTHON:-python3}
PYINSTALLER=pyinstaller==6.22.3
MAINTAINER=${WORKBENCH_DEB_MAINTAINER:-Workbench maintainers <maintainers@workbench.invalid>}
WORK="$OUT/.build"
start=$SECONDS

die() { echo "build-linux.sh: $*" >&2; exit 1; }
step() { printf '[%4ds] %s\n' $((SECONDS - start)) "$*"; }

[ "$(uname -s)" = Linux ] || die "builds on Linux only (macOS: packaging/macos, Windows: packaging/windows)"
command -v dpkg-deb >/dev/null || die "needs dpkg-deb (Debian/Ubuntu: apt install dpkg)"
"$PYTHON" -c 'import sys, venv; sys.exit(sys.version_info < (3, 10))' 2>/dev/null \
    || die "needs Python >= 3.10 with the venv module (set PYTHON=...)"

rm -rf "$WORK"
mkdir -p "$WORK/src" "$OUT"

step "copying the checkout"
OUT_IN_REPO=${OUT#"$REPO"/}  # an OUT_DIR inside the checkout that git does not ignore stays out
if git -C "$REPO" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$REPO" && git ls-files -z --cached --others --exclude-standard \
        | xargs -0 sh -c 'for f; do [ -e "$f" ] && case "$f" in "$0"/*) ;; *) printf "%s\0" "$f";; esac; done' \
            "$OUT_IN_REPO" \
        | tar --null -T - -cf -) | tar -C "$WORK/src" -xf -
else  # an unpacked source archive
    tar -C "$REPO" --exclude=./.venv --exclude=./out --exclude=./build --exclude=./dist -cf - . \
        | tar -C "$WORK/src" -xf -
fi
[ -f "$WORK/src/resources/sample/demo.db" ] || die "resources/sample/demo.db is missing (see resources/sample/README.md)"

step "virtual environment: .[gui] + $PYINSTALLER ($("$PYTHON" --version))"
"$PYTHON" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
"$VPY" -m pip install -q --disable-pip-version-check --upgrade pip
"$VPY" -m pip install -q --disable-pip-version-check "$WORK/src[gui]" "$PYINSTALLER"
if "$VPY" -c 'import importlib.util as u, sys; sys.exit(not any(u.find_spec(m) for m in ("torch", "transformers")))'; then
    die "torch or transformers got into the build environment; the viewer must not contain them"
fi
VERSION=$("$VPY" -c 'from importlib.metadata import version; print(version("llm-workbench"))')
QT=$("$VPY" -c 'import PySide6; print(PySide6.__version__)')

step "PyInstaller: workbench-viewer $VERSION (PySide6 $QT)"
(cd "$WORK" && "$WORK/venv/bin/pyinstaller" --noconfirm --log-level WARN \
    --distpath "$WORK/dist" --workpath "$WORK/pyi" "$WORK/src/packaging/workbench-viewer.spec")
APP="$WORK/dist/workbench-viewer"
# A Python built from source (pyenv) keeps its debug info: strip it from libpython and the standard
# modules (libpython 23 -> 5.5 MB). Only there: stripping the wheels' auditwheel-patched libraries
# (numpy's OpenBLAS) makes them unloadable.
if command -v strip >/dev/null; then
    find "$APP/_internal" -type f \( -path "$APP/_internal/libpython3*.so*" -o -path '*/lib-dynload/*.so' \) \
        -print0 | xargs -0 -r strip --strip-debug
fi
if find "$APP" -iname 'torch*' -o -iname 'transformers*' | grep -q .; then
    die "the bundle contains torch or transformers"
fi
"$APP/workbench-viewer" --version | grep -qF "$VERSION" || die "the built app does not report version $VERSION"

step "assembling the folder"
TREE="$WORK/tree/workbench-viewer"  # = /opt/workbench-viewer = the top of the .tar.gz
LINUX="$WORK/src/packaging/linux"
ICONS="$WORK/src/resources/icons"
mkdir -p "$TREE/share/applications" "$TREE/share/icons/hicolor/256x256/apps" \
    "$TREE/share/icons/hicolor/scalable/apps"
mv "$APP" "$TREE/app"
install -m 755 "$LINUX/workbench-viewer" "$TREE/workbench-viewer"
install -m 644 "$LINUX/workbench-viewer.desktop" "$TREE/share/applications/"
install -m 644 "$ICONS/workbench.png" "$TREE/share/icons/hicolor/256x256/apps/workbench-viewer.png"
install -m 644 "$ICONS/workbench.svg" "$TREE/share/icons/hicolor/scalable/apps/workbench-viewer.svg"
install -m 644 "$LINUX/README.txt" "$TREE/README.txt"
[ -f "$WORK/src/LICENSE" ] && install -m 644 "$WORK/src/LICENSE" "$TREE/LICENSE"
chmod -R u=rwX,go=rX "$TREE"
APP_SIZE=$(du -sh "$TREE" | cut -f1)

MACHINE=$(uname -m)
TARBALL="$OUT/workbench-viewer-$VERSION-linux-$MACHINE.tar.gz"
step "tar.gz: $(basename "$TARBALL")"
tar -C "$WORK/tree" --owner=0 --group=0 --numeric-owner \
    --transform "s,^workbench-viewer,workbench-viewer-$VERSION," -czf "$TARBALL" workbench-viewer

# Debian's version syntax: PEP 440 pre-releases (1.0rc1, 1.0.dev3) sort before the release with "~".
DEBVERSION=$(printf '%s' "$VERSION" | sed -E 's/\.?(a|b|rc|dev)([0-9]+)/~\1\2/g')
DEBARCH=$(dpkg --print-architecture)
GLIBC=$(ldd --version | awk 'NR == 1 {print $NF}')
# The system libraries the app takes from the system (packaging/workbench-viewer.spec keeps them out
# of the bundle): Qt's xcb and wayland platforms, fontconfig, glib, dbus, OpenGL, a font. Names are
# Debian 12's; "a | b" where Ubuntu 24.04 renamed a library (64-bit time_t).
DEPENDS="libc6 (>= $GLIBC), libstdc++6, libgcc-s1, libglib2.0-0t64 | libglib2.0-0, libdbus-1-3,
 libfontconfig1, libfreetype6, libx11-6, libx11-xcb1, libxcb1, libxcb-cursor0, libxcb-glx0,
 libxcb-icccm4, libxcb-image0, libxcb-keysyms1, libxcb-randr0, libxcb-render0, libxcb-render-util0,
 libxcb-shape0, libxcb-shm0, libxcb-sync1, libxcb-util1, libxcb-xfixes0, libxcb-xkb1, libxkbcommon0,
 libxkbcommon-x11-0, libgl1, libegl1, libwayland-client0, libwayland-cursor0, libwayland-egl1,
 fonts-dejavu-core | fonts-liberation2 | fonts-noto-core | fonts-freefont-ttf"
DEBFILE="$OUT/workbench-viewer_${DEBVERSION}_$DEBARCH.deb"
step ".deb: $(basename "$DEBFILE")"
DEB="$WORK/deb"
mkdir -p "$DEB/DEBIAN" "$DEB/opt" "$DEB/usr/bin" "$DEB/usr/share/applications" \
    "$DEB/usr/share/icons/hicolor/256x256/apps" "$DEB/usr/share/icons/hicolor/scalable/apps" \
    "$DEB/usr/share/doc/workbench-viewer"
cp -al "$TREE" "$DEB/opt/workbench-viewer"  # hard links: no second copy
ln -s /opt/workbench-viewer/workbench-viewer "$DEB/usr/bin/workbench-viewer"
cp -a "$TREE/share/applications/workbench-viewer.desktop" "$DEB/usr/share/applications/"
cp -a "$TREE/share/icons/hicolor/." "$DEB/usr/share/icons/hicolor/"
{
    echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
    echo "Upstream-Name: llm-workbench"
    echo
    echo "Files: *"
    echo "License: Apache-2.0"
    echo " The viewer bundles Python, Qt for Python (PySide6, LGPL-3.0), Qt (LGPL-3.0), pyqtgraph (MIT),"
    echo " numpy (BSD-3-Clause), click (BSD-3-Clause), sqlite-utils (Apache-2.0), httpx (BSD-3-Clause);"
    echo " their licence files are in /opt/workbench-viewer/app/_internal/*.dist-info."
} > "$DEB/usr/share/doc/workbench-viewer/copyright"
cat > "$DEB/DEBIAN/control" <<EOF
Package: workbench-viewer
Version: $DEBVERSION
Architecture: $DEBARCH
Maintainer: $MAINTAINER
Installed-Size: $(du -sk --exclude=DEBIAN "$DEB" | cut -f1)
Depends: $DEPENDS
Section: science
Priority: optional
Description: Workbench viewer: LLM inference results, prefill vs decode
 Opens, compares and exports the results databases of Workbench (llm-workbench), which
 measures LLM inference optimizations and shows where the time goes: prefill versus decode.
 No Python, torch or GPU needed: a self-contained PySide6 app under /opt/workbench-viewer.
EOF
chmod -R u=rwX,go=rX "$DEB"
# zstd -9: 56 MB in ~15 s here; xz -6 made it ~18 % smaller in 5 min. Debian 12 and Ubuntu >= 21.10 read it.
# shellcheck disable=SC2086
dpkg-deb --root-owner-group ${DEB_COMPRESSION:--Zzstd -z9} --build "$DEB" "$DEBFILE" >/dev/null

[ -n "${KEEP_BUILD:-}" ] || rm -rf "$WORK"  # KEEP_BUILD=1 keeps the venv, PyInstaller's files, the trees
step "done in $((SECONDS - start)) s"
printf '%s  %s\n' "$APP_SIZE" "app folder (unpacked)" \
    "$(du -h "$TARBALL" | cut -f1)" "$TARBALL" "$(du -h "$DEBFILE" | cut -f1)" "$DEBFILE"
echo "check: packaging/test-linux.sh $OUT"
