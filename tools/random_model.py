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
"""
import argparse
import array
import os
import random
import shutil
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convert  # noqa: E402
import gguf  # noqa: E402

# dim, hidden, layers, heads, kv heads, vocab, seq (llama2.c's stories models)
SHAPES = {
    "stories15M": (288, 768, 6, 6, 6, 32000, 256),
    "stories42M": (512, 1376, 8, 8, 8, 32000, 1024),
    "stories110M": (768, 2048, 12, 12, 12, 32000, 1024),
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


def parse_args(argv):
    ap = convert._Parser(prog="random_model.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("shape", choices=sorted(SHAPES) + ["custom"])
    ap.add_argument("outdir")
    ap.add_argument("--formats", default="bin,f32",
                    help="comma list of bin and GGUF types %s (default bin,f32)" % ",".join(GGUF_TYPES))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tokenizer", help="llama2.c tokenizer.bin with the model's vocabulary")
    for d in DIMS:
        ap.add_argument("--" + d.replace("_", "-"), type=int, dest=d)
    args = ap.parse_args(argv)
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
    formats = [f for f in args.formats.split(",") if f]
    for f in formats:
        if f != "bin" and f not in GGUF_TYPES:
            ap.error("unknown format %r (bin, %s)" % (f, ", ".join(GGUF_TYPES)))
    return args, tuple(dims), formats


def main(argv):
    args, dims, formats = parse_args(argv)
    os.makedirs(args.outdir, exist_ok=True)
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
    for f in formats:
        if f == "bin":
            continue
        path = os.path.join(args.outdir, "%s-%s.gguf" % (name, f))
        if os.path.exists(path):
            continue
        out = convert.Output(f)
        convert.convert_llama2c(binpath, out, tok)
        out.write(path)
        print(path)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
    except (convert.ConvertError, gguf.GGUFError, OSError) as e:
        sys.stderr.write("random_model.py: error: %s\n" % e)
        sys.exit(2)
