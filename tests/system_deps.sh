#!/usr/bin/env bash
# What `make test` needs besides Python packages, found or installed before the suite runs:
#   - Debian's chromium, which Playwright drives (tests/test_lab_browser.py, tests/test_formgrader.py);
#     Playwright never downloads a browser here;
#   - a PostgreSQL server, of whatever version the system's package gives (tests/test_gradebook.py;
#     tests/postgres.py finds it the same way: /usr/lib/postgresql/<version>/bin, highest version, or
#     initdb and pg_ctl on PATH);
#   - libatomic (Debian's libatomic1), which the Node.js that Playwright ships as its driver links
#     against: a minimal Debian lacks it, and every browser test then fails before the browser starts.
# Missing ones are installed with apt-get (as root, or through sudo when it needs no password). When
# that cannot be done, one line says what is missing and why, and the suite runs anyway: the tests
# that need it fail with the same instruction.
# DRY_RUN=1 only says what it would install. CHROMIUM, PG_LIB and LIB_DIRS move where it looks (for tests).
set -uo pipefail

CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
PG_LIB="${PG_LIB:-/usr/lib/postgresql}"
# Where the dynamic linker finds Debian's libraries (multiarch folders first).
LIB_DIRS="${LIB_DIRS:-/lib/*-linux-gnu /usr/lib/*-linux-gnu /lib64 /usr/lib64 /lib /usr/lib}"
DRY_RUN="${DRY_RUN:-}"

postgres_bin() {
    local found
    found="$(ls -d "$PG_LIB"/*/bin 2>/dev/null | sort -V | while read -r bin; do
        [ -x "$bin/initdb" ] && [ -x "$bin/pg_ctl" ] && echo "$bin"; done | tail -n 1)"
    if [ -n "$found" ]; then
        echo "$found"
    elif command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
        dirname "$(command -v initdb)"
    fi
}

library() {
    local dir
    for dir in $LIB_DIRS; do
        [ -e "$dir/$1" ] && { echo "$dir/$1"; return; }
    done
}

missing=()
[ -x "$CHROMIUM" ] || missing+=(chromium)
[ -n "$(postgres_bin)" ] || missing+=(postgresql)
[ -n "$(library libatomic.so.1)" ] || missing+=(libatomic1)

if [ ${#missing[@]} -eq 0 ]; then
    echo "system packages: chromium at $CHROMIUM, PostgreSQL server programs in $(postgres_bin), $(library libatomic.so.1) for Playwright's driver"
    exit 0
fi

sudo=""
why=""
if ! command -v apt-get >/dev/null; then
    why="this system has no apt-get; install them with its package manager"
elif [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        sudo="sudo"
    else
        why="installing needs root (sudo asks for a password): run sudo apt-get install -y ${missing[*]}"
    fi
fi
if [ -n "$why" ]; then
    echo "system packages: cannot install ${missing[*]}: $why; the tests that need them will fail."
    exit 0
fi

as_root() { if [ -n "$sudo" ]; then sudo "$@"; else "$@"; fi; }
if [ -n "$DRY_RUN" ]; then
    echo "system packages: would install ${missing[*]}: ${sudo:+sudo }apt-get update && ${sudo:+sudo }apt-get install -y ${missing[*]}"
    exit 0
fi
echo "system packages: installing ${missing[*]} with apt-get"
if ! { as_root apt-get update -qq &&
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; }; then
    echo "system packages: apt-get could not install ${missing[*]} (its error is above: no network, or no such package); the tests that need them will fail."
fi
exit 0
