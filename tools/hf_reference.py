#!/usr/bin/python3
"""A float64 NumPy forward pass for tools/hf_tiny.py's checkpoints (config.json
in transformers 5.x form), written from each family's Hugging Face modeling
code (modeling_llama.py and modeling_rope_utils.py for the llama3, YaRN,
dynamic NTK and LongRoPE scalings, modeling_phi3.py, modeling_qwen3.py,
modeling_smollm3.py, modeling_gemma2.py, modeling_gemma3.py,
modeling_olmo2.py, modeling_granite.py, modeling_stablelm.py,
modeling_cohere2.py, modeling_exaone4.py; and the mixtures of experts of
modeling_gpt_oss.py, modeling_qwen3_moe.py, modeling_olmoe.py,
modeling_granitemoe.py), independently of posenc's C code, and checked
against transformers' own logits (tests/fixtures/hf_golden/<case>.json).

    hf_reference.py logits DIR --ids 1,2,3 [--pos0 N] [--mode chunk|steps|split:K]
                           [--break FEATURE] [--f32-rope] [--seen N]
        prints the logits of every position, one line of numbers each.
        Positions are pos0 .. pos0+n-1 (a sliding window counts by position
        difference).  --mode: chunk is one forward pass; steps one token at a
        time through a KV cache; split:K the first K tokens, then the rest as
        a second chunk through the cache.  The modes differ where the rotary
        frequencies depend on the call: dynamic NTK recomputes θ from the
        call's seq_len = last position + 1 once that passes
        max_position_embeddings, LongRoPE takes its long factors once it
        passes original_max_position_embeddings; cached keys keep the
        rotation they were stored with.  Each run starts from a fresh model;
        --seen N starts it as transformers' rotary module is after an earlier
        call of seq_len N (dynamic NTK keeps a grown θ for later, shorter
        calls: see below).  --f32-rope computes the rotary angles as
        transformers does (inv_freq, angle, cos and sin in float32, then
        widened) instead of in float64.
        --break FEATURE computes the logits with a feature broken, for the
        tests' negative controls (a FEATURE the checkpoint lacks is an error):
          rope-default        any scaled RoPE (llama3, yarn, dynamic, longrope,
                              linear) read as plain RoPE over rope_theta
          full-rotary         stablelm: the whole head rotated, not its
                              partial_rotary_factor
          yarn-paper          YaRN: posenc's old ramp, linear in the rotations
                              (original context / wavelength) between beta_slow
                              and beta_fast, no floor/ceil
          long-factors-short  LongRoPE: long factors for a short call, short
                              for a long one
          shared-theta        gemma3: local layers use the global θ and scaling
          nope-rotated        smollm3, cohere2, exaone4: the NoPE layers rotated
          qk-norm             qwen3, gemma3, olmo2, exaone4, stablelm_parallel,
                              qwen3_moe, olmoe: q/k norms skipped
          softcap             gemma2: no attention or final soft-cap
          post-norm           olmo2, exaone4, gemma2/3: each post-norm applied
                              to the sub-layer's input instead of its output
          multipliers         granite(moe): embedding/residual/attention
                              multipliers and logits_scaling dropped
          no-window           the sliding window ignored
          parallel            stablelm_parallel, cohere2: sequential residual
                              (the feed-forward reads x + attention)
          sinks               gpt_oss: no attention sinks
          clamp               gpt_oss: the SwiGLU's clamps off (gate and up unbounded)
          router-bias         gpt_oss: the router's bias dropped
          topk-norm           qwen3_moe, olmoe: norm_topk_prob flipped
          softmax-side        olmoe, granitemoe: the softmax on the other side of the
                              top k (qwen3_moe renormalises, where both sides agree)
          top1                the mixtures of experts: one expert a token, not
                              num_experts_per_tok

        The position lab (each written from its source, not from posenc):
          --self-extend G,W   Self-Extend (Jin et al. 2024, arXiv 2401.01325, and its
                              repository's self_extend_patch/Llama.py): on a rotating
                              layer, a key with p_q - p_k < W scores with q and k
                              rotated at their positions, a farther one with q at
                              floor(p_q/G) + W - floor(W/G) and k at floor(p_k/G); one
                              softmax over both
          --group-attention G,W  llama.cpp's group attention (examples/main, c392e50):
                              before each call, while n_past >= ga_i + W, the cached
                              positions are edited (seq_add, seq_div, seq_add) and
                              n_past lowered; keys are rotated at the positions the
                              cache holds at each call (what re-rotation gives exactly)
          --attn-temperature B,L[,llama4]  q times 1 + B ln(1 + floor(p / L)) on every
                              layer (transformers' Ministral 3 get_llama_4_attn_scale,
                              llama.cpp's mistral3), or with llama4 times
                              1 + B ln(1 + floor((p + 1) / L)) on the layers without
                              rotation (modeling_llama4.py, attn_temperature_tuning)
          --chunk C           chunked attention (modeling_llama4.py's chunked mask): a
                              query sees the keys with p_k // C == p_q // C
        and their controls (--break):
          se-boundary         Self-Extend's neighbours p_q - p_k <= W (one more)
          se-true-division    the shift W - W/G in true division (the repository's
                              non-flash patch; fractional positions when G does not
                              divide W)
          temperature-offset  the other form's floor: (p + 1) for Mistral 3's, p for
                              Llama 4's
          chunk-shifted       chunks starting at 1, C + 1, ...

    hf_reference.py sinks DIR --ids 1,2,3
        gpt_oss: the weight each head's learned sink takes in each query's
        softmax, over one chunk at positions 0..n-1: a line per layer and
        head, "LAYER HEAD w0 w1 ...".

    hf_reference.py check [CASE ...] [--f32-rope]
        for each case (default: all 19), writes the checkpoint with
        hf_tiny.make into a temporary folder, runs chunk, steps, split and the
        offset chunk in the order tools/hf_golden.py ran them, on one model
        (so the rotary module's state carries over as it did there), prints
        the largest |difference| from transformers' logits for each, and the
        largest change each applicable --break makes; exits 1 when a
        difference from transformers passes 1e-4 (or a break changes less
        than 1e-2).

What transformers 5.17 does here, each settled by the fixtures:
  - A sliding window of W admits the W positions p-W+1 .. p (the query's own
    included), alike in a chunk, token by token and in a split (W-1 or W+1
    is off by 0.4 to 22 in the logits).  Phi-3's window covers every layer.
  - Dynamic NTK keeps state in the rotary module: θ is recomputed only when
    a call's seq_len (last position + 1) passes the largest seen so far, and
    reset to the plain θ only when a call's seq_len is below
    max_position_embeddings.  So hf_golden's split (run after the 80 steps)
    rotates its first 50 tokens with θ for 80, not 50 (--seen 80; a fresh
    model differs by 0.25).  Token by token, every key keeps θ of its own step.
  - LongRoPE is stateless: long factors when the call's seq_len >
    original_max_position_embeddings (32 here: a step at position 31 is
    short, 32 long), and the attention factor sqrt(1 + ln(128/32)/ln 32)
    multiplies cos and sin for short and long factors alike.
  - YaRN's attention factor (0.1 ln factor + 1) multiplies cos and sin, so
    the scores carry its square; truncate: false keeps the correction range
    fractional (pairs 0 .. 1.41 here instead of 0 .. 2).
  - llama3: the medium band includes its edges (wavelength between
    original/high_freq_factor and original/low_freq_factor).
  - Gemma 3's global layers take rope_parameters["full_attention"] (θ 1e6
    and linear /8), the local ones rope_parameters["sliding_attention"]
    (θ 1e4, unscaled).  Gemma 2/3 scale the scores by
    query_pre_attn_scalar^-0.5, not head_dim^-0.5; Gemma 2's soft-cap acts
    on the scaled scores before the mask.
  - Cohere2 rotates interleaved pairs (2i, 2i+1) on its sliding layers only
    (the full layers are NoPE) and runs attention and feed-forward in
    parallel from one LayerNorm (no bias); EXAONE 4 rotates only its
    sliding layers when a sliding_window is set (all layers otherwise);
    SmolLM3 rotates the layers whose no_rope_layers entry is 1.
  - OLMo 2 and OLMoE normalise q and k over the whole projection (all heads
    at once), Qwen3, Gemma 3 and EXAONE 4 per head; StableLM's qk_layernorm
    is a bias-free LayerNorm with its own weights per head.
  - The residual differences (up to ~3e-5, under 1e-6 of the logits' size)
    are float32 rounding inside transformers' float64 model: its RMSNorms
    cast to float32, and it computes the rotary angles in float32.  They are
    already there at position 0, where rotation is the identity, except in
    StableLM (torch's LayerNorm, in float64), which agrees to 1.4e-7.

Stdlib + NumPy only; helpers from tools/arch_reference.py.
"""
import argparse
import json
import math
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from arch_reference import gelu_tanh, layernorm, rmsnorm, softmax  # noqa: E402
from reference import read_safetensors  # noqa: E402

SLIDING, FULL = "sliding_attention", "full_attention"
DENSE = ("llama3", "llama_yarn", "llama_yarn_untruncated", "llama_dynamic", "phi3", "qwen3",
         "smollm3", "gemma2", "gemma3", "olmo2", "granite", "stablelm", "stablelm_parallel",
         "cohere2", "exaone4")
MOE = ("gpt_oss", "qwen3_moe", "olmoe", "granitemoe")
TOLERANCE = 1e-4
# Breaks of a feature the case's weights leave idle, which `check` skips: the
# tiny gpt_oss's gate and up stay within 3.7 of the clamp's 7 (hf_tiny.py's
# gpt_oss_hot scales them until it binds).
IDLE_BREAKS = {"gpt_oss": ("clamp",)}


# ---- rotary frequencies ---------------------------------------------------------------------------

def _f32(x):
    return np.asarray(x, dtype=np.float64).astype(np.float32).astype(np.float64)


class Rotary:
    """One rope_parameters entry as modeling_rope_utils computes it: the
    inverse frequencies for the rotated dims and the factor cos and sin are
    multiplied by, with dynamic NTK's and LongRoPE's dependence on the call.

    `stateful` reproduces transformers' rotary module carried across calls
    (dynamic_rope_update): it only recomputes dynamic NTK's θ when a call's
    seq_len passes the cached one, and resets when a call is shorter than
    max_position_embeddings while the cache is longer."""

    def __init__(self, params, head_dim, cfg, broken=None, f32=False, stateful=False):
        self.p, self.cfg, self.broken, self.f32 = dict(params), cfg, broken, f32
        self.type = self.p.get("rope_type", "default")
        if broken == "rope-default":
            self.type = "default"
        partial = self.p.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0))
        self.partial = partial < 1.0
        self.dim = int(head_dim * partial)
        if broken == "full-rotary" and self.type != "longrope":
            self.dim = head_dim
        self.base = float(self.p["rope_theta"])
        self.max_pos = cfg["max_position_embeddings"]
        self.stateful = stateful
        self.cached_len = self.max_pos
        self.current = self.compute(None)

    def _exponents(self):
        return np.arange(0, self.dim, 2, dtype=np.float64) / self.dim

    def compute(self, seq_len):
        """(inv_freq, attention_factor) for a call whose seq_len (last position + 1) is given."""
        p, base, t = self.p, self.base, self.type
        inv = base ** -self._exponents()
        scale = 1.0
        if t == "linear":
            inv = inv / p["factor"]
        elif t == "dynamic":
            n = max(seq_len or 0, self.max_pos)
            factor = p["factor"]
            b = base * (factor * n / self.max_pos - (factor - 1)) ** (self.dim / (self.dim - 2))
            inv = b ** -self._exponents()
        elif t == "llama3":
            factor, lo, hi = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
            old = p["original_max_position_embeddings"]
            wavelen = 2 * math.pi / inv
            smooth = (old / wavelen - lo) / (hi - lo)
            out = np.where(wavelen > old / lo, inv / factor, inv)
            medium = (wavelen <= old / lo) & (wavelen >= old / hi)
            inv = np.where(medium, (1 - smooth) * inv / factor + smooth * inv, out)
        elif t == "yarn":
            factor = p.get("factor") or self.max_pos / p["original_max_position_embeddings"]
            orig = p["original_max_position_embeddings"]
            scale = p.get("attention_factor")
            if scale is None:
                def mscale(s, m=1.0):
                    return 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0
                if p.get("mscale") and p.get("mscale_all_dim"):
                    scale = mscale(factor, p["mscale"]) / mscale(factor, p["mscale_all_dim"])
                else:
                    scale = mscale(factor)
            fast, slow = p.get("beta_fast") or 32.0, p.get("beta_slow") or 1.0
            if self.broken == "yarn-paper":
                # the YaRN paper's ramp, linear in the rotations r = L / wavelength
                r = orig * inv / (2 * math.pi)
                keep = np.clip((r - slow) / (fast - slow), 0.0, 1.0)
            else:
                def pair_of(rotations):   # the pair index that turns `rotations` times in orig
                    return self.dim * math.log(orig / (rotations * 2 * math.pi)) / (2 * math.log(base))
                lo, hi = pair_of(fast), pair_of(slow)
                if p.get("truncate", True):
                    lo, hi = math.floor(lo), math.ceil(hi)
                lo, hi = max(lo, 0), min(hi, self.dim - 1)
                if lo == hi:
                    hi += 0.001
                ramp = np.clip((np.arange(self.dim // 2) - lo) / (hi - lo), 0.0, 1.0)
                keep = 1.0 - ramp          # 1: the pair keeps its frequency (extrapolates)
            inv = inv / factor * (1 - keep) + inv * keep
        elif t == "longrope":
            orig = p.get("original_max_position_embeddings") or self.cfg["original_max_position_embeddings"]
            # Phi-3's configs give no factor: it is max_position_embeddings / original
            factor = p.get("factor") or self.max_pos / orig
            scale = p.get("attention_factor")
            if scale is None:
                scale = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(orig))
            long = seq_len is not None and seq_len > orig
            if self.broken == "long-factors-short":
                long = not long
            ext = np.asarray(p["long_factor"] if long else p["short_factor"], dtype=np.float64)
            if self.f32:
                ext = _f32(ext)
            inv = 1.0 / (ext * base ** self._exponents())
        elif t != "default":
            raise ValueError("rope_type %r is not implemented" % t)
        if self.f32:
            inv = _f32(inv)
        return inv, scale

    def for_call(self, positions):
        """(inv_freq, factor) for a forward call over these positions."""
        n = int(np.max(positions)) + 1
        if self.type == "longrope":
            self.current = self.compute(n)
        elif self.type == "dynamic":
            if not self.stateful:
                self.current = self.compute(n)
            else:
                if n > self.cached_len:
                    self.current = self.compute(n)
                    self.cached_len = n
                if n < self.max_pos and self.cached_len > self.max_pos:
                    self.current = self.compute(None)
                    self.cached_len = self.max_pos
        return self.current

    def cos_sin(self, positions):
        inv, scale = self.for_call(positions)
        pos = np.asarray(positions, dtype=np.float64)
        if self.f32:
            ang = _f32(_f32(pos)[:, None] * inv[None, :])
            cos, sin = _f32(np.cos(ang)), _f32(np.sin(ang))
            return _f32(cos * _f32(scale)), _f32(sin * _f32(scale))
        ang = pos[:, None] * inv[None, :]
        return np.cos(ang) * scale, np.sin(ang) * scale


def rotate(x, cos, sin, interleaved=False):
    """Rotate the first 2*len(inv_freq) dims of x (heads, n, hs); the rest pass.
    Half pairing (i, i + rot/2), as rotate_half; interleaved pairs (2i, 2i+1), as Cohere."""
    rot = 2 * cos.shape[-1]
    xr, xp = x[..., :rot], x[..., rot:]
    if interleaved:
        c, s = np.repeat(cos, 2, -1), np.repeat(sin, 2, -1)
        turned = np.stack([-xr[..., 1::2], xr[..., 0::2]], -1).reshape(xr.shape)
    else:
        c, s = np.concatenate([cos, cos], -1), np.concatenate([sin, sin], -1)
        half = rot // 2
        turned = np.concatenate([-xr[..., half:], xr[..., :half]], -1)
    return np.concatenate([xr * c + turned * s, xp], -1)


# ---- the model ------------------------------------------------------------------------------------

def silu(x):
    return x / (1.0 + np.exp(-x))


def heads(x, n):
    return x.reshape(x.shape[0], n, -1).transpose(1, 0, 2)


class Model:
    """A decoder with its KV cache; forward() takes the next tokens and their positions."""

    LAB_BREAKS = ("se-boundary", "se-true-division", "temperature-offset", "chunk-shifted")

    def __init__(self, directory, broken=None, f32=False, stateful=False, lab=None):
        cfg = json.load(open(os.path.join(directory, "config.json")))
        self.cfg, self.broken = cfg, broken
        # the position lab: {"self_extend": (G, W), "group_attention": (G, W),
        # "temperature": (B, L, llama4), "chunk": C}; its keys' positions
        self.lab, self.kpos = dict(lab or {}), np.zeros(0, dtype=np.int64)
        self.w = read_safetensors(os.path.join(directory, "model.safetensors"))
        self.mt = mt = cfg["model_type"]
        known = ("llama", "phi3", "qwen3", "smollm3", "gemma2", "gemma3_text", "olmo2", "granite",
                 "stablelm", "cohere2", "exaone4") + MOE
        if mt not in known:
            raise ValueError("model_type %r is not one of %s" % (mt, ", ".join(known)))
        self.d, self.L = cfg["hidden_size"], cfg["num_hidden_layers"]
        self.nh = cfg["num_attention_heads"]
        self.nkv = cfg.get("num_key_value_heads") or self.nh
        self.hd = cfg.get("head_dim") or self.d // self.nh
        self.layer_types = cfg.get("layer_types") or [FULL] * self.L
        if mt == "phi3" and cfg.get("sliding_window"):
            self.layer_types = [SLIDING] * self.L     # Phi-3: every layer windowed
        self.window = None if broken == "no-window" else cfg.get("sliding_window")
        rp = cfg["rope_parameters"]
        if "rope_type" not in rp and "rope_theta" not in rp:      # per layer type (Gemma 3)
            self.rotary = {k: Rotary(v, self.hd, cfg, broken, f32, stateful) for k, v in rp.items()}
            if broken == "shared-theta":
                self.rotary[SLIDING] = self.rotary[FULL]
        else:
            r = Rotary(rp, self.hd, cfg, broken, f32, stateful)
            self.rotary = {SLIDING: r, FULL: r}
        self.cache = [None] * self.L            # per layer: (k, v, positions)
        self.sink_share = [None] * self.L       # gpt_oss: the last call's sink weights
        if broken is not None and broken not in self.breaks() + list(self.LAB_BREAKS):
            raise ValueError("--break %s does not apply to %s (these do: %s)"
                             % (broken, mt, ", ".join(self.breaks()) or "none"))
        self.eps = cfg.get("layer_norm_eps", cfg.get("rms_norm_eps", 1e-6)) \
            if mt in ("stablelm", "cohere2") else cfg.get("rms_norm_eps", 1e-6)

    def breaks(self):
        """The --break features this checkpoint has."""
        mt, cfg, w = self.mt, self.cfg, self.w
        types = {r.p.get("rope_type", "default") for r in self.rotary.values()}
        out = []
        if types - {"default"}:
            out.append("rope-default")
        if any(r.partial and r.type != "longrope" for r in self.rotary.values()):
            out.append("full-rotary")
        if "yarn" in types:
            out.append("yarn-paper")
        if "longrope" in types:
            out.append("long-factors-short")
        if len({id(r) for r in self.rotary.values()}) > 1 or self.broken == "shared-theta":
            out.append("shared-theta")
        saved, self.broken = self.broken, None
        if not all(self.uses_rope(l) for l in range(self.L)):
            out.append("nope-rotated")
        self.broken = saved
        if any(".q_norm." in n or ".q_layernorm." in n for n in w):
            out.append("qk-norm")
        if cfg.get("attn_logit_softcapping") or cfg.get("final_logit_softcapping"):
            out.append("softcap")
        if mt in ("olmo2", "exaone4", "gemma2", "gemma3_text"):
            out.append("post-norm")
        if mt in ("granite", "granitemoe"):
            out.append("multipliers")
        if cfg.get("sliding_window") and SLIDING in self.layer_types:
            out.append("no-window")
        if mt == "cohere2" or (mt == "stablelm" and cfg.get("use_parallel_residual")):
            out.append("parallel")
        if mt == "gpt_oss":
            out += ["sinks", "clamp", "router-bias"]
        if mt in ("qwen3_moe", "olmoe"):
            out.append("topk-norm")
        if mt in ("olmoe", "granitemoe"):
            out.append("softmax-side")
        if mt in MOE:
            out.append("top1")
        return out

    # -- pieces --

    def lin(self, x, name):
        y = x @ self.w[name + ".weight"].T
        b = self.w.get(name + ".bias")
        return y if b is None else y + b

    def norm(self, x, name):
        mt, eps = self.mt, self.eps
        wt = self.w[name + ".weight"]
        if mt in ("gemma2", "gemma3_text"):
            return rmsnorm(x, 1.0 + wt, eps)
        if mt == "stablelm":
            return layernorm(x, wt, self.w.get(name + ".bias", 0.0), eps)
        if mt == "cohere2":
            return layernorm(x, wt, 0.0, eps)
        return rmsnorm(x, wt, eps)

    def uses_rope(self, l):
        mt, cfg = self.mt, self.cfg
        if self.broken == "nope-rotated":
            return True
        if mt == "smollm3":
            return bool(cfg["no_rope_layers"][l])
        if mt == "cohere2":
            return self.layer_types[l] == SLIDING
        if mt == "exaone4":
            return cfg.get("sliding_window") is None or self.layer_types[l] == SLIDING
        return True

    def scaling(self):
        cfg = self.cfg
        if self.mt in ("gemma2", "gemma3_text"):
            return cfg["query_pre_attn_scalar"] ** -0.5
        if self.mt in ("granite", "granitemoe") and self.broken != "multipliers":
            return cfg["attention_multiplier"]
        return self.hd ** -0.5

    def qkv(self, h, l):
        P = "model.layers.%d.self_attn." % l
        if self.mt == "phi3":
            qkv = self.lin(h, P + "qkv_proj")
            nq, nk = self.nh * self.hd, self.nkv * self.hd
            q, k, v = qkv[:, :nq], qkv[:, nq:nq + nk], qkv[:, nq + nk:]
        else:
            q, k, v = self.lin(h, P + "q_proj"), self.lin(h, P + "k_proj"), self.lin(h, P + "v_proj")
        skip_norm = self.broken == "qk-norm"
        if self.mt in ("olmo2", "olmoe") and not skip_norm:    # over the whole projection, before the heads
            q, k = self.norm(q, P + "q_norm"), self.norm(k, P + "k_norm")
        q, k, v = heads(q, self.nh), heads(k, self.nkv), heads(v, self.nkv)
        if not skip_norm:
            if self.mt in ("qwen3", "gemma3_text", "exaone4", "qwen3_moe"):   # per head
                q, k = self.norm(q, P + "q_norm"), self.norm(k, P + "k_norm")
            elif self.mt == "stablelm" and self.cfg.get("qk_layernorm"):   # a LayerNorm per head
                q = np.stack([layernorm(q[i], self.w[P + "q_layernorm.norms.%d.weight" % i], 0.0, self.eps)
                              for i in range(self.nh)])
                k = np.stack([layernorm(k[i], self.w[P + "k_layernorm.norms.%d.weight" % i], 0.0, self.eps)
                              for i in range(self.nkv)])
        return q, k, v

    def attention(self, h, l, pos, cos_sin):
        P = "model.layers.%d.self_attn." % l
        q, k, v = self.qkv(h, l)
        if self.uses_rope(l):
            cos, sin = cos_sin[self.layer_types[l]]
            inter = self.mt == "cohere2"
            q, k = rotate(q, cos, sin, inter), rotate(k, cos, sin, inter)
        if self.cache[l] is not None:
            k0, v0, p0 = self.cache[l]
            k, v, kpos = np.concatenate([k0, k], 1), np.concatenate([v0, v], 1), np.concatenate([p0, pos])
        else:
            kpos = pos
        self.cache[l] = (k, v, kpos)
        rep = self.nh // self.nkv
        kk, vv = np.repeat(k, rep, 0), np.repeat(v, rep, 0)
        s = q @ kk.transpose(0, 2, 1) * self.scaling()
        cap = self.cfg.get("attn_logit_softcapping")
        if cap and self.broken != "softcap":
            s = np.tanh(s / cap) * cap
        masked = kpos[None, :] > pos[:, None]
        if self.window and self.layer_types[l] == SLIDING:
            masked |= pos[:, None] - kpos[None, :] >= self.window
        s = np.where(masked, -np.inf, s)
        if self.mt == "gpt_oss" and self.broken != "sinks":
            # a per-head sink logit joins each row's softmax, then is dropped
            sink = np.broadcast_to(self.w[P + "sinks"][:, None, None], s.shape[:2] + (1,))
            full = softmax(np.concatenate([s, sink], -1))
            self.sink_share[l] = full[..., -1]          # (heads, queries)
            prob = full[..., :-1]
        else:
            prob = softmax(s)
        o = (prob @ vv).transpose(1, 0, 2).reshape(len(pos), -1)
        return self.lin(o, P + "o_proj")

    def lab_attention(self, h, l, pos):
        """Attention with the position lab's features.  The cache keeps the keys
        unrotated; each call rotates them at the positions self.kpos holds now."""
        P = "model.layers.%d.self_attn." % l
        q, k, v = self.qkv(h, l)
        if self.cache[l] is not None:
            k = np.concatenate([self.cache[l][0], k], 1)
            v = np.concatenate([self.cache[l][1], v], 1)
        self.cache[l] = (k, v)
        kpos, br, lab = self.kpos, self.broken, self.lab
        rot, inter, rotates = self.rotary[self.layer_types[l]], self.mt == "cohere2", self.uses_rope(l)

        def turned(x, p):
            cos, sin = rot.cos_sin(np.asarray(p))
            return rotate(x, cos, sin, inter)

        factor = np.ones(len(pos))
        if "temperature" in lab:
            beta, length, llama4 = lab["temperature"]
            if not (llama4 and rotates):      # Llama 4: the NoPE layers; Mistral 3: every layer
                offset = 1 if llama4 != (br == "temperature-offset") else 0
                factor = 1.0 + beta * np.log(1.0 + np.floor((pos + offset) / length))
        rep = self.nh // self.nkv
        qn, kn = (turned(q, pos), turned(k, kpos)) if rotates else (q, k)
        s = (qn * factor[None, :, None]) @ np.repeat(kn, rep, 0).transpose(0, 2, 1) * self.scaling()
        if "self_extend" in lab and rotates:
            g, w = lab["self_extend"]
            shift = w - (w / g if br == "se-true-division" else w // g)
            qg, kg = turned(q, pos // g + shift), turned(k, kpos // g)
            sg = (qg * factor[None, :, None]) @ np.repeat(kg, rep, 0).transpose(0, 2, 1) * self.scaling()
            dist = pos[:, None] - kpos[None, :]
            s = np.where(dist > w if br == "se-boundary" else dist >= w, sg, s)
        cap = self.cfg.get("attn_logit_softcapping")
        if cap:
            s = np.tanh(s / cap) * cap
        masked = kpos[None, :] > pos[:, None]
        if self.window and self.layer_types[l] == SLIDING:
            masked |= pos[:, None] - kpos[None, :] >= self.window
        if "chunk" in lab:
            c, at = lab["chunk"], (1 if br == "chunk-shifted" else 0)
            masked |= (kpos[None, :] + c - at) // c != (pos[:, None] + c - at) // c
        prob = softmax(np.where(masked, -np.inf, s))
        o = (prob @ np.repeat(v, rep, 0)).transpose(1, 0, 2).reshape(len(pos), -1)
        return self.lin(o, P + "o_proj")

    def group_attention(self, n_past):
        """llama.cpp's group attention before a call at n_past (examples/main/main.cpp,
        c392e50): llama_kv_cache_seq_add moves the positions in [p0, p1) by d,
        seq_div divides them; returns the lowered n_past."""
        g, w = self.lab["group_attention"]
        kp = self.kpos

        def edit(p0, p1, fn):
            sel = (kp >= p0) & (kp < p1)
            kp[sel] = fn(kp[sel])

        while n_past >= self.ga_i + w:
            ib = (g * self.ga_i) // w
            bd = (w // g) * (g - 1)
            dd = (w // g) - ib * bd - w
            edit(self.ga_i, n_past, lambda p: p + ib * bd)
            edit(self.ga_i + ib * bd, self.ga_i + ib * bd + w, lambda p: p // g)
            edit(self.ga_i + ib * bd + w, n_past + ib * bd, lambda p: p + dd)
            n_past -= bd
            self.ga_i += w // g
        return n_past

    def moe(self, h, l):
        """The mixture of experts: a router picks top-k experts per token, their outputs summed by weight."""
        mt, cfg, w = self.mt, self.cfg, self.w
        k = 1 if self.broken == "top1" else cfg["num_experts_per_tok"]
        P = "model.layers.%d.%s." % (l, "block_sparse_moe" if mt == "granitemoe" else "mlp")
        if (mt in ("qwen3_moe", "olmoe")) != (self.broken == "softmax-side"):
            # softmax over every expert, then the top k
            probs = softmax(h @ w[P + ("router" if mt == "granitemoe" else "gate") + ".weight"].T)
            idx = np.argsort(-probs, -1, kind="stable")[:, :k]
            wts = np.take_along_axis(probs, idx, -1)
            if bool(cfg.get("norm_topk_prob")) != (self.broken == "topk-norm"):
                wts = wts / wts.sum(-1, keepdims=True)
        else:                              # gpt-oss, Granite MoE: softmax over the top k logits
            logits = self.lin(h, P + ("gate" if mt in ("qwen3_moe", "olmoe") else "router"))
            if self.broken == "router-bias":
                logits = logits - w[P + "router.bias"]
            idx = np.argsort(-logits, -1, kind="stable")[:, :k]
            wts = softmax(np.take_along_axis(logits, idx, -1))
        gate_up, down = w[P + "experts.gate_up_proj"], w[P + "experts.down_proj"]
        out = np.zeros_like(h)
        for e in range(gate_up.shape[0]):
            weight = (wts * (idx == e)).sum(-1)            # 0 where the token did not pick e
            rows = np.nonzero(weight)[0]
            if len(rows) == 0:
                continue
            x = h[rows]
            if mt == "gpt_oss":   # (in, out) matrices with biases; gate and up interleaved
                limit = np.inf if self.broken == "clamp" else cfg.get("swiglu_limit", 7.0)
                gu = x @ gate_up[e] + w[P + "experts.gate_up_proj_bias"][e]
                g, u = np.minimum(gu[:, 0::2], limit), np.clip(gu[:, 1::2], -limit, limit)
                y = ((u + 1) * (g / (1 + np.exp(-1.702 * g)))) @ down[e] + w[P + "experts.down_proj_bias"][e]
            else:                 # (out, in) matrices: gate rows, then up rows
                g, u = np.split(x @ gate_up[e].T, 2, -1)
                y = (silu(g) * u) @ down[e].T
            out[rows] += weight[rows, None] * y
        return out

    def mlp(self, h, l):
        if self.mt in MOE:
            return self.moe(h, l)
        P = "model.layers.%d.mlp." % l
        if self.mt == "phi3":
            gu = self.lin(h, P + "gate_up_proj")
            g, u = np.split(gu, 2, -1)
            return self.lin(silu(g) * u, P + "down_proj")
        act = gelu_tanh if self.mt in ("gemma2", "gemma3_text") else silu
        return self.lin(act(self.lin(h, P + "gate_proj")) * self.lin(h, P + "up_proj"), P + "down_proj")

    # -- the pass --

    def forward(self, ids, pos):
        cfg, mt, br = self.cfg, self.mt, self.broken
        pos = np.asarray(pos, dtype=np.int64)
        x = self.w["model.embed_tokens.weight"][np.asarray(ids)]
        if mt in ("gemma2", "gemma3_text"):
            x = x * math.sqrt(self.d)
        granite = mt in ("granite", "granitemoe") and br != "multipliers"
        if granite:
            x = x * cfg["embedding_multiplier"]
        resid = cfg["residual_multiplier"] if granite else 1.0
        once = {}
        for r in self.rotary.values():
            if id(r) not in once:
                once[id(r)] = r.cos_sin(pos)
        cos_sin = {t: once[id(r)] for t, r in self.rotary.items()}
        if self.lab:
            self.kpos = np.concatenate([self.kpos, pos])
            for l in range(self.L):
                if mt not in ("llama", "smollm3", "qwen3"):
                    raise ValueError("the position lab runs pre-norm families (llama, smollm3, qwen3)")
                P = "model.layers.%d." % l
                x = x + self.lab_attention(self.norm(x, P + "input_layernorm"), l, pos)
                x = x + self.mlp(self.norm(x, P + "post_attention_layernorm"), l)
            return self.head(x)
        for l in range(self.L):
            P = "model.layers.%d." % l
            if mt in ("olmo2", "exaone4"):           # post-norm: the norm on the sub-layer's output
                if br == "post-norm":
                    x = x + self.attention(self.norm(x, P + "post_attention_layernorm"), l, pos, cos_sin)
                    x = x + self.mlp(self.norm(x, P + "post_feedforward_layernorm"), l)
                else:
                    x = x + self.norm(self.attention(x, l, pos, cos_sin), P + "post_attention_layernorm")
                    x = x + self.norm(self.mlp(x, l), P + "post_feedforward_layernorm")
            elif mt in ("gemma2", "gemma3_text"):    # sandwich norms
                if br == "post-norm":   # each post-norm moved in front, after the pre-norm
                    h = self.norm(self.norm(x, P + "input_layernorm"), P + "post_attention_layernorm")
                    x = x + self.attention(h, l, pos, cos_sin)
                    h = self.norm(self.norm(x, P + "pre_feedforward_layernorm"), P + "post_feedforward_layernorm")
                    x = x + self.mlp(h, l)
                else:
                    a = self.attention(self.norm(x, P + "input_layernorm"), l, pos, cos_sin)
                    x = x + self.norm(a, P + "post_attention_layernorm")
                    h = self.norm(x, P + "pre_feedforward_layernorm")
                    x = x + self.norm(self.mlp(h, l), P + "post_feedforward_layernorm")
            elif mt == "cohere2" or (mt == "stablelm" and cfg.get("use_parallel_residual")):
                h = self.norm(x, P + "input_layernorm")
                a = self.attention(h, l, pos, cos_sin)
                if br == "parallel":
                    x = x + a
                    x = x + self.mlp(self.norm(x, P + "input_layernorm"), l)
                else:
                    x = x + a + self.mlp(h, l)
            else:
                a = self.attention(self.norm(x, P + "input_layernorm"), l, pos, cos_sin)
                x = x + resid * a
                x = x + resid * self.mlp(self.norm(x, P + "post_attention_layernorm"), l)
        return self.head(x)

    def head(self, x):
        cfg, mt, br = self.cfg, self.mt, self.broken
        granite = mt in ("granite", "granitemoe") and br != "multipliers"
        x = self.norm(x, "model.norm")
        head = self.w.get("lm_head.weight")
        if head is None or cfg.get("tie_word_embeddings"):
            head = self.w["model.embed_tokens.weight"]
        logits = x @ head.T
        if granite:
            logits = logits / cfg["logits_scaling"]
        if mt == "cohere2":
            logits = logits * cfg["logit_scale"]
        cap = cfg.get("final_logit_softcapping")
        if cap and br != "softcap":
            logits = np.tanh(logits / cap) * cap
        return logits


def run(model, ids, pos0=0, mode="chunk"):
    """The logits of every token, fed to `model` as `mode` says."""
    ids = list(ids)
    pos = pos0 + np.arange(len(ids))
    if "group_attention" in model.lab:   # positions follow llama.cpp's edits, call by call
        model.ga_i, n_past, out = 0, pos0, []
        calls = [(t, t + 1) for t in range(len(ids))] if mode == "steps" else \
            [(0, len(ids))] if mode == "chunk" else \
            [(0, int(mode.split(":")[1])), (int(mode.split(":")[1]), len(ids))]
        for a, b in calls:
            n_past = model.group_attention(n_past)
            out.append(model.forward(ids[a:b], n_past + np.arange(b - a)))
            n_past += b - a
        return np.concatenate(out)
    if mode == "chunk":
        return model.forward(ids, pos)
    if mode == "steps":
        return np.concatenate([model.forward(ids[t:t + 1], pos[t:t + 1]) for t in range(len(ids))])
    if mode.startswith("split:"):
        k = int(mode.split(":", 1)[1])
        parts = [(0, k), (k, len(ids))]
        return np.concatenate([model.forward(ids[a:b], pos[a:b]) for a, b in parts if b > a])
    raise ValueError("mode %r is not chunk, steps or split:K" % mode)


def logits(directory, ids, pos0=0, mode="chunk", broken=None, f32=False, seen=None, lab=None):
    """`seen`: the rotary module has already run a call of that seq_len (as
    transformers' does after an earlier, longer forward pass: dynamic NTK keeps
    its grown θ until a call passes it or falls below max_position_embeddings)."""
    model = Model(directory, broken, f32, stateful=seen is not None, lab=lab)
    if seen is not None:
        for r in {id(r): r for r in model.rotary.values()}.values():
            r.for_call([seen - 1])
    return run(model, ids, pos0, mode)


# ---- the check against transformers --------------------------------------------------------------


def golden_runs(directory, g, broken=None, f32=False):
    """hf_golden.py's four runs, in its order, on one model (its rotary state
    carried from one run to the next), each beside transformers' rows."""
    model = Model(directory, broken, f32, stateful=True)
    ids, n = g["ids"], len(g["ids"])

    def fresh():
        model.cache = [None] * model.L

    out = {}
    fresh()
    out["chunk"] = (run(model, ids)[g["chunk_positions"]], g["chunk"])
    fresh()
    out["steps"] = (run(model, ids, mode="steps")[g["chunk_positions"]], g["steps"])
    fresh()
    out["split"] = (run(model, ids, mode="split:%d" % g["split_at"])[g["split_positions"]], g["split"])
    fresh()
    out["offset"] = (run(model, ids, pos0=g["offset"])[g["offset_positions"]], g["offset_chunk"])
    assert n == len(ids)
    return out


def check(cases, f32=False):
    import hf_tiny
    bad = []
    print("%-24s %11s %11s %11s %11s   %s" % ("case", "chunk", "steps", "split", "offset",
                                             "breaks (max |logit change|, all four runs)"))
    for case in cases:
        g = json.load(open(hf_tiny.fixture_path(case)))
        with tempfile.TemporaryDirectory() as d:
            hf_tiny.make(case, d)
            ref = golden_runs(d, g, None, f32)
            diffs = {k: float(np.abs(a - np.asarray(b)).max()) for k, (a, b) in ref.items()}
            effects = []
            for br in Model(d).breaks():
                if br in IDLE_BREAKS.get(case, ()):
                    continue
                alt = golden_runs(d, g, br, f32)
                eff = max(float(np.abs(alt[k][0] - ref[k][0]).max()) for k in ref)
                effects.append("%s %.3g" % (br, eff))
                if eff < 100 * TOLERANCE:
                    bad.append("%s --break %s changes only %.3g" % (case, br, eff))
        print("%-24s %11.3g %11.3g %11.3g %11.3g   %s" % (
            case, diffs["chunk"], diffs["steps"], diffs["split"], diffs["offset"], ", ".join(effects)),
            flush=True)
        for k, v in diffs.items():
            if v > TOLERANCE:
                bad.append("%s %s differs from transformers by %.3g" % (case, k, v))
    for b in bad:
        print("FAIL " + b)
    return 1 if bad else 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    lg = sub.add_parser("logits")
    lg.add_argument("dir")
    lg.add_argument("--ids", required=True)
    lg.add_argument("--pos0", type=int, default=0)
    lg.add_argument("--mode", default="chunk")
    lg.add_argument("--break", dest="broken")
    lg.add_argument("--f32-rope", action="store_true")
    lg.add_argument("--seen", type=int)
    lg.add_argument("--self-extend")
    lg.add_argument("--group-attention")
    lg.add_argument("--attn-temperature")
    lg.add_argument("--chunk", type=int)
    sk = sub.add_parser("sinks")
    sk.add_argument("dir")
    sk.add_argument("--ids", required=True)
    ck = sub.add_parser("check")
    ck.add_argument("cases", nargs="*")
    ck.add_argument("--f32-rope", action="store_true")
    a = ap.parse_args(argv)
    if a.cmd == "check":
        return check(a.cases or list(DENSE + MOE), a.f32_rope)
    if a.cmd == "sinks":
        model = Model(a.dir)
        if model.mt != "gpt_oss":
            print("hf_reference.py: %s has no learned sinks" % model.mt, file=sys.stderr)
            return 2
        ids = [int(t) for t in a.ids.split(",")]
        model.forward(ids, np.arange(len(ids)))
        for l, share in enumerate(model.sink_share):
            for h, row in enumerate(share):
                print(l, h, " ".join("%.9g" % v for v in row))
        return 0
    lab = {}
    if a.self_extend:
        lab["self_extend"] = tuple(int(v) for v in a.self_extend.split(","))
    if a.group_attention:
        lab["group_attention"] = tuple(int(v) for v in a.group_attention.split(","))
    if a.attn_temperature:
        parts = a.attn_temperature.split(",")
        lab["temperature"] = (float(parts[0]), int(parts[1]), parts[2:] == ["llama4"])
    if a.chunk:
        lab["chunk"] = a.chunk
    try:
        out = logits(a.dir, [int(t) for t in a.ids.split(",")], a.pos0, a.mode, a.broken, a.f32_rope,
                     a.seen, lab)
    except ValueError as e:
        print("hf_reference.py: %s" % e, file=sys.stderr)
        return 2
    for row in out:
        print(" ".join("%.9g" % v for v in row))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
