// llama.cpp's own next-token log-probabilities, the reference tests/model/test_llamacpp.c
// compares posenc's with.  llama.cpp comes from the npm package node-llama-cpp 3.21.1
// (pinned in tests/package.json, installed by tools/ensure_npm.sh) and its prebuilt CPU
// binary @node-llama-cpp/linux-x64 3.21.1: llama.cpp release v0.4.0 of ggml-org/llama.cpp
// (node_modules/node-llama-cpp/llama/llama.cpp.info.json and binariesGithubRelease.json;
// its source, llama/gitRelease.bundle, is one squashed commit of 2026-09-12; the binaries
// are libllama.v0.4.0.so, libggml.v0.4.0.so and one libggml-cpu-<variant>.so chosen for
// the CPU at run time).  The first line on stderr names the release.
//
// usage: node tools/llamacpp_reference.mjs [--top K] [--kv-type f32|f16] GGUF IDS [GGUF IDS ...]
//   GGUF   a model file; IDS its token ids, comma-separated (at least 2; no BOS is added)
//   --top K    after each log-probability, the K most probable next ids as id:logp
//   --kv-type  the KV cache's element type: f32 (default: posenc's default cache, so
//              the comparison is float32 against float32) or f16 (llama.cpp's default,
//              which alone moves log p by up to 8e-3 on tools/arch_reference.py's models)
// For every pair, one line "# GGUF", then for t = 0 .. n-2 one line: the natural-log
// probability the model gives to IDS[t+1] after IDS[0..t] (%.9g), from the full softmax
// of the raw logits.  Several models in one run share one node start and one binary load.
//
// How: getLlama({gpu: false, build: "never", skipDownload: true}) loads the prebuilt CPU
// binary only (never a GPU one, never a download or a build); loadModel on the CPU
// (gpuLayers 0); createContext with one thread, no flash attention and the KV cache type;
// LlamaContextSequence.controlledEvaluate with generateNext: {probabilities: true} at every
// position, one batch.  With the default sampling options (temperature 0: a greedy sampler
// that leaves the logits alone), node-llama-cpp returns softmax(logits) over the whole
// vocabulary at each position (float32, computed by its addon, AddonContext.cpp).
import { resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const modules = resolve(process.env.POSENC_NODE_MODULES ??
                        fileURLToPath(new URL("../build/npm/node_modules", import.meta.url)));
const { getLlama, LlamaLogLevel } =
    await import(pathToFileURL(`${modules}/node-llama-cpp/dist/index.js`).href);

function usage(msg) {
    if (msg) console.error(`llamacpp_reference: ${msg}`);
    console.error("usage: node tools/llamacpp_reference.mjs [--top K] [--kv-type f32|f16] " +
                  "GGUF IDS [GGUF IDS ...]");
    process.exit(2);
}

let top = 0, kvType = "F32";
const args = process.argv.slice(2), jobs = [];
for (let i = 0; i < args.length; i++) {
    if (args[i] === "--top") {
        top = Number(args[++i]);
        if (!Number.isInteger(top) || top < 0) usage("--top needs a count");
    } else if (args[i] === "--kv-type") {
        const t = args[++i];
        if (t !== "f32" && t !== "f16") usage("--kv-type is f32 or f16");
        kvType = t.toUpperCase();
    } else if (args[i].startsWith("--")) {
        usage(`unknown flag ${args[i]}`);
    } else {
        const path = args[i], list = args[++i];
        if (list === undefined) usage(`${path}: no ids`);
        const ids = list.split(",").map(Number);
        if (ids.length < 2 || ids.some((id) => !Number.isInteger(id) || id < 0))
            usage(`${path}: ids must be at least two non-negative integers`);
        jobs.push({ path, ids });
    }
}
if (jobs.length === 0) usage("no model");

// %.9g as C prints it (strtod reads either way; this keeps the lines short)
function g9(x) {
    if (!Number.isFinite(x)) return String(x).replace("Infinity", "inf");
    const s = x.toPrecision(9);
    const [m, e] = s.split("e");
    const mant = m.includes(".") ? m.replace(/0+$/, "").replace(/\.$/, "") : m;
    if (e === undefined) return mant;
    const n = Number(e);
    return `${mant}e${n < 0 ? "-" : "+"}${String(Math.abs(n)).padStart(2, "0")}`;
}

const llama = await getLlama({
    gpu: false,
    build: "never",
    skipDownload: true,
    maxThreads: 1,
    progressLogs: false,
    logLevel: LlamaLogLevel.error,
    logger: (level, message) => process.stderr.write(`llama.cpp ${level}: ${message}\n`),
});
const release = llama.llamaCppRelease;
console.error(`llama.cpp ${release.repo} ${release.release} ` +
              `(${llama.buildType}, gpu: ${llama.gpu})`);

// One model's block of lines (a thrown error names the file).
async function score(path, ids) {
    const model = await llama.loadModel({ modelPath: path, gpuLayers: 0, useMmap: false });
    const context = await model.createContext({
        contextSize: Math.max(ids.length, 16),
        batchSize: ids.length,
        sequences: 1,
        threads: { ideal: 1, min: 1 },
        flashAttention: false,
        experimentalKvCacheKeyType: kvType,
        experimentalKvCacheValueType: kvType,
        failedCreationRemedy: false,
    });
    const sequence = context.getSequence();
    const input = ids.map((id, t) =>
        (t < ids.length - 1 ? [id, { generateNext: { probabilities: true } }] : id));
    const res = await sequence.controlledEvaluate(input); // an id out of range: "Eval has failed"
    const out = [`# ${path}`];
    for (let t = 0; t < ids.length - 1; t++) {
        const probs = res[t]?.next?.probabilities;
        if (!probs) throw new Error(`no probabilities at position ${t}`);
        let line = g9(Math.log(probs.get(ids[t + 1]) ?? 0));
        if (top > 0) {
            let k = 0;
            for (const [id, p] of probs) { // sorted, most probable first
                if (k++ >= top) break;
                line += ` ${id}:${g9(Math.log(p))}`;
            }
        }
        out.push(line);
    }
    await context.dispose();
    await model.dispose();
    return out;
}

const out = [];
for (const { path, ids } of jobs) {
    try {
        out.push(...await score(path, ids));
    } catch (e) {
        console.error(`llamacpp_reference: ${path}: ${e.message}`);
        process.exit(1);
    }
}
await llama.dispose();
process.stdout.write(out.join("\n") + "\n");
