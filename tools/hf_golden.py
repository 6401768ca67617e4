#!/usr/bin/env python3
"""Hugging Face transformers' own logits for tools/hf_tiny.py's cases: the
held-back check that posenc and tools/arch_reference.py read each family's
modeling code as transformers runs it.  Needs PyTorch and transformers (the
device machine has transformers 5.17); never run by the tests, which read the
committed output, tests/fixtures/hf_golden/<case>.json.

    hf_golden.py OUT_DIR [CASE ...]

For each case: the model built from the case's config with the eager
attention, every parameter set by hf_tiny.values, run in float64 on the CPU:
    chunk    the 80 tokens in one forward pass (logits at CHUNK_POSITIONS, and
             every position's log-probability of the next token)
    steps    token by token through the cache
    split    SPLIT_AT tokens, then the rest as a second chunk through the cache
    offset   one chunk with positions starting at OFFSET
and what transformers saved (config.json), the parameters' names and shapes
(the manifest hf_tiny.make writes), and every rotary module's frequencies.
A case transformers refuses is written with its error instead.
"""
import json
import os
import sys
import tempfile
import traceback

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_tiny  # noqa: E402


def rows(logits, positions):
    return [[float("%.9g" % v) for v in logits[p]] for p in positions]


def legacy_form(cfg):
    """The same config in transformers 4.x form (rope_theta, rope_scaling)."""
    cfg = dict(cfg)
    rope = dict(cfg.pop("rope_parameters"))
    if "rope_type" not in rope:          # per layer type: Gemma 3's local and global
        local, rope = rope["sliding_attention"], dict(rope["full_attention"])
        cfg["rope_local_base_freq"] = local["rope_theta"]
    cfg["rope_theta"] = rope.pop("rope_theta")
    if rope["rope_type"] != "default":
        cfg["rope_scaling"] = rope
    return cfg


def run_case(name, cfg):
    try:
        config = transformers.AutoConfig.for_model(**cfg)
    except Exception as e:
        print("%-24s 5.x config refused (%s); trying the 4.x form" % (name, e), flush=True)
        cfg = legacy_form(cfg)
        config = transformers.AutoConfig.for_model(**cfg)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    # the experts' loop, not grouped_mm, which has no float64 kernel
    model = transformers.AutoModelForCausalLM.from_config(
        config, attn_implementation="eager", experts_implementation="eager")
    manifest = []
    with torch.no_grad():
        for pname, p in model.named_parameters():
            p.copy_(torch.tensor(hf_tiny.values(pname, tuple(p.shape)),
                                 dtype=torch.float32).reshape(p.shape))
            manifest.append([pname, list(p.shape)])
    model = model.to(torch.float64).eval()
    with tempfile.TemporaryDirectory() as d:
        model.config.save_pretrained(d)
        saved = json.load(open(os.path.join(d, "config.json")))
    ids = torch.tensor([hf_tiny.token_ids()])
    n = ids.shape[1]
    out = {"case": name, "config": cfg, "saved_config": saved, "manifest": manifest,
           "ids": ids[0].tolist(), "chunk_positions": hf_tiny.CHUNK_POSITIONS,
           "split_at": hf_tiny.SPLIT_AT, "split_positions": hf_tiny.SPLIT_POSITIONS,
           "offset": hf_tiny.OFFSET, "offset_positions": hf_tiny.OFFSET_POSITIONS}
    with torch.no_grad():
        chunk = model(ids).logits[0]
        logp = torch.log_softmax(chunk, -1)
        out["chunk"] = rows(chunk, hf_tiny.CHUNK_POSITIONS)
        out["next_logprob"] = [float("%.12g" % logp[t, ids[0, t + 1]]) for t in range(n - 1)]
        steps, cache = [], None
        for t in range(n):
            r = model(ids[:, t:t + 1], past_key_values=cache, use_cache=True)
            cache = r.past_key_values
            steps.append(r.logits[0, -1])
        out["steps"] = rows(torch.stack(steps), hf_tiny.CHUNK_POSITIONS)
        s = hf_tiny.SPLIT_AT
        r = model(ids[:, :s], use_cache=True)
        r2 = model(ids[:, s:], past_key_values=r.past_key_values, use_cache=True)
        second = torch.cat([r.logits[0], r2.logits[0]], 0)
        out["split"] = rows(second, hf_tiny.SPLIT_POSITIONS)
        pos = torch.arange(hf_tiny.OFFSET, hf_tiny.OFFSET + n)[None]
        out["offset_chunk"] = rows(model(ids, position_ids=pos).logits[0], hf_tiny.OFFSET_POSITIONS)
    rotary = {}
    for mname, mod in model.named_modules():
        for bname, b in mod.named_buffers(recurse=False):
            if "inv_freq" in bname:
                rotary["%s.%s" % (mname, bname)] = [float(v) for v in b.double()]
        for attr in ("attention_scaling", "scaling"):
            v = getattr(mod, attr, None)
            if isinstance(v, (int, float)) and ("rotary" in mname or "attn" in mname):
                rotary["%s.%s" % (mname, attr)] = float(v)
    out["rotary"] = rotary
    top1 = chunk.argmax(-1)
    out["summary"] = {"max_abs_logit": float(chunk.abs().max()),
                      "distinct_top1": int(top1.unique().numel()),
                      "steps_vs_chunk": float((torch.stack(steps) - chunk).abs().max())}
    return out


def main():
    out_dir = sys.argv[1]
    names = sys.argv[2:] or list(hf_tiny.CASES)
    os.makedirs(out_dir, exist_ok=True)
    torch.set_num_threads(min(16, os.cpu_count() or 1))
    print("transformers", transformers.__version__, "torch", torch.__version__, flush=True)
    for name in names:
        try:
            res = run_case(name, hf_tiny.CASES[name])
            print("%-24s ok  %s" % (name, json.dumps(res["summary"])), flush=True)
        except Exception as e:  # a refusal is a finding, written down
            res = {"case": name, "config": hf_tiny.CASES[name],
                   "error": "%s: %s" % (type(e).__name__, e), "trace": traceback.format_exc()}
            print("%-24s ERR %s" % (name, res["error"]), flush=True)
        res["transformers"], res["torch"] = transformers.__version__, torch.__version__
        with open(os.path.join(out_dir, name + ".json"), "w") as f:
            json.dump(res, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
