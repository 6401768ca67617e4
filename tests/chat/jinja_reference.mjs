// Renders chat templates with @huggingface/jinja, the reference the C
// renderer (chat/jinja_*.c) is compared against.
//
// Usage: node jinja_reference.mjs NODE_MODULES CASES.json
// NODE_MODULES: where tools/ensure_npm.sh installed tests/package.json.
// CASES.json: [{"template": FILE or "package": NPM_NAME, "out": FILE,
//               "messages": [{role, content}], "add_generation_prompt": bool,
//               "bos_token", "eos_token", "date_string" (each optional),
//               "kwargs": {more variables} (optional)}]
// For each case writes the rendering to "out", or "ERROR: message" when the
// template raises; with "package", first writes the package's
// models/tokenizer_config.json chat_template to "template".
import { readFileSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [modulesArg, casesPath] = process.argv.slice(2);
const modules = resolve(modulesArg);   // relative to the working directory, not to this script
const { Template } = await import(pathToFileURL(`${modules}/@huggingface/jinja/dist/index.js`).href);
const cases = JSON.parse(readFileSync(casesPath, "utf8"));
for (const c of cases) {
    if (c.package) {
        const config = JSON.parse(readFileSync(`${modules}/${c.package}/models/tokenizer_config.json`, "utf8"));
        writeFileSync(c.template, config.chat_template);
    }
    const vars = { messages: c.messages, add_generation_prompt: c.add_generation_prompt };
    for (const key of ["bos_token", "eos_token", "date_string"]) if (key in c) vars[key] = c[key];
    if (c.kwargs) Object.assign(vars, c.kwargs);
    let out;
    try {
        out = new Template(readFileSync(c.template, "utf8")).render(vars);
    } catch (e) {
        out = `ERROR: ${e.message}`;
    }
    writeFileSync(c.out, out);
}
