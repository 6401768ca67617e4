/* The mode drivers, one file each (cli/mode_NAME.c), named in the mode
 * table of cli/options.c: each runs one mode for a parsed command line and
 * returns the exit status. */
#ifndef POSENC_CLI_MODES_H
#define POSENC_CLI_MODES_H

#include "cli/options.h"

int run_generate(const Options *o);
int run_chat(const Options *o);
int run_ppl(const Options *o);
int run_ppl_study(const Options *o);
int run_bench(const Options *o);
int run_tokenize(const Options *o);
int run_inspect(const Options *o);
int run_pe(const Options *o);
int run_attention(const Options *o);
int run_passkey(const Options *o);
int run_serve(const Options *o);

#endif
