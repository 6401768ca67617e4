/* Packed weights (kernels_impl.h): the layouts, written from base's
 * unpacking (the definition of the file's types), and the portable
 * kernels on the block-quantized ones, the reference for the SIMD ones
 * (packed F32 and F16 are checked against the exact product instead). */
#include <string.h>

#include "model/kernels_impl.h"

size_t pack_group_bytes(TensorType t, int cols) {
    switch (t) {
    case TENSOR_Q4_0: return (size_t)(cols / QK) * sizeof(PackQ4_0);
    case TENSOR_Q8_0: return (size_t)(cols / QK) * sizeof(PackQ8_0);
    case TENSOR_MXFP4: return (size_t)(cols / QK) * sizeof(PackMXFP4);
    case TENSOR_Q4_K: return (size_t)(cols / QK_K) * sizeof(PackQ4_K);
    case TENSOR_Q5_K: return (size_t)(cols / QK_K) * sizeof(PackQ5_K);
    case TENSOR_Q6_K: return (size_t)(cols / QK_K) * sizeof(PackQ6_K);
    case TENSOR_F32: return (size_t)cols * PACK_ROWS * sizeof(float);
    case TENSOR_F16: return (size_t)cols * PACK_ROWS * sizeof(uint16_t);
    default: return 0;
    }
}

/* 32 unsigned quants of row r into vectors qs[0..4): weights 0-15 in the
 * low nibbles, 16-31 in the high ones (only their low 4 bits). */
static void put_nibbles(uint8_t qs[4][64], int r, const uint8_t *u) {
    for (int s = 0; s < 4; s++)
        for (int i = 0; i < 4; i++)
            qs[s][4 * r + i] = (uint8_t)((u[4 * s + i] & 0xF) | (u[16 + 4 * s + i] & 0xF) << 4);
}

/* Row r of a Q4_K or Q5_K super-block (its file block, which starts with
 * d and dmin, and its unpacking sb) into a packed group; Q5_K's fifth bits
 * into qh (NULL for Q4_K). */
static void pack_k4(PackQ4_K *p, uint8_t qh[][64], const uint8_t *block, const QuantSuperBlock *sb, int r) {
    uint8_t u[32];
    memcpy(p->d[r], block, 2);
    memcpy(p->dmin[r], block + 2, 2);
    for (int j = 0; j < QK_K / 32; j++) {
        p->sc[j][r] = (uint8_t)sb->sc[j];
        p->mn[j][r] = (uint8_t)sb->mn[j];
        for (int l = 0; l < 32; l++) u[l] = (uint8_t)sb->q[32 * j + l];
        put_nibbles(p->qs[j], r, u);
        for (int i = 0; i < 4 && qh; i++) {
            uint8_t bits = 0;
            for (int s = 0; s < 4; s++)
                bits |= (uint8_t)((u[4 * s + i] >> 4 & 1) << s | (u[16 + 4 * s + i] >> 4 & 1) << (4 + s));
            qh[j][4 * r + i] = bits;
        }
    }
}

static void pack_row(TensorType t, void *dst, const uint8_t *row, int r, int cols) {
    uint8_t u[QK_K];
    if (t == TENSOR_Q8_0) {
        PackQ8_0 *p = dst;
        for (int b = 0; b < cols / QK; b++, row += 2 + QK) {
            memcpy(p[b].d[r], row, 2);
            for (int s = 0; s < 8; s++) { /* 4 quants at a time; q + 128 flips each byte's top bit */
                uint32_t four;
                memcpy(&four, row + 2 + 4 * s, 4);
                four ^= 0x80808080u;
                memcpy(&p[b].qs[s][4 * r], &four, 4);
            }
        }
        return;
    }
    if (t == TENSOR_MXFP4) { /* the codes as they are: the file's byte j holds weights j and 16 + j */
        PackMXFP4 *p = dst;
        for (int b = 0; b < cols / QK; b++, row += sizeof(BlockMXFP4)) {
            const BlockMXFP4 *blk = (const BlockMXFP4 *)row;
            for (int j = 0; j < QK / 2; j++) u[j] = blk->qs[j] & 0xF, u[QK / 2 + j] = blk->qs[j] >> 4;
            p[b].e[r] = blk->e;
            put_nibbles(p[b].qs, r, u);
        }
        return;
    }
    if (t == TENSOR_Q4_0) {
        PackQ4_0 *p = dst;
        QuantBlock qb;
        for (int b = 0; b < cols / QK; b++, row += sizeof(BlockQ4_0)) {
            quant_unpack_q4_0(row, &qb);
            for (int j = 0; j < QK; j++) u[j] = (uint8_t)(qb.q[j] + 8);
            memcpy(p[b].d[r], row, 2);
            put_nibbles(p[b].qs, r, u);
        }
        return;
    }
    QuantSuperBlock sb;
    for (int b = 0; b < cols / QK_K; b++, row += tensor_block_bytes(t)) {
        if (t == TENSOR_Q4_K) {
            PackQ4_K *p = (PackQ4_K *)dst + b;
            quant_unpack_q4_k(row, &sb);
            pack_k4(p, NULL, row, &sb, r);
        } else if (t == TENSOR_Q5_K) {
            PackQ5_K *p = (PackQ5_K *)dst + b;
            quant_unpack_q5_k(row, &sb);
            pack_k4(&p->k4, p->qh, row, &sb, r);
        } else { /* Q6_K */
            PackQ6_K *p = (PackQ6_K *)dst + b;
            quant_unpack_q6_k(row, &sb);
            memcpy(p->d[r], ((const BlockQ6_K *)row)->d, 2);
            for (int s = 0; s < QK_K / 16; s++) p->sc[s][r] = (int8_t)sb.sc[s];
            for (int j = 0; j < QK_K / 32; j++) {
                for (int l = 0; l < 32; l++) u[l] = (uint8_t)(sb.q[32 * j + l] + 32);
                put_nibbles(p->ql[j], r, u);
                for (int h = 0; h < 2; h++)
                    for (int i = 0; i < 4; i++) {
                        uint8_t bits = 0;
                        for (int s = 0; s < 4; s++) bits |= (uint8_t)((u[16 * h + 4 * s + i] >> 4) << (2 * s));
                        p->qh[j][h][4 * r + i] = bits;
                    }
            }
        }
    }
}

void pack_group(TensorType t, void *dst, const void *rows, size_t row_bytes, int n_rows, int cols) {
    memset(dst, 0, pack_group_bytes(t, cols));
    if (t == TENSOR_F32 || t == TENSOR_F16) { /* column by column, so that the copy is written in order */
        size_t es = tensor_row_bytes(t, 1);
        char *p = dst;
        const char *r0 = rows;
        for (int c = 0; c < cols; c++)
            for (int r = 0; r < n_rows; r++)
                memcpy(p + ((size_t)c * PACK_ROWS + r) * es, r0 + (size_t)r * row_bytes + (size_t)c * es, es);
        return;
    }
    for (int r = 0; r < n_rows; r++) pack_row(t, dst, (const uint8_t *)rows + (size_t)r * row_bytes, r, cols);
}

/* ---- prefill's units from packed rows -------------------------------------------------- */

/* One 64-byte nibble vector (and Q6_K's top bits) into unit vectors s and
 * s + 4: the byte positions are the same in both layouts (4r + i). */
static void unit_vectors(uint8_t *dst, const uint8_t *qs, const uint8_t *qh, int s) {
    for (int i = 0; i < 64; i++) {
        int top0 = qh ? (qh[i] >> (2 * s) & 3) << 4 : 0, top1 = qh ? (qh[64 + i] >> (2 * s) & 3) << 4 : 0;
        dst[64 * s + i] = (uint8_t)((qs[i] & 0xF) | top0);
        dst[64 * (s + 4) + i] = (uint8_t)((qs[i] >> 4) | top1);
    }
}

/* Block b of row group g of the unit from packed group p; the scales as
 * unit_row computes them from the file's rows, so the unit is the same. */
static void unit_block(QuantUnit *u, TensorType t, const void *p, int b, int g) {
    uint8_t *dst = u->q + (size_t)(b * 2 + g) * 8 * 64;
    float *d = u->d + (size_t)(b * 2 + g) * 2 * 16, *m = u->m + (size_t)(b * 2 + g) * 2 * 16;
    if (t == TENSOR_Q8_0) {
        const PackQ8_0 *q = (const PackQ8_0 *)p + b;
        memcpy(dst, q->qs, sizeof q->qs);
        for (int r = 0; r < PACK_ROWS; r++)
            d[r] = d[16 + r] = quant_half(q->d[r]), m[r] = m[16 + r] = 0.0f;
    } else if (t == TENSOR_Q4_0) {
        const PackQ4_0 *q = (const PackQ4_0 *)p + b;
        for (int s = 0; s < 4; s++) unit_vectors(dst, q->qs[s], NULL, s);
        for (int r = 0; r < PACK_ROWS; r++)
            d[r] = d[16 + r] = quant_half(q->d[r]), m[r] = m[16 + r] = 0.0f;
    } else if (t == TENSOR_MXFP4) {
        const PackMXFP4 *q = (const PackMXFP4 *)p + b;
        for (int s = 0; s < 4; s++) unit_vectors(dst, q->qs[s], NULL, s);
        for (int i = 0; i < 8 * 64; i++) dst[i] = quant_mxfp4_u[dst[i]];
        for (int r = 0; r < PACK_ROWS; r++)
            d[r] = d[16 + r] = quant_e8m0_half(q->e[r]), m[r] = m[16 + r] = 0.0f;
    } else if (t == TENSOR_Q4_K || t == TENSOR_Q5_K) {
        const PackQ5_K *q5 = t == TENSOR_Q5_K ? (const PackQ5_K *)p + b / 8 : NULL;
        const PackQ4_K *q = q5 ? &q5->k4 : (const PackQ4_K *)p + b / 8;
        int j = b % 8;
        for (int s = 0; s < 4; s++) {
            unit_vectors(dst, q->qs[j][s], NULL, s);
            for (int i = 0; i < 64 && q5; i++) {
                dst[64 * s + i] |= (uint8_t)((q5->qh[j][i] >> s & 1) << 4);
                dst[64 * (s + 4) + i] |= (uint8_t)((q5->qh[j][i] >> (4 + s) & 1) << 4);
            }
        }
        for (int r = 0; r < PACK_ROWS; r++) {
            d[r] = d[16 + r] = quant_half(q->d[r]) * (float)q->sc[j][r];
            m[r] = m[16 + r] = -(quant_half(q->dmin[r]) * (float)q->mn[j][r]);
        }
    } else {
        const PackQ6_K *q = (const PackQ6_K *)p + b / 8;
        int j = b % 8;
        for (int s = 0; s < 4; s++) unit_vectors(dst, q->ql[j][s], q->qh[j][0], s);
        for (int r = 0; r < PACK_ROWS; r++)
            for (int h = 0; h < 2; h++) {
                d[16 * h + r] = quant_half(q->d[r]) * (float)q->sc[2 * j + h][r];
                m[16 * h + r] = -0.0f; /* unit_row's -(dmin * mn), both 0 */
            }
    }
}

void quant_unit_fill_packed(QuantUnit *u, TensorType t, const void *groups, int n_rows, int k) {
    quant_unit_kind(u, t, k);
    size_t group = pack_group_bytes(t, k);
    for (int g = 0; g < UNIT_ROWS / PACK_ROWS; g++)
        for (int b = 0; b < u->nb; b++) {
            if (g * PACK_ROWS < n_rows) {
                unit_block(u, t, (const char *)groups + g * group, b, g);
                continue;
            }
            memset(u->q + (size_t)(b * 2 + g) * 8 * 64, 0, 8 * 64);
            memset(u->d + (size_t)(b * 2 + g) * 2 * 16, 0, 2 * 16 * sizeof(float));
            memset(u->m + (size_t)(b * 2 + g) * 2 * 16, 0, 2 * 16 * sizeof(float));
        }
}

/* ---- the portable kernels ------------------------------------------------------------ */

/* Quant i (< 32) of row r in a block's four nibble vectors. */
static int nibble(const uint8_t qs[4][64], int r, int i) {
    uint8_t byte = qs[(i % 16) / 4][4 * r + i % 4];
    return i < 16 ? byte & 0xF : byte >> 4;
}

/* sum over the block of u * x for row r, u the nibble or, with a table,
 * the table's byte for it. */
static int32_t block_dot(const uint8_t qs[4][64], int r, const int8_t *x, const uint8_t *table) {
    int32_t s = 0;
    for (int i = 0; i < QK; i++) s += (table ? table[nibble(qs, r, i)] : nibble(qs, r, i)) * x[i];
    return s;
}

static int rows_in(int m, int g) { return m - g < PACK_ROWS ? m - g : PACK_ROWS; }

/* Q4_0 and MXFP4 (its codes through quant_mxfp4_u, centred on 12, its
 * scales E8M0 halves). */
static void pack_dot_nibbles(float *out, const DecodeActs *x, const void *w, int m, int k, int mxfp4) {
    size_t bytes = mxfp4 ? sizeof(PackMXFP4) : sizeof(PackQ4_0);
    const char *p = w;
    for (int g = 0; g < m; g += PACK_ROWS, p += (size_t)(k / QK) * bytes)
        for (int r = 0; r < rows_in(m, g); r++) {
            float acc = 0.0f;
            for (int b = 0; b < k / QK; b++) {
                const PackQ4_0 *q4 = (const void *)(p + (size_t)b * bytes);
                const PackMXFP4 *fp4 = (const void *)(p + (size_t)b * bytes);
                int32_t dot = mxfp4 ? block_dot(fp4->qs, r, x->q + QK * b, quant_mxfp4_u) - 12 * x->sum[b]
                                    : block_dot(q4->qs, r, x->q + QK * b, NULL) - 8 * x->sum[b];
                acc += (float)dot * ((mxfp4 ? quant_e8m0_half(fp4->e[r]) : quant_half(q4->d[r])) * x->d[b]);
            }
            out[g + r] = acc;
        }
}

void pack_dot_q4_0(float *out, const DecodeActs *x, const void *w, int m, int k) {
    pack_dot_nibbles(out, x, w, m, k, 0);
}

void pack_dot_mxfp4(float *out, const DecodeActs *x, const void *w, int m, int k) {
    pack_dot_nibbles(out, x, w, m, k, 1);
}

void pack_dot_q8_0(float *out, const DecodeActs *x, const void *w, int m, int k) {
    const PackQ8_0 *p = w;
    for (int g = 0; g < m; g += PACK_ROWS, p += k / QK)
        for (int r = 0; r < rows_in(m, g); r++) {
            float acc = 0.0f;
            for (int b = 0; b < k / QK; b++) {
                int32_t dot = -128 * x->sum[b];
                for (int i = 0; i < QK; i++) dot += p[b].qs[i / 4][4 * r + i % 4] * x->q[QK * b + i];
                acc += (float)dot * (quant_half(p[b].d[r]) * x->d[b]);
            }
            out[g + r] = acc;
        }
}

/* Rows of packed super-blocks, sb giving row r's share of one. */
typedef float SuperblockDot(const void *blk, int r, const int8_t *xq, const int16_t *ks, float kd);
static void pack_dot_k(float *out, const DecodeActs *x, const void *w, size_t bytes, int m, int k,
                       SuperblockDot *sb) {
    const char *p = w;
    for (int g = 0; g < m; g += PACK_ROWS, p += (size_t)(k / QK_K) * bytes)
        for (int r = 0; r < rows_in(m, g); r++) {
            float acc = 0.0f;
            for (int b = 0; b < k / QK_K; b++)
                acc += sb(p + (size_t)b * bytes, r, x->kq + QK_K * b, x->ksum + QK_K / 16 * b, x->kd[b]);
            out[g + r] = acc;
        }
}

/* Q4_K's and Q5_K's (its fifth bits in qh, NULL for Q4_K) share of row r. */
static float superblock_k4(const PackQ4_K *p, const uint8_t qh[][64], int r, const int8_t *xq, const int16_t *ks,
                           float kd) {
    int32_t dot = 0, mins = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        int32_t s = 0;
        for (int i = 0; i < QK; i++) {
            int bit = qh ? qh[j][4 * r + i % 4] >> ((i % 16) / 4 + (i < 16 ? 0 : 4)) & 1 : 0;
            s += (nibble(p->qs[j], r, i) | bit << 4) * xq[32 * j + i];
        }
        dot += p->sc[j][r] * s;
        mins += p->mn[j][r] * (ks[2 * j] + ks[2 * j + 1]);
    }
    return quant_half(p->d[r]) * kd * (float)dot - quant_half(p->dmin[r]) * kd * (float)mins;
}

static float superblock_q4_k(const void *blk, int r, const int8_t *xq, const int16_t *ks, float kd) {
    return superblock_k4(blk, NULL, r, xq, ks, kd);
}

static float superblock_q5_k(const void *blk, int r, const int8_t *xq, const int16_t *ks, float kd) {
    const PackQ5_K *p = blk;
    return superblock_k4(&p->k4, p->qh, r, xq, ks, kd);
}

static float superblock_q6_k(const void *blk, int r, const int8_t *xq, const int16_t *ks, float kd) {
    const PackQ6_K *p = blk;
    int32_t dot = 0;
    for (int j = 0; j < QK_K / 32; j++)
        for (int h = 0; h < 2; h++) {
            int32_t s = 0;
            for (int i = 16 * h; i < 16 * h + 16; i++) {
                int hi = p->qh[j][h][4 * r + i % 4] >> (2 * ((i % 16) / 4)) & 3;
                s += (nibble(p->ql[j], r, i) | hi << 4) * xq[32 * j + i];
            }
            dot += p->sc[2 * j + h][r] * (s - 32 * ks[2 * j + h]);
        }
    return quant_half(p->d[r]) * kd * (float)dot;
}

void pack_dot_q4_k(float *out, const DecodeActs *x, const void *w, int m, int k) {
    pack_dot_k(out, x, w, sizeof(PackQ4_K), m, k, superblock_q4_k);
}

void pack_dot_q5_k(float *out, const DecodeActs *x, const void *w, int m, int k) {
    pack_dot_k(out, x, w, sizeof(PackQ5_K), m, k, superblock_q5_k);
}

void pack_dot_q6_k(float *out, const DecodeActs *x, const void *w, int m, int k) {
    pack_dot_k(out, x, w, sizeof(PackQ6_K), m, k, superblock_q6_k);
}
