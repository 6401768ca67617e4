/* --dump-cache: the KV cache as a table, one row per cell — index,
 * position, token and its text, and for RoPE the angle of the stored key's
 * first rotation pair (layer 0, KV head 0), in radians.  That pair turns
 * fastest, by inv_freq[0] radians per position (1 without scaling; the
 * header says), so after a context shift that moves a cell down by d the
 * angle of a re-rotated key is d x that less (mod 2 pi), and a key that
 * was not re-rotated keeps its angle: the table shows what was kept,
 * discarded and moved. */
#ifndef POSENC_CACHE_DUMP_H
#define POSENC_CACHE_DUMP_H
#include <stdio.h>

#include "model/context.h"
#include "tokenizer/tokenizer.h"

/* Writes the table, headed "[cache] WHEN: N of M cells" (for RoPE "; key-angle
 * turns R rad per position"); every line starts with "[cache]". */
void cache_dump(FILE *out, const Context *ctx, const Tokenizer *tok, const char *when);
#endif
