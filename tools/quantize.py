#!/usr/bin/python3
"""Quantizes the matrices of a GGUF file to ggml's block types (NumPy; the
layouts are base/quant.h's).

    quantize.py INPUT.gguf OUTPUT.gguf TYPE

TYPE: q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k mxfp4, or the mixes
q4_k_m, q5_k_m and mxfp4_moe.  Every key is copied but general.file_type,
which names TYPE as llama.cpp numbers its file types (FILE_TYPE); 1-D
tensors, biases (gpt-oss's experts' are 2-D) and the experts' router
(ffn_gate_inp) stay f32, as llama-quantize leaves them; matrices become
TYPE.  The mixes are
llama.cpp's (llama_tensor_get_type): q4_k (q5_k), but q6_k for the output
matrix (the token embedding when it is tied) and for attn_v and ffn_down
(ffn_down_exps in a mixture of experts) in the layers use_more_bits picks
(the first and last eighth, and every third between); mxfp4_moe is mxfp4
for the stacked experts (3-D tensors) and q8_0 for every other matrix.  A
K-quant needs rows that are a multiple of 256: other matrices fall back as
llama.cpp's do (FALLBACK; q4_0 stands in for llama.cpp's iq4_nl, which
posenc does not read).

How it quantizes: q8_0 exactly as tools/convert.py (ggml's reference:
d = max|x| / 127, x / d rounded half away from zero), byte for byte, in
NumPy (a billion weights in minutes rather than hours); q4_0, q4_1, q5_0, q5_1 round to nearest with the scale
that maps the block's absolute maximum (or its minimum and maximum) onto the
integer range, as ggml's reference quantizers do.  The K-quants choose each
sub-block's scale (and min) by least squared error among candidates around
that one (the range ggml's searches use), each refitted by least squares;
the sub-block scales and mins are then rounded to their 4, 6 or 8 bits
against the super-block's f16 scales, and the weights rounded against the
scales as stored.  Unlike llama-quantize it weighs every weight alike and
takes no importance matrix; its RMSE per tensor is within 1.05x of
llama-quantize's (tests/fixtures/quant_rmse_llamacpp.json).

mxfp4 is ggml's quantize_row_mxfp4_ref, operation for operation in float32,
so its bytes are llama-quantize's: the E8M0 exponent is e = floor(log2
amax) - 2 + 127 for the block's absolute maximum amax (0 for an all-zero
block), and each weight takes the E2M1 code whose value times the half
scale 2^(e - 128) is nearest, the lowest code on a tie.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf  # noqa: E402
import quant_reference as qr  # noqa: E402

QK, QK_K = qr.QK, qr.QK_K
IDS = dict({v[0]: k for k, v in qr.TYPES.items()}, q8_0=gguf.GGML_Q8_0)
FALLBACK = {"q2_k": "q4_0", "q3_k": "q4_0", "q4_k": "q5_0", "q5_k": "q5_1", "q6_k": "q8_0"}
MIXES = {"q4_k_m": "q4_k", "q5_k_m": "q5_k", "mxfp4_moe": "mxfp4"}
# general.file_type: llama.cpp's LLAMA_FTYPE_MOSTLY_* (include/llama.h).  A
# single type is the file type whose default tensor type it is
# (llama_ftype_get_default_type), as llama-quantize --pure writes it: q3_k
# Q3_K_S, q4_k Q4_K_S, q5_k Q5_K_S; mxfp4 everywhere is MXFP4_MOE's, the one
# file type of MXFP4.
FILE_TYPE = {"q4_0": 2, "q4_1": 3, "q8_0": 7, "q5_0": 8, "q5_1": 9, "q2_k": 10, "q3_k": 11,
             "q4_k": 14, "q4_k_m": 15, "q5_k": 16, "q5_k_m": 17, "q6_k": 18, "mxfp4": 38,
             "mxfp4_moe": 38}


def use_more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def mix_type(mix, name, shape, n_layers, tied):
    """The type a q4_k_m / q5_k_m / mxfp4_moe file stores matrix `name` of
    `shape` in."""
    if mix == "mxfp4_moe":
        return "mxfp4" if len(shape) == 3 else "q8_0"
    if name == "output.weight" or (tied and name == "token_embd.weight"):
        return "q6_k"
    parts = name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and \
            parts[2] in ("attn_v", "ffn_down", "ffn_down_exps") and \
            use_more_bits(int(parts[1]), n_layers):
        return "q6_k"
    return MIXES[mix]


def _f16_bytes(v):
    return np.asarray(v, np.float32).astype("<f2").view(np.uint8).reshape(-1, 2)


def _round_f16(v):
    return np.asarray(v, np.float32).astype(np.float16).astype(np.float32)


def _div(x, d):
    """x / d, 0 where d is 0."""
    safe = np.where(d == 0, 1, d)
    return np.where(d == 0, 0, x / safe)


def _pack_nibbles(q):
    """(nb, 32) values < 16 -> (nb, 16) bytes: weight j low, j + 16 high."""
    return (q[:, :16] | q[:, 16:] << 4).astype(np.uint8)


def _pack_bits(bits):
    """(nb, 32) bits -> (nb, 4) bytes of a little-endian uint32."""
    word = (bits.astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(axis=1).astype("<u4")
    return word.view(np.uint8).reshape(-1, 4)


def _symmetric(x, levels):
    """Scale whose signed maximum maps to -levels (as ggml's q4_0: the
    largest magnitude is represented exactly)."""
    i = np.abs(x).argmax(axis=-1)
    return np.take_along_axis(x, i[..., None], axis=-1)[..., 0] / -levels


def q_32(x, name):
    """Blocks of 32, (nb, 32) floats -> (nb, bytes)."""
    bits = 5 if name.startswith("q5") else 4
    top = (1 << bits) - 1
    if name.endswith("_0"):
        d = _round_f16(_symmetric(x, 1 << (bits - 1)))
        q = np.clip(np.rint(_div(x, d[:, None])) + (1 << (bits - 1)), 0, top).astype(np.int64)
        head = [_f16_bytes(d)]
    else:
        lo, hi = x.min(axis=1), x.max(axis=1)
        d, m = _round_f16((hi - lo) / top), _round_f16(lo)
        q = np.clip(np.rint(_div(x - m[:, None], d[:, None])), 0, top).astype(np.int64)
        head = [_f16_bytes(d), _f16_bytes(m)]
    if bits == 5:
        head.append(_pack_bits(q >> 4 & 1))
    return np.concatenate(head + [_pack_nibbles(q & 0xF)], axis=1)


def _best_symmetric(xs, levels):
    """Per sub-block (last axis) the scale of least squared error among
    candidates around the one that maps the signed maximum to -levels:
    q = clip(round(x / s), -levels, levels - 1) for s = max / -(levels + k/10),
    k = -9..9, each refitted by least squares (s = x.q / q.q)."""
    top = _symmetric(xs, levels)[..., None]
    best_err, best = None, None
    for k in range(-9, 10):
        step = top * levels / (levels + k / 10.0)
        q = np.clip(np.rint(_div(xs, step)), -levels, levels - 1)
        qq = (q * q).sum(axis=-1, keepdims=True)
        fit = _div((xs * q).sum(axis=-1, keepdims=True), qq)
        err = ((xs - fit * q) ** 2).sum(axis=-1)
        if best is None:
            best_err, best = err, fit[..., 0]
        else:
            better = err < best_err
            best_err, best = np.where(better, err, best_err), np.where(better, fit[..., 0], best)
    return best


def _best_min_scale(xs, top, rmin, steps):
    """Per sub-block (last axis) scale and min (>= 0, subtracted) of least
    squared error: q = clip(round((x - lo) * i), 0, top) for
    i = (top + rmin + k/10) / (max - lo), k < steps, lo = min(min x, 0),
    each refitted by least squares x ~ s q - m (m >= 0)."""
    lo = np.minimum(xs.min(axis=-1, keepdims=True), 0)
    span = xs.max(axis=-1, keepdims=True) - lo
    n = xs.shape[-1]
    best_err = best_s = best_m = None
    for k in [None] + list(range(steps)):
        inv = _div(np.float64(top) if k is None else top + rmin + k / 10.0, span)
        q = np.clip(np.rint((xs - lo) * inv), 0, top)
        sq, sx, sqq, sxq = q.sum(-1), xs.sum(-1), (q * q).sum(-1), (xs * q).sum(-1)
        det = n * sqq - sq * sq
        scale = _div(n * sxq - sx * sq, det)
        mn = _div(sqq * sx - sq * sxq, det)        # x ~ scale q + mn
        pos = mn > 0
        scale = np.where(pos, _div(sxq, sqq), scale)
        mn = np.where(pos, 0, mn)
        err = ((xs - scale[..., None] * q - mn[..., None]) ** 2).sum(-1)
        if best_err is None:
            best_err, best_s, best_m = err, scale, -mn
        else:
            better = err < best_err
            best_err = np.where(better, err, best_err)
            best_s, best_m = np.where(better, scale, best_s), np.where(better, -mn, best_m)
    return best_s, best_m


# The scale searches' ranges for the types with mins (ggml's for the same types).
_MIN_SEARCH = {"q2_k": (-0.5, 16), "q4_k": (-1.0, 21), "q5_k": (-0.5, 16)}


def _sub_scales(x, sub, top, with_min, name):
    """Per sub-block (nb, n_sub): the float scale (and min, >= 0, subtracted)
    mapping its values onto 0..top (with a min) or -(top + 1) / 2 ..
    (top - 1) / 2 (without), chosen by least squared error."""
    xs = x.reshape(len(x), -1, sub).astype(np.float64)
    if not with_min:
        return _best_symmetric(xs, (top + 1) // 2), None
    return _best_min_scale(xs, top, *_MIN_SEARCH[name])


def _int_scales(s, levels, signed):
    """Float sub-block scales (nb, n) -> f16 super scale and integer scales
    in 0..levels (or -levels-1..levels), the super scale as stored."""
    big = np.abs(s).max(axis=1) if signed else s.max(axis=1)
    d = _round_f16(big / levels)
    lo = -levels - 1 if signed else 0
    return d, np.clip(np.rint(_div(s, d[:, None])), lo, levels).astype(np.int64)


def _k_weights(x, sub, d, sc, dmin, mn, lo, hi):
    """Weights rounded against the stored scales: q = (x + dmin*mn) / (d*sc)."""
    xs = x.reshape(len(x), -1, sub)
    step = (d[:, None] * sc)[:, :, None]
    off = (dmin[:, None] * mn)[:, :, None] if dmin is not None else 0
    return np.clip(np.rint(_div(xs + off, step)), lo, hi).astype(np.int64).reshape(len(x), QK_K)


def _groups(q, shift_bits):
    """Inverse of the 2-bit-group layout (Q2_K, Q3_K, Q6_K): weight
    128 h + 32 g + l goes to byte 32 h + l at bit shift_bits * g."""
    q = q.reshape(len(q), 2, 4, 32)
    out = np.zeros((len(q), 2, 32), np.int64)
    for g in range(4):
        out |= q[:, :, g, :] << (shift_bits * g)
    return out.reshape(len(q), 64)


def _pack_k4_scales(sc, mn):
    """Inverse of quant_scale_min_k4: 8 six-bit scales and mins -> 12 bytes."""
    out = np.zeros((len(sc), 12), np.int64)
    out[:, 0:4] = sc[:, 0:4] | (sc[:, 4:8] >> 4) << 6
    out[:, 4:8] = mn[:, 0:4] | (mn[:, 4:8] >> 4) << 6
    out[:, 8:12] = (sc[:, 4:8] & 0xF) | (mn[:, 4:8] & 0xF) << 4
    return out.astype(np.uint8)


def q_k(x, name):
    """Super-blocks of 256, (nb, 256) floats -> (nb, bytes)."""
    u8 = lambda a: a.astype(np.uint8)  # noqa: E731
    if name == "q2_k":
        s, m = _sub_scales(x, 16, 3, True, name)
        d, sc = _int_scales(s, 15, False)
        dmin, mn = _int_scales(m, 15, False)
        q = _k_weights(x, 16, d, sc, dmin, mn, 0, 3)
        return np.concatenate([u8(sc | mn << 4), u8(_groups(q, 2)), _f16_bytes(d), _f16_bytes(dmin)],
                              axis=1)
    if name == "q3_k":
        s, _ = _sub_scales(x, 16, 7, False, name)
        d, sc = _int_scales(s, 31, True)
        q = _k_weights(x, 16, d, sc, None, None, -4, 3) + 4
        hmask = np.zeros((len(x), 32), np.int64)
        qq = q.reshape(len(x), 2, 4, 32)
        for h in range(2):
            for g in range(4):
                hmask |= (qq[:, h, g, :] >> 2 & 1) << (4 * h + g)
        v = sc + 32
        packed = np.zeros((len(x), 12), np.int64)
        for j in range(16):
            packed[:, j % 8] |= (v[:, j] & 0xF) << (4 * (j // 8))
            packed[:, 8 + j % 4] |= (v[:, j] >> 4) << (2 * (j // 4))
        return np.concatenate([u8(hmask), u8(_groups(q & 3, 2)), u8(packed), _f16_bytes(d)], axis=1)
    if name in ("q4_k", "q5_k"):
        top = 15 if name == "q4_k" else 31
        s, m = _sub_scales(x, 32, top, True, name)
        d, sc = _int_scales(s, 63, False)
        dmin, mn = _int_scales(m, 63, False)
        q = _k_weights(x, 32, d, sc, dmin, mn, 0, top).reshape(len(x), 4, 2, 32)
        qs = u8((q[:, :, 0, :] & 0xF) | (q[:, :, 1, :] & 0xF) << 4).reshape(len(x), 128)
        parts = [_f16_bytes(d), _f16_bytes(dmin), _pack_k4_scales(sc, mn)]
        if name == "q5_k":
            qh = np.zeros((len(x), 32), np.int64)
            for sb in range(8):
                qh |= (q[:, sb // 2, sb % 2, :] >> 4 & 1) << sb
            parts.append(u8(qh))
        return np.concatenate(parts + [qs], axis=1)
    # q6_k
    s, _ = _sub_scales(x, 16, 63, False, name)
    d, sc = _int_scales(s, 127, True)
    q = _k_weights(x, 16, d, sc, None, None, -32, 31) + 32
    qq = q.reshape(len(x), 2, 4, 32)
    ql = np.zeros((len(x), 2, 2, 32), np.int64)
    for g in range(4):
        ql[:, :, g % 2, :] |= (qq[:, :, g, :] & 0xF) << (4 * (g // 2))
    qh = _groups(q >> 4, 2)
    return np.concatenate([u8(ql.reshape(len(x), 128)), u8(qh), sc.astype(np.int8).view(np.uint8),
                           _f16_bytes(d)], axis=1)


def q8_0(x):
    """(nb, 32) floats -> (nb, 34) bytes, gguf.encode_q8_0's arithmetic: float32
    scale, reciprocal and products; the rounding of |v| + 0.5 in double."""
    d = (np.abs(x).max(axis=1) / np.float32(127.0)).astype(np.float32)
    inv = _div(np.float32(1.0), d).astype(np.float32)
    v = (x * inv[:, None]).astype(np.float32).astype(np.float64)
    q = (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int8)
    return np.concatenate([_f16_bytes(d), q.view(np.uint8)], axis=1)


def block_size(name):
    return QK if name == "q8_0" else qr.TYPES[IDS[name]][1]


def _e8m0(amax):
    """ggml's (uint8_t)(floorf(log2f(amax)) - 2 + 127), 0 where amax is 0.
    floorf(log2f(a)) is taken as floor of log2 in float64 rounded to float32:
    the two agree for every positive finite float32 (checked exhaustively
    against glibc's log2f), including those just below a power of two whose
    log2f rounds up to it.  Below 2^-125 the value is negative and ggml's
    cast to uint8_t keeps its low byte on x86-64 (as here; no weight is
    that small in practice)."""
    with np.errstate(divide="ignore"):
        fl = np.floor(np.log2(amax.astype(np.float64)).astype(np.float32))
    e = np.where(amax > 0, fl, -125).astype(np.int64) - 2 + 127
    return (e & 0xFF).astype(np.uint8)


def q_mxfp4(x):
    """Blocks of 32, (nb, 32) float32 -> (nb, 17): ggml's quantize_row_mxfp4_ref.
    The candidates' values k * d are exact (k of 2 bits, d a power of two),
    so |k d - x| rounds once in float32 as ggml's does; the first least
    error wins, as its strict comparison keeps."""
    e = _e8m0(np.abs(x).max(axis=1))
    d = np.ldexp(1.0, e.astype(np.int64) - 128).astype(np.float32)
    values = qr.E2M1_DOUBLED.astype(np.float32)
    q = np.empty(x.shape, np.int64)
    for b0 in range(0, len(x), 1 << 16):  # (blocks, 32, 16) float32 at a time
        sl = slice(b0, b0 + (1 << 16))
        with np.errstate(over="ignore"):  # the huge d of a wrapped e, as ggml's: errors of inf
            err = np.abs(values[None, None, :] * d[sl, None, None] - x[sl, :, None])
        q[sl] = err.argmin(axis=2)
    return np.concatenate([e[:, None], _pack_nibbles(q)], axis=1)


# Blocks quantized at a time: each is quantized alone, and the searches'
# float64 temporaries of a whole tensor would take gigabytes (an expert
# tensor of Qwen3-30B-A3B holds 200 million weights).
CHUNK_BLOCKS = 1 << 16


def quantize(values, name):
    """Row-major float32 values (a multiple of the block) -> encoded bytes."""
    qk = block_size(name)
    x = np.asarray(values, np.float32).reshape(-1, qk)
    if name == "q8_0":
        fn = q8_0
    elif name == "mxfp4":
        fn = q_mxfp4
    else:
        fn = lambda b: (q_32 if qk == QK else q_k)(b, name)  # noqa: E731
    return b"".join(fn(x[i:i + CHUNK_BLOCKS]).tobytes() for i in range(0, len(x), CHUNK_BLOCKS))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("type", choices=sorted(IDS) + sorted(MIXES))
    a = ap.parse_args(argv)
    r = gguf.Reader(a.input)
    w = gguf.Writer()
    for key, (vtype, value) in r.kv.items():
        if key in ("general.alignment", "general.file_type"):
            continue
        if vtype == gguf.ARRAY:
            w.add_array(key, value[0], value[1])
        else:
            w.add(key, vtype, value)
    w.add_uint32("general.alignment", gguf.DEFAULT_ALIGNMENT)
    w.add_uint32("general.file_type", FILE_TYPE[a.type])
    arch = r.kv["general.architecture"][1].decode()
    n_layers = r.kv.get(arch + ".block_count", (None, 0))[1]
    tied = "output.weight" not in r.tensors
    for name, t in r.tensors.items():
        shape = tuple(reversed(t["ne"]))
        values = qr.dequantize(t["type"], bytes(t["data"]))
        if len(shape) < 2 or not name.endswith("weight") or name.endswith(".ffn_gate_inp.weight"):
            w.add_tensor(name, shape, gguf.GGML_F32, values.tolist())
            continue
        ttype = mix_type(a.type, name, shape, n_layers, tied) if a.type in MIXES else a.type
        while ttype != "f16" and t["ne"][0] % block_size(ttype):
            ttype = FALLBACK.get(ttype, "f16")   # f16: as convert.py stores rows no block fits
        if ttype == "f16":
            w.add_tensor(name, shape, gguf.GGML_F16, values.tolist())
        else:
            w.add_tensor(name, shape, IDS[ttype], quantize(values, ttype))
    w.write(a.output)


if __name__ == "__main__":
    main()
