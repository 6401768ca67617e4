/* -m bench. */
#include <stdlib.h>
#include <string.h>

#include "cli/common.h"
#include "cli/modes.h"
#include "modes/bench.h"

_Static_assert(MAX_THREAD_COUNTS <= BENCH_MAX_TESTS, "every --threads count fits BenchOptions.threads");

int run_bench(const Options *o) {
    Setup s;
    setup_open(&s, o, SETUP_VARIANTS);
    BenchOptions b = bench_options_default(&s.model);
    b.pe = s.v.params[0];
    b.pe_label = s.v.labels[0];
    if (strchr(b.pe_label, '@'))
        cli_die("--pe: bench runs the model's own per-layer table; '%s' is for generate, chat, ppl "
                "and the views", b.pe_label);
    PosencError err;
    if (o->pp_list && bench_parse_sizes(b.pp, &b.n_pp, o->pp_list, &err)) cli_die("--pp: %s", err.msg);
    if (o->tg_list && bench_parse_sizes(b.tg, &b.n_tg, o->tg_list, &err)) cli_die("--tg: %s", err.msg);
    if (o->depth_list && bench_parse_depths(b.depth, &b.n_depth, o->depth_list, &err))
        cli_die("--depth: %s", err.msg);
    if (o->reps) b.reps = o->reps;
    for (int i = 0; i < o->n_thread_counts; i++) b.threads[i] = o->thread_counts[i];
    b.n_threads = o->n_thread_counts;
    b.kv_type = kv_type(o);
    b.json = o->json;
    if (bench_run(&s.model, &b, stdout, &err)) cli_die("%s", err.msg);
    setup_close(&s);
    return EXIT_SUCCESS;
}
