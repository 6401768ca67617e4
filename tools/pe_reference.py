#!/usr/bin/env python3
"""Closed forms of `run -m pe --json`'s values, computed here in NumPy from the
papers' formulas and the checkpoint's own tables, never from posenc's code.

    pe_reference.py PE.json MODEL_DIR [--keys KEYS.bin]

PE.json is the output of -m pe --json; MODEL_DIR the Hugging Face directory
the GGUF was converted from (config.json, model.safetensors).  KEYS.bin, for
RoPE: the layer's cached keys of a text, as test_pe_view writes them
(int32 n_layers, n_cells, kv_dim, head_size; int32 positions[n_cells]; then
float32 keys[n_layers][n_cells][kv_dim], rotated at their positions).

For every variant in the file it prints lines
    CHECK VARIANT NAME ERROR CONTROL
ERROR: the largest absolute difference between posenc's values and the closed
form; CONTROL: the same against the closed form with a plausible bug planted
(a check that cannot fail would show a CONTROL near ERROR).  The caller holds
each to its tolerance."""
import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import read_safetensors  # noqa: E402


def report(variant, name, value, reference, control):
    value = np.asarray(value, dtype=np.float64)
    err = float(np.nanmax(np.abs(value - reference))) if value.size else 0.0
    ctl = float(np.nanmax(np.abs(value - control))) if value.size else 0.0
    print("CHECK %s %s %.3e %.3e" % (variant, name, err, ctl))


def sinusoid(n, dim, swap=False):
    """Vaswani et al.: sin(pos / 10000^(2i/d)) at dim 2i, cos at 2i+1."""
    pos = np.arange(n)[:, None]
    i = np.arange(dim // 2)[None, :]
    angle = pos / 10000.0 ** (2 * i / dim)
    out = np.zeros((n, dim))
    out[:, 0::2], out[:, 1::2] = (np.cos(angle), np.sin(angle)) if swap else (np.sin(angle), np.cos(angle))
    return out


def cosine(vectors):
    norm = np.linalg.norm(vectors, axis=1)
    return vectors @ vectors.T / np.outer(norm, norm)


def rope_inv_freq(v, rope_dim, theta, orig_ctx, bug=False):
    """RoPE's frequencies theta^(-2j/d) after scaling: linear (positions / s),
    NTK (theta s^(d/(d-2))), YaRN as Hugging Face's modeling_rope_utils
    computes it (a ramp linear in the pair index j between the floored and
    ceiled correction dims of beta_fast 32 and beta_slow 1), and the YaRN
    paper's (yarn-paper: blend by rotations per original context between
    alpha 1 and beta 32, Peng et al.)."""
    j = np.arange(rope_dim // 2)
    s, mode = v["rope_factor"], v["rope_scaling"]
    if mode == "ntk":
        theta = theta * s ** (1.0 if bug else rope_dim / (rope_dim - 2))
    f = theta ** (-2.0 * j / rope_dim)
    if mode == "linear":
        f = f * (s if bug else 1.0 / s)
    if mode == "yarn":
        def correction_dim(rotations):
            return rope_dim * math.log(orig_ctx / (rotations * 2 * math.pi)) / (2 * math.log(theta))
        low = max(math.floor(correction_dim(32.0)), 0)
        high = min(math.ceil(correction_dim(1.0)), rope_dim - 1)
        interpolated = np.clip((j - low) / (high - low if high > low else 0.001), 0.0, 1.0)
        if bug:
            interpolated = 1.0 - interpolated
        f = interpolated * f / s + (1 - interpolated) * f
    if mode == "yarn-paper":
        ramp = np.clip((orig_ctx * f / (2 * math.pi) - 1.0) / (32.0 - 1.0), 0.0, 1.0)
        if bug:
            ramp = 1.0 - ramp
        f = (1 - ramp) * f / s + ramp * f
    if mode == "none" and bug:
        f = theta ** (-2.0 * (j + 1) / rope_dim)
    return f


def self_scores(k, f, head_size, n, neox):
    """k . R(d) k / head_size for d < n, k (..., head_size) at position 0:
    each rotated pair contributes (a^2 + b^2) cos(d f_j), the rest k_i^2."""
    half = len(f)
    a = k[..., :half] if neox else k[..., 0:2 * half:2]
    b = k[..., half:2 * half] if neox else k[..., 1:2 * half:2]
    power = a * a + b * b  # (..., half)
    rest = (k * k).sum(-1) - power.sum(-1)
    d = np.arange(n)[:, None]
    return (np.cos(d * f[None, :]) @ power.reshape(-1, half).T + rest.reshape(1, -1)) / head_size


def unrotate(keys, pos, f, neox):
    """Keys rotated at their positions, turned back to position 0."""
    half = len(f)
    out = keys.copy()
    ang = -pos[:, None] * f[None, :]
    c, s = np.cos(ang), np.sin(ang)
    ia = np.arange(half) if neox else 2 * np.arange(half)
    ib = ia + half if neox else ia + 1
    a, b = keys[..., ia], keys[..., ib]
    # keys (cells, heads, head_size); angles per cell
    c, s = c[:, None, :], s[:, None, :]
    out[..., ia] = a * c - b * s
    out[..., ib] = a * s + b * c
    return out


def t5_bucket(distance, n_buckets, max_distance):
    """Hugging Face's _relative_position_bucket, decoder form."""
    exact = n_buckets // 2
    if distance < exact:
        return distance
    large = exact + int(math.log(distance / exact) / math.log(max_distance / exact) * (n_buckets - exact))
    return min(large, n_buckets - 1)


def alibi_slopes(n, max_bias):
    """Press et al., for a power of two n, as max_bias generalises it."""
    return np.array([2.0 ** (-max_bias * (h + 1) / n) for h in range(n)])


def main():
    args = sys.argv[1:]
    keys_path = None
    if "--keys" in args:
        i = args.index("--keys")
        keys_path = args[i + 1]
        del args[i:i + 2]
    doc = json.load(open(args[0]))
    config = json.load(open(args[1] + "/config.json"))
    tensors = read_safetensors(args[1] + "/model.safetensors")
    keys = None
    if keys_path:
        with open(keys_path, "rb") as f:
            layers, cells, kv_dim, head_size = struct.unpack("<4i", f.read(16))
            pos = np.frombuffer(f.read(4 * cells), dtype="<i4").astype(np.float64)
            keys = np.frombuffer(f.read(), dtype="<f4").astype(np.float64).reshape(layers, cells, kv_dim // head_size, head_size)
    for v in doc["variants"]:
        name, n, dim = v["pe"], v["positions"], v["dim"]
        if "vectors" in v:
            vec = np.array(v["vectors"])
            if v["kind"] == "sinusoidal":
                report(name, "vectors", vec, sinusoid(n, dim), sinusoid(n, dim, swap=True))
                ref = cosine(sinusoid(n, dim))
            else:
                table = tensors["transformer.wpe.weight"].astype(np.float64)
                report(name, "vectors", vec, table[:n], table[1:n + 1])
                ref = cosine(table[:n])
            report(name, "cosine", np.array(v["cosine"]), ref, np.roll(ref, 1, axis=1))
        if "inv_freq" in v:
            hs = v["head_size"]
            rope_dim = 2 * len(v["inv_freq"])
            theta = v["params"]["rope_theta"]
            orig = v["params"].get("rope_orig_ctx", config["n_positions"])
            f = rope_inv_freq(v, rope_dim, theta, orig)
            bug = rope_inv_freq(v, rope_dim, theta, orig, bug=True)
            got = np.array(v["inv_freq"])
            report(name, "inv_freq_rel", got / f - 1.0, 0.0, got / bug - 1.0)
            report(name, "wavelength_rel", np.array(v["wavelength"]) / (2 * math.pi / f) - 1.0, 0.0,
                   np.array(v["wavelength"]) / (2 * math.pi / bug) - 1.0)
            m = 0.1 * math.log(v["rope_factor"]) + 1.0 \
                if v["rope_scaling"] in ("yarn", "yarn-paper") else 1.0
            report(name, "attn_factor", v["attn_factor"], m, m + 0.1)
            # the expectation over Gaussian vectors: each pair 2 m^2 cos(d f_j) (q and k
            # both carry YaRN's attention factor m on their rotated dims), the rest 1
            d = np.arange(n)[:, None]
            expect = (2 * m * m * np.cos(d * f[None, :]).sum(1) + (hs - rope_dim)) / hs
            expect_bug = (2 * m * m * np.cos(d * bug[None, :]).sum(1) + (hs - rope_dim)) / hs
            report(name, "qk_random", np.array(v["qk_random"]), expect, expect_bug)
            if keys is not None and v["qk_keys"] is not None:
                neox = v["params"]["rope_pairing"] == "neox"
                got = np.array(v["qk_keys"])
                ref = np.stack([self_scores(unrotate(keys[l], pos, f, neox), f, hs, n, neox).mean(1)
                                for l in range(keys.shape[0])])
                ctl = np.stack([self_scores(unrotate(keys[l], pos, f, not neox), f, hs, n, not neox).mean(1)
                                for l in range(keys.shape[0])])
                report(name, "qk_keys", got, ref, ctl)
        if "bias" in v:
            heads = v["n_heads"]
            got = np.array([[[np.nan if x is None else x for x in row] for row in hm] for hm in v["bias"]])
            q, k = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
            dist = q - k
            masked = np.isnan(got)
            print("CHECK %s masked %d %d" % (name, int((masked != (dist < 0)[None]).sum()), int(masked.sum())))
            if v["kind"] == "alibi":
                slopes = alibi_slopes(heads, v["params"]["alibi_max_bias"])
                report(name, "slopes", np.array(v["slopes"]), slopes, np.roll(slopes, 1))
                ref = np.where(dist[None] >= 0, -slopes[:, None, None] * dist[None], np.nan)
                report(name, "bias", got, ref, -ref)
            if v["kind"] == "t5":
                nb = config.get("relative_attention_num_buckets", 32)
                md = config.get("relative_attention_max_distance", 128)
                bucket = np.array([t5_bucket(d, nb, md) for d in range(n)])
                report(name, "bucket", np.array(v["bucket"]), bucket,
                       np.array([t5_bucket(d + 1, nb, md) for d in range(n)]))
                table = tensors["transformer.relative_attention_bias.weight"].astype(np.float64)
                ref = np.where(dist[None] >= 0, table[bucket[np.clip(dist, 0, None)]].transpose(2, 0, 1), np.nan)
                ctl_bucket = np.array([t5_bucket(d + 1, nb, md) for d in range(n)])
                ctl = np.where(dist[None] >= 0, table[ctl_bucket[np.clip(dist, 0, None)]].transpose(2, 0, 1), np.nan)
                report(name, "bias", got, ref, ctl)


if __name__ == "__main__":
    main()
