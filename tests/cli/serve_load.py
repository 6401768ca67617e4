"""Concurrency and faults against ./run -m serve (tests/cli/test_serve.c).

Usage: serve_load.py ENGINE MODEL TOKENIZER

One server on stories260K (--slots 2 --queue 16 --threads 1, the llama2 chat
template).  Checks:
 - slowloris: 16 connections that send part of their headers and stop hold
   nothing: everything below is served meanwhile, and the server drops each
   within its 10 s timeout (+5 s of slack for a loaded machine);
 - 8 concurrent clients x 20 requests, mixing completions and chat, whole
   and streamed, echo with logprobs, greedy and seeded: every response
   equals the same request sent alone beforehand (text, finish reason,
   usage; log-probabilities within 1e-5: a request's slot may hold another
   prefix, so its prompt runs in other chunks), a stream's events are JSON
   and end with [DONE]; control: the mix holds different texts, so a
   response given to the wrong client would show;
 - memory is flat: the server's RSS after the concurrent run is within 16 MiB
   of its RSS after the same requests sent alone (every slot's cache and
   scratch is allocated at start; what a request allocates is freed, which
   LeakSanitizer checks under ASan; the slack is glibc's per-thread arenas,
   a thread per connection);
 - a client killed mid-stream (SIGKILL after its first event) ends the
   stream short of max_tokens, and both slots serve afterwards;
 - 1,000 malformed requests from a seeded generator (cut, flipped, wrong
   types, unknown fields, deep nesting, bad UTF-8, huge numbers): each
   answered 2xx or 4xx with JSON (or a stream of JSON events), an error's
   message one line; /health after.
Prints one FAIL line per broken check and exits 1 if any.  Standard library only.
"""
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

ENGINE, MODEL, TOKENIZER = sys.argv[1:4]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what, flush=True)


proc = subprocess.Popen([ENGINE, MODEL, "-z", TOKENIZER, "-m", "serve", "--port", "0", "--ctx", "1024",
                         "--slots", "2", "--queue", "16", "--threads", "1", "--chat-template", "llama2"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
log = []
port = None
for line in proc.stderr:
    log.append(line)
    if "listening on http://127.0.0.1:" in line:
        port = int(line.split("127.0.0.1:")[1].split()[0])
        break
if port is None:
    proc.wait()
    sys.exit("the server did not start: " + "".join(log))
reader = threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True)
reader.start()


def call(path, body=None, raw=None, method="POST"):
    """(status, body bytes)."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def events(body):
    """A stream's events, parsed; None where the stream is malformed."""
    out = []
    parts = body.decode().split("\n\n")
    if parts[-1] != "" or parts[-2] != "data: [DONE]":
        return None
    for p in parts[:-2]:
        if not p.startswith("data: "):
            return None
        out.append(json.loads(p[6:]))
    return out


def content(path, request, status, body):
    """What must not depend on concurrency: (text, finish, usage or None, logprobs)."""
    if status != 200:
        return ("status", status)
    chat = path.endswith("chat/completions")
    if not request.get("stream"):
        c = json.loads(body)["choices"][0]
        lp = c["logprobs"]
        lps = [] if lp is None else (lp["token_logprobs"] if not chat else [t["logprob"] for t in lp["content"]])
        return (c["message"]["content"] if chat else c["text"], c["finish_reason"],
                json.loads(body)["usage"]), lps
    evs = events(body)
    if evs is None:
        return ("malformed stream",)
    text, finish, lps = "", None, []
    for e in evs:
        for c in e["choices"]:
            text += (c["delta"].get("content") or "") if chat else c["text"]
            finish = c["finish_reason"] or finish
            if c.get("logprobs"):
                lps += c["logprobs"]["token_logprobs"] if not chat else [t["logprob"] for t in c["logprobs"]["content"]]
    return (text, finish, None), lps


def rss_kib():
    with open(f"/proc/{proc.pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


# ---- slowloris: connections that never finish their headers
loris = []
for _ in range(16):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-")
    loris.append(s)
loris_since = time.monotonic()

try:
    # ---- 8 clients x 20 requests, each first alone
    rng = random.Random(33)
    prompts = ["Once upon a time", "The little dog", "Tom and", "Lily saw a bird", "One day"]
    mix = []
    for c in range(8):
        for r in range(20):
            k = rng.randrange(6)
            p = rng.choice(prompts)
            if k == 0:
                mix.append(("/v1/completions", {"prompt": p, "max_tokens": 24, "temperature": 0}))
            elif k == 1:
                mix.append(("/v1/completions", {"prompt": p, "max_tokens": 24, "seed": c * 100 + r, "stream": True,
                                                 "logprobs": 2}))
            elif k == 2:
                mix.append(("/v1/completions", {"prompt": p + " " + p, "max_tokens": 0, "echo": True, "logprobs": 3}))
            elif k == 3:
                mix.append(("/v1/chat/completions", {"messages": [{"role": "user", "content": p}], "max_tokens": 20,
                                                      "temperature": 0, "stream": True}))
            elif k == 4:
                mix.append(("/v1/chat/completions", {"messages": [{"role": "user", "content": p}], "max_tokens": 20,
                                                      "seed": r, "logprobs": True, "top_logprobs": 2}))
            else:
                mix.append(("/v1/completions", {"prompt": p, "max_tokens": 16, "seed": r, "echo": True,
                                                 "stream": True, "stop": ["\n", "."]}))
    alone = [content(path, req, *call(path, req)) for path, req in mix]
    rss_alone = rss_kib()
    results = [None] * len(mix)

    def client(c):
        for r in range(20):
            i = c * 20 + r
            path, req = mix[i]
            results[i] = content(path, req, *call(path, req))

    workers = [threading.Thread(target=client, args=(c,)) for c in range(8)]
    t0 = time.monotonic()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    took = time.monotonic() - t0
    rss_after = rss_kib()
    bad = 0
    for i, (a, b) in enumerate(zip(alone, results)):
        same = a[0] == b[0] and len(a[1]) == len(b[1]) and all(
            (x is None and y is None) or (x is not None and y is not None and abs(x - y) <= 1e-5)
            for x, y in zip(a[1], b[1]))
        if not same:
            bad += 1
            if bad <= 3:
                check(False, f"request {i} {mix[i]}: alone {a} vs concurrent {b}")
    check(bad == 0, f"{bad} of {len(mix)} concurrent responses differ from alone")
    check(len({a[0][0] for a in alone}) > 20, "control: the mix's texts are not varied enough to catch a swap")
    check(rss_after - rss_alone <= 16 * 1024, f"RSS grew from {rss_alone} KiB to {rss_after} KiB")
    print(f"8 clients x 20 requests: {took:.1f} s, {len(mix) - bad} equal to alone; RSS {rss_alone} -> {rss_after} KiB")

    # ---- a client killed mid-stream
    client_src = ("import sys, urllib.request\n"
                  "req = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode())\n"
                  "r = urllib.request.urlopen(req)\n"
                  "r.fp.read1(1)\nprint('first', flush=True)\nsys.stdin.read()\n")
    body = json.dumps({"prompt": "Tom and", "max_tokens": 1000, "temperature": 0, "logprobs": 20, "stream": True})
    killed = subprocess.Popen([sys.executable, "-c", client_src, f"http://127.0.0.1:{port}/v1/completions", body],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    check(killed.stdout.readline().strip() == "first", "the killed client never saw an event")
    n_lines = len(log)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    line = ""
    for _ in range(200):
        line = next((ln for ln in log[n_lines:] if "generated" in ln), "")
        if line:
            break
        time.sleep(0.05)
    generated = int(line.split("generated ")[1].split()[0]) if line else -1
    check(0 <= generated < 1000, f"the killed client's stream: {line.strip() or 'no log line'}")
    both = [None, None]

    def one(i):
        both[i] = call("/v1/completions", {"prompt": "Tom and", "max_tokens": 300, "temperature": 0,
                                           "logprobs": 20, "stream": True})[0]

    ts = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    check(both == [200, 200], f"both slots after the killed client: {both}")

    # ---- 1,000 malformed requests
    valid = [req for _, req in mix[:40]]
    junk = [b"", b"{", b"[]", b"null", b"\"x\"", b"{\"prompt\":", b"[" * 5000, b"{\"a\":" * 3000,
            b"\xff\xfe{}", b"{\"prompt\":\"\\ud800\"}", b"{\"prompt\":1e999}", b"{\"messages\":[{}]}"]
    odd_values = [None, True, -1, 1e308, "x" * 300, [], {}, [1] * 50, 2 ** 63, -0.0, "\u0000"]
    answered = 0
    for i in range(1000):
        k = rng.randrange(6)
        path = rng.choice(["/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"])
        if k == 0:
            raw = rng.choice(junk)
        else:
            req = dict(rng.choice(valid))
            if k == 1:
                req[rng.choice(list(req) + ["bogus"])] = rng.choice(odd_values)
            elif k == 2:
                req["max_tokens"] = rng.choice([5000, -3, 1.5, "8"])
            elif k == 3:
                req["messages"] = [{"role": rng.choice(["user", 3, ""]), "content": rng.choice(odd_values)}]
            raw = json.dumps(req).encode()
            if k == 4:
                raw = raw[:rng.randrange(len(raw))]
            elif k == 5:
                b = bytearray(raw)
                for _ in range(3):
                    b[rng.randrange(len(b))] = rng.randrange(256)
                raw = bytes(b)
        status, body = call(path, raw=raw)
        ok = 200 <= status < 300 or 400 <= status < 500
        if ok and body.startswith(b"data: "):
            ok = events(body) is not None
        elif ok:
            try:
                doc = json.loads(body)
                if status >= 400:
                    ok = "\n" not in doc["error"]["message"]
            except (ValueError, KeyError, TypeError):
                ok = False
        if not ok:
            check(False, f"malformed request {i} to {path} ({raw[:80]!r}): {status} {body[:200]!r}")
        answered += ok
    check(answered == 1000, f"{answered} of 1000 malformed requests answered well")
    check(call("/health", method="GET")[0] == 200, "/health after the malformed requests")
    print(f"1000 malformed requests: {answered} answered with JSON, 2xx or 4xx")

    # ---- the slowloris connections were dropped
    dropped = 0
    for s in loris:
        s.settimeout(max(0.1, 15 - (time.monotonic() - loris_since)))
        try:
            dropped += s.recv(1) == b""
        except (socket.timeout, ConnectionResetError):
            dropped += isinstance(sys.exc_info()[1], ConnectionResetError)
        s.close()
    check(dropped == 16, f"{dropped} of 16 slowloris connections dropped within 15 s")
finally:
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=60)
    reader.join(timeout=10)
check(rc == 0, f"SIGTERM: exit {rc}")
if failures:
    sys.stderr.write("".join(log[-40:]))
    sys.exit(1)
print(f"serve load: {len(log)} log lines, every check passed")
