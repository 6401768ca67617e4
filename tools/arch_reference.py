#!/usr/bin/python3
"""Tiny random Hugging Face checkpoints of each architecture family, and a
float64 NumPy forward pass for them written from the Hugging Face modeling
code (modeling_qwen2.py, modeling_gpt_neox.py, modeling_bloom.py,
modeling_gpt_bigcode.py, modeling_phi.py, modeling_mpt.py, modeling_gemma.py,
modeling_mistral.py),
independently of posenc's C code.

    arch_reference.py make FAMILY DIR [--seed N] [--tied]
        writes DIR/config.json, DIR/model.safetensors and a byte-level
        vocabulary (vocab.json + merges.txt: the 256 bytes, no merges), at the
        family's real layout (GQA for qwen2, partial rotary and fused
        per-head qkv for gpt_neox, multi-query for gpt_bigcode and gemma,
        gemma's head size 32 with 4 heads in dim 64, ...), dim 64, 2
        layers, deterministic for a seed.
    arch_reference.py logits DIR --ids 1,2,3 [--pos0 N] [--break FEATURE]
        prints the logits of every position, one line of numbers each.
        --break computes them with the family's distinctive feature broken,
        for the tests' negative controls:
          qkv-bias      qwen2: q/k/v biases left out
          parallel      gpt_neox: sequential residual instead of parallel
          full-rotary   gpt_neox: rotary over the whole head
          embed-norm    bloom: word_embeddings_layernorm skipped
          qkv-order     bloom, gpt_neox: the per-head q|k|v interleave read as q|k|v blocks
          positions     gpt_bigcode: learned positions left out
          shared-norm   phi: the feed-forward without the attention's LayerNorm (reads x)
          clamp         mpt: clip_qkv not applied
          norm-plus-one gemma: RMSNorm scaled by w instead of (1 + w)
          window        mistral: no sliding window (every earlier position seen)

Stdlib + NumPy only.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_tiny import byte_alphabet, write_safetensors  # noqa: E402
from reference import read_safetensors  # noqa: E402

FAMILIES = ("qwen2", "gpt_neox", "bloom", "gpt_bigcode", "phi", "mpt", "gemma", "mistral")
WINDOW = 5   # mistral's sliding window: short, so that the tests' prompts leave it
DIM, LAYERS, HEADS, VOCAB, CTX = 64, 2, 4, 256, 64


# ---- writing a checkpoint ------------------------------------------------------------------

def per_head_fused_block(t, p, attn, d, ff, r, norm):
    """A GPT-NeoX or BLOOM block's tensors (they differ in the attention's name)."""
    for n in ("input_layernorm", "post_attention_layernorm"):
        t[p + n + ".weight"], t[p + n + ".bias"] = norm(d), r(d, scale=0.1)
    t[p + attn + ".query_key_value.weight"] = r(3 * d, d)
    t[p + attn + ".query_key_value.bias"] = r(3 * d, scale=0.5)
    t[p + attn + ".dense.weight"], t[p + attn + ".dense.bias"] = r(d, d), r(d, scale=0.1)
    t[p + "mlp.dense_h_to_4h.weight"], t[p + "mlp.dense_h_to_4h.bias"] = r(ff, d), r(ff, scale=0.1)
    t[p + "mlp.dense_4h_to_h.weight"], t[p + "mlp.dense_4h_to_h.bias"] = r(d, ff), r(d, scale=0.1)


def random_weights(family, rng, tied):
    """(config, tensors) of the family at its real layout and naming."""
    d, L, nh, V = DIM, LAYERS, HEADS, VOCAB
    hs = d // nh

    def r(*shape, scale=0.2):
        return rng.normal(0.0, scale, size=shape)

    def norm(n):
        return 1.0 + r(n, scale=0.1)

    t = {}
    if family in ("qwen2", "mistral"):
        nkv, ff = 2, 128
        qwen2 = family == "qwen2"
        cfg = {"model_type": family, "hidden_size": d,
               "intermediate_size": ff, "num_hidden_layers": L, "num_attention_heads": nh,
               "num_key_value_heads": nkv, "max_position_embeddings": CTX, "rms_norm_eps": 1e-6,
               "rope_theta": 1000000.0 if qwen2 else 10000.0, "tie_word_embeddings": tied,
               "vocab_size": V, "hidden_act": "silu"}
        if not qwen2:
            cfg["sliding_window"] = WINDOW
        t["model.embed_tokens.weight"] = r(V, d, scale=1.0)
        for l in range(L):
            p = "model.layers.%d." % l
            t[p + "input_layernorm.weight"] = norm(d)
            for n, rows in (("q", d), ("k", nkv * hs), ("v", nkv * hs)):
                t[p + "self_attn.%s_proj.weight" % n] = r(rows, d)
                if qwen2:
                    t[p + "self_attn.%s_proj.bias" % n] = r(rows, scale=0.5)
            t[p + "self_attn.o_proj.weight"] = r(d, d)
            t[p + "post_attention_layernorm.weight"] = norm(d)
            t[p + "mlp.gate_proj.weight"] = r(ff, d)
            t[p + "mlp.up_proj.weight"] = r(ff, d)
            t[p + "mlp.down_proj.weight"] = r(d, ff)
        t["model.norm.weight"] = norm(d)
        if not tied:
            t["lm_head.weight"] = r(V, d)
    elif family == "gpt_neox":
        ff = 4 * d
        cfg = {"model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"], "hidden_size": d,
               "intermediate_size": ff, "num_hidden_layers": L, "num_attention_heads": nh,
               "max_position_embeddings": CTX, "rotary_pct": 0.25, "rotary_emb_base": 10000,
               "layer_norm_eps": 1e-5, "use_parallel_residual": True, "hidden_act": "gelu",
               "tie_word_embeddings": False, "vocab_size": V}
        t["gpt_neox.embed_in.weight"] = r(V, d, scale=1.0)
        for l in range(L):
            per_head_fused_block(t, "gpt_neox.layers.%d." % l, "attention", d, ff, r, norm)
        t["gpt_neox.final_layer_norm.weight"] = norm(d)
        t["gpt_neox.final_layer_norm.bias"] = r(d, scale=0.1)
        t["embed_out.weight"] = r(V, d)
    elif family == "bloom":
        cfg = {"model_type": "bloom", "architectures": ["BloomForCausalLM"], "hidden_size": d,
               "n_layer": L, "n_head": nh, "layer_norm_epsilon": 1e-5, "vocab_size": V,
               "seq_length": CTX, "tie_word_embeddings": True}
        t["transformer.word_embeddings.weight"] = r(V, d, scale=1.0)
        t["transformer.word_embeddings_layernorm.weight"] = norm(d)
        t["transformer.word_embeddings_layernorm.bias"] = r(d, scale=0.1)
        for l in range(L):
            per_head_fused_block(t, "transformer.h.%d." % l, "self_attention", d, 4 * d, r, norm)
        t["transformer.ln_f.weight"], t["transformer.ln_f.bias"] = norm(d), r(d, scale=0.1)
    elif family == "gpt_bigcode":
        cfg = {"model_type": "gpt_bigcode", "architectures": ["GPTBigCodeForCausalLM"], "n_embd": d,
               "n_layer": L, "n_head": nh, "n_positions": CTX, "n_inner": 4 * d,
               "multi_query": True, "layer_norm_epsilon": 1e-5,
               "activation_function": "gelu_pytorch_tanh", "vocab_size": V,
               "tie_word_embeddings": True}
        t["transformer.wte.weight"] = r(V, d, scale=1.0)
        t["transformer.wpe.weight"] = r(CTX, d, scale=0.5)
        for l in range(L):
            p = "transformer.h.%d." % l
            for n in ("ln_1", "ln_2"):
                t[p + n + ".weight"], t[p + n + ".bias"] = norm(d), r(d, scale=0.1)
            t[p + "attn.c_attn.weight"] = r(d + 2 * hs, d)
            t[p + "attn.c_attn.bias"] = r(d + 2 * hs, scale=0.5)
            t[p + "attn.c_proj.weight"], t[p + "attn.c_proj.bias"] = r(d, d), r(d, scale=0.1)
            t[p + "mlp.c_fc.weight"], t[p + "mlp.c_fc.bias"] = r(4 * d, d), r(4 * d, scale=0.1)
            t[p + "mlp.c_proj.weight"], t[p + "mlp.c_proj.bias"] = r(d, 4 * d), r(d, scale=0.1)
        t["transformer.ln_f.weight"], t["transformer.ln_f.bias"] = norm(d), r(d, scale=0.1)
    elif family == "phi":
        ff = 4 * d
        cfg = {"model_type": "phi", "architectures": ["PhiForCausalLM"], "hidden_size": d,
               "intermediate_size": ff, "num_hidden_layers": L, "num_attention_heads": nh,
               "num_key_value_heads": nh, "max_position_embeddings": CTX,
               "partial_rotary_factor": 0.5, "rope_theta": 10000.0, "layer_norm_eps": 1e-5,
               "hidden_act": "gelu_new", "qk_layernorm": False, "tie_word_embeddings": False,
               "vocab_size": V}
        t["model.embed_tokens.weight"] = r(V, d, scale=1.0)
        for l in range(L):
            p = "model.layers.%d." % l
            t[p + "input_layernorm.weight"], t[p + "input_layernorm.bias"] = norm(d), r(d, scale=0.1)
            for n in ("q", "k", "v"):
                t[p + "self_attn.%s_proj.weight" % n] = r(d, d)
                t[p + "self_attn.%s_proj.bias" % n] = r(d, scale=0.5)
            t[p + "self_attn.dense.weight"], t[p + "self_attn.dense.bias"] = r(d, d), r(d, scale=0.1)
            t[p + "mlp.fc1.weight"], t[p + "mlp.fc1.bias"] = r(ff, d), r(ff, scale=0.1)
            t[p + "mlp.fc2.weight"], t[p + "mlp.fc2.bias"] = r(d, ff), r(d, scale=0.1)
        t["model.final_layernorm.weight"] = norm(d)
        t["model.final_layernorm.bias"] = r(d, scale=0.1)
        t["lm_head.weight"], t["lm_head.bias"] = r(V, d), r(V, scale=0.5)
    elif family == "mpt":
        cfg = {"model_type": "mpt", "architectures": ["MPTForCausalLM"], "d_model": d,
               "n_layers": L, "n_heads": nh, "max_seq_len": CTX, "expansion_ratio": 4,
               "vocab_size": V, "no_bias": True, "learned_pos_emb": False,
               "layer_norm_epsilon": 1e-5,
               "attn_config": {"alibi": True, "alibi_bias_max": 8, "clip_qkv": 0.6}}
        t["transformer.wte.weight"] = r(V, d, scale=1.0)
        for l in range(L):
            p = "transformer.blocks.%d." % l
            t[p + "norm_1.weight"], t[p + "norm_2.weight"] = norm(d), norm(d)
            t[p + "attn.Wqkv.weight"] = r(3 * d, d)
            t[p + "attn.out_proj.weight"] = r(d, d)
            t[p + "ffn.up_proj.weight"], t[p + "ffn.down_proj.weight"] = r(4 * d, d), r(d, 4 * d)
        t["transformer.norm_f.weight"] = norm(d)
    elif family == "gemma":
        nkv, hs, ff = 1, 32, 128
        cfg = {"model_type": "gemma", "architectures": ["GemmaForCausalLM"], "hidden_size": d,
               "intermediate_size": ff, "num_hidden_layers": L, "num_attention_heads": nh,
               "num_key_value_heads": nkv, "head_dim": hs, "max_position_embeddings": CTX,
               "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "hidden_act": "gelu",
               "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True,
               "vocab_size": V}
        t["model.embed_tokens.weight"] = r(V, d, scale=0.2)
        for l in range(L):
            p = "model.layers.%d." % l
            t[p + "input_layernorm.weight"] = r(d, scale=0.3)      # HF stores w of (1 + w)
            t[p + "self_attn.q_proj.weight"] = r(nh * hs, d)
            t[p + "self_attn.k_proj.weight"] = r(nkv * hs, d)
            t[p + "self_attn.v_proj.weight"] = r(nkv * hs, d)
            t[p + "self_attn.o_proj.weight"] = r(d, nh * hs)
            t[p + "post_attention_layernorm.weight"] = r(d, scale=0.3)
            t[p + "mlp.gate_proj.weight"] = r(ff, d)
            t[p + "mlp.up_proj.weight"] = r(ff, d)
            t[p + "mlp.down_proj.weight"] = r(d, ff)
        t["model.norm.weight"] = r(d, scale=0.3)
    else:
        raise ValueError("unknown family %r (one of %s)" % (family, ", ".join(FAMILIES)))
    return cfg, t


def make(family, directory, seed, tied):
    rng = np.random.default_rng(seed)
    cfg, tensors = random_weights(family, rng, tied)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    write_safetensors(os.path.join(directory, "model.safetensors"),
                      {n: (a.shape, np.ascontiguousarray(a, dtype="<f4")) for n, a in tensors.items()})
    chars = byte_alphabet()
    with open(os.path.join(directory, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({chars[b]: b for b in range(256)}, f, ensure_ascii=False)
    with open(os.path.join(directory, "merges.txt"), "w") as f:
        f.write("#version: 0.2\n")


# ---- the forward pass -------------------------------------------------------------------------

def rmsnorm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def layernorm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def rotate_half_rope(x, positions, rot, theta):
    """HF apply_rotary_pos_emb on the first `rot` dims of (heads, n, hs)."""
    inv = 1.0 / theta ** (np.arange(0, rot, 2) / rot)
    ang = positions[:, None] * inv[None, :]
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))
    xr, xp = x[..., :rot], x[..., rot:]
    half = rot // 2
    rotated = np.concatenate([-xr[..., half:], xr[..., :half]], -1)
    return np.concatenate([xr * cos + rotated * sin, xp], -1)


def alibi_slopes(n, max_bias=8.0):
    """BLOOM's rule (= MPT's when n is a power of two)."""
    n2 = 1 << (n.bit_length() - 1)
    m0, m1 = 2.0 ** (-max_bias / n2), 2.0 ** (-max_bias / 2 / n2)
    return np.array([m0 ** (h + 1) if h < n2 else m1 ** (2 * (h - n2) + 1) for h in range(n)])


def attend(q, k, v, positions, bias=None, window=None):
    """q (heads, n, hs), k and v (kv_heads, n, hs): causal softmax attention;
    with a window, a query sees the keys of the last `window` positions."""
    rep = q.shape[0] // k.shape[0]
    k, v = np.repeat(k, rep, 0), np.repeat(v, rep, 0)
    s = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
    if bias is not None:
        s = s + bias
    s = np.where(positions[None, :] > positions[:, None], -np.inf, s)
    if window:
        s = np.where(positions[:, None] - positions[None, :] >= window, -np.inf, s)
    o = softmax(s) @ v                                    # (heads, n, hs)
    return o.transpose(1, 0, 2).reshape(q.shape[1], -1)


def heads(x, n):
    return x.reshape(x.shape[0], n, -1).transpose(1, 0, 2)


def split_per_head_qkv(qkv, nh, broken):
    """HF BLOOM / GPT-NeoX: the fused output is (heads, 3, hs) per token."""
    n = qkv.shape[0]
    if broken:   # read as q | k | v blocks: the order the converter must undo
        return [heads(p, nh) for p in np.split(qkv, 3, -1)]
    h = qkv.reshape(n, nh, 3, -1)
    return [h[:, :, i].transpose(1, 0, 2) for i in range(3)]


def forward(directory, ids, pos0=0, broken=None):
    cfg = json.load(open(os.path.join(directory, "config.json")))
    w = read_safetensors(os.path.join(directory, "model.safetensors"))
    mt = cfg["model_type"]
    ids = np.asarray(ids)
    n = len(ids)
    pos = pos0 + np.arange(n, dtype=np.float64)
    if mt in ("qwen2", "mistral"):
        d, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
        window = None if broken == "window" else cfg.get("sliding_window")
        eps, theta, hs = cfg["rms_norm_eps"], cfg["rope_theta"], d // nh
        x = w["model.embed_tokens.weight"][ids]
        for l in range(cfg["num_hidden_layers"]):
            p = "model.layers.%d." % l
            h = rmsnorm(x, w[p + "input_layernorm.weight"], eps)
            proj = {}
            for name in "qkv":
                proj[name] = h @ w[p + "self_attn.%s_proj.weight" % name].T
                bias = p + "self_attn.%s_proj.bias" % name
                if bias in w and broken != "qkv-bias":
                    proj[name] = proj[name] + w[bias]
            q = rotate_half_rope(heads(proj["q"], nh), pos, hs, theta)
            k = rotate_half_rope(heads(proj["k"], nkv), pos, hs, theta)
            x = x + attend(q, k, heads(proj["v"], nkv), pos, window=window) @ w[p + "self_attn.o_proj.weight"].T
            h = rmsnorm(x, w[p + "post_attention_layernorm.weight"], eps)
            g = h @ w[p + "mlp.gate_proj.weight"].T
            x = x + (g / (1 + np.exp(-g)) * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
        x = rmsnorm(x, w["model.norm.weight"], eps)
        head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else w["lm_head.weight"]
        return x @ head.T
    if mt == "gpt_neox":
        d, nh, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
        hs = d // nh
        rot = hs if broken == "full-rotary" else int(hs * cfg["rotary_pct"])
        x = w["gpt_neox.embed_in.weight"][ids]

        def lin(h, name):
            return h @ w[name + ".weight"].T + w[name + ".bias"]

        for l in range(cfg["num_hidden_layers"]):
            p = "gpt_neox.layers.%d." % l
            h = layernorm(x, w[p + "input_layernorm.weight"], w[p + "input_layernorm.bias"], eps)
            q, k, v = split_per_head_qkv(lin(h, p + "attention.query_key_value"), nh, broken == "qkv-order")
            q = rotate_half_rope(q, pos, rot, cfg["rotary_emb_base"])
            k = rotate_half_rope(k, pos, rot, cfg["rotary_emb_base"])
            a = lin(attend(q, k, v, pos), p + "attention.dense")
            parallel = cfg.get("use_parallel_residual", True) and broken != "parallel"
            if not parallel:
                x = x + a
            h2 = layernorm(x, w[p + "post_attention_layernorm.weight"], w[p + "post_attention_layernorm.bias"], eps)
            m = lin(gelu_erf(lin(h2, p + "mlp.dense_h_to_4h")), p + "mlp.dense_4h_to_h")
            x = x + a + m if parallel else x + m
        x = layernorm(x, w["gpt_neox.final_layer_norm.weight"], w["gpt_neox.final_layer_norm.bias"], eps)
        return x @ w["embed_out.weight"].T
    if mt == "bloom":
        d, nh, eps = cfg["hidden_size"], cfg["n_head"], cfg["layer_norm_epsilon"]
        P = "transformer."

        def lin(h, name):
            return h @ w[P + name + ".weight"].T + w[P + name + ".bias"]

        x = w[P + "word_embeddings.weight"][ids]
        if broken != "embed-norm":
            x = layernorm(x, w[P + "word_embeddings_layernorm.weight"], w[P + "word_embeddings_layernorm.bias"], eps)
        bias = -alibi_slopes(nh)[:, None, None] * (pos[:, None] - pos[None, :])[None]
        for l in range(cfg["n_layer"]):
            p = "h.%d." % l
            h = layernorm(x, w[P + p + "input_layernorm.weight"], w[P + p + "input_layernorm.bias"], eps)
            q, k, v = split_per_head_qkv(lin(h, p + "self_attention.query_key_value"), nh, broken == "qkv-order")
            x = x + lin(attend(q, k, v, pos, bias), p + "self_attention.dense")
            h = layernorm(x, w[P + p + "post_attention_layernorm.weight"], w[P + p + "post_attention_layernorm.bias"], eps)
            x = x + lin(gelu_tanh(lin(h, p + "mlp.dense_h_to_4h")), p + "mlp.dense_4h_to_h")
        x = layernorm(x, w[P + "ln_f.weight"], w[P + "ln_f.bias"], eps)
        return x @ w[P + "word_embeddings.weight"].T
    if mt == "gpt_bigcode":
        d, nh, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
        hs = d // nh
        P = "transformer."

        def lin(h, name):
            return h @ w[P + name + ".weight"].T + w[P + name + ".bias"]

        x = w[P + "wte.weight"][ids]
        if broken != "positions":
            x = x + w[P + "wpe.weight"][pos.astype(np.int64)]
        for l in range(cfg["n_layer"]):
            p = "h.%d." % l
            h = layernorm(x, w[P + p + "ln_1.weight"], w[P + p + "ln_1.bias"], eps)
            qkv = lin(h, p + "attn.c_attn")
            q, k, v = heads(qkv[:, :d], nh), heads(qkv[:, d:d + hs], 1), heads(qkv[:, d + hs:], 1)
            x = x + lin(attend(q, k, v, pos), p + "attn.c_proj")
            h = layernorm(x, w[P + p + "ln_2.weight"], w[P + p + "ln_2.bias"], eps)
            x = x + lin(gelu_tanh(lin(h, p + "mlp.c_fc")), p + "mlp.c_proj")
        x = layernorm(x, w[P + "ln_f.weight"], w[P + "ln_f.bias"], eps)
        return x @ w[P + "wte.weight"].T
    if mt == "phi":
        d, nh, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
        rot = int(cfg["partial_rotary_factor"] * (d // nh))
        P = "model."

        def lin(h, name):
            return h @ w[P + name + ".weight"].T + w[P + name + ".bias"]

        x = w[P + "embed_tokens.weight"][ids]
        for l in range(cfg["num_hidden_layers"]):
            p = "layers.%d." % l
            h = layernorm(x, w[P + p + "input_layernorm.weight"], w[P + p + "input_layernorm.bias"], eps)
            q = rotate_half_rope(heads(lin(h, p + "self_attn.q_proj"), nh), pos, rot, cfg["rope_theta"])
            k = rotate_half_rope(heads(lin(h, p + "self_attn.k_proj"), nh), pos, rot, cfg["rope_theta"])
            a = lin(attend(q, k, heads(lin(h, p + "self_attn.v_proj"), nh), pos), p + "self_attn.dense")
            m = lin(gelu_tanh(lin(x if broken == "shared-norm" else h, p + "mlp.fc1")), p + "mlp.fc2")
            x = x + a + m
        x = layernorm(x, w[P + "final_layernorm.weight"], w[P + "final_layernorm.bias"], eps)
        return x @ w["lm_head.weight"].T + w["lm_head.bias"]
    if mt == "mpt":
        d, nh, eps = cfg["d_model"], cfg["n_heads"], cfg["layer_norm_epsilon"]
        ac = cfg["attn_config"]
        P = "transformer."

        def ln(h, name):   # no_bias: LayerNorm without a bias
            return layernorm(h, w[P + name + ".weight"], 0.0, eps)

        x = w[P + "wte.weight"][ids]
        bias = -alibi_slopes(nh, ac["alibi_bias_max"])[:, None, None] * (pos[:, None] - pos[None, :])[None]
        for l in range(cfg["n_layers"]):
            p = "blocks.%d." % l
            qkv = ln(x, p + "norm_1") @ w[P + p + "attn.Wqkv.weight"].T
            if ac.get("clip_qkv") and broken != "clamp":
                qkv = np.clip(qkv, -ac["clip_qkv"], ac["clip_qkv"])
            q, k, v = (heads(a, nh) for a in np.split(qkv, 3, -1))
            x = x + attend(q, k, v, pos, bias) @ w[P + p + "attn.out_proj.weight"].T
            h = ln(x, p + "norm_2")
            x = x + gelu_erf(h @ w[P + p + "ffn.up_proj.weight"].T) @ w[P + p + "ffn.down_proj.weight"].T
        return ln(x, "norm_f") @ w[P + "wte.weight"].T
    if mt == "gemma":
        d, nh, nkv, hs = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
        eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
        P = "model."

        def norm(h, name):   # GemmaRMSNorm: x / rms(x) * (1 + w)
            return rmsnorm(h, (0.0 if broken == "norm-plus-one" else 1.0) + w[P + name], eps)

        x = w[P + "embed_tokens.weight"][ids] * math.sqrt(d)
        for l in range(cfg["num_hidden_layers"]):
            p = "layers.%d." % l
            h = norm(x, p + "input_layernorm.weight")
            q = rotate_half_rope(heads(h @ w[P + p + "self_attn.q_proj.weight"].T, nh), pos, hs, theta)
            k = rotate_half_rope(heads(h @ w[P + p + "self_attn.k_proj.weight"].T, nkv), pos, hs, theta)
            v = heads(h @ w[P + p + "self_attn.v_proj.weight"].T, nkv)
            x = x + attend(q, k, v, pos) @ w[P + p + "self_attn.o_proj.weight"].T
            h = norm(x, p + "post_attention_layernorm.weight")
            g = gelu_tanh(h @ w[P + p + "mlp.gate_proj.weight"].T)
            x = x + (g * (h @ w[P + p + "mlp.up_proj.weight"].T)) @ w[P + p + "mlp.down_proj.weight"].T
        return norm(x, "norm.weight") @ w[P + "embed_tokens.weight"].T
    raise ValueError("%s: model_type %r is not one of %s" % (directory, mt, ", ".join(FAMILIES)))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make")
    mk.add_argument("family", choices=FAMILIES)
    mk.add_argument("dir")
    mk.add_argument("--seed", type=int, default=11)
    mk.add_argument("--tied", action="store_true")
    lg = sub.add_parser("logits")
    lg.add_argument("dir")
    lg.add_argument("--ids", required=True)
    lg.add_argument("--pos0", type=int, default=0)
    lg.add_argument("--break", dest="broken")
    a = ap.parse_args(argv)
    if a.cmd == "make":
        make(a.family, a.dir, a.seed, a.tied)
        return 0
    out = forward(a.dir, [int(t) for t in a.ids.split(",")], a.pos0, a.broken)
    for row in out:
        print(" ".join("%.9g" % v for v in row))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
