// Drives ./run -m serve with the official `openai` npm client (pinned in
// tests/package.json), a client not written here (tests/cli/test_serve.c).
//
// Usage: node serve_openai.mjs NODE_MODULES ENGINE MODEL TOKENIZER SCRATCH_DIR
//
// One server on stories260K: --slots 2 --queue 1, the llama2 chat template,
// a port the system picks.  Checks, each with its control:
//  - completions with echo + logprobs: the prompt's log-probabilities equal
//    -m ppl --logits-out's for the same text within 1e-5 (control: another
//    text's are far); greedy text equal to -m generate -t 0's byte for byte;
//    a seed twice the same text (control: another seed differs); a stop string;
//  - chat, streamed: the deltas joined equal the whole reply and -m chat -t 0's
//    reply (control: another message differs);
//  - two slots: two streams at once, read interleaved, give what each gives
//    alone, and ran on both slots;
//  - queue overflow: four long requests at once on two slots and a queue of
//    one: three served, one refused with 429 (queue_full);
//  - a client gone mid-stream: the stream ends short of max_tokens in the
//    log, and both slots serve afterwards;
//  - SIGTERM ends the server with exit 0.
// Prints one FAIL line per broken check and exits 1 if any.
import { spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [modules, ENGINE, MODEL, TOKENIZER, SCRATCH] = process.argv.slice(2);
const { default: OpenAI } = await import(pathToFileURL(resolve(modules, "openai/index.mjs")).href);
const BASE = [MODEL, "-z", TOKENIZER];
const failures = [];
function check(ok, what) {
    if (!ok) {
        failures.push(what);
        console.log("FAIL:", what);
    }
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function runEngine(args) {
    const r = spawnSync(ENGINE, [...BASE, ...args], { input: args.stdin ?? "", maxBuffer: 1 << 26 });
    if (r.status !== 0) throw new Error(`${args.join(" ")}: ${r.stderr}`);
    return r.stdout;
}

// --threads 1: two slots on two cores, each forward pass on one (OpenMP's
// teams of two per slot would contend for the cores).  --ctx 1024: room for
// requests long enough to overlap.
const server = spawn(ENGINE, [...BASE, "-m", "serve", "--port", "0", "--ctx", "1024", "--slots", "2",
                              "--queue", "1", "--chat-template", "llama2", "--threads", "1"],
                     { stdio: ["ignore", "ignore", "pipe"] });
const log = [];
let pending = "";
const port = await new Promise((resolve, reject) => {
    server.stderr.setEncoding("utf8");
    server.stderr.on("data", (data) => {
        pending += data;
        const lines = pending.split("\n");
        pending = lines.pop();
        for (const line of lines) {
            log.push(line);
            const m = line.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
            if (m) resolve(Number(m[1]));
        }
    });
    server.on("exit", (code) => reject(new Error(`the server exited (${code}): ${log.join("\n")}`)));
});
const exited = new Promise((resolve) => server.on("exit", (code, signal) => resolve({ code, signal })));
// no retries: a 429 must reach the test, not be retried away
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "none", maxRetries: 0, timeout: 120000 });
const model = basename(MODEL);

/* The log line of the n-th streamed request of this path, once written. */
async function streamLog(path, n) {
    for (let t = 0; t < 600; t++) {
        const lines = log.filter((l) => l.startsWith(`serve: POST ${path} 200`));
        if (lines.length > n) return lines[n];
        await sleep(50);
    }
    return "";
}

try {
    // ---- completions: echo + logprobs against -m ppl --logits-out
    const text = "Once upon a time, there was a cat.";
    const echoed = async (t) => (await client.completions.create({ model, prompt: t, max_tokens: 0, echo: true,
                                                                    logprobs: 1 })).choices[0].logprobs;
    const lp = await echoed(text);
    const n = lp.tokens.length;
    const out = join(SCRATCH, "ppl.jsonl");
    runEngine(["-m", "ppl", "-i", text, "--bos", "--ctx", String(n - 1), "--logits-out", out, "--logits-top", "0"]);
    const ppl = new Map(readFileSync(out, "utf8").trim().split("\n").map(JSON.parse).map((r) => [r.i, r.logprob]));
    check(lp.token_logprobs[0] === null && ppl.size === n - 1, `echo: ${n} tokens, ppl scored ${ppl.size}`);
    let diff = 0;
    for (let i = 1; i < n; i++) diff = Math.max(diff, Math.abs(lp.token_logprobs[i] - ppl.get(i)));
    check(diff <= 1e-5, `echo logprobs vs -m ppl --logits-out: max |diff| ${diff}`);
    console.log(`openai client: echo vs ppl --logits-out, ${n - 1} tokens, max |diff| ${diff.toExponential(2)}`);
    const other = await echoed("The bird flew over the big red house.");
    let far = 0;
    for (let i = 1; i < n && i < other.tokens.length; i++)
        far = Math.max(far, Math.abs(other.token_logprobs[i] - ppl.get(i)));
    check(far > 1e-2, `control: another text's logprobs are within ${far} of this one's`);

    // ---- greedy text, seeds, stop
    const greedy = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 24,
                                                     temperature: 0, echo: true });
    const steps = greedy.usage.prompt_tokens - 1 + greedy.usage.completion_tokens; // BOS is not text
    const want = runEngine(["-t", "0", "-n", String(steps), "-i", "Once upon a time"]).toString();
    check(greedy.choices[0].text + "\n" === want, `greedy: ${JSON.stringify(greedy.choices[0].text)} vs ${JSON.stringify(want)}`);
    const sampled = async (seed) => (await client.completions.create({ model, prompt: "Once upon a time",
                                                                       max_tokens: 32, temperature: 1, seed })).choices[0].text;
    const [a, b, c] = [await sampled(7), await sampled(7), await sampled(8)];
    check(a === b, `seed 7 twice: ${a} vs ${b}`);
    check(a !== c, "control: seed 8 gives seed 7's text");
    const full = greedy.choices[0].text.slice("Once upon a time".length);
    const stop = full.slice(10, 14);
    const cut = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 24, temperature: 0,
                                                  stop: ["@@", stop] });
    check(cut.choices[0].text === full.slice(0, full.indexOf(stop)) && cut.choices[0].finish_reason === "stop",
          `stop ${JSON.stringify(stop)}: ${JSON.stringify(cut.choices[0])}`);

    // ---- chat, streamed, against -m chat
    const chat = async (content, stream) => {
        const request = { model, messages: [{ role: "user", content }], max_tokens: 24, temperature: 0 };
        if (!stream) return (await client.chat.completions.create(request)).choices[0].message.content;
        let joined = "", finish = null, chunks = 0;
        for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
            joined += chunk.choices[0]?.delta?.content ?? "";
            finish = chunk.choices[0]?.finish_reason ?? finish;
            chunks++;
        }
        return { joined, finish, chunks };
    };
    const streamed = await chat("Hello there", true);
    const whole = await chat("Hello there", false);
    const chatMode = runEngine(Object.assign(["-m", "chat", "--chat-template", "llama2", "-t", "0", "-n", "24"],
                                             { stdin: "Hello there\n" })).toString();
    check(streamed.joined === whole && streamed.chunks > 3 && streamed.finish === "length",
          `chat stream ${JSON.stringify(streamed)} vs whole ${JSON.stringify(whole)}`);
    check(whole + "\n" === chatMode, `chat ${JSON.stringify(whole)} vs -m chat's ${JSON.stringify(chatMode)}`);
    check((await chat("Goodbye", false)) !== whole, "control: another message gives the same reply");

    // ---- two slots: two streams at once, read interleaved, equal to each alone.
    // Greedy "Tom and" runs to max_tokens (no end of text) with events large
    // enough (20 top logprobs) to fill the socket: the first stream still
    // runs when the second starts.
    const requests = [{ prompt: "Tom and", temperature: 0, max_tokens: 600 },
                      { prompt: "Once upon a time", seed: 3, temperature: 1, max_tokens: 300 }]
        .map((r) => ({ model, ...r, logprobs: 20, stream: true }));
    const collect = async (stream) => {
        let t = "";
        const lps = [];
        for await (const chunk of stream) {
            t += chunk.choices[0]?.text ?? "";
            lps.push(...(chunk.choices[0]?.logprobs?.token_logprobs ?? []));
        }
        return { t, lps };
    };
    const alone = [];
    for (const r of requests) alone.push(await collect(await client.completions.create(r)));
    const before = log.length;
    const streams = await Promise.all(requests.map((r) => client.completions.create(r)));
    const its = streams.map((s) => s[Symbol.asyncIterator]());
    const together = [{ t: "", lps: [] }, { t: "", lps: [] }];
    for (let live = [true, true]; live.some((x) => x);)
        for (let i = 0; i < 2; i++) {
            if (!live[i]) continue;
            const { value, done } = await its[i].next();
            if (done) live[i] = false;
            else {
                together[i].t += value.choices[0]?.text ?? "";
                together[i].lps.push(...(value.choices[0]?.logprobs?.token_logprobs ?? []));
            }
        }
    for (let i = 0; i < 2; i++) {
        check(together[i].t === alone[i].t, `stream ${i} interleaved: ${JSON.stringify(together[i].t)} vs alone ${JSON.stringify(alone[i].t)}`);
        const d = Math.max(...together[i].lps.map((x, k) => Math.abs(x - alone[i].lps[k])));
        check(together[i].lps.length === alone[i].lps.length && d <= 1e-5,
              `stream ${i}: ${together[i].lps.length} logprobs, max |diff| ${d}`);
    }
    check(alone[0].lps.length === 600, `"Tom and" greedy ended after ${alone[0].lps.length} tokens`);
    check(alone[0].t !== alone[1].t, "control: the two requests give the same text");
    await sleep(200);
    const slots = new Set(log.slice(before).map((l) => l.match(/ slot (\d+) /)?.[1]).filter(Boolean));
    check(slots.size === 2, `the two streams ran on slots ${[...slots]}`);

    // ---- the queue: four long requests at once (greedy "Tom and" to 1000
    // tokens, hundreds of milliseconds each, against milliseconds between
    // their arrivals): two run, one waits, the fourth is refused
    const long = { model, prompt: "Tom and", max_tokens: 1000, temperature: 0, logprobs: 20 };
    const outcomes = await Promise.all([0, 1, 2, 3].map((i) => client.completions.create({ ...long, seed: i })
        .then((r) => r.usage.completion_tokens, (e) => `${e.status} ${e.code}`)));
    check(outcomes.filter((o) => o === "429 queue_full").length === 1 && outcomes.filter((o) => o === 1000).length === 3,
          `four requests on two slots and a queue of one: ${outcomes}`);
    // ---- a client gone mid-stream: the stream ends short of max_tokens, the slots serve again
    const nBefore = log.filter((l) => l.startsWith("serve: POST /v1/completions 200")).length;
    const dropped = await client.completions.create({ ...long, stream: true });
    await dropped[Symbol.asyncIterator]().next();
    dropped.controller.abort();
    const line = await streamLog("/v1/completions", nBefore);
    const generated = Number(line.match(/generated (\d+)/)?.[1] ?? -1);
    check(generated >= 0 && generated < 1000, `the dropped stream's log line: ${line}`);
    const after = await Promise.all([0, 1].map(() => client.completions.create({ model, prompt: "Once", max_tokens: 4 })));
    check(after.every((r) => r.choices[0].text.length > 0), "both slots serve after the dropped stream");
    const health = await fetch(`http://127.0.0.1:${port}/health`);
    check(health.status === 200, "/health after the dropped streams");
} catch (e) {
    check(false, `${e.stack ?? e}`);
} finally {
    server.kill("SIGTERM");
}
const { code } = await exited;
check(code === 0, `SIGTERM: exit ${code}`);
check(log.some((l) => l.startsWith("serve: stopped")), "no 'stopped' line");
if (failures.length) {
    console.error(log.join("\n"));
    process.exit(1);
}
console.log(`openai client: ${log.length} log lines, every check passed`);
