/* Learned absolute positions: row `pos` of the checkpoint's table is added
 * to the token embedding (GPT-2).  Past the table end the caller has either
 * refused (overflow policy "error") or asked for the last row ("clamp"). */
#include "positional/pe.h"

static void learned_embed(const PositionalEncoding *pe, float *x, int pos) {
    if (pos >= pe->table_len) pos = pe->table_len - 1;
    if (pos < 0) pos = 0;
    const float *row = pe->table + (size_t)pos * (size_t)pe->dim;
    for (int i = 0; i < pe->dim; i++) x[i] += row[i];
}

const PeOps pe_learned_ops = {"learned", learned_embed, NULL, NULL};
