/* Writes docs/cli.md, the command-line reference, from the tables in
 * cli/options.c (`make docs/cli.md`). */
#include <stdio.h>

#include "cli/options.h"

int main(void) {
    cli_write_reference(stdout);
    return ferror(stdout) ? 1 : 0;
}
