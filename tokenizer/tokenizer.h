/* Text <-> token ids.  One interface over the vocabularies posenc reads:
 *   llama2.c tokenizer.bin   score-ordered merges, as llama2.c encodes
 *   SentencePiece .model     BPE and unigram with the library's normalizer
 *                            (precompiled charsmap), byte fallback, user-defined
 *                            pieces: the ids libsentencepiece 0.1.97 gives
 *   GPT-2 vocab.json+merges  byte-level BPE with GPT-2's pre-tokenizer
 *   HF tokenizer.json        byte-level BPE with the Llama 3 / Qwen2 / DeepSeek-V3 /
 *                            GPT-2 pre-tokenizers, NFC, added tokens; or BPE over
 *                            characters with byte fallback (Gemma); Unigram with
 *                            the charsmap normalizer and Metaspace (T5 style): the
 *                            ids of Hugging Face tokenizers
 * Every reader fills a TokenizerSpec (plain arrays) and calls tokenizer_build,
 * so another container (GGUF's tokenizer.ggml.*) only has to fill the spec. */
#ifndef POSENC_TOKENIZER_H
#define POSENC_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/gguf.h"
#include "base/util.h"

typedef enum {
    TOKENIZER_LLAMA2C,     /* llama2.c tokenizer.bin */
    TOKENIZER_SPM_BPE,     /* SentencePiece BPE */
    TOKENIZER_SPM_UNIGRAM, /* SentencePiece unigram (Viterbi) */
    TOKENIZER_GPT2,        /* byte-level BPE */
    TOKENIZER_HF_BPE,      /* tokenizer.json BPE over characters with byte fallback,
                              spaces as U+2581 (Gemma) */
    TOKENIZER_HF_UNIGRAM,  /* tokenizer.json Unigram (SentencePiece converted by Hugging
                              Face: T5, ALBERT, XLNet, mBART, XLM-R): charsmap normalizer,
                              Metaspace pre-tokenizer, Viterbi per pre-token */
} TokenizerKind;

/* Metaspace's prepend_scheme: when a U+2581 goes in front of a section of text. */
typedef enum { METASPACE_NEVER, METASPACE_ALWAYS, METASPACE_FIRST } MetaspacePrepend;

/* The pre-tokenizer of a byte-level BPE vocabulary (tokenizer/pretok.c),
 * named in GGUF files by tokenizer.ggml.pre as llama.cpp names it. */
typedef enum {
    PRETOK_GPT2,        /* "gpt-2": OpenAI's encoder.py pattern */
    PRETOK_LLAMA3,      /* "llama-bpe": Llama 3, digits in runs of up to 3 */
    PRETOK_QWEN2,       /* "qwen2": the Llama 3 pattern with single digits */
    PRETOK_QWEN35,      /* "qwen35": Qwen2's with marks in words, not in punctuation */
    PRETOK_DEEPSEEK_V3, /* "deepseek-v3": digits, CJK/kana, then words */
    PRETOK_STARCODER,   /* "starcoder": every digit alone, then GPT-2's pattern */
    PRETOK_BLOOM,       /* "bloom": runs up to whitespace or a stop (.,!? ...) */
    PRETOK_VIKING,      /* "viking": BLOOM's runs, then every digit alone */
    PRETOK_TEKKEN,      /* "tekken": words by letter case, single digits */
    PRETOK_GPT4O,       /* "gpt-4o": Tekken's with contractions ending words, up to 3 digits */
    PRETOK_COUNT
} PretokKind;

/* Piece types, numbered as SentencePiece's ModelProto and GGUF number them. */
typedef enum {
    TOKEN_NORMAL = 1,
    TOKEN_UNKNOWN = 2,
    TOKEN_CONTROL = 3,      /* <s>, </s>: never produced from text */
    TOKEN_USER_DEFINED = 4, /* matched in raw text before anything else */
    TOKEN_UNUSED = 5,       /* a merge step only: re-split into its parts */
    TOKEN_BYTE = 6,         /* <0xXX> byte fallback */
} TokenType;

/* How an added token takes the whitespace beside it (tokenizer.json's
 * lstrip / rstrip): the whitespace becomes part of the token. */
enum { ADDED_LSTRIP = 1, ADDED_RSTRIP = 2 };

/* Everything a tokenizer is made of.  Borrowed: tokenizer_build copies it. */
typedef struct {
    TokenizerKind kind;
    int n_pieces;
    const char *const *pieces;   /* (n_pieces) piece bytes */
    const uint32_t *piece_lens;  /* (n_pieces) byte lengths, or NULL: NUL-terminated */
    const float *scores;         /* (n_pieces) merge priority / log-prob, or NULL: 0 */
    const uint8_t *types;        /* (n_pieces) TokenType, or NULL: all TOKEN_NORMAL */
    const uint8_t *added_flags;  /* (n_pieces) ADDED_* bits of added pieces, or NULL: none */
    int n_merges;
    const char *const *merges;   /* (n_merges) "left right" in rank order (GPT-2) */
    const uint8_t *charsmap;     /* SentencePiece precompiled_charsmap, or NULL */
    size_t charsmap_size;
    int bos_id, eos_id;          /* -1 when the vocabulary has none */
    int several_unknown;         /* SentencePiece: more than one piece may be typed unknown
                                    (llama.cpp's converter types Phi-3's padding pieces so,
                                    and llama.cpp reads them); the first is the unknown
                                    piece.  0: one only, as the library requires */
    /* SentencePiece normalizer_spec / trainer_spec flags */
    int add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
    int treat_whitespace_as_suffix, byte_fallback;
    const char *unk_surface;     /* decoded text of <unk>; NULL: " \u2047 " */
    /* byte-level BPE */
    PretokKind pretok;
    int ignore_merges;           /* a pre-token that is a whole piece is not merged */
    int nfc;                     /* text between added pieces is put in Unicode NFC first */
    int fuse_unk;                /* TOKENIZER_HF_BPE: a run of unknown characters is one <unk> */
    int prepend_space;           /* TOKENIZER_HF_BPE: text between added pieces starts with a
                                    U+2581 (Llama 2's Prepend normalizer) */
    int strip_leading_space;     /* TOKENIZER_HF_BPE: decoding drops the text's first space
                                    (Llama 2's Strip decoder) */
    int leftmost_merges;         /* merge the leftmost best-ranked pair at a time (Hugging
                                    Face), not every occurrence of it per pass (encoder.py) */
    /* TOKENIZER_HF_UNIGRAM (also charsmap, byte_fallback, strip_leading_space) */
    int strip_right;             /* the Strip normalizer: trailing whitespace goes */
    const char *space_run;       /* Replace " {2,}" by this text; NULL: no such step */
    MetaspacePrepend metaspace_prepend;
    int metaspace_split;         /* Metaspace's split: each U+2581 starts a pre-token */
} TokenizerSpec;

/* Byte-wise trie over a set of pieces (unigram lattice, user-defined
 * symbols).  Children of a node form a sibling list; the root has a table. */
typedef struct {
    int first_child, next_sibling; /* -1 when none */
    int value;                     /* piece id that ends here, or -1 */
    unsigned char label;           /* byte on the edge into the node */
} PieceTrieNode;

typedef struct {
    PieceTrieNode *nodes; /* (n_nodes) */
    int n_nodes;
    size_t cap;
    int root[256];        /* child of the root per byte, or -1 */
} PieceTrie;

typedef struct {
    TokenizerKind kind;
    char source[512];     /* the file the vocabulary came from, named in encoding
                             errors; empty when built from memory */
    int vocab_size;
    char **pieces;        /* (vocab_size) NUL-terminated piece text, as the vocabulary spells it */
    int *piece_lens;      /* (vocab_size) their byte lengths */
    float *scores;        /* (vocab_size) */
    uint8_t *types;       /* (vocab_size) TokenType */
    uint8_t *added_flags; /* (vocab_size) ADDED_* bits, or NULL when no piece has any */
    int bos_id, eos_id;   /* -1 when the vocabulary has none */
    int unk_id;           /* -1 when none (llama2.c, GPT-2) */
    int max_piece_len;
    int byte_ids[256];    /* token of each raw byte (<0xXX> or the GPT-2 byte symbol), -1 */

    /* lookup: open addressing over piece ids, hash_mask + 1 slots */
    int *hash;
    uint32_t hash_mask;

    /* decode: what each token contributes mid-text (byte pieces are the byte,
     * ▁ is a space, control pieces are empty) */
    char *surface_pool;
    size_t *surface_off;  /* (vocab_size + 1) token i is pool[off[i], off[i+1]) */

    /* SentencePiece */
    int add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
    int treat_whitespace_as_suffix, byte_fallback;
    uint32_t *charsmap_units;    /* (n_charsmap_units) Darts double-array of the normalizer */
    size_t n_charsmap_units;
    char *charsmap_text;         /* (charsmap_text_size) NUL-separated replacements */
    size_t charsmap_text_size;
    PieceTrie user_trie;         /* user-defined pieces (n_nodes 0 when none) */
    PieceTrie unigram_trie;      /* normal + user-defined pieces (unigram) */
    float min_score, max_score;  /* over normal pieces (unigram unknown penalty, bonus) */

    /* byte-level BPE: see TokenizerSpec; user-defined pieces are always
     * matched in text, control pieces too under parse_special */
    PretokKind pretok;
    int ignore_merges, leftmost_merges, nfc, fuse_unk, prepend_space, strip_leading_space;
    /* HF_UNIGRAM: see TokenizerSpec */
    int strip_right, metaspace_split;
    char space_run[8];           /* "" when no Replace " {2,}" step */
    int has_space_run;
    MetaspacePrepend metaspace_prepend;
    PieceTrie added_trie;        /* user-defined pieces */
    PieceTrie special_trie;      /* user-defined and control pieces */
    int parse_special;           /* tokenizer_set_parse_special */
    /* GPT-2: merges as an open-addressing table keyed by the id pair */
    uint64_t *merge_keys;        /* (merge_mask + 1) (left << 32 | right) + 1, 0 = empty */
    int *merge_rank, *merge_result;
    uint32_t merge_mask;
} Tokenizer;

/* Reads a tokenizer, choosing the format from the path and content: a
 * tokenizer.json (or a directory holding one; tokenizer_config.json beside
 * it), a directory holding vocab.json + merges.txt, a vocab.json (merges.txt
 * beside it), a SentencePiece .model, a llama2.c .bin, or the vocabulary of
 * a GGUF file (tokenizer.ggml.*; weights, if any, are not read).  expected_vocab > 0
 * must match its size.  Errors are one line naming the file. */
int tokenizer_load(Tokenizer *t, const char *path, int expected_vocab, PosencError *err);

/* The vocabulary stored in a GGUF file (tokenizer.ggml.*). */
int tokenizer_load_gguf(Tokenizer *t, const GgufFile *g, PosencError *err);
/* Builds a tokenizer from in-memory arrays (validating them). */
int tokenizer_build(Tokenizer *t, const TokenizerSpec *spec, PosencError *err);
void tokenizer_free(Tokenizer *t);

/* Encodes len bytes of text (any bytes: invalid UTF-8 is handled as the
 * reference library does, see docs/tokenizers.md).  ids must hold len + 3 entries (BOS,
 * dummy prefix, EOS).  Only a SentencePiece normalizer (a .model's, or a
 * Unigram tokenizer.json's charsmap and its U+2581 before each section
 * between added tokens) can produce more ids than that (NFKC expansions,
 * U+FFFD for invalid bytes under byte fallback): such text returns an error
 * instead; tokenizer_encode_alloc has no bound.
 * *n_ids receives the count.  Returns 0 or -1 + err, which names t->source. */
int tokenizer_encode(const Tokenizer *t, const char *text, size_t len, int add_bos, int add_eos,
                     int *ids, int *n_ids, PosencError *err);

/* The same into a malloc'd array (*ids, caller frees). */
int tokenizer_encode_alloc(const Tokenizer *t, const char *text, size_t len, int add_bos,
                           int add_eos, int **ids, int *n_ids, PosencError *err);

/* The bytes that `token` contributes to the text when it follows `prev`
 * (-1 at the start of text).  Byte pieces are raw bytes; control pieces are
 * empty.  At the start of text (prev is -1 or BOS) the leading space of the
 * piece is dropped: llama2.c's rule for .bin (after BOS only), the
 * library's dummy-prefix rule for SentencePiece; GPT-2 keeps every byte.
 * NUL-terminated; *len excludes it. */
const char *tokenizer_decode(const Tokenizer *t, int prev, int token, size_t *len);

/* A whole sequence as the reference decoders give it (malloc'd,
 * NUL-terminated, *len bytes): for SentencePiece the library's exact rules,
 * i.e. leading ▁ stripped until text appears, runs of byte pieces joined and
 * their invalid UTF-8 replaced by U+FFFD; otherwise tokenizer_decode from
 * the start of text.  Ids outside the vocabulary are skipped. */
char *tokenizer_decode_text(const Tokenizer *t, const int *ids, int n, size_t *len);

/* Special tokens.  By default a control piece's text ("<|eot_id|>",
 * "<|im_start|>") in the input is encoded as ordinary text, as the Python
 * library does with split_special_tokens=True; user-defined pieces (added
 * tokens that are not special) always become their ids.  With `on`, control
 * pieces in the text become their ids too (`--special`; Hugging Face's
 * default).  Byte-level BPE vocabularies only (tokenizer.json, vocab.json,
 * GGUF "gpt2"): returns -1 for the others, whose control pieces never come
 * from text. */
int tokenizer_set_parse_special(Tokenizer *t, int on);

/* Whether `id` ends a chat turn, in any vocabulary: EOS, or a control or
 * added piece spelled as one of the newest llama.cpp's end-of-generation
 * tokens (<|eot_id|>, <|im_end|>, <end_of_turn>, Gemma 4's <turn|>, ...:
 * the list in tokenizer.c); but <|end|> ends nothing where <|return|> and
 * <|call|> do (gpt-oss's harmony), or <|calls|> and <|flush|> (llama.cpp's
 * exception). */
int tokenizer_ends_turn(const Tokenizer *t, int id);

/* Whether generating `id` ends the text (end of generation): in byte-level
 * BPE vocabularies tokenizer_ends_turn.  Always 0 for SentencePiece and
 * llama2.c vocabularies, where generation stops at BOS as llama2.c's does. */
int tokenizer_is_eog(const Tokenizer *t, int id);

/* Id of an exact piece, or -1. */
int tokenizer_lookup(const Tokenizer *t, const char *piece, size_t len);

/* What -m tokenize writes for a line: its ids separated by spaces, its
 * pieces, or one JSON object {"ids":[...],"pieces":[...]}. */
typedef enum { TOKENIZE_IDS, TOKENIZE_PIECES, TOKENIZE_JSON } TokenizeFormat;

/* `-m tokenize`: encodes each '\n'-terminated line of `in` (a final line
 * without '\n' counts; '\r' and NUL bytes are text, as spm_encode reads
 * lines) and writes one output line per input line in `format`.  No
 * BOS/EOS.  An encoding error names the line ("line 3: tok.bin: ..."). */
int tokenize_stream(const Tokenizer *t, FILE *in, FILE *out, TokenizeFormat format,
                    PosencError *err);

/* The same over a string (`-i TEXT`); empty text is one empty line. */
int tokenize_text(const Tokenizer *t, const char *text, size_t len, FILE *out,
                  TokenizeFormat format, PosencError *err);
#endif
