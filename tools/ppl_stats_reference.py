#!/usr/bin/env python3
"""The statistics of `run -m ppl`, recomputed from --logits-out files.

    python3 tools/ppl_stats_reference.py RUN.jsonl [RUN2.jsonl ...] --baseline NAME

Reads the JSON lines `--logits-out` writes (one per scored token: variant,
i, pos, token, logprob, top) and prints, per variant, one JSON object with
the numbers `-m ppl --json` reports, computed independently (Python
standard library, two-pass sums with math.fsum):

  nll, nll_se        mean NLL over the scored tokens and its standard error
                     (sample standard deviation / sqrt(n))
  nll_diff, _se      mean of NLL(variant) - NLL(baseline), token by token
  kl                 mean KL(baseline || variant), nats; needs each "top" list
                     to hold the whole distribution (--logits-top >= vocab),
                     else null
  top1_agree         share of tokens whose first "top" id (the argmax) is the
                     baseline's

Tokens are paired by their index "i"; every variant must have scored the
same tokens.  With several files (e.g. two runs with different --kv-type),
variants are named FILE:VARIANT, so NAME is then e.g. a.jsonl:rope.
"""
import argparse
import json
import math
import sys


def fail(msg):
    sys.exit("error: " + msg)


def load(paths):
    """{variant: {i: (token, logprob, {id: logprob})}}, in order of appearance."""
    variants = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                try:
                    row = json.loads(line)
                except ValueError as e:
                    fail("%s:%d: not JSON (%s)" % (path, n, e))
                name = row["variant"] if len(paths) == 1 else "%s:%s" % (path, row["variant"])
                rows = variants.setdefault(name, {})
                if row["i"] in rows:
                    fail("%s:%d: token %d of %s twice" % (path, n, row["i"], name))
                top = row.get("top", [])
                rows[row["i"]] = (row["token"], row["logprob"], top)
    return variants


def mean_se(xs):
    n = len(xs)
    mean = math.fsum(xs) / n
    if n < 2:
        return mean, 0.0
    var = math.fsum((x - mean) ** 2 for x in xs) / (n - 1)
    return mean, math.sqrt(var / n)


def full_distribution(top):
    """{id: logprob} if the list holds (numerically) all the probability."""
    if abs(math.fsum(math.exp(lp) for _, lp in top) - 1.0) > 1e-6:
        return None
    return {tid: lp for tid, lp in top}


def kl_divergence(p, q):
    """KL(p || q) over p's support, as the engine sums it."""
    total = []
    for tid, lp in p.items():
        prob = math.exp(lp)
        if prob > 0.0:
            total.append(prob * (lp - q[tid]))
    return math.fsum(total)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--baseline", required=True)
    args = ap.parse_args()
    variants = load(args.files)
    if args.baseline not in variants:
        fail("--baseline %s: not among the variants (%s)" % (args.baseline, ", ".join(variants)))
    base = variants[args.baseline]
    keys = sorted(base)
    for name, rows in variants.items():
        if sorted(rows) != keys:
            fail("%s and %s scored different tokens" % (name, args.baseline))
        if any(rows[i][0] != base[i][0] for i in keys):
            fail("%s and %s disagree on which token follows" % (name, args.baseline))
    base_full = [full_distribution(base[i][2]) for i in keys]
    for name, rows in variants.items():
        nll = [-rows[i][1] for i in keys]
        diff = [-rows[i][1] + base[i][1] for i in keys]
        mean, se = mean_se(nll)
        d_mean, d_se = mean_se(diff)
        agree = [1.0 if rows[i][2] and base[i][2] and rows[i][2][0][0] == base[i][2][0][0] else 0.0
                 for i in keys]
        kl = None
        full = [full_distribution(rows[i][2]) for i in keys]
        if all(p is not None for p in base_full) and all(q is not None for q in full):
            kl = math.fsum(kl_divergence(p, q) for p, q in zip(base_full, full)) / len(keys)
        print(json.dumps({"pe": name, "tokens": len(keys), "nll": mean, "nll_se": se,
                          "nll_diff": d_mean, "nll_diff_se": d_se, "kl": kl,
                          "top1_agree": math.fsum(agree) / len(keys)}))


if __name__ == "__main__":
    main()
