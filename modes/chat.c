#include "modes/chat.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modes/generate.h"

/* A token whose text in a rendering stands for the token itself: control
 * and user-defined pieces, BOS and EOS (a llama2.c vocabulary types none). */
static int is_special(const Tokenizer *t, int id) {
    return (t->types[id] == TOKEN_CONTROL || t->types[id] == TOKEN_USER_DEFINED || id == t->bos_id ||
            id == t->eos_id) && t->piece_lens[id] > 0;
}

static void push_seen(ChatSession *s, int token) {
    if (s->n_seen == s->cap_seen) {
        s->cap_seen = s->cap_seen ? 2 * s->cap_seen : 256;
        int *p = realloc(s->seen, (size_t)s->cap_seen * sizeof *p);
        if (!p) posenc_out_of_memory((size_t)s->cap_seen, sizeof *p, "the chat transcript");
        s->seen = p;
    }
    s->seen[s->n_seen++] = token;
}

static char *copy_string(const char *text, size_t len) {
    char *d = malloc_or_exit(len + 1, "a chat message");
    memcpy(d, text, len);
    d[len] = 0;
    return d;
}

static void push_message(ChatSession *s, const char *role, const char *content, size_t len) {
    if (s->n_messages == s->cap_messages) {
        s->cap_messages = s->cap_messages ? 2 * s->cap_messages : 8;
        ChatMessage *m = realloc(s->messages, (size_t)s->cap_messages * sizeof *m);
        if (!m) posenc_out_of_memory((size_t)s->cap_messages, sizeof *m, "the chat messages");
        s->messages = m;
    }
    s->messages[s->n_messages].role = copy_string(role, strlen(role));
    s->messages[s->n_messages].content = copy_string(content, len);
    s->n_messages++;
}

static void pop_message(ChatSession *s) {
    s->n_messages--;
    free((char *)s->messages[s->n_messages].role);
    free((char *)s->messages[s->n_messages].content);
}

/* ---- rendering and encoding --------------------------------------------------------- */
static const char *token_text(const Tokenizer *t, int id) { return id >= 0 ? t->pieces[id] : ""; }

void chat_format_init(ChatFormat *f, const JinjaTemplate *template, const struct JsonValue *kwargs,
                      const Tokenizer *tok) {
    f->template = template;
    f->kwargs = kwargs;
    f->tok = tok;
    f->special = malloc_or_exit((size_t)tok->vocab_size * sizeof(int), "the special tokens");
    f->n_special = 0;
    for (int id = 0; id < tok->vocab_size; id++)
        if (is_special(tok, id)) f->special[f->n_special++] = id;
}

void chat_format_free(ChatFormat *f) {
    free(f->special);
    f->special = NULL;
    f->n_special = 0;
}

char *chat_format_render(const ChatFormat *f, const ChatMessage *messages, int n,
                         int add_generation_prompt, size_t *len, PosencError *err) {
    ChatVariables vars = {.messages = messages, .n_messages = n,
                          .add_generation_prompt = add_generation_prompt,
                          .bos_token = token_text(f->tok, f->tok->bos_id),
                          .eos_token = token_text(f->tok, f->tok->eos_id), .kwargs = f->kwargs};
    char *text = jinja_render_chat(f->template, &vars, len, err);
    if (!text) posenc_error_prefix(err, "the chat template");
    return text;
}

char *chat_render(const ChatSession *s, int add_generation_prompt, size_t *len, PosencError *err) {
    return chat_format_render(&s->format, s->messages, s->n_messages, add_generation_prompt, len, err);
}

/* The special token whose text starts at text[0..len), longest first; -1. */
static int special_at(const ChatFormat *f, const char *text, size_t len) {
    int best = -1, best_len = 0;
    for (int i = 0; i < f->n_special; i++) {
        int id = f->special[i], n = f->tok->piece_lens[id];
        if (n > best_len && (size_t)n <= len && memcmp(text, f->tok->pieces[id], (size_t)n) == 0) {
            best = id;
            best_len = n;
        }
    }
    return best;
}

/* Room for `need` ids in *out (cap of them now). */
static int *reserve_ids(int *out, size_t *cap, size_t need) {
    if (need <= *cap) return out;
    while (*cap < need) *cap *= 2;
    int *grown = realloc(out, *cap * sizeof *out);
    if (!grown) posenc_out_of_memory(*cap, sizeof *out, "the chat transcript's ids");
    return grown;
}

int chat_format_encode(const ChatFormat *f, const char *text, size_t len, int **ids, int *n_ids,
                       PosencError *err) {
    size_t cap = 64, n = 0;
    int *out = malloc_or_exit(cap * sizeof *out, "the chat transcript's ids");
    size_t start = 0;
    for (size_t i = 0; i <= len;) {
        int special = i < len ? special_at(f, text + i, len - i) : -1;
        if (i < len && special < 0) {
            i++;
            continue;
        }
        if (i > start) {   /* the text before: no BOS, no EOS */
            int *part, n_part;
            if (tokenizer_encode_alloc(f->tok, text + start, i - start, 0, 0, &part, &n_part, err)) {
                free(out);
                return -1;
            }
            out = reserve_ids(out, &cap, n + (size_t)n_part);
            memcpy(out + n, part, (size_t)n_part * sizeof *part);
            n += (size_t)n_part;
            free(part);
        }
        if (i == len) break;
        out = reserve_ids(out, &cap, n + 1);
        out[n++] = special;
        i += (size_t)f->tok->piece_lens[special];
        start = i;
    }
    if (n > (size_t)INT32_MAX) {
        free(out);
        return posenc_error(err, "the conversation is too long to encode");
    }
    *ids = out;
    *n_ids = (int)n;
    return 0;
}

static int render_and_encode(const ChatSession *s, const ChatMessage *messages, int n, int add_generation_prompt,
                             int **ids, int *n_ids, PosencError *err) {
    size_t len;
    char *text = chat_format_render(&s->format, messages, n, add_generation_prompt, &len, err);
    if (!text) return -1;
    int rc = chat_format_encode(&s->format, text, len, ids, n_ids, err);
    free(text);
    return rc;
}

/* ---- the cache ------------------------------------------------------------------------ */
/* Cells before `keep` hold transcript tokens 0.., later cells a suffix of
 * the transcript (a context shift discards the cells right after keep). */
static void rewind_to(ChatSession *s, int length) {
    KVCache *kv = &s->ctx->cache;
    if (length >= s->n_seen) return;
    int suffix_start = s->n_seen - kv->n_used;   /* transcript index of cell c >= keep is this + c */
    int first_cell = length < s->keep ? length : length - suffix_start;
    if (first_cell < s->keep && length >= s->keep) first_cell = s->keep;   /* diverged in the discarded part */
    if (first_cell < kv->n_used) kv_cache_remove(kv, first_cell, kv->n_used - first_cell);
    s->n_seen = length;
}

/* Feeds tokens at the next positions, shifting the context when it fills. */
static int feed(ChatSession *s, const int *ids, int n, PosencError *err) {
    Context *ctx = s->ctx;
    KVCache *kv = &ctx->cache;
    while (n > 0) {
        ShiftReport report = {.tok = s->tok, .trace = s->opt->trace, .dump = s->opt->dump_cache};
        int room = generate_make_room(ctx, s->keep, s->opt->shift, &report, err);
        if (room < 0) return -1;
        if (room > 0)
            return posenc_error(err, "the conversation fills the context (%d cells) and context shifts are "
                                     "off (--no-shift)", kv->n_ctx);
        int chunk = kv->n_ctx - kv->n_used;
        if (chunk > n) chunk = n;
        if (chunk > ctx->state.max_tokens) chunk = ctx->state.max_tokens;
        int pos = kv->n_used ? kv->pos[kv->n_used - 1] + 1 : 0;
        if (s->opt->trace) generate_trace_chunk(s->opt->trace, ctx, s->tok, ids, chunk, pos);
        s->logits = context_step(ctx, ids, chunk, pos, 0, err);
        if (!s->logits) return -1;
        for (int i = 0; i < chunk; i++) {
            push_seen(s, ids[i]);
            sampler_accept(s->sampler, ids[i]);
        }
        ids += chunk;
        n -= chunk;
    }
    return 0;
}

/* ---- a session ---------------------------------------------------------------------------- */
static int common_prefix(const int *a, int na, const int *b, int nb) {
    int i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

/* The cells every turn begins with: the tokens two conversations that
 * differ only in their first user message share (BOS, the system prompt
 * and the turn's header). */
static int resolve_keep(ChatSession *s, PosencError *err) {
    ChatMessage probe[2][2];
    int n = 0;
    if (s->opt->system_prompt) {
        probe[0][0] = probe[1][0] = (ChatMessage){"system", s->opt->system_prompt};
        n = 1;
    }
    probe[0][n] = (ChatMessage){"user", "a"};
    probe[1][n] = (ChatMessage){"user", "b"};
    int *ids[2], n_ids[2];
    if (render_and_encode(s, probe[0], n + 1, 1, &ids[0], &n_ids[0], err)) return -1;
    if (render_and_encode(s, probe[1], n + 1, 1, &ids[1], &n_ids[1], err)) {
        free(ids[0]);
        return -1;
    }
    s->keep = common_prefix(ids[0], n_ids[0], ids[1], n_ids[1]);
    free(ids[0]);
    free(ids[1]);
    return 0;
}

/* The word of `text` around its first character the vocabulary cannot
 * encode alone (into buf), or NULL when every one encodes. */
static const char *first_unencodable_word(const Tokenizer *tok, const char *text, size_t len,
                                          char *buf, size_t size) {
    for (size_t i = 0; i < len;) {
        size_t n = 1;
        while (i + n < len && ((unsigned char)text[i + n] & 0xc0) == 0x80) n++;
        int *ids, n_ids;
        PosencError ignored;
        int fails = tokenizer_encode_alloc(tok, text + i, n, 0, 0, &ids, &n_ids, &ignored) != 0;
        if (!fails) free(ids);
        if (fails) {
            size_t a = i, b = i + n;
            while (a > 0 && i - a < 20 && !isspace((unsigned char)text[a - 1])) a--;
            while (b < len && b - i < 20 && !isspace((unsigned char)text[b])) b++;
            snprintf(buf, size, "%.*s", (int)(b - a), text + a);
            return buf;
        }
        i += n;
    }
    return NULL;
}

/* The template's own text (around an empty user turn) must encode, or no
 * turn can: refused here, naming the text and the template. */
static int check_template_encodes(ChatSession *s, PosencError *err) {
    push_message(s, "user", "", 0);
    size_t len;
    char *text = chat_format_render(&s->format, s->messages, s->n_messages, 1, &len, err);
    int *ids = NULL, n_ids, rc = text ? chat_format_encode(&s->format, text, len, &ids, &n_ids, err) : -1;
    free(ids);
    char word[64];
    const char *at = rc && text ? first_unencodable_word(s->tok, text, len, word, sizeof word) : NULL;
    if (at) {
        char why[512];
        snprintf(why, sizeof why, "%s", err->msg);
        posenc_error(err, "the chat template (%s) writes '%s', which the vocabulary cannot "
                          "encode (%s): name a template written in its pieces with --chat-template",
                     s->opt->template_name ? s->opt->template_name : "the model's", at, why);
    }
    free(text);
    pop_message(s);
    return rc;
}

/* Whether any token of the vocabulary ends a turn. */
static int has_end_of_turn(const Tokenizer *tok) {
    for (int id = 0; id < tok->vocab_size; id++)
        if (tokenizer_ends_turn(tok, id)) return 1;
    return 0;
}

int chat_session_init(ChatSession *s, Context *ctx, const Tokenizer *tok, Sampler *sampler,
                      const ChatOptions *opt, PosencError *err) {
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->tok = tok;
    s->sampler = sampler;
    s->opt = opt;
    chat_format_init(&s->format, opt->template, opt->template_kwargs, tok);
    if (opt->system_prompt) push_message(s, "system", opt->system_prompt, strlen(opt->system_prompt));
    if (check_template_encodes(s, err)) goto fail;
    if (opt->keep >= 0) s->keep = opt->keep;
    else if (resolve_keep(s, err)) goto fail;
    if (opt->shift != CONTEXT_SHIFT_OFF && context_shift_check_keep(ctx->cache.n_ctx, s->keep, err)) {
        posenc_error(err, "the %d cells a context shift keeps (the system prompt's, or --keep) do not leave "
                          "room in a context of %d: raise --ctx or shorten -y", s->keep, ctx->cache.n_ctx);
        goto fail;
    }
    s->reply_limit = opt->max_reply;
    if (s->reply_limit <= 0 && !has_end_of_turn(tok)) {
        s->reply_limit = ctx->cache.n_ctx;
        fprintf(stderr, "note: the vocabulary has no end-of-turn token: each reply ends after %d "
                        "tokens (the context; -n sets another length)\n", s->reply_limit);
    }
    return 0;
fail:
    chat_session_free(s);
    return -1;
}

void chat_session_free(ChatSession *s) {
    while (s->n_messages) pop_message(s);
    free(s->messages);
    free(s->seen);
    chat_format_free(&s->format);
    memset(s, 0, sizeof *s);
}

/* ---- a turn -------------------------------------------------------------------------------- */
/* Where a stop string starts in reply[0..len), or -1. */
static long find_stop(const ChatOptions *opt, const char *reply, size_t len) {
    long best = -1;
    for (int i = 0; i < opt->n_stops; i++) {
        size_t k = strlen(opt->stops[i]);
        for (size_t at = 0; k && at + k <= len; at++)
            if (memcmp(reply + at, opt->stops[i], k) == 0) {
                if (best < 0 || (long)at < best) best = (long)at;
                break;
            }
    }
    return best;
}

/* Bytes at the end of reply that could begin a stop string: held back
 * until the next token shows whether they are one. */
static size_t stop_prefix_tail(const ChatOptions *opt, const char *reply, size_t len) {
    size_t held = 0;
    for (int i = 0; i < opt->n_stops; i++) {
        size_t k = strlen(opt->stops[i]);
        for (size_t n = k > len ? len : k - 1; n > held; n--)
            if (memcmp(reply + len - n, opt->stops[i], n) == 0) {
                held = n;
                break;
            }
    }
    return held;
}

typedef struct {
    char *text;
    size_t len, cap, shown;
} Reply;

static void reply_append(Reply *r, const char *piece, size_t n) {
    if (r->len + n + 1 > r->cap) {
        r->cap = (r->len + n + 1) * 2;
        char *p = realloc(r->text, r->cap);
        if (!p) posenc_out_of_memory(r->cap, 1, "the chat reply");
        r->text = p;
    }
    memcpy(r->text + r->len, piece, n);
    r->len += n;
    r->text[r->len] = 0;
}

static void reply_show(Reply *r, FILE *out, size_t upto) {
    if (upto > r->shown) {
        write_piece(out, r->text + r->shown, upto - r->shown);
        r->shown = upto;
        fflush(out);
    }
}

static int generate_reply(ChatSession *s, FILE *out, Reply *r, PosencError *err) {
    const ChatOptions *opt = s->opt;
    int prev = s->n_seen ? s->seen[s->n_seen - 1] : -1;
    for (int made = 0; s->reply_limit <= 0 || made < s->reply_limit; made++) {
        if (opt->interrupted && *opt->interrupted) break;
        int token = sampler_sample(s->sampler, s->logits);
        if (tokenizer_ends_turn(s->tok, token) || token == s->tok->bos_id) break;
        size_t n;
        const char *piece = tokenizer_decode(s->tok, prev, token, &n);
        reply_append(r, piece, n);
        long stop = find_stop(opt, r->text, r->len);
        if (stop >= 0) {
            r->len = (size_t)stop;
            r->text[r->len] = 0;
            reply_show(r, out, r->len);
            return feed(s, &token, 1, err);   /* the cache holds what was said; the next turn rewinds */
        }
        reply_show(r, out, r->len - stop_prefix_tail(opt, r->text, r->len));
        if (feed(s, &token, 1, err)) return -1;
        prev = token;
    }
    reply_show(r, out, r->len);
    return 0;
}

int chat_turn(ChatSession *s, const char *user_text, FILE *out, PosencError *err) {
    push_message(s, "user", user_text, strlen(user_text));
    int *ids, n_ids;
    if (render_and_encode(s, s->messages, s->n_messages, 1, &ids, &n_ids, err)) {
        pop_message(s);
        /* the template's own text encodes (chat_session_init): the turn's does not */
        char why[512];
        snprintf(why, sizeof why, "%s", err->msg);
        posenc_error(err, "the turn, as %s renders it, cannot be encoded: %s",
                     s->opt->template_name ? s->opt->template_name : "the chat template", why);
        return 1;
    }
    int same = common_prefix(ids, n_ids, s->seen, s->n_seen);
    if (same == n_ids && same > 0) same--;   /* the last token is fed again for its logits */
    int room = s->ctx->cache.n_ctx - s->keep - 1;   /* one cell for the reply's first token */
    if (n_ids - same > room) {
        free(ids);
        pop_message(s);
        posenc_error(err, "the turn is %d tokens, and the context holds %d beside the %d cells "
                          "it keeps: raise --ctx", n_ids - same, room, s->keep);
        return 1;
    }
    rewind_to(s, same);
    int rc = n_ids > same ? feed(s, ids + same, n_ids - same, err) : 0;
    free(ids);
    if (!rc && !s->logits) rc = posenc_error(err, "the chat template rendered an empty prompt");
    if (rc) return -1;
    Reply r = {0};
    rc = generate_reply(s, out, &r, err);
    fputc('\n', out);
    fflush(out);
    if (!rc) push_message(s, "assistant", r.text ? r.text : "", r.len);
    free(r.text);
    return rc;
}

int chat_loop(ChatSession *s, FILE *in, FILE *out, int interactive, PosencError *err) {
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    for (;;) {
        if (s->opt->interrupted) *s->opt->interrupted = 0;
        if (interactive) {
            fputs("> ", out);
            fflush(out);
        }
        errno = 0;
        /* a Ctrl-C that came while the prompt was written would not
         * interrupt the read that follows: it ends the chat here */
        int ctrl_c = s->opt->interrupted && *s->opt->interrupted;
        ssize_t n = ctrl_c ? -1 : getline(&line, &cap, in);
        if (n < 0) {   /* EOF, or Ctrl-C at the prompt */
            if (interactive) fputc('\n', out);
            if (ferror(in) && errno != EINTR) rc = posenc_error(err, "reading the conversation: %s", strerror(errno));
            break;
        }
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (n == 0) continue;
        if (memchr(line, 0, (size_t)n)) {
            rc = posenc_error(err, "a turn contains a NUL byte; turns are text");
            break;
        }
        int turn = chat_turn(s, line, out, err);
        if (turn > 0) {
            fprintf(stderr, "warning: turn skipped: %s\n", err->msg);
            continue;
        }
        if (turn < 0) {
            rc = -1;
            break;
        }
    }
    free(line);
    return rc;
}
