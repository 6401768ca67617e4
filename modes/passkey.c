/* Passkey retrieval: haystacks and their scoring (modes/passkey.h). */
#include "modes/passkey.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_parse.h"
#include "model/sampler.h"
#include "modes/perplexity.h"

const PasskeyFormat passkey_default_format = {
    .intro = "There is an important info hidden inside a lot of irrelevant text. Find it and "
             "memorize them. I will quiz you about the important information there.\n",
    .needle = "\nThe pass key is {key}. Remember it. {key} is the pass key.\n",
    .question = "\nWhat is the pass key? {reply}The pass key is {key}",
    .digits = 5,
};
const char passkey_default_filler[] =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. ";

#define KEY_MARK "{key}"
#define KEY_MARK_LEN 5
#define REPLY_MARK "{reply}"
#define REPLY_MARK_LEN 7

int passkey_check_format(const PasskeyFormat *f, PosencError *err) {
    size_t q = strlen(f->question);
    if (!strstr(f->needle, KEY_MARK))
        return posenc_error(err, "the needle has no " KEY_MARK " to put the key in");
    if (q < KEY_MARK_LEN || strcmp(f->question + q - KEY_MARK_LEN, KEY_MARK))
        return posenc_error(err, "the question must end with " KEY_MARK
                                 ": the key is scored where the question stops");
    if (strstr(f->question, KEY_MARK) != f->question + q - KEY_MARK_LEN)
        return posenc_error(err, "the question holds " KEY_MARK " only once, at its end");
    const char *reply = strstr(f->question, REPLY_MARK);
    if (reply && strstr(reply + REPLY_MARK_LEN, REPLY_MARK))
        return posenc_error(err, "the question holds " REPLY_MARK " at most once");
    if (f->digits < 1 || f->digits > PASSKEY_MAX_DIGITS)
        return posenc_error(err, "a key has 1 to %d digits, not %d", PASSKEY_MAX_DIGITS, f->digits);
    return 0;
}

/* A growing string. */
typedef struct {
    char *s;
    size_t len, cap;
} Text;

static void text_add(Text *t, const char *s, size_t n) {
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->len + n + 1) {
            if (!size_mul(&cap, cap, 2)) posenc_out_of_memory(cap, 2, "a haystack");
        }
        char *grown = realloc(t->s, cap);
        if (!grown) posenc_out_of_memory(cap, 1, "a haystack");
        t->s = grown, t->cap = cap;
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

/* The template with every {key} replaced by the key. */
static void text_add_template(Text *t, const char *template, const char *key) {
    for (const char *at; (at = strstr(template, KEY_MARK)); template = at + KEY_MARK_LEN) {
        text_add(t, template, (size_t)(at - template));
        text_add(t, key, strlen(key));
    }
    text_add(t, template, strlen(template));
}

/* n bytes of the filler from offset `from`, starting over at its end. */
static void text_add_filler(Text *t, const char *filler, size_t filler_len, size_t from, size_t n) {
    while (n) {
        size_t take = filler_len - from < n ? filler_len - from : n;
        text_add(t, filler + from, take);
        n -= take, from = 0;
    }
}

static int is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
static int is_continuation(char c) { return ((unsigned char)c & 0xC0) == 0x80; }

/* The filler's byte at offset i, reading it round and round. */
static char filler_at(const char *filler, size_t len, size_t i) { return filler[i % len]; }

/* Moves i forward (at most to `end`) to just after whitespace, or to the
 * start of a character when no whitespace comes first: the needle then
 * cuts no word and no UTF-8 sequence. */
static size_t after_space(const char *filler, size_t len, size_t a, size_t i, size_t end) {
    for (size_t j = i; j < end; j++)
        if (j == 0 || is_space(filler_at(filler, len, a + j - 1))) return j;
    while (i < end && is_continuation(filler_at(filler, len, a + i))) i++;
    return i;
}

/* c back to the start of a character (the end of the filler's second part). */
static size_t char_start(const char *filler, size_t len, size_t a, size_t c) {
    while (c > 0 && is_continuation(filler_at(filler, len, a + c))) c--;
    return c;
}

/* splitmix64: the seed, cell and trial mixed into one stream. */
static uint64_t mix(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The sequence's ids: the user's text, the reply's start and the key (or
 * none: key NULL), as plain text or through the chat format. */
static int encode_sequence(const PasskeyEncoder *enc, const char *user, size_t user_len,
                           const char *reply, size_t reply_len, const char *key, int **ids, int *n,
                           PosencError *err) {
    Text t = {0};
    if (enc->chat) {
        ChatMessage messages[2];
        int n_messages = 0;
        if (enc->system_prompt) messages[n_messages++] = (ChatMessage){"system", enc->system_prompt};
        char *content = malloc_or_exit(user_len + 1, "a haystack");
        memcpy(content, user, user_len);
        content[user_len] = '\0';
        messages[n_messages++] = (ChatMessage){"user", content};
        size_t len;
        char *rendered = chat_format_render(enc->chat, messages, n_messages, 1, &len, err);
        free(content);
        if (!rendered) return -1;
        text_add(&t, rendered, len);
        free(rendered);
    } else {
        text_add(&t, user, user_len);
    }
    text_add(&t, reply, reply_len);
    if (key) text_add(&t, key, strlen(key));
    int rc = enc->chat ? chat_format_encode(enc->chat, t.s, t.len, ids, n, err)
                       : tokenizer_encode_alloc(enc->tok, t.s, t.len, 1, 0, ids, n, err);
    free(t.s);
    return rc;
}

/* The case's ids and where its key starts: the key's tokens are the ones the
 * sequence with the key does not share with the sequence without it. */
static int encode_case(const PasskeyEncoder *enc, const char *user, size_t user_len,
                       const char *reply, size_t reply_len, PasskeyCase *out, PosencError *err) {
    int *with = NULL, *without = NULL, n_with = 0, n_without = 0;
    if (encode_sequence(enc, user, user_len, reply, reply_len, out->key, &with, &n_with, err))
        return -1;
    if (encode_sequence(enc, user, user_len, reply, reply_len, NULL, &without, &n_without, err)) {
        free(with);
        return -1;
    }
    int shared = 0;
    while (shared < n_without && shared < n_with && with[shared] == without[shared]) shared++;
    free(without);
    if (shared == n_with) {
        free(with);
        return posenc_error(err, "the key '%s' adds no token to the prompt", out->key);
    }
    if (shared == 0) {
        free(with);
        return posenc_error(err, "the prompt is empty: nothing comes before the key");
    }
    out->ids = with, out->n_ids = n_with, out->key_start = shared;
    return 0;
}

/* The question's parts: the text of the user's turn, and the reply's start
 * (after {reply}, before {key}; empty without {reply}). */
static void question_parts(const char *question, size_t *user_len, const char **reply,
                           size_t *reply_len) {
    size_t end = strlen(question) - KEY_MARK_LEN;
    const char *mark = strstr(question, REPLY_MARK);
    if (!mark || (size_t)(mark - question) > end) {
        *user_len = end, *reply = question + end, *reply_len = 0;
        return;
    }
    *user_len = (size_t)(mark - question);
    *reply = mark + REPLY_MARK_LEN;
    *reply_len = end - *user_len - REPLY_MARK_LEN;
}

/* The user's text with c bytes of filler from offset a: intro, filler
 * before the needle (depth x c, moved to just after whitespace), needle, the
 * rest of the filler, the question's part before {reply} (or {key}). */
static void haystack_text(Text *t, const char *filler, size_t filler_len, const PasskeyFormat *f,
                          const char *key, size_t a, size_t c, double depth) {
    t->len = 0;
    text_add(t, "", 0);
    text_add(t, f->intro, strlen(f->intro));
    size_t c1 = after_space(filler, filler_len, a, (size_t)llround(depth * (double)c), c);
    text_add_filler(t, filler, filler_len, a % filler_len, c1);
    text_add_template(t, f->needle, key);
    text_add_filler(t, filler, filler_len, (a + c1) % filler_len, c - c1);
    size_t user_len, reply_len;
    const char *reply;
    question_parts(f->question, &user_len, &reply, &reply_len);
    text_add(t, f->question, user_len);
}

/* The tokens of the sequence with c bytes of filler (the key included): what
 * the search for the length compares, without the key's split. */
static int haystack_tokens(const PasskeyEncoder *enc, const char *filler, size_t filler_len,
                           const PasskeyFormat *f, const char *key, size_t a, size_t c, double depth,
                           int *n, PosencError *err) {
    Text t = {0};
    haystack_text(&t, filler, filler_len, f, key, a, c, depth);
    size_t user_len, reply_len;
    const char *reply;
    question_parts(f->question, &user_len, &reply, &reply_len);
    int *ids = NULL;
    int rc = encode_sequence(enc, t.s, t.len, reply, reply_len, key, &ids, n, err);
    free(ids);
    free(t.s);
    return rc;
}

/* The sequence with c bytes of filler into out (replacing what it held). */
static int haystack_case(const PasskeyEncoder *enc, const char *filler, size_t filler_len,
                         const PasskeyFormat *f, size_t a, size_t c, double depth,
                         PasskeyCase *out, PosencError *err) {
    Text t = {0};
    haystack_text(&t, filler, filler_len, f, out->key, a, c, depth);
    size_t user_len, reply_len;
    const char *reply;
    question_parts(f->question, &user_len, &reply, &reply_len);
    free(out->ids);
    out->ids = NULL;
    int rc = encode_case(enc, t.s, t.len, reply, reply_len, out, err);
    free(t.s);
    return rc;
}

int passkey_build(const PasskeyEncoder *enc, const char *filler, const PasskeyFormat *f, int length,
                  double depth, int trial, uint64_t seed, PasskeyCase *out, PosencError *err) {
    memset(out, 0, sizeof *out);
    out->length = length, out->depth = depth, out->trial = trial;
    size_t filler_len = strlen(filler);
    if (!filler_len) return posenc_error(err, "the filler is empty");
    uint64_t state = seed;
    state ^= mix(&state) ^ (uint64_t)length;
    state ^= mix(&state) ^ (uint64_t)llround(depth * 1e6);
    state ^= mix(&state) ^ (uint64_t)trial;
    for (int i = 0; i < f->digits; i++) out->key[i] = (char)('0' + mix(&state) % 10);
    size_t a = after_space(filler, filler_len, 0, mix(&state) % filler_len, filler_len);

    /* The most filler whose sequence fits.  Tokens grow with the filler's
     * bytes at the filler's own rate: guesses at that rate bracket the
     * answer within a few tokens (lo fits, hi does not), then the bracket
     * halves. */
    int overhead;
    if (haystack_tokens(enc, filler, filler_len, f, out->key, a, 0, depth, &overhead, err)) return -1;
    if (overhead > length) {
        return posenc_error(err, "the intro, needle, question and key alone take %d tokens, "
                                 "more than the length %d", overhead, length);
    }
    size_t lo = 0, hi = 0; /* hi 0: nothing too long found yet */
    double bytes_per_token = 4.0;
    int n;
    for (int guess = 0; guess < 4; guess++) {
        size_t c = (size_t)((length - overhead) * bytes_per_token) + 1;
        if (c <= lo || (hi && c >= hi)) c = hi ? lo + (hi - lo) / 2 : lo * 2 + 64;
        if (haystack_tokens(enc, filler, filler_len, f, out->key, a, c, depth, &n, err)) goto fail;
        if (n > length) hi = c;
        else lo = c;
        if (n > overhead) bytes_per_token = (double)c / (n - overhead);
        if (hi && hi - lo <= 1) break;
    }
    while (!hi) { /* every guess fitted: widen until one does not */
        size_t c = lo * 2 + 64;
        if (haystack_tokens(enc, filler, filler_len, f, out->key, a, c, depth, &n, err)) goto fail;
        if (n > length) hi = c;
        else lo = c;
        if (!hi && c > (size_t)length * 64) hi = lo + 1; /* more bytes than any token holds */
    }
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (haystack_tokens(enc, filler, filler_len, f, out->key, a, mid, depth, &n, err)) goto fail;
        if (n > length) hi = mid;
        else lo = mid;
    }
    if (haystack_case(enc, filler, filler_len, f, a, char_start(filler, filler_len, a, lo), depth,
                      out, err))
        goto fail;
    return 0;
fail:
    passkey_case_free(out);
    return -1;
}

int passkey_from_text(const PasskeyEncoder *enc, const char *prompt, const char *key, int length,
                      double depth, int trial, PasskeyCase *out, PosencError *err) {
    memset(out, 0, sizeof *out);
    out->length = length, out->depth = depth, out->trial = trial;
    size_t n = strlen(key);
    if (n < 1 || n > PASSKEY_MAX_DIGITS)
        return posenc_error(err, "a key has 1 to %d characters, not %zu", PASSKEY_MAX_DIGITS, n);
    memcpy(out->key, key, n + 1);
    return encode_case(enc, prompt, strlen(prompt), "", 0, out, err);
}

void passkey_case_free(PasskeyCase *c) {
    free(c->ids);
    c->ids = NULL;
    c->n_ids = 0;
}

/* One line's case; -1 with the reason (the caller adds the file and line). */
static int haystack_line(const PasskeyEncoder *enc, const char *line, size_t len, PasskeyCase *out,
                         PosencError *err) {
    JsonDoc doc;
    if (json_parse(&doc, line, len, err)) return -1;
    const JsonValue *root = &doc.root, *length = json_get(root, "length"),
                    *depth = json_get(root, "depth"), *trial = json_get(root, "trial");
    const char *prompt = json_get_string(root, "prompt"), *key = json_get_string(root, "key");
    int rc = -1;
    if (root->type != JSON_OBJECT) posenc_error(err, "not a JSON object");
    else if (!length || length->type != JSON_NUMBER || length->number < 1 ||
             length->number > 1 << 30 || length->number != floor(length->number))
        posenc_error(err, "\"length\" must be a whole number of tokens, 1 to 2^30");
    else if (!depth || depth->type != JSON_NUMBER || !(depth->number >= 0 && depth->number <= 1))
        posenc_error(err, "\"depth\" must be a number from 0 to 1");
    else if (trial && (trial->type != JSON_NUMBER || trial->number < 0 ||
                       trial->number > 1 << 30 || trial->number != floor(trial->number)))
        posenc_error(err, "\"trial\" must be a whole number, 0 to 2^30");
    else if (!prompt || !key) posenc_error(err, "\"prompt\" and \"key\" must be strings");
    else if (strlen(prompt) != json_get(root, "prompt")->len ||
             strlen(key) != json_get(root, "key")->len)
        posenc_error(err, "a NUL character in \"prompt\" or \"key\"");
    else
        rc = passkey_from_text(enc, prompt, key, (int)length->number, depth->number,
                               trial ? (int)trial->number : 0, out, err);
    json_free(&doc);
    return rc;
}

int passkey_read_haystacks(const char *path, const PasskeyEncoder *enc, PasskeyCase **cases, int *n,
                           PosencError *err) {
    *cases = NULL, *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return posenc_error(err, "%s: cannot open: %s", path, strerror(errno));
    size_t len;
    char *text = posenc_read_stream(f, &len, path, err);
    fclose(f);
    if (!text) return -1;
    int cap = 0, line_no = 0, rc = 0;
    for (char *line = text, *end; line < text + len && !rc; line = end + 1) {
        end = memchr(line, '\n', (size_t)(text + len - line));
        if (!end) end = text + len;
        line_no++;
        size_t n_line = (size_t)(end - line);
        int blank = 1;
        for (size_t i = 0; i < n_line && blank; i++) blank = is_space(line[i]);
        if (blank) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            PasskeyCase *grown = realloc(*cases, (size_t)cap * sizeof **cases);
            if (!grown) posenc_out_of_memory((size_t)cap, sizeof **cases, "the haystacks");
            *cases = grown;
        }
        if (haystack_line(enc, line, n_line, &(*cases)[*n], err)) {
            char where[64];
            snprintf(where, sizeof where, "line %d", line_no);
            posenc_error_prefix(err, where);
            posenc_error_prefix(err, path);
            rc = -1;
        } else {
            ++*n;
        }
    }
    free(text);
    if (!rc && *n == 0) rc = posenc_error(err, "%s: no haystacks in the file", path);
    if (rc) {
        for (int i = 0; i < *n; i++) passkey_case_free(&(*cases)[i]);
        free(*cases);
        *cases = NULL, *n = 0;
    }
    return rc;
}

int passkey_score(Context *ctx, const PasskeyCase *c, const GroupAttention *ga, PasskeyScore *out,
                  PosencError *err) {
    kv_cache_clear(&ctx->cache);
    GroupAttention grouping = ga ? *ga : (GroupAttention){0};
    int prompt = c->key_start - 1, n_key = c->n_ids - c->key_start, chunk = ctx->state.max_tokens;
    int pos = 0;
    for (int t = 0; t < prompt; t += chunk) {
        int n = prompt - t < chunk ? prompt - t : chunk;
        if (ga) pos = group_attention_compress(ctx, &grouping, pos, NULL);
        if (!context_step(ctx, c->ids + t, n, pos, 0, err)) return -1;
        pos += n;
    }
    /* the prompt's last token and the key's but the last: each row predicts
     * the next key token */
    if (ga) pos = group_attention_compress(ctx, &grouping, pos, NULL);
    const float *logits = context_step(ctx, c->ids + prompt, n_key, pos, 1, err);
    if (!logits) return -1;
    int vocab = ctx->model->config.vocab_size;
    out->exact = 1, out->logprob = 0.0;
    for (int j = 0; j < n_key; j++) {
        const float *row = logits + (size_t)j * vocab;
        int target = c->ids[c->key_start + j];
        out->exact &= sampler_argmax(row, vocab) == target;
        out->logprob -= ppl_token_nll(row, vocab, target);
    }
    return 0;
}
