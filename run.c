/* posenc — the command line: parse and check the flags (cli/options.c, the
 * tables of options and modes), then run the mode's driver (cli/mode_*.c).
 * The engine lives in model/, positional/ and tokenizer/; modes/ drives it. */
#include <omp.h>

#include "cli/options.h"

int main(int argc, char **argv) {
    Options o = cli_parse(argc, argv);
    if (o.threads > 0) omp_set_num_threads(o.threads);
    return cli_mode_named(o.mode)->run(&o);
}
