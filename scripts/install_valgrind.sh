#!/usr/bin/env bash
# A valgrind that hwprof's callgrind pass can use (>= 3.23: older ones emulate FMA ~1500x slower).
# - a system valgrind >= 3.23 (Debian 13, Ubuntu 24.10+, Fedora 40+): nothing to do;
# - otherwise (Debian 12 ships 3.19): Debian 13's valgrind 3.24 package, checked against its sha256 and
#   unpacked with dpkg -x into ${XDG_CACHE_HOME:-~/.cache}/hwprof/valgrind (it runs on glibc >= 2.34;
#   hwprof sets VALGRIND_LIB itself). HWPROF_VALGRIND=/path/to/valgrind overrides both.
# The package comes through apt from the Debian mirror this machine's apt is configured with
# (scripts/debian_mirror.sh; a local mirror and apt's proxy settings included): `apt-get download`
# with a temporary sources list for Debian 13 (trixie) on that mirror and temporary package lists,
# so the system's own sources and lists are left as they were. DEBIAN_MIRROR=URI picks the mirror.
set -euo pipefail
DEB_PACKAGE="valgrind=1:3.24.0-3"
DEB_SUITE="trixie"
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
command -v apt-get >/dev/null 2>&1 || { echo "apt-get is needed to fetch Debian's valgrind; or install valgrind >= 3.23 and set HWPROF_VALGRIND" >&2; exit 1; }
if [ -n "${DEBIAN_MIRROR:-}" ]; then
    mirror="$DEBIAN_MIRROR"; keyring=""
else
    IFS=$'\t' read -r mirror keyring < <(bash "$(dirname "$0")/debian_mirror.sh") || true
fi
[ -n "${mirror:-}" ] || { echo "no Debian mirror in apt's sources (a 'deb URI <release> main' entry): set DEBIAN_MIRROR=URI of one" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lists/partial" "$tmp/deb"
if [ "$(id -u)" -eq 0 ] && id _apt >/dev/null 2>&1; then  # apt downloads as its sandbox user _apt
    chmod 755 "$tmp"; chown -R _apt "$tmp/lists" "$tmp/deb"
fi
echo "deb ${keyring:+[signed-by=$keyring] }$mirror $DEB_SUITE main" > "$tmp/sources.list"
apt_tmp=(-o "Dir::Etc::sourcelist=$tmp/sources.list" -o "Dir::Etc::sourceparts=-" -o "Dir::State::Lists=$tmp/lists"
         -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache=" -o "APT::Get::List-Cleanup=0" -o "Acquire::Languages=none")
echo "valgrind: fetching $DEB_PACKAGE from $mirror ($DEB_SUITE) through apt"
apt-get -qq "${apt_tmp[@]}" update >"$tmp/apt.log" 2>&1 || { cat "$tmp/apt.log" >&2; exit 1; }
(cd "$tmp/deb" && apt-get -qq "${apt_tmp[@]}" download "$DEB_PACKAGE" >>"$tmp/apt.log" 2>&1) || { cat "$tmp/apt.log" >&2; exit 1; }
mv "$tmp"/deb/valgrind_*.deb "$tmp/valgrind.deb"
echo "$DEB_SHA256  $tmp/valgrind.deb" | sha256sum -c --quiet -
rm -rf "$TARGET"; mkdir -p "$TARGET"
dpkg -x "$tmp/valgrind.deb" "$TARGET"
usable "$TARGET/usr/bin/valgrind" "$TARGET/usr/libexec/valgrind" || { echo "the unpacked valgrind does not run here (glibc >= 2.34 needed)" >&2; exit 1; }
echo "valgrind: $(VALGRIND_LIB="$TARGET/usr/libexec/valgrind" "$TARGET/usr/bin/valgrind" --version) installed in $TARGET"
