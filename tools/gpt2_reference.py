#!/usr/bin/env python3
"""Reference GPT-2 byte-level BPE encoder for the tokenizer parity tests.

Follows the algorithm OpenAI published with GPT-2 (encoder.py): the
pre-tokenizer pattern run by the `regex` module (python3-regex), bytes mapped
to printable characters by bytes_to_unicode, then per word repeatedly merging
every occurrence of the lowest-ranked adjacent pair.  Reads vocab.json and
merges.txt from DIR (merges.txt: "#version" first line optional, blank lines
ignored).

Input is read as bytes and split into lines on b"\\n" like spm_encode (a last
line without "\\n" counts, "\\r" is text).  Invalid UTF-8 is decoded with
surrogateescape: each stray byte becomes a lone surrogate, which the pattern
treats as "other" (neither \\s, \\p{L} nor \\p{N}), and is encoded back to the
same byte.  Prints one line of ids (or pieces with --pieces) per input line.

usage: gpt2_reference.py DIR [--pieces] < text
"""
import json
import os
import sys

import regex

PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def byte_alphabet():
    """bytes_to_unicode: printable Latin-1 bytes keep their code point, the
    other 68 bytes get 256, 257, ... in byte order."""
    printable = set(range(0x21, 0x7F)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def load(directory):
    with open(os.path.join(directory, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(directory, "merges.txt"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[0].startswith("#version"):
        lines = lines[1:]
    merges = [tuple(line.split()) for line in lines if line.strip()]
    # as dict(zip(merges, range(len(merges)))): a repeated merge keeps its last rank
    ranks = {pair: rank for rank, pair in enumerate(merges)}
    return vocab, ranks


def merge_word(word, ranks):
    """One pre-token (a string of byte characters) -> its BPE symbols."""
    symbols = list(word)
    while len(symbols) > 1:
        pairs = {(a, b) for a, b in zip(symbols, symbols[1:])}
        best = min(pairs, key=lambda p: ranks.get(p, float("inf")))
        if best not in ranks:
            break
        merged, i = [], 0
        while i < len(symbols):
            if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == best:
                merged.append(symbols[i] + symbols[i + 1])
                i += 2
            else:
                merged.append(symbols[i])
                i += 1
        symbols = merged
    return symbols


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    vocab, ranks = load(sys.argv[1])
    pieces = "--pieces" in sys.argv[2:]
    alphabet = byte_alphabet()
    cache = {}
    data = sys.stdin.buffer.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for raw in lines:
        text = raw.decode("utf-8", errors="surrogateescape")
        tokens = []
        for word in PATTERN.findall(text):
            mapped = "".join(alphabet[b] for b in word.encode("utf-8", errors="surrogateescape"))
            if mapped not in cache:
                cache[mapped] = merge_word(mapped, ranks)
            tokens.extend(cache[mapped])
        out.append(" ".join(tokens if pieces else (str(vocab[t]) for t in tokens)))
    sys.stdout.buffer.write(("\n".join(out) + ("\n" if out else "")).encode("utf-8"))


if __name__ == "__main__":
    main()
