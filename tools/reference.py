#!/usr/bin/python3
"""NumPy (float64) reference forward passes for llama2.c legacy checkpoints and
for the PE zoo's GPT-2-layout models (../shared/models/zoo).

Written from the math, independently of posenc's C code, so that the engine can
be checked against something that shares none of its bugs.  The positional
scheme is a parameter, so the same llama weights can be run with

  rope        interleaved pairs (2j, 2j+1), angle pos * theta^(-2j/head_size)
  alibi       score -= slope_h * (pos_q - pos_k), slopes from max_bias
  sinusoidal  x0 = embedding + PE(pos), PE[2i] = sin, PE[2i+1] = cos
  none        nothing positional (NoPE)

Positions are pos0 + index, so offset behaviour can be tested too.

The zoo's models (Hugging Face GPT-2 layout: pre-LayerNorm, tanh GELU, fused
q|k|v Conv1D weights, tied head; characters through GPT-2's byte alphabet) run
with their own scheme where it is one of

  t5          score += table[bucket(k - q), h]: T5's decoder buckets (exact
              below num_buckets/2, log-spaced up to max_distance, then the
              last), one (bucket, head) table for every layer
  alibi, none as above

or any of those as an override; zoo_curve() computes the extrapolation curve
exactly as reference.json's val_nll_window{W} defines it.

Also here: llama2.c's tokenizer.bin reader, its encoder, and its exact printing
rules, so that generate_greedy() returns byte for byte what llama2.c's
`run MODEL -z TOK -t 0 -n STEPS -i PROMPT` writes to stdout.

Module use:
    import reference as ref
    model = ref.load_checkpoint("stories260K.bin")
    tok = ref.Tokenizer("tok512.bin", model.config.vocab_size)
    ids = tok.encode("Once upon a time")
    lg = ref.logits(model, ids, pe="alibi")            # (len(ids), vocab)
    text = ref.generate_greedy(model, tok, "Once upon a time", 64)

    zoo = ref.load_zoo("../shared/models/zoo/t5")
    lg = ref.zoo_logits(zoo, zoo.encode("ROMEO:\n"))    # (n, vocab), its own scheme
    nll = ref.zoo_curve(zoo, val_text, 256, chunks=32)  # mean NLL of 32 windows of 256

CLI:
    tools/reference.py MODEL.bin TOK.bin --pe rope -i "Once upon a time" -n 64
    tools/reference.py MODEL.bin TOK.bin -i "Once upon a time" --logits
    tools/reference.py MODEL.bin TOK.bin -i "Once upon a time" --tokenize
    tools/reference.py MODEL.bin TOK.bin -i "Once upon a time" --attention [--pe alibi]
        prints {"tokens": ids, "weights": [layer][head][query][key]}
    tools/reference.py --zoo ../shared/models/zoo/t5 --attention "ROMEO:" [--pe none]
    tools/reference.py --zoo ../shared/models/zoo/t5 [--pe none]
        prints one JSON object with reference.json's keys (logits_last,
        greedy_120_window128_text, val_nll_window64 ... 1024)

Stdlib + NumPy only.
"""
import argparse
import json
import math
import os
import struct
import sys
from dataclasses import dataclass

import numpy as np

PE_SCHEMES = ("rope", "alibi", "sinusoidal", "none")
RMS_EPS = 1e-5
BOS_ID = 1
DEFAULT_THETA = 10000.0
DEFAULT_MAX_BIAS = 8.0


# ---------------------------------------------------------------------------
# Checkpoint

@dataclass
class Config:
    dim: int
    hidden_dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    vocab_size: int
    seq_len: int
    shared_classifier: bool

    @property
    def head_size(self):
        return self.dim // self.n_heads

    @property
    def kv_dim(self):
        return self.dim * self.n_kv_heads // self.n_heads


@dataclass
class Model:
    config: Config
    token_embedding: np.ndarray  # (vocab, dim)
    rms_att: np.ndarray          # (L, dim)
    wq: np.ndarray               # (L, dim, dim)       y = W @ x
    wk: np.ndarray               # (L, kv_dim, dim)
    wv: np.ndarray               # (L, kv_dim, dim)
    wo: np.ndarray               # (L, dim, dim)
    rms_ffn: np.ndarray          # (L, dim)
    w1: np.ndarray               # (L, hidden, dim)
    w2: np.ndarray               # (L, dim, hidden)
    w3: np.ndarray               # (L, hidden, dim)
    rms_final: np.ndarray        # (dim,)
    wcls: np.ndarray             # (vocab, dim), the embedding itself when shared


def load_checkpoint(path):
    """Reads a llama2.c legacy .bin: 7 int32 header, then float32 tensors."""
    with open(path, "rb") as f:
        header = f.read(7 * 4)
        data = np.frombuffer(f.read(), dtype="<f4")
    dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len = struct.unpack("<7i", header)
    # A negative vocab size is llama2.c's flag for "untied classifier at the end".
    cfg = Config(dim, hidden, n_layers, n_heads, n_kv_heads, abs(vocab), seq_len,
                 shared_classifier=vocab > 0)
    if dim % n_heads or n_heads % n_kv_heads or cfg.head_size % 2:
        raise ValueError(f"{path}: inconsistent header {cfg}")

    offset = 0

    def take(*shape):
        nonlocal offset
        n = int(np.prod(shape))
        if offset + n > data.size:
            raise ValueError(f"{path}: file too short for the header {cfg}")
        arr = data[offset:offset + n].astype(np.float64).reshape(shape)
        offset += n
        return arr

    L, V, kv = n_layers, cfg.vocab_size, cfg.kv_dim
    emb = take(V, dim)
    rms_att = take(L, dim)
    wq = take(L, dim, dim)
    wk = take(L, kv, dim)
    wv = take(L, kv, dim)
    wo = take(L, dim, dim)
    rms_ffn = take(L, dim)
    w1 = take(L, hidden, dim)
    w2 = take(L, dim, hidden)
    w3 = take(L, hidden, dim)
    rms_final = take(dim)
    take(seq_len, cfg.head_size // 2)  # freq_cis_real: legacy RoPE table, unused
    take(seq_len, cfg.head_size // 2)  # freq_cis_imag
    wcls = emb if cfg.shared_classifier else take(V, dim)
    if offset != data.size:
        raise ValueError(f"{path}: {data.size - offset} trailing floats after the weights")
    return Model(cfg, emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, wcls)


# ---------------------------------------------------------------------------
# Positional schemes

def rope_rotate(x, positions, theta=DEFAULT_THETA):
    """Rotates interleaved pairs (2j, 2j+1) of every head of x (n, heads, head_size)
    by the angle pos * theta^(-2j/head_size) (Meta / llama2.c convention)."""
    head_size = x.shape[-1]
    two_j = np.arange(0, head_size, 2, dtype=np.float64)
    freqs = theta ** (-two_j / head_size)                  # (head_size/2,)
    angles = np.asarray(positions, np.float64)[:, None] * freqs  # (n, head_size/2)
    cos = np.cos(angles)[:, None, :]                       # broadcast over heads
    sin = np.sin(angles)[:, None, :]
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def alibi_slopes(n_heads, max_bias=DEFAULT_MAX_BIAS):
    """ALiBi head slopes with the standard rule for a non-power-of-two head count:
    the first n2 heads get the geometric series of the nearest lower power of two,
    the rest interleave into the series of 2*n2 (odd powers of m1)."""
    n2 = 1
    while n2 * 2 <= n_heads:
        n2 *= 2
    m0 = 2.0 ** (-max_bias / n2)
    m1 = 2.0 ** (-(max_bias / 2.0) / n2)
    return np.array([m0 ** (h + 1) if h < n2 else m1 ** (2 * (h - n2) + 1)
                     for h in range(n_heads)])


def sinusoidal_table(positions, dim):
    """Vaswani et al. absolute encoding: PE[2i] = sin(pos / 10000^(2i/dim)),
    PE[2i+1] = cos(same angle)."""
    two_i = np.arange(0, dim, 2, dtype=np.float64)
    angles = np.asarray(positions, np.float64)[:, None] / (10000.0 ** (two_i / dim))
    pe = np.empty((len(positions), dim))
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe


# ---------------------------------------------------------------------------
# Forward pass

def rmsnorm(x, weight):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + RMS_EPS) * weight


def silu(x):
    return x / (1.0 + np.exp(-x))


def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def attention(model, layer, x, positions, pe, theta, slopes, probs=None):
    """Causal multi-head attention with grouped k/v heads; x is (n, dim) normalised.
    The softmax weights (heads, n_q, n_k) are appended to `probs` when given."""
    c = model.config
    n, hs = x.shape[0], c.head_size
    q = (x @ model.wq[layer].T).reshape(n, c.n_heads, hs)
    k = (x @ model.wk[layer].T).reshape(n, c.n_kv_heads, hs)
    v = (x @ model.wv[layer].T).reshape(n, c.n_kv_heads, hs)
    if pe == "rope":
        q = rope_rotate(q, positions, theta)
        k = rope_rotate(k, positions, theta)  # keys are cached after rotation
    # Query head h reads kv head h // group: repeat each kv head `group` times.
    group = c.n_heads // c.n_kv_heads
    k = np.repeat(k, group, axis=1)
    v = np.repeat(v, group, axis=1)

    scores = np.einsum("ihd,jhd->hij", q, k) / np.sqrt(hs)  # (heads, n_q, n_k)
    distance = positions[:, None] - positions[None, :]       # pos_q - pos_k
    if pe == "alibi":
        scores = scores - slopes[:, None, None] * distance[None, :, :]
    future = np.triu(np.ones((n, n), dtype=bool), k=1)
    scores = np.where(future[None, :, :], -np.inf, scores)
    p = softmax(scores)
    if probs is not None:
        probs.append(p)
    out = np.einsum("hij,jhd->ihd", p, v).reshape(n, c.dim)
    return out @ model.wo[layer].T


def feed_forward(model, layer, x):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""
    return (silu(x @ model.w1[layer].T) * (x @ model.w3[layer].T)) @ model.w2[layer].T


def logits(model, ids, pe="rope", theta=DEFAULT_THETA, max_bias=DEFAULT_MAX_BIAS, pos0=0,
           probs=None):
    """Logits (len(ids), vocab) for every position of the token sequence `ids`,
    placed at positions pos0, pos0+1, ...; each layer's attention weights
    are appended to `probs` when given."""
    if pe not in PE_SCHEMES:
        raise ValueError(f"unknown positional scheme {pe!r}; expected one of {PE_SCHEMES}")
    c = model.config
    ids = np.asarray(ids, dtype=np.int64)
    positions = pos0 + np.arange(len(ids), dtype=np.float64)
    x = model.token_embedding[ids]
    if pe == "sinusoidal":
        x = x + sinusoidal_table(positions, c.dim)
    slopes = alibi_slopes(c.n_heads, max_bias)
    for layer in range(c.n_layers):
        x = x + attention(model, layer, rmsnorm(x, model.rms_att[layer]),
                          positions, pe, theta, slopes, probs)
        x = x + feed_forward(model, layer, rmsnorm(x, model.rms_ffn[layer]))
    return rmsnorm(x, model.rms_final) @ model.wcls.T


# ---------------------------------------------------------------------------
# The PE zoo: GPT-2 layout (Hugging Face directory)

ZOO_SCHEMES = ("t5", "alibi", "none")
ZOO_PROMPT = "ROMEO:\n"
ZOO_GREEDY_STEPS = 120
ZOO_WINDOWS = (64, 128, 256, 512, 1024)
ZOO_CHUNKS = 32


def read_safetensors(path):
    """{name: float64 array} from a safetensors file of F32 tensors."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise ValueError(f"{path}: {name} is {info['dtype']}, expected F32")
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype="<f4").astype(np.float64).reshape(
            info["shape"])
    return out


def gpt2_byte_alphabet():
    """GPT-2's bytes_to_unicode: printable Latin-1 bytes are themselves, the
    other 68 take 256, 257, ... in byte order."""
    kept = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    extra = [b for b in range(256) if b not in kept]
    return {**{b: chr(b) for b in kept}, **{b: chr(256 + i) for i, b in enumerate(extra)}}


@dataclass
class Zoo:
    config: dict
    weights: dict      # safetensors names without the "transformer." prefix
    vocab: dict        # character -> id
    pieces: dict       # id -> character

    @property
    def scheme(self):
        return self.config["position_embedding_type"]

    def encode(self, text):
        """Character level: each character's UTF-8 bytes spelled in the byte alphabet."""
        alphabet = gpt2_byte_alphabet()
        return [self.vocab["".join(alphabet[b] for b in ch.encode())] for ch in text]

    def decode(self, ids):
        return "".join(self.pieces[i] for i in ids)


def load_zoo(directory):
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    with open(os.path.join(directory, "vocab.json"), encoding="utf-8") as f:
        spelled = json.load(f)
    weights = {k.removeprefix("transformer."): v
               for k, v in read_safetensors(os.path.join(directory, "model.safetensors")).items()}
    from_alphabet = {c: bytes([b]) for b, c in gpt2_byte_alphabet().items()}
    vocab, pieces = {}, {}
    for spelling, i in spelled.items():
        ch = b"".join(from_alphabet[c] for c in spelling).decode()
        vocab[spelling], pieces[i] = i, ch
    return Zoo(config, weights, vocab, pieces)


def t5_bucket(relative_position, num_buckets, max_distance):
    """T5's unidirectional bucket of relative_position = k - q (an integer array):
    keys ahead of the query count as distance 0; distance n < num_buckets/2 is
    bucket n; then buckets are log-spaced so that max_distance would be bucket
    num_buckets; everything from there on is the last bucket."""
    n = np.maximum(-np.asarray(relative_position), 0)
    exact = num_buckets // 2
    with np.errstate(divide="ignore"):   # log(0) for the exact distances, unused
        spaced = exact + np.floor(np.log(n / exact) / math.log(max_distance / exact)
                                  * (num_buckets - exact))
    spaced = np.minimum(np.where(n < exact, 0, spaced), num_buckets - 1)
    return np.where(n < exact, n, spaced).astype(np.int64)


def layernorm(x, weight, bias, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def zoo_position_bias(zoo, positions, pe):
    """(heads, n, n) added to the scaled scores: t5's table, alibi's slopes, or 0."""
    c = zoo.config
    rel = positions[None, :] - positions[:, None]               # k - q, (n_q, n_k)
    if pe == "t5":
        table = zoo.weights["relative_attention_bias.weight"]    # (buckets, heads)
        if c.get("relative_attention_bidirectional"):
            raise ValueError("bidirectional buckets are not implemented here either")
        buckets = t5_bucket(rel, c["relative_attention_num_buckets"],
                            c["relative_attention_max_distance"])
        return np.moveaxis(table[buckets], -1, 0)
    if pe == "alibi":
        slopes = alibi_slopes(c["n_head"], c.get("alibi_max_bias", DEFAULT_MAX_BIAS))
        return slopes[:, None, None] * rel[None, :, :]          # -slope * (q - k)
    return np.zeros((c["n_head"],) + rel.shape)


def zoo_logits(zoo, ids, pe=None, pos0=0, probs=None):
    """Logits (len(ids), vocab) with the model's scheme, or `pe` instead; each
    layer's attention weights (heads, n, n) are appended to `probs` when given."""
    pe = pe or zoo.scheme
    if pe not in ZOO_SCHEMES:
        raise ValueError(f"scheme {pe!r} is not implemented for the zoo; one of {ZOO_SCHEMES}")
    c, w = zoo.config, zoo.weights
    d, heads, eps = c["n_embd"], c["n_head"], c["layer_norm_epsilon"]
    hs = d // heads
    n = len(ids)
    positions = pos0 + np.arange(n)
    bias = zoo_position_bias(zoo, positions, pe)
    future = np.triu(np.ones((n, n), dtype=bool), k=1)
    x = w["wte.weight"][np.asarray(ids)]
    for layer in range(c["n_layer"]):
        p = f"h.{layer}."
        h = layernorm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]   # Conv1D: x W + b
        q, k, v = (qkv[:, i * d:(i + 1) * d].reshape(n, heads, hs).transpose(1, 0, 2)
                   for i in range(3))                                     # (heads, n, hs)
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(hs) + bias
        scores = np.where(future[None], -np.inf, scores)
        weights = softmax(scores)
        if probs is not None:
            probs.append(weights)
        att = weights @ v                                                 # (heads, n, hs)
        x = x + att.transpose(1, 0, 2).reshape(n, d) @ w[p + "attn.c_proj.weight"] \
            + w[p + "attn.c_proj.bias"]
        h = layernorm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        x = x + gelu_tanh(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"]) \
            @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    return layernorm(x, w["ln_f.weight"], w["ln_f.bias"], eps) @ w["wte.weight"].T


def zoo_greedy(zoo, prompt, steps, pe=None):
    """Prompt + `steps` argmax characters (each step recomputes everything).
    Also returns the smallest top-2 logit margin, to judge the fixture."""
    ids, margin = zoo.encode(prompt), math.inf
    for _ in range(steps):
        last = zoo_logits(zoo, ids, pe)[-1]
        top2 = np.sort(last)[-2:]
        margin = min(margin, float(top2[1] - top2[0]))
        ids.append(int(np.argmax(last)))
    return zoo.decode(ids), margin


def zoo_curve(zoo, text, window, chunks=ZOO_CHUNKS, pe=None):
    """reference.json's val_nll_window{W}: mean NLL over at most `chunks`
    windows, window k reading characters [kW, (k+1)W) and predicting
    [kW+1, (k+1)W]."""
    ids = np.asarray(zoo.encode(text))
    total, count = 0.0, 0
    for k in range(chunks):
        if (k + 1) * window >= len(ids):
            break
        chunk = ids[k * window:(k + 1) * window + 1]
        lg = zoo_logits(zoo, chunk[:-1], pe)
        lg = lg - lg.max(axis=-1, keepdims=True)
        logp = lg - np.log(np.exp(lg).sum(axis=-1, keepdims=True))
        total -= logp[np.arange(window), chunk[1:]].sum()
        count += window
    return total / count


def zoo_validation_text(models_dir):
    """The zoo's validation split: the last 10% of tiny-shakespeare."""
    with open(os.path.join(models_dir, "..", "text", "tiny-shakespeare.txt")) as f:
        text = f.read()
    return text[int(0.9 * len(text)):]


def zoo_reference(directory, pe=None):
    """reference.json's values, recomputed here."""
    zoo = load_zoo(directory)
    val = zoo_validation_text(os.path.dirname(os.path.dirname(os.path.normpath(directory))))
    out = {"pe": pe or zoo.scheme, "prompt": ZOO_PROMPT,
           "logits_last": [float(v) for v in zoo_logits(zoo, zoo.encode(ZOO_PROMPT), pe)[-1]]}
    out["greedy_120_window128_text"], out["greedy_min_margin"] = zoo_greedy(
        zoo, ZOO_PROMPT, ZOO_GREEDY_STEPS, pe)
    for window in ZOO_WINDOWS:
        out["val_nll_window%d" % window] = float(zoo_curve(zoo, val, window, pe=pe))
    return out


# ---------------------------------------------------------------------------
# Tokenizer (llama2.c tokenizer.bin)

class Tokenizer:
    """llama2.c's tokenizer.bin: int32 max_token_length, then for each of the
    vocab_size tokens a float32 score, an int32 length and that many bytes.
    The vocabulary size is not stored: it comes from the checkpoint."""

    def __init__(self, path, vocab_size):
        with open(path, "rb") as f:
            data = f.read()
        (self.max_token_length,) = struct.unpack_from("<i", data, 0)
        offset = 4
        self.pieces, self.scores = [], []
        for _ in range(vocab_size):
            score, length = struct.unpack_from("<fi", data, offset)
            offset += 8
            # llama2.c keeps pieces as C strings: anything after a NUL is invisible.
            self.pieces.append(data[offset:offset + length].split(b"\0")[0])
            self.scores.append(score)
            offset += length
        # llama2.c finds pieces by binary search; with duplicate pieces which id
        # it finds would be unspecified, so the first one is as good as any.
        self.lookup = {}
        for i, piece in enumerate(self.pieces):
            self.lookup.setdefault(piece, i)

    def encode(self, text):
        """llama2.c's encode(text, bos=1, eos=0). `text` is str or bytes."""
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        ids = [BOS_ID]
        if data:  # the dummy-prefix space, only for non-empty text
            ids.append(self.lookup[b" "])
        for unit in utf8_units(data):
            if unit in self.lookup:
                ids.append(self.lookup[unit])
            else:  # byte fallback: ids 3..258 are <0x00>..<0xFF>
                ids.extend(b + 3 for b in unit)
        return self.merge_pairs(ids)

    def merge_pairs(self, ids):
        """Repeatedly merges the adjacent pair whose concatenation is a piece with
        the highest score; the leftmost pair wins ties. The BOS id takes part like
        any other token, as in llama2.c."""
        ids = list(ids)
        while True:
            best_score, best_id, best_at = -1e10, -1, -1
            for i in range(len(ids) - 1):
                merged = self.lookup.get(self.pieces[ids[i]] + self.pieces[ids[i + 1]])
                if merged is not None and self.scores[merged] > best_score:
                    best_score, best_id, best_at = self.scores[merged], merged, i
            if best_at < 0:
                return ids
            ids[best_at:best_at + 2] = [best_id]

    def decode(self, prev_id, id_):
        """The bytes llama2.c would print for token id_ following prev_id
        (decode() followed by safe_printf())."""
        piece = self.pieces[id_]
        # After BOS, SentencePiece's decoder drops the dummy-prefix space.
        if prev_id == BOS_ID and piece.startswith(b" "):
            piece = piece[1:]
        byte = raw_byte_token(piece)
        if byte is not None:
            piece = bytes([byte]).split(b"\0")[0]  # <0x00> prints nothing
        if len(piece) == 1 and not (is_c_print(piece[0]) or is_c_space(piece[0])):
            return b""  # control or lone non-ASCII byte: llama2.c skips it
        return piece


def utf8_units(data):
    """Splits bytes into the units llama2.c looks up: a lead (or ASCII, or stray
    continuation) byte plus the continuation bytes that follow it, at most 4 bytes."""
    units, i = [], 0
    while i < len(data):
        j = i + 1
        while j < len(data) and (data[j] & 0xC0) == 0x80 and j - i < 4:
            j += 1
        units.append(data[i:j])
        i = j
    return units


def raw_byte_token(piece):
    """Byte value of a piece that llama2.c's sscanf("<0x%02hhX>") accepts, else None.
    sscanf only needs the "<0x" prefix and one or two hex digits to succeed."""
    if not piece.startswith(b"<0x"):
        return None
    digits = b""
    for c in piece[3:5]:
        if chr(c) not in "0123456789abcdefABCDEF":
            break
        digits += bytes([c])
    return int(digits, 16) if digits else None


def is_c_print(b):  # isprint() in the C locale
    return 0x20 <= b <= 0x7E


def is_c_space(b):  # isspace() in the C locale
    return b in b" \t\n\v\f\r"


# ---------------------------------------------------------------------------
# Greedy generation, exactly as llama2.c's generate() with -t 0

@dataclass
class GreedyRun:
    text: bytes     # llama2.c's stdout, final "\n" included
    ids: list       # every token fed or produced, BOS first
    margins: list   # top1 - top2 logit at every sampled (not forced) step
    max_abs_logit: float  # over every sampled step's logits


def greedy_run(model, tok, prompt, steps, pe="rope", theta=DEFAULT_THETA,
               max_bias=DEFAULT_MAX_BIAS, pos0=0):
    """llama2.c's loop: forward the token at pos (0..steps-1), force the next
    prompt token while there is one, else take the argmax; print each next token
    unless it is BOS, which ends the text. Prompt tokens count toward steps."""
    if steps <= 0 or steps > model.config.seq_len:
        steps = model.config.seq_len  # llama2.c: 0 (or too many) means seq_len
    prompt_ids = tok.encode(prompt)
    ids, margins, out, max_abs = [prompt_ids[0]], [], [], 0.0
    for pos in range(steps):
        if pos < len(prompt_ids) - 1:
            nxt = prompt_ids[pos + 1]
        else:
            # Recomputing the whole sequence each step keeps this simple and
            # independent of any KV-cache logic; the model is tiny.
            last = logits(model, ids, pe, theta, max_bias, pos0)[-1]
            top2 = np.sort(last)[-2:]
            margins.append(float(top2[1] - top2[0]))
            max_abs = max(max_abs, float(np.max(np.abs(last))))
            nxt = int(np.argmax(last))  # first index among equal maxima, as llama2.c
        if nxt == BOS_ID:
            break
        out.append(tok.decode(ids[-1], nxt))
        ids.append(nxt)
    out.append(b"\n")
    return GreedyRun(b"".join(out), ids, margins, max_abs)


def generate_greedy(model, tok, prompt, steps, pe="rope", theta=DEFAULT_THETA,
                    max_bias=DEFAULT_MAX_BIAS, pos0=0):
    """The exact stdout bytes of llama2.c `run -t 0 -n steps -i prompt`."""
    return greedy_run(model, tok, prompt, steps, pe, theta, max_bias, pos0).text


# ---------------------------------------------------------------------------
# CLI

def zoo_main(argv):
    ap = argparse.ArgumentParser(description="the PE zoo's reference.json, recomputed")
    ap.add_argument("--zoo", required=True, help="a zoo model directory")
    ap.add_argument("--pe", choices=ZOO_SCHEMES, help="override the model's scheme")
    ap.add_argument("--attention", metavar="TEXT",
                    help="print the attention weights of TEXT instead (see print_attention)")
    args = ap.parse_args(argv)
    if args.attention is not None:
        zoo = load_zoo(args.zoo)
        ids = zoo.encode(args.attention)
        probs = []
        zoo_logits(zoo, ids, args.pe, probs=probs)
        return print_attention(ids, probs)
    print(json.dumps(zoo_reference(args.zoo, args.pe)))


def print_attention(ids, probs):
    """One JSON object: the token ids and every layer's softmax weights,
    weights[layer][head][query][key] (masked keys 0)."""
    print(json.dumps({"tokens": [int(i) for i in ids],
                      "weights": [p.tolist() for p in probs]}))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if any(a == "--zoo" or a.startswith("--zoo=") for a in argv):
        return zoo_main(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="llama2.c legacy .bin checkpoint")
    ap.add_argument("tokenizer", help="llama2.c tokenizer.bin")
    ap.add_argument("--pe", choices=PE_SCHEMES, default="rope")
    ap.add_argument("--rope-theta", type=float, default=DEFAULT_THETA)
    ap.add_argument("--alibi-max-bias", type=float, default=DEFAULT_MAX_BIAS)
    ap.add_argument("--pos0", type=int, default=0, help="position of the first token")
    ap.add_argument("-i", dest="prompt", default="", help="prompt (default empty)")
    ap.add_argument("-n", dest="steps", type=int, default=256,
                    help="steps, prompt tokens included (0 = seq_len), as llama2.c")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--logits", action="store_true",
                      help="print the last position's logits after the prompt, one per line")
    mode.add_argument("--tokenize", action="store_true", help="print the prompt's ids")
    mode.add_argument("--attention", action="store_true",
                      help="print the prompt's attention weights as JSON (print_attention)")
    mode.add_argument("--margins", action="store_true",
                      help="generate, then report the smallest top-2 margin on stderr")
    args = ap.parse_args(argv)

    model = load_checkpoint(args.model)
    tok = Tokenizer(args.tokenizer, model.config.vocab_size)
    opts = dict(pe=args.pe, theta=args.rope_theta, max_bias=args.alibi_max_bias, pos0=args.pos0)
    if args.tokenize:
        print(" ".join(map(str, tok.encode(args.prompt))))
    elif args.attention:
        ids = tok.encode(args.prompt)
        probs = []
        logits(model, ids, probs=probs, **opts)
        print_attention(ids, probs)
    elif args.logits:
        for value in logits(model, tok.encode(args.prompt), **opts)[-1]:
            print("%.9g" % value)
    else:
        run = greedy_run(model, tok, args.prompt, args.steps, **opts)
        sys.stdout.buffer.write(run.text)
        sys.stdout.flush()
        if args.margins and run.margins:
            i = int(np.argmin(run.margins))
            print(f"smallest top-2 margin {run.margins[i]:.6g} at sampled step {i}",
                  file=sys.stderr)


if __name__ == "__main__":
    main()
