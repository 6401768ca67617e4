/* -m generate, the default mode. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/json.h"
#include "cli/common.h"
#include "cli/modes.h"
#include "modes/generate.h"
#include "modes/perplexity.h"

/* Both streams reach the same file or terminal (e.g. `2>&1`, or a shell
 * on a tty). */
static int same_destination(FILE *a, FILE *b) {
    struct stat sa, sb;
    return fstat(fileno(a), &sa) == 0 && fstat(fileno(b), &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* Rates in tok/s beside the token counts they come from: a 5-token prompt's
 * rate is mostly fixed cost, and says so by its count. */
static void print_generate_summary(const GenerateStats *st, double load_s,
                                   unsigned long long seed) {
    fprintf(stderr, "load %.0f ms; prompt %d tokens in %.1f ms (%.0f tok/s); first token after "
                    "%.1f ms; %d tokens generated in %.1f ms (%.1f tok/s); seed %llu\n",
            1e3 * load_s, st->n_prompt, 1e3 * st->prefill_s, st->n_prompt / st->prefill_s,
            1e3 * st->first_token_s, st->n_generated, 1e3 * st->decode_s,
            st->n_generated / st->decode_s, seed);
}

/* What generate reports per token besides the text: --json objects on
 * stdout and --logits-out lines. */
typedef struct {
    int json, vocab;
    LogprobWriter *logprobs;  /* out NULL: none */
    const char *label;        /* the positional scheme, as --logits-out names variants */
    int n_steps;
    double logprob_sum;
} StepReport;

static void report_generate_step(const GenerateStep *s, void *user) {
    StepReport *r = user;
    double logprob = -ppl_token_nll(s->logits, r->vocab, s->token);
    r->n_steps++;
    r->logprob_sum += logprob;
    if (r->json) {
        printf("{\"type\":\"token\",\"step\":%d,\"token\":%d,\"piece\":", s->step, s->token);
        json_write_string(stdout, s->piece, s->piece_len);
        printf(",\"pos\":%d,\"logprob\":%.9g}\n", s->pos, logprob);
        fflush(stdout);
    }
    if (r->logprobs->out)
        logprob_writer_row(r->logprobs, r->label, s->step, s->pos, s->logits, s->token);
}

/* --json's last object: the whole text (without the newline generate
 * ends it with) and the mean log-probability of the generated tokens. */
static void print_json_summary(const StepReport *r, const char *text, size_t len,
                               unsigned long long seed) {
    if (len > 0 && text[len - 1] == '\n') len--;
    printf("{\"type\":\"summary\",\"generated\":%d,\"seed\":%llu,\"mean_logprob\":", r->n_steps,
           seed);
    if (r->n_steps) printf("%.9g", r->logprob_sum / r->n_steps);
    else fputs("null", stdout);
    fputs(",\"text\":", stdout);
    json_write_string(stdout, text, len);
    fputs("}\n", stdout);
}

/* The prompt's problems name its flag (-i or -f): generate_text would find
 * them too, but not which flag to change. */
static void check_prompt(const char *prompt, const char *flag, const Tokenizer *tok) {
    int *ids, n_ids;
    PosencError err;
    if (generate_encode_prompt(tok, prompt, &ids, &n_ids, &err)) cli_die("%s: %s", flag, err.msg);
    free(ids);
}

int run_generate(const Options *o) {
    Setup s;
    setup_open(&s, o, SETUP_TOKENIZER | SETUP_VARIANTS);
    const PeParams pe = s.v.params[0];
    const char *label = s.v.labels[0];
    int n_ctx = s.n_ctx, vocab = s.model.config.vocab_size;
    check_keep(o, n_ctx);
    ContextShiftMode shift = shift_mode(o);
    int span = o->steps > 0 && o->steps < n_ctx ? o->steps : n_ctx;
    check_positions(&s.model, &pe, label, o->pos_offset + span - 1);
    const char *prompt = setup_prompt(&s, o);
    check_prompt(prompt, text_flag(o), &s.tok);
    Context ctx;
    build_context(&ctx, o, &s.model, &pe, label, context_size_generate(n_ctx, kv_type(o)));
    GroupAttention ga = {0};
    if (o->self_extend_llamacpp) {
        PosencError err;
        parse_group_window("--self-extend-llamacpp", o->self_extend_llamacpp, &ga.group, &ga.window);
        if (group_attention_check(&ctx, ga.group, ga.window, &err))
            cli_die("--self-extend-llamacpp %s: %s", o->self_extend_llamacpp, err.msg);
        shift = CONTEXT_SHIFT_OFF; /* llama.cpp's group attention replaces context shifts */
    }
    Sampler sampler;
    unsigned long long seed = build_sampler(o, vocab, &sampler);

    LogprobWriter logprobs;
    open_logits_out(o, vocab, &logprobs);
    StepReport report = {o->json, vocab, &logprobs, label, 0, 0.0};
    /* With --json the text goes into the summary: stdout carries JSON only. */
    char *text = NULL;
    size_t text_len = 0;
    FILE *text_out = o->json ? open_memstream(&text, &text_len) : stdout;
    if (!text_out) posenc_out_of_memory(1, 1, "the generated text");

    GenerateOptions g = {.prompt = prompt, .steps = o->steps,
                         .pos_offset = o->pos_offset, .keep = o->keep, .shift = shift,
                         .trace = o->trace_positions ? stderr : NULL,
                         .trace_shares_out = !o->json && same_destination(stdout, stderr),
                         .on_step = o->json || logprobs.out ? report_generate_step : NULL,
                         .step_user = &report, .dump_cache = o->dump_cache ? stderr : NULL,
                         .interrupted = &cli_interrupted,
                         .group_attention = o->self_extend_llamacpp ? &ga : NULL};
    catch_interrupts(); /* Ctrl-C ends the text: its newline and the summary still come */
    PosencError err;
    GenerateStats st;
    int rc = generate_text(&ctx, &s.tok, &sampler, &g, text_out, &st, &err);
    if (rc) fprintf(stderr, "error: %s\n", err.msg);
    if (!rc && st.stopped_full)
        fprintf(stderr, "note: context full (%d tokens); stopping (%s)\n", n_ctx,
                o->self_extend_llamacpp ? "--self-extend-llamacpp groups positions, not cells"
                                        : "--no-shift");
    if (!rc && st.interrupted) fprintf(stderr, "note: interrupted (Ctrl-C)\n");
    if (!rc && st.n_shifts)
        fprintf(stderr, "note: the context (%d cells) filled: %d context shift%s, keeping %d "
                        "cells (--trace-positions shows them; --no-shift stops instead)\n",
                n_ctx, st.n_shifts, st.n_shifts > 1 ? "s" : "", o->keep);
    if (!rc && st.n_prompt_cut)
        fprintf(stderr, "note: -n %d cut the prompt: %d of its tokens not shown, nothing "
                        "generated (-n counts the prompt's tokens too)\n",
                o->steps, st.n_prompt_cut);
    if (!rc && st.n_generated > 0) print_generate_summary(&st, s.load_s, seed);
    if (o->json) {
        fclose(text_out);
        if (!rc) print_json_summary(&report, text, text_len, seed);
        free(text);
    }
    close_logits_out(o, &logprobs);

    sampler_free(&sampler);
    context_free(&ctx);
    setup_close(&s);
    return rc ? EXIT_FAILURE : st.interrupted ? 128 + SIGINT : EXIT_SUCCESS;
}
