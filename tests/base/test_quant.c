/* The quantized tensor types' reference dequantizers (base/quant.c) against
 * ggml's, bit for bit, on the fixture blocks of tests/fixtures/quant_ref.h
 * (tools/make_quant_fixtures.py: extreme f16 scales including infinities,
 * NaNs and subnormals, zero blocks, every sub-block scale and min at every
 * position of the K-quants), and MXFP4's against the float64 NumPy
 * dequantizer written from ggml's definition (tools/quant_reference.py) on
 * quant_ref_mxfp4.h (every E8M0 scale, subnormal and infinite results
 * included; every E2M1 code at every position).  There is no tolerance: the same operations in
 * the same order give the same bits, NaN payloads included.
 *
 * Controls: a flipped bit in any byte of a block's layout must change the
 * dequantized block's hash for some fixture block (so every field is read
 * and a misread field cannot pass), and a flipped bit of an expected float
 * must fail the comparison. */
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "tests/common.h"
#include "tests/fixtures/quant_ref.h"
#include "tests/fixtures/quant_ref_mxfp4.h"

static const QuantRef *const refs[] = {&quant_ref[0], &quant_ref[1], &quant_ref[2], &quant_ref[3],
                                       &quant_ref[4], &quant_ref[5], &quant_ref[6], &quant_ref[7],
                                       &quant_ref[8], &quant_ref_mxfp4[0]};
#define N_REF (sizeof refs / sizeof refs[0])
_Static_assert(sizeof quant_ref / sizeof quant_ref[0] == 9, "refs lists every fixture type");

static uint64_t fnv1a64(const float *x, size_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], 4);
        for (int b = 0; b < 4; b++) h = (h ^ (bits >> (8 * b) & 0xFF)) * 0x100000001B3ull;
    }
    return h;
}

static uint8_t *hex_decode(const char *hex, size_t n) {
    uint8_t *p = malloc(n);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        ck_assert_int_eq(sscanf(hex + 2 * i, "%2x", &v), 1);
        p[i] = (uint8_t)v;
    }
    return p;
}

/* One fixture type's blocks, decoded, with its sizes. */
typedef struct {
    TensorType type;
    size_t qk, bytes; /* weights and bytes per block */
    uint8_t *blocks;
} Blocks;

static Blocks load_blocks(const QuantRef *r) {
    Blocks b = {(TensorType)r->type, tensor_block_size((TensorType)r->type),
                tensor_block_bytes((TensorType)r->type), NULL};
    ck_assert_msg(b.bytes > 0 && b.qk > 1, "%s is not a block type", tensor_type_name(r->type));
    ck_assert_uint_eq(strlen(r->blocks), 2 * b.bytes * (size_t)r->n_blocks);
    b.blocks = hex_decode(r->blocks, b.bytes * (size_t)r->n_blocks);
    return b;
}

/* The hash of block i dequantized by posenc. */
static uint64_t block_hash(const Blocks *b, const uint8_t *block, float *out) {
    tensor_dequantize(b->type, block, out, b->qk);
    return fnv1a64(out, b->qk);
}

/* 0 when the first block's floats match `first` bit for bit, else the
 * index of the first difference + 1. */
static size_t first_block_mismatch(const float *got, const uint32_t *first, size_t qk) {
    for (size_t j = 0; j < qk; j++) {
        uint32_t bits;
        memcpy(&bits, &got[j], 4);
        if (bits != first[j]) return j + 1;
    }
    return 0;
}

START_TEST(test_dequantize_bit_identical) {
    for (size_t t = 0; t < N_REF; t++) {
        const QuantRef *r = refs[t];
        Blocks b = load_blocks(r);
        float out[QK_K];
        for (int i = 0; i < r->n_blocks; i++) {
            uint64_t h = block_hash(&b, b.blocks + (size_t)i * b.bytes, out);
            ck_assert_msg(h == r->hash[i], "%s block %d: dequantized values differ from ggml's",
                          tensor_type_name(r->type), i);
            if (i == 0) {
                size_t j = first_block_mismatch(out, r->first, b.qk);
                ck_assert_msg(j == 0, "%s block 0 weight %zu differs from ggml's",
                              tensor_type_name(r->type), j - 1);
            }
        }
        /* Whole rows of several blocks go through the same function. */
        size_t n = b.qk * (size_t)r->n_blocks;
        float *row = malloc(n * sizeof(float));
        ck_assert_ptr_nonnull(row);
        tensor_dequantize(b.type, b.blocks, row, n);
        for (int i = 0; i < r->n_blocks; i++)
            ck_assert_msg(fnv1a64(row + (size_t)i * b.qk, b.qk) == r->hash[i],
                          "%s: block %d of a row of %d blocks differs", tensor_type_name(r->type), i,
                          r->n_blocks);
        free(row);
        free(b.blocks);
    }
}
END_TEST

/* Every bit of every byte of the layout is read: flipping it changes the
 * result of at least one fixture block (a bit a block ignores, e.g. the q
 * bits of a sub-block whose scale is 0, must matter in another block).  A
 * dequantizer that misread or skipped any field would leave some fixture
 * hash matching for every block with that bit flipped only by luck, and
 * the exactness test above would already fail for it. */
START_TEST(test_every_bit_matters) {
    for (size_t t = 0; t < N_REF; t++) {
        const QuantRef *r = refs[t];
        Blocks b = load_blocks(r);
        float out[QK_K];
        uint8_t block[256];
        for (size_t bit = 0; bit < 8 * b.bytes; bit++) {
            int changed = 0;
            for (int i = 0; i < r->n_blocks && !changed; i++) {
                memcpy(block, b.blocks + (size_t)i * b.bytes, b.bytes);
                block[bit / 8] ^= (uint8_t)(1u << bit % 8);
                changed = block_hash(&b, block, out) != r->hash[i];
            }
            ck_assert_msg(changed, "%s: flipping bit %zu of byte %zu changes no fixture block",
                          tensor_type_name(r->type), bit % 8, bit / 8);
        }
        free(b.blocks);
    }
}
END_TEST

/* The comparison of the first block's floats notices one flipped bit. */
START_TEST(test_control_expected_bit) {
    for (size_t t = 0; t < N_REF; t++) {
        const QuantRef *r = refs[t];
        Blocks b = load_blocks(r);
        float out[QK_K];
        block_hash(&b, b.blocks, out);
        uint32_t first[QK_K];
        memcpy(first, r->first, b.qk * sizeof(uint32_t));
        ck_assert_uint_eq(first_block_mismatch(out, first, b.qk), 0);
        first[b.qk - 1] ^= 1u;
        ck_assert_uint_eq(first_block_mismatch(out, first, b.qk), b.qk);
        free(b.blocks);
    }
}
END_TEST

/* The sizes GGUF files are laid out by (ggml's type traits). */
START_TEST(test_block_sizes) {
    static const struct { TensorType t; size_t qk, bytes; } want[] = {
        {TENSOR_Q4_0, 32, 18},  {TENSOR_Q4_1, 32, 20},   {TENSOR_Q5_0, 32, 22},
        {TENSOR_Q5_1, 32, 24},  {TENSOR_Q8_0, 32, 34},   {TENSOR_Q2_K, 256, 84},
        {TENSOR_Q3_K, 256, 110}, {TENSOR_Q4_K, 256, 144}, {TENSOR_Q5_K, 256, 176},
        {TENSOR_Q6_K, 256, 210}, {TENSOR_MXFP4, 32, 17},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ck_assert_uint_eq(tensor_block_size(want[i].t), want[i].qk);
        ck_assert_uint_eq(tensor_block_bytes(want[i].t), want[i].bytes);
        ck_assert_uint_eq(tensor_row_bytes(want[i].t, 2 * want[i].qk), 2 * want[i].bytes);
        ck_assert_uint_eq(tensor_row_bytes(want[i].t, want[i].qk + 1), 0);
    }
    /* every fixture type is one of them */
    for (size_t t = 0; t < N_REF; t++) {
        int found = 0;
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) found |= want[i].t == refs[t]->type;
        ck_assert(found);
    }
}
END_TEST

static Suite *quant_suite(void) {
    Suite *s = suite_create("quant");
    TCase *tc = tcase_create("dequantize");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_block_sizes);
    tcase_add_test(tc, test_dequantize_bit_identical);
    tcase_add_test(tc, test_every_bit_matters);
    tcase_add_test(tc, test_control_expected_bit);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tests_run_suite(quant_suite()); }
