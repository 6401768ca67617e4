"""Drives ./run -m serve over HTTP with Python's urllib (tests/cli/test_serve.c).

Usage: serve_client.py ENGINE MODEL TOKENIZER SCRATCH_DIR

Starts the server on a port the system picks (--port 0; the listening line
names it) and checks: /health, /v1/models, the tokenize/detokenize round
trip, greedy text equal to -m generate -t 0's byte for byte (control:
another prompt differs), echo's log-probabilities equal to -m ppl
--logits-out's within 1e-5 (control: another text's are far), seed
reproducibility (control: another seed differs), stop strings, refusals
(bad JSON 400, 404, 405, a body past the limit 413) after which /health
still answers, and SIGTERM stopping it with exit 0 and its "stopped" line.
A second server, --pe rope,alibi -t 0 -n 7: a request that omits
temperature and max_tokens gets the command line's (7 greedy tokens, the
first server's text; control: the first server, -t 1 by default, samples
otherwise); "pe": "alibi" gives -m ppl --pe alibi --logits-out's
log-probabilities within 1e-5 (control: the default variant, rope, is far);
an unknown variant is a 400 naming 'pe'.
Prints one FAIL line per broken check and exits 1 if any.
"""
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request

ENGINE, MODEL, TOKENIZER, SCRATCH = sys.argv[1:5]
BASE = [ENGINE, MODEL, "-z", TOKENIZER]
MAX_BODY = 8 << 20  # SERVE_MAX_BODY
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what, flush=True)


def start_server(*flags):
    proc = subprocess.Popen(BASE + ["-m", "serve", "--port", "0", "--ctx", "256", *flags],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = []
    port = None
    for line in proc.stderr:
        lines.append(line)
        if "listening on http://127.0.0.1:" in line:
            port = int(line.split("127.0.0.1:")[1].split()[0])
            break
    if port is None:
        proc.wait()
        sys.exit("the server did not start: " + "".join(lines))
    # the log keeps coming: read it so the pipe never fills
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    return proc, port, lines, reader


def call(port, method, path, body=None, raw=None):
    """(status, parsed JSON body)."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def complete(port, **request):
    status, body = call(port, "POST", "/v1/completions", request)
    if status != 200:
        sys.exit(f"completion {request} failed: {status} {body}")
    return body


def run_engine(args):
    return subprocess.run(BASE + args, capture_output=True, check=True).stdout


proc, port, log, reader = start_server()
try:
    status, body = call(port, "GET", "/health")
    check(status == 200 and body == {"status": "ok"}, f"/health: {status} {body}")
    status, body = call(port, "GET", "/v1/models")
    check(status == 200 and body["data"][0]["id"] == os.path.basename(MODEL), f"/v1/models: {body}")

    text = "Once upon a time, there was a cat."
    status, tokens = call(port, "POST", "/tokenize", {"content": text, "add_special": True})
    status2, back = call(port, "POST", "/detokenize", tokens)
    check(status == 200 and status2 == 200 and back["content"] == text,
          f"tokenize/detokenize round trip: {tokens} -> {back}")

    # greedy: the prompt echoed and continued as -m generate -t 0 writes it
    for prompt in ["Once upon a time", "The dog ran"]:
        c = complete(port, prompt=prompt, max_tokens=24, temperature=0, echo=True)
        n_text = c["usage"]["prompt_tokens"] - 1  # BOS is not text
        steps = n_text + c["usage"]["completion_tokens"]
        want = run_engine(["-t", "0", "-n", str(steps), "-i", prompt])
        got = c["choices"][0]["text"].encode()
        check(got + b"\n" == want, f"greedy '{prompt}': {got!r} vs -m generate's {want!r}")
        if prompt == "Once upon a time":
            first = got
        else:
            check(got != first, "control: another prompt gives the same text")
    plain = complete(port, prompt="Once upon a time", max_tokens=24, temperature=0)
    check(first.endswith(plain["choices"][0]["text"].encode()), "without echo: the continuation alone")

    # echo's log-probabilities against -m ppl --logits-out (one window of all tokens)
    def echo_logprobs(t):
        c = complete(port, prompt=t, max_tokens=0, echo=True, logprobs=1)
        return c["choices"][0]["logprobs"]

    lp = echo_logprobs(text)
    n = len(lp["tokens"])
    out = os.path.join(SCRATCH, "ppl.jsonl")
    run_engine(["-m", "ppl", "-i", text, "--bos", "--ctx", str(n - 1), "--logits-out", out,
                "--logits-top", "0"])
    ppl = {row["i"]: row["logprob"] for row in map(json.loads, open(out))}
    check(lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None, "echo: the first token has no logprob")
    check(sorted(ppl) == list(range(1, n)), f"ppl scored {sorted(ppl)}, echo has {n} tokens")
    diff = max(abs(lp["token_logprobs"][i] - ppl[i]) for i in range(1, n))
    check(diff <= 1e-5, f"echo logprobs vs -m ppl --logits-out: max diff {diff}")
    print(f"echo vs ppl --logits-out: {n - 1} tokens, max |diff| {diff:.3g}")
    check(lp["text_offset"][-1] + len(lp["tokens"][-1]) == len(text), f"text_offset: {lp['text_offset']}")
    other = echo_logprobs("The bird flew over the big red house.")
    far = max(abs(a - ppl[i]) for i, a in enumerate(other["token_logprobs"]) if i in ppl)
    check(far > 1e-2, f"control: another text's logprobs are within {far} of this one's")

    # seeds
    def sampled(seed):
        return complete(port, prompt="Once upon a time", max_tokens=32, temperature=1.0, seed=seed)["choices"][0]["text"]

    a, b, c = sampled(7), sampled(7), sampled(8)
    check(a == b, f"seed 7 twice: {a!r} vs {b!r}")
    check(a != c, "control: seed 8 gives seed 7's text")

    # stop strings: the text ends before the first one
    full = plain["choices"][0]["text"]
    stop = full[10:14]
    s = complete(port, prompt="Once upon a time", max_tokens=24, temperature=0, stop=["@@", stop])
    check(s["choices"][0]["text"] == full[:full.index(stop)] and s["choices"][0]["finish_reason"] == "stop",
          f"stop {stop!r}: {s['choices'][0]}")
    check(plain["choices"][0]["finish_reason"] == "length", "max_tokens reached: finish_reason length")

    # refusals, and the server still answers
    status, body = call(port, "POST", "/v1/completions", raw=b'{"prompt": ')
    check(status == 400 and "not JSON" in body["error"]["message"], f"bad JSON: {status} {body}")
    status, body = call(port, "POST", "/v1/completions", {"prompt": "a", "temperature": "hot"})
    check(status == 400 and body["error"]["param"] == "temperature", f"wrong type: {status} {body}")
    status, body = call(port, "GET", "/nope")
    check(status == 404, f"unknown path: {status}")
    status, body = call(port, "GET", "/v1/completions")
    check(status == 405, f"wrong method: {status}")
    status, body = call(port, "POST", "/v1/completions", raw=b" " * (MAX_BODY + 1))
    check(status == 413, f"a body past the limit: {status}")
    status, body = call(port, "GET", "/health")
    check(status == 200, "/health after the refusals")
    greedy7 = complete(port, prompt="Once upon a time", max_tokens=7, temperature=0)["choices"][0]["text"]
    sampled7 = complete(port, prompt="Once upon a time", max_tokens=7, seed=3)["choices"][0]["text"]
finally:
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=60)
    reader.join(timeout=10)

# per-request positional variants, and the command line's sampling defaults
proc2, port2, log2, reader2 = start_server("--pe", "rope,alibi", "-t", "0", "-n", "7")
try:
    d = complete(port2, prompt="Once upon a time", seed=3)
    check(d["choices"][0]["text"] == greedy7 and d["usage"]["completion_tokens"] == 7,
          f"-t 0 -n 7 as defaults: {d['choices'][0]['text']!r} vs greedy {greedy7!r}")
    check(sampled7 != greedy7, "control: the first server's default temperature samples the greedy text")
    status, models = call(port2, "GET", "/v1/models")
    check(models["data"][0]["meta"]["variants"] == ["rope", "alibi"], f"/v1/models: {models}")

    def variant_logprobs(pe):
        c = complete(port2, prompt=text, max_tokens=0, echo=True, logprobs=1, **({"pe": pe} if pe else {}))
        return c["choices"][0]["logprobs"]["token_logprobs"]

    alibi = variant_logprobs("alibi")
    out = os.path.join(SCRATCH, "ppl-alibi.jsonl")
    run_engine(["-m", "ppl", "-i", text, "--bos", "--ctx", str(len(alibi) - 1), "--pe", "alibi",
                "--logits-out", out, "--logits-top", "0"])
    ppl_alibi = {row["i"]: row["logprob"] for row in map(json.loads, open(out))}
    diff = max(abs(alibi[i] - ppl_alibi[i]) for i in range(1, len(alibi)))
    check(diff <= 1e-5, f"'pe': 'alibi' vs -m ppl --pe alibi: max diff {diff}")
    print(f"pe alibi vs ppl --pe alibi --logits-out: {len(alibi) - 1} tokens, max |diff| {diff:.3g}")
    rope = variant_logprobs(None)
    far = max(abs(rope[i] - ppl_alibi[i]) for i in range(1, len(rope)))
    check(far > 1e-2, f"control: the rope variant is within {far} of alibi's")
    status, body = call(port2, "POST", "/v1/completions", {"prompt": "a", "pe": "yarn"})
    check(status == 400 and body["error"]["param"] == "pe" and "rope, alibi" in body["error"]["message"],
          f"unknown variant: {status} {body}")
finally:
    proc2.send_signal(signal.SIGTERM)
    rc2 = proc2.wait(timeout=60)
    reader2.join(timeout=10)
check(rc2 == 0, f"SIGTERM (second server): exit {rc2}")
check(rc == 0, f"SIGTERM: exit {rc}")
check(any(line.startswith("serve: stopped") for line in log), "no 'stopped' line")
check(any("POST /v1/completions 400" in line for line in log), "the refusal is not in the log")
if failures:
    sys.stderr.write("".join(log + log2))
    sys.exit(1)
print(f"serve: {len(log)} log lines, every check passed")
