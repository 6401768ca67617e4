#!/bin/sh
# Installs the npm references (tests/package.json, versions pinned by
# tests/package-lock.json) with `npm ci` into build/npm/, the first time and
# whenever the lock file changes.  Nothing it installs is committed: build/ is
# git-ignored.  Prints the node_modules directory on success.
#
# Only the npm registry is needed.  --omit=optional leaves out node-llama-cpp's
# optional prebuilt binaries (CUDA, Vulkan, other platforms: ~700 MB); its CPU
# binary for linux-x64, @node-llama-cpp/linux-x64, is a direct dependency in
# tests/package.json and still installed.  NODE_LLAMA_CPP_SKIP_DOWNLOAD=true
# (node-llama-cpp's documented switch) turns its postinstall into a no-op: it
# never tests binaries, downloads llama.cpp from GitHub or builds it;
# tools/llamacpp_reference.mjs loads the prebuilt binary with build: "never".
# usage: tools/ensure_npm.sh [REPO_ROOT]
set -eu
root="${1:-.}"
dest="$root/build/npm"
command -v npm >/dev/null 2>&1 || { echo "ensure_npm: npm is not installed (apt-get install nodejs npm)" >&2; exit 1; }
mkdir -p "$dest"
if ! cmp -s "$root/tests/package-lock.json" "$dest/package-lock.json" || [ ! -d "$dest/node_modules" ]; then
    cp "$root/tests/package.json" "$root/tests/package-lock.json" "$dest/"
    if ! (cd "$dest" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true \
              npm ci --omit=optional --no-audit --no-fund --loglevel=error >&2); then
        pkgs=$(node -e 'console.log(Object.keys(require(process.argv[1]).dependencies).join(" "))' \
               "$(cd "$root" && pwd)/tests/package.json" 2>/dev/null || echo "see tests/package.json")
        echo "ensure_npm: npm ci could not install the references: $pkgs" >&2
        exit 1
    fi
fi
echo "$dest/node_modules"
