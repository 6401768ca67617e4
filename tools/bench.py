#!/usr/bin/env python3
"""The benchmark matrix of `make bench` (stdlib only).

    bench.py [--run ./run] [--models DIR] [--threads 2] [--reps 3]
             [--shapes stories15M,stories110M] [--types f32,f16,bf16,q8_0]
             [--llama2c PATH] [--llamacpp-bench PATH] [--llamacpp-ppl PATH]
             [--ppl-text FILE] [--ppl-chunks N] [--tokenizer PATH]

Writes the models with tools/random_model.py (kept in DIR between runs),
measures posenc's `-m bench` (pp512, tg128) on each shape and weight type,
and, in the same run on the same files, the peers whose paths are given:
llama2.c's run (decode of the f32 .bin), llama.cpp's llama-bench (the same
GGUF files) and llama-perplexity (-m ppl against it on the first shape's
f32 GGUF, same context and chunks).  One table; ratios are posenc / peer,
so > 1 means posenc is faster.  Peers are optional: the table says which
were compared.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if p.returncode != 0:
        sys.exit("bench.py: %s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()[-400:]))
    return p


def posenc_bench(a, model):
    p = run([a.run, model, "-m", "bench", "--pp", "512", "--tg", "128", "-r", str(a.reps),
             "--threads", str(a.threads), "--json"])
    return {r["test"]: r for r in map(json.loads, p.stdout.splitlines()) if r}


def llamacpp_bench(a, model):
    p = run([a.llamacpp_bench, "-m", model, "-p", "512", "-n", "128", "-t", str(a.threads),
             "-r", str(a.reps), "-o", "jsonl"])
    out = {}
    for line in p.stdout.splitlines():
        r = json.loads(line)
        test = "pp%d" % r["n_prompt"] if r["n_prompt"] else "tg%d" % r["n_gen"]
        out[test] = (r["avg_ts"], r["stddev_ts"])
    return out


def llama2c_decode(a, binpath, tok):
    """llama2.c prints "achieved tok/s" over the steps after the first."""
    rates = []
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    for _ in range(a.reps):
        p = run([a.llama2c, binpath, "-z", tok, "-n", "129", "-t", "0", "-i", ""], env=env)
        m = re.search(r"achieved tok/s: ([0-9.]+)", p.stdout + p.stderr)
        if not m:
            sys.exit("bench.py: no 'achieved tok/s' in llama2.c's output")
        rates.append(float(m.group(1)))
    return statistics.mean(rates), statistics.stdev(rates) if len(rates) > 1 else 0.0


def timed(cmd, env=None):
    t0 = time.monotonic()
    run(cmd, env=env)
    return time.monotonic() - t0


def fmt(ts):
    return "%.1f ± %.1f" % ts if ts else "-"


def ratio(ours, peer):
    return "%.2fx" % (ours / peer[0]) if peer else "-"


def main(argv):
    ap = argparse.ArgumentParser(prog="bench.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", default="./run")
    ap.add_argument("--models", default="build/bench")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--shapes", default="stories15M,stories110M")
    ap.add_argument("--types", default="f32,f16,bf16,q8_0")
    ap.add_argument("--tokenizer", help="llama2.c tokenizer.bin for the 32000-token shapes")
    ap.add_argument("--llama2c")
    ap.add_argument("--llamacpp-bench")
    ap.add_argument("--llamacpp-ppl")
    ap.add_argument("--ppl-text")
    ap.add_argument("--ppl-chunks", type=int, default=64)
    a = ap.parse_args(argv)
    shapes, types = a.shapes.split(","), a.types.split(",")
    for shape in shapes:
        cmd = [sys.executable, os.path.join(HERE, "random_model.py"), shape, a.models,
               "--formats", ",".join(["bin"] + types)]
        if a.tokenizer:
            cmd += ["--tokenizer", a.tokenizer]
        run(cmd)
    tok = os.path.join(a.models, "tokenizer.bin")
    peers = [p for p, on in (("llama2.c (%s)" % a.llama2c, a.llama2c),
                             ("llama.cpp (%s)" % a.llamacpp_bench, a.llamacpp_bench)) if on]
    print("# posenc %s, %d threads, %d repetitions; compared with: %s" %
          (a.run, a.threads, a.reps, ", ".join(peers) if peers else "no peers (set LLAMA2C, LLAMACPP_BENCH)"))
    print("| model | weights | test | posenc tok/s | of bw | llama2.c tok/s | ratio | llama.cpp tok/s | ratio |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for shape in shapes:
        for t in types:
            gguf = os.path.join(a.models, "%s-%s.gguf" % (shape, t))
            ours = posenc_bench(a, gguf)
            lcpp = llamacpp_bench(a, gguf) if a.llamacpp_bench else {}
            l2c = None
            if a.llama2c and t == "f32":
                l2c = llama2c_decode(a, os.path.join(a.models, shape + ".bin"), tok)
            for test in ("pp512", "tg128"):
                r = ours[test]
                mine = (r["tok_s"], r["tok_s_sd"])
                peer2 = l2c if test == "tg128" else None
                bw = "%.0f%%" % (100 * r["bw_fraction"]) if r["bw_fraction"] else ""
                print("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" %
                      (shape, t, test, fmt(mine), bw, fmt(peer2), ratio(mine[0], peer2),
                       fmt(lcpp.get(test)), ratio(mine[0], lcpp.get(test))))
            sys.stdout.flush()
    if a.ppl_text:
        gguf = os.path.join(a.models, "%s-f32.gguf" % shapes[0])
        ctx = "256"
        ours = timed([a.run, gguf, "-m", "ppl", "-f", a.ppl_text, "--ctx", ctx, "--chunks",
                      str(a.ppl_chunks), "--threads", str(a.threads)])
        peer = None
        if a.llamacpp_ppl and os.access(a.llamacpp_ppl, os.X_OK):
            peer = timed([a.llamacpp_ppl, "-m", gguf, "-f", a.ppl_text, "-c", ctx, "-b", ctx,
                          "--chunks", str(a.ppl_chunks), "-t", str(a.threads)])
        print("\n| model | weights | test | posenc -m ppl | llama-perplexity | ratio |")
        print("|---|---|---|---:|---:|---:|")
        print("| %s | f32 | wikitext-2 test, ctx %s, %d chunks | %.2f s | %s | %s |" %
              (shapes[0], ctx, a.ppl_chunks, ours, "%.2f s" % peer if peer else "-",
               "%.2fx" % (peer / ours) if peer else "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
