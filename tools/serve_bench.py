"""Throughput of ./run -m serve: generated tokens per second and requests per
second with C concurrent clients, each sending R completions one after the
other, against a server of --slots S (docs/server.md: Throughput); make
bench runs it.

Usage: serve_bench.py ENGINE MODEL TOKENIZER [--slots 1,2] [--clients 1,4,8]
       [--requests 8] [--max-tokens 128] [--threads 1] [--ctx 512]
       [--llama-server PATH --gguf MODEL.gguf]

With --llama-server, llama.cpp's server runs the same requests on the same
weights (--gguf: the model converted by tools/convert.py) with as many
parallel slots (-np), the same context per slot and threads, in the same
run: for each slot and client count the two servers take turns, and the
line gives its tokens/s and the ratio posenc / llama-server.

Every request is the same greedy completion ("Tom and", temperature 0),
which on stories260K runs to max_tokens without an end of text, so every
request generates max_tokens tokens; each client's prompt differs by its
index (a number after the prompt) so the slots' prefix reuse saves only
the shared words.  One line per slot count: slots, clients, requests,
generated tokens, seconds, tokens/s, requests/s, per slot count and client
count.  A ./run built without libmicrohttpd is named and skipped (exit 0).
Standard library only.
"""
import argparse
import json
import subprocess
import sys
import threading
import time
import urllib.request


def start(engine, model, tok, slots, threads, ctx):
    proc = subprocess.Popen([engine, model, "-z", tok, "-m", "serve", "--port", "0", "--slots", str(slots),
                             "--threads", str(threads), "--ctx", str(ctx)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if "listening on http://127.0.0.1:" in line:
            port = int(line.split("127.0.0.1:")[1].split()[0])
            threading.Thread(target=lambda: proc.stderr.read(), daemon=True).start()
            return proc, port
    proc.wait()
    if any("libmicrohttpd-dev" in line for line in lines):
        print("serve_bench: skipped, ./run was built without libmicrohttpd-dev")
        sys.exit(0)
    sys.exit("serve_bench: the server did not start: " + "".join(lines))


def start_llama_server(path, gguf, slots, threads, ctx):
    proc = subprocess.Popen([path, "-m", gguf, "--host", "127.0.0.1", "--port", "0", "-np", str(slots),
                             "-c", str(ctx * slots), "-t", str(threads), "-tb", str(threads),
                             "--no-webui"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in proc.stderr:   # "... server is listening on http://127.0.0.1:PORT"
        lines.append(line)
        if "listening on http://127.0.0.1:" in line:
            port = int(line.split("127.0.0.1:")[1].split()[0].rstrip("/"))
            threading.Thread(target=lambda: proc.stderr.read(), daemon=True).start()
            return proc, port
    proc.wait()
    sys.exit("serve_bench: llama-server did not start: " + "".join(lines[-5:]))


def complete(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        return json.loads(resp.read())["usage"]["completion_tokens"]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("engine")
    ap.add_argument("model")
    ap.add_argument("tokenizer")
    ap.add_argument("--slots", default="1,2")
    ap.add_argument("--clients", default="1,4,8")
    ap.add_argument("--requests", type=int, default=8, help="per client")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1, help="the server's --threads")
    ap.add_argument("--ctx", type=int, default=512, help="the server's --ctx")
    ap.add_argument("--llama-server", help="llama.cpp's llama-server, run beside on --gguf")
    ap.add_argument("--gguf", help="MODEL converted to GGUF, for --llama-server")
    args = ap.parse_args(argv)
    if bool(args.llama_server) != bool(args.gguf):
        ap.error("--llama-server and --gguf go together")
    peer = args.llama_server is not None
    print("slots  clients  requests  tokens  seconds  tokens/s  requests/s" +
          ("  llama-server tokens  tokens/s  ratio" if peer else ""))
    for slots in map(int, args.slots.split(",")):
        servers = [start(args.engine, args.model, args.tokenizer, slots, args.threads, args.ctx)]
        try:
            if peer:
                servers.append(start_llama_server(args.llama_server, args.gguf, slots, args.threads, args.ctx))
            for _, port in servers:
                complete(port, {"prompt": "Tom and", "max_tokens": 4, "temperature": 0})  # warm-up
            for clients in map(int, args.clients.split(",")):
                runs = [measure(port, clients, args) for _, port in servers]
                (tokens, seconds), n = runs[0], clients * args.requests
                line = (f"{slots:5d}  {clients:7d}  {n:8d}  {tokens:6d}  {seconds:7.2f}  "
                        f"{tokens / seconds:8.0f}  {n / seconds:10.1f}")
                if peer:
                    peer_tokens, peer_seconds = runs[1]
                    line += (f"  {peer_tokens:19d}  {peer_tokens / peer_seconds:8.0f}  "
                             f"{(tokens / seconds) / (peer_tokens / peer_seconds):5.2f}x")
                print(line, flush=True)
        finally:
            for proc, _ in servers:
                proc.terminate()
                proc.wait(timeout=60)


def measure(port, clients, args):
    """(generated tokens, seconds) of `clients` clients sending args.requests completions each."""
    counts = [0] * clients

    def client(i):
        for _ in range(args.requests):
            counts[i] += complete(port, {"prompt": f"Tom and {i}", "max_tokens": args.max_tokens,
                                         "temperature": 0})

    workers = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return sum(counts), time.perf_counter() - t0

if __name__ == "__main__":
    main(sys.argv[1:])
