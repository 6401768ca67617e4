/* Internals shared by the tokenizer/ files: growable buffers, the per-call
 * scratch, the merge engine, the piece trie, UTF-8 and Unicode classes, the
 * table of what each tokenizer kind does (TokenizerOps), and the readers. */
#ifndef POSENC_TOKENIZER_IMPL_H
#define POSENC_TOKENIZER_IMPL_H
#include <stdlib.h>
#include <string.h>

#include "base/json_parse.h"
#include "tokenizer/tokenizer.h"

#define TOKENIZER_MAX_PIECE_BYTES 4096 /* longer pieces are refused at load */

/* ---- growable buffers ---------------------------------------------------- */
typedef struct {
    int *v;
    size_t n, cap;
} IntBuf;

typedef struct {
    char *v;
    size_t n, cap;
} CharBuf;

/* Makes room for `extra` more elements of `size` bytes in *v (capacity *cap). */
void buf_reserve(void **v, size_t *cap, size_t n, size_t extra, size_t size);

static inline void intbuf_push(IntBuf *b, int x) {
    if (b->n == b->cap) buf_reserve((void **)&b->v, &b->cap, b->n, 1, sizeof(int));
    b->v[b->n++] = x;
}

static inline void charbuf_append(CharBuf *b, const char *s, size_t n) {
    if (n == 0) return;
    if (b->cap - b->n < n) buf_reserve((void **)&b->v, &b->cap, b->n, n, 1);
    memcpy(b->v + b->n, s, n);
    b->n += n;
}

static inline void charbuf_push(CharBuf *b, char c) { charbuf_append(b, &c, 1); }

/* ---- merge engine (bpe.c) ------------------------------------------------- */
/* A symbol of a word being merged: a span of `len` input units (bytes) linked
 * to its live neighbours.  A merge keeps the left symbol and empties the
 * right one, so a queued pair is stale exactly when its lengths changed. */
typedef struct {
    int prev, next;  /* -1 at the ends */
    int id;          /* current token (or -1 while unknown) */
    int start, len;  /* span in the word; len 0 once merged away */
    int frozen;      /* never merges (SentencePiece user-defined symbol) */
} BpeSymbol;

typedef struct {
    double priority; /* larger merges first */
    int left, right; /* symbol indices */
    int len;         /* left.len + right.len when queued */
    int result;      /* merged token id */
} BpePair;

/* Looks up the merge of two adjacent symbols: returns 1 and fills
 * *priority and *result when they merge. */
typedef int (*BpePairFn)(const void *ctx, const BpeSymbol *a, const BpeSymbol *b,
                         double *priority, int *result);

typedef struct {
    BpePair *heap;
    size_t n, cap;
} BpeHeap;

/* Merges syms[0..n) in place: the highest-priority adjacent pair first, the
 * leftmost among equals.  With rank_batches, pairs that a merge creates wait
 * until every pair of the current priority is merged (GPT-2's encoder.py
 * merges all occurrences of the best bigram per pass). */
void bpe_merge(BpeSymbol *syms, int n, BpePairFn pair_fn, const void *ctx, int rank_batches,
               BpeHeap *heap);

/* ---- per-call scratch ---------------------------------------------------- */
typedef struct {
    CharBuf norm;     /* normalized text / mapped word */
    BpeSymbol *syms;  /* BPE symbols */
    size_t syms_cap;
    BpeHeap heap;
    void *lattice;    /* unigram best paths */
    size_t lattice_cap;
    IntBuf spans;     /* (start, len, id) triples from the model */
    IntBuf rev;       /* (piece, left length) of unused merges seen (BPE) */
    CharBuf nfc;      /* a section of text in NFC (byte-level BPE) */
    IntBuf cps;       /* its code points while normalizing */
} TokScratch;

void scratch_free(TokScratch *s);
BpeSymbol *scratch_symbols(TokScratch *s, size_t n);

/* ---- piece trie (piece_trie.c) --------------------------------------------- */
/* Builds a trie of the pieces whose type passes keep[type]. */
void piece_trie_build(PieceTrie *pt, const Tokenizer *t, const int keep[7]);
void piece_trie_free(PieceTrie *pt);
/* Child of `node` (-1 = root) along byte c, or -1. */
int piece_trie_step(const PieceTrie *pt, int node, unsigned char c);
/* Length of the longest piece that prefixes s[0..n), or 0. */
size_t piece_trie_longest(const PieceTrie *pt, const char *s, size_t n);

/* \s (White_Space), then the general categories L, N, M, P, S; other = the rest
 * (controls, format characters such as ZWJ, unassigned code points). */
typedef enum {
    UCLASS_OTHER = 0, UCLASS_LETTER, UCLASS_NUMBER, UCLASS_SPACE, UCLASS_MARK, UCLASS_PUNCT,
    UCLASS_SYMBOL
} UnicodeClass;
typedef struct {
    uint32_t first, last;
    uint8_t cls;
} UnicodeRange;
extern const UnicodeRange unicode_ranges[];
extern const int n_unicode_ranges;
UnicodeClass unicode_class(uint32_t cp);
/* A letter's case, for the patterns that tell [\p{Lu}\p{Lt}] from \p{Ll}
 * (Tekken, GPT-4o); UCASE_NONE for the other letters (Lm, Lo), which are of
 * either case there, and for what is not a letter. */
typedef enum { UCASE_NONE = 0, UCASE_UPPER, UCASE_LOWER } UnicodeCase;
extern const UnicodeRange unicode_case_ranges[]; /* cls: a UnicodeCase */
extern const int n_unicode_case_ranges;
UnicodeCase unicode_case(uint32_t cp);
/* Class and byte length of the character at s[0..n) (n > 0); a byte that
 * does not start valid UTF-8 is one "other" character. */
UnicodeClass utf8_class(const char *s, size_t n, size_t *clen);

/* ---- Unicode NFC (nfc.c, nfc_tables.c) ------------------------------------- */
typedef struct {
    uint32_t cp;
    uint16_t off;  /* first code point in nfc_decomposition_pool */
    uint8_t len;
} NfcDecomposition;
typedef struct {
    uint32_t first, last;
    uint8_t ccc;   /* canonical combining class */
} NfcClassRange;
typedef struct {
    uint32_t first, second, composite;
} NfcComposition;
extern const NfcDecomposition nfc_decompositions[];
extern const int n_nfc_decompositions;
extern const uint32_t nfc_decomposition_pool[];
extern const NfcClassRange nfc_classes[];
extern const int n_nfc_classes;
extern const NfcComposition nfc_compositions[];
extern const int n_nfc_compositions;
/* s[0..n) in NFC: s itself when nothing can change (no code point from
 * U+0300 up), else the text in `out` (cps: scratch).  *out_len: its length. */
const char *nfc_normalize(const char *s, size_t n, size_t *out_len, CharBuf *out, IntBuf *cps);

/* ---- the kinds ------------------------------------------------------------ */
/* What a tokenizer kind does beyond what tokenizer.c does for every kind
 * (copying and indexing the pieces, the surfaces' pool, BOS/EOS, the encode
 * and decode entry points).  Adding a kind is one file defining its
 * TokenizerOps, plus its TokenizerKind and one line in the registry in
 * tokenizer.c.  NULL hooks take the default their comment names. */
typedef struct {
    /* Validates and indexes what the kind reads from the spec beyond the
     * pieces, scores and types (tokenizer.c has them in t); 0, or -1 with the
     * reason.  NULL: nothing.  free releases it, also when init failed half-way. */
    int (*init)(Tokenizer *t, const TokenizerSpec *spec, PosencError *err);
    void (*free)(Tokenizer *t);
    /* Text -> ids appended to out, without BOS/EOS; 0, or -1 with the reason. */
    int (*encode)(const Tokenizer *t, const char *text, size_t len, IntBuf *out, TokScratch *s,
                  PosencError *err);
    /* Appends the text piece `id` stands for mid-text (its surface) to pool;
     * unk_surface is what SentencePiece's unknown piece decodes to. */
    void (*append_surface)(const Tokenizer *t, int id, const char *unk_surface, CharBuf *pool);
    /* Whether tokenizer_decode(prev, token) drops the first byte of the
     * token's surface, a space.  NULL: never. */
    int (*drops_space)(const Tokenizer *t, int prev, int token);
    /* tokenizer_decode_text's rule: appends ids[0..n) (any ints: skip those
     * outside the vocabulary) to out.  NULL: each valid id's
     * tokenizer_decode after the one before it. */
    void (*decode_text)(const Tokenizer *t, const int *ids, int n, CharBuf *out);
    int splits_added;      /* added pieces split the text before the model, so --special
                              applies; a turn's end ends generation */
    int first_repeat_wins; /* a repeated piece keeps its first id (llama2.c's files), where
                              the others refuse it */
} TokenizerOps;

extern const TokenizerOps tokenizer_llama2c_ops, tokenizer_spm_bpe_ops,
    tokenizer_spm_unigram_ops, tokenizer_gpt2_ops, tokenizer_hf_bpe_ops,
    tokenizer_hf_unigram_ops;

/* The registry: the table of t->kind. */
const TokenizerOps *tokenizer_ops(const Tokenizer *t);

/* ---- helpers the kinds share (tokenizer.c) ------------------------------------ */
/* Appends the surface of `token`, without its first byte when drop_space. */
void append_piece_surface(const Tokenizer *t, int token, int drop_space, CharBuf *out);
/* Appends `piece` with each U+2581 as a space. */
void append_metaspace_text(CharBuf *pool, const char *piece);
/* Appends the bytes of the run of byte pieces that starts at ids[i] (it ends
 * before ids[n] or an id that is no byte piece); what is not UTF-8 becomes
 * U+FFFD per byte.  Returns the index past the run. */
int append_byte_run(const Tokenizer *t, const int *ids, int i, int n, CharBuf *out);
/* Whether a token after `prev` starts the text: prev is -1 or BOS. */
static inline int starts_text(const Tokenizer *t, int prev) {
    return prev < 0 || prev == t->bos_id;
}
/* Hugging Face's Strip decoder (HF_BPE, HF_UNIGRAM): the text's first space goes. */
int strip_decoder_drops_space(const Tokenizer *t, int prev, int token);
/* byte_ids: the piece spelled <0xXX> of each byte, whatever its type. */
void lookup_byte_pieces(Tokenizer *t);
/* A byte as an error names it: "'<' (byte 0x3C)" for printable ASCII, so
 * the character is seen; "byte 0xC3" otherwise.  buf: 16 bytes. */
const char *byte_name(unsigned char b, char *buf);

/* ---- added pieces (added.c): GPT2, HF_BPE, HF_UNIGRAM ---------------------- */
/* The tries of user-defined pieces, and of those and control pieces
 * (parse_special). */
void added_pieces_init(Tokenizer *t);
void added_pieces_free(Tokenizer *t);
/* Encodes text[start, end), a section between added pieces. */
typedef int (*SectionEncodeFn)(const Tokenizer *t, const char *text, size_t start, size_t end,
                               IntBuf *out, TokScratch *s, PosencError *err);
/* Splits the text at added pieces, each section encoded by encode_section. */
int added_pieces_encode(const Tokenizer *t, const char *text, size_t len,
                        SectionEncodeFn encode_section, IntBuf *out, TokScratch *s,
                        PosencError *err);

/* ---- merges by rank (merge_ranks.c): GPT2, HF_BPE ---------------------------- */
/* The spec's "left right" merges as a table keyed by the id pair. */
int merge_ranks_init(Tokenizer *t, const TokenizerSpec *spec, PosencError *err);
void merge_ranks_free(Tokenizer *t);
/* The BpePairFn of the table (ctx: the Tokenizer): the better rank first. */
int merge_ranks_pair(const void *ctx, const BpeSymbol *a, const BpeSymbol *b, double *priority,
                     int *result);

/* ---- SentencePiece (sentencepiece.c, normalizer.c): SPM_BPE, SPM_UNIGRAM, and
 * HF_UNIGRAM's vocabulary and normalizer ---------------------------------------- */
/* Validates the vocabulary as the library does when it loads one: the
 * unknown piece, byte pieces, scores, the charsmap.  With user_pieces the
 * normalizer and BPE take user-defined pieces whole (SentencePiece; Hugging
 * Face splits them off before). */
int spm_init(Tokenizer *t, const TokenizerSpec *spec, int user_pieces, PosencError *err);
void spm_free(Tokenizer *t);
/* A segmentation model: normalized text -> (start, len, id) triples in s->spans. */
typedef void (*SpmSegmentFn)(const Tokenizer *t, const char *norm, size_t len, TokScratch *s);
/* Normalizes, segments, then spm_spans_to_ids. */
int spm_encode(const Tokenizer *t, const char *text, size_t len, SpmSegmentFn segment,
               IntBuf *out, TokScratch *s, PosencError *err);
/* The decoding hooks of SPM_BPE and SPM_UNIGRAM. */
void spm_append_surface(const Tokenizer *t, int id, const char *unk_surface, CharBuf *pool);
int spm_drops_space(const Tokenizer *t, int prev, int token);
void spm_decode_text(const Tokenizer *t, const int *ids, int n, CharBuf *out);
/* Darts-clone unit fields of the charsmap's double array. */
static inline uint32_t charsmap_unit_offset(uint32_t u) {
    return (u >> 10) << ((u & (1u << 9)) >> 6);
}
static inline uint32_t charsmap_unit_label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
static inline int charsmap_unit_has_leaf(uint32_t u) { return (u >> 8) & 1; }
static inline uint32_t charsmap_unit_value(uint32_t u) { return u & ((1u << 31) - 1); }
/* The normalizer: text -> s->norm. */
void spm_normalize(const Tokenizer *t, const char *text, size_t len, CharBuf *out);
/* Those triples -> ids: unknown pieces as byte pieces (byte fallback), else
 * one unknown id per run. */
void spm_spans_to_ids(const Tokenizer *t, const char *norm, const IntBuf *spans, IntBuf *out);

/* ---- unigram (unigram.c): SPM_UNIGRAM, HF_UNIGRAM ------------------------------ */
/* The lattice's trie over the pieces whose type passes keep[type]; refuses
 * a vocabulary with none. */
int unigram_init(Tokenizer *t, const int keep[7], PosencError *err);
void unigram_free(Tokenizer *t);
/* The arithmetic of the best-path search. */
typedef enum {
    UNIGRAM_SENTENCEPIECE, /* floats, user-defined pieces with the library's bonus */
    UNIGRAM_HUGGING_FACE,  /* doubles, every piece by its score */
} UnigramScoring;
/* Normalized text -> (start, len, id) triples in s->spans. */
void unigram_segment(const Tokenizer *t, const char *norm, size_t len, UnigramScoring scoring,
                     TokScratch *s);

/* ---- readers --------------------------------------------------------------- */
int llama2c_read(Tokenizer *t, const char *path, PosencError *err);
int spm_read(Tokenizer *t, const char *path, PosencError *err);
int gpt2_read(Tokenizer *t, const char *path, PosencError *err);
/* A Hugging Face tokenizer.json (or a directory holding one), with
 * tokenizer_config.json beside it when present (BOS/EOS). */
int hf_json_read(Tokenizer *t, const char *path, PosencError *err);
/* {"token": id, ...} -> pieces[id] and their byte lengths (malloc'd arrays
 * pointing into the document); ids must be exactly 0..N-1. */
int json_vocab_pieces(const JsonValue *vocab, const char ***pieces, uint32_t **lens, int *n,
                      PosencError *err);

/* ---- byte-level BPE's pre-tokenizer patterns (pretok.c) ----------------------- */
/* Pushes the end offsets of the pre-tokens of s[start, end) to `ends`. */
void pretokenize(PretokKind kind, const char *s, size_t start, size_t end, IntBuf *ends);
/* The pattern whose Split levels are exactly these regexes (as
 * tokenizer.json spells them), or -1. */
int pretok_find_regexes(const char *const *regexes, int n);
/* The pattern of a tokenizer.ggml.pre name (llama.cpp's names), or -1;
 * *ignore_merges says whether llama.cpp skips the merges of whole pieces.
 * For -1, *why says why posenc refuses a name llama.cpp gives, or is NULL
 * for a name llama.cpp does not give. */
int pretok_find_name(const char *name, int *ignore_merges, const char **why);

/* "<0xAB>" (uppercase hex, as SentencePiece spells byte pieces) -> 0xAB, else -1. */
int byte_piece_value(const char *piece);

/* Byte length of the UTF-8 character led by c, as SentencePiece's OneCharLen
 * reads it (lead byte only). */
static inline int spm_char_len(unsigned char c) { return "\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[c >> 4]; }
#endif
