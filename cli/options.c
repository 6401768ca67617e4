/* The option and mode tables, and everything made from them: the parser,
 * the checks of which flags a mode takes, -h and docs/cli.md. */
#include "cli/options.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chat/chat_template.h"
#include "cli/common.h"
#include "cli/modes.h"
#include "model/kvcache.h"
#include "positional/pe.h"

static const ModeSpec modes[] = {
    {"generate", run_generate, "MODEL [-i TEXT | -f FILE] [options]",
     "Continues the prompt (-i, or -f FILE) with sampled tokens; the default mode."},
    {"chat", run_chat, "MODEL -m chat [-y SYSTEM] [--chat-template T] [options]",
     "Turns from stdin, one per line, through the chat template; -i is the first turn and -n "
     "the tokens of each reply."},
    {"ppl", run_ppl, "MODEL [MODEL...] -m ppl -f FILE [--pe A,B,...] [--ctx N[,N...]] [options]",
     "Scores the text of -f under every --pe variant against a baseline: in windows, sliding "
     "windows (--stride) or one stream through the cache (--stream).  Several models or a list "
     "of windows make the extrapolation study."},
    {"bench", run_bench, "MODEL -m bench [--pp LIST] [--tg LIST] [--depth LIST] [options]",
     "Times prefill and decode as llama-bench does; --pe and the positional flags choose the "
     "scheme it runs with."},
    {"tokenize", run_tokenize, "[MODEL] -m tokenize [-z TOKENIZER] (-i TEXT | -f FILE) [--pieces]",
     "Prints the ids (or pieces) of the text; needs no weights: -z, or the model file's own "
     "vocabulary."},
    {"inspect", run_inspect, "MODEL -m inspect [--json] [options]",
     "Shows the configuration that would run, after --pe and the positional flags, with the "
     "per-layer table; a GGUF without tensors is shown as the vocabulary it is."},
    {"pe", run_pe, "MODEL -m pe [--pe A,B,...] [-i TEXT | -f FILE] [options]",
     "The positional scheme of each --pe variant as data: a summary, --json, --svg charts or "
     "an --html page; -i/-f give the RoPE view cached keys to read."},
    {"attention", run_attention, "MODEL -m attention (-i TEXT | -f FILE) [--pe A,B,...] [options]",
     "Where each head attends for the text (at most 1024 tokens) under each --pe variant."},
    {"passkey", run_passkey,
     "MODEL -m passkey [--haystacks FILE | -f FILLER] [--lengths LIST] [--depths LIST] [--pe A,B,...] [options]",
     "Passkey retrieval: a key of digits hidden at a depth of filler text, the question at the "
     "end, the key's tokens scored in the same forward pass.  Per --pe variant, context length "
     "and depth: how many trials retrieve the key exactly, and its mean log-probability "
     "(docs/evaluation.md)."},
    {"serve", run_serve, "MODEL -m serve [--host ADDR] [--port N] [--slots N] [--pe NAME] [--ctx N] [options]",
     "An OpenAI-compatible HTTP server (/v1/completions with logprobs and echo, "
     "/v1/chat/completions through the chat template, streaming, /v1/models, /tokenize, "
     "/detokenize, /health) with --slots contexts, each reusing the common prefix of its last "
     "request, and a bounded queue (docs/server.md).  The sampling flags are the defaults of "
     "requests that omit them.  Needs libmicrohttpd at build time."},
};

#define M_ALL 0x3ffu
#define M_TEXT (MODE_GENERATE | MODE_CHAT)         /* modes that sample text */
#define M_VIEWS (MODE_PE | MODE_ATTENTION)          /* modes that show positions at work */
#define M_SAMPLE (M_TEXT | MODE_SERVE)             /* modes that take sampling flags (serve: defaults for requests) */
#define M_FORWARD (MODE_GENERATE | MODE_PPL | MODE_BENCH | MODE_CHAT | MODE_ATTENTION | MODE_PASSKEY | MODE_SERVE)
#define M_SCHEME (M_FORWARD | MODE_INSPECT | MODE_PE) /* modes that build a positional scheme */

static void parse_windows(Options *o, const OptionSpec *spec, const char *v);
static void parse_stop(Options *o, const OptionSpec *spec, const char *v);
static void parse_threads(Options *o, const OptionSpec *spec, const char *v);

#define SECTION(title) {.section = title}
#define OPTION(name, kind, lo, hi, modes, field, metavar, fallback, help) \
    {name, kind, lo, hi, modes, offsetof(Options, field), metavar, fallback, help, NULL, NULL}
#define OPTION_PARSED(name, kind, lo, hi, modes, field, metavar, fallback, help, parse) \
    {name, kind, lo, hi, modes, offsetof(Options, field), metavar, fallback, help, parse, NULL}

static const OptionSpec options[] = {
    SECTION("general"),
    OPTION("-m", OPT_TEXT, 0, 0, M_ALL, mode, "MODE",
     "generate",
     "the mode: generate | chat | ppl | bench | tokenize | inspect | pe | attention | passkey | serve"),
    OPTION("-z", OPT_TEXT, 0, 0, M_TEXT | MODE_PPL | MODE_TOKENIZE | M_VIEWS | MODE_PASSKEY | MODE_SERVE, tokenizer_path, "PATH",
     "the GGUF's own vocabulary; tokenizer.bin beside a .bin",
     "the tokenizer: llama2.c tokenizer.bin, a SentencePiece .model, a Hugging Face "
     "tokenizer.json (or a directory holding one; tokenizer_config.json beside it "
     "is read too), a GGUF, or a directory (or vocab.json) with GPT-2 vocab.json + "
     "merges.txt"),
    OPTION("-i", OPT_TEXT, 0, 0, M_TEXT | MODE_PPL | MODE_TOKENIZE | M_VIEWS, prompt, "TEXT",
     "empty; tokenize: the lines on stdin",
     "the prompt; chat: the first user turn; ppl, tokenize: the text; pe: a text whose "
     "cached keys the RoPE view reads; attention: the text whose attention is shown"),
    OPTION("-f", OPT_TEXT, 0, 0, MODE_GENERATE | MODE_PPL | MODE_TOKENIZE | M_VIEWS | MODE_PASSKEY, text_file, "FILE",
     NULL,
     "generate: the prompt, read from FILE (one trailing newline dropped, as "
     "llama.cpp's -f); ppl: the text to score; tokenize: text to encode line by "
     "line; pe, attention: as -i; passkey: the filler text; a file or a pipe (-f "
     "/dev/stdin), not a directory"),
    OPTION_PARSED("--threads", OPT_CUSTOM, 1, 1024, M_FORWARD | MODE_INSPECT | MODE_PE, threads, "N",
     "all cores",
     "OpenMP threads; bench: a list 1,2,4 runs every test at each count, as llama-bench's -t",
     parse_threads),
    OPTION("--kv-type", OPT_TEXT, 0, 0, MODE_GENERATE | MODE_PPL | MODE_BENCH | MODE_CHAT | MODE_INSPECT | MODE_PASSKEY | MODE_SERVE, kv_type, "T",
     "f32",
     "KV cache element type: f32 or f16 (half the cache memory and attention "
     "bandwidth)"),
    OPTION("--special", OPT_SWITCH, 0, 0, MODE_GENERATE | MODE_PPL | MODE_TOKENIZE, special, NULL,
     NULL,
     "special (control) tokens written in the text, e.g. <|eot_id|>, become their "
     "ids; byte-level BPE vocabularies only"),
    OPTION("--json", OPT_SWITCH, 0, 0,
           MODE_GENERATE | MODE_PPL | MODE_BENCH | MODE_TOKENIZE | MODE_INSPECT | M_VIEWS | MODE_PASSKEY, json, NULL,
     NULL,
     "machine-readable output on stdout: generate one JSON object per generated "
     "token, then a summary (stdout is JSON only); ppl one per variant; bench one "
     "per test; tokenize one per line of text, its ids and pieces; inspect, pe, "
     "attention one object; passkey one per cell"),
    OPTION("--logits-out", OPT_OUTPUT, 0, 0, MODE_GENERATE | MODE_PPL, logits_out, "FILE",
     NULL,
     "one JSON line per scored or generated token: its log-probability and the most "
     "probable ids (docs/evaluation.md)"),
    OPTION("--logits-top", OPT_INT, 0, INT_MAX, MODE_GENERATE | MODE_PPL, logits_top, "K",
     "10",
     "ids per --logits-out line; at most the vocabulary (0: none)"),

    SECTION("sampling"),
    OPTION("-n", OPT_INT, 0, INT_MAX, M_SAMPLE, steps, "N",
     "256",
     "tokens of text in total, prompt included (a leading BOS is not counted); 0 = "
     "the context size; chat: tokens per reply at most (0: until an end-of-turn "
     "token)"),
    OPTION("-t", OPT_FLOAT, 0, 100, M_SAMPLE, temperature, "F",
     "1.0",
     "temperature; 0 = greedy (so is any temperature small enough that logit/t "
     "overflows, e.g. 1e-38)"),
    OPTION("-p", OPT_FLOAT, 0, 1, M_SAMPLE, topp, "F",
     "0.9",
     "top-p (nucleus); 0 or 1 disables"),
    OPTION("-k", OPT_INT, 0, INT_MAX, M_SAMPLE, topk, "N",
     "0 = off",
     "top-k (applied before top-p)"),
    OPTION("--min-p", OPT_FLOAT, 0, 1, M_SAMPLE, min_p, "F",
     "0 = off",
     "keep only tokens whose probability is at least F x the most probable one's "
     "(after temperature, top-k and top-p)"),
    OPTION("--repeat-penalty", OPT_FLOAT, 0.01, 100, M_SAMPLE, penalties.repeat, "F",
     "1 = off",
     "the logits of the last --repeat-last-n tokens (prompt included) are divided "
     "by F when positive, multiplied by F when negative (llama.cpp's formula)"),
    OPTION("--repeat-last-n", OPT_INT, 0, 1 << 20, M_SAMPLE, penalties.last_n, "N",
     "64",
     "how many recent tokens the penalties look at; 0 disables them"),
    OPTION("--presence-penalty", OPT_FLOAT, -100, 100, M_SAMPLE, penalties.presence, "F",
     "0",
     "subtracted from the logit of every token among the recent ones"),
    OPTION("--frequency-penalty", OPT_FLOAT, -100, 100, M_SAMPLE, penalties.frequency, "F",
     "0",
     "subtracted from a recent token's logit once per occurrence"),
    OPTION("-s", OPT_SEED, 0, (double)LONG_MAX, M_SAMPLE | MODE_PASSKEY, seed, "N",
     "the clock's nanoseconds (so is 0); passkey: 1",
     "random seed; generate prints the one it used; passkey: of the keys and where "
     "the filler starts"),

    SECTION("positions"),
    OPTION("--pe", OPT_TEXT, 0, 0, M_SCHEME, pe_list, "NAME",
     "the checkpoint's",
     "the positional scheme: {schemes}; in ppl, pe and attention a comma list of "
     "variants NAME[:SCALING[:FACTOR]][@SPEC] compared on the same weights (@SPEC "
     "as for --pe-layers); serve: --slots of each, a request names its own (\"pe\")"),
    OPTION("--rope-theta", OPT_FLOAT, 1.0001, 1e12, M_SCHEME, rope_theta, "F",
     "the checkpoint's, else 10000",
     "RoPE base frequency"),
    OPTION("--rope-scaling", OPT_TEXT, 0, 0, M_SCHEME, rope_scaling, "S",
     "the checkpoint's, else none",
     "RoPE frequency scaling: {scalings} (docs/positional.md)"),
    OPTION("--rope-factor", OPT_FLOAT, 1, 1e6, M_SCHEME, rope_factor, "F",
     "the checkpoint's, else 1",
     "the scaling factor"),
    OPTION("--rope-orig-ctx", OPT_INT, 1, 1 << 24, M_SCHEME, rope_orig_ctx, "N",
     "the checkpoint's, else the model's context length",
     "the context before scaling, which yarn, llama3, longrope and dynamic start "
     "from"),
    OPTION("--longrope-rule", OPT_TEXT, 0, 0, M_SCHEME, longrope_rule, "R",
     "sequence",
     "sequence: LongRoPE's long factors for a forward pass whose last position is "
     "past the original context (Hugging Face); context: for a --ctx past it "
     "(llama.cpp)"),
    OPTION("--pe-layers", OPT_TEXT, 0, 0, M_SCHEME & ~MODE_BENCH, pe_layers, "SPEC",
     "the checkpoint's table",
     "per-layer schemes, LAYERS=SCHEME[/LAYERS=SCHEME...]: LAYERS is all, everyN "
     "(the N-th, 2N-th, ... layer), I or I-J, joined by , or +; SCHEME one that "
     "acts in attention (none, rope, alibi, t5)"),
    OPTION("--window", OPT_TEXT, 0, 0, M_SCHEME & ~MODE_BENCH, window, "SPEC",
     "the checkpoint's",
     "sliding windows: W for every layer or LAYERS=W[/...]; 0 = full attention; "
     "wider than --ctx is an error"),
    OPTION("--chunk", OPT_TEXT, 0, 0, M_SCHEME & ~MODE_BENCH, chunk, "SPEC",
     "the checkpoint's, else none",
     "chunked attention (Llama 4's): a query sees only its own chunk of C positions "
     "(chunks start at 0, C, 2C, ...); C for every layer or LAYERS=C[/...]; 0 = none"),
    OPTION("--self-extend", OPT_TEXT, 0, 0, M_SCHEME & ~MODE_BENCH, self_extend, "G,W",
     "none",
     "Self-Extend (Jin et al. 2024) on every rotating layer: keys W or more positions before "
     "the query score at grouped positions (key p/G, query p/G + W - W/G), the nearer ones at "
     "their own, in one softmax; a second store of keys (docs/positional.md)"),
    OPTION("--self-extend-llamacpp", OPT_TEXT, 0, 0, MODE_GENERATE | MODE_PASSKEY, self_extend_llamacpp, "G,W",
     "none",
     "llama.cpp's group attention (--grp-attn-n G --grp-attn-w W): as the context fills, the "
     "cache's positions are divided by G, W at a time (W a multiple of G), in place of context "
     "shifts"),
    OPTION("--attn-temperature", OPT_TEXT, 0, 0, M_SCHEME & ~MODE_BENCH, attn_temperature, "B,L[,llama4]",
     "the checkpoint's (attention.temperature_scale), else none",
     "queries times 1 + B ln(1 + floor(p/L)) on every layer (Mistral 3), or with llama4 "
     "1 + B ln(1 + floor((p+1)/L)) on the layers without position (Llama 4)"),
    OPTION("--sinks", OPT_TEXT, 0, 0, M_SCHEME & ~MODE_BENCH, sinks, "off|LIST",
     "the checkpoint's (gpt-oss's learned sinks)",
     "off: run a model with learned attention sinks without them (each head's sink logit "
     "left out of its softmax); compare --keep N, StreamingLLM's kept cells. ppl: a comma "
     "list of settings compared in one run, a row each: learned, off, keep:N (kept cells, "
     "with --stream), learned+keep:N"),
    OPTION("--alibi-max-bias", OPT_FLOAT, 1e-6, 1e6, M_SCHEME, alibi_max_bias, "F",
     "the checkpoint's, else 8",
     "ALiBi maximum bias, from which the head slopes follow"),
    OPTION("--pe-overflow", OPT_TEXT, 0, 0, M_SCHEME, pe_overflow, "P",
     "error",
     "learned positions past the table: error, or clamp (reuse the last row)"),

    SECTION("the cache"),
    OPTION_PARSED("--ctx", OPT_CUSTOM, 1, 1 << 22, M_TEXT | MODE_PPL | MODE_INSPECT | MODE_PE | MODE_PASSKEY | MODE_SERVE, ctx, "N",
     "the model's trained context; passkey: the longest haystack",
     "KV cache cells; pe: the positions shown (64, or the trained context if "
     "smaller); ppl: the window, or an increasing list of windows 64,128,256 scored "
     "one after another (the extrapolation study)", parse_windows),
    OPTION("--pos-offset", OPT_INT, 0, 1 << 30, MODE_GENERATE | MODE_PPL, pos_offset, "N",
     "0",
     "position of the first token"),
    OPTION("--keep", OPT_INT, 0, 1 << 22, M_TEXT | MODE_PPL, keep, "N",
     "0 (chat: the cells every turn begins with: BOS, the system prompt)",
     "cells a context shift never discards (attention sinks); at most --ctx - 2"),
    OPTION("--no-shift", OPT_SWITCH, 0, 0, M_TEXT | MODE_PPL, no_shift, NULL,
     NULL,
     "stop when the context is full instead of shifting"),
    OPTION("--shift-no-rerotate", OPT_SWITCH, 0, 0, M_TEXT | MODE_PPL, shift_no_rerotate, NULL,
     NULL,
     "shift without making keys agree with their new positions: a deliberate bug, "
     "for demonstration (prints a warning)"),
    OPTION("--trace-positions", OPT_SWITCH, 0, 0, M_TEXT, trace_positions, NULL,
     NULL,
     "one stderr line per prefill and per decoded token (the chunk's positions and "
     "text, the cache's positions as ranges) and one per shift"),
    OPTION("--dump-cache", OPT_SWITCH, 0, 0, M_TEXT, dump_cache, NULL,
     NULL,
     "the cache as a table on stderr (cell, position, token, its text, and for RoPE "
     "the angle of the stored key's first rotation pair) before and after every "
     "context shift and at the end"),

    SECTION("ppl"),
    OPTION("--chunks", OPT_INT, 1, INT_MAX, MODE_PPL, chunks, "N",
     "all windows",
     "score at most N windows"),
    OPTION("--stride", OPT_INT, 1, 1 << 22, MODE_PPL, stride, "S",
     "consecutive windows",
     "sliding windows advancing by S"),
    OPTION("--stream", OPT_SWITCH, 0, 0, MODE_PPL, stream, NULL,
     NULL,
     "one cache of --ctx cells with context shifts instead of windows (--keep, "
     "--no-shift, --shift-no-rerotate apply)"),
    OPTION("--bos", OPT_SWITCH, 0, 0, MODE_PPL, bos, NULL,
     NULL,
     "prepend BOS to the text"),
    OPTION("--baseline", OPT_TEXT, 0, 0, MODE_PPL, baseline, "NAME",
     "the checkpoint's scheme, run too when --pe does not list it",
     "the --pe variant every other is compared with (paired NLL difference, KL, "
     "top-1 agreement)"),
    OPTION("--csv", OPT_OUTPUT, 0, 0, MODE_PPL | MODE_ATTENTION | MODE_PASSKEY, csv_path, "PATH",
     NULL,
     "ppl: per variant and position within the window, mean NLL, count and standard "
     "error (the study: per series and window); attention: every weight of the "
     "selected heads; passkey: every cell"),
    OPTION("--svg", OPT_OUTPUT, 0, 0, MODE_PPL | M_VIEWS | MODE_PASSKEY, svg_path, "PATH",
     NULL,
     "ppl: NLL-vs-position chart of every variant (the study: NLL-vs-window chart "
     "of every model and variant); pe, attention: a prefix, the charts are "
     "PATH-VIEW.svg and PATH-VARIANT-VIEW.svg"),
    OPTION("--html", OPT_OUTPUT, 0, 0, MODE_PPL | M_VIEWS | MODE_PASSKEY, html_path, "FILE",
     NULL,
     "one self-contained HTML page with the run's charts, tables and data: ppl "
     "(one window: the A/B table and the NLL-by-position chart; the study: the "
     "NLL-by-window chart), pe, attention, passkey"),

    SECTION("bench"),
    OPTION("--pp", OPT_TEXT, 0, 0, MODE_BENCH, pp_list, "LIST",
     "512",
     "prefill tests, e.g. 128,512; 0 = none"),
    OPTION("--tg", OPT_TEXT, 0, 0, MODE_BENCH, tg_list, "LIST",
     "128",
     "decode tests, e.g. 128; 0 = none"),
    OPTION("--depth", OPT_TEXT, 0, 0, MODE_BENCH, depth_list, "LIST",
     "0",
     "cached tokens before every test, e.g. 0,1024,4096 (filled once, not measured; "
     "tests named tg128 @ d4096, as llama-bench names them)"),
    OPTION("-r", OPT_INT, 1, 1000, MODE_BENCH, reps, "R",
     "5",
     "measured repetitions per test (after one warm-up)"),

    SECTION("chat"),
    OPTION("-y", OPT_TEXT, 0, 0, MODE_CHAT | MODE_PASSKEY, system_prompt, "TEXT",
     NULL,
     "the system prompt (passkey: with --chat)"),
    OPTION("--chat-template", OPT_TEXT, 0, 0, MODE_CHAT | MODE_PASSKEY | MODE_SERVE, chat_template, "T",
     "the GGUF's tokenizer.chat_template",
     "a built-in format ({templates}) or a Jinja file"),
    OPTION("--chat-template-kwargs", OPT_TEXT, 0, 0, MODE_CHAT | MODE_PASSKEY | MODE_SERVE, chat_template_kwargs, "JSON",
     NULL,
     "more variables for the template, a JSON object as llama.cpp's: e.g. "
     "'{\"enable_thinking\": false}' (Qwen3), or a \"tools\" list"),
    OPTION_PARSED("--stop", OPT_CUSTOM, 0, 0, MODE_CHAT, stops, "STR",
     NULL,
     "end the reply where STR appears (STR is not shown); repeatable, up to 16", parse_stop),

    SECTION("serve"),
    OPTION("--host", OPT_TEXT, 0, 0, MODE_SERVE, host, "ADDR",
     "127.0.0.1",
     "the IPv4 or IPv6 address to listen on; 0.0.0.0 or :: reaches every interface (the API has "
     "no authentication)"),
    OPTION("--port", OPT_INT, 0, 65535, MODE_SERVE, port, "N",
     "8080",
     "the TCP port; 0: one the system picks (the listening line names it)"),
    OPTION("--slots", OPT_INT, 1, 256, MODE_SERVE, slots, "N",
     "1",
     "requests served at once (per --pe variant), each on its own context and KV cache "
     "(docs/server.md: the memory per slot)"),
    OPTION("--queue", OPT_INT, 0, 4096, MODE_SERVE, queue, "N",
     "16",
     "requests that may wait for a free slot; one more is refused with 429"),

    SECTION("attention"),
    OPTION("--layer", OPT_INT, 0, 1 << 20, MODE_ATTENTION, layer, "L",
     "all",
     "the layer whose weights --json, --csv and --svg write and the summary's mass "
     "averages"),
    OPTION("--head", OPT_INT, 0, 1 << 20, MODE_ATTENTION, head, "H",
     "all",
     "the head whose weights --json, --csv and --svg write"),

    SECTION("passkey"),
    OPTION("--haystacks", OPT_TEXT, 0, 0, MODE_PASSKEY, haystacks, "FILE",
     "built from -f and the seed",
     "JSON lines {\"length\", \"depth\", \"trial\", \"prompt\", \"key\"} (as "
     "the retrieval zoo's haystacks.jsonl): each prompt is fed as text, its key "
     "scored after it"),
    OPTION("--lengths", OPT_TEXT, 0, 0, MODE_PASSKEY, lengths, "LIST",
     "the trained context / 4 to x 4, doubling",
     "context lengths in tokens, the key included, e.g. 256,512,1024; with "
     "--haystacks, the file's lengths to score"),
    OPTION("--depths", OPT_TEXT, 0, 0, MODE_PASSKEY, depths, "LIST",
     "10,30,50,70,90",
     "where the key sits, in percent of the filler before it; with --haystacks, "
     "the file's depths to score"),
    OPTION("--trials", OPT_INT, 1, 100000, MODE_PASSKEY, trials, "R",
     "10",
     "haystacks per length and depth, each with its own key and filler"),
    OPTION("--key-digits", OPT_INT, 1, 20, MODE_PASSKEY, key_digits, "N",
     "5",
     "digits of each key"),
    OPTION("--intro", OPT_TEXT, 0, 0, MODE_PASSKEY, intro, "TEXT",
     "the papers' task description",
     "the text before the filler"),
    OPTION("--needle", OPT_TEXT, 0, 0, MODE_PASSKEY, needle, "TEXT",
     "the papers' (The pass key is {key}. Remember it. {key} is the pass key.)",
     "the sentence that hides the key: {key} is replaced by it"),
    OPTION("--question", OPT_TEXT, 0, 0, MODE_PASSKEY, question, "TEXT",
     "What is the pass key? {reply}The pass key is {key}",
     "the end of the prompt; it must end with {key}, where the key is scored; with "
     "--chat, the user's turn ends at {reply} and the reply starts after it"),
    OPTION("--chat", OPT_SWITCH, 0, 0, MODE_PASSKEY, chat, NULL,
     NULL,
     "the prompt as a chat model reads it: the user's turn through the chat template "
     "(the GGUF's, or --chat-template) with its generation prompt, the key in the reply"),

    SECTION("tokenize"),
    OPTION("--pieces", OPT_SWITCH, 0, 0, MODE_TOKENIZE, pieces, NULL,
     NULL,
     "print pieces instead of ids"),
};

const OptionSpec *cli_options(int *n) {
    *n = (int)(sizeof options / sizeof *options);
    return options;
}

const ModeSpec *cli_modes(int *n) {
    *n = (int)(sizeof modes / sizeof *modes);
    return modes;
}

const ModeSpec *cli_mode_named(const char *name) {
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++)
        if (!strcmp(modes[m].name, name)) return &modes[m];
    return NULL;
}

unsigned cli_mode_bit(const char *name) {
    const ModeSpec *m = cli_mode_named(name);
    if (!m) {
        char names[128] = "";
        for (size_t k = 0, at = 0; k < sizeof modes / sizeof *modes; k++)
            at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", k ? "|" : "",
                                   modes[k].name);
        int path = strchr(name, '.') || strchr(name, '/');
        cli_die("-m: unknown mode '%s' (%s)%s", name, names,
                path ? "; the model path goes first: run MODEL -m MODE (llama.cpp's -m is the "
                       "model)"
                     : "");
    }
    return 1u << (m - modes);
}

static const OptionSpec *option_named(const char *name) {
    for (size_t k = 0; k < sizeof options / sizeof *options; k++)
        if (options[k].name && !strcmp(options[k].name, name)) return &options[k];
    return NULL;
}

/* llama.cpp's spellings: one that means the same here is another name of
 * that row; one that means something else, or has no counterpart, is
 * refused with what to write instead.  Its short flags that posenc uses
 * otherwise (-t, -p, -m) are named where their value is refused. */
static const LlamacppSpelling spellings[] = {
    {"--temp", "-t", NULL},
    {"--top-p", "-p", NULL},
    {"--top-k", "-k", NULL},
    {"--seed", "-s", NULL},
    {"-c", "--ctx", NULL},
    {"--ctx-size", "--ctx", NULL},
    {"--file", "-f", NULL},
    {"--prompt", "-i", NULL},
    {"--system-prompt", "-y", NULL},
    {"-sys", "-y", NULL},
    {"--rope-freq-base", "--rope-theta", NULL},
    {"--yarn-orig-ctx", "--rope-orig-ctx", NULL},
    {"--no-context-shift", "--no-shift", NULL},
    {"--reverse-prompt", "--stop", NULL},
    {"-cnv", NULL, "-m chat"},
    {"--conversation", NULL, "-m chat"},
    {"--predict", NULL, "-n N, the whole text's length, prompt included"},
    {"--n-predict", NULL, "-n N, the whole text's length, prompt included"},
    {"--model", NULL, "the model path as the first argument"},
    {"--rope-scale", NULL, "--rope-scaling linear --rope-factor F"},
    {"-ngl", NULL, "none, posenc runs on the CPU"},
    {"--n-gpu-layers", NULL, "none, posenc runs on the CPU"},
    {"--perplexity", NULL, "-m ppl -f FILE"},
    {"--grp-attn-n", NULL, "--self-extend-llamacpp G,W (both in one flag)"},
    {"--grp-attn-w", NULL, "--self-extend-llamacpp G,W (both in one flag)"},
};

const LlamacppSpelling *cli_llamacpp_spellings(int *n) {
    *n = (int)(sizeof spellings / sizeof *spellings);
    return spellings;
}

/* The row a flag names, under its own name or llama.cpp's; an unknown
 * flag exits, saying what to write instead where llama.cpp knows it. */
static const OptionSpec *option_spelled(const char *flag, const char *program) {
    const OptionSpec *s = option_named(flag);
    if (s) return s;
    for (size_t k = 0; k < sizeof spellings / sizeof *spellings; k++) {
        if (strcmp(spellings[k].spelling, flag)) continue;
        if (spellings[k].same_as) return option_named(spellings[k].same_as);
        cli_die("unknown flag '%s' (llama.cpp's; here: %s)", flag, spellings[k].instead);
    }
    cli_die("unknown flag '%s' (see %s -h)", flag, program);
}

/* What llama.cpp means by the short flags posenc gives another meaning. */
static const char *llamacpp_meaning(const char *flag) {
    if (!strcmp(flag, "-p")) return "; the prompt is -i TEXT (llama.cpp's -p)";
    if (!strcmp(flag, "-t")) return "; the thread count is --threads N (llama.cpp's -t)";
    return "";
}

/* ---- names of the registries ---- */

const char *cli_scheme_names(void) {
    static char names[256];
    if (!names[0]) pe_kind_names(names, sizeof names, "|");
    return names;
}

const char *cli_scaling_names(void) {
    static char names[256];
    if (!names[0]) pe_rope_scaling_names(names, sizeof names, "|");
    return names;
}

const char *cli_template_names(void) {
    static char names[256];
    if (!names[0])
        for (int k = 0, at = 0; chat_template_builtin_name(k); k++)
            at += snprintf(names + at, sizeof names - (size_t)at, "%s%s", k ? "|" : "",
                           chat_template_builtin_name(k));
    return names;
}

/* ---- parsing ---- */

long cli_parse_long(const char *flag, const char *s, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        cli_die("%s expects an integer in %ld..%ld, got '%s'%s", flag, lo, hi, s,
                llamacpp_meaning(flag));
    return v;
}

float cli_parse_float(const char *flag, const char *s, float lo, float hi) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        cli_die("%s expects a number in %g..%g, got '%s'%s", flag, (double)lo, (double)hi, s,
                llamacpp_meaning(flag));
    return v;
}

/* A flag's comma list of integers in the spec's range into out (at most
 * max of them, `what` naming them in the errors); their count. */
static int parse_int_list(const OptionSpec *spec, const char *v, int *out, int max, const char *what) {
    const char *flag = spec->name;
    char buf[256];
    if (strlen(v) >= sizeof buf) cli_die("%s: list too long", flag);
    if (!v[0] || v[0] == ',' || v[strlen(v) - 1] == ',' || strstr(v, ",,"))
        cli_die("%s: an empty %s in '%s'", flag, what, v);
    snprintf(buf, sizeof buf, "%s", v);
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == max) cli_die("%s: at most %d %ss", flag, max, what);
        out[n++] = (int)cli_parse_long(flag, t, (long)spec->lo, (long)spec->hi);
    }
    return n;
}

/* --ctx N, or in ppl a list of increasing windows N,N,... */
static void parse_windows(Options *o, const OptionSpec *spec, const char *v) {
    o->n_windows = parse_int_list(spec, v, o->windows, MAX_WINDOWS, "window");
    for (int i = 1; i < o->n_windows; i++)
        if (o->windows[i] <= o->windows[i - 1])
            cli_die("%s: the windows must increase, got %d after %d", spec->name, o->windows[i],
                    o->windows[i - 1]);
    o->ctx = o->windows[0];
}

/* --threads N, or in bench a list N,N,...; o->threads is the largest,
 * with which the engine is set up. */
static void parse_threads(Options *o, const OptionSpec *spec, const char *v) {
    o->n_thread_counts = parse_int_list(spec, v, o->thread_counts, MAX_THREAD_COUNTS, "count");
    o->threads = 0;
    for (int i = 0; i < o->n_thread_counts; i++) {
        for (int j = 0; j < i; j++)
            if (o->thread_counts[j] == o->thread_counts[i])
                cli_die("%s: %d is in the list twice", spec->name, o->thread_counts[i]);
        if (o->thread_counts[i] > o->threads) o->threads = o->thread_counts[i];
    }
}

/* --stop, the one flag that repeats. */
static void parse_stop(Options *o, const OptionSpec *spec, const char *v) {
    if (o->n_stops == MAX_STOPS) cli_die("%s: at most %d stop strings", spec->name, MAX_STOPS);
    if (!v[0]) cli_die("%s: an empty stop string would end every reply at once", spec->name);
    o->stops[o->n_stops++] = v;
}

/* An output path is checked when it is parsed, before any work (a run
 * must not score for minutes and then fail to write): its directory exists
 * and may be written, and the path is no directory. */
static void check_output_path(const char *flag, const char *path) {
    struct stat st;
    if (!path[0]) cli_die("%s: an empty path", flag);
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) cli_die("%s: '%s' is a directory", flag, path);
        if (access(path, W_OK) != 0)
            cli_die("%s: cannot write '%s': %s", flag, path, strerror(errno));
        return;
    }
    const char *slash = strrchr(path, '/');
    char dir[1024];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    if (access(dir, W_OK) != 0)
        cli_die("%s: cannot write '%s': %s (its directory '%s')", flag, path, strerror(errno), dir);
}

static void set_value(Options *o, const OptionSpec *s, const char *v) {
    char *field = (char *)o + s->field;
    switch (s->kind) {
    case OPT_SWITCH: *(int *)field = 1; break;
    case OPT_INT: *(int *)field = (int)cli_parse_long(s->name, v, (long)s->lo, (long)s->hi); break;
    case OPT_FLOAT:
        *(float *)field = cli_parse_float(s->name, v, (float)s->lo, (float)s->hi);
        break;
    case OPT_SEED:
        *(unsigned long long *)field = (unsigned long long)cli_parse_long(s->name, v, (long)s->lo,
                                                                          LONG_MAX);
        break;
    case OPT_TEXT: *(const char **)field = v; break;
    case OPT_OUTPUT:
        check_output_path(s->name, v);
        *(const char **)field = v;
        break;
    case OPT_CUSTOM: s->parse(o, s, v); break;
    }
}

int cli_given(const Options *o, const char *flag) {
    for (int i = 0; i < o->n_given; i++)
        if (!strcmp(o->given[i], flag)) return 1;
    return 0;
}

/* -h after -m MODE (or before it) is that mode's help. */
static void help_and_exit(int argc, char **argv) {
    const ModeSpec *mode = NULL;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "-m")) mode = cli_mode_named(argv[i + 1]);
    cli_write_help(stdout, mode);
    exit(EXIT_SUCCESS);
}

/* Which modes use each flag: a flag given to a mode that does not use it is
 * an error, never silently ignored; so are combinations that say two
 * different things. */
static void check_flags_apply(const Options *o) {
    unsigned mode = cli_mode_bit(o->mode);
    for (int i = 0; i < o->n_given; i++)
        if (!(option_named(o->given[i])->modes & mode))
            cli_die("%s is not used by -m %s", o->given[i], o->mode);
    if (mode == MODE_PPL) {
        const char *window_only[] = {"--chunks", "--stride"};
        const char *stream_only[] = {"--keep", "--no-shift", "--shift-no-rerotate"};
        for (int i = 0; i < 2; i++)
            if (o->stream && cli_given(o, window_only[i]))
                cli_die("%s is not used by -m ppl --stream (it scores the whole text through one "
                        "cache)", window_only[i]);
        for (int i = 0; i < 3; i++)
            if (!o->stream && cli_given(o, stream_only[i]))
                cli_die("%s applies to context shifts: use it with -m ppl --stream",
                        stream_only[i]);
    }
    if (cli_given(o, "-i") && cli_given(o, "-f")) cli_die("-i and -f both give the input text: use one");
    if (o->n_models > 1 && mode != MODE_PPL)
        cli_die("unexpected argument '%s' (one model: only -m ppl compares several models)",
                o->model_paths[1]);
    if (o->n_windows > 1 && mode != MODE_PPL) cli_die("--ctx: a list of windows needs -m ppl");
    if (o->n_thread_counts > 1 && mode != MODE_BENCH)
        cli_die("--threads: a list of counts is for -m bench; give one count");
    if ((o->n_models > 1 || o->n_windows > 1) && o->logits_out)
        cli_die("--logits-out writes one run's tokens: give one model and one --ctx window");
    TensorType kv;
    if (o->kv_type && kv_cache_type_from_name(o->kv_type, &kv))
        cli_die("--kv-type: unknown type '%s' (f32|f16)", o->kv_type);
    if (o->no_shift && o->shift_no_rerotate)
        cli_die("--no-shift and --shift-no-rerotate exclude each other");
    if (o->self_extend && o->self_extend_llamacpp)
        cli_die("--self-extend and --self-extend-llamacpp exclude each other (one is the paper's "
                "Self-Extend, the other llama.cpp's group attention)");
    const char *shift_flags[] = {"--keep", "--no-shift", "--shift-no-rerotate"};
    for (int i = 0; i < 3 && o->self_extend_llamacpp; i++)
        if (cli_given(o, shift_flags[i]))
            cli_die("%s applies to context shifts, and --self-extend-llamacpp replaces them (as "
                    "llama.cpp's group attention does)", shift_flags[i]);
    if (cli_given(o, "-t") && o->temperature >= 2 && o->temperature == (int)o->temperature)
        fprintf(stderr, "warning: -t %d is the temperature (llama.cpp's -t is the thread count: "
                        "--threads %d)\n", (int)o->temperature, (int)o->temperature);
    if (cli_given(o, "--logits-top") && !o->logits_out)
        cli_die("--logits-top sets what --logits-out writes: give --logits-out FILE");
}

/* A numeric flag whose help names a number as its default ("256", "0 =
 * off") starts at that number, so the help text and the value cannot
 * drift apart; the others start at zero, "not given". */
static Options defaults(void) {
    Options o = {0};
    o.mode = "generate";
    o.layer = o.head = -1;
    for (size_t k = 0; k < sizeof options / sizeof *options; k++) {
        const OptionSpec *s = &options[k];
        if ((s->kind != OPT_INT && s->kind != OPT_FLOAT) || !s->fallback ||
            !(s->fallback[0] >= '0' && s->fallback[0] <= '9'))
            continue;
        char first[32];
        snprintf(first, sizeof first, "%.*s", (int)strcspn(s->fallback, " "), s->fallback);
        set_value(&o, s, first);
    }
    return o;
}

Options cli_parse(int argc, char **argv) {
    Options o = defaults();
    int i = 1;
    for (; i < argc && argv[i][0] != '-'; i++) {
        if (o.n_models == MAX_MODELS) cli_die("at most %d models", MAX_MODELS);
        for (int m = 0; m < o.n_models; m++)
            if (!strcmp(o.model_paths[m], argv[i])) cli_die("the model '%s' is given twice", argv[i]);
        o.model_paths[o.n_models++] = argv[i];
    }
    o.model_path = o.model_paths[0];
    for (; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) help_and_exit(argc, argv);
        if (!strcmp(arg, "--version")) {
            printf("posenc %s\n", POSENC_VERSION);
            exit(EXIT_SUCCESS);
        }
        if (arg[0] != '-') cli_die("unexpected argument '%s' (the model path goes first)", arg);
        /* --ctx=64 as --ctx 64, as llama.cpp and getopt_long take it */
        char flag[64];
        const char *eq = arg[1] == '-' ? strchr(arg, '=') : NULL, *value = eq ? eq + 1 : NULL;
        snprintf(flag, sizeof flag, "%.*s", eq ? (int)(eq - arg) : (int)strlen(arg), arg);
        const OptionSpec *s = option_spelled(flag, argv[0]);
        if (s->parse != parse_stop && cli_given(&o, s->name))
            cli_die("%s is given twice", s->name);
        if (!cli_given(&o, s->name)) {
            if (o.n_given == MAX_GIVEN) cli_die("too many flags");
            o.given[o.n_given++] = s->name;
        }
        if (s->kind == OPT_SWITCH) {
            if (value) cli_die("%s takes no value, got '%s'", flag, arg);
            set_value(&o, s, NULL);
            continue;
        }
        if (!value && i + 1 >= argc) cli_die("flag %s needs a value", flag);
        set_value(&o, s, value ? value : argv[++i]);
    }
    check_flags_apply(&o);
    return o;
}

/* ---- help and the reference ---- */

/* The help text with {schemes}, {scalings} and {templates} filled in. */
static const char *expand(const char *help, char *buf, size_t size) {
    const struct { const char *key, *(*names)(void); } keys[] = {
        {"{schemes}", cli_scheme_names}, {"{scalings}", cli_scaling_names},
        {"{templates}", cli_template_names}};
    size_t at = 0;
    buf[0] = '\0';
    while (*help && at + 1 < size) {
        size_t k = 0;
        while (k < sizeof keys / sizeof *keys && strncmp(help, keys[k].key, strlen(keys[k].key)))
            k++;
        if (k < sizeof keys / sizeof *keys) {
            at += (size_t)snprintf(buf + at, size - at, "%s", keys[k].names());
            help += strlen(keys[k].key);
        } else {
            buf[at++] = *help++;
            buf[at] = '\0';
        }
        if (at >= size) at = size - 1;
    }
    return buf;
}

/* `text` from column `indent`, folded at spaces before column 90. */
static void write_folded(FILE *f, const char *text, int column, int indent) {
    const int width = 90;
    while (*text) {
        int room = width - column, len = (int)strlen(text);
        int cut = len;
        if (len > room) {
            cut = room;
            while (cut > 0 && text[cut] != ' ') cut--;
            if (cut == 0) cut = len;
        }
        fprintf(f, "%.*s\n", cut, text);
        text += cut;
        while (*text == ' ') text++;
        if (*text) fprintf(f, "%*s", indent, "");
        column = indent;
    }
}

static void write_option_help(FILE *f, const OptionSpec *s) {
    char head[64], help[512], line[640];
    snprintf(head, sizeof head, "  %s%s%s", s->name, s->metavar ? " " : "",
             s->metavar ? s->metavar : "");
    expand(s->help, help, sizeof help);
    if (s->fallback) snprintf(line, sizeof line, "%s (default: %s)", help, s->fallback);
    else snprintf(line, sizeof line, "%s", help);
    if (strlen(head) > 21) fprintf(f, "%s\n%23s", head, ""); /* the help below a long flag */
    else fprintf(f, "%-23s", head);
    write_folded(f, line, 23, 23);
}

void cli_write_help(FILE *f, const ModeSpec *mode) {
    unsigned bit = mode ? 1u << (mode - modes) : M_ALL;
    size_t n_modes = sizeof modes / sizeof *modes;
    if (mode) {
        fprintf(f, "usage: run %s\n\n", mode->synopsis);
        write_folded(f, mode->help, 0, 0);
    } else {
        for (size_t m = 0; m < n_modes; m++)
            fprintf(f, "%s run %s\n", m ? "      " : "usage:", modes[m].synopsis);
        fputs("\nMODEL is a GGUF file (weights, vocabulary and positional configuration in one)\n"
              "or a llama2.c .bin checkpoint.  `run -m MODE -h` shows one mode's flags.\n\nmodes:\n",
              f);
        for (size_t m = 0; m < n_modes; m++) {
            fprintf(f, "  %-21s", modes[m].name);
            write_folded(f, modes[m].help, 23, 23);
        }
    }
    const char *section = NULL;
    for (size_t k = 0; k < sizeof options / sizeof *options; k++) {
        const OptionSpec *s = &options[k];
        if (!s->name) {
            section = s->section;
            continue;
        }
        if (!(s->modes & bit)) continue;
        if (section) fprintf(f, "\n%s:\n", section);
        section = NULL;
        write_option_help(f, s);
    }
    fputs("\n  -h, --help           this text (after -m MODE: that mode's flags only)\n"
          "  --version            posenc's version\n"
          "A flag the mode does not use is an error.  --ctx=64 is --ctx 64; llama.cpp's\n"
          "spellings (--temp, -c, --top-p, ...) are taken where they mean the same (docs/cli.md).\n",
          f);
}

/* `text` as a Markdown table cell: in code (a flag, a usage line) only the
 * column bar is escaped, in prose also what Markdown would format. */
static void write_markdown_cell(FILE *f, const char *text, int code) {
    if (code) fputc('`', f);
    for (; *text; text++) {
        if (*text == '|' || (!code && strchr("<>*_", *text))) fputc('\\', f);
        fputc(*text, f);
    }
    if (code) fputc('`', f);
}

void cli_write_reference(FILE *f) {
    size_t n_modes = sizeof modes / sizeof *modes;
    fputs("# Command-line reference\n\n"
          "Generated from the tables in `cli/options.c` by `make docs/cli.md`; `make test` checks\n"
          "that it is current.  `./run -h` prints the same, and `./run -m MODE -h` one mode's "
          "part.\nA flag given to a mode that does not use it is an error.\n\n"
          "## Modes\n\n| mode | usage | what it does |\n|---|---|---|\n", f);
    for (size_t m = 0; m < n_modes; m++) {
        char usage[256];
        snprintf(usage, sizeof usage, "run %s", modes[m].synopsis);
        fprintf(f, "| `%s` | ", modes[m].name);
        write_markdown_cell(f, usage, 1);
        fputs(" | ", f);
        write_markdown_cell(f, modes[m].help, 0);
        fputs(" |\n", f);
    }
    for (size_t k = 0; k < sizeof options / sizeof *options; k++) {
        const OptionSpec *s = &options[k];
        if (!s->name) {
            fprintf(f, "\n## %c%s\n\n| flag | modes | default | what it sets |\n|---|---|---|---|\n",
                    s->section[0] - 'a' + 'A', s->section + 1);
            continue;
        }
        char flag[64];
        snprintf(flag, sizeof flag, "%s%s%s", s->name, s->metavar ? " " : "", s->metavar ? s->metavar : "");
        fputs("| ", f);
        write_markdown_cell(f, flag, 1);
        fputs(" | ", f);
        if (s->modes == M_ALL) fputs("all", f);
        else
            for (size_t m = 0, first = 1; m < n_modes; m++)
                if (s->modes & (1u << m)) {
                    fprintf(f, "%s%s", first ? "" : ", ", modes[m].name);
                    first = 0;
                }
        fputs(" | ", f);
        write_markdown_cell(f, s->fallback ? s->fallback : "", 0);
        fputs(" | ", f);
        char help[512];
        write_markdown_cell(f, expand(s->help, help, sizeof help), 0);
        fputs(" |\n", f);
    }
    fputs("\n## llama.cpp's spellings\n\n"
          "Taken as the flag they name where the meaning is the same; refused with what to "
          "write\ninstead where it differs.  `--ctx=64` is `--ctx 64`, for every flag.\n\n"
          "| llama.cpp | here |\n|---|---|\n", f);
    for (size_t k = 0; k < sizeof spellings / sizeof *spellings; k++) {
        fputs("| ", f);
        write_markdown_cell(f, spellings[k].spelling, 1);
        fputs(" | ", f);
        if (spellings[k].same_as) write_markdown_cell(f, spellings[k].same_as, 1);
        else write_markdown_cell(f, spellings[k].instead, 0);
        fputs(" |\n", f);
    }
    fputs("| `-p TEXT` | `-i TEXT` (`-p` is top-p here) |\n"
          "| `-t N` (threads) | `--threads N` (`-t` is the temperature here) |\n"
          "| `-m MODEL` | the model path as the first argument (`-m` is the mode here) |\n", f);
}
