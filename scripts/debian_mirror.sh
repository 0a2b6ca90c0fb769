#!/usr/bin/env bash
# The Debian archive mirrors this machine's apt is configured with, one per line: URI<TAB>SIGNED_BY
# (SIGNED_BY: the keyring file its entry names, or empty). An entry counts when it is a `deb` entry
# for a Debian release suite (a codename such as bookworm or trixie, or stable/testing/unstable/sid,
# without a -security/-updates/-backports suffix) with the `main` component; local mirrors and
# proxies configured that way are found like any other.
# usage: debian_mirror.sh [SOURCES_LIST [SOURCES_PARTS_DIR]]  (default: apt's Dir::Etc::sourcelist
# and Dir::Etc::sourceparts, both one-line *.list and deb822 *.sources files)
set -euo pipefail
if [ $# -ge 1 ]; then
    list="$1"; parts="${2:-}"
else
    eval "$(apt-config shell list Dir::Etc::sourcelist/f parts Dir::Etc::sourceparts/d)"
fi
SUITE='^(buster|bullseye|bookworm|trixie|forky|duke|sid|oldstable|stable|testing|unstable)$'

one_line() {  # deb [options] URI SUITE COMPONENT...
    awk -v suite="$SUITE" '
        { sub(/#.*/, "") }
        $1 != "deb" { next }
        {
            signed = ""; i = 2
            if ($2 ~ /^\[/) {  # options up to the closing bracket
                for (; i <= NF; i++) {
                    if (match($i, /signed-by=[^] ]+/)) signed = substr($i, RSTART + 10, RLENGTH - 10)
                    if ($i ~ /\]$/) { i++; break }
                }
            }
            uri = $i; s = $(i + 1); main = 0
            for (j = i + 2; j <= NF; j++) if ($j == "main") main = 1
            if (s ~ suite && main) print uri "\t" signed
        }' "$1"
}

deb822() {  # stanzas of Key: value fields, separated by blank lines
    awk -v suite="$SUITE" '
        function flush(   n, u, k, ok, main) {
            if (types ~ /(^| )deb( |$)/ && tolower(enabled) != "no") {
                ok = 0; main = 0
                n = split(suites, s, " "); for (k = 1; k <= n; k++) if (s[k] ~ suite) ok = 1
                n = split(comps, c, " "); for (k = 1; k <= n; k++) if (c[k] == "main") main = 1
                n = split(uris, u, " "); if (ok && main) for (k = 1; k <= n; k++) print u[k] "\t" (signed ~ /^\// ? signed : "")
            }
            types = uris = suites = comps = signed = enabled = ""
        }
        /^[ \t]*#/ { next }
        /^[ \t]*$/ { flush(); next }
        /^[ \t]/ { next }  # a continuation line (an inline key block)
        {
            key = tolower($1); sub(/:$/, "", key); value = $0; sub(/^[^:]*:[ \t]*/, "", value)
            if (key == "types") types = value
            else if (key == "uris") uris = value
            else if (key == "suites") suites = value
            else if (key == "components") comps = value
            else if (key == "signed-by") signed = value
            else if (key == "enabled") enabled = value
        }
        END { flush() }' "$1"
}

shopt -s nullglob
files=()
[ -f "$list" ] && files+=("$list")
if [ -n "$parts" ] && [ -d "$parts" ]; then files+=("$parts"/*.list "$parts"/*.sources); fi
for f in "${files[@]}"; do
    case "$f" in *.sources) deb822 "$f" ;; *) one_line "$f" ;; esac
done | awk '!seen[$0]++'
