#!/usr/bin/env python3
"""Writes the tokenizer.json that Hugging Face transformers' SpmConverter
(convert_slow_tokenizer.py) makes of a SentencePiece unigram .model, for the
parity tests (stdlib only; the .model is read by tools/spm_proto.py):

  model          Unigram: every piece with its score, unk_id, byte_fallback
                 (SpmConverter's handle_byte_fallback is off; its Llama and
                 Gemma subclasses turn it on: --byte-fallback model takes the
                 .model's own setting, as those do)
  normalizer     Sequence: Precompiled (the .model's charsmap, base64), Strip
                 on the right, Replace of the Regex " {2,}" by U+2581
  pre_tokenizer  Metaspace U+2581, prepend_scheme "always" ("never" when the
                 .model adds no dummy prefix), split
  decoder        Metaspace, the same settings
  added_tokens   control pieces (special) and user-defined ones, normalized false

usage: tools/spm_to_hf_json.py MODEL OUT_DIR [--byte-fallback off|model]
Writes OUT_DIR/tokenizer.json."""
import base64
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spm_proto  # noqa: E402

SPACE = "\u2581"


def convert(m, byte_fallback):
    if m.model_type != spm_proto.UNIGRAM:
        raise SystemExit("spm_to_hf_json: only unigram models convert to a Unigram tokenizer.json")
    pieces = [(p.decode("utf-8"), score, kind) for p, score, kind in m.pieces]
    normalizers = [{"type": "Strip", "strip_left": False, "strip_right": True},
                   {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": SPACE}]
    if m.charsmap:
        normalizers.insert(0, {"type": "Precompiled",
                               "precompiled_charsmap": base64.b64encode(m.charsmap).decode("ascii")})
    scheme = "always" if m.add_dummy_prefix else "never"
    metaspace = {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": scheme, "split": True}
    added = [{"id": i, "content": p, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": kind == spm_proto.CONTROL}
             for i, (p, _, kind) in enumerate(pieces)
             if kind in (spm_proto.CONTROL, spm_proto.USER_DEFINED)]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": {"type": "Sequence", "normalizers": normalizers},
            "pre_tokenizer": metaspace, "post_processor": None, "decoder": dict(metaspace),
            "model": {"type": "Unigram", "unk_id": m.unknown_id(),
                      "vocab": [[p, score] for p, score, _ in pieces],
                      "byte_fallback": bool(byte_fallback and m.byte_fallback)}}


def main():
    args = sys.argv[1:]
    fallback = "off"
    if len(args) == 4 and args[2] == "--byte-fallback" and args[3] in ("off", "model"):
        fallback = args[3]
        args = args[:2]
    if len(args) != 2:
        raise SystemExit("usage: tools/spm_to_hf_json.py MODEL OUT_DIR [--byte-fallback off|model]")
    try:
        m = spm_proto.read_model(args[0])
    except (OSError, spm_proto.ProtoError) as e:
        raise SystemExit("spm_to_hf_json: %s: %s" % (args[0], e))
    os.makedirs(args[1], exist_ok=True)
    with open(os.path.join(args[1], "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(convert(m, fallback == "model"), f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
