#!/usr/bin/env python3
"""Writes tests/fixtures/quant_ref.h: blocks of every quantized type posenc
reads, each with a hash of what ggml's reference dequantizer makes of it.

The blocks are ours (made here, deterministically): scales at the f16
extremes (zero, -0, subnormals, the largest finite, infinities, NaNs),
all-zero blocks, q bits all clear and all set, random blocks, and for the
K-quants blocks whose sub-block scales (and mins) take every value at every
sub-block position.  The floats are ggml's: DEQUANT is a program that
reads blocks of ggml type TYPE_ID on stdin and writes
ggml_get_type_traits(TYPE_ID)->to_float of them (little-endian f32) on
stdout, linked against a llama.cpp build's ggml-base.

    python3 tools/make_quant_fixtures.py --dequant DEQUANT --snapshot COMMIT \\
        [--out tests/fixtures/quant_ref.h]

MXFP4's fixture (tests/fixtures/quant_ref_mxfp4.h) is written the same way
from tools/quant_reference.py's float64 dequantizer, written from ggml's
definition (block_mxfp4, kvalues_mxfp4, the half E8M0 scale):

    python3 tools/make_quant_fixtures.py --numpy --out tests/fixtures/quant_ref_mxfp4.h

Per block the header keeps the FNV-1a 64-bit hash of the expected floats'
bit patterns (little-endian), and the expected floats themselves for the
first block of each type, so the test compares bits exactly at a few
hundred bytes per type of expected data.
"""
import argparse
import os
import random
import struct
import subprocess
import sys

# name, ggml type id, weights per block, bytes per block
TYPES = [
    ("q4_0", 2, 32, 18), ("q4_1", 3, 32, 20), ("q5_0", 6, 32, 22), ("q5_1", 7, 32, 24),
    ("q2_k", 10, 256, 84), ("q3_k", 11, 256, 110), ("q4_k", 12, 256, 144),
    ("q5_k", 13, 256, 176), ("q6_k", 14, 256, 210),
]
# Those whose floats come from tools/quant_reference.py (--numpy).
NUMPY_TYPES = [("mxfp4", 39, 32, 17)]

# f16 bit patterns at the edges: zero, -0, 1, the largest finite (both
# signs), the smallest and largest subnormal, the smallest normal,
# infinities, quiet and signalling NaNs.
SPECIAL_F16 = [0x0000, 0x8000, 0x3C00, 0x7BFF, 0xFBFF, 0x0001, 0x03FF, 0x0400, 0x7C00,
               0xFC00, 0x7E00, 0x7C01, 0xFE00]


def h16(v):
    return struct.pack("<H", v)


def rand_f16(rng):
    """A finite f16 of moderate size (2^-9 .. 2^0), either sign."""
    return rng.randrange(0x1800, 0x3C00) | (0x8000 if rng.random() < 0.5 else 0)


def rand_bytes(rng, n):
    return bytes(rng.getrandbits(8) for _ in range(n))


def pack_q3_k_scales(v):
    """Inverse of quant_scales_q3_k: 16 six-bit values into 12 bytes."""
    out = bytearray(12)
    for j, x in enumerate(v):
        out[j % 8] |= (x & 0xF) << (4 * (j // 8))
        out[8 + j % 4] |= (x >> 4) << (2 * (j // 4))
    return bytes(out)


def pack_k4_scales(sc, mn):
    """Inverse of quant_scale_min_k4: 8 six-bit scales and mins into 12 bytes."""
    out = bytearray(12)
    for j in range(8):
        if j < 4:
            out[j] |= sc[j]
            out[j + 4] |= mn[j]
        else:
            out[j + 4] |= (sc[j] & 0xF) | (mn[j] & 0xF) << 4
            out[j - 4] |= (sc[j] >> 4) << 6
            out[j] |= (mn[j] >> 4) << 6
    return bytes(out)


def blocks_32(name, rng):
    has_m = name.endswith("_1")
    has_qh = name.startswith("q5")
    nq = 16 + (4 if has_qh else 0)

    def block(d, m, q):
        return h16(d) + (h16(m) if has_m else b"") + q

    out = [bytes(2 + (2 if has_m else 0) + nq)]  # all zero
    for s in SPECIAL_F16:
        out.append(block(s, rand_f16(rng), rand_bytes(rng, nq)))
        if has_m:
            out.append(block(rand_f16(rng), s, rand_bytes(rng, nq)))
    out.append(block(0x3C00, 0x3C00, b"\x00" * nq))
    out.append(block(0x3C00, 0xBC00, b"\xff" * nq))
    for _ in range(16):
        out.append(block(rand_f16(rng), rand_f16(rng), rand_bytes(rng, nq)))
    return out


def blocks_k(name, rng):
    out = []
    if name == "q2_k":
        # scales[16], qs[64], d, dmin; sub-block s of block b: scale (b + s) % 16,
        # min (3s + 5b + 1) % 16 -- over 16 blocks every value at every position
        def block(scales, qs, d, dmin):
            return scales + qs + h16(d) + h16(dmin)
        for b in range(16):
            sc = bytes(((b + s) % 16) | ((3 * s + 5 * b + 1) % 16) << 4 for s in range(16))
            out.append(block(sc, rand_bytes(rng, 64), rand_f16(rng), rand_f16(rng)))
        rnd = lambda: (rand_bytes(rng, 16), rand_bytes(rng, 64))
        zero_q = (b"\x00" * 16, b"\x00" * 64)
        full_q = (b"\xff" * 16, b"\xff" * 64)
    elif name == "q3_k":
        # hmask[32], qs[64], scales[12], d; sub-block j of block b: (b + 4j) % 64
        def block(scales, q, d, dmin):
            return q + scales + h16(d)
        for b in range(64):
            sc = pack_q3_k_scales([(b + 4 * j) % 64 for j in range(16)])
            out.append(block(sc, rand_bytes(rng, 96), rand_f16(rng), 0))
        rnd = lambda: (rand_bytes(rng, 12), rand_bytes(rng, 96))
        zero_q = (b"\x00" * 12, b"\x00" * 96)
        full_q = (b"\xff" * 12, b"\xff" * 96)
    elif name in ("q4_k", "q5_k"):
        # d, dmin, scales[12], (qh[32],) qs[128]; sub-block j of block b: scale
        # (b + 8j) % 64, min (7b + 8j + 3) % 64
        nq = 128 + (32 if name == "q5_k" else 0)

        def block(scales, q, d, dmin):
            return h16(d) + h16(dmin) + scales + q
        for b in range(64):
            sc = pack_k4_scales([(b + 8 * j) % 64 for j in range(8)],
                                [(7 * b + 8 * j + 3) % 64 for j in range(8)])
            out.append(block(sc, rand_bytes(rng, nq), rand_f16(rng), rand_f16(rng)))
        rnd = lambda: (rand_bytes(rng, 12), rand_bytes(rng, nq))
        zero_q = (b"\x00" * 12, b"\x00" * nq)
        full_q = (b"\xff" * 12, b"\xff" * nq)
    else:  # q6_k: ql[128], qh[64], scales[16] (int8), d; block b, sub-block s: 16b + s - 128
        def block(scales, q, d, dmin):
            return q + scales + h16(d)
        for b in range(16):
            sc = bytes((16 * b + s) % 256 for s in range(16))
            out.append(block(sc, rand_bytes(rng, 192), rand_f16(rng), 0))
        out.append(block(b"\x7f" * 16, rand_bytes(rng, 192), rand_f16(rng), 0))
        out.append(block(b"\x80" * 16, rand_bytes(rng, 192), rand_f16(rng), 0))
        rnd = lambda: (rand_bytes(rng, 16), rand_bytes(rng, 192))
        zero_q = (b"\x00" * 16, b"\x00" * 192)
        full_q = (b"\xff" * 16, b"\xff" * 192)
    out.insert(0, block(*zero_q, 0, 0))
    out.append(block(*zero_q, 0x3C00, 0x3C00))
    out.append(block(*full_q, 0x3C00, 0x3C00))
    out.append(block(*full_q, 0x7BFF, 0x7BFF))
    for s in SPECIAL_F16:
        out.append(block(*rnd(), s, rand_f16(rng)))
        out.append(block(*rnd(), rand_f16(rng), s))
    for _ in range(8):
        out.append(block(*rnd(), rand_f16(rng), rand_f16(rng)))
    return out


def blocks_mxfp4(rng):
    """Every E8M0 scale (the subnormal half scales of e = 0 and 1, the
    infinities of e near 255) with random codes; every code at every
    position; codes all 0 and all 15."""
    out = []
    for c in range(16):  # block c: weight j has code (c + j) % 16
        codes = [(c + j) % 16 for j in range(32)]
        out.append(bytes([120 + c]) + bytes(codes[j] | codes[j + 16] << 4 for j in range(16)))
    out += [bytes(17), bytes([127]) + b"\xff" * 16]
    for e in range(256):
        out.append(bytes([e]) + rand_bytes(rng, 16))
    return out


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dequant", help="ggml reference dequantizer program")
    ap.add_argument("--snapshot", help="llama.cpp commit it was built from")
    ap.add_argument("--numpy", action="store_true",
                    help="write MXFP4's fixture from tools/quant_reference.py instead")
    ap.add_argument("--out", default="tests/fixtures/quant_ref.h")
    a = ap.parse_args()
    if not a.numpy and not (a.dequant and a.snapshot):
        ap.error("--dequant and --snapshot are required (or --numpy)")

    rng = random.Random(12)
    if a.numpy:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import numpy as np
        import quant_reference
        guard, array = "POSENC_QUANT_REF_MXFP4_H", "quant_ref_mxfp4"
        lines = [
            "/* Generated by tools/make_quant_fixtures.py; do not edit.",
            " * Blocks: made by that script.  Expected floats: tools/quant_reference.py's",
            " * float64 dequantizer, written from ggml's definition of MXFP4,",
            " * run as `python3 tools/make_quant_fixtures.py --numpy --out tests/fixtures/quant_ref_mxfp4.h`.",
            " * hash, first: as in quant_ref.h, whose QuantRef this uses. */",
            "#ifndef " + guard,
            "#define " + guard,
            '#include "tests/fixtures/quant_ref.h"',
            "",
        ]
    else:
        guard, array = "POSENC_QUANT_REF_H", "quant_ref"
        lines = [
            "/* Generated by tools/make_quant_fixtures.py; do not edit.",
            " * Blocks: made by that script.  Expected floats: ggml's reference",
            " * dequantizer (ggml_get_type_traits(type)->to_float, ggml-base built without",
            " * -march) of llama.cpp " + a.snapshot + ",",
            " * run as `python3 tools/make_quant_fixtures.py --dequant DEQUANT --snapshot " + a.snapshot + "`.",
            " * hash: FNV-1a 64 of the block's expected f32 bit patterns, little-endian;",
            " * first: the first block's expected floats as bit patterns. */",
            "#ifndef " + guard,
            "#define " + guard,
            "#include <stdint.h>",
            "",
            "typedef struct {",
            "    uint32_t type;          /* ggml type id */",
            "    int n_blocks;",
            "    const char *blocks;     /* n_blocks blocks, hex */",
            "    const uint64_t *hash;   /* (n_blocks) */",
            "    const uint32_t *first;  /* (weights per block) */",
            "} QuantRef;",
            "",
        ]
    entries = []
    for name, tid, qk, size in NUMPY_TYPES if a.numpy else TYPES:
        blocks = (blocks_mxfp4(rng) if a.numpy else blocks_32(name, rng) if qk == 32
                  else blocks_k(name, rng))
        assert all(len(b) == size for b in blocks), name
        data = b"".join(blocks)
        if a.numpy:
            floats = quant_reference.dequantize(tid, data).astype("<f4").tobytes()
        else:
            res = subprocess.run([a.dequant, str(tid)], input=data, capture_output=True, check=True)
            floats = res.stdout
        assert len(floats) == 4 * qk * len(blocks), name
        hashes = [fnv1a64(floats[4 * qk * i:4 * qk * (i + 1)]) for i in range(len(blocks))]
        first = struct.unpack("<%dI" % qk, floats[:4 * qk])
        hexs = data.hex()
        lines.append("static const char %s_blocks[] =" % name)
        for i in range(0, len(hexs), 96):
            lines.append('    "%s"' % hexs[i:i + 96] + (";" if i + 96 >= len(hexs) else ""))
        lines.append("static const uint64_t %s_hash[] = {" % name)
        for i in range(0, len(hashes), 4):
            lines.append("    " + " ".join("0x%016xu," % h for h in hashes[i:i + 4]))
        lines.append("};")
        lines.append("static const uint32_t %s_first[] = {" % name)
        for i in range(0, len(first), 6):
            lines.append("    " + " ".join("0x%08xu," % f for f in first[i:i + 6]))
        lines.append("};")
        lines.append("")
        entries.append("    {%d, %d, %s_blocks, %s_hash, %s_first}," % (tid, len(blocks), name, name, name))
    lines.append("static const QuantRef %s[] = {" % array)
    lines += entries
    lines.append("};")
    lines.append("#endif")
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
