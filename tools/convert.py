#!/usr/bin/env python3
"""Convert a model to GGUF (stdlib only).

    convert.py INPUT OUTPUT.gguf [--tokenizer PATH] [--dtype f32|f16|bf16|q8_0]
    convert.py --vocab-only TOKENIZER OUTPUT.gguf

INPUT is either
  * a GGUF file: its metadata and tensors are copied, and 2-D matrices are
    stored in --dtype (e.g. f32 -> q8_0); F32, F16, BF16 and Q8_0 inputs;
  * a llama2.c legacy checkpoint (.bin: 7 x int32 header, float32 weights),
    with its tokenizer (--tokenizer, or tokenizer.bin next to it);
  * a Hugging Face directory: config.json + model.safetensors (or shards
    listed in model.safetensors.index.json), model_type `llama` (tokenizer
    from --tokenizer, or the directory's tokenizer.model or tokenizer.bin),
    `mistral` (as llama, with llama.attention.sliding_window),
    `gpt2` (vocab.json + merges.txt), or `qwen2`, `gemma`, `gpt_neox`,
    `bloom`, `gpt_bigcode`, `phi`, `mpt` (GGUF architectures qwen2, gemma,
    gptneox, bloom, starcoder, phi2, mpt; tokenizer from --tokenizer, or the
    directory's tokenizer.model, tokenizer.json or vocab.json + merges.txt).
A tokenizer is a SentencePiece .model (BPE or unigram), a llama2.c
tokenizer.bin, or a GPT-2 vocab.json + merges.txt directory; --vocab-only
writes just its general.* and tokenizer keys, no tensors.

Keys, tensor names and layouts follow llama.cpp's convert_hf_to_gguf.py (e.g.
GPT-NeoX's and BLOOM's per-head fused qkv reordered into q | k | v blocks,
Gemma's norms stored as 1 + w, a tied head written as output.weight where
llama.cpp requires one), so standard models stay interchangeable with that
ecosystem.  What has no standard name
goes under `posenc.*`:
  posenc.positional       learned | sinusoidal | rope | alibi | none | t5 (always written)
  posenc.rope.pairing     interleaved (Meta/llama2.c pairs 2i,2i+1) | neox (rotate_half: i, i+d/2)
  posenc.embedding_scale  multiplier of the token embedding (sqrt(n_embd) when the
                          config has scale_embedding: true)
  posenc.relative_attention.max_distance, .bidirectional
                          t5's relative_attention_max_distance and _bidirectional
                          (its bucket count is llama.cpp's
                          gpt2.attention.relative_buckets_count, its table
                          blk.0.attn_rel_b.weight, (buckets, heads) as in HF)
  posenc.tokenizer.*      SentencePiece settings llama.cpp has no key for
                          (escape_whitespaces, treat_whitespace_as_suffix,
                          byte_fallback, unknown_surface), and encoder = llama2c
                          for a tokenizer.bin: encode as llama2.c does

--dtype applies to 2-D matrices only; norms and biases stay f32, as in
llama.cpp.  Q8_0 needs rows that are a multiple of 32 elements: other
matrices fall back to f16 (with a note on stderr).  Errors are one line
"convert.py: error: ..." and exit status 2.
"""
import argparse
import array
import base64
import json
import math
import os
import re
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf  # noqa: E402
import spm_proto  # noqa: E402

DTYPES = {"f32": gguf.GGML_F32, "f16": gguf.GGML_F16, "bf16": gguf.GGML_BF16,
          "q8_0": gguf.GGML_Q8_0}
POSITIONAL = ("learned", "sinusoidal", "rope", "alibi", "none", "t5")
_LITTLE = sys.byteorder == "little"


class ConvertError(Exception):
    pass


def fail(msg):
    raise ConvertError(msg)


def note(msg):
    sys.stderr.write("convert.py: note: %s\n" % msg)


def prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def read_f32(f, count):
    a = array.array("f")
    a.fromfile(f, count)          # EOFError if short: the caller has checked sizes
    if not _LITTLE:
        a.byteswap()
    return a


# ---- array reshuffles (flat row-major float arrays) --------------------------

def transpose(a, rows, cols):
    """(rows, cols) -> (cols, rows): row j of the result is column j of a."""
    out = array.array("f")
    for j in range(cols):
        out.extend(a[j::cols])
    return out


def unpermute_rotate_half(a, n_head, head_dim, cols):
    """HF stores q/k rows of each head as (2, head_dim/2): first halves, then
    second halves (rotate_half).  Meta/llama2.c/llama.cpp interleave the
    pairs: (head_dim/2, 2).  Row h*hd + 2i + j of the result is row
    h*hd + j*hd/2 + i of the input."""
    if head_dim % 2:
        fail("head dimension %d is odd: cannot undo the rotate_half permutation" % head_dim)
    half = head_dim // 2
    out = array.array("f")
    for h in range(n_head):
        for i in range(half):
            for j in (0, 1):
                r = h * head_dim + j * half + i
                out.extend(a[r * cols:(r + 1) * cols])
    return out


# ---- output -------------------------------------------------------------------------

class Output:
    """Collects metadata and tensors, picks tensor types, writes the file."""

    def __init__(self, dtype_name):
        self.w = gguf.Writer()
        self.dtype = DTYPES[dtype_name]
        self.fallbacks = []

    def tensor(self, name, shape, source):
        """1-D tensors (norms, biases) and biases of any shape (gpt-oss's
        experts') are always f32; matrices take --dtype."""
        ttype = gguf.GGML_F32
        if len(shape) >= 2 and not name.endswith(".bias"):
            ttype = self.dtype
            if ttype == gguf.GGML_Q8_0 and shape[-1] % gguf.QK8_0:
                ttype = gguf.GGML_F16
                self.fallbacks.append(name)
        self.w.add_tensor(name, shape, ttype, source)

    def general(self, arch, name):
        self.w.add_string("general.architecture", arch)
        self.w.add_string("general.name", name)
        self.w.add_uint32("general.file_type", gguf.FILE_TYPE[self.dtype])
        self.w.add_uint32("general.alignment", gguf.DEFAULT_ALIGNMENT)

    def write(self, path):
        if self.fallbacks:
            note("%d matrices have rows that are not a multiple of 32 and are stored as f16 "
                 "instead of q8_0 (e.g. %s)" % (len(self.fallbacks), self.fallbacks[0]))
        parent = os.path.dirname(path)
        if parent:
            try:
                os.makedirs(parent, exist_ok=True)
            except OSError as e:
                fail("%s: cannot create the output directory: %s" % (path, e.strerror))
        # Written beside the output and renamed, so a failed run leaves no
        # half-written file; errors name the output the user gave.
        tmp = path + ".tmp"
        try:
            self.w.write(tmp)
            os.replace(tmp, path)
        except OSError as e:
            fail("%s: cannot write: %s" % (path, e.strerror))
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)


# ---- tokenizers -----------------------------------------------------------------------

SPACE = "\u2581".encode("utf-8")   # SentencePiece's escaped space
_BYTE_PIECE = re.compile(rb"^<0x[0-9A-Fa-f]{2}>$")
# SentencePiece model type -> tokenizer.ggml.model, as llama.cpp names them
_SPM_MODELS = {spm_proto.BPE: "llama", spm_proto.UNIGRAM: "t5"}


class Vocab:
    """A vocabulary as GGUF stores it.  tokens: bytes or str; scores, merges:
    None when the format has none; ids: tokenizer.ggml.<name>_token_id
    (bos, eos, unknown, padding), written when >= 0; flags: tokenizer.ggml.*
    booleans; extra: (key, gguf type, value) of posenc.tokenizer.* keys, for
    what the engine needs and llama.cpp has no key for."""

    def __init__(self, model, tokens, types, scores=None):
        self.model, self.tokens, self.types, self.scores = model, tokens, types, scores
        self.pre = None
        self.merges = None
        self.ids = {}
        self.flags = {}
        self.charsmap = b""
        self.extra = []


def add_vocab(out, v):
    w = out.w
    w.add_string("tokenizer.ggml.model", v.model)
    if v.pre:
        w.add_string("tokenizer.ggml.pre", v.pre)
    w.add_array("tokenizer.ggml.tokens", gguf.STRING, v.tokens)
    if v.scores is not None:
        w.add_array("tokenizer.ggml.scores", gguf.FLOAT32, v.scores)
    w.add_array("tokenizer.ggml.token_type", gguf.INT32, v.types)
    if v.merges is not None:
        w.add_array("tokenizer.ggml.merges", gguf.STRING, v.merges)
    for name in ("bos", "eos", "unknown", "padding"):
        if v.ids.get(name, -1) >= 0:
            w.add_uint32("tokenizer.ggml.%s_token_id" % name, v.ids[name])
    for key, value in v.flags.items():
        w.add_bool("tokenizer.ggml." + key, value)
    if v.charsmap:   # llama.cpp stores the normalizer's blob as an array of bytes
        w.add_array("tokenizer.ggml.precompiled_charsmap", gguf.UINT8, v.charsmap)
    for key, vtype, value in v.extra:
        w.add("posenc.tokenizer." + key, vtype, value)


def llama2c_piece(piece):
    """llama2.c's exporter wrote SentencePiece's '\u2581' as ' ' and BOS/EOS as
    '\\n<s>\\n' and '\\n</s>\\n'; undo both so the vocabulary is SentencePiece's
    again, as llama.cpp stores it.  tokenizer/gguf_vocab.c redoes them."""
    if piece in (b"\n<s>\n", b"\n</s>\n"):
        piece = piece.strip(b"\n")
    return piece.replace(b" ", SPACE)


def read_llama2c_tokenizer(path):
    """llama2.c tokenizer.bin: int32 max_token_length, then per token f32
    score, int32 length, bytes, to the end of the file."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 4:
        fail("%s: not a llama2.c tokenizer (too short)" % path)
    pos = 4
    tokens, scores, types = [], [], []
    lossless = True
    while pos < len(data):
        i = len(tokens)
        if pos + 8 > len(data):
            fail("%s: truncated after %d tokens" % (path, i))
        score, n = struct.unpack_from("<fi", data, pos)
        pos += 8
        if n < 0 or pos + n > len(data):
            fail("%s: token %d has bad length %d" % (path, i, n))
        raw = data[pos:pos + n]
        pos += n
        piece = llama2c_piece(raw)
        # the respelling is undone exactly unless the file already had a
        # '\u2581' or a bare <s>/</s>
        lossless &= SPACE not in raw and raw not in (b"<s>", b"</s>")
        if piece in (b"<s>", b"</s>"):
            ttype = gguf.TOKEN_CONTROL
        elif piece == b"<unk>":
            ttype = gguf.TOKEN_UNKNOWN
        elif _BYTE_PIECE.match(piece):
            ttype = gguf.TOKEN_BYTE
        else:
            ttype = gguf.TOKEN_NORMAL
        tokens.append(piece)
        scores.append(score)
        types.append(ttype)
    if not tokens:
        fail("%s: has no tokens" % path)
    v = Vocab("llama", tokens, types, scores)
    v.ids = {"bos": 1 if len(tokens) > 1 else -1,   # llama2.c's fixed ids
             "eos": 2 if len(tokens) > 2 else -1,
             "unknown": 0 if tokens[0] == b"<unk>" else -1}
    v.flags = {"add_bos_token": True, "add_eos_token": False}
    if lossless:   # posenc encodes as llama2.c does (invalid UTF-8 included)
        v.extra.append(("encoder", gguf.STRING, "llama2c"))
    else:
        note("%s: pieces spell '\u2581' or a bare <s>/</s>: stored as a SentencePiece BPE "
             "vocabulary, which encodes invalid UTF-8 differently from llama2.c" % path)
    return v


def read_spm_tokenizer(path):
    """A SentencePiece .model: BPE as llama.cpp's `llama`, unigram as `t5`."""
    m = spm_proto.read_model(path)
    model = _SPM_MODELS.get(m.model_type)
    if model is None:
        fail("%s: SentencePiece model type %s is not supported (BPE and unigram are)"
             % (path, spm_proto.MODEL_TYPE_NAMES.get(m.model_type, m.model_type)))
    if not m.pieces:
        fail("%s: has no pieces" % path)
    v = Vocab(model, [p[0] for p in m.pieces], [p[2] for p in m.pieces],
              [p[1] for p in m.pieces])
    v.ids = {"bos": m.control_id(m.bos_piece), "eos": m.control_id(m.eos_piece),
             "unknown": m.unknown_id(), "padding": m.control_id(m.pad_piece)}
    v.flags = {"add_space_prefix": m.add_dummy_prefix,
               "remove_extra_whitespaces": m.remove_extra_whitespaces,
               "add_bos_token": v.ids["bos"] >= 0, "add_eos_token": False}
    v.charsmap = m.charsmap
    v.extra = [("escape_whitespaces", gguf.BOOL, m.escape_whitespaces),
               ("treat_whitespace_as_suffix", gguf.BOOL, m.treat_whitespace_as_suffix),
               ("byte_fallback", gguf.BOOL, m.byte_fallback),
               ("unknown_surface", gguf.STRING, m.unk_surface)]
    return v


def gpt2_paths(path):
    """vocab.json and merges.txt of a directory, or of a vocab.json path."""
    if os.path.isdir(path):
        return os.path.join(path, "vocab.json"), os.path.join(path, "merges.txt")
    return path, os.path.join(os.path.dirname(path), "merges.txt")


def read_gpt2_tokenizer(path, n_rows=None):
    """vocab.json + merges.txt.  n_rows: the embedding's rows, which tokens
    must fit and which ids without a token are padded to, as llama.cpp pads."""
    vocab_path, merges_path = gpt2_paths(path)
    for p in (vocab_path, merges_path):
        if not os.path.isfile(p):
            fail("%s: missing (a gpt2 vocabulary is vocab.json and merges.txt)" % p)
    vocab = load_json(vocab_path)
    if not isinstance(vocab, dict):
        fail("%s: expected a JSON object of token -> id" % vocab_path)
    if n_rows is None:
        n_rows = max((i for i in vocab.values() if isinstance(i, int)), default=-1) + 1
    tokens = [None] * n_rows
    for tok, i in vocab.items():
        if not isinstance(i, int) or not 0 <= i < n_rows:
            fail("%s: token %r has id %r outside the embedding's %d rows"
                 % (vocab_path, tok, i, n_rows))
        if tokens[i] is not None:
            fail("%s: id %d is used twice" % (vocab_path, i))
        tokens[i] = tok
    if not tokens:
        fail("%s: has no tokens" % vocab_path)
    types = [gguf.TOKEN_NORMAL] * n_rows
    for i in range(n_rows):   # embedding rows without a token, as llama.cpp pads
        if tokens[i] is None:
            tokens[i] = "[PAD%d]" % i
            types[i] = gguf.TOKEN_UNUSED
    with open(merges_path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[0].startswith("#version"):
        lines = lines[1:]
    merges = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if len(line.split(" ")) != 2:
            fail("%s: line %d is not a merge 'a b': %r" % (merges_path, n, line[:40]))
        merges.append(line)
    v = Vocab("gpt2", tokens, types)
    v.pre = "gpt-2"
    v.merges = merges
    if "<|endoftext|>" in vocab:   # GPT-2's one special token, as tokenizer_load reads it
        v.ids = {"bos": vocab["<|endoftext|>"], "eos": vocab["<|endoftext|>"]}
    return v

# tokenizer.json pre-tokenizers posenc implements, by their Split patterns,
# and the tokenizer.ggml.pre name llama.cpp gives each (tokenizer/pretok.c).
_WS = r"\s*[\r\n]+|\s+(?!\S)|\s+"
_LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|%s| ?[^\s\p{L}\p{N}]+[\r\n]*|" + _WS
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_BLOOM = " ?[^(\\s|.,!?\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c)]+"
HF_PATTERNS = {
    (_GPT2,): "gpt-2",
    (r"\p{N}", _GPT2): "starcoder",
    (_BLOOM,): "bloom",
    (_BLOOM, r"\p{N}"): "viking",
    (_LLAMA3 % r"\p{N}{1,3}",): "llama-bpe",
    (_LLAMA3 % r"\p{N}",): "qwen2",
    (r"\p{N}{1,3}", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
     "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
     "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"): "deepseek-v3",
}


def hf_pre_name(path, pre):
    """The pre name of a tokenizer.json pre_tokenizer (as tokenizer/hf_json.c reads it)."""
    def byte_level(p, use_regex):
        return (isinstance(p, dict) and p.get("type") == "ByteLevel"
                and p.get("add_prefix_space", True) is False and p.get("use_regex", True) is use_regex)
    if byte_level(pre, True):
        return "gpt-2"
    steps = pre.get("pretokenizers") if isinstance(pre, dict) and pre.get("type") == "Sequence" else None
    if (steps and len(steps) == 2 and isinstance(steps[0], dict) and steps[0].get("type") == "Digits"
            and steps[0].get("individual_digits") is True and byte_level(steps[1], True)):
        return "starcoder"   # StarCoder's own spelling of its pattern
    if not steps or not byte_level(steps[-1], False):
        fail("%s: pre_tokenizer is not a byte-level one posenc knows" % path)
    regexes = tuple((s.get("pattern") or {}).get("Regex") for s in steps[:-1])
    if regexes not in HF_PATTERNS or any(s.get("type") != "Split" or s.get("behavior") != "Isolated"
                                         or s.get("invert") for s in steps[:-1]):
        fail("%s: pre_tokenizer pattern %r is not one posenc implements" % (path, regexes[-1:]))
    return HF_PATTERNS[regexes]


def _unigram_settings(path, j):
    """(add_space_prefix, remove_extra_whitespaces, charsmap) of a Unigram
    tokenizer.json's SentencePiece-style pipeline: what SentencePiece (and
    llama.cpp's t5 vocabulary) can do of it, else a failure."""
    norm = j.get("normalizer") or {"type": "Sequence", "normalizers": []}
    steps = norm.get("normalizers") if norm.get("type") == "Sequence" else [norm]
    kinds = [s.get("type") if isinstance(s, dict) else None for s in steps or []]
    charsmap = b""
    if kinds[:1] == ["Precompiled"]:
        try:
            charsmap = base64.b64decode(steps[0].get("precompiled_charsmap") or "", validate=True)
        except (ValueError, TypeError):
            fail("%s: precompiled_charsmap is not base64" % path)
        kinds = kinds[1:]
    if kinds not in ([], ["Strip", "Replace"]):
        fail("%s: Unigram normalizer %s has no SentencePiece equivalent (Precompiled, then "
             "nothing or Strip and Replace \" {2,}\")" % (path, kinds))
    meta = j.get("pre_tokenizer") or {}
    scheme = meta.get("prepend_scheme")
    if scheme is None:
        scheme = "always" if meta.get("add_prefix_space", True) else "never"
    if meta.get("type") != "Metaspace" or meta.get("replacement") != "\u2581" or scheme == "first":
        fail("%s: the Unigram pre_tokenizer must be Metaspace with U+2581 and prepend_scheme "
             "always or never (SentencePiece has no \"first\")" % path)
    return scheme == "always", bool(kinds), charsmap


def check_added_tokens(path, added):
    """Added tokens that take whitespace or match whole words only: GGUF has
    no key for that (llama.cpp sets such attributes by token name)."""
    for a in added:
        for key in ("lstrip", "rstrip", "single_word"):
            if a.get(key):
                fail("%s: added token %r has %s, which a GGUF vocabulary cannot say"
                     % (path, a.get("content"), key))


def read_hf_unigram(path, j):
    """A Unigram tokenizer.json (a SentencePiece conversion) as llama.cpp's
    t5 vocabulary: pieces and scores, the unknown piece, added tokens as
    control (special) or user-defined pieces, byte pieces under byte
    fallback, the SentencePiece flags its pipeline amounts to."""
    model = j["model"]
    vocab, unk = model.get("vocab"), model.get("unk_id")
    if not isinstance(vocab, list) or not all(
            isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) and
            isinstance(e[1], (int, float)) for e in vocab):
        fail("%s: the Unigram vocab is not a list of [piece, score]" % path)
    if not isinstance(unk, int) or not 0 <= unk < len(vocab):
        fail("%s: unk_id is missing or not an id of the vocab" % path)
    add_prefix, remove_spaces, charsmap = _unigram_settings(path, j)
    byte_fallback = bool(model.get("byte_fallback"))
    tokens, scores = [p for p, _ in vocab], [float(s) for _, s in vocab]
    types = [gguf.TOKEN_BYTE if byte_fallback and _BYTE_PIECE.match(p.encode("utf-8"))
             else gguf.TOKEN_NORMAL for p in tokens]
    types[unk] = gguf.TOKEN_UNKNOWN
    check_added_tokens(path, j.get("added_tokens") or [])
    for a in j.get("added_tokens") or []:
        if a["id"] >= len(tokens) or tokens[a["id"]] != a["content"]:
            fail("%s: added token %r is not the model's piece %d" % (path, a["content"], a["id"]))
        if a["id"] != unk:
            types[a["id"]] = gguf.TOKEN_CONTROL if a.get("special") else gguf.TOKEN_USER_DEFINED
    v = Vocab("t5", tokens, types, scores)
    v.pre = "default"
    v.ids = {"unknown": unk}
    v.flags = {"add_space_prefix": add_prefix, "remove_extra_whitespaces": remove_spaces,
               "add_bos_token": False, "add_eos_token": True}
    v.charsmap = charsmap
    v.extra = [("byte_fallback", gguf.BOOL, byte_fallback)]
    for name, text in (("bos", "<s>"), ("eos", "</s>")):
        if text in tokens and types[tokens.index(text)] == gguf.TOKEN_CONTROL:
            v.ids[name] = tokens.index(text)
    return v


def read_hf_tokenizer(path):
    """A Hugging Face tokenizer.json (byte-level BPE; tokenizer_config.json
    beside it for BOS/EOS): special added tokens become control tokens, the
    others user-defined, as llama.cpp's converter types them."""
    if os.path.isdir(path):
        path = os.path.join(path, "tokenizer.json")
    j = load_json(path)
    model = j.get("model") or {}
    if model.get("type") == "Unigram":
        return read_hf_unigram(path, j)
    if model.get("type") != "BPE" or model.get("byte_fallback"):
        fail("%s: only byte-level BPE models convert (model type %r)" % (path, model.get("type")))
    pre = hf_pre_name(path, j.get("pre_tokenizer"))
    norm = j.get("normalizer")
    nfc = isinstance(norm, dict) and norm.get("type") == "NFC"
    if norm and not nfc and norm != {"type": "Sequence", "normalizers": []}:
        fail("%s: normalizer %r is not supported (none or NFC only)" % (path, norm.get("type")))
    vocab = model.get("vocab") or {}
    added = j.get("added_tokens") or []
    check_added_tokens(path, added)
    n = max([i for i in vocab.values()] + [a["id"] for a in added], default=-1) + 1
    tokens, types = [None] * n, [gguf.TOKEN_NORMAL] * n
    for tok, i in vocab.items():
        tokens[i] = tok
    for a in added:
        tokens[a["id"]] = a["content"]
        types[a["id"]] = gguf.TOKEN_CONTROL if a.get("special") else gguf.TOKEN_USER_DEFINED
    if None in tokens:
        fail("%s: no token has id %d" % (path, tokens.index(None)))
    v = Vocab("gpt2", tokens, types)
    v.pre = pre
    v.merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges") or []]
    if nfc:   # llama.cpp has no key for a normalizer
        v.extra.append(("nfc", gguf.BOOL, True))
    config_path = os.path.join(os.path.dirname(path), "tokenizer_config.json")
    config = load_json(config_path) if os.path.isfile(config_path) else {}
    for name in ("bos", "eos"):
        t = config.get(name + "_token")
        t = t.get("content") if isinstance(t, dict) else t
        if isinstance(t, str) and t in tokens:
            v.ids[name] = tokens.index(t)
    return v


def tokenizer_format(path):
    """gpt2, spm or llama2c: by name first, then by content, as tokenizer_load
    chooses (a JSON object is a GPT-2 vocab, a protobuf starting with field 1
    a SentencePiece model)."""
    if os.path.basename(path) == "tokenizer.json" or os.path.isfile(os.path.join(path, "tokenizer.json")):
        return "hf"
    if os.path.isdir(path) or path.endswith(".json"):
        return "gpt2"
    if path.endswith(".model"):
        return "spm"
    if path.endswith(".bin"):
        return "llama2c"
    with open(path, "rb") as f:
        head = f.read()
    if head.lstrip(b" \t\r\n")[:1] == b"{":
        return "gpt2"
    return "spm" if head[:1] == b"\x0a" else "llama2c"


def read_tokenizer(path, n_rows=None):
    kind = tokenizer_format(path)
    if kind == "gpt2":
        return read_gpt2_tokenizer(path, n_rows)
    if kind == "hf":
        v = read_hf_tokenizer(path)
    else:
        v = read_spm_tokenizer(path) if kind == "spm" else read_llama2c_tokenizer(path)
    if n_rows is not None and len(v.tokens) != n_rows:
        fail("%s: has %d tokens, the model needs %d" % (path, len(v.tokens), n_rows))
    return v


def config_token_ids(v, config):
    """BOS/EOS from config.json override the tokenizer's."""
    for name in ("bos", "eos"):
        key = name + "_token_id"
        i = config.get(key)
        if i is None:
            continue
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(v.tokens):
            fail("config.json: %s %r is not a token id" % (key, i))
        v.ids[name] = i


def add_model_tokenizer(out, path, n_rows, config):
    v = read_tokenizer(path, n_rows)
    config_token_ids(v, config)
    add_vocab(out, v)


def convert_vocab_only(path, out):
    """Only general.* and the vocabulary (tokenizer.ggml.*, posenc.tokenizer.*),
    no tensors, like llama.cpp's vocab-only files."""
    v = read_tokenizer(path)
    out.general(v.model, os.path.basename(os.path.normpath(path)))
    add_vocab(out, v)


# ---- llama2.c legacy .bin -------------------------------------------------------------

def convert_llama2c(path, out, tokenizer):
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(28)
        if len(head) < 28:
            fail("%s: too short for a llama2.c header" % path)
        if head[:4] == b"ak42":
            fail("%s: llama2.c version-1/2 export format is not supported; "
                 "export with --version 0 (legacy)" % path)
        dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len = struct.unpack("<7i", head)
    shared = vocab > 0
    vocab = abs(vocab)
    if min(dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len) <= 0:
        fail("%s: not a GGUF file, a llama2.c checkpoint (its header would be 7 positive "
             "int32) or a Hugging Face directory" % path)
    if dim % n_heads or n_heads % n_kv or (dim // n_heads) % 2:
        fail("%s: not a llama2.c checkpoint (inconsistent header: dim %d, %d heads, %d kv "
             "heads), nor a GGUF file or a Hugging Face directory" % (path, dim, n_heads, n_kv))
    hd = dim // n_heads
    kv_dim = n_kv * hd
    L = n_layers
    # (name, per-layer shape or None for a single tensor) in file order.
    layout = [
        ("token_embd", (vocab, dim), 1), ("attn_norm", (dim,), L), ("attn_q", (dim, dim), L),
        ("attn_k", (kv_dim, dim), L), ("attn_v", (kv_dim, dim), L),
        ("attn_output", (dim, dim), L), ("ffn_norm", (dim,), L),
        ("ffn_gate", (hidden, dim), L), ("ffn_down", (dim, hidden), L),
        ("ffn_up", (hidden, dim), L), ("output_norm", (dim,), 1),
        ("freq_cis", (2, seq_len * hd // 2), 1),   # RoPE tables, recomputed by the engine
    ]
    if not shared:
        layout.append(("output", (vocab, dim), 1))
    offset = 28
    where = {}
    for name, shape, count in layout:
        where[name] = (offset, shape)
        offset += 4 * prod(shape) * count
    if offset != size:
        fail("%s: file has %d bytes, the header implies %d" % (path, size, offset))

    def load(name, layer=0):
        off, shape = where[name]

        def read():
            with open(path, "rb") as f:
                f.seek(off + 4 * prod(shape) * layer)
                return read_f32(f, prod(shape))
        return read

    if tokenizer is None:
        guess = os.path.join(os.path.dirname(os.path.abspath(path)), "tokenizer.bin")
        if not os.path.isfile(guess):
            fail("no tokenizer: pass --tokenizer (a llama2.c tokenizer.bin or a "
                 "SentencePiece .model)")
        tokenizer = guess

    out.general("llama", os.path.splitext(os.path.basename(path))[0])
    write_llama_hparams(out, ctx=seq_len, dim=dim, hidden=hidden, n_layers=L, n_heads=n_heads,
                        n_kv=n_kv, head_dim=hd, eps=1e-5, theta=10000.0)
    add_model_tokenizer(out, tokenizer, vocab, {})
    out.tensor("token_embd.weight", (vocab, dim), load("token_embd"))
    for l in range(L):
        for name in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm",
                     "ffn_gate", "ffn_down", "ffn_up"):
            out.tensor("blk.%d.%s.weight" % (l, name), where[name][1], load(name, l))
    out.tensor("output_norm.weight", (dim,), load("output_norm"))
    if not shared:
        out.tensor("output.weight", (vocab, dim), load("output"))


def add_shape_hparams(out, arch, ctx, dim, hidden, n_layers, n_heads, n_kv):
    """The keys every family has."""
    w = out.w
    w.add_uint32(arch + ".context_length", ctx)
    w.add_uint32(arch + ".embedding_length", dim)
    w.add_uint32(arch + ".block_count", n_layers)
    w.add_uint32(arch + ".feed_forward_length", hidden)
    w.add_uint32(arch + ".attention.head_count", n_heads)
    w.add_uint32(arch + ".attention.head_count_kv", n_kv)


def write_llama_hparams(out, ctx, dim, hidden, n_layers, n_heads, n_kv, head_dim, eps, theta,
                        arch="llama", pairing="interleaved", rope_dim=None):
    add_shape_hparams(out, arch, ctx, dim, hidden, n_layers, n_heads, n_kv)
    w = out.w
    w.add_float32(arch + ".attention.layer_norm_rms_epsilon", eps)
    w.add_float32(arch + ".rope.freq_base", theta)
    w.add_uint32(arch + ".rope.dimension_count", rope_dim or head_dim)
    if head_dim * n_heads != dim:
        w.add_uint32(arch + ".attention.key_length", head_dim)
        w.add_uint32(arch + ".attention.value_length", head_dim)
    w.add_string("posenc.positional", "rope")
    w.add_string("posenc.rope.pairing", pairing)


# ---- Hugging Face safetensors ---------------------------------------------------------------

_ST_DTYPES = {"F32": 4, "F16": 2, "BF16": 2, "U8": 1}


def load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except ValueError as e:
        fail("%s: invalid JSON: %s" % (path, e))


class SafeTensors:
    """Tensor directory over one or more .safetensors files: 8-byte LE header
    length, a JSON header {name: {dtype, shape, data_offsets}}, then data."""

    def __init__(self, model_dir):
        self.entries = {}   # name -> (file, dtype, shape, start, end)
        index = os.path.join(model_dir, "model.safetensors.index.json")
        single = os.path.join(model_dir, "model.safetensors")
        if os.path.isfile(single):
            files = [single]
        elif os.path.isfile(index):
            wm = load_json(index).get("weight_map")
            if not isinstance(wm, dict):
                fail("%s: no weight_map" % index)
            files = [os.path.join(model_dir, f) for f in sorted(set(wm.values()))]
        else:
            fail("%s: no model.safetensors or model.safetensors.index.json" % model_dir)
        for path in files:
            self._read_header(path)

    def _read_header(self, path):
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            raw = f.read(8)
            if len(raw) < 8:
                fail("%s: too short for safetensors" % path)
            n = struct.unpack("<Q", raw)[0]
            if n > size - 8:
                fail("%s: header length %d exceeds the file" % (path, n))
            try:
                header = json.loads(f.read(n).decode("utf-8"))
            except ValueError as e:
                fail("%s: bad safetensors header: %s" % (path, e))
        if not isinstance(header, dict):
            fail("%s: bad safetensors header" % path)
        data_start, data_len = 8 + n, size - 8 - n
        for name, e in header.items():
            if name == "__metadata__":
                continue
            try:
                dtype, shape, (b, end) = e["dtype"], [int(d) for d in e["shape"]], e["data_offsets"]
            except (KeyError, TypeError, ValueError):
                fail("%s: bad entry for tensor %r" % (path, name))
            if not 0 <= b <= end <= data_len:
                fail("%s: tensor %r data [%d, %d) is outside the file" % (path, name, b, end))
            if name in self.entries:
                fail("%s: tensor %r appears twice" % (path, name))
            if dtype in _ST_DTYPES and end - b != prod(shape) * _ST_DTYPES[dtype]:
                fail("%s: tensor %r: %d bytes for %s %r" % (path, name, end - b, dtype, shape))
            self.entries[name] = (path, dtype, shape, data_start + b, data_start + end)

    def __contains__(self, name):
        return name in self.entries

    def names(self):
        return list(self.entries)

    def shape(self, name):
        return tuple(self.entries[name][2])

    def read_u8(self, name):
        """The raw bytes of a U8 tensor (MXFP4 blocks and scales)."""
        path, dtype, shape, start, end = self.entries[name]
        if dtype != "U8":
            fail("%s: tensor %r has dtype %s, expected U8" % (path, name, dtype))
        with open(path, "rb") as f:
            f.seek(start)
            return f.read(end - start)

    def read(self, name):
        path, dtype, shape, start, end = self.entries[name]
        if dtype not in _ST_DTYPES or dtype == "U8":
            fail("%s: tensor %r has dtype %s (supported: F32, F16, BF16)" % (path, name, dtype))
        with open(path, "rb") as f:
            f.seek(start)
            raw = f.read(end - start)
        n = prod(shape)
        if dtype == "F32":
            a = array.array("f")
            a.frombytes(raw)
            if not _LITTLE:
                a.byteswap()
            return a
        if dtype == "F16":
            return array.array("f", struct.unpack("<%de" % n, raw))
        halves = struct.unpack("<%dH" % n, raw)
        return array.array("f", struct.pack("<%dI" % n, *(h << 16 for h in halves)))


class TensorPlan:
    """Checks that every source tensor is present with the expected shape
    and used exactly once, before anything is written."""

    def __init__(self, st, ignore=()):
        self.st = st
        self.used = set()
        self.ignore = ignore

    def take(self, name, shape):
        if name not in self.st:
            fail("missing tensor %s" % name)
        if self.st.shape(name) != tuple(shape):
            fail("tensor %s has shape %s, expected %s" % (name, list(self.st.shape(name)),
                                                          list(shape)))
        self.used.add(name)
        return name

    def finish(self):
        extra = [n for n in self.st.names()
                 if n not in self.used and not any(n.endswith(s) for s in self.ignore)]
        if extra:
            fail("unexpected tensor %s (%d not converted)" % (extra[0], len(extra)))


def model_name(config, model_dir):
    return config.get("_name_or_path") or os.path.basename(os.path.normpath(model_dir))


def cfg_int(config, key, default=None):
    v = config.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        fail("config.json: %s must be a positive integer, got %r" % (key, v))
    return v


def cfg_float(config, key, default):
    v = config.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        fail("config.json: %s must be a number, got %r" % (key, v))
    return float(v)


def add_nope_layers(out, config, n_layers):
    """SmolLM3's layers without rotation: llama.cpp's smollm3 has every 4th
    so; another pattern (no_rope_layers: 1 = rotates) goes to
    posenc.layers.positional."""
    flags = config.get("no_rope_layers")
    default = [int((l + 1) % 4 != 0) for l in range(n_layers)]
    if flags is None:
        step = cfg_int(config, "no_rope_layer_interval", 4)
        flags = [int((l + 1) % step != 0) for l in range(n_layers)]
    if not isinstance(flags, list) or len(flags) != n_layers or \
            any(f not in (0, 1) for f in flags):
        fail("config.json: no_rope_layers must hold 0 or 1 for each of the %d layers" % n_layers)
    if flags != default:
        out.w.add_array("posenc.layers.positional", gguf.STRING,
                        ["rope" if f else "none" for f in flags])


def llama_shape(config):
    """(dim, hidden, layers, heads, kv heads, head size) of a llama-like
    config, checked: heads a multiple of kv heads, an even head size, dim a
    multiple of the heads unless head_dim says otherwise."""
    dim = cfg_int(config, "hidden_size")
    hidden = cfg_int(config, "intermediate_size")
    L = cfg_int(config, "num_hidden_layers")
    n_heads = cfg_int(config, "num_attention_heads")
    n_kv = cfg_int(config, "num_key_value_heads", n_heads)
    hd = cfg_int(config, "head_dim") if config.get("head_dim") else dim // n_heads
    if n_heads % n_kv or (config.get("head_dim") is None and dim % n_heads) or hd % 2:
        fail("config.json: inconsistent attention: hidden_size %d, %d heads, %d kv heads"
             % (dim, n_heads, n_kv))
    return dim, hidden, L, n_heads, n_kv, hd


def rotary_dims(config, hd):
    """The rotated dims of a head: partial_rotary_factor of it, even and > 0."""
    rope_dim = int(hd * cfg_float(config, "partial_rotary_factor", 1.0))
    if rope_dim < 2 or rope_dim % 2:
        fail("config.json: partial_rotary_factor gives %d rotated dims of %d (must be even, > 0)"
             % (rope_dim, hd))
    return rope_dim


def convert_hf_llama(model_dir, config, out, tokenizer, arch="llama"):
    """llama, and the families of the same layout whose q/k rows stay in HF's
    rotate_half order (llama.cpp runs them with NeoX pairs): qwen2, with
    q/k/v biases, and gemma, whose RMSNorms scale by (1 + w) (stored as
    1 + w, as llama.cpp's converter does), GeGLU, tied head."""
    qwen2, gemma, smollm3 = arch == "qwen2", arch == "gemma", arch == "smollm3"
    neox = qwen2 or gemma
    st = SafeTensors(model_dir)
    dim, hidden, L, n_heads, n_kv, hd = llama_shape(config)
    act = config.get("hidden_activation") or config.get("hidden_act", "silu")
    if gemma and act not in ("gelu", "gelu_pytorch_tanh"):
        fail("config.json: hidden_activation %r is not supported (gemma uses tanh GELU)" % act)
    if not gemma and act != "silu":
        fail("config.json: hidden_act %r is not supported (%s uses silu)" % (act, arch))
    if not qwen2 and (config.get("attention_bias") or config.get("mlp_bias")):
        fail("config.json: attention/mlp biases are not supported for llama")
    if qwen2 and config.get("use_sliding_window"):
        fail("config.json: use_sliding_window is not supported")
    vocab = cfg_int(config, "vocab_size")
    ctx = cfg_int(config, "max_position_embeddings")

    plan = TensorPlan(st, ignore=("rotary_emb.inv_freq",))
    P = "model.layers.%d."
    embd = plan.take("model.embed_tokens.weight", (vocab, dim))
    tied = config.get("tie_word_embeddings", gemma)
    if gemma and not tied:
        fail("config.json: gemma with an untied head is not supported (llama.cpp ties it)")
    head = None
    if "lm_head.weight" in st and not tied:
        head = plan.take("lm_head.weight", (vocab, dim))
    elif "lm_head.weight" in st:
        plan.used.add("lm_head.weight")   # tied: the copy is redundant
    elif not tied:
        fail("tie_word_embeddings is false but lm_head.weight is missing")

    if tokenizer is None:
        for cand in ("tokenizer.model", "tokenizer.bin", "tokenizer.json", "vocab.json"):
            if os.path.isfile(os.path.join(model_dir, cand)):
                # a .json: the directory's tokenizer.json, or vocab.json + merges.txt
                tokenizer = model_dir if cand.endswith(".json") else os.path.join(model_dir, cand)
                break
        else:
            fail("no tokenizer: pass --tokenizer (a SentencePiece .model or a llama2.c "
                 "tokenizer.bin)")

    out.general(arch, model_name(config, model_dir))
    theta, scaling = rope_parameters(config)
    rope_dim = int(hd * cfg_float(config, "partial_rotary_factor", 1.0))
    write_llama_hparams(out, ctx=ctx, dim=dim, hidden=hidden, n_layers=L, n_heads=n_heads,
                        n_kv=n_kv, head_dim=hd, eps=cfg_float(config, "rms_norm_eps", 1e-5),
                        theta=theta, arch=arch, pairing="neox" if neox else "interleaved")
    add_rope_scaling(out, scaling, arch, ctx, rope_dim, theta)
    if not qwen2:   # Qwen2's window is refused above unless unused
        add_layer_types(out, config, arch, L, ctx, rope_dim)
    if smollm3:
        add_nope_layers(out, config, L)
    add_model_tokenizer(out, tokenizer, vocab, config)

    def plain(name):
        return lambda: st.read(name)

    def norm(name):
        if gemma:
            return lambda: array.array("f", (v + 1.0 for v in st.read(name)))
        return plain(name)

    def unpermuted(name, heads):
        if neox:
            return plain(name)
        return lambda: unpermute_rotate_half(st.read(name), heads, hd, dim)

    out.tensor("token_embd.weight", (vocab, dim), plain(embd))
    for l in range(L):
        p = P % l
        b = "blk.%d." % l
        out.tensor(b + "attn_norm.weight", (dim,),
                   norm(plan.take(p + "input_layernorm.weight", (dim,))))
        q = plan.take(p + "self_attn.q_proj.weight", (n_heads * hd, dim))
        k = plan.take(p + "self_attn.k_proj.weight", (n_kv * hd, dim))
        out.tensor(b + "attn_q.weight", (n_heads * hd, dim), unpermuted(q, n_heads))
        out.tensor(b + "attn_k.weight", (n_kv * hd, dim), unpermuted(k, n_kv))
        out.tensor(b + "attn_v.weight", (n_kv * hd, dim),
                   plain(plan.take(p + "self_attn.v_proj.weight", (n_kv * hd, dim))))
        if qwen2:
            for n, rows in (("q", n_heads * hd), ("k", n_kv * hd), ("v", n_kv * hd)):
                out.tensor(b + "attn_%s.bias" % n, (rows,),
                           plain(plan.take(p + "self_attn.%s_proj.bias" % n, (rows,))))
        out.tensor(b + "attn_output.weight", (dim, n_heads * hd),
                   plain(plan.take(p + "self_attn.o_proj.weight", (dim, n_heads * hd))))
        out.tensor(b + "ffn_norm.weight", (dim,),
                   norm(plan.take(p + "post_attention_layernorm.weight", (dim,))))
        out.tensor(b + "ffn_gate.weight", (hidden, dim),
                   plain(plan.take(p + "mlp.gate_proj.weight", (hidden, dim))))
        out.tensor(b + "ffn_down.weight", (dim, hidden),
                   plain(plan.take(p + "mlp.down_proj.weight", (dim, hidden))))
        out.tensor(b + "ffn_up.weight", (hidden, dim),
                   plain(plan.take(p + "mlp.up_proj.weight", (hidden, dim))))
    out.tensor("output_norm.weight", (dim,), norm(plan.take("model.norm.weight", (dim,))))
    if head:
        out.tensor("output.weight", (vocab, dim), plain(head))
    plan.finish()


def rope_parameters(config, layer_type="full_attention"):
    """(theta, scaling) of the layers of `layer_type`, from either form of the
    config: transformers 5.x's rope_parameters (flat, or one entry per layer
    type) or 4.x's rope_theta + rope_scaling (+ Gemma 3's
    rope_local_base_freq for its sliding layers).  scaling is None or a dict
    with rope_type."""
    rp = config.get("rope_parameters")
    if rp is not None:
        if not isinstance(rp, dict):
            fail("config.json: rope_parameters must be an object")
        if "rope_type" not in rp and "rope_theta" not in rp:   # per layer type
            if layer_type not in rp:
                fail("config.json: rope_parameters has no entry for %r (it has %s)"
                     % (layer_type, ", ".join(sorted(rp))))
            rp = rp[layer_type]
            if not isinstance(rp, dict):
                fail("config.json: rope_parameters[%r] must be an object" % layer_type)
        theta = cfg_float(rp, "rope_theta", cfg_float(config, "rope_theta", 10000.0))
        scaling = rp if rp.get("rope_type", "default") != "default" else None
        return theta, scaling
    theta = cfg_float(config, "rope_theta", 10000.0)
    if layer_type == "sliding_attention" and "rope_local_base_freq" in config:
        return cfg_float(config, "rope_local_base_freq", None), None
    rs = config.get("rope_scaling")
    if rs is not None and not isinstance(rs, dict):
        fail("config.json: rope_scaling must be an object")
    if rs and rs.get("rope_type", rs.get("type", "default")) != "default":
        return theta, rs
    return theta, None


def llama3_rope_factors(rs, theta, rope_dim):
    """Llama 3.1's scaling as the divisors of the frequencies, the rope_freqs
    tensor llama.cpp's converter writes (modeling_rope_utils' llama3)."""
    factor = cfg_float(rs, "factor", None)
    low = cfg_float(rs, "low_freq_factor", 1.0)
    high = cfg_float(rs, "high_freq_factor", 4.0)
    orig = cfg_int(rs, "original_max_position_embeddings")
    out = []
    for j in range(rope_dim // 2):
        wavelen = 2 * math.pi * theta ** (2 * j / rope_dim)
        if wavelen < orig / high:
            out.append(1.0)
        elif wavelen > orig / low:
            out.append(factor)
        else:
            smooth = (orig / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return out


_SCALINGS = ("linear", "yarn", "dynamic", "llama3", "longrope")


def add_rope_scaling(out, rs, arch, ctx, rope_dim, theta):
    """The scaling's keys and tables, as llama.cpp writes them where it has
    them: Llama 3.1's as a rope_freqs tensor, LongRoPE's as long and short
    factor tensors and its attention factor, YaRN's attention factor as the
    multiple of 0.1 ln s + 1; posenc's keys for the rest (dynamic, YaRN's
    truncate)."""
    if not rs:
        return
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "su":
        kind = "longrope"
    if kind not in _SCALINGS:
        fail("config.json: rope scaling type %r is not supported (%s)"
             % (kind, ", ".join(_SCALINGS)))
    if rs.get("mscale") or rs.get("mscale_all_dim"):
        fail("config.json: YaRN's mscale/mscale_all_dim (DeepSeek) is not supported")
    w = out.w
    key = arch + ".rope.scaling."
    if kind == "llama3":
        factors = llama3_rope_factors(rs, theta, rope_dim)
        out.tensor("rope_freqs.weight", (len(factors),), lambda: array.array("f", factors))
        return
    if kind == "longrope":
        orig = cfg_int(rs, "original_max_position_embeddings")
        pairs = []
        for name in ("long_factor", "short_factor"):
            v = rs.get(name)
            if not isinstance(v, list) or len(v) != rope_dim // 2:
                fail("config.json: LongRoPE's %s must list %d factors (half the rotary dims)"
                     % (name, rope_dim // 2))
            pairs.append([cfg_float({"f": x}, "f", None) for x in v])
        scale = ctx / orig
        attn = rs.get("attention_factor")
        if attn is None:
            attn = math.sqrt(1 + math.log(scale) / math.log(orig)) if scale > 1 else 1.0
        w.add_uint32(key + "original_context_length", orig)
        w.add_float32(key + "attn_factor", cfg_float({"a": attn}, "a", None))
        out.tensor("rope_factors_long.weight", (len(pairs[0]),),
                   lambda: array.array("f", pairs[0]))
        out.tensor("rope_factors_short.weight", (len(pairs[1]),),
                   lambda: array.array("f", pairs[1]))
        return
    factor = cfg_float(rs, "factor", None)
    w.add_string(key + "type", kind)
    w.add_float32(key + "factor", factor)
    orig = rs.get("original_max_position_embeddings")
    if kind == "dynamic" or orig is not None:
        w.add_uint32(key + "original_context_length",
                     cfg_int(rs, "original_max_position_embeddings") if orig is not None else ctx)
    if kind != "yarn":
        return
    for name in ("beta_fast", "beta_slow"):
        if rs.get(name) is not None:
            w.add_float32(key + "yarn_" + name, cfg_float(rs, name, None))
    if rs.get("attention_factor") is not None and factor > 1:
        w.add_float32(key + "attn_factor",
                      cfg_float(rs, "attention_factor", None) / (0.1 * math.log(factor) + 1))
    if rs.get("truncate") is False:
        w.add_bool("posenc.rope.scaling.yarn_truncate", False)


def add_layer_types(out, config, arch, n_layers, ctx, rope_dim):
    """Sliding-window layers as llama.cpp writes them (sliding_window, and
    sliding_window_pattern as one bool a layer), the sliding layers' theta
    (rope.freq_base_swa); a Mistral's window (no layer_types) holds for every
    layer."""
    window = config.get("sliding_window")
    if window is None or config.get("use_sliding_window") is False:
        return
    window = cfg_int(config, "sliding_window")
    w = out.w
    w.add_uint32(arch + ".attention.sliding_window", window)
    types = config.get("layer_types")
    if types is None:
        return
    if not isinstance(types, list) or len(types) != n_layers or \
            any(t not in ("sliding_attention", "full_attention") for t in types):
        fail("config.json: layer_types must list sliding_attention or full_attention for "
             "each of the %d layers" % n_layers)
    w.add_array(arch + ".attention.sliding_window_pattern", gguf.BOOL,
                [t == "sliding_attention" for t in types])
    if "sliding_attention" in types:
        theta, scaling = rope_parameters(config, "sliding_attention")
        w.add_float32(arch + ".rope.freq_base_swa", theta)
        full_theta, full_scaling = rope_parameters(config, "full_attention")
        # Gemma 3's and OLMo 2's sliding layers rotate unscaled (the loader's
        # family default, as llama.cpp's); elsewhere they share the scaling
        unscaled = arch in ("gemma3", "olmo2")
        if scaling != full_scaling and not (unscaled and scaling is None):
            fail("config.json: the sliding layers' rope scaling differs from the full layers' "
                 "(not supported for %s)" % arch)
        if unscaled and scaling is not None:
            fail("config.json: %s's sliding layers rotate unscaled; this one scales them" % arch)


def alibi_slopes(n_heads, max_bias):
    """The standard (BLOOM / llama.cpp) rule: m0 = 2^(-max_bias/n2) over the
    largest power of two n2 <= n_heads; extra heads interleave m1's odd powers."""
    n2 = 1 << (n_heads.bit_length() - 1)
    m0 = 2.0 ** (-max_bias / n2)
    m1 = 2.0 ** (-max_bias / 2.0 / n2)
    return [m0 ** (h + 1) if h < n2 else m1 ** (2 * (h - n2) + 1) for h in range(n_heads)]


def convert_hf_gpt2(model_dir, config, out):
    st = SafeTensors(model_dir)
    n_embd = cfg_int(config, "n_embd")
    L = cfg_int(config, "n_layer")
    n_head = cfg_int(config, "n_head")
    n_ctx = cfg_int(config, "n_positions")
    n_ff = config.get("n_inner") or 4 * n_embd
    if n_embd % n_head:
        fail("config.json: n_embd %d is not a multiple of n_head %d" % (n_embd, n_head))
    hd = n_embd // n_head
    act = config.get("activation_function", "gelu_new")
    if act not in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu"):
        fail("config.json: activation_function %r is not supported (tanh GELU)" % act)
    if config.get("scale_attn_by_inverse_layer_idx") or config.get("add_cross_attention") \
            or config.get("scale_attn_weights") is False:
        fail("config.json: non-standard GPT-2 attention options are not supported")

    pre = "transformer." if "transformer.wte.weight" in st else ""
    plan = TensorPlan(st, ignore=(".attn.bias", ".attn.masked_bias"))
    vocab = st.shape(pre + "wte.weight")[0] if pre + "wte.weight" in st else None
    if vocab is None:
        fail("missing tensor transformer.wte.weight")
    if config.get("vocab_size") not in (None, vocab):
        fail("config.json: vocab_size %r but wte has %d rows" % (config.get("vocab_size"), vocab))
    wte = plan.take(pre + "wte.weight", (vocab, n_embd))

    pe = config.get("position_embedding_type", "learned")
    if pe == "absolute":   # BERT-style name for the same thing
        pe = "learned"
    if pe not in POSITIONAL:
        fail("config.json: unknown position_embedding_type %r (expected one of %s)"
             % (pe, ", ".join(POSITIONAL)))
    has_wpe = pre + "wpe.weight" in st
    if pe == "learned" and not has_wpe:
        fail("position_embedding_type is learned but there is no %swpe.weight" % pre)
    if pe != "learned" and has_wpe:
        fail("position_embedding_type is %s but the model has a learned %swpe.weight" % (pe, pre))

    tied = config.get("tie_word_embeddings", True)
    head = None
    if not tied:
        if "lm_head.weight" not in st:
            fail("tie_word_embeddings is false but lm_head.weight is missing")
        head = plan.take("lm_head.weight", (vocab, n_embd))
    elif "lm_head.weight" in st:
        plan.used.add("lm_head.weight")

    out.general("gpt2", model_name(config, model_dir))
    w = out.w
    w.add_uint32("gpt2.context_length", n_ctx)
    w.add_uint32("gpt2.embedding_length", n_embd)
    w.add_uint32("gpt2.block_count", L)
    w.add_uint32("gpt2.feed_forward_length", n_ff)
    w.add_uint32("gpt2.attention.head_count", n_head)
    w.add_float32("gpt2.attention.layer_norm_epsilon",
                  cfg_float(config, "layer_norm_epsilon", 1e-5))
    w.add_string("posenc.positional", pe)
    if pe == "rope":
        style = config.get("rope_style", "neox")
        pairing = {"neox": "neox", "rotate_half": "neox", "interleaved": "interleaved",
                   "gptj": "interleaved", "meta": "interleaved"}.get(style)
        if pairing is None:
            fail("config.json: unknown rope_style %r (neox or interleaved)" % style)
        rot = cfg_float(config, "rotary_pct", 1.0)
        n_rot = int(round(rot * hd))
        if not 0 < rot <= 1 or n_rot % 2 or n_rot == 0:
            fail("config.json: rotary_pct %r gives %d rotated dims of %d (must be even, > 0)"
                 % (rot, n_rot, hd))
        w.add_float32("gpt2.rope.freq_base", cfg_float(config, "rope_theta", 10000.0))
        w.add_uint32("gpt2.rope.dimension_count", n_rot)
        w.add_string("posenc.rope.pairing", pairing)
    if pe == "alibi":
        max_bias = cfg_float(config, "alibi_max_bias", 8.0)
        if max_bias <= 0:
            fail("config.json: alibi_max_bias must be positive")
        given = config.get("alibi_slopes")
        if given is not None:
            want = alibi_slopes(n_head, max_bias)
            if not isinstance(given, list) or len(given) != n_head or any(
                    not isinstance(g, (int, float)) or abs(g - m) > 1e-6 * m
                    for g, m in zip(given, want)):
                fail("config.json: alibi_slopes %r do not follow the standard rule for "
                     "max_bias %g and %d heads (%s)" % (given, max_bias, n_head,
                                                        ", ".join("%.6g" % m for m in want)))
        w.add_float32("gpt2.attention.max_alibi_bias", max_bias)
    rel_bias = None
    if pe == "t5":
        buckets = cfg_int(config, "relative_attention_num_buckets", 32)
        max_distance = cfg_int(config, "relative_attention_max_distance", 128)
        bidirectional = config.get("relative_attention_bidirectional", False)
        if not isinstance(bidirectional, bool):
            fail("config.json: relative_attention_bidirectional must be true or false, got %r"
                 % (bidirectional,))
        rel_bias = plan.take(pre + "relative_attention_bias.weight", (buckets, n_head))
        w.add_uint32("gpt2.attention.relative_buckets_count", buckets)
        w.add_uint32("posenc.relative_attention.max_distance", max_distance)
        w.add_bool("posenc.relative_attention.bidirectional", bidirectional)
    if config.get("scale_embedding"):
        w.add_float32("posenc.embedding_scale", math.sqrt(n_embd))
    add_model_tokenizer(out, model_dir, vocab, config)

    def plain(name):
        return lambda: st.read(name)

    def conv1d(name, n_in, n_out):
        """HF GPT-2 Conv1D weights are (in, out) for y = x W: store (out, in)."""
        return lambda: transpose(st.read(name), n_in, n_out)

    out.tensor("token_embd.weight", (vocab, n_embd), plain(wte))
    if pe == "learned":
        out.tensor("position_embd.weight", (n_ctx, n_embd),
                   plain(plan.take(pre + "wpe.weight", (n_ctx, n_embd))))
    if rel_bias:   # one table for every layer: layer 0 holds it, as llama.cpp's T5
        out.tensor("blk.0.attn_rel_b.weight", (buckets, n_head), plain(rel_bias))
    for l in range(L):
        p = pre + "h.%d." % l
        b = "blk.%d." % l
        for src, dst, n in (("ln_1", "attn_norm", n_embd), ("ln_2", "ffn_norm", n_embd)):
            out.tensor(b + dst + ".weight", (n,), plain(plan.take(p + src + ".weight", (n,))))
            out.tensor(b + dst + ".bias", (n,), plain(plan.take(p + src + ".bias", (n,))))
        for src, dst, n_in, n_out in (("attn.c_attn", "attn_qkv", n_embd, 3 * n_embd),
                                      ("attn.c_proj", "attn_output", n_embd, n_embd),
                                      ("mlp.c_fc", "ffn_up", n_embd, n_ff),
                                      ("mlp.c_proj", "ffn_down", n_ff, n_embd)):
            wname = plan.take(p + src + ".weight", (n_in, n_out))
            out.tensor(b + dst + ".weight", (n_out, n_in), conv1d(wname, n_in, n_out))
            out.tensor(b + dst + ".bias", (n_out,),
                       plain(plan.take(p + src + ".bias", (n_out,))))
    out.tensor("output_norm.weight", (n_embd,), plain(plan.take(pre + "ln_f.weight", (n_embd,))))
    out.tensor("output_norm.bias", (n_embd,), plain(plan.take(pre + "ln_f.bias", (n_embd,))))
    if head:
        out.tensor("output.weight", (vocab, n_embd), plain(head))
    elif pe == "learned":
        # llama.cpp requires output.weight for gpt2 and its converter writes
        # the tied embedding again; so does this one, for the files llama.cpp
        # can load (gpt2 there needs position_embd: the learned scheme).
        out.tensor("output.weight", (vocab, n_embd), plain(wte))
    plan.finish()


# ---- LayerNorm families: gptneox, bloom, starcoder -------------------------------------------

def per_head_qkv(a, n_head, head_dim, cols):
    """HF GPT-NeoX and BLOOM fuse q, k, v per head: rows (heads, 3, head_dim).
    llama.cpp's converter stores q | k | v blocks instead (so does posenc):
    row i*heads*hd + h*hd + r of the result is row (h*3 + i)*hd + r of a."""
    out = array.array("f")
    for i in range(3):
        for h in range(n_head):
            r = (h * 3 + i) * head_dim
            out.extend(a[r * cols:(r + head_dim) * cols])
    return out


class LayerNormWriter:
    """Writes one HF tensor (or LayerNorm pair) under its llama.cpp name."""

    def __init__(self, st, plan, out):
        self.st, self.plan, self.out = st, plan, out

    def tensor(self, src, dst, shape, fix=None):
        name = self.plan.take(src, shape)
        read = (lambda: fix(self.st.read(name))) if fix else (lambda: self.st.read(name))
        self.out.tensor(dst, shape, read)

    def linear(self, src, dst, rows, cols, fix_w=None, fix_b=None, bias=True):
        """bias: True (required), or "optional" (written when the checkpoint has it)."""
        self.tensor(src + ".weight", dst + ".weight", (rows, cols), fix_w)
        if bias is True or src + ".bias" in self.st:
            self.tensor(src + ".bias", dst + ".bias", (rows,), fix_b)

    def norm(self, src, dst, n, bias=True):
        self.tensor(src + ".weight", dst + ".weight", (n,))
        if bias is True or src + ".bias" in self.st:
            self.tensor(src + ".bias", dst + ".bias", (n,))


def untied_head(st, plan, config, name, tied_default=True):
    """The untied head's HF name, or None when the checkpoint ties it."""
    tied = config.get("tie_word_embeddings", tied_default)
    if name in st:
        if tied:
            plan.used.add(name)   # a redundant copy of the embedding
            return None
        return name
    if not tied:
        fail("tie_word_embeddings is false but %s is missing" % name)
    return None


def add_layernorm_hparams(out, arch, ctx, dim, ff, L, n_head, n_kv, eps):
    add_shape_hparams(out, arch, ctx, dim, ff, L, n_head, n_kv)
    out.w.add_float32(arch + ".attention.layer_norm_epsilon", eps)


def write_per_head_fused_block(w, p, attn, layer, dim, ff, n_head):
    """One GPT-NeoX or BLOOM block (HF prefix p, attention module `attn`):
    the same tensors under the same names but for the attention's."""
    b, hd = "blk.%d." % layer, dim // n_head
    w.norm(p + "input_layernorm", b + "attn_norm", dim)
    w.linear(p + attn + ".query_key_value", b + "attn_qkv", 3 * dim, dim,
             lambda a: per_head_qkv(a, n_head, hd, dim),
             lambda a: per_head_qkv(a, n_head, hd, 1))
    w.linear(p + attn + ".dense", b + "attn_output", dim, dim)
    w.norm(p + "post_attention_layernorm", b + "ffn_norm", dim)
    w.linear(p + "mlp.dense_h_to_4h", b + "ffn_up", ff, dim)
    w.linear(p + "mlp.dense_4h_to_h", b + "ffn_down", dim, ff)


def convert_hf_gpt_neox(model_dir, config, out, tokenizer):
    st = SafeTensors(model_dir)
    dim, L = cfg_int(config, "hidden_size"), cfg_int(config, "num_hidden_layers")
    n_head, ff = cfg_int(config, "num_attention_heads"), cfg_int(config, "intermediate_size")
    ctx, vocab = cfg_int(config, "max_position_embeddings"), cfg_int(config, "vocab_size")
    if dim % n_head:
        fail("config.json: hidden_size %d is not a multiple of %d heads" % (dim, n_head))
    hd = dim // n_head
    n_rot = int(cfg_float(config, "rotary_pct", 1.0) * hd)
    if n_rot <= 0 or n_rot % 2:
        fail("config.json: rotary_pct gives %d rotated dims of %d (must be even, > 0)" % (n_rot, hd))
    if config.get("hidden_act", "gelu") != "gelu":
        fail("config.json: hidden_act %r is not supported (gpt_neox uses gelu)" % config["hidden_act"])
    plan = TensorPlan(st, ignore=(".attention.bias", ".attention.masked_bias",
                                  "rotary_emb.inv_freq"))
    w = LayerNormWriter(st, plan, out)
    head = untied_head(st, plan, config, "embed_out.weight", tied_default=False)
    out.general("gptneox", model_name(config, model_dir))
    add_layernorm_hparams(out, "gptneox", ctx, dim, ff, L, n_head, n_head,
                          cfg_float(config, "layer_norm_eps", 1e-5))
    out.w.add_uint32("gptneox.rope.dimension_count", n_rot)
    out.w.add_float32("gptneox.rope.freq_base", cfg_float(config, "rotary_emb_base", 10000.0))
    out.w.add_bool("gptneox.use_parallel_residual", bool(config.get("use_parallel_residual", True)))
    out.w.add_string("posenc.positional", "rope")
    out.w.add_string("posenc.rope.pairing", "neox")
    add_model_tokenizer(out, tokenizer or model_dir, vocab, config)
    P = "gpt_neox."
    w.tensor(P + "embed_in.weight", "token_embd.weight", (vocab, dim))
    for l in range(L):
        write_per_head_fused_block(w, P + "layers.%d." % l, "attention", l, dim, ff, n_head)
    w.norm(P + "final_layer_norm", "output_norm", dim)
    if head:
        w.tensor(head, "output.weight", (vocab, dim))
    plan.finish()


def convert_hf_bloom(model_dir, config, out, tokenizer):
    st = SafeTensors(model_dir)
    dim = cfg_int(config, "hidden_size", config.get("n_embed"))
    L, n_head = cfg_int(config, "n_layer"), cfg_int(config, "n_head")
    vocab = cfg_int(config, "vocab_size")
    if dim % n_head:
        fail("config.json: hidden_size %d is not a multiple of %d heads" % (dim, n_head))
    ff = 4 * dim
    P = "transformer." if "transformer.word_embeddings.weight" in st else ""
    plan = TensorPlan(st)
    w = LayerNormWriter(st, plan, out)
    embd = P + "word_embeddings.weight"
    head = untied_head(st, plan, config, "lm_head.weight")
    out.general("bloom", model_name(config, model_dir))
    # llama.cpp's converter: seq_length, else n_embed (BLOOM's configs have no context length)
    add_layernorm_hparams(out, "bloom", cfg_int(config, "seq_length", dim), dim, ff, L, n_head,
                          n_head, cfg_float(config, "layer_norm_epsilon", 1e-5))
    out.w.add_float32("bloom.attention.max_alibi_bias", 8.0)
    out.w.add_string("posenc.positional", "alibi")
    add_model_tokenizer(out, tokenizer or model_dir, vocab, config)
    w.tensor(embd, "token_embd.weight", (vocab, dim))
    w.norm(P + "word_embeddings_layernorm", "token_embd_norm", dim)
    for l in range(L):
        write_per_head_fused_block(w, P + "h.%d." % l, "self_attention", l, dim, ff, n_head)
    w.norm(P + "ln_f", "output_norm", dim)
    # llama.cpp requires output.weight for bloom: its converter writes the tied
    # embedding again, and so does this one.
    out.tensor("output.weight", (vocab, dim), lambda: st.read(head or embd))
    plan.finish()


def convert_hf_gpt_bigcode(model_dir, config, out, tokenizer):
    st = SafeTensors(model_dir)
    dim, L, n_head = cfg_int(config, "n_embd"), cfg_int(config, "n_layer"), cfg_int(config, "n_head")
    ctx, vocab = cfg_int(config, "n_positions"), cfg_int(config, "vocab_size")
    ff = config.get("n_inner") or 4 * dim
    if dim % n_head:
        fail("config.json: n_embd %d is not a multiple of %d heads" % (dim, n_head))
    if config.get("activation_function", "gelu_pytorch_tanh") not in ("gelu_pytorch_tanh", "gelu_new"):
        fail("config.json: activation_function %r is not supported (tanh GELU)"
             % config["activation_function"])
    hd = dim // n_head
    n_kv = 1 if config.get("multi_query", True) else n_head
    kv = n_kv * hd
    P = "transformer."
    plan = TensorPlan(st, ignore=(".attn.bias", ".attn.masked_bias"))
    w = LayerNormWriter(st, plan, out)
    head = untied_head(st, plan, config, "lm_head.weight")
    out.general("starcoder", model_name(config, model_dir))
    add_layernorm_hparams(out, "starcoder", ctx, dim, ff, L, n_head, n_kv,
                          cfg_float(config, "layer_norm_epsilon", 1e-5))
    out.w.add_string("posenc.positional", "learned")
    add_model_tokenizer(out, tokenizer or model_dir, vocab, config)
    w.tensor(P + "wte.weight", "token_embd.weight", (vocab, dim))
    w.tensor(P + "wpe.weight", "position_embd.weight", (ctx, dim))
    for l in range(L):
        p, b = P + "h.%d." % l, "blk.%d." % l
        w.norm(p + "ln_1", b + "attn_norm", dim)
        w.linear(p + "attn.c_attn", b + "attn_qkv", dim + 2 * kv, dim)   # q | k | v already
        w.linear(p + "attn.c_proj", b + "attn_output", dim, dim)
        w.norm(p + "ln_2", b + "ffn_norm", dim)
        w.linear(p + "mlp.c_fc", b + "ffn_up", ff, dim)
        w.linear(p + "mlp.c_proj", b + "ffn_down", dim, ff)
    w.norm(P + "ln_f", "output_norm", dim)
    if head:
        w.tensor(head, "output.weight", (vocab, dim))
    plan.finish()


# ---- GGUF -> GGUF (retyping) -----------------------------------------------------------

# Written again by Output.general() for the new tensor types.
_REWRITTEN_KEYS = ("general.file_type", "general.alignment")


def is_gguf(path):
    with open(path, "rb") as f:
        return f.read(4) == gguf.GGUF_MAGIC


def convert_gguf(path, out):
    """Copies every key and tensor; matrices take --dtype, vectors stay as
    Output.tensor() stores them (f32)."""
    r = gguf.Reader(path)
    arch = r.kv.get("general.architecture", (None, None))[1]
    if not isinstance(arch, bytes):
        fail("%s: GGUF file without general.architecture" % path)
    name = r.kv.get("general.name", (gguf.STRING, os.path.basename(path).encode()))[1]
    out.general(arch.decode("utf-8", "replace"), name.decode("utf-8", "replace"))
    for key, (vtype, value) in r.kv.items():
        if key in _REWRITTEN_KEYS or key in ("general.architecture", "general.name"):
            continue
        if vtype == gguf.ARRAY:
            out.w.add_array(key, value[0], value[1])
        else:
            out.w.add(key, vtype, value)
    for tname, t in r.tensors.items():
        out.tensor(tname, tuple(reversed(t["ne"])), lambda n=tname: r.floats(n))


def convert_hf_phi(model_dir, config, out, tokenizer):
    st = SafeTensors(model_dir)
    dim, L = cfg_int(config, "hidden_size"), cfg_int(config, "num_hidden_layers")
    n_head, ff = cfg_int(config, "num_attention_heads"), cfg_int(config, "intermediate_size")
    ctx, vocab = cfg_int(config, "max_position_embeddings"), cfg_int(config, "vocab_size")
    n_kv = cfg_int(config, "num_key_value_heads", n_head)
    if dim % n_head or n_head % n_kv:
        fail("config.json: hidden_size %d, %d heads, %d kv heads are inconsistent" % (dim, n_head, n_kv))
    hd = dim // n_head
    n_rot = int(cfg_float(config, "partial_rotary_factor", 0.5) * hd)
    if n_rot <= 0 or n_rot % 2:
        fail("config.json: partial_rotary_factor gives %d rotated dims of %d (must be even, > 0)"
             % (n_rot, hd))
    if config.get("qk_layernorm"):
        fail("config.json: qk_layernorm is not supported")
    if config.get("hidden_act", "gelu_new") not in ("gelu_new", "gelu_pytorch_tanh"):
        fail("config.json: hidden_act %r is not supported (phi uses tanh GELU)" % config["hidden_act"])
    plan = TensorPlan(st, ignore=("rotary_emb.inv_freq",))
    w = LayerNormWriter(st, plan, out)
    out.general("phi2", model_name(config, model_dir))
    add_layernorm_hparams(out, "phi2", ctx, dim, ff, L, n_head, n_kv,
                          cfg_float(config, "layer_norm_eps", 1e-5))
    out.w.add_uint32("phi2.rope.dimension_count", n_rot)
    out.w.add_float32("phi2.rope.freq_base", cfg_float(config, "rope_theta", 10000.0))
    out.w.add_string("posenc.positional", "rope")
    out.w.add_string("posenc.rope.pairing", "neox")
    add_model_tokenizer(out, tokenizer or model_dir, vocab, config)
    P = "model."
    w.tensor(P + "embed_tokens.weight", "token_embd.weight", (vocab, dim))
    for l in range(L):
        p, b = P + "layers.%d." % l, "blk.%d." % l
        w.norm(p + "input_layernorm", b + "attn_norm", dim)   # one norm for both branches
        for n, rows in (("q", dim), ("k", n_kv * hd), ("v", n_kv * hd)):
            w.linear(p + "self_attn.%s_proj" % n, b + "attn_" + n, rows, dim)
        w.linear(p + "self_attn.dense", b + "attn_output", dim, dim)
        w.linear(p + "mlp.fc1", b + "ffn_up", ff, dim)
        w.linear(p + "mlp.fc2", b + "ffn_down", dim, ff)
    w.norm(P + "final_layernorm", "output_norm", dim)
    w.linear("lm_head", "output", vocab, dim)   # phi2 has an untied head with a bias
    plan.finish()


def convert_hf_mpt(model_dir, config, out, tokenizer):
    st = SafeTensors(model_dir)
    dim, L, n_head = cfg_int(config, "d_model"), cfg_int(config, "n_layers"), cfg_int(config, "n_heads")
    ctx, vocab = cfg_int(config, "max_seq_len"), cfg_int(config, "vocab_size")
    ff = int(cfg_float(config, "expansion_ratio", 4) * dim)
    attn = config.get("attn_config") or {}
    if not isinstance(attn, dict):
        fail("config.json: attn_config must be an object")
    n_kv = cfg_int(attn, "kv_n_heads", n_head)
    if dim % n_head or n_head % n_kv:
        fail("config.json: d_model %d, %d heads, %d kv heads are inconsistent" % (dim, n_head, n_kv))
    kv = n_kv * (dim // n_head)
    alibi, learned = bool(attn.get("alibi", False)), bool(config.get("learned_pos_emb", True))
    learned = learned and "transformer.wpe.weight" in st
    if alibi and learned:
        fail("config.json: alibi together with learned positions is not supported (one scheme)")
    if alibi and n_head & (n_head - 1):
        fail("config.json: MPT's ALiBi slopes for %d heads (not a power of two) differ from "
             "llama.cpp's" % n_head)
    if config.get("ffn_config", {}).get("ffn_type", "mptmlp") != "mptmlp":
        fail("config.json: ffn_type %r is not supported" % config["ffn_config"]["ffn_type"])
    plan = TensorPlan(st)
    w = LayerNormWriter(st, plan, out)
    head = untied_head(st, plan, config, "lm_head.weight")
    out.general("mpt", model_name(config, model_dir))
    add_layernorm_hparams(out, "mpt", ctx, dim, ff, L, n_head, n_kv,
                          cfg_float(config, "layer_norm_epsilon", 1e-5))
    if attn.get("clip_qkv") is not None:
        out.w.add_float32("mpt.attention.clamp_kqv", cfg_float(attn, "clip_qkv", None))
    # llama.cpp's converter writes 0 for "no alibi"
    out.w.add_float32("mpt.attention.max_alibi_bias",
                      cfg_float(attn, "alibi_bias_max", 8.0) if alibi else 0.0)
    out.w.add_string("posenc.positional", "alibi" if alibi else "learned" if learned else "none")
    add_model_tokenizer(out, tokenizer or model_dir, vocab, config)
    P = "transformer."
    w.tensor(P + "wte.weight", "token_embd.weight", (vocab, dim))
    if learned:
        w.tensor(P + "wpe.weight", "position_embd.weight", (ctx, dim))
    for l in range(L):
        p, b = P + "blocks.%d." % l, "blk.%d." % l
        w.norm(p + "norm_1", b + "attn_norm", dim, bias="optional")
        w.linear(p + "attn.Wqkv", b + "attn_qkv", dim + 2 * kv, dim, bias="optional")
        w.linear(p + "attn.out_proj", b + "attn_output", dim, dim, bias="optional")
        w.norm(p + "norm_2", b + "ffn_norm", dim, bias="optional")
        w.linear(p + "ffn.up_proj", b + "ffn_up", ff, dim, bias="optional")
        w.linear(p + "ffn.down_proj", b + "ffn_down", dim, ff, bias="optional")
    w.norm(P + "norm_f", "output_norm", dim, bias="optional")
    if head:
        w.tensor(head, "output.weight", (vocab, dim))
    plan.finish()


_LAYERNORM_FAMILIES = {"gpt_neox": convert_hf_gpt_neox, "bloom": convert_hf_bloom,
                       "gpt_bigcode": convert_hf_gpt_bigcode, "phi": convert_hf_phi,
                       "mpt": convert_hf_mpt}


def convert_hf_phi3(model_dir, config, out, tokenizer):
    """Phi-3/3.5/4-mini as llama.cpp writes them: the fused qkv_proj as attn_qkv
    and gate_up_proj as one ffn_up (gate rows first), NeoX pairs (no
    permutation), partial rotary (Phi-4-mini), LongRoPE's factors, and the
    sliding window of Phi-3-mini-4k, which Hugging Face applies."""
    st = SafeTensors(model_dir)
    dim, hidden, L, n_heads, n_kv, hd = llama_shape(config)
    if config.get("hidden_act", "silu") != "silu":
        fail("config.json: hidden_act %r is not supported (phi3 uses silu)" % config["hidden_act"])
    rope_dim = rotary_dims(config, hd)
    vocab = cfg_int(config, "vocab_size")
    ctx = cfg_int(config, "max_position_embeddings")
    plan = TensorPlan(st, ignore=("rotary_emb.inv_freq",))
    embd = plan.take("model.embed_tokens.weight", (vocab, dim))
    head = untied_head(st, plan, config, "lm_head.weight", tied_default=False)
    if tokenizer is None:
        tokenizer = model_dir
    out.general("phi3", model_name(config, model_dir))
    theta, scaling = rope_parameters(config)
    write_llama_hparams(out, ctx=ctx, dim=dim, hidden=hidden, n_layers=L, n_heads=n_heads,
                        n_kv=n_kv, head_dim=hd, eps=cfg_float(config, "rms_norm_eps", 1e-5),
                        theta=theta, arch="phi3", pairing="neox", rope_dim=rope_dim)
    if scaling and "original_max_position_embeddings" not in scaling and \
            "original_max_position_embeddings" in config:
        scaling = dict(scaling, original_max_position_embeddings=config[
            "original_max_position_embeddings"])
    add_rope_scaling(out, scaling, "phi3", ctx, rope_dim, theta)
    add_layer_types(out, config, "phi3", L, ctx, rope_dim)
    add_model_tokenizer(out, tokenizer, vocab, config)
    qkv = (n_heads + 2 * n_kv) * hd

    def plain(name):
        return lambda: st.read(name)

    out.tensor("token_embd.weight", (vocab, dim), plain(embd))
    for l in range(L):
        p, b = "model.layers.%d." % l, "blk.%d." % l
        for src, dst, shape in (
                ("input_layernorm.weight", "attn_norm.weight", (dim,)),
                ("self_attn.qkv_proj.weight", "attn_qkv.weight", (qkv, dim)),
                ("self_attn.o_proj.weight", "attn_output.weight", (dim, dim)),
                ("post_attention_layernorm.weight", "ffn_norm.weight", (dim,)),
                ("mlp.gate_up_proj.weight", "ffn_up.weight", (2 * hidden, dim)),
                ("mlp.down_proj.weight", "ffn_down.weight", (dim, hidden))):
            out.tensor(b + dst, shape, plain(plan.take(p + src, shape)))
    out.tensor("output_norm.weight", (dim,), plain(plan.take("model.norm.weight", (dim,))))
    if head:
        out.tensor("output.weight", (vocab, dim), plain(plan.take(head, (vocab, dim))))
    plan.finish()


# Today's dense families, as llama.cpp names and stores them.  Each is a
# llama-like block with a few of: q/k norms (per head, or the whole
# projection), norms after the sub-layers (sandwich or post-only), Gemma's
# norm weights stored as 1 + w, LayerNorms, q/k/v biases, a parallel block,
# soft-caps and multipliers.  permute: HF keeps q/k in rotate_half order and
# llama.cpp's runs them with interleaved pairs, so the rows are reordered
# (Granite); Command R's HF code rotates interleaved pairs already.
_MODERN = {
    "qwen3": dict(arch="qwen3", qk_norm="head"),
    "gemma2": dict(arch="gemma2", norms="sandwich", plus_one=True, act=("gelu_pytorch_tanh", "gelu"),
                   tied=True),
    "gemma3_text": dict(arch="gemma3", norms="sandwich", plus_one=True, qk_norm="head",
                        act=("gelu_pytorch_tanh", "gelu"), tied=True),
    "olmo2": dict(arch="olmo2", norms="post", qk_norm="full"),
    "exaone4": dict(arch="exaone4", norms="post", qk_norm="head"),
    "granite": dict(arch="granite", permute=True),
    "stablelm": dict(arch="stablelm", layernorm=True, qk_norm="stablelm"),
    "cohere2": dict(arch="cohere2", layernorm=True, parallel=True, tied=True),
    # mixtures of experts: a router over the experts (`moe`: where the layer's
    # experts live, the router's name) and each expert's SwiGLU, stacked into
    # llama.cpp's 3-D ffn_{gate,up,down}_exps
    "qwen3_moe": dict(arch="qwen3moe", qk_norm="head", moe=("mlp", "gate")),
    "olmoe": dict(arch="olmoe", qk_norm="full", moe=("mlp", "gate")),
    "granitemoe": dict(arch="granitemoe", permute=True, moe=("block_sparse_moe", "router")),
}


def moe_shape(config, arch, hidden):
    """(experts, experts per token, one expert's width) of a mixture of
    experts, checked; only layers that are all experts are supported."""
    n = cfg_int(config, "num_experts" if "num_experts" in config else "num_local_experts")
    k = cfg_int(config, "num_experts_per_tok")
    width = cfg_int(config, "moe_intermediate_size") if "moe_intermediate_size" in config else hidden
    if k > n:
        fail("config.json: num_experts_per_tok %d is larger than the %d experts" % (k, n))
    if config.get("mlp_only_layers") or config.get("decoder_sparse_step", 1) != 1:
        fail("config.json: %s layers without experts (mlp_only_layers, decoder_sparse_step) "
             "are not supported" % arch)
    if config.get("shared_intermediate_size") or config.get("shared_expert_intermediate_size"):
        fail("config.json: shared experts are not supported for %s" % arch)
    return n, k, width


def expert_sources(st, plan, prefix, n, width, dim):
    """A layer's experts as three callables giving the stacked (n, width, dim)
    gate and up and (n, dim, width) down, from any of the layouts Hugging Face
    has saved: transformers 5's fused experts.gate_up_proj (gate rows, then up
    rows, per expert) with experts.down_proj, Granite MoE's older
    input_linear/output_linear (the same layout), or one
    experts.E.{gate,up,down}_proj.weight per expert."""
    for fused, down in (("experts.gate_up_proj", "experts.down_proj"),
                        ("input_linear.weight", "output_linear.weight")):
        if prefix + fused in st:
            gu = plan.take(prefix + fused, (n, 2 * width, dim))
            dn = plan.take(prefix + down, (n, dim, width))
            block = width * dim

            def half(second):
                def read():
                    a, out = st.read(gu), array.array("f")
                    for e in range(n):
                        first = (2 * e + second) * block
                        out.extend(a[first:first + block])
                    return out
                return read
            return half(0), half(1), lambda: st.read(dn)

    def stacked(what, shape):
        names = [plan.take(prefix + "experts.%d.%s.weight" % (e, what), shape) for e in range(n)]

        def read():
            out = array.array("f")
            for name in names:
                out.extend(st.read(name))
            return out
        return read
    return (stacked("gate_proj", (width, dim)), stacked("up_proj", (width, dim)),
            stacked("down_proj", (dim, width)))


# gpt-oss's release stores its experts in MXFP4 as two U8 tensors per matrix:
# NAME_blocks (experts, rows, cols / 32, 16), byte i of a block holding
# weights 2i (low nibble) and 2i + 1 (high), and NAME_scales (experts, rows,
# cols / 32), the E8M0 exponents.  The codes are ggml's E2M1 codes and the
# exponents its E8M0 bytes (the weight is E2M1(code) * 2^(e - 127), ggml's
# doubled value times its half scale), so a block becomes ggml's by moving
# nibbles only: weight j in the low nibble of byte j and j + 16 in the high
# one, after the scale byte.

# Byte tables: a byte's low or high nibble, as a low or as a high nibble.
_LO = bytes(b & 0xF for b in range(256))
_HI = bytes(b >> 4 for b in range(256))
_LO_UP = bytes((b & 0xF) << 4 for b in range(256))
_HI_UP = bytes(b & 0xF0 for b in range(256))


def mxfp4_repack(blocks, scales):
    """A checkpoint's MXFP4 rows (blocks: 16 bytes per block of 32, weights
    2i and 2i + 1 in byte i; scales: one byte per block, in the same order)
    as ggml's block_mxfp4 bytes.  Weight j < 16 of ggml's byte j comes from
    byte j // 2 of the checkpoint's, weight j + 16 from byte 8 + j // 2,
    each the low nibble for even j and the high one for odd j.  Whole
    tensors at a time: byte j of every block is one strided slice, and two
    slices of disjoint nibbles join as integers (no per-byte loop)."""
    nb = len(scales)
    if len(blocks) != 16 * nb:
        fail("MXFP4 blocks of %d bytes do not match %d scales" % (len(blocks), nb))
    out = bytearray(17 * nb)
    out[0::17] = scales
    for j in range(16):
        low = blocks[j // 2::16].translate(_HI if j % 2 else _LO)
        high = blocks[8 + j // 2::16].translate(_HI_UP if j % 2 else _LO_UP)
        out[1 + j::17] = (int.from_bytes(low, "little") | int.from_bytes(high, "little")).to_bytes(nb, "little")
    return bytes(out)


def mxfp4_expert_sources(st, plan, prefix, n, width, dim):
    """A gpt-oss layer's experts as llama.cpp's converter (GptOssModel)
    writes them from the MXFP4 release: three callables giving the MXFP4
    bytes of the stacked (n, width, dim) gate and up and (n, dim, width)
    down, to be written as gguf.GGML_MXFP4 tensors ffn_gate_exps,
    ffn_up_exps, ffn_down_exps.  The fused mlp.experts.gate_up_proj
    interleaves gate and up by row (gate the even rows, up the odd ones, as
    its biases do)."""
    if dim % 32 or width % 32:
        fail("%s: MXFP4 experts need widths that are multiples of 32 (%d, %d)" % (prefix, dim, width))
    gu_b = plan.take(prefix + "experts.gate_up_proj_blocks", (n, 2 * width, dim // 32, 16))
    gu_s = plan.take(prefix + "experts.gate_up_proj_scales", (n, 2 * width, dim // 32))
    dn_b = plan.take(prefix + "experts.down_proj_blocks", (n, dim, width // 32, 16))
    dn_s = plan.take(prefix + "experts.down_proj_scales", (n, dim, width // 32))

    def rows(data, row_bytes, first):
        """Every other row of `data` from row `first`."""
        out = bytearray()
        for r in range(first, len(data) // row_bytes, 2):
            out += data[r * row_bytes:(r + 1) * row_bytes]
        return bytes(out)

    def half(first):
        def read():
            nb = dim // 32
            return mxfp4_repack(rows(st.read_u8(gu_b), 16 * nb, first), rows(st.read_u8(gu_s), nb, first))
        return read
    return half(0), half(1), lambda: mxfp4_repack(st.read_u8(dn_b), st.read_u8(dn_s))


def convert_hf_modern(model_dir, config, out, tokenizer, spec):
    arch = spec["arch"]
    st = SafeTensors(model_dir)
    dim, hidden, L, n_heads, n_kv, hd = llama_shape(config)
    acts = spec.get("act", ("silu",))
    act = config.get("hidden_activation") or config.get("hidden_act", acts[0])
    if act not in acts:
        fail("config.json: hidden activation %r is not supported (%s uses %s)"
             % (act, arch, acts[0]))
    biased = bool(config.get("use_qkv_bias") or config.get("attention_bias"))
    if config.get("mlp_bias") or (biased and arch != "stablelm"):
        fail("config.json: attention/mlp biases are not supported for %s" % arch)
    parallel = spec.get("parallel") or bool(config.get("use_parallel_residual"))
    qk_norm = spec.get("qk_norm")
    if qk_norm == "stablelm":
        qk_norm = "stablelm" if config.get("qk_layernorm") else None
    rope_dim = rotary_dims(config, hd)
    vocab = cfg_int(config, "vocab_size")
    ctx = cfg_int(config, "max_position_embeddings")
    eps = cfg_float(config, "layer_norm_eps" if spec.get("layernorm") else "rms_norm_eps", 1e-5)
    plan = TensorPlan(st, ignore=("rotary_emb.inv_freq",))
    embd = plan.take("model.embed_tokens.weight", (vocab, dim))
    head = untied_head(st, plan, config, "lm_head.weight", tied_default=spec.get("tied", False))
    if tokenizer is None:
        tokenizer = model_dir
    out.general(arch, model_name(config, model_dir))
    theta, scaling = rope_parameters(config)
    permute = spec.get("permute", False)
    interleaved = permute or arch == "cohere2"
    add_shape_hparams(out, arch, ctx, dim, hidden, L, n_heads, n_kv)
    w = out.w
    w.add_float32(arch + (".attention.layer_norm_epsilon" if spec.get("layernorm")
                          else ".attention.layer_norm_rms_epsilon"), eps)
    w.add_float32(arch + ".rope.freq_base", theta)
    w.add_uint32(arch + ".rope.dimension_count", rope_dim)
    if hd * n_heads != dim:
        w.add_uint32(arch + ".attention.key_length", hd)
        w.add_uint32(arch + ".attention.value_length", hd)
    w.add_string("posenc.rope.pairing", "interleaved" if interleaved else "neox")
    if arch == "stablelm":
        w.add_bool(arch + ".use_parallel_residual", parallel)
    add_rope_scaling(out, scaling, arch, ctx, rope_dim, theta)
    add_layer_types(out, config, arch, L, ctx, rope_dim)
    if "query_pre_attn_scalar" in config:
        w.add_float32(arch + ".attention.scale",
                      cfg_float(config, "query_pre_attn_scalar", None) ** -0.5)
    if "attention_multiplier" in config:
        w.add_float32(arch + ".attention.scale", cfg_float(config, "attention_multiplier", None))
    for hf, key in (("attn_logit_softcapping", "attn_logit_softcapping"),
                    ("final_logit_softcapping", "final_logit_softcapping"),
                    ("embedding_multiplier", "embedding_scale"),
                    ("residual_multiplier", "residual_scale"),
                    ("logits_scaling", "logit_scale"), ("logit_scale", "logit_scale")):
        if config.get(hf) is not None:
            w.add_float32(arch + "." + key, cfg_float(config, hf, None))
    moe = spec.get("moe")
    if moe:
        n_experts, n_used, width = moe_shape(config, arch, hidden)
        w.add_uint32(arch + ".expert_count", n_experts)
        w.add_uint32(arch + ".expert_used_count", n_used)
        w.add_uint32(arch + ".expert_feed_forward_length", width)
        if "norm_topk_prob" in config:
            w.add_bool(arch + ".expert_weights_norm", bool(config["norm_topk_prob"]))
    add_model_tokenizer(out, tokenizer, vocab, config)

    def plain(name):
        return lambda: st.read(name)

    def norm(name, n):
        name = plan.take(name, (n,))
        if spec.get("plus_one"):
            return lambda: array.array("f", (v + 1.0 for v in st.read(name)))
        return plain(name)

    def rows(name, heads):
        if not permute:
            return plain(name)
        return lambda: unpermute_rotate_half(st.read(name), heads, hd, dim)

    def stacked(names, n):
        def read():
            a = array.array("f")
            for nm in names:
                a.extend(st.read(nm))
            return a
        for nm in names:
            plan.take(nm, (n,))
        return read

    out.tensor("token_embd.weight", (vocab, dim), plain(embd))
    norms = spec.get("norms", "pre")
    for l in range(L):
        p, b = "model.layers.%d." % l, "blk.%d." % l
        a = p + "self_attn."
        names = {"pre": (("input_layernorm", "attn_norm"), ("post_attention_layernorm", "ffn_norm")),
                 "sandwich": (("input_layernorm", "attn_norm"),
                              ("post_attention_layernorm", "post_attention_norm"),
                              ("pre_feedforward_layernorm", "ffn_norm"),
                              ("post_feedforward_layernorm", "post_ffw_norm")),
                 "post": (("post_attention_layernorm", "post_attention_norm"),
                          ("post_feedforward_layernorm", "post_ffw_norm"))}[norms]
        if parallel:
            names = names[:1]
        for src, dst in names:
            out.tensor(b + dst + ".weight", (dim,), norm(p + src + ".weight", dim))
            if spec.get("layernorm") and p + src + ".bias" in st:
                out.tensor(b + dst + ".bias", (dim,), plain(plan.take(p + src + ".bias", (dim,))))
        for n, heads in (("q", n_heads), ("k", n_kv), ("v", n_kv)):
            shape = (heads * hd, dim)
            src = plan.take(a + n + "_proj.weight", shape)
            out.tensor(b + "attn_%s.weight" % n, shape, rows(src, heads) if n != "v" else plain(src))
            if biased:
                out.tensor(b + "attn_%s.bias" % n, (heads * hd,),
                           plain(plan.take(a + n + "_proj.bias", (heads * hd,))))
        if qk_norm == "head":
            for n in ("q", "k"):
                out.tensor(b + "attn_%s_norm.weight" % n, (hd,), norm(a + n + "_norm.weight", hd))
        elif qk_norm == "full":
            for n, heads in (("q", n_heads), ("k", n_kv)):
                out.tensor(b + "attn_%s_norm.weight" % n, (heads * hd,),
                           norm(a + n + "_norm.weight", heads * hd))
        elif qk_norm == "stablelm":
            for n, heads in (("q", n_heads), ("k", n_kv)):
                srcs = [a + "%s_layernorm.norms.%d.weight" % (n, h) for h in range(heads)]
                out.tensor(b + "attn_%s_norm.weight" % n, (heads, hd), stacked(srcs, hd))
        out.tensor(b + "attn_output.weight", (dim, n_heads * hd),
                   plain(plan.take(a + "o_proj.weight", (dim, n_heads * hd))))
        if moe:
            m = p + moe[0] + "."
            router = m + moe[1] + ".weight"
            if router not in st and m + moe[1] + ".layer.weight" in st:   # older Granite MoE
                router = m + moe[1] + ".layer.weight"
            out.tensor(b + "ffn_gate_inp.weight", (n_experts, dim),
                       plain(plan.take(router, (n_experts, dim))))
            gate, up, down = expert_sources(st, plan, m, n_experts, width, dim)
            out.tensor(b + "ffn_gate_exps.weight", (n_experts, width, dim), gate)
            out.tensor(b + "ffn_up_exps.weight", (n_experts, width, dim), up)
            out.tensor(b + "ffn_down_exps.weight", (n_experts, dim, width), down)
            continue
        for src, dst, shape in (("gate_proj", "ffn_gate", (hidden, dim)),
                                ("up_proj", "ffn_up", (hidden, dim)),
                                ("down_proj", "ffn_down", (dim, hidden))):
            out.tensor(b + dst + ".weight", shape, plain(plan.take(p + "mlp." + src + ".weight", shape)))
    out.tensor("output_norm.weight", (dim,), norm("model.norm.weight", dim))
    if spec.get("layernorm") and "model.norm.bias" in st:
        out.tensor("output_norm.bias", (dim,), plain(plan.take("model.norm.bias", (dim,))))
    if head:
        out.tensor("output.weight", (vocab, dim), plain(plan.take(head, (vocab, dim))))
    plan.finish()


def gpt_oss_experts(st, plan, prefix, n, width, dim):
    """A gpt-oss layer's experts as llama.cpp's converter writes them, each a
    callable giving the stacked values: {gate,up,down}_exps.weight ((n, width,
    dim) twice, (n, dim, width)) and their biases ((n, width) twice, (n,
    dim)).  The BF16/F32 release stores (in, out) matrices, gate and up
    interleaved along the outputs (gate_up_proj[..., 2j] is gate's output j,
    [..., 2j + 1] up's), and the biases alike.  The one place that reads
    the experts' source tensors: the MXFP4 release's _blocks and _scales
    give MXFP4 bytes (mxfp4_expert_sources; "mxfp4" is then True)."""
    gu_b = plan.take(prefix + "gate_up_proj_bias", (n, 2 * width))
    dn_b = plan.take(prefix + "down_proj_bias", (n, dim))

    def bias(second):
        return lambda: st.read(gu_b)[second::2]
    if prefix + "gate_up_proj_blocks" in st:
        gate, up, down = mxfp4_expert_sources(st, plan, prefix[:-len("experts.")], n, width, dim)
        return {"gate": (gate, bias(0)), "up": (up, bias(1)), "down": (down, lambda: st.read(dn_b)),
                "mxfp4": True}
    gu = plan.take(prefix + "gate_up_proj", (n, dim, 2 * width))
    dn = plan.take(prefix + "down_proj", (n, width, dim))

    def gate_or_up(second):
        def read():
            a, out = st.read(gu), array.array("f")
            for e in range(n):   # (dim, 2 width) -> (width, dim), every other output
                m = transpose(a[e * dim * 2 * width:(e + 1) * dim * 2 * width], dim, 2 * width)
                for j in range(width):
                    row = 2 * j + second
                    out.extend(m[row * dim:(row + 1) * dim])
            return out
        return read

    def down():
        a, out = st.read(dn), array.array("f")
        for e in range(n):
            out.extend(transpose(a[e * width * dim:(e + 1) * width * dim], width, dim))
        return out
    return {"gate": (gate_or_up(0), bias(0)), "up": (gate_or_up(1), bias(1)),
            "down": (down, lambda: st.read(dn_b)), "mxfp4": False}


def convert_hf_gpt_oss(model_dir, config, out, tokenizer):
    """gpt-oss (GGUF gpt-oss) as llama.cpp's GptOssModel converts its BF16
    release: q/k/v/o with biases in HF's rotate_half order (NeoX pairs),
    each head's learned sink (attn_sinks.weight), the router with its bias
    (ffn_gate_inp), the experts split and transposed (gpt_oss_experts), the
    feed-forward's norm as post_attention_norm; alternating sliding and full
    layers, YaRN with its truncate flag.  llama.cpp fixes the clamped
    SwiGLU's limit at 7 and writes no key for it, so another limit is
    refused."""
    arch = "gpt-oss"
    st = SafeTensors(model_dir)
    dim, hidden, L, n_heads, n_kv, hd = llama_shape(config)
    if cfg_float(config, "swiglu_limit", 7.0) != 7.0:
        fail("config.json: swiglu_limit %g is not 7 (llama.cpp's gpt-oss fixes it at 7)"
             % cfg_float(config, "swiglu_limit", 7.0))
    if config.get("attention_bias") is False:
        fail("config.json: gpt_oss without attention biases is not supported")
    vocab = cfg_int(config, "vocab_size")
    ctx = cfg_int(config, "max_position_embeddings")
    eps = cfg_float(config, "rms_norm_eps", 1e-5)
    n_experts, n_used, width = moe_shape(config, arch, hidden)
    plan = TensorPlan(st)
    embd = plan.take("model.embed_tokens.weight", (vocab, dim))
    head = untied_head(st, plan, config, "lm_head.weight", tied_default=False)
    theta, scaling = rope_parameters(config)
    out.general(arch, model_name(config, model_dir))
    add_shape_hparams(out, arch, ctx, dim, hidden, L, n_heads, n_kv)
    w = out.w
    w.add_float32(arch + ".attention.layer_norm_rms_epsilon", eps)
    w.add_float32(arch + ".rope.freq_base", theta)
    w.add_uint32(arch + ".rope.dimension_count", hd)
    w.add_uint32(arch + ".attention.key_length", hd)
    w.add_uint32(arch + ".attention.value_length", hd)
    w.add_uint32(arch + ".expert_count", n_experts)
    w.add_uint32(arch + ".expert_used_count", n_used)
    w.add_uint32(arch + ".expert_feed_forward_length", width)
    w.add_string("posenc.rope.pairing", "neox")
    add_rope_scaling(out, scaling, arch, ctx, hd, theta)
    add_layer_types(out, config, arch, L, ctx, hd)
    add_model_tokenizer(out, tokenizer if tokenizer is not None else model_dir, vocab, config)

    def plain(name, shape):
        name = plan.take(name, shape)
        return lambda: st.read(name)

    out.tensor("token_embd.weight", (vocab, dim), lambda: st.read(embd))
    for l in range(L):
        p, b = "model.layers.%d." % l, "blk.%d." % l
        a = p + "self_attn."
        out.tensor(b + "attn_norm.weight", (dim,), plain(p + "input_layernorm.weight", (dim,)))
        for n, rows in (("q", n_heads * hd), ("k", n_kv * hd), ("v", n_kv * hd)):
            out.tensor(b + "attn_%s.weight" % n, (rows, dim),
                       plain(a + n + "_proj.weight", (rows, dim)))
            out.tensor(b + "attn_%s.bias" % n, (rows,), plain(a + n + "_proj.bias", (rows,)))
        out.tensor(b + "attn_output.weight", (dim, n_heads * hd),
                   plain(a + "o_proj.weight", (dim, n_heads * hd)))
        out.tensor(b + "attn_output.bias", (dim,), plain(a + "o_proj.bias", (dim,)))
        out.tensor(b + "attn_sinks.weight", (n_heads,), plain(a + "sinks", (n_heads,)))
        out.tensor(b + "post_attention_norm.weight", (dim,),
                   plain(p + "post_attention_layernorm.weight", (dim,)))
        out.tensor(b + "ffn_gate_inp.weight", (n_experts, dim),
                   plain(p + "mlp.router.weight", (n_experts, dim)))
        out.tensor(b + "ffn_gate_inp.bias", (n_experts,),
                   plain(p + "mlp.router.bias", (n_experts,)))
        experts = gpt_oss_experts(st, plan, p + "mlp.experts.", n_experts, width, dim)
        for what, shape, bias_shape in (("gate", (n_experts, width, dim), (n_experts, width)),
                                        ("up", (n_experts, width, dim), (n_experts, width)),
                                        ("down", (n_experts, dim, width), (n_experts, dim))):
            weights, bias = experts[what]
            if experts["mxfp4"]:   # kept as the release stores them, whatever --dtype says
                out.w.add_tensor(b + "ffn_%s_exps.weight" % what, shape, gguf.GGML_MXFP4, weights)
            else:
                out.tensor(b + "ffn_%s_exps.weight" % what, shape, weights)
            out.tensor(b + "ffn_%s_exps.bias" % what, bias_shape, bias)
    out.tensor("output_norm.weight", (dim,), plain("model.norm.weight", (dim,)))
    if head:
        out.tensor("output.weight", (vocab, dim), plain(head, (vocab, dim)))
    plan.finish()


def convert_hf(model_dir, out, tokenizer):
    cfg_path = os.path.join(model_dir, "config.json")
    if not os.path.isfile(cfg_path):
        fail("%s: not a Hugging Face model directory (no config.json)" % model_dir)
    config = load_json(cfg_path)
    if not isinstance(config, dict):
        fail("%s: expected a JSON object" % cfg_path)
    mt = config.get("model_type")
    if mt in ("llama", "qwen2", "gemma", "mistral", "smollm3"):   # Mistral: llama with a window
        convert_hf_llama(model_dir, config, out, tokenizer, "llama" if mt == "mistral" else mt)
    elif mt in _LAYERNORM_FAMILIES:
        _LAYERNORM_FAMILIES[mt](model_dir, config, out, tokenizer)
    elif mt == "phi3":
        convert_hf_phi3(model_dir, config, out, tokenizer)
    elif mt in _MODERN or (mt == "gemma3" and isinstance(config.get("text_config"), dict)):
        if mt == "gemma3":   # the multimodal config: its text model
            config, mt = dict(config["text_config"], model_type="gemma3_text"), "gemma3_text"
        convert_hf_modern(model_dir, config, out, tokenizer, _MODERN[mt])
    elif mt == "gpt_oss":
        convert_hf_gpt_oss(model_dir, config, out, tokenizer)
    elif mt == "gpt2":
        if tokenizer is not None:
            fail("--tokenizer is not used for gpt2 models (vocab.json + merges.txt are read "
                 "from the model directory)")
        convert_hf_gpt2(model_dir, config, out)
    else:
        fail("%s: unsupported model_type %r (supported: llama, mistral, smollm3, phi3, qwen3, gemma2, gemma3, olmo2, "
             "exaone4, granite, stablelm, cohere2, qwen3_moe, olmoe, granitemoe, gpt_oss, qwen2, gemma, gpt2, "
             "gpt_neox, bloom, gpt_bigcode, phi, mpt)" % (cfg_path, mt))


# ---- chat template ---------------------------------------------------------------------------

def chat_template_text(args):
    """tokenizer.chat_template: --chat-template FILE, else the model directory's
    tokenizer_config.json chat_template (a string, or a list of named templates
    of which "default" is the chat one); None when neither has one."""
    if args.chat_template is not None:
        if not os.path.isfile(args.chat_template):
            fail("%s: chat template not found" % args.chat_template)
        with open(args.chat_template, encoding="utf-8") as f:
            return f.read()
    path = os.path.join(args.input, "tokenizer_config.json")
    if not (os.path.isdir(args.input) and os.path.isfile(path)):
        return None
    with open(path, encoding="utf-8") as f:
        try:
            template = json.load(f).get("chat_template")
        except (ValueError, AttributeError):
            fail("%s: not a JSON object" % path)
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    if template is not None and not isinstance(template, str):
        fail("%s: chat_template is neither a string nor a list of named templates" % path)
    return template


# ---- main ---------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write("convert.py: error: %s\n" % message)
        sys.exit(2)


def main(argv):
    ap = _Parser(prog="convert.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("input", help="a GGUF file (retyped to --dtype), a llama2.c .bin, a "
                    "Hugging Face model directory, or with --vocab-only a tokenizer")
    ap.add_argument("output", help="GGUF file to write")
    ap.add_argument("--tokenizer", help="SentencePiece .model or llama2.c tokenizer.bin "
                    "(llama models)")
    ap.add_argument("--vocab-only", action="store_true",
                    help="write only INPUT's vocabulary: tokenizer.bin, a SentencePiece "
                    ".model, or a GPT-2 vocab.json + merges.txt directory")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="f32",
                    help="type of 2-D weight matrices (default f32)")
    ap.add_argument("--chat-template", metavar="FILE",
                    help="Jinja chat template to store as tokenizer.chat_template (default: a "
                    "model directory's tokenizer_config.json chat_template, if any)")
    args = ap.parse_args(argv)
    if args.tokenizer is not None and not os.path.isfile(args.tokenizer):
        fail("%s: tokenizer not found" % args.tokenizer)
    out = Output(args.dtype)
    if args.vocab_only:
        if args.tokenizer is not None:
            fail("--tokenizer is not used with --vocab-only (INPUT is the tokenizer)")
        if not os.path.exists(args.input):
            fail("%s: no such file or directory" % args.input)
        convert_vocab_only(args.input, out)
    elif os.path.isdir(args.input):
        convert_hf(args.input, out, args.tokenizer)
    elif os.path.isfile(args.input) and is_gguf(args.input):
        if args.tokenizer is not None:
            fail("--tokenizer is not used with a GGUF input (its vocabulary is copied)")
        if os.path.abspath(args.input) == os.path.abspath(args.output):
            fail("%s: input and output are the same file" % args.output)
        convert_gguf(args.input, out)
    elif os.path.isfile(args.input):
        convert_llama2c(args.input, out, args.tokenizer)
    else:
        fail("%s: no such file or directory" % args.input)
    template = chat_template_text(args)
    if template is not None:
        out.w.add_string("tokenizer.chat_template", template)
    out.write(args.output)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
    except (ConvertError, gguf.GGUFError, spm_proto.ProtoError) as e:
        msg = str(e)
    except OSError as e:
        msg = "%s: %s" % (e.filename, e.strerror) if e.filename else str(e)
    except Exception as e:   # never a traceback: one line, exit 2
        msg = "internal error: %s: %s" % (type(e).__name__, e)
    sys.stderr.write("convert.py: error: %s\n" % msg.replace("\n", " "))
    sys.exit(2)
