#!/usr/bin/python3
"""A whole gpt-oss checkpoint in the MXFP4 release's form and its float twin,
both through tools/convert.py, for tests/base/test_gguf.c.

    gpt_oss_mxfp4.py DIR

Writes tools/hf_tiny.py's gpt_oss into DIR/bf16, then two checkpoints of it:
DIR/mxfp4, whose experts are stored as openai/gpt-oss-20b stores them
(mlp.experts.{gate_up,down}_proj_{blocks,scales}, U8: each (out, in) matrix
in blocks of 32 inputs, weights 2i and 2i + 1 in byte i's low and high
nibbles, one E8M0 exponent byte per block), and DIR/float, whose experts
are the float32 values those blocks mean (in HF's (in, out) layout, as the
BF16 release stores them).  Converts both (DIR/mxfp4.gguf, DIR/float.gguf).
The blocks are the experts quantized by tools/quantize.py's ggml-exact
MXFP4 quantizer and re-laid into the release's nibble order.  Needs NumPy.
"""
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tools"))
import convert  # noqa: E402
import gguf  # noqa: E402
import quant_reference as qr  # noqa: E402
import quantize  # noqa: E402


def release_blocks(m):
    """(rows, cols) float32 -> the release's blocks (rows, cols/32, 16) and
    scales (rows, cols/32), and the float32 values they mean."""
    rows, cols = m.shape
    ggml = quantize.q_mxfp4(m.reshape(-1, 32))     # exponent, then weight j low / j + 16 high
    codes = np.concatenate([ggml[:, 1:] & 0xF, ggml[:, 1:] >> 4], axis=1)
    blocks = (codes[:, 0::2] | codes[:, 1::2] << 4).astype(np.uint8)
    values = qr.dequantize(gguf.GGML_MXFP4, ggml.tobytes()).reshape(rows, cols)
    return blocks.reshape(rows, cols // 32, 16), ggml[:, 0].reshape(rows, cols // 32), values


def write_checkpoint(src, directory, tensors):
    os.makedirs(directory, exist_ok=True)
    for f in ("config.json", "vocab.json", "merges.txt"):
        shutil.copy(os.path.join(src, f), directory)
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        raw = a.tobytes()
        header[name] = {"dtype": "U8" if a.dtype == np.uint8 else "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(directory, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    out = sys.argv[1]
    src = os.path.join(out, "bf16")
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "hf_tiny.py"), "make", "gpt_oss", src], check=True)
    st = convert.SafeTensors(src)
    tensors = {n: np.array(st.read(n), np.float32).reshape(st.shape(n)) for n in st.names()}
    mxfp4, floats = dict(tensors), dict(tensors)
    for name in [n for n in tensors if n.endswith(("experts.gate_up_proj", "experts.down_proj"))]:
        per_expert = [release_blocks(np.ascontiguousarray(w.T)) for w in tensors[name]]   # (out, in)
        del mxfp4[name]
        mxfp4[name + "_blocks"] = np.stack([b for b, _, _ in per_expert])
        mxfp4[name + "_scales"] = np.stack([s for _, s, _ in per_expert])
        floats[name] = np.stack([v.T for _, _, v in per_expert]).astype(np.float32)
    for kind, ts in (("mxfp4", mxfp4), ("float", floats)):
        write_checkpoint(src, os.path.join(out, kind), ts)
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "convert.py"), os.path.join(out, kind),
                        os.path.join(out, kind + ".gguf")], check=True)


if __name__ == "__main__":
    main()
