#!/usr/bin/python3
"""NumPy dequantizers of ggml's block types and the float64 reference forward
pass (tools/reference.py) on a quantized llama GGUF.

Written from the block layouts, independently of posenc's C code: each
dequantizer computes in float32 the operations ggml's reference
dequantize_row_* performs, in the same order, so its bits equal ggml's
(--check-fixture verifies that against tests/fixtures/quant_ref.h, whose
expected values come from ggml itself).  The model's weights are then
those floats in float64.

    quant_reference.py --check-fixture tests/fixtures/quant_ref.h
    quant_reference.py MODEL.gguf --nll LOGITS.jsonl
    quant_reference.py MODEL.gguf --rmse F32.gguf [--against RMSE.json]

--nll reads the --logits-out file of `run MODEL.gguf -m ppl --bos --chunks 1
--ctx C` (the tokens it scored are the window's targets; the window is BOS
and all but the last of them), runs the reference on that window and prints
one JSON object: the reference's mean NLL, the engine's (from the file),
their difference and the largest per-token difference of log-probabilities.

--rmse prints, as JSON, the RMSE of every matrix of MODEL against the same
matrix of F32.gguf (keyed by type, then tensor); with --against (such a
JSON under "rmse", e.g. of llama-quantize's files of the same model) it prints instead
the largest ratio of MODEL's RMSE to the other's on the same tensor and
type, and the tensor it occurs at.

Stdlib + NumPy only.
"""
import argparse
import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf  # noqa: E402
import reference as ref  # noqa: E402

QK, QK_K = 32, 256


def _f16(blocks, at):
    """The f16 at byte `at` of every block, as float32."""
    return blocks[:, at:at + 2].copy().view("<f2").astype(np.float32)[:, 0]


def _nibbles(qs):
    """(nb, 16) bytes -> (nb, 32): low nibbles are weights 0..15, high 16..31."""
    return np.concatenate([qs & 0xF, qs >> 4], axis=1).astype(np.int32)


def _bit5(qh):
    """(nb, 4) bytes, a little-endian uint32 per block -> its 32 bits << 4."""
    bits = qh.copy().view("<u4")
    return ((bits >> np.arange(32, dtype=np.uint32)) & 1).astype(np.int32) << 4


def _k_index():
    """For the 2-bit-group layouts (Q2_K, Q3_K, Q6_K), per weight w of a
    super-block: half h, group g and lane l (w = 128 h + 32 g + l)."""
    w = np.arange(QK_K)
    return w // 128, w % 128 // 32, w % 32


def _scale_min_k4(s):
    """Q4_K/Q5_K's 12 scale bytes (nb, 12) -> 6-bit scales and mins (nb, 8)."""
    s = s.astype(np.int32)
    sc = np.empty((len(s), 8), np.int32)
    mn = np.empty((len(s), 8), np.int32)
    sc[:, :4], mn[:, :4] = s[:, 0:4] & 63, s[:, 4:8] & 63
    sc[:, 4:] = (s[:, 8:12] & 0xF) | (s[:, 0:4] >> 6) << 4
    mn[:, 4:] = (s[:, 8:12] >> 4) | (s[:, 4:8] >> 6) << 4
    return sc, mn


def _scales_q3_k(s):
    """Q3_K's 12 scale bytes (nb, 12) -> 16 scales (nb, 16), minus 32."""
    s = s.astype(np.int32)
    j = np.arange(16)
    low = np.where(j < 8, s[:, j % 8] & 0xF, s[:, j % 8] >> 4)
    high = s[:, 8 + j % 4] >> (2 * (j // 4)) & 3
    return (low | high << 4) - 32


def _k_result(d, sc, q, dmin=None, mn=None, sub=16):
    """(d*sc)*q [- dmin*mn] per weight in float32, as ggml rounds it."""
    dl = np.repeat(d[:, None] * sc.astype(np.float32), sub, axis=1)
    y = dl * q.astype(np.float32)
    if dmin is not None:
        y = y - np.repeat(dmin[:, None] * mn.astype(np.float32), sub, axis=1)
    return y


def deq_q4_0(b):
    return (_nibbles(b[:, 2:18]) - 8).astype(np.float32) * _f16(b, 0)[:, None]


def deq_q4_1(b):
    return _nibbles(b[:, 4:20]).astype(np.float32) * _f16(b, 0)[:, None] + _f16(b, 2)[:, None]


def deq_q5_0(b):
    q = (_nibbles(b[:, 6:22]) | _bit5(b[:, 2:6])) - 16
    return q.astype(np.float32) * _f16(b, 0)[:, None]


def deq_q5_1(b):
    q = _nibbles(b[:, 8:24]) | _bit5(b[:, 4:8])
    return q.astype(np.float32) * _f16(b, 0)[:, None] + _f16(b, 2)[:, None]


def deq_q2_k(b):
    h, g, l = _k_index()
    qs = b[:, 16:80].astype(np.int32)
    q = qs[:, 32 * h + l] >> (2 * g) & 3
    sm = b[:, 0:16].astype(np.int32)
    return _k_result(_f16(b, 80), sm & 0xF, q, _f16(b, 82), sm >> 4)


def deq_q3_k(b):
    h, g, l = _k_index()
    hm, qs = b[:, 0:32].astype(np.int32), b[:, 32:96].astype(np.int32)
    q = (qs[:, 32 * h + l] >> (2 * g) & 3) - np.where(hm[:, l] >> (4 * h + g) & 1, 0, 4)
    return _k_result(_f16(b, 108), _scales_q3_k(b[:, 96:108]), q)


def _q45_k(b, qs_at, qh_at):
    s = np.arange(8)
    qs = b[:, qs_at:qs_at + 128].astype(np.int32).reshape(-1, 4, 32)[:, s // 2, :]  # (nb, 8, 32)
    q = np.where((s % 2)[None, :, None] == 1, qs >> 4, qs & 0xF)
    if qh_at is not None:
        qh = b[:, qh_at:qh_at + 32].astype(np.int32)
        q = q | (qh[:, None, :] >> s[None, :, None] & 1) << 4
    sc, mn = _scale_min_k4(b[:, 4:16])
    return _k_result(_f16(b, 0), sc, q.reshape(-1, QK_K), _f16(b, 2), mn, sub=32)


def deq_q4_k(b):
    return _q45_k(b, 16, None)


def deq_q5_k(b):
    return _q45_k(b, 48, 16)


def _e2m1(c):
    """E2M1 code c (OCP MX spec): sign bit 3, exponent bits 1-2 (bias 1),
    mantissa bit 0; exponent 0 is subnormal (0 or 0.5).  -0 is 0."""
    e, m = c >> 1 & 3, c & 1
    v = 0.5 * m if e == 0 else 2.0 ** (e - 1) * (1 + 0.5 * m)
    return -v if c & 8 and v else v


# ggml keeps the values doubled (kvalues_mxfp4: 0 1 2 3 4 6 8 12 and
# negatives), all integers, and halves the scale instead.
E2M1_DOUBLED = np.array([2 * _e2m1(c) for c in range(16)], np.float64)


def deq_mxfp4(b):
    """An E8M0 byte e, then 16 bytes of E2M1 nibbles (as Q4_0's): x = (2q) *
    2^(e - 128), ggml's doubled value times its half scale, computed in
    float64 (exact) and rounded once to float32 -- the same bits as ggml's
    float product, which is exact too unless it overflows to infinity."""
    d = np.ldexp(1.0, b[:, 0].astype(np.int64) - 128)
    y = E2M1_DOUBLED[_nibbles(b[:, 1:17])] * d[:, None]
    with np.errstate(over="ignore"):  # e near 255: ggml's infinities
        return y.astype(np.float32)


def deq_q6_k(b):
    h, g, l = _k_index()
    ql, qh = b[:, 0:128].astype(np.int32), b[:, 128:192].astype(np.int32)
    lo = ql[:, 64 * h + 32 * (g % 2) + l]
    q = (np.where(g < 2, lo & 0xF, lo >> 4) | (qh[:, 32 * h + l] >> (2 * g) & 3) << 4) - 32
    sc = b[:, 192:208].copy().view(np.int8).astype(np.int32)
    return _k_result(_f16(b, 208), sc, q)


# ggml type id: (name, weights per block, bytes per block, dequantizer)
TYPES = {
    2: ("q4_0", QK, 18, deq_q4_0), 3: ("q4_1", QK, 20, deq_q4_1),
    6: ("q5_0", QK, 22, deq_q5_0), 7: ("q5_1", QK, 24, deq_q5_1),
    10: ("q2_k", QK_K, 84, deq_q2_k), 11: ("q3_k", QK_K, 110, deq_q3_k),
    12: ("q4_k", QK_K, 144, deq_q4_k), 13: ("q5_k", QK_K, 176, deq_q5_k),
    14: ("q6_k", QK_K, 210, deq_q6_k), 39: ("mxfp4", QK, 17, deq_mxfp4),
}


def dequantize(ggml_type, raw):
    """Raw tensor bytes of any type posenc reads -> float32 array."""
    if ggml_type == gguf.GGML_F32:
        return np.frombuffer(raw, "<f4").astype(np.float32)
    if ggml_type == gguf.GGML_F16:
        return np.frombuffer(raw, "<f2").astype(np.float32)
    if ggml_type == gguf.GGML_BF16:
        return (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
    if ggml_type == gguf.GGML_Q8_0:
        b = np.frombuffer(raw, np.uint8).reshape(-1, 34)
        return (b[:, 2:].view(np.int8).astype(np.float32) * _f16(b, 0)[:, None]).reshape(-1)
    _, _, size, fn = TYPES[ggml_type]
    return fn(np.frombuffer(raw, np.uint8).reshape(-1, size)).reshape(-1)


# ---------------------------------------------------------------------------

def check_fixture(path):
    """Every block of quant_ref.h dequantized here hashes as ggml's did."""
    text = open(path).read()
    failures = 0
    for tid, n, name in re.findall(r"\{(\d+), (\d+), (\w+)_blocks,", text):
        hexs = "".join(re.findall(r'"([0-9a-f]+)"', text.split("%s_blocks[] =" % name)[1].split(";")[0]))
        hashes = [int(h, 16) for h in re.findall(r"0x([0-9a-f]{16})u",
                                                  text.split("%s_hash[] =" % name)[1].split("};")[0])]
        qk = TYPES[int(tid)][1]
        with np.errstate(all="ignore"):  # the fixture's infinite and NaN scales
            y = dequantize(int(tid), bytes.fromhex(hexs)).reshape(int(n), qk)
        for i in range(int(n)):
            h = 0xCBF29CE484222325
            for byte in y[i].astype("<f4").tobytes():
                h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
            if h != hashes[i]:
                print("%s block %d differs from ggml's" % (name, i))
                failures += 1
        print("%s: %d blocks checked" % (name, int(n)))
    return failures


def load_gguf(path):
    """A llama GGUF (as tools/convert.py and llama-quantize write it) as a
    reference.Model with float64 weights (y = W @ x, W of shape (rows, cols))."""
    r = gguf.Reader(path)

    def kv(key):
        return r.kv["llama." + key][1]

    def t(name):
        info = r.tensors[name]
        a = dequantize(info["type"], bytes(info["data"])).astype(np.float64)
        return a.reshape(tuple(reversed(info["ne"])))

    dim, n_layers = kv("embedding_length"), kv("block_count")
    n_heads, n_kv = kv("attention.head_count"), kv("attention.head_count_kv")
    emb = t("token_embd.weight")
    cfg = ref.Config(dim, kv("feed_forward_length"), n_layers, n_heads, n_kv, emb.shape[0],
                     kv("context_length"), shared_classifier="output.weight" not in r.tensors)
    layers = [[t("blk.%d.%s.weight" % (i, n)) for i in range(n_layers)]
              for n in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm",
                        "ffn_gate", "ffn_down", "ffn_up")]
    stacked = [np.stack(x) for x in layers]
    wcls = emb if cfg.shared_classifier else t("output.weight")
    return ref.Model(cfg, emb, *stacked, t("output_norm.weight"), wcls)


def nll_against(model, jsonl):
    rows = [json.loads(line) for line in open(jsonl)]
    targets = [row["token"] for row in rows]
    ids = [1] + targets[:-1]  # BOS, then the window's tokens
    lg = ref.logits(model, ids)
    lg = lg - lg.max(axis=1, keepdims=True)
    logp = lg - np.log(np.exp(lg).sum(axis=1, keepdims=True))
    ref_lp = logp[np.arange(len(ids)), targets]
    eng_lp = np.array([row["logprob"] for row in rows])
    return {"tokens": len(ids), "nll_reference": float(-ref_lp.mean()),
            "nll_engine": float(-eng_lp.mean()),
            "nll_diff": float(ref_lp.mean() - eng_lp.mean()),
            "max_logprob_diff": float(np.abs(ref_lp - eng_lp).max())}


def rmse_by_tensor(path, f32_path):
    r, f = gguf.Reader(path), gguf.Reader(f32_path)
    out = {}
    for name, t in r.tensors.items():
        if len(t["ne"]) < 2:
            continue
        x = dequantize(f.tensors[name]["type"], bytes(f.tensors[name]["data"])).astype(np.float64)
        y = dequantize(t["type"], bytes(t["data"])).astype(np.float64)
        out.setdefault(TYPES[t["type"]][0], {})[name] = float(np.sqrt(np.mean((y - x) ** 2)))
    return out


def worst_ratio(mine, theirs):
    worst = (0.0, None)
    for ttype, tensors in mine.items():
        for name, e in tensors.items():
            if name in theirs.get(ttype, {}):
                worst = max(worst, (e / theirs[ttype][name], "%s %s" % (ttype, name)))
    return {"max_ratio": worst[0], "at": worst[1]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", help="llama GGUF")
    ap.add_argument("--nll", metavar="JSONL", help="the engine's --logits-out of one window")
    ap.add_argument("--check-fixture", metavar="QUANT_REF_H")
    ap.add_argument("--rmse", metavar="F32_GGUF", help="RMSE per matrix against this file")
    ap.add_argument("--against", metavar="RMSE_JSON", help="with --rmse: the worst ratio to these")
    a = ap.parse_args(argv)
    if a.check_fixture:
        sys.exit(1 if check_fixture(a.check_fixture) else 0)
    if a.model and a.rmse:
        rmse = rmse_by_tensor(a.model, a.rmse)
        print(json.dumps(worst_ratio(rmse, json.load(open(a.against))["rmse"]) if a.against else rmse))
        return
    if not a.model or not a.nll:
        ap.error("MODEL and --nll (or --rmse) are required")
    print(json.dumps(nll_against(load_gguf(a.model), a.nll)))


if __name__ == "__main__":
    main()
