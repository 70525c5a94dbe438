#!/usr/bin/env bash
# Checks the packages build-linux.sh wrote to OUT_DIR the way an analyst gets them (packaging/README.md):
#  1. the .tar.gz, unpacked, with an empty environment (C locale): --version, --smoke; the launcher must
#     spare Qt its "not a UTF-8 locale" warning;
#  2. the .deb's fields and files;
#  3. the .deb installed with apt into a clean Debian 12 root (debootstrap --variant=minbase, built once
#     and cached as a tar under ~/.cache/workbench-ci), then as an unprivileged user: every shared
#     library of the app resolves (the Depends line is complete), --smoke offscreen, --smoke and a
#     screenshot on a real X server (Xvfb, Qt's xcb platform) -> OUT_DIR/viewer-screenshot.png.
#     Needs root, debootstrap and the Debian mirror; without them step 3 unpacks the .deb on this
#     machine (dpkg-deb -x) and runs --smoke from there, and says so.
# Usage: packaging/test-linux.sh OUT_DIR        (DEBIAN_MIRROR overrides http://deb.debian.org/debian)
set -euo pipefail

OUT=$(realpath "${1:?usage: packaging/test-linux.sh OUT_DIR}")
CACHE=${WORKBENCH_CI_CACHE:-$HOME/.cache/workbench-ci}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
BASE="$CACHE/debian12-minbase.tar"
start=$SECONDS

die() { echo "test-linux.sh: FAILED: $*" >&2; exit 1; }
step() { printf '[%4ds] %s\n' $((SECONDS - start)) "$*"; }
shopt -s nullglob
tarballs=("$OUT"/workbench-viewer-*-linux-*.tar.gz)
debs=("$OUT"/workbench-viewer_*.deb)
[ ${#tarballs[@]} -eq 1 ] && [ ${#debs[@]} -eq 1 ] || die "expected one .tar.gz and one .deb in $OUT"
TARBALL=${tarballs[0]} DEBFILE=${debs[0]}
VERSION=$(basename "$TARBALL" | sed -E 's/^workbench-viewer-(.+)-linux-[^-]+\.tar\.gz$/\1/')

TMP=$(mktemp -d /tmp/workbench-viewer-test.XXXXXX)
ROOT=""
cleanup() {
    if [ -n "$ROOT" ]; then
        for m in "$ROOT/var/cache/apt/archives" "$ROOT/dev/shm" "$ROOT/dev/pts" "$ROOT/proc"; do
            mountpoint -q "$m" && umount -l "$m"
        done
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT

# smoke_ok LOG PLATFORM: the one line --smoke prints, from that platform; no locale warning
smoke_ok() {
    grep -q "^smoke ok: Workbench $VERSION .*, $2)" "$1.out" || { cat "$1.out" "$1.err" >&2; die "$1: no 'smoke ok' on $2"; }
    if grep -qi "UTF-8" "$1.err"; then cat "$1.err" >&2; die "$1: Qt complained about the locale"; fi
    sed 's/^/    /' "$1.out"
}

step "1. tar.gz: $(basename "$TARBALL")"
tar -C "$TMP" -xzf "$TARBALL"
APPDIR="$TMP/workbench-viewer-$VERSION"
[ -x "$APPDIR/workbench-viewer" ] || die "the tar.gz has no workbench-viewer-$VERSION/workbench-viewer"
clean_env=(env -i "HOME=$TMP/home" "PATH=/usr/bin:/bin" "TMPDIR=$TMP")
mkdir -p "$TMP/home"
[ "$("${clean_env[@]}" "$APPDIR/workbench-viewer" --version)" = "workbench-viewer, version $VERSION" ] \
    || die "--version does not say $VERSION"
"${clean_env[@]}" "$APPDIR/workbench-viewer" --smoke >"$TMP/tar.out" 2>"$TMP/tar.err" || true
smoke_ok "$TMP/tar" offscreen

step "2. .deb: $(basename "$DEBFILE")"
dpkg-deb --field "$DEBFILE" Package Version Architecture Depends | sed 's/^/    /'
contents=$(dpkg-deb --contents "$DEBFILE")
for path in ./opt/workbench-viewer/workbench-viewer ./opt/workbench-viewer/app/workbench-viewer \
    ./usr/bin/workbench-viewer ./usr/share/applications/workbench-viewer.desktop \
    ./usr/share/icons/hicolor/256x256/apps/workbench-viewer.png \
    ./opt/workbench-viewer/app/_internal/resources/sample/demo.db; do
    grep -q " $path\( ->.*\)\?$" <<<"$contents" || die "the .deb lacks $path"
done
if grep -qiE '/(torch|transformers)(/|$)' <<<"$contents"; then die "the .deb contains torch or transformers"; fi
if grep -qv ' root/root ' <<<"$contents"; then die "files in the .deb not owned by root"; fi
if command -v desktop-file-validate >/dev/null; then
    dpkg-deb --fsys-tarfile "$DEBFILE" | tar -xO ./usr/share/applications/workbench-viewer.desktop >"$TMP/x.desktop"
    desktop-file-validate "$TMP/x.desktop"
fi

clean_root_skipped() {
    echo "    clean-root check skipped: $1"
    echo "    instead: the .deb unpacked (dpkg-deb -x) and run on this machine"
    mkdir -p "$TMP/unpacked"
    dpkg-deb -x "$DEBFILE" "$TMP/unpacked"
    "${clean_env[@]}" "$TMP/unpacked/opt/workbench-viewer/workbench-viewer" --smoke >"$TMP/deb.out" 2>"$TMP/deb.err" \
        || true
    smoke_ok "$TMP/deb" offscreen
    step "passed (without the clean root)"
    exit 0
}

step "3. the .deb installed with apt in a clean Debian 12 root"
[ "$(id -u)" = 0 ] || clean_root_skipped "needs root (chroot, mounts)"
if [ ! -f "$BASE" ]; then
    command -v debootstrap >/dev/null || clean_root_skipped "debootstrap is not installed (apt install debootstrap)"
    step "   building the base root once: debootstrap --variant=minbase bookworm ($MIRROR)"
    mkdir -p "$CACHE"
    if ! debootstrap --variant=minbase bookworm "$TMP/base" "$MIRROR" >"$TMP/debootstrap.log" 2>&1; then
        tail -5 "$TMP/debootstrap.log" >&2
        clean_root_skipped "debootstrap failed (no mirror?)"
    fi
    tar -C "$TMP/base" -cf "$BASE.partial" . && mv "$BASE.partial" "$BASE"
    rm -rf "$TMP/base"
fi
ROOT="$TMP/root"
mkdir -p "$ROOT" "$CACHE/apt-archives/partial"
tar -C "$ROOT" -xf "$BASE"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
mount -t proc proc "$ROOT/proc"
mount -t tmpfs -o mode=1777 tmpfs "$ROOT/dev/shm"
mount --bind "$CACHE/apt-archives" "$ROOT/var/cache/apt/archives"  # downloads kept between runs
in_root() { chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }
as_analyst() {
    chroot --userspec=analyst:analyst "$ROOT" env -i HOME=/home/analyst PATH=/usr/local/bin:/usr/bin:/bin "$@"
}
in_root apt-get update -qq
cp "$DEBFILE" "$ROOT/tmp/"
step "   apt-get install ./$(basename "$DEBFILE")"
in_root apt-get install -y -qq --no-install-recommends "/tmp/$(basename "$DEBFILE")" >"$TMP/apt.log" 2>&1 \
    || { tail -20 "$TMP/apt.log" >&2; die "apt could not install the .deb"; }
in_root useradd -m analyst
in_root sh -c 'command -v workbench-viewer' >/dev/null || die "workbench-viewer is not on the PATH"

step "   every shared library resolves (only the GTK theme plugin may miss GTK)"
# As the app's loader sees them: the bundle's folder first (PyInstaller's bootloader puts it on the
# library path), then the system.
in_root sh -c 'cd /opt/workbench-viewer/app && find . -type f \( -name "*.so" -o -name "*.so.*" -o -name workbench-viewer \) |
    while read -r f; do LD_LIBRARY_PATH=/opt/workbench-viewer/app/_internal ldd "$f" 2>/dev/null |
        sed -n "s|^\s*\(\S*\) => not found|$f: \1|p"; done' >"$TMP/missing.txt"
grep -v '/platformthemes/libqgtk3\.so: ' "$TMP/missing.txt" >"$TMP/missing-bad.txt" || true
if [ -s "$TMP/missing-bad.txt" ]; then cat "$TMP/missing-bad.txt" >&2; die "libraries not found: add them to Depends"; fi
echo "    ok ($(wc -l <"$TMP/missing.txt") misses, all in the optional GTK theme plugin)"

step "   --smoke offscreen, as an unprivileged user"
as_analyst workbench-viewer --smoke >"$TMP/root.out" 2>"$TMP/root.err" || true
smoke_ok "$TMP/root" offscreen

step "   --smoke and a screenshot on Xvfb (xcb platform)"
in_root apt-get install -y -qq --no-install-recommends xvfb xauth >"$TMP/apt-xvfb.log" 2>&1 \
    || { tail -20 "$TMP/apt-xvfb.log" >&2; die "could not install xvfb in the root"; }
as_analyst env QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" workbench-viewer --smoke \
    >"$TMP/xcb.out" 2>"$TMP/xcb.err" || true
smoke_ok "$TMP/xcb" xcb
in_root install -o analyst -g analyst -m 644 /opt/workbench-viewer/app/_internal/resources/sample/demo.db \
    /home/analyst/demo.db
as_analyst env QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" workbench-viewer \
    /home/analyst/demo.db --screenshot /home/analyst/shot.png >"$TMP/shot.log" 2>&1 \
    || { cat "$TMP/shot.log" >&2; die "--screenshot on Xvfb failed"; }
cp "$ROOT/home/analyst/shot.png" "$OUT/viewer-screenshot.png"
echo "    $OUT/viewer-screenshot.png"
step "passed"
