/* The format-independent part: building and validating a vocabulary from a
 * TokenizerSpec, lookup, decoding, and the encode entry points, each handing
 * what depends on the kind to its TokenizerOps. */
#include "tokenizer/tokenizer_impl.h"

#include <errno.h>
#include <sys/stat.h>

#include "base/json.h"

static const TokenizerOps *const kinds[] = {
    [TOKENIZER_LLAMA2C] = &tokenizer_llama2c_ops,
    [TOKENIZER_SPM_BPE] = &tokenizer_spm_bpe_ops,
    [TOKENIZER_SPM_UNIGRAM] = &tokenizer_spm_unigram_ops,
    [TOKENIZER_GPT2] = &tokenizer_gpt2_ops,
    [TOKENIZER_HF_BPE] = &tokenizer_hf_bpe_ops,
    [TOKENIZER_HF_UNIGRAM] = &tokenizer_hf_unigram_ops,
};

/* NULL for a value outside TokenizerKind. */
static const TokenizerOps *kind_ops(TokenizerKind kind) {
    return (unsigned)kind < sizeof kinds / sizeof *kinds ? kinds[kind] : NULL;
}

const TokenizerOps *tokenizer_ops(const Tokenizer *t) { return kinds[t->kind]; }

void buf_reserve(void **v, size_t *cap, size_t n, size_t extra, size_t size) {
    size_t need;
    if (!size_add(&need, n, extra)) posenc_out_of_memory(SIZE_MAX, size, "a tokenizer buffer");
    if (need <= *cap) return;
    size_t cap2 = *cap ? *cap : 16;
    while (cap2 < need) cap2 = cap2 > SIZE_MAX / 2 ? need : cap2 * 2;
    size_t bytes;
    void *p = size_mul(&bytes, cap2, size) ? realloc(*v, bytes) : NULL;
    if (!p) posenc_out_of_memory(cap2, size, "a tokenizer buffer");
    *v = p;
    *cap = cap2;
}

static uint32_t hash_bytes(const char *s, size_t n) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

int tokenizer_lookup(const Tokenizer *t, const char *piece, size_t len) {
    if (!t->hash) return -1;
    for (uint32_t i = hash_bytes(piece, len) & t->hash_mask;; i = (i + 1) & t->hash_mask) {
        int id = t->hash[i];
        if (id < 0) return -1;
        if ((size_t)t->piece_lens[id] == len && memcmp(t->pieces[id], piece, len) == 0) return id;
    }
}

/* Indexes the pieces; a repeated piece is an error except where the kind
 * keeps the first (llama2.c's binary search finds either). */
static int build_hash(Tokenizer *t, PosencError *err) {
    uint32_t slots = 16;
    while (slots < 2u * (uint32_t)t->vocab_size) slots *= 2;
    t->hash_mask = slots - 1;
    t->hash = malloc_or_exit(slots * sizeof(int), "the vocabulary's hash table");
    memset(t->hash, -1, slots * sizeof(int));
    for (int id = 0; id < t->vocab_size; id++) {
        const char *p = t->pieces[id];
        size_t n = strlen(p);
        uint32_t i = hash_bytes(p, n) & t->hash_mask;
        for (; t->hash[i] >= 0; i = (i + 1) & t->hash_mask) {
            if (strcmp(t->pieces[t->hash[i]], p) != 0) continue;
            if (tokenizer_ops(t)->first_repeat_wins) break;
            return posenc_error(err, "piece %d '%s' repeats piece %d", id, posenc_escape(p).s,
                                t->hash[i]);
        }
        if (t->hash[i] < 0) t->hash[i] = id;
    }
    return 0;
}

int byte_piece_value(const char *p) {
    static const char hex[] = "0123456789ABCDEF";
    if (strlen(p) != 6 || memcmp(p, "<0x", 3) != 0 || p[5] != '>') return -1;
    const char *hi = memchr(hex, p[3], 16), *lo = memchr(hex, p[4], 16);
    if (!hi || !lo) return -1;
    return (int)((hi - hex) * 16 + (lo - hex));
}

void append_metaspace_text(CharBuf *pool, const char *piece) {
    for (const char *p = piece; *p; p++) {
        if (strncmp(p, "\xE2\x96\x81", 3) == 0) { /* ▁ */
            charbuf_push(pool, ' ');
            p += 2;
        } else {
            charbuf_push(pool, *p);
        }
    }
}

void lookup_byte_pieces(Tokenizer *t) {
    for (int b = 0; b < 256; b++) {
        char piece[8];
        int n = snprintf(piece, sizeof piece, "<0x%02X>", b);
        t->byte_ids[b] = tokenizer_lookup(t, piece, (size_t)n);
    }
}

static void build_surfaces(Tokenizer *t, const char *unk_surface) {
    CharBuf pool = {0};
    t->surface_off =
        malloc_or_exit(((size_t)t->vocab_size + 1) * sizeof(size_t), "the decoded pieces");
    for (int id = 0; id < t->vocab_size; id++) {
        t->surface_off[id] = pool.n;
        tokenizer_ops(t)->append_surface(t, id, unk_surface, &pool);
        charbuf_push(&pool, '\0');
    }
    t->surface_off[t->vocab_size] = pool.n;
    t->surface_pool = pool.v;
}

/* Copies the pieces into one pool with NUL terminators. */
static int copy_pieces(Tokenizer *t, const TokenizerSpec *spec, PosencError *err) {
    size_t total = 0;
    for (int i = 0; i < spec->n_pieces; i++) {
        const char *p = spec->pieces[i] ? spec->pieces[i] : "";
        size_t n = spec->piece_lens && spec->pieces[i] ? spec->piece_lens[i] : strlen(p);
        if (n > TOKENIZER_MAX_PIECE_BYTES)
            return posenc_error(err, "piece %d is %zu bytes long (limit %d)", i, n,
                                TOKENIZER_MAX_PIECE_BYTES);
        if (memchr(p, '\0', n)) return posenc_error(err, "piece %d contains a NUL byte", i);
        total += n + 1;
        if ((int)n > t->max_piece_len) t->max_piece_len = (int)n;
    }
    char *pool = malloc_or_exit(total ? total : 1, "the pieces");
    t->pieces = malloc_or_exit((size_t)spec->n_pieces * sizeof(char *), "the piece table");
    t->piece_lens = malloc_or_exit((size_t)spec->n_pieces * sizeof(int), "the piece lengths");
    t->vocab_size = spec->n_pieces;
    for (int i = 0; i < spec->n_pieces; i++) {
        const char *p = spec->pieces[i] ? spec->pieces[i] : "";
        size_t n = spec->piece_lens && spec->pieces[i] ? spec->piece_lens[i] : strlen(p);
        memcpy(pool, p, n);
        pool[n] = '\0';
        t->pieces[i] = pool;
        t->piece_lens[i] = (int)n;
        pool += n + 1;
    }
    return 0;
}

int tokenizer_build(Tokenizer *t, const TokenizerSpec *spec, PosencError *err) {
    memset(t, 0, sizeof *t);
    const TokenizerOps *ops = kind_ops(spec->kind);
    if (!ops) return posenc_error(err, "unknown tokenizer kind %d", (int)spec->kind);
    t->kind = spec->kind;
    t->unk_id = -1;
    if (spec->n_pieces <= 0) return posenc_error(err, "the vocabulary is empty");
    if (spec->bos_id < -1 || spec->bos_id >= spec->n_pieces || spec->eos_id < -1 ||
        spec->eos_id >= spec->n_pieces)
        return posenc_error(err, "BOS/EOS id (%d/%d) outside the vocabulary of %d",
                            spec->bos_id, spec->eos_id, spec->n_pieces);
    int rc = copy_pieces(t, spec, err);
    size_t n = (size_t)t->vocab_size;
    if (rc == 0) {
        t->scores = calloc_or_exit(n, sizeof(float), "the piece scores");
        if (spec->scores) memcpy(t->scores, spec->scores, n * sizeof(float));
        t->types = malloc_or_exit(n, "the piece types");
        for (size_t i = 0; i < n && rc == 0; i++) {
            t->types[i] = spec->types ? spec->types[i] : TOKEN_NORMAL;
            if (t->types[i] < TOKEN_NORMAL || t->types[i] > TOKEN_BYTE)
                rc = posenc_error(err, "piece %zu has unknown type %d", i, t->types[i]);
        }
    }
    if (rc == 0 && spec->added_flags) {
        t->added_flags = malloc_or_exit(n, "the added tokens' flags");
        memcpy(t->added_flags, spec->added_flags, n);
    }
    t->bos_id = spec->bos_id;
    t->eos_id = spec->eos_id;
    for (int b = 0; b < 256; b++) t->byte_ids[b] = -1;
    if (rc == 0) rc = build_hash(t, err);
    if (rc == 0 && ops->init) rc = ops->init(t, spec, err);
    if (rc) {
        tokenizer_free(t);
        return -1;
    }
    build_surfaces(t, spec->unk_surface ? spec->unk_surface : " \xE2\x81\x87 ");
    return 0;
}

void tokenizer_free(Tokenizer *t) {
    if (t->pieces) free(t->pieces[0]);
    free(t->pieces);
    free(t->piece_lens);
    free(t->scores);
    free(t->types);
    free(t->added_flags);
    free(t->hash);
    free(t->surface_pool);
    free(t->surface_off);
    const TokenizerOps *ops = tokenizer_ops(t);
    if (ops->free) ops->free(t);
    memset(t, 0, sizeof *t);
}

typedef int (*TokenizerReadFn)(Tokenizer *t, const char *path, PosencError *err);

/* By name first; otherwise a JSON object is a GPT-2 vocab, a protobuf
 * starting with a piece (field 1) a SentencePiece model, else llama2.c.
 * NULL, with the reason in err, when the path cannot be read. */
static TokenizerReadFn guess_reader(const char *path, PosencError *err) {
    struct stat st;
    if (stat(path, &st) != 0) {
        posenc_error(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) { /* a FIFO would block below */
        posenc_error(err, "%s: not a regular file", path);
        return NULL;
    }
    if (S_ISDIR(st.st_mode) || posenc_ends_with(path, ".json")) return gpt2_read;
    if (posenc_ends_with(path, ".model")) return spm_read;
    if (posenc_ends_with(path, ".bin")) return llama2c_read;
    FILE *f = fopen(path, "rb");
    int first = f ? fgetc(f) : EOF, c = first;
    while (c == ' ' || c == '\n' || c == '\r' || c == '\t') c = fgetc(f);
    if (f) fclose(f);
    return c == '{' ? gpt2_read : first == 0x0A ? spm_read : llama2c_read;
}

/* A file named tokenizer.json, or a directory holding one. */
static int is_hf_json(const char *path) {
    char file[4096];
    struct stat st;
    if (posenc_ends_with(path, "/tokenizer.json") || strcmp(path, "tokenizer.json") == 0) return 1;
    snprintf(file, sizeof file, "%s/tokenizer.json", path);
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) && stat(file, &st) == 0;
}

/* A GGUF's vocabulary (a model, or a --vocab-only file) without its weights. */
static int gguf_read(Tokenizer *t, const char *path, PosencError *err) {
    GgufFile g;
    if (gguf_open(&g, path, err)) return -1;
    int rc = tokenizer_load_gguf(t, &g, err); /* copies what it keeps */
    gguf_close(&g);
    return rc;
}

int tokenizer_load(Tokenizer *t, const char *path, int expected_vocab, PosencError *err) {
    memset(t, 0, sizeof *t);
    TokenizerReadFn reader = guess_reader(path, err);
    if (!reader) return -1;
    int is_gguf = gguf_file_has_magic(path, err);
    if (is_gguf < 0) return -1;
    int rc = is_gguf            ? gguf_read(t, path, err)
             : is_hf_json(path) ? hf_json_read(t, path, err)
                                : reader(t, path, err);
    if (rc) return -1;
    snprintf(t->source, sizeof t->source, "%s", path);
    if (expected_vocab > 0 && t->vocab_size != expected_vocab) {
        posenc_error(err, "%s: tokenizer has %d pieces but the model's vocabulary is %d", path,
                     t->vocab_size, expected_vocab);
        tokenizer_free(t);
        return -1;
    }
    return 0;
}

int tokenizer_set_parse_special(Tokenizer *t, int on) {
    if (!tokenizer_ops(t)->splits_added) return -1;
    t->parse_special = on != 0;
    return 0;
}

/* EOS, or a piece of the newest llama.cpp's end-of-generation names
 * (llama-vocab.cpp) that is no piece of text. */
static int listed_end(const Tokenizer *t, int id) {
    static const char *const names[] = {
        "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
        "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|return|>", "<|call|>",
        "<|flush|>", "<|calls|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
        "<\357\275\234end\342\226\201of\342\226\201sentence\357\275\234>"};
    if (id < 0 || id >= t->vocab_size) return 0;
    if (id == t->eos_id) return 1;
    /* llama.cpp takes a listed name of any type as control; here the added
     * ones count too (Gemma 4's <|tool_response>), never a piece of text */
    if (t->types[id] != TOKEN_CONTROL && t->types[id] != TOKEN_USER_DEFINED) return 0;
    for (size_t k = 0; k < sizeof names / sizeof *names; k++)
        if (strcmp(t->pieces[id], names[k]) == 0) return 1;
    return 0;
}

static int piece_ends(const Tokenizer *t, const char *piece) {
    return listed_end(t, tokenizer_lookup(t, piece, strlen(piece)));
}

int tokenizer_ends_turn(const Tokenizer *t, int id) {
    if (!listed_end(t, id)) return 0;
    /* llama.cpp's exception (llama-vocab.cpp): where <|return|> and <|call|>
     * end generation (gpt-oss's harmony format), or <|calls|> and <|flush|>
     * (solar-open), <|end|> closes a message inside the turn, as the
     * reasoning channel before the final one, and ends nothing, even as EOS */
    if (strcmp(t->pieces[id], "<|end|>") != 0) return 1;
    int call = piece_ends(t, "<|call|>") || piece_ends(t, "<|calls|>");
    return !(call && (piece_ends(t, "<|return|>") || piece_ends(t, "<|flush|>")));
}

int tokenizer_is_eog(const Tokenizer *t, int id) {
    return tokenizer_ops(t)->splits_added && tokenizer_ends_turn(t, id);
}

static const char *piece_surface(const Tokenizer *t, int token, int drop_space, size_t *len) {
    size_t off = t->surface_off[token];
    *len = t->surface_off[token + 1] - off - 1 - (size_t)drop_space;
    return t->surface_pool + off + drop_space;
}

void append_piece_surface(const Tokenizer *t, int token, int drop_space, CharBuf *out) {
    size_t len;
    const char *s = piece_surface(t, token, drop_space, &len);
    charbuf_append(out, s, len);
}

int strip_decoder_drops_space(const Tokenizer *t, int prev, int token) {
    return t->strip_leading_space && starts_text(t, prev) &&
           t->surface_pool[t->surface_off[token]] == ' ';
}

const char *tokenizer_decode(const Tokenizer *t, int prev, int token, size_t *len) {
    if (token < 0 || token >= t->vocab_size) {
        *len = 0;
        return "";
    }
    const TokenizerOps *ops = tokenizer_ops(t);
    return piece_surface(t, token, ops->drops_space && ops->drops_space(t, prev, token), len);
}

int append_byte_run(const Tokenizer *t, const int *ids, int i, int n, CharBuf *out) {
    int end = i;
    while (end < n && ids[end] >= 0 && ids[end] < t->vocab_size && t->types[ids[end]] == TOKEN_BYTE)
        end++;
    unsigned char bytes[4];
    while (i < end) {
        int k = 0;
        while (k < 4 && i + k < end) bytes[k] = (unsigned char)t->surface_pool[t->surface_off[ids[i + k]]], k++;
        uint32_t cp;
        int len = utf8_decode(bytes, (size_t)k, &cp);
        if (len == 0) charbuf_append(out, "\xEF\xBF\xBD", 3);
        else charbuf_append(out, (const char *)bytes, (size_t)len);
        i += len ? len : 1;
    }
    return end;
}

/* Each piece as tokenizer_decode gives it after the one before. */
static void decode_streamed(const Tokenizer *t, const int *ids, int n, CharBuf *out) {
    int prev = -1;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->vocab_size) continue;
        size_t k;
        const char *s = tokenizer_decode(t, prev, ids[i], &k);
        charbuf_append(out, s, k);
        prev = ids[i];
    }
}

char *tokenizer_decode_text(const Tokenizer *t, const int *ids, int n, size_t *len) {
    CharBuf out = {0};
    const TokenizerOps *ops = tokenizer_ops(t);
    if (ops->decode_text) ops->decode_text(t, ids, n, &out);
    else decode_streamed(t, ids, n, &out);
    charbuf_push(&out, '\0');
    *len = out.n - 1;
    if (t->strip_leading_space && out.v[0] == ' ') memmove(out.v, out.v + 1, (*len)--);
    return out.v;
}

void scratch_free(TokScratch *s) {
    free(s->norm.v);
    free(s->syms);
    free(s->heap.heap);
    free(s->lattice);
    free(s->spans.v);
    free(s->rev.v);
    free(s->nfc.v);
    free(s->cps.v);
    memset(s, 0, sizeof *s);
}

BpeSymbol *scratch_symbols(TokScratch *s, size_t n) {
    if (n > s->syms_cap) buf_reserve((void **)&s->syms, &s->syms_cap, 0, n, sizeof(BpeSymbol));
    return s->syms;
}

static int encode_into(const Tokenizer *t, const char *text, size_t len, int add_bos,
                       int add_eos, IntBuf *out, TokScratch *s, PosencError *err) {
    out->n = 0;
    if (add_bos && t->bos_id >= 0) intbuf_push(out, t->bos_id);
    if (tokenizer_ops(t)->encode(t, text, len, out, s, err))
        return posenc_error_prefix(err, t->source);
    if (add_eos && t->eos_id >= 0) intbuf_push(out, t->eos_id);
    if (out->n > INT32_MAX) {
        posenc_error(err, "text encodes to too many tokens");
        return posenc_error_prefix(err, t->source);
    }
    return 0;
}

int tokenizer_encode_alloc(const Tokenizer *t, const char *text, size_t len, int add_bos,
                           int add_eos, int **ids, int *n_ids, PosencError *err) {
    TokScratch s = {0};
    IntBuf out = {0};
    int rc = encode_into(t, text, len, add_bos, add_eos, &out, &s, err);
    scratch_free(&s);
    if (rc) {
        free(out.v);
        return -1;
    }
    *ids = out.v ? out.v : malloc_or_exit(sizeof(int), "the token ids");
    *n_ids = (int)out.n;
    return 0;
}

int tokenizer_encode(const Tokenizer *t, const char *text, size_t len, int add_bos, int add_eos,
                     int *ids, int *n_ids, PosencError *err) {
    int *all, n;
    if (tokenizer_encode_alloc(t, text, len, add_bos, add_eos, &all, &n, err)) return -1;
    int rc = 0;
    if ((size_t)n > len + 3)
        rc = posenc_error(err, "%zu bytes of text normalize to %d tokens, more than the %zu "
                               "a caller's buffer holds (use tokenizer_encode_alloc)",
                          len, n, len + 3);
    else
        memcpy(ids, all, (size_t)n * sizeof(int));
    *n_ids = rc ? 0 : n;
    free(all);
    return rc;
}

/* Encodes one line and prints it. */
static int print_line(const Tokenizer *t, const char *line, size_t n, FILE *out,
                      TokenizeFormat format, IntBuf *ids, TokScratch *s, PosencError *err) {
    if (encode_into(t, line, n, 0, 0, ids, s, err)) return -1;
    if (format == TOKENIZE_JSON) {
        fputs("{\"ids\":[", out);
        for (size_t i = 0; i < ids->n; i++) fprintf(out, "%s%d", i ? "," : "", ids->v[i]);
        fputs("],\"pieces\":[", out);
        for (size_t i = 0; i < ids->n; i++) {
            if (i) fputc(',', out);
            const char *piece = t->pieces[ids->v[i]];
            json_write_string(out, piece, strlen(piece));
        }
        fputs("]}\n", out);
        return 0;
    }
    for (size_t i = 0; i < ids->n; i++) {
        if (i) fputc(' ', out);
        if (format == TOKENIZE_PIECES) fputs(t->pieces[ids->v[i]], out);
        else fprintf(out, "%d", ids->v[i]);
    }
    fputc('\n', out);
    return 0;
}

int tokenize_stream(const Tokenizer *t, FILE *in, FILE *out, TokenizeFormat format,
                    PosencError *err) {
    TokScratch s = {0};
    IntBuf ids = {0};
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = 0;
    for (long lineno = 1; rc == 0 && (n = getline(&line, &cap, in)) >= 0; lineno++) {
        if (n > 0 && line[n - 1] == '\n') n--;
        rc = print_line(t, line, (size_t)n, out, format, &ids, &s, err);
        char where[32];
        snprintf(where, sizeof where, "line %ld", lineno);
        if (rc) posenc_error_prefix(err, where);
    }
    if (rc == 0 && ferror(in)) rc = posenc_error(err, "cannot read the text: %s", strerror(errno));
    if (rc == 0 && (fflush(out) != 0 || ferror(out)))
        rc = posenc_error(err, "cannot write the output: %s", strerror(errno));
    free(line);
    free(ids.v);
    scratch_free(&s);
    return rc;
}

int tokenize_text(const Tokenizer *t, const char *text, size_t len, FILE *out,
                  TokenizeFormat format, PosencError *err) {
    TokScratch s = {0};
    IntBuf ids = {0};
    int rc = 0;
    size_t i = 0;
    do {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - text) : len;
        rc = print_line(t, text + i, end - i, out, format, &ids, &s, err);
        i = end + 1;
    } while (rc == 0 && i < len);
    if (rc == 0 && (fflush(out) != 0 || ferror(out)))
        rc = posenc_error(err, "cannot write the output: %s", strerror(errno));
    free(ids.v);
    scratch_free(&s);
    return rc;
}

const char *byte_name(unsigned char b, char *buf) {
    if (b > 0x20 && b < 0x7f && b != '\'') snprintf(buf, 16, "'%c' (byte 0x%02X)", b, b);
    else snprintf(buf, 16, "byte 0x%02X", b);
    return buf;
}
