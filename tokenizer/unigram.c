/* SentencePiece unigram (TOKENIZER_SPM_UNIGRAM): the best-scoring
 * segmentation (Viterbi), computed as the library's optimized encoder does,
 * with its float arithmetic, its tie rule (the first candidate found keeps a
 * position) and its bonus for user-defined pieces.  A character no piece
 * covers is an unknown node scored min_score - 10.  Hugging Face's Unigram
 * (TOKENIZER_HF_UNIGRAM, hf_unigram.c) is the same search in double
 * precision over every piece, without the bonus. */
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

int unigram_init(Tokenizer *t, const int keep[7], PosencError *err) {
    piece_trie_build(&t->unigram_trie, t, keep);
    if (t->unigram_trie.n_nodes == 0)
        return posenc_error(err, "the unigram model has no normal pieces");
    return 0;
}

void unigram_free(Tokenizer *t) { piece_trie_free(&t->unigram_trie); }

void unigram_segment(const Tokenizer *t, const char *norm, size_t len, UnigramScoring scoring,
                     TokScratch *s) {
    size_t need = (len + 1) * sizeof(BestPath);
    if (need > s->lattice_cap) buf_reserve(&s->lattice, &s->lattice_cap, 0, need, 1);
    BestPath *best = s->lattice;
    for (size_t i = 0; i <= len; i++) best[i] = (BestPath){-1, 0.0, -1};
    const int hf = scoring == UNIGRAM_HUGGING_FACE;
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

static int init(Tokenizer *t, const TokenizerSpec *spec, PosencError *err) {
    static const int lattice[7] = {[TOKEN_NORMAL] = 1, [TOKEN_USER_DEFINED] = 1};
    return spm_init(t, spec, 1, err) || unigram_init(t, lattice, err) ? -1 : 0;
}

static void free_unigram(Tokenizer *t) {
    spm_free(t);
    unigram_free(t);
}

static void segment(const Tokenizer *t, const char *norm, size_t len, TokScratch *s) {
    unigram_segment(t, norm, len, UNIGRAM_SENTENCEPIECE, s);
}

static int encode(const Tokenizer *t, const char *text, size_t len, IntBuf *out, TokScratch *s,
                  PosencError *err) {
    return spm_encode(t, text, len, segment, out, s, err);
}

const TokenizerOps tokenizer_spm_unigram_ops = {
    .init = init,
    .free = free_unigram,
    .encode = encode,
    .append_surface = spm_append_surface,
    .drops_space = spm_drops_space,
    .decode_text = spm_decode_text,
};
