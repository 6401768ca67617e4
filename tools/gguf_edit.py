#!/usr/bin/env python3
"""Copies an f32 GGUF with one tensor left out and keys replaced, added or
removed, for the tests that check how the loader refuses a malformed file.

    gguf_edit.py SRC DST DROP SETTINGS

DROP: the tensor to leave out, NAME:N to make a 1-D tensor N values long
(its first N, zeros after its own: a vector of the wrong length), or "".  SETTINGS: "KEY=KIND:VALUE;..." with
KIND f (float32), u (uint32), s (string) or b (bool, 1 or 0); "KEY=" removes
the key; "" changes nothing."""
import sys

sys.path.insert(0, "tools")
import gguf  # noqa: E402

WRITERS = {"f": lambda w, k, v: w.add_float32(k, float(v)),
           "u": lambda w, k, v: w.add_uint32(k, int(v)),
           "s": lambda w, k, v: w.add_string(k, v),
           "b": lambda w, k, v: w.add_bool(k, v == "1")}


def main():
    src, dst, drop, settings = sys.argv[1:5]
    edits = dict(e.partition("=")[::2] for e in settings.split(";") if e)
    r, w = gguf.Reader(src), gguf.Writer()
    for k, (t, v) in r.kv.items():
        if k in edits:
            continue
        if t == gguf.ARRAY:
            w.add_array(k, v[0], v[1])
        else:
            w.add(k, t, v)
    for key, typed in edits.items():
        kind, _, value = typed.partition(":")
        if kind:
            WRITERS[kind](w, key, value)
    drop, _, keep = drop.partition(":")
    for n, t in r.tensors.items():
        if n == drop and keep:
            w.add_tensor(n, (int(keep),), gguf.GGML_F32,
                         lambda n=n: (list(r.floats(n)) + [0.0] * int(keep))[:int(keep)])
        elif n != drop:
            w.add_tensor(n, tuple(reversed(t["ne"])), gguf.GGML_F32, lambda n=n: r.floats(n))
    w.write(dst)


if __name__ == "__main__":
    main()
