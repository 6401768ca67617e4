#!/bin/sh
# Runs one fuzz target (build/fuzz/fuzz_NAME) on its corpus for SECONDS and
# prints one summary line: executions, coverage, corpus, peak memory.  Any
# finding (crash, leak, sanitizer report, timeout, an input over 2 GB) fails
# with the end of the log; libFuzzer leaves the input in build/fuzz/artifacts/.
#   sh tools/fuzz_run.sh fuzz_gguf_model 60 [extra libFuzzer flags...]
# Runs under nice -n $FUZZ_NICE (19 by default): the machine is shared.
set -u
t=$1
secs=$2
shift 2
dir=build/fuzz
corpus=$dir/corpus/${t#fuzz_}
log=$dir/logs/$t.log
mkdir -p "$dir/artifacts" "$dir/logs" "$corpus"
case $t in
    fuzz_gguf_*) dict=fuzz/gguf.dict ;;
    fuzz_sampler) dict= ;;
    fuzz_jinja) dict=fuzz/jinja.dict ;;
    fuzz_api) dict=fuzz/api.dict ;;
    *) dict=fuzz/tokenizer.dict ;;
esac
echo "== $t: $secs s on $corpus (log $log)"
if nice -n "${FUZZ_NICE:-19}" "$dir/$t" -max_total_time="$secs" -timeout=10 \
        -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1 \
        ${dict:+-dict=$dict} -artifact_prefix="$dir/artifacts/$t-" "$@" "$corpus" \
        >"$log" 2>&1; then
    last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 | tr -s ' \t' ' ')
    stat() { sed -n "s/^stat::$1: *//p" "$log"; }
    echo "$t: $(stat number_of_executed_units) executions in $(stat average_exec_per_sec) exec/s," \
         "peak RSS $(stat peak_rss_mb) MB, no findings; last: $last"
else
    echo "$t: FINDING (exit status $?); end of $log:" >&2
    tail -n 60 "$log" >&2
    exit 1
fi
