/* Tokenizer units: building from in-memory arrays, format detection, the
 * caller-buffer bound, line splitting, decoding rules; and bad input: every
 * corrupt, truncated or inconsistent .model / .bin / vocab.json must give a
 * one-line error naming the file (or load and encode without a crash). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/common.h"
#include "tokenizer/tokenizer.h"

static const char *models;

static void encode_ok(const Tokenizer *t, const char *text, const int *want, int n_want) {
    int *ids, n;
    PosencError err;
    ck_assert_msg(tokenizer_encode_alloc(t, text, strlen(text), 0, 0, &ids, &n, &err) == 0, "%s",
                  err.msg);
    ck_assert_int_eq(n, n_want);
    for (int i = 0; i < n; i++) ck_assert_msg(ids[i] == want[i], "id %d: %d != %d", i, ids[i], want[i]);
    free(ids);
}

/* A SentencePiece BPE vocabulary built from arrays, as a GGUF reader would. */
#define SP "\xE2\x96\x81"
static const char *mini_pieces[] = {"<unk>", "<s>", "</s>", SP, "a", "b", "c", SP "a", "ab",
                                    SP "ab", "bc", "<0x41>"};
static const float mini_scores[] = {0, 0, 0, -1, -2, -3, -4, -5, -6, -7, -8, 0};
static const uint8_t mini_types[] = {TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_CONTROL, 1, 1, 1, 1,
                                     1, 1, 1, 1, TOKEN_NORMAL};

static TokenizerSpec mini_spec(void) {
    TokenizerSpec s = {.kind = TOKENIZER_SPM_BPE, .n_pieces = 12, .pieces = mini_pieces,
                       .scores = mini_scores, .types = mini_types, .bos_id = 1, .eos_id = 2,
                       .add_dummy_prefix = 1, .remove_extra_whitespaces = 1,
                       .escape_whitespaces = 1};
    return s;
}

START_TEST(build_from_arrays) {
    Tokenizer t;
    PosencError err;
    TokenizerSpec spec = mini_spec();
    ck_assert_msg(tokenizer_build(&t, &spec, &err) == 0, "%s", err.msg);
    /* ▁a (-5) beats ab (-6) and bc (-8), then ▁ab (-7) beats bc */
    encode_ok(&t, "abc", (int[]){9, 6}, 2);
    /* spaces collapse; 'd' is unknown, two unknowns in a row are one <unk> */
    encode_ok(&t, "  ab   dd ", (int[]){9, 3, 0}, 3);
    int ids[16], n;
    ck_assert_int_eq(tokenizer_encode(&t, "ab", 2, 1, 1, ids, &n, &err), 0);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(ids[0], 1);
    ck_assert_int_eq(ids[2], 2);
    ck_assert_int_eq(tokenizer_lookup(&t, SP "ab", strlen(SP "ab")), 9);
    ck_assert_int_eq(tokenizer_lookup(&t, "zz", 2), -1);
    /* leading ▁ dropped at the start of text and after BOS only */
    size_t len;
    ck_assert_str_eq(tokenizer_decode(&t, -1, 9, &len), "ab");
    ck_assert_str_eq(tokenizer_decode(&t, 1, 9, &len), "ab");
    ck_assert_str_eq(tokenizer_decode(&t, 4, 9, &len), " ab");
    ck_assert_str_eq(tokenizer_decode(&t, 4, 1, &len), "");
    ck_assert_str_eq(tokenizer_decode(&t, 4, 0, &len), " \xE2\x81\x87 ");
    ck_assert_str_eq(tokenizer_decode(&t, 4, 99, &len), "");
    /* a NORMAL "<0x41>" piece is text, not a byte */
    ck_assert_str_eq(tokenizer_decode(&t, 4, 11, &len), "<0x41>");
    /* with remove_extra_whitespaces the library strips ▁ until text appears */
    char *text = tokenizer_decode_text(&t, (int[]){1, 3, 9, 10, 3, 10, 2}, 7, &len);
    ck_assert_str_eq(text, "abbc bc");
    free(text);
    tokenizer_free(&t);
}
END_TEST

/* What each vocabulary rule of the library refuses. */
START_TEST(build_rejects_inconsistent_vocabularies) {
    Tokenizer t;
    PosencError err;
    TokenizerSpec s = mini_spec();
    s.n_pieces = 0;
    ck_assert_int_eq(tokenizer_build(&t, &s, &err), -1);
    ck_assert_str_eq(err.msg, "the vocabulary is empty");

    uint8_t types[12];
    memcpy(types, mini_types, sizeof types);
    s = mini_spec();
    s.types = types;
    types[0] = TOKEN_NORMAL;
    ck_assert_int_eq(tokenizer_build(&t, &s, &err), -1);
    ck_assert_str_eq(err.msg, "the vocabulary has no unknown piece");
    types[0] = TOKEN_UNKNOWN;
    types[4] = TOKEN_UNKNOWN;
    ck_assert_int_eq(tokenizer_build(&t, &s, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "two unknown pieces"));
    types[4] = TOKEN_NORMAL;
    types[11] = TOKEN_BYTE;
    ck_assert_int_eq(tokenizer_build(&t, &s, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "byte_fallback is off"));
    s.byte_fallback = 1;
    ck_assert_int_eq(tokenizer_build(&t, &s, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "<0x00> is missing"));
    types[11] = 9;
    ck_assert_int_eq(tokenizer_build(&t, &s, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "unknown type 9"));

    const char *dup[12];
    memcpy(dup, mini_pieces, sizeof dup);
    dup[10] = "ab";
    s = mini_spec();
    s.pieces = dup;
    ck_assert_int_eq(tokenizer_build(&t, &s, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "repeats piece 8"));
    dup[10] = "";
    ck_assert_int_eq(tokenizer_build(&t, &s, &err), -1);
    ck_assert_str_eq(err.msg, "piece 10 is empty");
    char *huge = malloc(5001);
    memset(huge, 'x', 5000);
    huge[5000] = '\0';
    dup[10] = huge;
    ck_assert_int_eq(tokenizer_build(&t, &s, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "5000 bytes long (limit"));
    free(huge);
    uint32_t lens[12];
    for (int i = 0; i < 12; i++) lens[i] = (uint32_t)strlen(mini_pieces[i]);
    lens[4] = 2; /* "a" plus its terminator */
    s = mini_spec();
    s.piece_lens = lens;
    ck_assert_int_eq(tokenizer_build(&t, &s, &err), -1);
    ck_assert_str_eq(err.msg, "piece 4 contains a NUL byte");

    s = mini_spec();
    s.bos_id = 12;
    ck_assert_int_eq(tokenizer_build(&t, &s, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "outside the vocabulary"));
    static const uint8_t short_map[] = {1, 2, 3, 4};
    static const uint8_t big_trie[] = {0xFF, 0, 0, 0, 1, 2, 3, 4};
    s = mini_spec();
    s.charsmap = short_map;
    s.charsmap_size = sizeof short_map;
    ck_assert_int_eq(tokenizer_build(&t, &s, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "precompiled_charsmap"));
    s.charsmap = big_trie;
    s.charsmap_size = sizeof big_trie;
    ck_assert_int_eq(tokenizer_build(&t, &s, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "precompiled_charsmap"));

    s = mini_spec();
    s.kind = TOKENIZER_SPM_UNIGRAM;
    for (int i = 3; i < 12; i++) types[i] = TOKEN_CONTROL;
    types[0] = TOKEN_UNKNOWN;
    s.types = types;
    ck_assert_int_eq(tokenizer_build(&t, &s, &err), -1);
    ck_assert_str_eq(err.msg, "the unigram model has no normal pieces");

    static const char *gp[] = {"a", "b", "ab"};
    static const char *bad_merge[] = {"a c"}, *three[] = {"a b c"};
    TokenizerSpec g = {.kind = TOKENIZER_GPT2, .n_pieces = 3, .pieces = gp, .n_merges = 1,
                       .merges = bad_merge, .bos_id = -1, .eos_id = -1};
    ck_assert_int_eq(tokenizer_build(&t, &g, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "right token is not in the vocabulary"));
    g.merges = three;
    ck_assert_int_eq(tokenizer_build(&t, &g, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "is not two tokens"));
}
END_TEST

/* Garbage in a charsmap's double array must not read outside it. */
START_TEST(garbage_charsmap_is_bounded) {
    uint8_t blob[4 + 64 + 8];
    uint32_t seed = 12345;
    for (int round = 0; round < 200; round++) {
        for (size_t i = 0; i < sizeof blob; i++) {
            seed = seed * 1664525u + 1013904223u;
            blob[i] = (uint8_t)(seed >> 24);
        }
        blob[0] = 64, blob[1] = blob[2] = blob[3] = 0;
        TokenizerSpec s = mini_spec();
        s.charsmap = blob;
        s.charsmap_size = sizeof blob;
        Tokenizer t;
        PosencError err;
        ck_assert_msg(tokenizer_build(&t, &s, &err) == 0, "%s", err.msg);
        int *ids, n;
        const char text[] = "abc \xC3\xA9\xE2\x82\xAC\x01\xFF dd";
        ck_assert_int_eq(tokenizer_encode_alloc(&t, text, sizeof text - 1, 1, 1, &ids, &n, &err), 0);
        free(ids);
        tokenizer_free(&t);
    }
}
END_TEST

START_TEST(gpt2_from_arrays) {
    /* byte-level pieces: "Ġ" is the space byte */
    static const char *gp[] = {"a", "b", "\xC4\xA0", "ab", "\xC4\xA0" "ab", "<|endoftext|>"};
    static const char *merges[] = {"a b", "\xC4\xA0 ab", "a b"};
    TokenizerSpec g = {.kind = TOKENIZER_GPT2, .n_pieces = 6, .pieces = gp, .n_merges = 3,
                       .merges = merges, .bos_id = 5, .eos_id = 5};
    Tokenizer t;
    PosencError err;
    ck_assert_msg(tokenizer_build(&t, &g, &err) == 0, "%s", err.msg);
    encode_ok(&t, "ab ab  b", (int[]){3, 4, 2, 2, 1}, 5);
    size_t len;
    ck_assert_str_eq(tokenizer_decode(&t, -1, 4, &len), " ab"); /* no dummy-prefix rule */
    int *ids, n;
    ck_assert_int_eq(tokenizer_encode_alloc(&t, "abc", 3, 0, 0, &ids, &n, &err), -1);
    ck_assert_str_eq(err.msg, "'c' (byte 0x63) has no token in the vocabulary");
    tokenizer_free(&t);
}
END_TEST

/* llama.cpp's exception for gpt-oss's harmony format (llama-vocab.cpp): with
 * <|return|> and <|call|> ending generation, <|end|> (which closes each
 * message, the analysis channel's before the final answer) does not, even
 * as EOS; nor with solar-open's <|calls|> and <|flush|>.  Controls: without
 * <|call|>, or with it as a piece of text, <|end|> ends the turn (Phi-3's
 * vocabularies); <|start|> never does. */
static int ends(const char *const *pieces, int n, int eos, const uint8_t *types, const char *piece) {
    TokenizerSpec g = {.kind = TOKENIZER_GPT2, .n_pieces = n, .pieces = pieces, .types = types,
                       .bos_id = -1, .eos_id = eos};
    Tokenizer t;
    PosencError err;
    ck_assert_msg(tokenizer_build(&t, &g, &err) == 0, "%s", err.msg);
    int id = tokenizer_lookup(&t, piece, strlen(piece));
    ck_assert_int_ge(id, 0);
    int r = tokenizer_ends_turn(&t, id) && tokenizer_is_eog(&t, id);
    tokenizer_free(&t);
    return r;
}

START_TEST(harmony_end_is_not_eog) {
    static const char *harmony[] = {"a", "<|start|>", "<|end|>", "<|return|>", "<|call|>"};
    static const char *solar[] = {"a", "<|end|>", "<|calls|>", "<|flush|>"};
    static const uint8_t control[] = {TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_CONTROL, TOKEN_CONTROL,
                                      TOKEN_CONTROL};
    static const uint8_t call_text[] = {TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_CONTROL, TOKEN_CONTROL,
                                        TOKEN_NORMAL};
    ck_assert(ends(harmony, 5, 3, control, "<|return|>") && ends(harmony, 5, 3, control, "<|call|>"));
    ck_assert(!ends(harmony, 5, 3, control, "<|end|>"));
    ck_assert(!ends(harmony, 5, 2, control, "<|end|>"));   /* even as EOS */
    ck_assert(!ends(harmony, 5, 3, control, "<|start|>"));
    ck_assert(!ends(solar, 4, -1, control, "<|end|>") && ends(solar, 4, -1, control, "<|flush|>"));
    /* controls: no <|call|>, or <|call|> a piece of text */
    ck_assert(ends(harmony, 4, 3, control, "<|end|>"));
    ck_assert(ends(harmony, 5, 3, call_text, "<|end|>"));
    ck_assert(ends(solar, 3, -1, control, "<|end|>"));
}
END_TEST

/* tokenizer_encode writes at most len + 3 ids: text the normalizer expands
 * past that is refused, tokenizer_encode_alloc takes it. */
START_TEST(caller_buffer_bound) {
    if (!models) return;
    Tokenizer t;
    PosencError err;
    tests_load_tokenizer(&t, tests_model_path(models, "spm/tinystories-bpe-1k.model"), 0);
    const char text[] = "\xFF\xFF\xFF\xFF"; /* 4 bytes -> 4 x U+FFFD -> byte pieces */
    int ids[4 + 3], n, *all;
    ck_assert_int_eq(tokenizer_encode(&t, text, 4, 1, 1, ids, &n, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "tokenizer_encode_alloc"));
    ck_assert_int_eq(tokenizer_encode_alloc(&t, text, 4, 1, 1, &all, &n, &err), 0);
    ck_assert_int_gt(n, 7);
    free(all);
    ck_assert_int_eq(tokenizer_encode(&t, "", 0, 1, 1, ids, &n, &err), 0);
    ck_assert_int_eq(n, 2);
    tokenizer_free(&t);
}
END_TEST

static char *tokenize_to_string(const Tokenizer *t, const char *text, size_t len, int pieces,
                                int use_stream) {
    char *out = NULL;
    size_t n;
    FILE *f = open_memstream(&out, &n);
    PosencError err;
    if (use_stream) {
        FILE *in = fmemopen((void *)text, len, "r");
        ck_assert_int_eq(tokenize_stream(t, in, f, pieces, &err), 0);
        fclose(in);
    } else {
        ck_assert_int_eq(tokenize_text(t, text, len, f, pieces, &err), 0);
    }
    fclose(f);
    return out;
}

START_TEST(tokenize_lines) {
    if (!models) return;
    Tokenizer t;
    tests_load_tokenizer(&t, tests_model_path(models, "llama2-tokenizer/tokenizer.model"), 0);
    char *s = tokenize_to_string(&t, "Hello world\n\nhi", 15, 0, 0);
    ck_assert_str_eq(s, "15043 3186\n\n7251\n");
    free(s);
    s = tokenize_to_string(&t, "Hello world\n\nhi\n", 16, 1, 1);
    ck_assert_str_eq(s, "\xE2\x96\x81Hello \xE2\x96\x81world\n\n\xE2\x96\x81hi\n");
    free(s);
    s = tokenize_to_string(&t, "", 0, 0, 0); /* -i "" is one empty line */
    ck_assert_str_eq(s, "\n");
    free(s);
    s = tokenize_to_string(&t, "a\r\n", 3, 0, 1); /* '\r' is text, as for spm_encode */
    ck_assert_str_eq(s, "263 30004\n");
    free(s);
    tokenizer_free(&t);
}
END_TEST

/* llama2.c's rules: dummy space, byte pieces id = byte + 3, the leading
 * space dropped after BOS only. */
START_TEST(llama2c_bin) {
    if (!models) return;
    Tokenizer t;
    PosencError err;
    tests_load_tokenizer(&t, tests_model_path(models, "llama2-tokenizer/tokenizer.bin"), 32000);
    ck_assert_int_eq(t.kind, TOKENIZER_LLAMA2C);
    int ids[32], n;
    ck_assert_int_eq(tokenizer_encode(&t, "Hello world", 11, 1, 0, ids, &n, &err), 0);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(ids[0], 1);
    ck_assert_int_eq(ids[1], 15043);
    size_t len;
    ck_assert_str_eq(tokenizer_decode(&t, 1, 15043, &len), "Hello");
    ck_assert_str_eq(tokenizer_decode(&t, 3186, 15043, &len), " Hello");
    ck_assert_int_eq(tokenizer_encode(&t, "\x01", 1, 0, 0, ids, &n, &err), 0);
    ck_assert_int_eq(ids[n - 1], 1 + 3);
    const char *p = tokenizer_decode(&t, 29871, 4, &len);
    ck_assert_int_eq(len, 1);
    ck_assert_int_eq(p[0], 1);
    tokenizer_free(&t);
}
END_TEST

/* The format comes from the path, else from the first byte. */
START_TEST(format_detection) {
    if (!models) return;
    static const struct { const char *rel; TokenizerKind kind; int vocab; } cases[] = {
        {"llama2-tokenizer/tokenizer.model", TOKENIZER_SPM_BPE, 32000},
        {"spm/tinystories-unigram-1k.model", TOKENIZER_SPM_UNIGRAM, 1000},
        {"stories260K/tok512.bin", TOKENIZER_LLAMA2C, 512},
        {"gpt2-tokenizer", TOKENIZER_GPT2, 50257},
        {"gpt2-tokenizer/vocab.json", TOKENIZER_GPT2, 50257},
        {"zoo/rope/vocab.json", TOKENIZER_GPT2, 65},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        Tokenizer t;
        const char *path = tests_model_path(models, cases[i].rel);
        tests_load_tokenizer(&t, path, cases[i].vocab);
        ck_assert_int_eq(t.kind, cases[i].kind);
        tokenizer_free(&t);
        if (i >= 3) continue;
        size_t n; /* the same bytes under a name that says nothing */
        char *data = tests_read_file(path, &n);
        const char *anon = tests_write_temp(data, n, ".tok");
        tests_load_tokenizer(&t, anon, cases[i].vocab);
        ck_assert_int_eq(t.kind, cases[i].kind);
        tokenizer_free(&t);
        free(data);
    }
    Tokenizer t;
    PosencError err;
    tests_load_tokenizer(&t, tests_model_path(models, "gpt2-tokenizer"), 0);
    ck_assert_int_eq(t.bos_id, 50256);
    tokenizer_free(&t);
    const char *zoo = tests_model_path(models, "zoo/rope");
    tests_load_tokenizer(&t, zoo, 0);
    ck_assert_int_eq(t.bos_id, -1);
    int *ids, n;
    ck_assert_int_eq(tokenizer_encode_alloc(&t, "caf\xC3\xA9", 5, 0, 0, &ids, &n, &err), -1);
    char want[1100]; /* the error names the vocabulary's file */
    snprintf(want, sizeof want, "%s: byte 0xC3 has no token in the vocabulary", zoo);
    ck_assert_str_eq(err.msg, want);
    tokenizer_free(&t);
    ck_assert_int_eq(tokenizer_load(&t, tests_model_path(models, "spm/tinystories-bpe-1k.model"),
                                    512, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "1000 pieces but the model's vocabulary is 512"));
}
END_TEST

/* Loads `path`: either a clean one-line error that names it, or a
 * tokenizer that encodes arbitrary bytes. */
static int load_or_clean_error(const char *path) {
    Tokenizer t;
    PosencError err;
    if (tokenizer_load(&t, path, 0, &err) != 0) {
        tests_expect_file_error(err.msg, path, NULL);
        return -1;
    }
    int *ids, n;
    const char text[] = "Hello w\xC3\xB6rld \xFF\xE2\x82 12 \xF0\x9F\x98\x80";
    if (tokenizer_encode_alloc(&t, text, sizeof text - 1, 1, 1, &ids, &n, &err) == 0) free(ids);
    tokenizer_free(&t);
    return 0;
}

static void expect_error(const void *data, size_t n, const char *suffix, const char *msg) {
    const char *path = tests_write_temp(data, n, suffix);
    Tokenizer t;
    PosencError err;
    ck_assert_msg(tokenizer_load(&t, path, 0, &err) == -1, "%s loaded", msg);
    tests_expect_file_error(err.msg, path, msg);
}

/* Truncations and byte flips of real files: never a crash. */
START_TEST(corrupt_real_files) {
    if (!models) return;
    static const char *files[][2] = {{"spm/tinystories-unigram-1k.model", ".model"},
                                     {"stories260K/tok512.bin", ".bin"}};
    for (size_t f = 0; f < 2; f++) {
        size_t n;
        char *data = tests_read_file(tests_model_path(models, files[f][0]), &n);
        int errors = 0;
        for (size_t cut = 1; cut < n; cut += n / 97 + 1) {
            const char *p = tests_write_temp(data, cut, files[f][1]);
            errors += load_or_clean_error(p) != 0;
            unlink(p);
        }
        ck_assert_int_gt(errors, 0);
        uint32_t seed = 7;
        for (int round = 0; round < 60; round++) {
            char *copy = malloc(n);
            memcpy(copy, data, n);
            for (int k = 0; k < 4; k++) {
                seed = seed * 1664525u + 1013904223u;
                copy[(seed >> 8) % n] ^= (char)(1 + (seed & 0x7F));
            }
            const char *p = tests_write_temp(copy, n, files[f][1]);
            load_or_clean_error(p);
            unlink(p);
            free(copy);
        }
        free(data);
    }
}
END_TEST

START_TEST(malformed_model_protos) {
    expect_error("", 0, ".model", "empty");
    /* field 1, length 5, but 2 bytes follow */
    expect_error("\x0A\x05\x0A\x01", 4, ".model", "runs past its end");
    expect_error("\x0A\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x01", 12, ".model",
                 "varint longer than 10 bytes");
    expect_error("\x4B\x00", 2, ".model", "unsupported wire type"); /* field 9, group */
    expect_error("\x08\x01", 2, ".model", "wrong wire type"); /* pieces as a varint */
    /* a piece whose type is 9 */
    expect_error("\x0A\x05\x0A\x01x\x18\x09", 7, ".model", "unknown type 9");
    /* one normal piece and no <unk> */
    expect_error("\x0A\x03\x0A\x01x", 5, ".model", "no unknown piece");
    /* trainer_spec.model_type = WORD */
    expect_error("\x0A\x05\x0A\x01x\x18\x02\x12\x02\x18\x03", 11, ".model", "WORD is not supported");
    expect_error("\x0A\x05\x0A\x01x\x18\x02\x12\x02\x18\x07", 11, ".model", "model type 7");
    /* normalizer_spec with a 3-byte charsmap */
    expect_error("\x0A\x05\x0A\x01x\x18\x02\x1A\x05\x12\x03" "abc", 14, ".model",
                 "precompiled_charsmap");
    /* the smallest valid model: <unk> and one piece (unigram by default) */
    const char *ok = tests_write_temp("\x0A\x07\x0A\x03<u>\x18\x02\x0A\x03\x0A\x01x", 14, ".model");
    Tokenizer t;
    tests_load_tokenizer(&t, ok, 0);
    encode_ok(&t, "x y", (int[]){0, 1, 0}, 3); /* ▁ and ▁y are unknown */
    tokenizer_free(&t);
}
END_TEST

START_TEST(malformed_llama2c_bin) {
    int32_t header_only = 16;
    expect_error(&header_only, 4, ".bin", "no pieces");
    expect_error("\x10\x00", 2, ".bin", "truncated tokenizer file");
    int32_t huge[3] = {16, 0, 1 << 30};
    expect_error(huge, sizeof huge, ".bin", "invalid length");
    int32_t past[4] = {16, 0, 9, 0x41414141};
    expect_error(past, sizeof past, ".bin", "runs past the end");
}
END_TEST

/* Writes vocab.json and merges.txt into a fresh directory. */
static const char *gpt2_dir(const char *vocab, const char *merges) {
    const char *dir = tests_temp_dir();
    char path[128];
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    tests_write_file(path, vocab, strlen(vocab));
    if (merges) {
        snprintf(path, sizeof path, "%s/merges.txt", dir);
        tests_write_file(path, merges, strlen(merges));
    }
    return dir;
}

static void gpt2_error(const char *vocab, const char *merges, const char *msg) {
    const char *dir = gpt2_dir(vocab, merges);
    Tokenizer t;
    PosencError err;
    ck_assert_msg(tokenizer_load(&t, dir, 0, &err) == -1, "loaded: %s", vocab);
    ck_assert_msg(strstr(err.msg, dir) && strstr(err.msg, msg), "want '%s', got '%s'", msg, err.msg);
}

START_TEST(malformed_gpt2_files) {
    gpt2_error("{}", "", "the vocabulary is empty");
    gpt2_error("{\"a\": 0", "", "expected ',' or '}'");
    gpt2_error("[1]", "", "expected '{'");
    gpt2_error("{\"a\": 0} x", "", "trailing data");
    gpt2_error("{\"a\": -1}", "", "non-negative integer");
    gpt2_error("{\"a\": 99999999999}", "", "id too large");
    gpt2_error("{\"a\": 0, \"b\": 2}", "", "ids must be 0..N-1");
    gpt2_error("{\"a\": 0, \"b\": 0}", "", "id 0 is given to both");
    gpt2_error("{\"a\": 0, \"a\": 1}", "", "repeats piece 0");
    gpt2_error("{\"\\q\": 0}", "", "bad escape");
    gpt2_error("{\"\\ud800x\": 0}", "", "lone high surrogate");
    gpt2_error("{\"\\udc00\": 0}", "", "lone low surrogate");
    gpt2_error("{\"a\x01\": 0}", "", "control character");
    gpt2_error("{\"a\": 0, \"b\": 1}", "#version: 0.2\na c\n", "merge 1 'a c'");
    gpt2_error("{\"a\": 0, \"b\": 1}", "a b\n", "the merged token is not in the vocabulary");
    gpt2_error("{\"a\": 0}", NULL, "merges.txt: cannot open");
    /* escapes decode; CRLF lines and a #version header are fine */
    const char *dir = gpt2_dir("{\"a\": 0, \"\\u0062\": 1, \"ab\": 2, \"\\ud83d\\ude00\": 3}",
                               "#version: 0.2\r\na b\r\n\r\n");
    Tokenizer t;
    tests_load_tokenizer(&t, dir, 0);
    encode_ok(&t, "abab", (int[]){2, 2}, 2);
    ck_assert_int_eq(tokenizer_lookup(&t, "\xF0\x9F\x98\x80", 4), 3);
    tokenizer_free(&t);
}
END_TEST

/* A tokenizer.json (and, unless NULL, a tokenizer_config.json) in a fresh
 * directory, from its parts. */
static const char *hf_dir(const char *added, const char *normalizer, const char *pre,
                          const char *model, const char *config) {
    const char *dir = tests_temp_dir();
    char path[128], doc[2048];
    snprintf(doc, sizeof doc, "{\"added_tokens\": %s, \"normalizer\": %s, \"pre_tokenizer\": %s, "
             "\"decoder\": {\"type\": \"ByteLevel\"}, \"model\": %s}", added, normalizer, pre, model);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    tests_write_file(path, doc, strlen(doc));
    if (config) {
        snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
        tests_write_file(path, config, strlen(config));
    }
    return dir;
}

#define HF_ADDED "[{\"id\": 4, \"content\": \"<x>\", \"special\": true}, {\"id\": 5, \"content\": \"<u>\"}]"
#define HF_BYTELEVEL "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true}"
#define HF_MODEL "{\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"\\u0120\": 3}, " \
                 "\"merges\": [\"a b\"]}"

/* The tokenizer.json in dir is refused with one line naming it and saying msg. */
static void dir_error(const char *dir, const char *msg) {
    Tokenizer t;
    PosencError err;
    ck_assert_msg(tokenizer_load(&t, dir, 0, &err) == -1, "loaded, wanted '%s'", msg);
    ck_assert_msg(strstr(err.msg, dir) && strstr(err.msg, msg) && !strchr(err.msg, '\n'),
                  "want '%s', got '%s'", msg, err.msg);
}

static void hf_error(const char *added, const char *normalizer, const char *pre, const char *model,
                     const char *config, const char *msg) {
    dir_error(hf_dir(added, normalizer, pre, model, config), msg);
}

START_TEST(tokenizer_json_files) {
    /* control: a tiny valid file; added tokens, merges, --special, BOS/EOS from the config */
    const char *dir = hf_dir(HF_ADDED, "null", HF_BYTELEVEL, HF_MODEL,
                             "{\"bos_token\": \"<x>\", \"eos_token\": {\"content\": \"<x>\"}}");
    Tokenizer t;
    tests_load_tokenizer(&t, dir, 0);
    ck_assert_int_eq(t.vocab_size, 6);
    ck_assert(t.bos_id == 4 && t.eos_id == 4 && tokenizer_is_eog(&t, 4) && !tokenizer_is_eog(&t, 5));
    encode_ok(&t, "ab ab", (int[]){2, 3, 2}, 3);
    encode_ok(&t, "a<u>b", (int[]){0, 5, 1}, 3);  /* user-defined: always */
    int *ids, n;
    PosencError err;
    ck_assert_int_eq(tokenizer_encode_alloc(&t, "a<x>", 4, 0, 0, &ids, &n, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "'<' (byte 0x3C) has no token")); /* special: text */
    ck_assert_int_eq(tokenizer_set_parse_special(&t, 1), 0);
    encode_ok(&t, "a<x>", (int[]){0, 4}, 2);
    tokenizer_free(&t);
    /* merges as pairs; a Sequence with the Llama 3 pattern loads too */
    dir = hf_dir("[]", "{\"type\": \"Sequence\", \"normalizers\": []}",
                 "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
                 "{\"Regex\": \"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|"
                 "\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|"
                 "\\\\s+\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", "
                 "\"add_prefix_space\": false, \"use_regex\": false}]}",
                 "{\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [[\"a\", \"b\"]]}",
                 NULL);
    tests_load_tokenizer(&t, dir, 0);
    ck_assert_int_eq(t.pretok, PRETOK_LLAMA3);
    encode_ok(&t, "abab", (int[]){2, 2}, 2);
    tokenizer_free(&t);
    /* what posenc does not implement, and broken files: one line naming the file */
    hf_error(HF_ADDED, "null", HF_BYTELEVEL, "{\"type\": \"WordPiece\", \"vocab\": {}}", NULL,
             "model type 'WordPiece' is not supported (BPE and Unigram only)");
    hf_error(HF_ADDED, "{\"type\": \"NFD\"}", HF_BYTELEVEL, HF_MODEL, NULL, "normalizer 'NFD'");
    hf_error(HF_ADDED, "null", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
             "\"pattern\": {\"Regex\": \"\\\\d+\"}, \"behavior\": \"Isolated\", \"invert\": false}, "
             "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]}",
             HF_MODEL, NULL, "pattern '\\\\d+' is not one posenc implements");
    /* StarCoder's spelling: Digits (every digit alone), then GPT-2's ByteLevel */
    dir = hf_dir("[]", "null", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", "
                 "\"individual_digits\": true}, " HF_BYTELEVEL "]}", HF_MODEL, NULL);
    tests_load_tokenizer(&t, dir, 0);
    ck_assert_int_eq(t.pretok, PRETOK_STARCODER);
    tokenizer_free(&t);
    hf_error(HF_ADDED, "null", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", "
             "\"individual_digits\": false}, " HF_BYTELEVEL "]}", HF_MODEL, NULL, "pre_tokenizer");
    hf_error(HF_ADDED, "null", "{\"type\": \"Whitespace\"}", HF_MODEL, NULL, "pre_tokenizer");
    hf_error(HF_ADDED, "null", HF_BYTELEVEL, "{\"type\": \"BPE\", \"byte_fallback\": true, "
             "\"vocab\": {}, \"merges\": []}", NULL, "byte_fallback");
    hf_error("[]", "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\\u2581\"}",
             "null", "{\"type\": \"BPE\", \"byte_fallback\": true, \"vocab\": {}, \"merges\": []}", NULL,
             "the decoder must be Replace");
    hf_error("[{\"id\": 4, \"content\": \"<x>\", \"single_word\": true}]", "null", HF_BYTELEVEL,
             HF_MODEL, NULL, "added token '<x>': single_word is not supported");
    hf_error("[{\"id\": 4, \"content\": \"<x>\", \"lstrip\": 1}]", "null", HF_BYTELEVEL, HF_MODEL,
             NULL, "\"lstrip\" is not a boolean");
    hf_error("[{\"id\": 7, \"content\": \"<x>\"}]", "null", HF_BYTELEVEL, HF_MODEL, NULL, "no token has id 4");
    hf_error("[{\"id\": 0, \"content\": \"<x>\"}]", "null", HF_BYTELEVEL, HF_MODEL, NULL,
             "id 0 is 'a' in the model and added token '<x>'");
    hf_error("[{\"id\": 4, \"content\": \"<x>\", \"special\": 1}]", "null", HF_BYTELEVEL, HF_MODEL,
             NULL, "\"special\" is not a boolean");
    hf_error("[{\"id\": 4, \"content\": \"<x>\"}]", "{\"type\": \"NFC\"}", HF_BYTELEVEL, HF_MODEL,
             NULL, "matched after the normalizer");
    hf_error("[]", "null", HF_BYTELEVEL, "{\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [7]}",
             NULL, "merge 1 is neither");
    hf_error("[]", "null", HF_BYTELEVEL, "{\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a c\"]}",
             NULL, "its right token is not in the vocabulary");
    hf_error("[]", "null", HF_BYTELEVEL, HF_MODEL, "{\"bos_token\": ", "tokenizer_config.json: invalid JSON");
    hf_error("[", "null", HF_BYTELEVEL, HF_MODEL, NULL, "invalid JSON at byte");
}
END_TEST

/* A Unigram tokenizer.json in a fresh directory: the pipeline of a
 * SentencePiece conversion, its parts replaceable. */
#define UNI_NORM "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Strip\", \"strip_left\": false, " \
                 "\"strip_right\": true}, {\"type\": \"Replace\", \"pattern\": {\"Regex\": \" {2,}\"}, " \
                 "\"content\": \"\\u2581\"}]}"
#define UNI_META(scheme, split) "{\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", " \
                                "\"prepend_scheme\": \"" scheme "\", \"split\": " split "}"
/* <unk> ▁a a b ▁ ab ▁a▁b, then the added <x> */
#define UNI_VOCAB "[[\"<unk>\", 0], [\"\\u2581a\", -1], [\"a\", -2], [\"b\", -3], [\"\\u2581\", -4], " \
                  "[\"ab\", -1.5], [\"\\u2581a\\u2581b\", -0.5]]"
#define UNI_MODEL "{\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": " UNI_VOCAB "}"
#define UNI_ADDED "[{\"id\": 7, \"content\": \"<x>\", \"special\": false, \"normalized\": false}]"

static const char *unigram_dir(const char *normalizer, const char *pre, const char *decoder,
                               const char *model) {
    const char *dir = tests_temp_dir();
    char path[128], doc[4096];
    snprintf(doc, sizeof doc, "{\"added_tokens\": " UNI_ADDED ", \"normalizer\": %s, "
             "\"pre_tokenizer\": %s, \"decoder\": %s, \"model\": %s}", normalizer, pre, decoder, model);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    tests_write_file(path, doc, strlen(doc));
    return dir;
}

/* Loads the file of those parts and encodes text to want[0..n). */
static void unigram_ok(const char *normalizer, const char *scheme_split, const char *text,
                       const int *want, int n) {
    const char *dir = unigram_dir(normalizer, scheme_split, scheme_split, UNI_MODEL);
    Tokenizer t;
    tests_load_tokenizer(&t, dir, 0);
    ck_assert_int_eq(t.kind, TOKENIZER_HF_UNIGRAM);
    encode_ok(&t, text, want, n);
    tokenizer_free(&t);
}

static void unigram_error(const char *normalizer, const char *pre, const char *decoder,
                          const char *model, const char *msg) {
    dir_error(unigram_dir(normalizer, pre, decoder, model), msg);
}

/* Hugging Face's Unigram pipeline by hand (the parity suite checks it on
 * real text): each setting changes the ids as the library's would, so
 * each case is also the control of the others. */
START_TEST(tokenizer_json_unigram) {
    const char *always = UNI_META("always", "true");
    /* Viterbi: ▁a+b (-4) beats ▁+ab (-5.5); split keeps ▁a▁b (-0.5) out */
    unigram_ok(UNI_NORM, always, "ab", (int[]){1, 3}, 2);
    unigram_ok(UNI_NORM, always, "a b", (int[]){1, 4, 3}, 3);
    unigram_ok(UNI_NORM, UNI_META("always", "false"), "a b", (int[]){6}, 1);
    /* the prefix: before every section, the first only, or never */
    unigram_ok(UNI_NORM, always, "a<x>b", (int[]){1, 7, 4, 3}, 4);
    unigram_ok(UNI_NORM, UNI_META("first", "true"), "a<x>b", (int[]){1, 7, 3}, 3);
    unigram_ok(UNI_NORM, UNI_META("never", "true"), "a<x>b", (int[]){2, 7, 3}, 3);
    unigram_ok(UNI_NORM, UNI_META("first", "true"), "<x>b", (int[]){7, 3}, 2);
    /* older files: add_prefix_space instead of prepend_scheme */
    const char *old = "{\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", \"add_prefix_space\": false}";
    unigram_ok(UNI_NORM, old, "a", (int[]){2}, 1);
    /* Strip right, then runs of spaces as one U+2581; without them, each space is one */
    unigram_ok(UNI_NORM, always, "a   b  ", (int[]){1, 4, 3}, 3);
    unigram_ok("null", always, "a   b  ", (int[]){1, 4, 4, 4, 3, 4, 4}, 7);
    unigram_ok("{\"type\": \"Replace\", \"pattern\": {\"Regex\": \" {2,}\"}, \"content\": \" \"}", always,
               "  a", (int[]){1}, 1);
    /* unknown characters: one <unk> per run */
    unigram_ok(UNI_NORM, always, "acc b", (int[]){1, 0, 4, 3}, 4);
    /* the decoder: U+2581 as spaces, the first one dropped (not under "never") */
    const char *dir = unigram_dir(UNI_NORM, always, always, UNI_MODEL);
    Tokenizer t;
    tests_load_tokenizer(&t, dir, 0);
    size_t len;
    char *text = tokenizer_decode_text(&t, (int[]){1, 7, 4, 3, 0}, 5, &len);
    ck_assert_str_eq(text, "a<x> b<unk>");
    free(text);
    tokenizer_free(&t);
    /* <unk> as a special added token too (T5's files): under --special it splits the text */
    dir = tests_temp_dir();
    char path[128], doc[2048];
    snprintf(doc, sizeof doc, "{\"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true, "
             "\"normalized\": false}], \"normalizer\": " UNI_NORM ", \"pre_tokenizer\": %s, \"decoder\": %s, "
             "\"model\": " UNI_MODEL "}", always, always);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    tests_write_file(path, doc, strlen(doc));
    tests_load_tokenizer(&t, dir, 0);
    encode_ok(&t, "a<unk>b", (int[]){1, 0, 3}, 3); /* text: the lattice's <unk> piece */
    ck_assert_int_eq(tokenizer_set_parse_special(&t, 1), 0);
    encode_ok(&t, "a<unk>b", (int[]){1, 0, 4, 3}, 4);
    tokenizer_free(&t);
    /* refusals: one line naming the file */
    const char *norm = UNI_NORM;
    unigram_error(norm, always, always, "{\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"a\"]]}",
                  "Unigram vocab entry 0 is not [piece, finite score]");
    unigram_error(norm, always, always, "{\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"a\", \"x\"]]}",
                  "Unigram vocab entry 0 is not");
    unigram_error(norm, always, always, "{\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"a\", 1], 2]}",
                  "Unigram vocab entry 1 is not");
    unigram_error(norm, always, always, "{\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": {\"a\": 0}}",
                  "the Unigram vocab is not a non-empty array");
    unigram_error(norm, always, always, "{\"type\": \"Unigram\", \"unk_id\": 7, \"vocab\": " UNI_VOCAB "}",
                  "unk_id is missing or not an id of the vocab (0..6)");
    unigram_error(norm, always, always, "{\"type\": \"Unigram\", \"vocab\": " UNI_VOCAB "}",
                  "unk_id is missing");
    unigram_error(norm, always, always, "{\"type\": \"Unigram\", \"unk_id\": 0.5, \"vocab\": " UNI_VOCAB "}",
                  "unk_id is missing");
    unigram_error("{\"type\": \"Precompiled\", \"precompiled_charsmap\": \"@@@@\"}", always, always,
                  UNI_MODEL, "precompiled_charsmap is not base64");
    unigram_error("{\"type\": \"Precompiled\", \"precompiled_charsmap\": \"AAA\"}", always, always,
                  UNI_MODEL, "precompiled_charsmap is not base64");
    unigram_error("{\"type\": \"Precompiled\", \"precompiled_charsmap\": \"A===\"}", always, always,
                  UNI_MODEL, "precompiled_charsmap is not base64");
    /* a trie size of 16 bytes in a blob of 8 */
    unigram_error("{\"type\": \"Precompiled\", \"precompiled_charsmap\": \"EAAAAAAAAAA=\"}", always,
                  always, UNI_MODEL, "precompiled_charsmap) are broken");
    unigram_error("{\"type\": \"Lowercase\"}", always, always, UNI_MODEL,
                  "Unigram normalizer step 'Lowercase' is not supported");
    unigram_error("{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Replace\", \"pattern\": "
                  "{\"Regex\": \" {2,}\"}, \"content\": \" \"}, {\"type\": \"Strip\", \"strip_left\": "
                  "false, \"strip_right\": true}]}", always, always, UNI_MODEL,
                  "step 'Strip' is not supported");
    unigram_error(norm, "{\"type\": \"Metaspace\", \"replacement\": \"_\"}", always, UNI_MODEL,
                  "Unigram pre_tokenizer must be Metaspace with replacement U+2581");
    unigram_error(norm, UNI_META("sometimes", "true"), always, UNI_MODEL,
                  "prepend_scheme is not always, first or never");
    unigram_error(norm, always, UNI_META("never", "true"), UNI_MODEL,
                  "the Metaspace decoder's prepend_scheme differs");
    unigram_error(norm, always, "{\"type\": \"ByteLevel\"}", UNI_MODEL, "Unigram decoder must be Metaspace");
    /* tools/convert.py: what a SentencePiece (t5) vocabulary cannot say */
    if (!tests_python_available("convert.py Unigram refusals")) return;
    const char *first = UNI_META("first", "true");
    dir = unigram_dir(norm, first, first, UNI_MODEL);
    tests_expect_convert_error((const char *[]){dir, "/tmp/posenc-never-written.gguf", "--vocab-only", NULL},
                               "SentencePiece has no \"first\"");
    dir = unigram_dir("{\"type\": \"Strip\", \"strip_left\": false, \"strip_right\": true}", always,
                      always, UNI_MODEL);
    tests_expect_convert_error((const char *[]){dir, "/tmp/posenc-never-written.gguf", "--vocab-only", NULL},
                               "has no SentencePiece equivalent");
}
END_TEST

START_TEST(missing_files) {
    Tokenizer t;
    PosencError err;
    ck_assert_int_eq(tokenizer_load(&t, "/nonexistent/tok.model", 0, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent/tok.model"));
    ck_assert_int_eq(tokenizer_load(&t, "/tmp", 0, &err), -1); /* a directory without vocab.json */
    ck_assert_ptr_nonnull(strstr(err.msg, "/tmp/vocab.json"));
}
END_TEST

int main(void) {
    models = tests_models_dir("tokenizer tests on the shared tokenizers");
    Suite *s = suite_create("tokenizer");
    TCase *tc = tcase_create("units");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, build_from_arrays);
    tcase_add_test(tc, build_rejects_inconsistent_vocabularies);
    tcase_add_test(tc, garbage_charsmap_is_bounded);
    tcase_add_test(tc, gpt2_from_arrays);
    tcase_add_test(tc, harmony_end_is_not_eog);
    tcase_add_test(tc, caller_buffer_bound);
    tcase_add_test(tc, tokenize_lines);
    tcase_add_test(tc, llama2c_bin);
    tcase_add_test(tc, format_detection);
    suite_add_tcase(s, tc);
    TCase *bad = tcase_create("bad_input");
    tcase_set_timeout(bad, 300);
    tcase_add_test(bad, corrupt_real_files);
    tcase_add_test(bad, malformed_model_protos);
    tcase_add_test(bad, malformed_llama2c_bin);
    tcase_add_test(bad, malformed_gpt2_files);
    tcase_add_test(bad, missing_files);
    tcase_add_test(bad, tokenizer_json_files);
    tcase_add_test(bad, tokenizer_json_unigram);
    suite_add_tcase(s, bad);
    return tests_run_suite(s);
}
