#!/usr/bin/python3
"""A synthetic gpt-oss MXFP4 checkpoint through tools/convert.py's
mxfp4_expert_sources, for tests/base/test_gguf.c.

    mxfp4_checkpoint.py DIR

Writes DIR/model.safetensors: one layer's experts as gpt-oss stores them
(model.layers.0.mlp.experts.{gate_up,down}_proj_{blocks,scales}, U8; 3
experts, width 64, dim 96), with random codes and exponents 100..150; then
DIR/experts.gguf, the three stacked expert matrices as MXFP4 tensors
blk.0.ffn_{gate,up,down}_exps.weight written from what the function
returns; and the values the checkpoint means, as little-endian f32 (gate,
up, down, each (experts, rows, cols) row-major):

  DIR/expected.f32  decoded as transformers does (weight 2i in byte i's low
                    nibble, 2i + 1 in its high one, E2M1 value times
                    2^(scale - 127), computed in float64: exact), gate the
                    even rows of gate_up and up the odd ones;
  DIR/control.f32   the same with gate and up as gate_up's first and second
                    halves of rows, the layout transformers 5 uses for the
                    other families' fused experts: a converter that split
                    gpt-oss that way must fail the comparison.

Stdlib only (the decoding is written out here, not taken from the tools).
"""
import json
import os
import random
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import convert  # noqa: E402
import gguf  # noqa: E402

N, WIDTH, DIM = 3, 64, 96
PREFIX = "model.layers.0.mlp."
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def write_safetensors(path, tensors):
    header, data = {}, bytearray()
    for name, (shape, raw) in tensors.items():
        header[name] = {"dtype": "U8", "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    head = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + data)


def decode(blocks, scales, rows, cols):
    """(rows, cols) floats of one expert's checkpoint bytes."""
    out = []
    nb = cols // 32
    for r in range(rows):
        row = []
        for b in range(nb):
            e = scales[r * nb + b]
            for byte in blocks[(r * nb + b) * 16:(r * nb + b + 1) * 16]:
                row += [E2M1[byte & 0xF] * 2.0 ** (e - 127), E2M1[byte >> 4] * 2.0 ** (e - 127)]
        out.append(row)
    return out


def main():
    out_dir = sys.argv[1]
    rng = random.Random(7)
    rand = lambda n, lo=0, hi=255: bytes(rng.randint(lo, hi) for _ in range(n))  # noqa: E731
    tensors = {
        PREFIX + "experts.gate_up_proj_blocks": ((N, 2 * WIDTH, DIM // 32, 16), rand(N * 2 * WIDTH * DIM // 2)),
        PREFIX + "experts.gate_up_proj_scales": ((N, 2 * WIDTH, DIM // 32), rand(N * 2 * WIDTH * DIM // 32, 100, 150)),
        PREFIX + "experts.down_proj_blocks": ((N, DIM, WIDTH // 32, 16), rand(N * DIM * WIDTH // 2)),
        PREFIX + "experts.down_proj_scales": ((N, DIM, WIDTH // 32), rand(N * DIM * WIDTH // 32, 100, 150)),
    }
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)

    st = convert.SafeTensors(out_dir)
    plan = convert.TensorPlan(st)
    gate, up, down = convert.mxfp4_expert_sources(st, plan, PREFIX, N, WIDTH, DIM)
    plan.finish()
    w = gguf.Writer()
    w.add_string("general.architecture", "test")
    for name, shape, source in (("gate", (N, WIDTH, DIM), gate), ("up", (N, WIDTH, DIM), up),
                                ("down", (N, DIM, WIDTH), down)):
        w.add_tensor("blk.0.ffn_%s_exps.weight" % name, shape, gguf.GGML_MXFP4, source)
    w.write(os.path.join(out_dir, "experts.gguf"))

    gu_b, gu_s = tensors[PREFIX + "experts.gate_up_proj_blocks"][1], tensors[PREFIX + "experts.gate_up_proj_scales"][1]
    dn_b, dn_s = tensors[PREFIX + "experts.down_proj_blocks"][1], tensors[PREFIX + "experts.down_proj_scales"][1]
    gate_up = [decode(gu_b[e * 2 * WIDTH * DIM // 2:(e + 1) * 2 * WIDTH * DIM // 2],
                      gu_s[e * 2 * WIDTH * DIM // 32:(e + 1) * 2 * WIDTH * DIM // 32], 2 * WIDTH, DIM)
               for e in range(N)]
    downs = [decode(dn_b[e * DIM * WIDTH // 2:(e + 1) * DIM * WIDTH // 2],
                    dn_s[e * DIM * WIDTH // 32:(e + 1) * DIM * WIDTH // 32], DIM, WIDTH) for e in range(N)]

    def floats(mats):
        return [v for m in mats for row in m for v in row]

    down = floats(downs)
    interleaved = floats([m[0::2] for m in gate_up]) + floats([m[1::2] for m in gate_up]) + down
    halves = floats([m[:WIDTH] for m in gate_up]) + floats([m[WIDTH:] for m in gate_up]) + down
    for name, values in (("expected", interleaved), ("control", halves)):
        with open(os.path.join(out_dir, name + ".f32"), "wb") as f:
            f.write(struct.pack("<%df" % len(values), *values))
    print(json.dumps({"floats": len(interleaved)}))


if __name__ == "__main__":
    main()
