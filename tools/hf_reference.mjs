// The reference ids for -m tokenize: Hugging Face's own JavaScript port of the
// tokenizers library (@huggingface/tokenizers, pinned in tests/package.json,
// installed by tools/ensure_npm.sh) encodes each line of a text file.
//
// usage: node tools/hf_reference.mjs DIR TEXT [--special] [--decoded | --precompiled]
//   DIR    holds tokenizer.json (and tokenizer_config.json, when present)
//   TEXT   UTF-8 text; lines end at '\n' ('\r' stays in the line, as -m tokenize reads it)
//   --special  special added tokens in the text become their ids (posenc --special);
//          without it they are text, as the Python library's split_special_tokens=True
//          gives: the special entries leave added_tokens, the others stay.
//   --decoded  prints each line's ids (with or without --special) decoded back to text
//          by the tokenizer's decoder instead, without clean_up_tokenization_spaces
//          (what posenc's decoding must give).
//   --precompiled  prints each line through the file's Precompiled normalizer step alone
//          (the port stands in for the charsmap with its own rules and NFKC: the parity
//          suite compares that with the charsmap's text from spm_normalize).
// Prints one line of space-separated ids per input line; no BOS/EOS.
import { readFileSync, existsSync } from "node:fs";

const here = new URL(".", import.meta.url).pathname;
const modules = process.env.POSENC_NODE_MODULES ?? `${here}../build/npm/node_modules`;
const { Tokenizer } = await import(`${modules}/@huggingface/tokenizers/dist/tokenizers.mjs`);

const [dir, textPath, ...flags] = process.argv.slice(2);
if (!dir || !textPath || new Set(flags).size !== flags.length ||
    flags.some((f) => f !== "--special" && f !== "--decoded" && f !== "--precompiled")) {
    console.error("usage: node tools/hf_reference.mjs DIR TEXT [--special] [--decoded | --precompiled]");
    process.exit(2);
}
const json = JSON.parse(readFileSync(`${dir}/tokenizer.json`, "utf8"));
const configPath = `${dir}/tokenizer_config.json`;
const config = existsSync(configPath) ? JSON.parse(readFileSync(configPath, "utf8")) : {};
if (!flags.includes("--special")) {
    json.added_tokens = json.added_tokens.filter((t) => !t.special);
    delete config.additional_special_tokens;
}
if (flags.includes("--precompiled")) {
    const n = json.normalizer;
    const steps = n?.type === "Sequence" ? n.normalizers : [n];
    json.normalizer = steps.find((step) => step?.type === "Precompiled") ?? null;
}
const tok = new Tokenizer(json, config);
const lines = readFileSync(textPath, "utf8").split("\n");
if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
const ids = lines.map((line) => tok.encode(line, { add_special_tokens: false }).ids);
const out = flags.includes("--precompiled")
    ? lines.map((l) => (tok.normalizer ? tok.normalizer(l) : l))
    : flags.includes("--decoded")
    ? ids.map((l) => (l.length ? tok.decode(l, { clean_up_tokenization_spaces: false }) : ""))
    : ids.map((l) => l.join(" "));
process.stdout.write(out.join("\n") + "\n");
