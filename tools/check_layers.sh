#!/bin/sh
# Includes point down the layers, never up or sideways:
#
#   cli         the command line: option and mode tables, one driver per mode
#   modes       generate, ppl driver, bench, inspect, plots: may include all below
#   model       the engine (loaders, forward, cache, shift, kernels, sampler)
#   positional  tokenizer  chat    side by side: each only itself and base
#   base        errors, allocation, mapped files, tensor types, GGUF, JSON
#
# Usage: check_layers.sh [ROOT]   (default: the current directory)
# Prints one line per include that crosses a layer and exits 1 if any does.
set -u
root=${1:-.}

allowed() {
    case $1 in
    base) echo "base" ;;
    positional) echo "base positional" ;;
    tokenizer) echo "base tokenizer" ;;
    chat) echo "base chat" ;;
    model) echo "base positional model" ;;
    modes) echo "base positional tokenizer chat model modes" ;;
    cli) echo "base positional tokenizer chat model modes cli" ;;
    esac
}

bad=0
for layer in base positional tokenizer chat model modes cli; do
    ok=$(allowed "$layer")
    for f in "$root/$layer"/*.c "$root/$layer"/*.h; do
        [ -e "$f" ] || continue
        # '#include "dir/file.h"' -> line number and dir ("" for a bare name)
        hits=$(sed -n 's|^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*|\1|p' "$f")
        for inc in $hits; do
            case $inc in
            */*) dir=${inc%%/*} ;;
            *) echo "$layer/${f##*/}: includes \"$inc\" without its layer's directory"; bad=1; continue ;;
            esac
            case " $ok " in
            *" $dir "*) ;;
            *) echo "$layer/${f##*/}: includes $inc, but $layer may include only: $ok"; bad=1 ;;
            esac
        done
    done
done
exit $bad
