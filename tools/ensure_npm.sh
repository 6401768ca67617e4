#!/bin/sh
# Installs the Hugging Face tokenizer reference (tests/package.json, versions
# pinned by tests/package-lock.json) with `npm ci` into build/npm/, the first
# time and whenever the lock file changes.  Nothing it installs is committed:
# build/ is git-ignored.  Prints the node_modules directory on success.
# usage: tools/ensure_npm.sh [REPO_ROOT]
set -eu
root="${1:-.}"
dest="$root/build/npm"
command -v npm >/dev/null 2>&1 || { echo "ensure_npm: npm is not installed (apt-get install nodejs npm)" >&2; exit 1; }
mkdir -p "$dest"
if ! cmp -s "$root/tests/package-lock.json" "$dest/package-lock.json" || [ ! -d "$dest/node_modules" ]; then
    cp "$root/tests/package.json" "$root/tests/package-lock.json" "$dest/"
    (cd "$dest" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
echo "$dest/node_modules"
