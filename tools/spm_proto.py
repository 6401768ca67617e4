#!/usr/bin/env python3
"""SentencePiece .model reader (stdlib only): the ModelProto protobuf, read
with a small wire-format parser (varints, fixed32/64, length-delimited
fields; unknown fields skipped, a sub-message seen twice merged as protobuf
merges it).  The same fields as tokenizer/spm_model.c:

  ModelProto      1 pieces (repeated SentencePiece)  2 trainer_spec
                  3 normalizer_spec  (4 self-test data, 5 denormalizer: unused)
  SentencePiece   1 piece  2 score (float)  3 type
  TrainerSpec     3 model_type  24 treat_whitespace_as_suffix  35 byte_fallback
                  44 unk_surface  46 bos_piece  47 eos_piece  48 pad_piece
  NormalizerSpec  2 precompiled_charsmap  3 add_dummy_prefix
                  4 remove_extra_whitespaces  5 escape_whitespaces

    m = read_model("tokenizer.model")
    m.pieces[0]            (b"<unk>", 0.0, 2)
    m.model_type           1 unigram, 2 BPE, 3 WORD, 4 CHAR
    m.control_id(m.bos_piece), m.unknown_id()
"""
import struct

WIRE_VARINT, WIRE_FIXED64, WIRE_LEN, WIRE_FIXED32 = 0, 1, 2, 5
UNIGRAM, BPE, WORD, CHAR = 1, 2, 3, 4
MODEL_TYPE_NAMES = {UNIGRAM: "UNIGRAM", BPE: "BPE", WORD: "WORD", CHAR: "CHAR"}
# SentencePiece.Type, the numbering GGUF's token_type uses too.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = range(1, 7)


class ProtoError(Exception):
    pass


class Model:
    """What a ModelProto holds that a tokenizer needs; unset fields keep the
    proto's defaults."""

    def __init__(self):
        self.pieces = []            # (bytes, float score, int type)
        self.model_type = UNIGRAM
        self.treat_whitespace_as_suffix = False
        self.byte_fallback = False
        self.unk_surface = " \u2047 ".encode("utf-8")
        self.bos_piece, self.eos_piece, self.pad_piece = b"<s>", b"</s>", b"<pad>"
        self.charsmap = b""
        self.add_dummy_prefix = True
        self.remove_extra_whitespaces = True
        self.escape_whitespaces = True

    def control_id(self, text):
        """Id of the control piece spelled `text`, else -1 (the library's
        PieceToId followed by IsControl, as for bos_id())."""
        for i, (p, _, t) in enumerate(self.pieces):
            if p == text and t == CONTROL:
                return i
        return -1

    def unknown_id(self):
        """The piece of type UNKNOWN (the library's unk_id), else -1."""
        return next((i for i, (_, _, t) in enumerate(self.pieces) if t == UNKNOWN), -1)


class _Reader:
    """Fields of data[start:end]; positions stay offsets into the file."""

    def __init__(self, data, start, end):
        self.data, self.pos, self.end = data, start, end

    def fail(self, what):
        raise ProtoError("corrupt SentencePiece model: %s at byte %d" % (what, self.pos))

    def more(self):
        return self.pos < self.end

    def varint(self):
        v = 0
        for shift in range(0, 64, 7):
            if self.pos >= self.end:
                self.fail("truncated varint")
            b = self.data[self.pos]
            self.pos += 1
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
        self.fail("varint longer than 10 bytes")

    def key(self):
        k = self.varint()
        if k >> 3 == 0 or k >> 32:
            self.fail("invalid field number")
        return k >> 3, k & 7

    def expect(self, wire, want):
        if wire != want:
            self.fail("field has the wrong wire type")

    def span(self, wire):
        """A length-delimited field's (start, end)."""
        self.expect(wire, WIRE_LEN)
        n = self.varint()
        if n > self.end - self.pos:
            self.fail("field runs past its end")
        start = self.pos
        self.pos += n
        return start, self.pos

    def bytes(self, wire):
        start, end = self.span(wire)
        return bytes(self.data[start:end])

    def message(self, wire):
        start, end = self.span(wire)
        return _Reader(self.data, start, end)

    def uint(self, wire):
        self.expect(wire, WIRE_VARINT)
        return self.varint()

    def float(self, wire):
        self.expect(wire, WIRE_FIXED32)
        if self.end - self.pos < 4:
            self.fail("truncated float")
        v = struct.unpack_from("<f", self.data, self.pos)[0]
        self.pos += 4
        return v

    def skip(self, wire):
        if wire == WIRE_VARINT:
            self.varint()
        elif wire == WIRE_LEN:
            self.span(wire)
        elif wire in (WIRE_FIXED64, WIRE_FIXED32):
            n = 8 if wire == WIRE_FIXED64 else 4
            if self.end - self.pos < n:
                self.fail("truncated fixed-size field")
            self.pos += n
        else:
            self.fail("unsupported wire type")


def _read_piece(r, m):
    text, score, ptype = b"", 0.0, NORMAL
    while r.more():
        field, wire = r.key()
        if field == 1:
            text = r.bytes(wire)
        elif field == 2:
            score = r.float(wire)
        elif field == 3:
            ptype = r.uint(wire)
            if not NORMAL <= ptype <= BYTE:
                raise ProtoError("piece %d has unknown type %d" % (len(m.pieces), ptype))
        else:
            r.skip(wire)
    m.pieces.append((text, score, ptype))


# field -> (attribute, kind) of TrainerSpec and NormalizerSpec
_TRAINER = {3: ("model_type", "uint"), 24: ("treat_whitespace_as_suffix", "bool"),
            35: ("byte_fallback", "bool"), 44: ("unk_surface", "bytes"),
            46: ("bos_piece", "bytes"),
            47: ("eos_piece", "bytes"), 48: ("pad_piece", "bytes")}
_NORMALIZER = {2: ("charsmap", "bytes"), 3: ("add_dummy_prefix", "bool"),
               4: ("remove_extra_whitespaces", "bool"), 5: ("escape_whitespaces", "bool")}


def _read_fields(r, m, fields):
    while r.more():
        field, wire = r.key()
        if field not in fields:
            r.skip(wire)
            continue
        attr, kind = fields[field]
        if kind == "bytes":
            setattr(m, attr, r.bytes(wire))
        else:
            v = r.uint(wire)
            setattr(m, attr, v != 0 if kind == "bool" else v)


def parse_model(data):
    """ModelProto bytes -> Model; ProtoError when the bytes are not one."""
    m = Model()
    r = _Reader(memoryview(data), 0, len(data))
    while r.more():
        field, wire = r.key()
        if field == 1:
            _read_piece(r.message(wire), m)
        elif field == 2:
            _read_fields(r.message(wire), m, _TRAINER)
        elif field == 3:
            _read_fields(r.message(wire), m, _NORMALIZER)
        else:
            r.skip(wire)
    return m


def read_model(path):
    with open(path, "rb") as f:
        data = f.read()
    try:
        return parse_model(data)
    except ProtoError as e:
        raise ProtoError("%s: %s" % (path, e))
