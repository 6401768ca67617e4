#!/usr/bin/python3
"""Tiny random checkpoints of today's families, written exactly as Hugging Face
transformers builds them, so that transformers' own logits (computed once by
tools/hf_golden.py and committed as tests/fixtures/hf_golden/<case>.json) hold
for the files these tests write here without transformers.

A case is a config in transformers 5.x form (`rope_parameters`, `layer_types`)
at the family's real layout: dim 64, its GQA/MQA, its head size, enough layers
for its layer pattern to show, tied or untied as the family ships.  Every
parameter's values follow from its name alone (`values`): a SplitMix64 stream
seeded by the name's CRC-32, so the device that ran transformers and this
machine write the same bits.  The parameter names and shapes come from
transformers itself (the fixture's "manifest").

    hf_tiny.py list
        the cases, one a line
    hf_tiny.py make CASE DIR [--fixture F]
        writes DIR/config.json (the config transformers saved), DIR/model.safetensors
        and a byte-level vocabulary (vocab.json, merges.txt: 256 bytes, no merges);
        CASE may also be a variant (VARIANTS: a case's checkpoint with some
        parameters scaled, which transformers did not run: no golden)
    hf_tiny.py golden CASE chunk|steps|split|offset|ids
        prints transformers' logits of that run, a line "POSITION v0 v1 ..." for each
        position the fixture holds (positions count from the run's first token);
        ids: the 80 token ids, on one line

Stdlib only (docs/positional.md's example runs it with any python3).
"""
import argparse
import array
import json
import math
import os
import struct
import zlib

VOCAB, DIM, N_TOKENS = 256, 64, 80
# Where the tests read the logits: the first positions, both sides of the
# windows (8) and of the original contexts (32), and the last position.
CHUNK_POSITIONS = [0, 1, 7, 8, 9, 31, 32, 33, 63, 79]
SPLIT_AT = 50            # a second chunk after 50 cached positions
SPLIT_POSITIONS = [50, 51, 63, 79]
OFFSET = 7               # positions 7 .. 86 for the same tokens
OFFSET_POSITIONS = [0, 31, 79]


def _base(model_type, layers, heads=4, kv=2, **extra):
    cfg = {"model_type": model_type, "vocab_size": VOCAB, "hidden_size": DIM,
           "intermediate_size": 128, "num_hidden_layers": layers,
           "num_attention_heads": heads, "num_key_value_heads": kv,
           "max_position_embeddings": 128, "rms_norm_eps": 1e-6, "hidden_act": "silu",
           "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
           "tie_word_embeddings": False}
    cfg.update(extra)
    return cfg


def _rope(rope_type="default", theta=10000.0, **params):
    return dict(rope_type=rope_type, rope_theta=theta, **params)


SLIDING, FULL = "sliding_attention", "full_attention"

CASES = {
    # Llama 3.1/3.2: llama3 smoothing; with θ 10 000 and an original context of
    # 32 the second pair's wavelength (19.9) falls in the smoothed band (8..32).
    "llama3": _base("llama", 2, tie_word_embeddings=True, max_position_embeddings=256,
                    rope_parameters=_rope("llama3", factor=8.0, low_freq_factor=1.0,
                                          high_freq_factor=4.0,
                                          original_max_position_embeddings=32)),
    "llama_yarn": _base("llama", 2, rope_parameters=_rope(
        "yarn", factor=4.0, original_max_position_embeddings=32, beta_fast=32.0, beta_slow=1.0)),
    # gpt-oss's YaRN: the correction range is not rounded to whole dimensions
    "llama_yarn_untruncated": _base("llama", 2, rope_parameters=_rope(
        "yarn", factor=4.0, original_max_position_embeddings=32, beta_fast=32.0, beta_slow=1.0,
        truncate=False)),
    # dynamic NTK grows θ with the sequence past max_position_embeddings (32)
    "llama_dynamic": _base("llama", 2, max_position_embeddings=32,
                           rope_parameters=_rope("dynamic", factor=2.0)),
    # Phi-4-mini: LongRoPE over a partial rotary (0.75 of 16 = 12 dims, 6
    # factors each), original context 32; Phi-3-mini-4k's sliding window
    "phi3": _base("phi3", 2, partial_rotary_factor=0.75, original_max_position_embeddings=32,
                  sliding_window=16,
                  rope_parameters=_rope("longrope", short_factor=[1.0, 1.1, 1.3, 1.7, 2.2, 3.0],
                                        long_factor=[1.0, 1.5, 2.5, 4.0, 6.0, 8.0],
                                        original_max_position_embeddings=32)),
    "qwen3": _base("qwen3", 2, head_dim=32, rope_parameters=_rope(theta=1000000.0),
                   use_sliding_window=False),
    # SmolLM3: no rotation in every 4th layer
    "smollm3": _base("smollm3", 4, tie_word_embeddings=True, rope_parameters=_rope(),
                     no_rope_layers=[1, 1, 1, 0], no_rope_layer_interval=4,
                     use_sliding_window=False),
    # soft-caps small enough to bend these weights' scores and logits
    "gemma2": _base("gemma2", 4, head_dim=32, tie_word_embeddings=True, sliding_window=8,
                    layer_types=[SLIDING, FULL, SLIDING, FULL], query_pre_attn_scalar=24,
                    attn_logit_softcapping=2.0, final_logit_softcapping=5.0,
                    hidden_activation="gelu_pytorch_tanh", rope_parameters=_rope()),
    # Gemma 3 (4B and larger): 5 local layers (θ 10 000) to one global layer
    # (θ 1 000 000, linear x8), MQA
    "gemma3": _base("gemma3_text", 6, kv=1, head_dim=32, tie_word_embeddings=True,
                    sliding_window=8, layer_types=[SLIDING] * 5 + [FULL],
                    query_pre_attn_scalar=32, hidden_activation="gelu_pytorch_tanh",
                    rope_local_base_freq=10000.0,
                    rope_parameters={SLIDING: _rope(),
                                     FULL: _rope("linear", 1000000.0, factor=8.0)}),
    "olmo2": _base("olmo2", 2, rope_parameters=_rope(theta=500000.0)),
    "granite": _base("granite", 2, tie_word_embeddings=True, embedding_multiplier=6.0,
                     residual_multiplier=0.5, attention_multiplier=0.1, logits_scaling=4.0,
                     rope_parameters=_rope()),
    "stablelm": _base("stablelm", 2, kv=4, partial_rotary_factor=0.25, use_qkv_bias=True,
                      qk_layernorm=False, use_parallel_residual=False, layer_norm_eps=1e-5,
                      rope_parameters=_rope()),
    "stablelm_parallel": _base("stablelm", 2, partial_rotary_factor=0.25, use_qkv_bias=True,
                               qk_layernorm=True, use_parallel_residual=True,
                               layer_norm_eps=1e-5, rope_parameters=_rope()),
    # Command R7B: 3 sliding RoPE layers to 1 global NoPE layer
    "cohere2": _base("cohere2", 4, tie_word_embeddings=True, sliding_window=8,
                     layer_types=[SLIDING, SLIDING, SLIDING, FULL], logit_scale=0.5,
                     layer_norm_eps=1e-5, rope_parameters=_rope()),
    # EXAONE 4: hybrid sliding/global with NoPE on the global layers, llama3 scaling
    "exaone4": _base("exaone4", 4, sliding_window=8, layer_types=[SLIDING, SLIDING, SLIDING, FULL],
                     rms_norm_eps=1e-5,
                     rope_parameters=_rope("llama3", factor=8.0, low_freq_factor=1.0,
                                           high_freq_factor=4.0,
                                           original_max_position_embeddings=32)),
    # mixtures of experts: 4 experts, top 2
    "gpt_oss": _base("gpt_oss", 2, head_dim=16, intermediate_size=32, num_local_experts=4,
                     num_experts_per_tok=2, sliding_window=8, layer_types=[SLIDING, FULL],
                     swiglu_limit=7.0, attention_bias=True,
                     rope_parameters=_rope("yarn", 150000.0, factor=4.0,
                                           original_max_position_embeddings=32,
                                           beta_fast=32.0, beta_slow=1.0, truncate=False)),
    "qwen3_moe": _base("qwen3_moe", 2, head_dim=32, num_experts=4, num_experts_per_tok=2,
                       moe_intermediate_size=32, norm_topk_prob=True, decoder_sparse_step=1,
                       mlp_only_layers=[], use_sliding_window=False,
                       rope_parameters=_rope(theta=1000000.0)),
    "olmoe": _base("olmoe", 2, intermediate_size=32, num_experts=4, num_experts_per_tok=2,
                   norm_topk_prob=False, rope_parameters=_rope()),
    "granitemoe": _base("granitemoe", 2, tie_word_embeddings=True, intermediate_size=32,
                        num_local_experts=4, num_experts_per_tok=2, embedding_multiplier=6.0,
                        residual_multiplier=0.5, attention_multiplier=0.1, logits_scaling=4.0,
                        rope_parameters=_rope()),
}


# A case's checkpoint with the parameters whose names end so scaled, for a
# feature the case's values leave idle.  gpt_oss_hot: the experts' gate_up_proj
# x 3, so that the clamped SwiGLU's limit of 7 binds (the gpt_oss case's gate and
# up stay within 3.7, where clamping changes nothing).
VARIANTS = {"gpt_oss_hot": ("gpt_oss", {"experts.gate_up_proj": 3.0})}


# ---- deterministic values -----------------------------------------------------------------------

_MASK = (1 << 64) - 1


def _splitmix64(seed, n):
    """n outputs of SplitMix64 started at `seed` (uint64 arithmetic)."""
    out = []
    for i in range(1, n + 1):
        x = (seed + i * 0x9E3779B97F4A7C15) & _MASK
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
        out.append(x ^ (x >> 31))
    return out


def uniform(name, n):
    """n values in (-1, 1), each an odd multiple of 2^-24 (exact in float32)."""
    return [((z >> 40) + 0.5) / float(1 << 23) - 1.0
            for z in _splitmix64(zlib.crc32(name.encode()), n)]


def amplitude(name, shape):
    """Norm weights near 1 (or their (1 + w) offsets near 1), biases small, matrices
    so that a unit-variance input gives outputs of about unit variance."""
    if len(shape) == 1:
        return 0.2 if name.endswith("bias") or "norm" in name else 1.0
    if "embed" in name:
        return 1.0
    return 1.5 / math.sqrt(shape[-1])


def values(name, shape):
    """The float32 values of parameter `name`, flat in row-major order; 1-D
    norm weights are 1 + 0.2u."""
    a, offset = amplitude(name, shape), 0.0
    if len(shape) == 1 and "norm" in name and not name.endswith("bias"):
        offset = 1.0
    return array.array("f", (u * a + offset for u in uniform(name, math.prod(shape))))


def token_ids():
    return [int(z % VOCAB) for z in _splitmix64(zlib.crc32(b"ids"), N_TOKENS)]


def byte_alphabet():
    """GPT-2's byte -> printable character map, so every byte is one token."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + len(cs) - 188)
    return dict(zip(bs, map(chr, cs)))


def write_safetensors(path, tensors):
    """{name: (shape, values)} as one F32 safetensors file; values is an
    array('f') or anything whose tobytes() gives little-endian float32 (a
    NumPy '<f4' array)."""
    header, offset, blobs = {}, 0, []
    for name, (shape, a) in tensors.items():
        if isinstance(a, array.array) and struct.pack("=H", 1) != struct.pack("<H", 1):
            a = array.array("f", a)
            a.byteswap()
        raw = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(shape),
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


# ---- writing a checkpoint -------------------------------------------------------------------------

def fixture_path(case):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(root, "tests", "fixtures", "hf_golden", case + ".json")


def make(case, directory, fixture=None):
    case, scales = VARIANTS.get(case, (case, {}))
    golden = json.load(open(fixture or fixture_path(case)))
    os.makedirs(directory, exist_ok=True)
    # a neutral general.name: llama.cpp applies Phi-3's vocabulary fixes to any
    # model whose name contains "phi3", and looks for a "</s>" these lack
    config = dict(golden["saved_config"], _name_or_path="hf-tiny-random")
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    def scaled(name, shape):
        v = values(name, shape)
        for suffix, factor in scales.items():
            if name.endswith(suffix):
                v = array.array("f", (x * factor for x in v))
        return v
    write_safetensors(os.path.join(directory, "model.safetensors"),
                      {name: (shape, scaled(name, shape)) for name, shape in golden["manifest"]})
    chars = byte_alphabet()
    with open(os.path.join(directory, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({chars[b]: b for b in range(256)}, f, ensure_ascii=False)
    with open(os.path.join(directory, "merges.txt"), "w") as f:
        f.write("#version: 0.2\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list")
    mk = sub.add_parser("make")
    mk.add_argument("case", choices=sorted(CASES) + sorted(VARIANTS))
    mk.add_argument("dir")
    mk.add_argument("--fixture")
    gd = sub.add_parser("golden")
    gd.add_argument("case", choices=sorted(CASES))
    gd.add_argument("run", choices=("chunk", "steps", "split", "offset", "ids"))
    a = ap.parse_args()
    if a.cmd == "list":
        print("\n".join(CASES))
    elif a.cmd == "golden" and a.run == "ids":
        print(" ".join(map(str, json.load(open(fixture_path(a.case)))["ids"])))
    elif a.cmd == "golden":
        g = json.load(open(fixture_path(a.case)))
        rows, positions = {"chunk": ("chunk", "chunk_positions"),
                           "steps": ("steps", "chunk_positions"),
                           "split": ("split", "split_positions"),
                           "offset": ("offset_chunk", "offset_positions")}[a.run]
        for p, row in zip(g[positions], g[rows]):
            print(p, " ".join("%.9g" % v for v in row))
    else:
        make(a.case, a.dir, a.fixture)


if __name__ == "__main__":
    main()
