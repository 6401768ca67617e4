#!/bin/sh
# make demo: generate a story with the smallest model at hand.  Uses the
# shared stories260K when present, otherwise downloads llama2.c's public
# stories15M and tokenizer into models/ (about 60 MB, once).
set -eu
models="${1:-../shared/models}"
if [ -f "$models/stories260K/stories260K.bin" ]; then
    set -x
    exec ./run "$models/stories260K/stories260K.bin" -z "$models/stories260K/tok512.bin" \
        -t 0 -n 256 -i "Once upon a time"
fi
mkdir -p models
fetch() { # url dest
    [ -s "$2" ] && return 0
    echo "downloading $1"
    if command -v curl >/dev/null 2>&1; then curl -fL -o "$2.part" "$1"
    else wget -O "$2.part" "$1"; fi
    mv "$2.part" "$2"
}
fetch https://huggingface.co/karpathy/tinyllamas/resolve/main/stories15M.bin models/stories15M.bin
fetch https://raw.githubusercontent.com/karpathy/llama2.c/master/tokenizer.bin models/tokenizer.bin
set -x
exec ./run models/stories15M.bin -z models/tokenizer.bin -t 0.8 -n 256 -i "Once upon a time"
