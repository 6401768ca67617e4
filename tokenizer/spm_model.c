/* Reads a SentencePiece .model: the ModelProto protobuf, with a small
 * wire-format reader (varints, fixed32, length-delimited fields; unknown
 * fields skipped, repeated sub-messages merged as protobuf does).
 *
 *   ModelProto      1 pieces (repeated SentencePiece)  2 trainer_spec
 *                   3 normalizer_spec  (4 self-test data, 5 denormalizer: unused)
 *   SentencePiece   1 piece  2 score (float)  3 type
 *   TrainerSpec     3 model_type  24 treat_whitespace_as_suffix  35 byte_fallback
 *                   44 unk_surface  46 bos_piece  47 eos_piece
 *   NormalizerSpec  2 precompiled_charsmap  3 add_dummy_prefix
 *                   4 remove_extra_whitespaces  5 escape_whitespaces */
#include "tokenizer/tokenizer_impl.h"

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5 };
enum { MODEL_UNIGRAM = 1, MODEL_BPE = 2, MODEL_WORD = 3, MODEL_CHAR = 4 };

typedef struct {
    const uint8_t *p, *end, *base; /* base: start of the file, for offsets */
} Pb;

typedef struct {
    const uint8_t *p;
    size_t n;
} PbBytes;

typedef struct {
    PbBytes text;
    float score;
    uint8_t type;
} SpmPiece;

/* What the reader keeps of a ModelProto; pointers into the mapped file. */
typedef struct {
    SpmPiece *pieces; /* (n) */
    size_t n, cap;
    uint64_t model_type;
    int byte_fallback, treat_whitespace_as_suffix;
    int has_unk_surface;
    PbBytes unk_surface, bos_piece, eos_piece, charsmap;
    int add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
} SpmProto;

static int pb_fail(Pb *r, PosencError *err, const char *what) {
    return posenc_error(err, "corrupt SentencePiece model: %s at byte %zu", what,
                        (size_t)(r->p - r->base));
}

static int pb_varint(Pb *r, uint64_t *v, PosencError *err) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) return pb_fail(r, err, "truncated varint");
        uint8_t b = *r->p++;
        *v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) return 0;
    }
    return pb_fail(r, err, "varint longer than 10 bytes");
}

/* Reads a field key; *wire is checked against what the field needs by the caller. */
static int pb_key(Pb *r, uint32_t *field, int *wire, PosencError *err) {
    uint64_t key;
    if (pb_varint(r, &key, err)) return -1;
    *field = (uint32_t)(key >> 3);
    *wire = (int)(key & 7);
    if (*field == 0 || key >> 32) return pb_fail(r, err, "invalid field number");
    return 0;
}

static int pb_bytes(Pb *r, PbBytes *out, PosencError *err) {
    uint64_t n;
    if (pb_varint(r, &n, err)) return -1;
    if (n > (uint64_t)(r->end - r->p)) return pb_fail(r, err, "field runs past its end");
    out->p = r->p;
    out->n = (size_t)n;
    r->p += n;
    return 0;
}

static int pb_skip(Pb *r, int wire, PosencError *err) {
    uint64_t v;
    PbBytes b;
    size_t n = wire == WIRE_FIXED64 ? 8 : 4;
    switch (wire) {
    case WIRE_VARINT: return pb_varint(r, &v, err);
    case WIRE_LEN: return pb_bytes(r, &b, err);
    case WIRE_FIXED64:
    case WIRE_FIXED32:
        if ((size_t)(r->end - r->p) < n) return pb_fail(r, err, "truncated fixed-size field");
        r->p += n;
        return 0;
    default: return pb_fail(r, err, "unsupported wire type");
    }
}

static int pb_expect(Pb *r, int wire, int want, PosencError *err) {
    return wire == want ? 0 : pb_fail(r, err, "field has the wrong wire type");
}

/* A varint field as a bool or enum. */
static int pb_uint(Pb *r, int wire, uint64_t *v, PosencError *err) {
    return pb_expect(r, wire, WIRE_VARINT, err) ? -1 : pb_varint(r, v, err);
}

static int pb_string(Pb *r, int wire, PbBytes *v, PosencError *err) {
    return pb_expect(r, wire, WIRE_LEN, err) ? -1 : pb_bytes(r, v, err);
}

/* Opens a length-delimited sub-message as its own reader. */
static int pb_message(Pb *r, int wire, Pb *sub, PosencError *err) {
    PbBytes b = {NULL, 0};
    if (pb_string(r, wire, &b, err)) return -1;
    *sub = (Pb){b.p, b.p + b.n, r->base};
    return 0;
}

static int read_piece(Pb *r, SpmProto *m, PosencError *err) {
    if (m->n == m->cap) buf_reserve((void **)&m->pieces, &m->cap, m->n, 1, sizeof *m->pieces);
    size_t i = m->n++;
    SpmPiece *sp = &m->pieces[i];
    *sp = (SpmPiece){{NULL, 0}, 0, TOKEN_NORMAL};
    while (r->p < r->end) {
        uint32_t field;
        int wire;
        uint64_t v;
        if (pb_key(r, &field, &wire, err)) return -1;
        if (field == 1) {
            if (pb_string(r, wire, &sp->text, err)) return -1;
        } else if (field == 2) {
            if (pb_expect(r, wire, WIRE_FIXED32, err)) return -1;
            if (r->end - r->p < 4) return pb_fail(r, err, "truncated score");
            memcpy(&sp->score, r->p, 4); /* little-endian IEEE, as x86/ARM hold it */
            r->p += 4;
        } else if (field == 3) {
            if (pb_uint(r, wire, &v, err)) return -1;
            if (v < TOKEN_NORMAL || v > TOKEN_BYTE)
                return posenc_error(err, "piece %zu has unknown type %llu", i,
                                    (unsigned long long)v);
            sp->type = (uint8_t)v;
        } else if (pb_skip(r, wire, err)) {
            return -1;
        }
    }
    return 0;
}

static int read_trainer_spec(Pb *r, SpmProto *m, PosencError *err) {
    while (r->p < r->end) {
        uint32_t field;
        int wire;
        uint64_t v;
        int rc;
        if (pb_key(r, &field, &wire, err)) return -1;
        switch (field) {
        case 3: rc = pb_uint(r, wire, &m->model_type, err); break;
        case 24: rc = pb_uint(r, wire, &v, err); m->treat_whitespace_as_suffix = v != 0; break;
        case 35: rc = pb_uint(r, wire, &v, err); m->byte_fallback = v != 0; break;
        case 44: rc = pb_string(r, wire, &m->unk_surface, err); m->has_unk_surface = 1; break;
        case 46: rc = pb_string(r, wire, &m->bos_piece, err); break;
        case 47: rc = pb_string(r, wire, &m->eos_piece, err); break;
        default: rc = pb_skip(r, wire, err);
        }
        if (rc) return -1;
    }
    return 0;
}

static int read_normalizer_spec(Pb *r, SpmProto *m, PosencError *err) {
    while (r->p < r->end) {
        uint32_t field;
        int wire;
        uint64_t v = 0;
        int rc;
        if (pb_key(r, &field, &wire, err)) return -1;
        switch (field) {
        case 2: rc = pb_string(r, wire, &m->charsmap, err); break;
        case 3: rc = pb_uint(r, wire, &v, err); m->add_dummy_prefix = v != 0; break;
        case 4: rc = pb_uint(r, wire, &v, err); m->remove_extra_whitespaces = v != 0; break;
        case 5: rc = pb_uint(r, wire, &v, err); m->escape_whitespaces = v != 0; break;
        default: rc = pb_skip(r, wire, err);
        }
        if (rc) return -1;
    }
    return 0;
}

static int read_model(const uint8_t *data, size_t size, SpmProto *m, PosencError *err) {
    Pb r = {data, data + size, data};
    while (r.p < r.end) {
        uint32_t field;
        int wire;
        Pb sub;
        if (pb_key(&r, &field, &wire, err)) return -1;
        if (field >= 1 && field <= 3) {
            if (pb_message(&r, wire, &sub, err)) return -1;
            int rc = field == 1   ? read_piece(&sub, m, err)
                     : field == 2 ? read_trainer_spec(&sub, m, err)
                                  : read_normalizer_spec(&sub, m, err);
            if (rc) return -1;
        } else if (pb_skip(&r, wire, err)) {
            return -1;
        }
    }
    return 0;
}

/* Id of the control piece spelled `name` (library: PieceToId + IsControl). */
static int control_id(const SpmProto *m, PbBytes name) {
    for (size_t i = 0; i < m->n; i++)
        if (m->pieces[i].type == TOKEN_CONTROL && m->pieces[i].text.n == name.n &&
            memcmp(m->pieces[i].text.p, name.p, name.n) == 0)
            return (int)i;
    return -1;
}

static PbBytes or_default(PbBytes b, const char *dflt) {
    return b.n ? b : (PbBytes){(const uint8_t *)dflt, strlen(dflt)};
}

static int build_from_proto(Tokenizer *t, const SpmProto *m, PosencError *err) {
    if (m->model_type == MODEL_WORD || m->model_type == MODEL_CHAR)
        return posenc_error(err, "SentencePiece model type %s is not supported (BPE and "
                                 "unigram are)", m->model_type == MODEL_WORD ? "WORD" : "CHAR");
    if (m->model_type != MODEL_UNIGRAM && m->model_type != MODEL_BPE)
        return posenc_error(err, "unknown SentencePiece model type %llu",
                            (unsigned long long)m->model_type);
    if (m->n > INT32_MAX) return posenc_error(err, "too many pieces");
    size_t n = m->n ? m->n : 1;
    const char **pieces = malloc_or_exit(n * sizeof(char *), "the pieces");
    uint32_t *lens = malloc_or_exit(n * sizeof(uint32_t), "the piece lengths");
    float *scores = malloc_or_exit(n * sizeof(float), "the piece scores");
    uint8_t *types = malloc_or_exit(n, "the piece types");
    for (size_t i = 0; i < m->n; i++) {
        const SpmPiece *sp = &m->pieces[i];
        pieces[i] = (const char *)sp->text.p;
        lens[i] = sp->text.n > UINT32_MAX ? UINT32_MAX : (uint32_t)sp->text.n;
        scores[i] = sp->score;
        types[i] = sp->type;
    }
    char *unk_surface = NULL;
    if (m->has_unk_surface) {
        unk_surface = malloc_or_exit(m->unk_surface.n + 1, "the unknown piece's text");
        memcpy(unk_surface, m->unk_surface.p, m->unk_surface.n);
        unk_surface[m->unk_surface.n] = '\0';
    }
    TokenizerSpec spec = {
        .kind = m->model_type == MODEL_BPE ? TOKENIZER_SPM_BPE : TOKENIZER_SPM_UNIGRAM,
        .n_pieces = (int)m->n,
        .pieces = pieces,
        .piece_lens = lens,
        .scores = scores,
        .types = types,
        .charsmap = m->charsmap.p,
        .charsmap_size = m->charsmap.n,
        .bos_id = control_id(m, or_default(m->bos_piece, "<s>")),
        .eos_id = control_id(m, or_default(m->eos_piece, "</s>")),
        .add_dummy_prefix = m->add_dummy_prefix,
        .remove_extra_whitespaces = m->remove_extra_whitespaces,
        .escape_whitespaces = m->escape_whitespaces,
        .treat_whitespace_as_suffix = m->treat_whitespace_as_suffix,
        .byte_fallback = m->byte_fallback,
        .unk_surface = unk_surface,
    };
    int rc = tokenizer_build(t, &spec, err);
    free(pieces);
    free(lens);
    free(scores);
    free(types);
    free(unk_surface);
    return rc;
}

int spm_read(Tokenizer *t, const char *path, PosencError *err) {
    MappedFile f;
    if (mapped_file_open(&f, path, err)) return -1;
    SpmProto m = {.model_type = MODEL_UNIGRAM, /* the proto defaults */
                  .add_dummy_prefix = 1,
                  .remove_extra_whitespaces = 1,
                  .escape_whitespaces = 1};
    PosencError e;
    int rc = read_model(f.data, f.size, &m, &e);
    if (rc == 0) rc = build_from_proto(t, &m, &e);
    if (rc) posenc_error(err, "%s: %s", path, e.msg);
    free(m.pieces);
    mapped_file_close(&f);
    return rc;
}
