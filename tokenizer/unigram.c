/* SentencePiece unigram: the best-scoring segmentation (Viterbi), computed
 * as the library's optimized encoder does, with its float arithmetic, its
 * tie rule (the first candidate found keeps a position) and its bonus for
 * user-defined pieces.  A character no piece covers is an unknown node
 * scored min_score - 10.  Hugging Face's Unigram (TOKENIZER_HF_UNIGRAM) is
 * the same search in double precision over every piece, without the bonus. */
#include "tokenizer/tokenizer_impl.h"

typedef struct {
    int id;      /* last piece of the best path ending here */
    double score; /* that path's score (a float's value for SentencePiece) */
    int start;   /* where the last piece starts; -1 while unreached */
} BestPath;

static void offer(BestPath *target, double score, int start, int id) {
    if (target->start == -1 || score > target->score) {
        target->score = score;
        target->start = start;
        target->id = id;
    }
}

void spm_unigram_encode(const Tokenizer *t, const char *norm, size_t len, TokScratch *s) {
    size_t need = (len + 1) * sizeof(BestPath);
    if (need > s->lattice_cap) buf_reserve(&s->lattice, &s->lattice_cap, 0, need, 1);
    BestPath *best = s->lattice;
    for (size_t i = 0; i <= len; i++) best[i] = (BestPath){-1, 0.0, -1};
    const int hf = t->kind == TOKENIZER_HF_UNIGRAM;
    const float unk_score = t->min_score - 10.0f;
    for (size_t pos = 0; pos < len;) {
        const double base = best[pos].score;
        size_t mblen = (size_t)spm_char_len((unsigned char)norm[pos]);
        if (mblen > len - pos) mblen = len - pos;
        int single = 0, node = -1;
        for (size_t k = pos; k < len; k++) {
            node = piece_trie_step(&t->unigram_trie, node, (unsigned char)norm[k]);
            if (node < 0) break;
            int id = t->unigram_trie.nodes[node].value;
            if (id < 0) continue;
            size_t length = k + 1 - pos;
            if (hf) {
                offer(&best[k + 1], (double)t->scores[id] + base, (int)pos, id);
            } else if (t->types[id] == TOKEN_USER_DEFINED) { /* computed in double, as there */
                double bonus = (double)((float)length * t->max_score) - 0.1;
                offer(&best[k + 1], (float)(bonus + base), (int)pos, id);
            } else {
                float score = t->scores[id] + (float)base;
                offer(&best[k + 1], score, (int)pos, id);
            }
            if (length == mblen) single = 1;
        }
        if (!single)
            offer(&best[pos + mblen], hf ? (double)t->min_score - 10.0 + base
                                         : (float)(unk_score + (float)base),
                  (int)pos, t->unk_id);
        pos += mblen;
    }
    /* backtrack, then reverse the triples into text order */
    size_t first = s->spans.n;
    for (size_t end = len; end > 0; end = (size_t)best[end].start) {
        intbuf_push(&s->spans, best[end].start);
        intbuf_push(&s->spans, (int)end - best[end].start);
        intbuf_push(&s->spans, best[end].id);
    }
    for (size_t a = first, b = s->spans.n - 3; a < b; a += 3, b -= 3)
        for (int k = 0; k < 3; k++) {
            int tmp = s->spans.v[a + k];
            s->spans.v[a + k] = s->spans.v[b + k];
            s->spans.v[b + k] = tmp;
        }
}
