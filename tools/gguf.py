#!/usr/bin/env python3
"""Stdlib-only GGUF v3 writer (and a small reader), little-endian.

Writer: metadata of every GGUF type including arrays of strings; tensors in
F32, F16, BF16 or Q8_0, encoded here with `array`/`struct`; tensor data
aligned to 32 bytes (general.alignment).  Tensor data is produced lazily at
write time, one tensor at a time, so converting a large model does not hold
it all in memory.

    w = Writer()
    w.add_string("general.architecture", "llama")
    w.add_uint32("llama.block_count", 5)
    w.add_array("tokenizer.ggml.tokens", STRING, ["<unk>", "<s>"])
    w.add_tensor("token_embd.weight", (512, 64), GGML_F16, lambda: array('f', ...))
    w.write("out.gguf")

Shapes given to add_tensor are PyTorch order (rows, cols); GGUF stores them
reversed (ne[0] = cols = the contiguous row length), as ggml does.

As a script:
    python3 tools/gguf.py dump FILE.gguf      keys and tensors
    python3 tools/gguf.py diff A.gguf B.gguf  exit 1 if metadata or tensor bytes differ
"""
import array
import math
import mmap
import struct
import sys

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
DEFAULT_ALIGNMENT = 32

# Metadata value types.
(UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY,
 UINT64, INT64, FLOAT64) = range(13)
TYPE_NAMES = ["uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
              "bool", "string", "array", "uint64", "int64", "float64"]
_SCALAR_FMT = {UINT8: "B", INT8: "b", UINT16: "H", INT16: "h", UINT32: "I",
               INT32: "i", FLOAT32: "f", BOOL: "?", UINT64: "Q", INT64: "q",
               FLOAT64: "d"}

# Tensor types (ggml's ids) and their block layout: (elements, bytes) per block.
GGML_F32, GGML_F16, GGML_Q8_0, GGML_BF16 = 0, 1, 8, 30
GGML_TYPE_NAMES = {GGML_F32: "f32", GGML_F16: "f16", GGML_Q8_0: "q8_0", GGML_BF16: "bf16"}
QK8_0 = 32
_BLOCK = {GGML_F32: (1, 4), GGML_F16: (1, 2), GGML_BF16: (1, 2), GGML_Q8_0: (QK8_0, 2 + QK8_0)}
# The other block-quantized types posenc reads (Reader maps them; their
# values are tools/quant_reference.py's, which needs NumPy).
GGML_MXFP4 = 39
_BLOCK.update({2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 10: (256, 84),
               11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210),
               GGML_MXFP4: (32, 17)})
GGML_TYPE_NAMES.update({2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 10: "q2_k", 11: "q3_k",
                        12: "q4_k", 13: "q5_k", 14: "q6_k", GGML_MXFP4: "mxfp4"})

# llama.cpp's general.file_type (LLAMA_FTYPE_*) for a model whose matrices
# have the given type.
FILE_TYPE = {GGML_F32: 0, GGML_F16: 1, GGML_Q8_0: 7, GGML_BF16: 32}

# Token types (tokenizer.ggml.token_type), as llama.cpp numbers them.
(TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED,
 TOKEN_BYTE) = range(1, 7)

_LITTLE = sys.byteorder == "little"


class GGUFError(Exception):
    pass


# ---- tensor encoders: array('f') -> bytes ------------------------------------

def _le(a):
    """Bytes of an array in little-endian order."""
    if not _LITTLE:
        a = array.array(a.typecode, a)
        a.byteswap()
    return a.tobytes()


def _as_f32_array(values):
    if isinstance(values, array.array) and values.typecode == "f":
        return values
    return array.array("f", values)


def encode_f32(values):
    return _le(_as_f32_array(values))


def encode_f16(values):
    """IEEE half, round to nearest even (struct's 'e'); beyond the half range
    a value becomes +-inf, as a C cast would."""
    try:
        return struct.pack("<%de" % len(values), *values)
    except OverflowError:
        out = bytearray()
        for v in values:
            try:
                out += struct.pack("<e", v)
            except OverflowError:
                out += struct.pack("<H", 0xFC00 if v < 0 else 0x7C00)
        return bytes(out)


def encode_bf16(values):
    """bfloat16: the top 16 bits of the float32, rounded to nearest even."""
    bits = array.array("I", _as_f32_array(values).tobytes())
    out = array.array("H", bytes(2 * len(bits)))
    for i, u in enumerate(bits):
        if (u & 0x7FFFFFFF) > 0x7F800000:          # NaN: keep it a (quiet) NaN
            out[i] = (u >> 16) | 0x40
        else:
            out[i] = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    return _le(out)


def _f32(x):
    """Round a Python float to float32, to reproduce ggml's float arithmetic
    exactly (a single product or quotient of floats computed in double and
    rounded once to float equals the float operation)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def encode_q8_0(values):
    """ggml's Q8_0 reference quantizer: per block of 32, d = max|x|/127,
    q = roundf(x/d) (half away from zero), d stored as f16."""
    xs = _as_f32_array(values)
    n = len(xs)
    if n % QK8_0:
        raise GGUFError("q8_0 needs a multiple of %d elements, got %d" % (QK8_0, n))
    out = bytearray()
    for b in range(0, n, QK8_0):
        block = xs[b:b + QK8_0]
        amax = max(abs(v) for v in block)
        d = _f32(amax / 127.0)
        inv = _f32(1.0 / d) if d else 0.0
        scaled = array.array("f", [v * inv for v in block])   # float32 products
        q = [int(math.floor(abs(v) + 0.5)) * (1 if v >= 0 else -1) for v in scaled]
        out += encode_f16([d])
        out += struct.pack("<32b", *q)
    return bytes(out)


_ENCODERS = {GGML_F32: encode_f32, GGML_F16: encode_f16, GGML_BF16: encode_bf16,
             GGML_Q8_0: encode_q8_0}


def row_size(ggml_type, n):
    blk, size = _BLOCK[ggml_type]
    return n // blk * size


# ---- writer ----------------------------------------------------------------------

class _Tensor:
    __slots__ = ("name", "ne", "type", "source", "nbytes", "offset")


class Writer:
    def __init__(self, alignment=DEFAULT_ALIGNMENT):
        if alignment <= 0 or alignment & (alignment - 1):
            raise GGUFError("alignment %r is not a power of two" % alignment)
        self.alignment = alignment
        self.kv = {}          # key -> (type, value, elem_type); dicts keep insertion order
        self.tensors = []
        self._names = set()

    # -- metadata
    def add(self, key, vtype, value, elem_type=None):
        if not isinstance(key, str) or not key:
            raise GGUFError("metadata key must be a non-empty string")
        if key in self.kv:
            raise GGUFError("duplicate metadata key %r" % key)
        if vtype == ARRAY:
            if elem_type is None or elem_type == ARRAY or not 0 <= elem_type < len(TYPE_NAMES):
                raise GGUFError("key %r: bad array element type %r" % (key, elem_type))
            value = list(value)
        elif not 0 <= vtype < len(TYPE_NAMES):
            raise GGUFError("key %r: unknown value type %r" % (key, vtype))
        self._encode_value(vtype, value, elem_type, key)   # fail now, not at write time
        self.kv[key] = (vtype, value, elem_type)

    def add_uint8(self, k, v): self.add(k, UINT8, v)
    def add_int8(self, k, v): self.add(k, INT8, v)
    def add_uint16(self, k, v): self.add(k, UINT16, v)
    def add_int16(self, k, v): self.add(k, INT16, v)
    def add_uint32(self, k, v): self.add(k, UINT32, v)
    def add_int32(self, k, v): self.add(k, INT32, v)
    def add_uint64(self, k, v): self.add(k, UINT64, v)
    def add_int64(self, k, v): self.add(k, INT64, v)
    def add_float32(self, k, v): self.add(k, FLOAT32, v)
    def add_float64(self, k, v): self.add(k, FLOAT64, v)
    def add_bool(self, k, v): self.add(k, BOOL, bool(v))
    def add_string(self, k, v): self.add(k, STRING, v)
    def add_array(self, k, elem_type, values): self.add(k, ARRAY, values, elem_type)

    # -- tensors
    def add_tensor(self, name, shape, ggml_type, source):
        """shape: PyTorch order, outermost first.  source: a sequence of
        prod(shape) floats in row-major order, or a zero-argument callable
        returning one (called once, at write time); for the block types
        this module has no encoder for, the encoded bytes themselves
        (tools/quantize.py)."""
        if not name or len(name.encode("utf-8")) > 64:
            raise GGUFError("tensor name %r must be 1..64 bytes" % name)
        if name in self._names:
            raise GGUFError("duplicate tensor name %r" % name)
        if ggml_type not in _BLOCK:
            raise GGUFError("tensor %r: unsupported type %r" % (name, ggml_type))
        if not 1 <= len(shape) <= 4 or any(int(d) <= 0 for d in shape):
            raise GGUFError("tensor %r: bad shape %r" % (name, tuple(shape)))
        t = _Tensor()
        t.name, t.type, t.source = name, ggml_type, source
        t.ne = [int(d) for d in reversed(shape)]
        blk = _BLOCK[ggml_type][0]
        if t.ne[0] % blk:
            raise GGUFError("tensor %r: row length %d is not a multiple of the %s block size %d"
                            % (name, t.ne[0], GGML_TYPE_NAMES[ggml_type], blk))
        nelem = 1
        for d in t.ne:
            nelem *= d
        t.nbytes = row_size(ggml_type, t.ne[0]) * (nelem // t.ne[0])
        self._names.add(name)
        self.tensors.append(t)

    # -- serialization
    @staticmethod
    def _encode_str(s, what):
        if isinstance(s, str):
            s = s.encode("utf-8")
        if not isinstance(s, (bytes, bytearray)):
            raise GGUFError("%s: expected a string, got %s" % (what, type(s).__name__))
        return struct.pack("<Q", len(s)) + bytes(s)

    def _encode_value(self, vtype, value, elem_type, key):
        try:
            if vtype == STRING:
                return self._encode_str(value, "key %r" % key)
            if vtype == ARRAY:
                head = struct.pack("<IQ", elem_type, len(value))
                if elem_type == STRING:
                    return head + b"".join(self._encode_str(s, "key %r" % key) for s in value)
                return head + struct.pack("<%d%s" % (len(value), _SCALAR_FMT[elem_type]), *value)
            return struct.pack("<" + _SCALAR_FMT[vtype], value)
        except (struct.error, OverflowError, TypeError) as e:
            raise GGUFError("key %r: value does not fit %s: %s"
                            % (key, TYPE_NAMES[vtype if vtype != ARRAY else elem_type], e))

    def _pad(self, f, pos):
        pad = -pos % self.alignment
        f.write(b"\0" * pad)
        return pos + pad

    def write(self, path):
        offset = 0
        for t in self.tensors:
            t.offset = offset
            offset += t.nbytes
            offset += -offset % self.alignment
        with open(path, "wb") as f:
            head = bytearray(GGUF_MAGIC)
            head += struct.pack("<IQQ", GGUF_VERSION, len(self.tensors), len(self.kv))
            for key, (vtype, value, elem_type) in self.kv.items():
                head += self._encode_str(key, "key")
                head += struct.pack("<I", vtype)
                head += self._encode_value(vtype, value, elem_type, key)
            for t in self.tensors:
                head += self._encode_str(t.name, "tensor name")
                head += struct.pack("<I", len(t.ne))
                head += struct.pack("<%dQ" % len(t.ne), *t.ne)
                head += struct.pack("<IQ", t.type, t.offset)
            f.write(head)
            pos = self._pad(f, len(head))
            for t in self.tensors:
                values = t.source() if callable(t.source) else t.source
                nelem = t.nbytes // _BLOCK[t.type][1] * _BLOCK[t.type][0]
                if isinstance(values, (bytes, bytearray)) or t.type not in _ENCODERS:
                    # already encoded (any type); the block types without an encoder here must be
                    if not isinstance(values, (bytes, bytearray)) or len(values) != t.nbytes:
                        raise GGUFError("tensor %r: type %d takes its %d encoded bytes"
                                        % (t.name, t.type, t.nbytes))
                    data = bytes(values)
                elif len(values) != nelem:
                    raise GGUFError("tensor %r: got %d values for shape %r"
                                    % (t.name, len(values), tuple(reversed(t.ne))))
                else:
                    data = _ENCODERS[t.type](values)
                assert len(data) == t.nbytes
                f.write(data)
                pos = self._pad(f, pos + len(data))


# ---- reader (for checks and dumps; the engine's reader is base/gguf.c) ------

class Reader:
    """Parses a GGUF v2/v3 file: .kv maps key -> (type, value), arrays as
    (ARRAY, (elem_type, [values])); .tensors maps name -> dict(ne, type,
    data) with data a memoryview of the raw bytes."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self._pos = 0
        if self._take(4) != GGUF_MAGIC:
            raise GGUFError("%s: not a GGUF file" % path)
        self.version, n_tensors, n_kv = struct.unpack("<IQQ", self._take(20))
        if self.version not in (2, 3):
            raise GGUFError("%s: unsupported GGUF version %d" % (path, self.version))
        self.kv = {}
        for _ in range(n_kv):
            key = self._str().decode("utf-8")
            vtype = self._unpack("<I")
            self.kv[key] = (vtype, self._value(vtype))
        infos = []
        for _ in range(n_tensors):
            name = self._str().decode("utf-8")
            n_dims = self._unpack("<I")
            ne = list(struct.unpack("<%dQ" % n_dims, self._take(8 * n_dims)))
            ttype, offset = struct.unpack("<IQ", self._take(12))
            infos.append((name, ne, ttype, offset))
        align = self.kv.get("general.alignment", (UINT32, DEFAULT_ALIGNMENT))[1]
        data_start = self._pos + (-self._pos % align)
        self.tensors = {}
        for name, ne, ttype, offset in infos:
            if ttype not in _BLOCK:
                raise GGUFError("%s: tensor %r has unsupported type %d" % (path, name, ttype))
            nelem = 1
            for d in ne:
                nelem *= d
            nbytes = row_size(ttype, ne[0]) * (nelem // ne[0])
            start = data_start + offset
            if start + nbytes > len(self._map):
                raise GGUFError("%s: tensor %r extends past the end of the file" % (path, name))
            self.tensors[name] = {"ne": ne, "type": ttype,
                                  "data": memoryview(self._map)[start:start + nbytes]}

    def _take(self, n):
        if self._pos + n > len(self._map):
            raise GGUFError("%s: truncated at offset %d" % (self.path, self._pos))
        b = self._map[self._pos:self._pos + n]
        self._pos += n
        return b

    def _unpack(self, fmt):
        return struct.unpack(fmt, self._take(struct.calcsize(fmt)))[0]

    def _str(self):
        return self._take(self._unpack("<Q"))

    def _value(self, vtype):
        if vtype == STRING:
            return self._str()
        if vtype == ARRAY:
            elem, n = struct.unpack("<IQ", self._take(12))
            if elem == STRING:
                return (elem, [self._str() for _ in range(n)])
            fmt = _SCALAR_FMT[elem]
            raw = self._take(n * struct.calcsize(fmt))
            return (elem, list(struct.unpack("<%d%s" % (n, fmt), raw)))
        return self._unpack("<" + _SCALAR_FMT[vtype])

    def floats(self, name):
        """Tensor values as a list of floats (dequantized)."""
        t = self.tensors[name]
        raw = bytes(t["data"])
        if t["type"] == GGML_F32:
            return list(struct.unpack("<%df" % (len(raw) // 4), raw))
        if t["type"] == GGML_F16:
            return list(struct.unpack("<%de" % (len(raw) // 2), raw))
        if t["type"] == GGML_BF16:
            hs = struct.unpack("<%dH" % (len(raw) // 2), raw)
            bits = struct.pack("<%dI" % len(hs), *(h << 16 for h in hs))
            return list(struct.unpack("<%df" % len(hs), bits))
        if t["type"] != GGML_Q8_0:
            raise GGUFError("%s: tensor %r: type %d is read by tools/quant_reference.py (NumPy)"
                            % (self.path, name, t["type"]))
        out = []
        for b in range(0, len(raw), 2 + QK8_0):
            d = struct.unpack_from("<e", raw, b)[0]
            out.extend(d * q for q in struct.unpack_from("<32b", raw, b + 2))
        return out

    def close(self):
        self.tensors = {}
        self._map.close()


def _show(value, limit=8):
    if isinstance(value, tuple):
        elem, items = value
        shown = ", ".join(_show(v) for v in items[:limit])
        more = ", ... (%d total)" % len(items) if len(items) > limit else ""
        return "[%s%s] of %s" % (shown, more, TYPE_NAMES[elem])
    if isinstance(value, bytes):
        return repr(value.decode("utf-8", "backslashreplace"))
    return repr(value)


def _main(argv):
    if len(argv) == 2 and argv[0] == "dump":
        r = Reader(argv[1])
        print("GGUF v%d: %d keys, %d tensors" % (r.version, len(r.kv), len(r.tensors)))
        for k, (vtype, v) in r.kv.items():
            print("  %-45s %-7s %s" % (k, TYPE_NAMES[vtype], _show(v)))
        for name, t in r.tensors.items():
            print("  %-45s %-5s ne=%s" % (name, GGML_TYPE_NAMES[t["type"]], t["ne"]))
        return 0
    if len(argv) == 3 and argv[0] == "diff":
        a, b = Reader(argv[1]), Reader(argv[2])
        diffs = []
        for k in sorted(set(a.kv) | set(b.kv)):
            if a.kv.get(k) != b.kv.get(k):
                diffs.append("key %s: %s vs %s" % (k, _show(a.kv.get(k, (0, None))[1]),
                                                  _show(b.kv.get(k, (0, None))[1])))
        for n in sorted(set(a.tensors) | set(b.tensors)):
            ta, tb = a.tensors.get(n), b.tensors.get(n)
            if ta is None or tb is None:
                diffs.append("tensor %s only in %s" % (n, argv[1] if tb is None else argv[2]))
            elif ta["ne"] != tb["ne"] or ta["type"] != tb["type"] or ta["data"] != tb["data"]:
                diffs.append("tensor %s differs" % n)
        for d in diffs:
            print(d)
        print("%d differences" % len(diffs))
        return 1 if diffs else 0
    sys.stderr.write("usage: gguf.py dump FILE | gguf.py diff A B\n")
    return 2


if __name__ == "__main__":
    try:
        sys.exit(_main(sys.argv[1:]))
    except (GGUFError, OSError, ValueError) as e:
        sys.stderr.write("gguf.py: error: %s\n" % str(e).replace("\n", " "))
        sys.exit(2)
