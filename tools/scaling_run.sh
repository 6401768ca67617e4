#!/bin/bash
# The thread-scaling run of docs/performance.md, on a machine of many cores:
# this tree and a baseline tree (the commit before a change) built there,
# the 110M shape written in every type measured, then tools/bench.py with
# both builds and today's llama.cpp in the same rounds, and -m bench's
# "where the time went" per type and, for f32, after 4096 cached tokens.
#
#   tools/scaling_run.sh BASELINE_SRC OUT_DIR LLAMA_BENCH [LLAMA_BENCH ...]
#
# BASELINE_SRC: a source tree (git archive of the baseline commit).
# LLAMA_BENCH: candidate llama-bench builds, their libraries beside them;
# the first that runs a Q8_0 prefill here is used (a build for AMX dies
# with SIGILL where the kernel does not grant the tiles).
# Environment: THREADS (default 4,16), TYPES (f32,q8_0,q4_0,q4_k_m),
# REPS (2), MODELS (build/bench), PYTHON (python3).
set -euo pipefail
base=$1 out=$2
shift 2
THREADS=${THREADS:-4,16} TYPES=${TYPES:-f32,q8_0,q4_0,q4_k_m} REPS=${REPS:-2}
MODELS=${MODELS:-build/bench} PYTHON=${PYTHON:-python3}
mkdir -p "$out" "$MODELS"
{ lscpu; nproc; } >"$out/machine.txt" 2>&1

# both builds beside the models' writing
(make -j"$(nproc)" run >"$out/build.log" 2>&1 && make -C "$base" -j"$(nproc)" run >>"$out/build.log" 2>&1) &
builds=$!
"$PYTHON" tools/random_model.py stories110M "$MODELS" --formats bin,f32
quantizers=()
for t in ${TYPES//,/ }; do
    [ "$t" = f32 ] || [ -f "$MODELS/stories110M-$t.gguf" ] && continue
    "$PYTHON" tools/quantize.py "$MODELS/stories110M-f32.gguf" "$MODELS/stories110M-$t.gguf" "$t" &
    quantizers+=($!)
done
for p in "${quantizers[@]}"; do wait "$p"; done
wait "$builds" || { tail -20 "$out/build.log"; exit 1; }

peer=""
for candidate in "$@"; do
    if LD_LIBRARY_PATH=$(dirname "$candidate") "$candidate" -m "$MODELS/stories110M-q8_0.gguf" -p 64 -n 0 -r 1 \
        -t 4 >/dev/null 2>&1; then
        peer=$candidate
        break
    fi
    echo "scaling_run.sh: $candidate does not run here" | tee -a "$out/machine.txt"
done
[ -n "$peer" ] || { echo "scaling_run.sh: no llama-bench runs here" >&2; exit 1; }
export LD_LIBRARY_PATH=$(dirname "$peer")

"$PYTHON" tools/bench.py --run ./run --baseline-run "$base/run" --models "$MODELS" --threads "$THREADS" \
    --reps "$REPS" --shapes stories110M --types "$TYPES" --family-shapes '' --depths '' \
    --llamacpp-bench "$peer" | tee "$out/bench.md"
for t in ${TYPES//,/ }; do
    ./run "$MODELS/stories110M-$t.gguf" -m bench --threads "$THREADS" -r 3 | tee "$out/profile-$t.txt"
done
./run "$MODELS/stories110M-f32.gguf" -m bench --depth 4096 --kv-type f16 --threads "$THREADS" -r 2 |
    tee "$out/profile-f32-d4096.txt"
