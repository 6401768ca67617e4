#!/bin/sh
# Makes sure `make test` has what it needs on a Debian/Ubuntu machine:
# installs missing packages when run as root, otherwise prints the one
# command that would.
set -eu
need=""
pkg-config --version >/dev/null 2>&1 || need="$need pkg-config"
pkg-config --exists check 2>/dev/null || need="$need check"
[ -x /usr/bin/python3 ] || need="$need python3"
command -v spm_encode >/dev/null 2>&1 || need="$need sentencepiece"
/usr/bin/python3 -c 'import sentencepiece' 2>/dev/null || need="$need python3-sentencepiece"
/usr/bin/python3 -c 'import regex' 2>/dev/null || need="$need python3-regex"
/usr/bin/python3 -c 'import numpy' 2>/dev/null || need="$need python3-numpy"
command -v node >/dev/null 2>&1 || need="$need nodejs"
command -v npm >/dev/null 2>&1 || need="$need npm"
if [ -n "$need" ]; then
    cmd="apt-get install -y$need"
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "make test: installing missing prerequisites:$need"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive $cmd
    else
        echo "make test: missing prerequisites:$need. Install them with: sudo $cmd" >&2
        exit 1
    fi
fi

# The npm references (tests/package.json, versions pinned by its lock):
# installed when missing or when the lock changed.
if ! cmp -s tests/package-lock.json tests/node_modules/.posenc-lock 2>/dev/null; then
    echo "make test: installing the npm references (cd tests && npm ci)"
    if (cd tests && npm ci --no-audit --no-fund --loglevel=error); then
        cp tests/package-lock.json tests/node_modules/.posenc-lock
    elif [ "${CI:-}" = true ]; then
        echo "make test: npm ci failed; the reference tests must run in CI" >&2
        exit 1
    else
        echo "make test: npm ci failed (offline?); the tests that need the npm references will print SKIP" >&2
    fi
fi
