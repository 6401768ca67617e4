#!/usr/bin/env python3
"""The benchmark matrix of `make bench` (stdlib only).

    bench.py [--run ./run] [--baseline-run PATH] [--models DIR] [--threads 2] [--reps 3]
             [--shapes stories15M,stories110M] [--types f32,f16,bf16,q8_0,q4_0,q4_k_m]
             [--family-shapes qwen3-0.6b,gemma3-1b,llama3.2-1b,qwen3-30b-a3b-2l] [--family-types q8_0,q4_k_m]
             [--llama2c PATH] [--llamacpp-bench PATH ...] [--llamacpp-ppl PATH]
             [--ppl-text FILE] [--ppl-chunks N] [--tokenizer PATH]
             [--depths 1024,4096] [--depth-shape stories110M] [--llamacpp-batched PATH]

Writes the models with tools/random_model.py (kept in DIR between runs;
the block-quantized types, e.g. q4_0 and the q4_k_m mix, with
tools/quantize.py from the f32 GGUF),
measures posenc's `-m bench` (pp512, tg128) on each shape and weight type
(prefill's share of the probed FMA peak, decode's of the probed bandwidth),
and on today's families at their releases' shapes (--family-shapes, random
weights written by random_model.py as Hugging Face checkpoints and converted
with convert.py; --family-types of each),
then pp512 of every weight type of --depth-shape against its f32 (the
types taking turns within each round, so their ratio is not the machine's
drift between rows minutes apart), then the same tests at each of
--depths cached tokens on --depth-shape
(f32 weights, f16 cache: llama-bench -d beside it when it has -d, else
llama-batched-bench's decode after a prompt of that many tokens, --llamacpp-batched),
and, in the same run on the same files, the peers whose paths are given:
llama2.c's run (decode of the f32 .bin), llama.cpp's llama-bench (the same
GGUF files; --llamacpp-bench may be given for several builds, e.g. c392e50
and today's, each its own column named by its build commit, a file it
cannot load shown as "-"; the depth table takes the first) and llama-perplexity (-m ppl against it on the first shape's
f32 GGUF, same context and chunks).  One table; ratios are posenc / peer,
so > 1 means posenc is faster.  Peers are optional: the table says which
were compared.  --baseline-run adds another posenc build (the commit before
a change) as one more engine in the same rounds.  --threads may be a list
(1,2,4): the main table then has a row per count; the others run at the
last.

The machines this runs on are shared and their speed drifts by 2-3x over
minutes, so the engines take turns: each of --reps rounds runs every
engine once (one measured repetition after its own warm-up), in an order
that rotates from round to round.  tok/s is mean +- sd over rounds; a
ratio is the median over rounds of posenc / peer within the round.
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
WRITTEN_BY_CONVERT = ("f32", "f16", "bf16", "q8_0")  # the others: quantize.py


def run(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if p.returncode != 0:
        sys.exit("bench.py: %s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()[-400:]))
    return p


def posenc_bench(a, model, depths=None, tg=128, threads=None, run_path=None):
    """{test: (tok/s, fraction of the bandwidth (tg) or FMA peak (pp) probed beside it)};
    tg=0: prefill alone."""
    cmd = [run_path or a.run, model, "-m", "bench", "--pp", "512", "--tg", str(tg), "-r", "1",
           "--threads", str(threads or a.threads), "--json"]
    if depths:
        cmd += ["--depth", ",".join(map(str, [0] + depths)), "--kv-type", "f16"]
    p = run(cmd)
    return {r["test"]: (r["tok_s"], r["bw_fraction"] if r["n_gen"] else r["flops_fraction"])
            for r in map(json.loads, p.stdout.splitlines()) if r}


def llamacpp_has_depth(a):
    p = subprocess.run([a.llamacpp_bench[0], "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return "--n-depth" in p.stdout


def llamacpp_bench(a, model, depths=None, path=None, threads=None):
    """{test: tok/s}; None when this llama-bench cannot load the model (an
    architecture newer than its build)."""
    cmd = [path or a.llamacpp_bench[0], "-m", model, "-p", "512", "-n", "128", "-t", str(threads or a.threads),
           "-r", "1", "-o", "jsonl"]
    if depths:
        cmd += ["-d", ",".join(map(str, [0] + depths)), "-ctk", "f16", "-ctv", "f16"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        if "unknown model architecture" in p.stderr:
            return None
        sys.exit("bench.py: %s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()[-400:]))
    out = {}
    for line in p.stdout.splitlines():
        r = json.loads(line)
        test = "pp%d" % r["n_prompt"] if r["n_prompt"] else "tg%d" % r["n_gen"]
        if r.get("n_depth"):
            test += " @ d%d" % r["n_depth"]
        out[test] = r["avg_ts"]
    return out


def llamacpp_batched(a, model, depths):
    """Decode after a prompt of d tokens (its S_TG), for a llama-bench without -d:
    {"tg128 @ dD": tok/s}."""
    cmd = [a.llamacpp_batched, "-m", model, "-c", str(max(depths) + 192), "-b", "2048", "-ub", "512",
           "-npp", ",".join(map(str, depths)), "-ntg", "128", "-npl", "1", "-t", str(a.threads)]
    out = {}
    for line in run(cmd).stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 10 and cells[0].isdigit():
            out["tg%s @ d%s" % (cells[1], cells[0])] = float(cells[7])
    return out


def llamacpp_commit(a, path, model):
    """The build commit a llama-bench reports, to name its column."""
    cmd = [path, "-m", model, "-p", "8", "-n", "0", "-t", str(a.threads), "-r", "1", "-o", "jsonl"]
    line = run(cmd).stdout.splitlines()[0]
    return json.loads(line).get("build_commit", "?")


def make_models(a, shapes, types, family):
    """The llama2.c shapes' f32/f16/bf16/q8_0 files come from convert.py; the
    families' (a billion weights) from quantize.py's NumPy, q8_0 included."""
    written = [] if family else [t for t in types if t in WRITTEN_BY_CONVERT]
    for shape in shapes:
        formats = ["f32"] + written if family else ["bin", "f32"] + written
        cmd = [sys.executable, os.path.join(HERE, "random_model.py"), shape, a.models,
               "--formats", ",".join(formats)]
        if a.tokenizer and not family:
            cmd += ["--tokenizer", a.tokenizer]
        run(cmd)
        for t in types:
            if t in written:
                continue
            out = os.path.join(a.models, "%s-%s.gguf" % (shape, t))
            if not os.path.exists(out):
                run([sys.executable, os.path.join(HERE, "quantize.py"),
                     os.path.join(a.models, "%s-f32.gguf" % shape), out + ".part", t])
                os.replace(out + ".part", out)


def llama2c_decode(a, binpath, tok, threads):
    """llama2.c prints "achieved tok/s" over the steps after the first."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    p = run([a.llama2c, binpath, "-z", tok, "-n", "129", "-t", "0", "-i", ""], env=env)
    m = re.search(r"achieved tok/s: ([0-9.]+)", p.stdout + p.stderr)
    if not m:
        sys.exit("bench.py: no 'achieved tok/s' in llama2.c's output")
    return {"tg128": float(m.group(1))}


def rounds(a, engines):
    """engines: {name: () -> {test: value}}; returns {name: [result per round]}."""
    names = list(engines)
    out = {n: [] for n in names}
    for r in range(a.reps):
        for i in range(len(names)):
            n = names[(r + i) % len(names)]
            out[n].append(engines[n]())
    return out


def timed(cmd, env=None):
    t0 = time.monotonic()
    run(cmd, env=env)
    return time.monotonic() - t0


def fmt(values):
    if not values:
        return "-"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return "%.1f ± %.1f" % (statistics.mean(values), sd)


def ratio(ours, peer):
    if not peer:
        return "-"
    return "%.2fx" % statistics.median(o / p for o, p in zip(ours, peer))


def main(argv):
    ap = argparse.ArgumentParser(prog="bench.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", default="./run")
    ap.add_argument("--baseline-run", help="another posenc build, compared in the same rounds")
    ap.add_argument("--models", default="build/bench")
    ap.add_argument("--threads", default="2", help="a count, or a list 1,2,4 (the main table)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--shapes", default="stories15M,stories110M")
    ap.add_argument("--types", default="f32,f16,bf16,q8_0,q4_0,q4_k_m")
    ap.add_argument("--family-shapes", default="qwen3-0.6b,gemma3-1b,llama3.2-1b,qwen3-30b-a3b-2l",
                    help="today's families at their releases' shapes, a mixture of experts "
                         "among them ('': none)")
    ap.add_argument("--family-types", default="q8_0,q4_k_m")
    ap.add_argument("--tokenizer", help="llama2.c tokenizer.bin for the 32000-token shapes")
    ap.add_argument("--llama2c")
    ap.add_argument("--llamacpp-bench", action="append", default=[],
                    help="a llama-bench; repeat for several llama.cpp builds")
    ap.add_argument("--llamacpp-ppl")
    ap.add_argument("--ppl-text")
    ap.add_argument("--ppl-chunks", type=int, default=64)
    ap.add_argument("--depths", default="1024,4096", help="cached tokens for the depth table ('' : none)")
    ap.add_argument("--depth-shape", default="stories110M")
    ap.add_argument("--llamacpp-batched", help="llama-batched-bench, for decode at depth without llama-bench -d")
    a = ap.parse_args(argv)
    try:
        thread_counts = [int(t) for t in a.threads.split(",")]
    except ValueError:
        sys.exit("bench.py: --threads expects a count or a list 1,2,4, got '%s'" % a.threads)
    a.threads = thread_counts[-1]
    shapes, types = a.shapes.split(","), a.types.split(",")
    family_shapes = [s for s in a.family_shapes.split(",") if s]
    family_types = a.family_types.split(",")
    make_models(a, shapes, types, family=False)
    make_models(a, family_shapes, family_types, family=True)
    tok = os.path.join(a.models, "tokenizer.bin")
    first = os.path.join(a.models, "%s-%s.gguf" % (shapes[0], types[0]))
    lcpp_names = ["llama.cpp %s" % llamacpp_commit(a, p, first) for p in a.llamacpp_bench]
    peers = ["llama2.c (%s)" % a.llama2c] if a.llama2c else []
    peers += ["%s (%s)" % (n, p) for n, p in zip(lcpp_names, a.llamacpp_bench)]
    print("# posenc %s, threads %s, %d rounds (engines take turns; ratio = median of per-round ratios); compared with: %s" %
          (a.run, ",".join(map(str, thread_counts)), a.reps, ", ".join(peers) if peers else "no peers (set LLAMA2C, LLAMACPP_BENCH)"))
    base_cols = " posenc %s tok/s | ratio |" % a.baseline_run if a.baseline_run else ""
    print("| model | weights | threads | test | posenc tok/s | of bw / peak |%s llama2.c tok/s | ratio |" % base_cols +
          "".join(" %s tok/s | ratio |" % n for n in lcpp_names))
    print("|---|---|---:|---|---:|---:|" + "---:|---:|" * (len(lcpp_names) + 1 + bool(a.baseline_run)))
    for shape, t, th in [(s, t, th) for s in shapes for t in types for th in thread_counts] + \
            [(s, t, th) for s in family_shapes for t in family_types for th in thread_counts]:
        gguf = os.path.join(a.models, "%s-%s.gguf" % (shape, t))
        engines = {"posenc": lambda: posenc_bench(a, gguf, threads=th)}
        if a.baseline_run:
            engines["baseline"] = lambda: posenc_bench(a, gguf, threads=th, run_path=a.baseline_run)
        for n, p in zip(lcpp_names, a.llamacpp_bench):
            engines[n] = lambda p=p: llamacpp_bench(a, gguf, path=p, threads=th)
        if a.llama2c and t == "f32" and shape in shapes:
            binpath = os.path.join(a.models, shape + ".bin")
            engines["llama2.c"] = lambda: llama2c_decode(a, binpath, tok, th)
        res = rounds(a, engines)
        for test in ("pp512", "tg128"):
            mine = [r[test][0] for r in res["posenc"]]
            bw = "%.0f%%" % (100 * statistics.mean(r[test][1] for r in res["posenc"]))
            l2c = [r[test] for r in res.get("llama2.c", []) if test in r]
            cells = ""
            if a.baseline_run:
                base = [r[test][0] for r in res["baseline"]]
                cells += " %s | %s |" % (fmt(base), ratio(mine, base))
            cells += " %s | %s |" % (fmt(l2c), ratio(mine, l2c))
            for n in lcpp_names:
                lcpp = [r[test] for r in res[n] if r is not None]
                cells += " %s | %s |" % (fmt(lcpp) if lcpp else "does not load", ratio(mine, lcpp))
            print("| %s | %s | %d | %s | %s | %s |%s" % (shape, t, th, test, fmt(mine), bw, cells))
        sys.stdout.flush()
    if a.depth_shape in shapes and "f32" in types and len(types) > 1:
        models = {t: os.path.join(a.models, "%s-%s.gguf" % (a.depth_shape, t)) for t in types}
        res = rounds(a, {t: (lambda m=m: posenc_bench(a, m, tg=0)["pp512"][0]) for t, m in models.items()})
        print("\n%s, pp512 of each weight type against f32, the types taking turns in each round" % a.depth_shape)
        print("| weights | posenc pp512 tok/s | of f32 (median of per-round ratios) |")
        print("|---|---:|---:|")
        for t in types:
            print("| %s | %s | %s |" % (t, fmt(res[t]), ratio(res[t], res["f32"])))
        sys.stdout.flush()
    depths = [int(d) for d in a.depths.split(",") if d]
    if depths and a.depth_shape in shapes:
        gguf = os.path.join(a.models, "%s-f32.gguf" % a.depth_shape)
        engines = {"posenc": lambda: posenc_bench(a, gguf, depths)}
        peer_depth = a.llamacpp_bench and llamacpp_has_depth(a)
        if peer_depth:
            engines["llama.cpp"] = lambda: llamacpp_bench(a, gguf, depths)
        elif a.llamacpp_batched:
            engines["llama.cpp"] = lambda: llamacpp_batched(a, gguf, depths)
        res = rounds(a, engines)
        print("\n%s, f32 weights, f16 KV cache, after N cached tokens%s" %
              (a.depth_shape, "" if peer_depth or not (a.llamacpp_bench or a.llamacpp_batched) else
               " (llama.cpp: llama-batched-bench's decode after a prompt of N tokens; its prefill"
               " starts from an empty cache, so no peer for pp at depth)" if a.llamacpp_batched else
               " (this llama-bench has no -d: no peer column)"))
        print("| test | posenc tok/s | of bw / peak | of depth 0 | llama.cpp tok/s | ratio |")
        print("|---|---:|---:|---:|---:|---:|")
        for base in ("pp512", "tg128"):
            zero = [r[base][0] for r in res["posenc"]]
            for d in depths:
                test = "%s @ d%d" % (base, d)
                mine = [r[test][0] for r in res["posenc"]]
                frac = "%.0f%%" % (100 * statistics.mean(r[test][1] for r in res["posenc"]))
                lcpp = [r[test] for r in res.get("llama.cpp", []) if test in r]
                print("| %s | %s | %s | %.0f%% | %s | %s |" %
                      (test, fmt(mine), frac, 100 * statistics.median(m / z for m, z in zip(mine, zero)),
                       fmt(lcpp), ratio(mine, lcpp)))
        sys.stdout.flush()
    if a.ppl_text:
        gguf = os.path.join(a.models, "%s-f32.gguf" % shapes[0])
        ctx, chunks = "256", str(a.ppl_chunks)
        engines = {"posenc": lambda: timed([a.run, gguf, "-m", "ppl", "-f", a.ppl_text, "--ctx", ctx,
                                            "--chunks", chunks, "--threads", str(a.threads)])}
        if a.llamacpp_ppl and os.access(a.llamacpp_ppl, os.X_OK):
            engines["llama.cpp"] = lambda: timed([a.llamacpp_ppl, "-m", gguf, "-f", a.ppl_text, "-c", ctx,
                                                  "-b", ctx, "--chunks", chunks, "-t", str(a.threads)])
        res = rounds(a, engines)
        ours, peer = res["posenc"], res.get("llama.cpp", [])
        print("\n| model | weights | test | posenc -m ppl | llama-perplexity | ratio |")
        print("|---|---|---|---:|---:|---:|")
        print("| %s | f32 | wikitext-2 test, ctx %s, %s chunks, whole run (load, tokenize, score) | %s s | %s | %s |" %
              (shapes[0], ctx, chunks, fmt(ours), fmt(peer) + " s" if peer else "-",
               # a time: the peer's over ours, so > 1 still means posenc is faster
               ratio(peer, ours) if peer else "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
