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
/usr/bin/python3 -c 'import jinja2' 2>/dev/null || need="$need python3-jinja2"
command -v npm >/dev/null 2>&1 || need="$need nodejs npm"
# extracts llama.cpp's vocabulary tests from the npm bundle (tests/tokenizer/test_llamacpp_vocab)
command -v git >/dev/null 2>&1 || need="$need git"
[ -n "$need" ] || exit 0
cmd="apt-get install -y$need"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "make test: installing missing prerequisites:$need"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive $cmd
else
    echo "make test: missing prerequisites:$need. Install them with: sudo $cmd" >&2
    exit 1
fi
