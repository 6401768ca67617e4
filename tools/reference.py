#!/usr/bin/python3
"""NumPy (float64) reference forward pass for llama2.c legacy checkpoints.

Written from the math, independently of posenc's C code, so that the engine can
be checked against something that shares none of its bugs.  The positional
scheme is a parameter, so the same llama weights can be run with

  rope        interleaved pairs (2j, 2j+1), angle pos * theta^(-2j/head_size)
  alibi       score -= slope_h * (pos_q - pos_k), slopes from max_bias
  sinusoidal  x0 = embedding + PE(pos), PE[2i] = sin, PE[2i+1] = cos
  none        nothing positional (NoPE)

Positions are pos0 + index, so offset behaviour can be tested too.

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

CLI:
    tools/reference.py MODEL.bin TOK.bin --pe rope -i "Once upon a time" -n 64
    tools/reference.py MODEL.bin TOK.bin -i "Once upon a time" --logits
    tools/reference.py MODEL.bin TOK.bin -i "Once upon a time" --tokenize

Stdlib + NumPy only.
"""
import argparse
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


def attention(model, layer, x, positions, pe, theta, slopes):
    """Causal multi-head attention with grouped k/v heads; x is (n, dim) normalised."""
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
    out = np.einsum("hij,jhd->ihd", softmax(scores), v).reshape(n, c.dim)
    return out @ model.wo[layer].T


def feed_forward(model, layer, x):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""
    return (silu(x @ model.w1[layer].T) * (x @ model.w3[layer].T)) @ model.w2[layer].T


def logits(model, ids, pe="rope", theta=DEFAULT_THETA, max_bias=DEFAULT_MAX_BIAS, pos0=0):
    """Logits (len(ids), vocab) for every position of the token sequence `ids`,
    placed at positions pos0, pos0+1, ..."""
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
                          positions, pe, theta, slopes)
        x = x + feed_forward(model, layer, rmsnorm(x, model.rms_ffn[layer]))
    return rmsnorm(x, model.rms_final) @ model.wcls.T


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

def main(argv=None):
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
    mode.add_argument("--margins", action="store_true",
                      help="generate, then report the smallest top-2 margin on stderr")
    args = ap.parse_args(argv)

    model = load_checkpoint(args.model)
    tok = Tokenizer(args.tokenizer, model.config.vocab_size)
    opts = dict(pe=args.pe, theta=args.rope_theta, max_bias=args.alibi_max_bias, pos0=args.pos0)
    if args.tokenize:
        print(" ".join(map(str, tok.encode(args.prompt))))
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
