/* Encodes a file line by line as `run -m tokenize` does and prints the ids,
 * for tools/bench_tokenizer.sh.  usage: bench_tokenizer TOKENIZER FILE */
#include <stdio.h>

#include "tokenizer/tokenizer.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s TOKENIZER FILE\n", argv[0]);
        return 2;
    }
    Tokenizer t;
    PosencError err;
    FILE *in = fopen(argv[2], "rb");
    if (!in) {
        perror(argv[2]);
        return 1;
    }
    if (tokenizer_load(&t, argv[1], 0, &err) || tokenize_stream(&t, in, stdout, 0, &err)) {
        fprintf(stderr, "error: %s\n", err.msg);
        return 1;
    }
    fclose(in);
    tokenizer_free(&t);
    return 0;
}
