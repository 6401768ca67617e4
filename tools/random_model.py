#!/usr/bin/env python3
"""Models with random weights at real shapes, for benchmarks (stdlib only).

    random_model.py SHAPE OUTDIR [--formats bin,f32,f16,bf16,q8_0] [--seed N]
                    [--tokenizer tokenizer.bin] [--dim N --hidden N --layers N
                    --heads N --kv-heads N --vocab N --seq N]

SHAPE is stories15M, stories42M, stories110M (llama2.c's tinyllamas) or
custom (then every dimension flag is required); flags override a named
shape.  Writes into OUTDIR:
  SHAPE.bin           llama2.c legacy checkpoint (shared classifier)
  tokenizer.bin       llama2.c tokenizer: --tokenizer's, copied, or a
                      synthetic one (<unk> <s> </s>, 256 byte pieces, then
                      "tok<i>") when none is given
  SHAPE-TYPE.gguf     for each GGUF type in --formats, converted from the
                      .bin by tools/convert.py (same keys, names, encoders)
Files that exist are kept, so a benchmark can call this every time.

Weights are uniform-ish random: sign and 24 random bits with magnitudes in
[2^-7, 2^-5), i.e. the scale of a trained small model's matrices; norms are
1, so activations keep a sensible range.  A seed makes the files
reproducible.

Today's families at their real shapes (needs NumPy):

    random_model.py qwen3-0.6b|gemma3-1b|llama3.2-1b|qwen3-30b-a3b-2l OUTDIR [--formats f32] [--seed N]

writes a Hugging Face directory OUTDIR/SHAPE-hf (the model's own config.json
with every dimension, window and RoPE setting of the release; random F32
safetensors with HF's parameter names; a 256-byte BPE vocabulary, the other
rows padding) and converts it with tools/convert.py, as a user converts the
release, into SHAPE-TYPE.gguf (quantize.py writes q8_0 from the f32 file a
hundred times faster than convert.py's pure Python).  Matrices are Gaussian with the configs'
initializer_range (0.02); norms are neutral (1, or 0 where the family scales
by 1 + w).
"""
import array
import json
import os
import random
import shutil
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import convert  # noqa: E402
import gguf  # noqa: E402

# dim, hidden, layers, heads, kv heads, vocab, seq (llama2.c's stories models)
SHAPES = {
    "stories15M": (288, 768, 6, 6, 6, 32000, 256),
    "stories42M": (512, 1376, 8, 8, 8, 32000, 1024),
    "stories110M": (768, 2048, 12, 12, 12, 32000, 1024),
}
# The releases' config.json: Qwen/Qwen3-0.6B, google/gemma-3-1b-it (its
# transformers 5.x form), meta-llama/Llama-3.2-1B (4.x form, as it ships) and
# Qwen/Qwen3-30B-A3B with 2 of its 48 layers (a mixture of experts whose
# layer is the release's, about 1.2 GB in q4_k_m: it fits this machine).
FAMILY_SHAPES = {
    "qwen3-0.6b": {
        "model_type": "qwen3", "vocab_size": 151936, "hidden_size": 1024,
        "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
        "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 40960,
        "rms_norm_eps": 1e-6, "hidden_act": "silu", "attention_bias": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
        "tie_word_embeddings": True},
    "gemma3-1b": {
        "model_type": "gemma3_text", "vocab_size": 262144, "hidden_size": 1152,
        "intermediate_size": 6912, "num_hidden_layers": 26, "num_attention_heads": 4,
        "num_key_value_heads": 1, "head_dim": 256, "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-6, "hidden_activation": "gelu_pytorch_tanh",
        "query_pre_attn_scalar": 256, "sliding_window": 512,
        "layer_types": [("full_attention" if (i + 1) % 6 == 0 else "sliding_attention")
                        for i in range(26)],
        "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        "attn_logit_softcapping": None, "final_logit_softcapping": None,
        "tie_word_embeddings": True},
    "llama3.2-1b": {
        "model_type": "llama", "vocab_size": 128256, "hidden_size": 2048,
        "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 64, "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-5, "hidden_act": "silu", "rope_theta": 500000.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        "tie_word_embeddings": True},
    "qwen3-30b-a3b-2l": {
        "model_type": "qwen3_moe", "vocab_size": 151936, "hidden_size": 2048,
        "intermediate_size": 6144, "moe_intermediate_size": 768, "num_hidden_layers": 2,
        "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
        "num_experts": 128, "num_experts_per_tok": 8, "norm_topk_prob": True,
        "decoder_sparse_step": 1, "mlp_only_layers": [], "max_position_embeddings": 40960,
        "rms_norm_eps": 1e-6, "hidden_act": "silu", "attention_bias": False,
        "use_sliding_window": False, "sliding_window": None,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
        "tie_word_embeddings": False},
}
DIMS = ("dim", "hidden", "layers", "heads", "kv_heads", "vocab", "seq")
GGUF_TYPES = tuple(sorted(convert.DTYPES))
# Floats are written in chunks of this many, to bound memory on 110M.
CHUNK = 1 << 22


def random_floats(rng, n):
    """n float32 as little-endian bytes: random sign and mantissa, biased
    exponent 120 or 121 (magnitudes in [2^-7, 2^-5))."""
    b = bytearray(rng.randbytes(4 * n))
    # byte 3 = sign | exponent bits 7..1; bit 0 of the exponent is byte 2's
    # top bit, left random.
    b[3::4] = b[3::4].translate(bytes((v & 0x80) | 0x3C for v in range(256)))
    return b


def write_floats(f, rng, n):
    while n > 0:
        m = min(n, CHUNK)
        f.write(random_floats(rng, m))
        n -= m


def write_bin(path, dims, seed):
    dim, hidden, layers, heads, kv_heads, vocab, seq = dims
    head = dim // heads
    kv_dim = kv_heads * head
    rng = random.Random(seed)
    ones = array.array("f", [1.0] * dim)
    if sys.byteorder != "little":
        ones.byteswap()
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<7i", dim, hidden, layers, heads, kv_heads, vocab, seq))
        write_floats(f, rng, vocab * dim)                        # token embedding (= classifier)
        f.write(ones.tobytes() * layers)                         # attention norms
        for rows in (dim, kv_dim, kv_dim, dim):                  # wq wk wv wo
            write_floats(f, rng, layers * rows * dim)
        f.write(ones.tobytes() * layers)                         # ffn norms
        write_floats(f, rng, layers * hidden * dim)              # w1 (gate)
        write_floats(f, rng, layers * dim * hidden)              # w2 (down)
        write_floats(f, rng, layers * hidden * dim)              # w3 (up)
        f.write(ones.tobytes())                                  # final norm
        f.write(bytes(4 * seq * head))                           # freq_cis, recomputed by engines
    os.replace(tmp, path)


def write_tokenizer(path, vocab):
    """llama2.c tokenizer.bin: int32 max length, then per token f32 score,
    int32 length, bytes; pieces as llama2.c's exporter writes them."""
    pieces = [b"<unk>", b"\n<s>\n", b"\n</s>\n"] + [b"<0x%02X>" % i for i in range(256)]
    pieces += [b"tok%d" % i for i in range(len(pieces), vocab)]
    pieces = pieces[:vocab]
    with open(path, "wb") as f:
        f.write(struct.pack("<i", max(len(p) for p in pieces)))
        for i, p in enumerate(pieces):
            f.write(struct.pack("<fi", -float(i), len(p)) + p)


def hf_parameters(config):
    """[(name, shape, neutral norm value or None for a random matrix)] in HF's names."""
    gemma = config["model_type"].startswith("gemma")
    qk_norm = config["model_type"] in ("qwen3", "gemma3_text", "qwen3_moe")
    d, ff, hd = config["hidden_size"], config["intermediate_size"], config["head_dim"]
    q, kv = config["num_attention_heads"] * hd, config["num_key_value_heads"] * hd
    one = 0.0 if gemma else 1.0
    norms = ["input_layernorm", "post_attention_layernorm"]
    if gemma:
        norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
    params = [("model.embed_tokens.weight", (config["vocab_size"], d), None)]
    if not config["tie_word_embeddings"]:
        params.append(("lm_head.weight", (config["vocab_size"], d), None))
    for i in range(config["num_hidden_layers"]):
        p = "model.layers.%d." % i
        params += [(p + "self_attn.q_proj.weight", (q, d), None),
                   (p + "self_attn.k_proj.weight", (kv, d), None),
                   (p + "self_attn.v_proj.weight", (kv, d), None),
                   (p + "self_attn.o_proj.weight", (d, q), None)]
        if qk_norm:
            params += [(p + "self_attn.q_norm.weight", (hd,), one),
                       (p + "self_attn.k_norm.weight", (hd,), one)]
        if "num_experts" in config:  # the router, then transformers 5's fused experts
            n, w = config["num_experts"], config["moe_intermediate_size"]
            params += [(p + "mlp.gate.weight", (n, d), None),
                       (p + "mlp.experts.gate_up_proj", (n, 2 * w, d), None),
                       (p + "mlp.experts.down_proj", (n, d, w), None)]
        else:
            params += [(p + "mlp.gate_proj.weight", (ff, d), None),
                       (p + "mlp.up_proj.weight", (ff, d), None),
                       (p + "mlp.down_proj.weight", (d, ff), None)]
        params += [(p + n + ".weight", (d,), one) for n in norms]
    return params + [("model.norm.weight", (d,), one)]


def write_hf(directory, config, seed):
    """config.json, model.safetensors (F32, written tensor by tensor), vocab.json
    and merges.txt (256 byte tokens, no merges: convert.py pads the other rows)."""
    import numpy as np
    import hf_tiny
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    params = hf_parameters(config)
    header, offset = {}, 0
    for name, shape, _ in params:
        size = 4 * int(np.prod(shape))
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    tmp = os.path.join(directory, "model.safetensors.tmp")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for name, shape, neutral in params:
            n = int(np.prod(shape))
            if neutral is not None:
                f.write(np.full(n, neutral, "<f4").tobytes())
                continue
            for start in range(0, n, CHUNK):
                m = min(CHUNK, n - start)
                f.write((rng.standard_normal(m, dtype=np.float32) * 0.02).astype("<f4").tobytes())
    os.replace(tmp, os.path.join(directory, "model.safetensors"))
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(dict(config, _name_or_path="random-" + os.path.basename(directory)), f, indent=1)
    chars = hf_tiny.byte_alphabet()
    with open(os.path.join(directory, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({chars[b]: b for b in range(256)}, f, ensure_ascii=False)
    with open(os.path.join(directory, "merges.txt"), "w") as f:
        f.write("#version: 0.2\n")


def family_main(args, formats):
    hf = os.path.join(args.outdir, args.shape + "-hf")
    if not os.path.exists(os.path.join(hf, "model.safetensors")):
        write_hf(hf, FAMILY_SHAPES[args.shape], args.seed)
        print(hf)
    write_ggufs(args.outdir, args.shape, formats, lambda out: convert.convert_hf(hf, out, None))
    return 0


def write_ggufs(outdir, name, formats, convert_into):
    """OUTDIR/NAME-TYPE.gguf for each GGUF type of formats not written yet."""
    for f in formats:
        path = os.path.join(outdir, "%s-%s.gguf" % (name, f))
        if f == "bin" or os.path.exists(path):
            continue
        out = convert.Output(f)
        convert_into(out)
        out.write(path)
        print(path)


def parse_args(argv):
    ap = convert._Parser(prog="random_model.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("shape", choices=sorted(SHAPES) + sorted(FAMILY_SHAPES) + ["custom"])
    ap.add_argument("outdir")
    ap.add_argument("--formats", default="bin,f32",
                    help="comma list of bin and GGUF types %s (default bin,f32)" % ",".join(GGUF_TYPES))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tokenizer", help="llama2.c tokenizer.bin with the model's vocabulary")
    for d in DIMS:
        ap.add_argument("--" + d.replace("_", "-"), type=int, dest=d)
    args = ap.parse_args(argv)
    formats = [f for f in args.formats.split(",") if f]
    for f in formats:
        if f != "bin" and f not in GGUF_TYPES:
            ap.error("unknown format %r (bin, %s)" % (f, ", ".join(GGUF_TYPES)))
    if args.shape in FAMILY_SHAPES:
        if "bin" in formats or args.tokenizer or any(getattr(args, d) is not None for d in DIMS):
            ap.error("%s: the shape is the release's; bin, --tokenizer and the dimension flags "
                     "are for the llama2.c shapes" % args.shape)
        return args, None, formats
    base = SHAPES.get(args.shape)
    dims = []
    for i, d in enumerate(DIMS):
        v = getattr(args, d)
        if v is None:
            if base is None:
                ap.error("custom shape: --%s is required" % d.replace("_", "-"))
            v = base[i]
        if v <= 0:
            ap.error("--%s must be positive" % d.replace("_", "-"))
        dims.append(v)
    dim, _, _, heads, kv_heads, vocab, _ = dims
    if dim % heads or heads % kv_heads or (dim // heads) % 2:
        ap.error("dim %d, %d heads and %d kv heads do not divide evenly" % (dim, heads, kv_heads))
    if vocab < 259:
        ap.error("--vocab must be at least 259 (<unk>, <s>, </s> and 256 bytes)")
    return args, tuple(dims), formats


def main(argv):
    args, dims, formats = parse_args(argv)
    os.makedirs(args.outdir, exist_ok=True)
    if dims is None:
        return family_main(args, formats)
    name = args.shape if args.shape != "custom" else "custom-%dx%d" % (dims[0], dims[2])
    tok = os.path.join(args.outdir, "tokenizer.bin")
    if not os.path.exists(tok):
        if args.tokenizer:
            shutil.copyfile(args.tokenizer, tok)
        else:
            write_tokenizer(tok, dims[5])
    binpath = os.path.join(args.outdir, name + ".bin")
    if not os.path.exists(binpath):
        write_bin(binpath, dims, args.seed)
        print(binpath)
    write_ggufs(args.outdir, name, formats, lambda out: convert.convert_llama2c(binpath, out, tok))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
    except (convert.ConvertError, gguf.GGUFError, OSError) as e:
        sys.stderr.write("random_model.py: error: %s\n" % e)
        sys.exit(2)
