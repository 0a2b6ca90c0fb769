#!/usr/bin/env bash
# A valgrind that hwprof's callgrind pass can use (>= 3.23: older ones emulate FMA ~1500x slower).
# - a system valgrind >= 3.23 (Debian 13, Ubuntu 24.10+, Fedora 40+): nothing to do;
# - otherwise (Debian 12 ships 3.19): Debian 13's valgrind 3.24 package, checked against its sha256 and
#   unpacked with dpkg -x into ${XDG_CACHE_HOME:-~/.cache}/hwprof/valgrind (it runs on glibc >= 2.34;
#   hwprof sets VALGRIND_LIB itself). HWPROF_VALGRIND=/path/to/valgrind overrides both.
set -euo pipefail
DEB_URL="http://deb.debian.org/debian/pool/main/v/valgrind/valgrind_3.24.0-3_amd64.deb"
DEB_SHA256="0359e30820ccee7ee5c8d4c951ca276e3978b18f157d71bd77981de05b344907"
TARGET="${XDG_CACHE_HOME:-$HOME/.cache}/hwprof/valgrind"

usable() {  # usable VALGRIND [LIB]
    local out
    out=$(VALGRIND_LIB="${2:-}" "$1" --version 2>/dev/null) || return 1
    [[ "$out" =~ valgrind-([0-9]+)\.([0-9]+) ]] || return 1
    (( BASH_REMATCH[1] > 3 || (BASH_REMATCH[1] == 3 && BASH_REMATCH[2] >= 23) ))
}

if command -v valgrind >/dev/null 2>&1 && usable "$(command -v valgrind)"; then
    echo "valgrind: $(valgrind --version) (system) is usable"; exit 0
fi
if [ -x "$TARGET/usr/bin/valgrind" ] && usable "$TARGET/usr/bin/valgrind" "$TARGET/usr/libexec/valgrind"; then
    echo "valgrind: $TARGET already installed"; exit 0
fi
[ "$(uname -m)" = "x86_64" ] || { echo "no packaged valgrind >= 3.23 for $(uname -m): install one and set HWPROF_VALGRIND" >&2; exit 1; }
command -v dpkg >/dev/null 2>&1 || { echo "dpkg is needed to unpack Debian's valgrind; or install valgrind >= 3.23 and set HWPROF_VALGRIND" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
curl -fsSL -o "$tmp/valgrind.deb" "$DEB_URL"
echo "$DEB_SHA256  $tmp/valgrind.deb" | sha256sum -c --quiet -
rm -rf "$TARGET"; mkdir -p "$TARGET"
dpkg -x "$tmp/valgrind.deb" "$TARGET"
usable "$TARGET/usr/bin/valgrind" "$TARGET/usr/libexec/valgrind" || { echo "the unpacked valgrind does not run here (glibc >= 2.34 needed)" >&2; exit 1; }
echo "valgrind: $(VALGRIND_LIB="$TARGET/usr/libexec/valgrind" "$TARGET/usr/bin/valgrind" --version) installed in $TARGET"
