/* The pre-tokenizer patterns of byte-level BPE vocabularies, each written as
 * C over the Unicode classes (unicode_tables.c) instead of a regex engine.
 * A pattern is a list of "Isolated" splits (Hugging Face's Split
 * pre-tokenizer): every match is a piece, and so is every run of text between
 * matches; each level splits the pieces of the level before.  A match
 * function returns the length of the pattern's match at s[i], searching no
 * further than `end` (the end of the piece, where lookaheads stop too), or 0
 * when nothing matches there.  Where several alternatives could match, the
 * first that does wins, as in a backtracking regex engine. */
#include "tokenizer/tokenizer_impl.h"

typedef size_t (*SplitMatch)(const char *s, size_t i, size_t end);

static UnicodeClass class_at(const char *s, size_t i, size_t end, size_t *clen) {
    return utf8_class(s + i, end - i, clen);
}

/* End of the run of characters from i whose class is in `mask` (1 << class). */
static size_t run_of(const char *s, size_t i, size_t end, unsigned mask) {
    size_t clen;
    while (i < end && (mask >> class_at(s, i, end, &clen) & 1)) i += clen;
    return i;
}

#define C(x) (1u << UCLASS_##x)
static int is_nl(char c) { return c == '\r' || c == '\n'; }

/* The whitespace alternatives every pattern ends with, at a space s[i]:
 *   \s*[\r\n]+ | \s+(?!\S) | \s+
 * the run up to its last line break; else a run reaching the end whole;
 * else the run but its last character, which leads the next piece. */
static size_t whitespace(const char *s, size_t i, size_t end) {
    size_t e = run_of(s, i, end, C(SPACE)), after_nl = 0, last = i, clen;
    for (size_t k = i; k < e; k += clen) {
        class_at(s, k, end, &clen);
        if (is_nl(s[k])) after_nl = k + 1;
        last = k;
    }
    if (after_nl) return after_nl - i;
    if (e == end || last == i) return e - i;
    return last - i;
}

/* GPT-2 (encoder.py; GGUF pre "gpt-2" and kin):
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t match_gpt2(const char *s, size_t i, size_t end) {
    const char *p = s + i;
    size_t rest = end - i, clen;
    if (p[0] == '\'' && rest >= 2) {
        if (p[1] && strchr("stmd", p[1])) return 2;
        if (rest >= 3 && (!memcmp(p + 1, "re", 2) || !memcmp(p + 1, "ve", 2) ||
                          !memcmp(p + 1, "ll", 2)))
            return 3;
    }
    size_t j = i + (p[0] == ' ' && rest > 1);
    UnicodeClass cls = class_at(s, j, end, &clen);
    if (cls == UCLASS_LETTER || cls == UCLASS_NUMBER) return run_of(s, j, end, 1u << cls) - i;
    if (cls != UCLASS_SPACE) return run_of(s, j, end, ~(C(LETTER) | C(NUMBER) | C(SPACE))) - i;
    size_t e = run_of(s, i, end, C(SPACE)), last = i;
    if (e == end) return e - i;
    for (size_t k = i; k < e; k += clen) { /* \s+(?!\S): all but the last space */
        last = k;
        class_at(s, k, end, &clen);
    }
    return last > i ? last - i : e - i;
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d), ASCII letters in either case. */
static size_t contraction(const char *s, size_t i, size_t end) {
    if (s[i] != '\'' || end - i < 2) return 0;
    char a = (char)(s[i + 1] | 0x20), b = end - i >= 3 ? (char)(s[i + 2] | 0x20) : 0;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* \p{N}{1,max}: up to max characters of class Number. */
static size_t digits(const char *s, size_t i, size_t end, int max) {
    size_t k = i, clen;
    for (int d = 0; d < max && k < end && class_at(s, k, end, &clen) == UCLASS_NUMBER; d++) k += clen;
    return k - i;
}

/* Llama 3 (GGUF pre "llama-bpe") with max_digits 3 and words of \p{L}, Qwen2
 * ("qwen2") with 1, Qwen3.5 ("qwen35") with 1 and words of [\p{L}\p{M}]:
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?WORD+|\p{N}{1,N}
 *   | ?[^\s\p{N}WORD]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * A mark (Qwen3.5) that could lead a word as its optional first character
 * matches the same run either way, so words are runs of the WORD classes
 * with at most one other character (not a line break or number) in front. */
static size_t match_llama3_like(const char *s, size_t i, size_t end, int max_digits, unsigned word) {
    size_t n = contraction(s, i, end), c0len, c1len = 0;
    if (n) return n;
    UnicodeClass c0 = class_at(s, i, end, &c0len), c1 = UCLASS_OTHER;
    if (i + c0len < end) c1 = class_at(s, i + c0len, end, &c1len);
    if (word >> c0 & 1) return run_of(s, i, end, word) - i;
    if (c0 != UCLASS_NUMBER && !is_nl(s[i]) && (word >> c1 & 1))
        return run_of(s, i + c0len, end, word) - i;
    if (c0 == UCLASS_NUMBER) return digits(s, i, end, max_digits);
    unsigned other = ~(C(SPACE) | C(NUMBER) | word);
    size_t j = s[i] == ' ' && c1len && (other >> c1 & 1) ? i + 1 : i;
    if (other >> class_at(s, j, end, &c1len) & 1) {
        size_t k = run_of(s, j, end, other);
        while (k < end && is_nl(s[k])) k++;
        return k - i;
    }
    return whitespace(s, i, end);
}
static size_t match_llama3(const char *s, size_t i, size_t end) {
    return match_llama3_like(s, i, end, 3, C(LETTER));
}
static size_t match_qwen2(const char *s, size_t i, size_t end) {
    return match_llama3_like(s, i, end, 1, C(LETTER));
}
static size_t match_qwen35(const char *s, size_t i, size_t end) {
    return match_llama3_like(s, i, end, 1, C(LETTER) | C(MARK));
}

/* Tekken ("tekken": Mistral NeMo) and GPT-4o ("gpt-4o": o200k, Phi-4-mini,
 * Llama 4) tell letters by case.  With U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}],
 * W = [\p{Ll}\p{Lm}\p{Lo}\p{M}] and P = [^\r\n\p{L}\p{N}]:
 *   P?U*W+C?|P?U+W*C?|\p{N}{1,N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * where C = (?i:'s|'t|'re|'ve|'m|'ll|'d) for GPT-4o and nothing for Tekken.
 * (llama.cpp runs its own rewrite, with [^a-z] and [^A-Z] letters for U and
 * W and no marks: posenc runs the tokenizer.json pattern.) */
enum { IN_U = 1, IN_W = 2 };

static int case_set(const char *s, size_t i, size_t end, size_t *clen) {
    uint32_t cp;
    int k = utf8_decode((const unsigned char *)s + i, end - i, &cp);
    *clen = k > 0 ? (size_t)k : 1;
    UnicodeClass cls = k > 0 ? unicode_class(cp) : UCLASS_OTHER;
    if (cls == UCLASS_MARK) return IN_U | IN_W;
    if (cls != UCLASS_LETTER) return 0;
    UnicodeCase c = unicode_case(cp);
    return c == UCASE_UPPER ? IN_U : c == UCASE_LOWER ? IN_W : IN_U | IN_W;
}

static size_t run_in(const char *s, size_t i, size_t end, int set) {
    size_t clen;
    while (i < end && (case_set(s, i, end, &clen) & set)) i += clen;
    return i;
}

/* End of U*W+ from p, or 0.  U* gives back characters from its end until W+
 * can start: at the first character after the U run (then a \p{Ll}), else
 * at the run's last character that is in W too. */
static size_t upper_then_lower(const char *s, size_t p, size_t end) {
    size_t w = SIZE_MAX, clen;
    for (int set; p < end && ((set = case_set(s, p, end, &clen)) & IN_U); p += clen)
        if (set & IN_W) w = p;
    if (p < end && (case_set(s, p, end, &clen) & IN_W)) w = p;
    return w == SIZE_MAX ? 0 : run_in(s, w, end, IN_W);
}

/* End of U+W* from p, or 0. */
static size_t upper_run(const char *s, size_t p, size_t end) {
    size_t u = run_in(s, p, end, IN_U);
    return u == p ? 0 : run_in(s, u, end, IN_W);
}

static size_t match_cased(const char *s, size_t i, size_t end, int max_digits, int contractions) {
    size_t c0len, clen;
    UnicodeClass c0 = class_at(s, i, end, &c0len);
    int prefix = c0 != UCLASS_LETTER && c0 != UCLASS_NUMBER && !is_nl(s[i]);
    for (int alt = 0; alt < 2; alt++)
        for (int p = prefix; p >= 0; p--) { /* P? takes its character first */
            size_t from = i + (p ? c0len : 0);
            size_t e = alt ? upper_run(s, from, end) : upper_then_lower(s, from, end);
            if (e) return e - i + (contractions && e < end ? contraction(s, e, end) : 0);
        }
    if (c0 == UCLASS_NUMBER) return digits(s, i, end, max_digits);
    unsigned other = ~(C(SPACE) | C(LETTER) | C(NUMBER));
    size_t j = s[i] == ' ' && i + 1 < end && (other >> class_at(s, i + 1, end, &clen) & 1) ? i + 1 : i;
    if (other >> class_at(s, j, end, &clen) & 1) {
        size_t k = run_of(s, j, end, other);
        while (k < end && (is_nl(s[k]) || s[k] == '/')) k++;
        return k - i;
    }
    return whitespace(s, i, end);
}
static size_t match_tekken(const char *s, size_t i, size_t end) { return match_cased(s, i, end, 1, 0); }
static size_t match_gpt4o(const char *s, size_t i, size_t end) { return match_cased(s, i, end, 3, 1); }

/* DeepSeek-V3 ("deepseek-v3"), three splits:
 *   \p{N}{1,3}
 *   [一-龥\u3040-ゟ゠-ヿ]+            (U+4E00-9FA5, U+3040-30FF)
 *   [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
 *   | ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t match_digits3(const char *s, size_t i, size_t end) { return digits(s, i, end, 3); }

static size_t match_cjk_kana(const char *s, size_t i, size_t end) {
    size_t k = i;
    for (;;) {
        uint32_t cp;
        int n = k < end ? utf8_decode((const unsigned char *)s + k, end - k, &cp) : 0;
        if (n == 0 || !((cp >= 0x4E00 && cp <= 0x9FA5) || (cp >= 0x3040 && cp <= 0x30FF))) break;
        k += (size_t)n;
    }
    return k - i;
}

static int is_ascii_letter(char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }

static size_t match_deepseek_v3_words(const char *s, size_t i, size_t end) {
    if (end - i >= 2 && s[i] > ' ' && s[i] < 0x7F && !is_ascii_letter(s[i]) &&
        !(s[i] >= '0' && s[i] <= '9') && is_ascii_letter(s[i + 1])) {
        size_t k = i + 1;
        while (k < end && is_ascii_letter(s[k])) k++;
        return k - i;
    }
    size_t c0len, c1len = 0;
    UnicodeClass c0 = class_at(s, i, end, &c0len), c1 = UCLASS_OTHER;
    if (i + c0len < end) c1 = class_at(s, i + c0len, end, &c1len);
    unsigned word = C(LETTER) | C(MARK), punct = C(PUNCT) | C(SYMBOL);
    if (word >> c0 & 1) return run_of(s, i, end, word) - i;
    if (!is_nl(s[i]) && !(punct >> c0 & 1) && (word >> c1 & 1))
        return run_of(s, i + c0len, end, word) - i;
    size_t j = s[i] == ' ' && (punct >> c1 & 1) ? i + 1 : i;
    if (punct >> class_at(s, j, end, &c1len) & 1) {
        size_t k = run_of(s, j, end, punct);
        while (k < end && is_nl(s[k])) k++;
        return k - i;
    }
    return c0 == UCLASS_SPACE ? whitespace(s, i, end) : 0;
}

/* StarCoder ("starcoder" and kin), two splits: every digit alone, then
 * GPT-2's pattern (llama.cpp spells it without the final \s+, which only
 * ever matches what the splits leave as a piece of its own anyway). */
static size_t match_digit(const char *s, size_t i, size_t end) { return digits(s, i, end, 1); }

/* BLOOM ("bloom", "poro-chat", "gpt3-finnish"):  ?[^(\s|.,!?…。，、।۔،)]+
 * a run of anything but whitespace and these stops, after at most one space. */
static int is_bloom_stop(const char *s, size_t i, size_t end, size_t *clen) {
    static const uint32_t stops[] = {'(', '|', '.', ',', '!', '?', ')', 0x2026, 0x3002,
                                     0xFF0C, 0x3001, 0x0964, 0x06D4, 0x060C};
    if (class_at(s, i, end, clen) == UCLASS_SPACE) return 1;
    uint32_t cp;
    if (utf8_decode((const unsigned char *)s + i, end - i, &cp) <= 0) return 0;
    for (size_t k = 0; k < sizeof stops / sizeof *stops; k++)
        if (cp == stops[k]) return 1;
    return 0;
}

static size_t match_bloom(const char *s, size_t i, size_t end) {
    size_t k = i, clen;
    if (s[i] == ' ' && i + 1 < end && !is_bloom_stop(s, i + 1, end, &clen)) k++;
    while (k < end && !is_bloom_stop(s, k, end, &clen)) k += clen;
    return k - i; /* a space taken is followed by at least one character that is not a stop */
}

typedef struct {
    int n_levels;
    SplitMatch levels[3];
    const char *regex[3];    /* each level's pattern as tokenizer.json spells it */
} PretokPattern;

#define REGEX_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define REGEX_BLOOM " ?[^(\\s|.,!?\xE2\x80\xA6\xE3\x80\x82\xEF\xBC\x8C\xE3\x80\x81\xE0\xA5\xA4\xDB\x94\xD8\x8C)]+"
#define REGEX_WS "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define REGEX_CONTRACTIONS "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
#define REGEX_LLAMA3(DIGITS) REGEX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" DIGITS \
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" REGEX_WS
#define REGEX_U "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"
#define REGEX_W "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"
#define REGEX_CASED(SUFFIX, DIGITS) "[^\\r\\n\\p{L}\\p{N}]?" REGEX_U "*" REGEX_W "+" SUFFIX \
    "|[^\\r\\n\\p{L}\\p{N}]?" REGEX_U "+" REGEX_W "*" SUFFIX "|" DIGITS \
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|" REGEX_WS

static const PretokPattern patterns[] = {
    [PRETOK_GPT2] = {1, {match_gpt2}, {REGEX_GPT2}},
    [PRETOK_LLAMA3] = {1, {match_llama3}, {REGEX_LLAMA3("\\p{N}{1,3}")}},
    [PRETOK_QWEN2] = {1, {match_qwen2}, {REGEX_LLAMA3("\\p{N}")}},
    [PRETOK_QWEN35] = {1, {match_qwen35},
        {REGEX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}"
         "| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|" REGEX_WS}},
    [PRETOK_TEKKEN] = {1, {match_tekken}, {REGEX_CASED("", "\\p{N}")}},
    [PRETOK_GPT4O] = {1, {match_gpt4o}, {REGEX_CASED(REGEX_CONTRACTIONS "?", "\\p{N}{1,3}")}},
    [PRETOK_DEEPSEEK_V3] = {3,
        {match_digits3, match_cjk_kana, match_deepseek_v3_words},
        {"\\p{N}{1,3}",
         "[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-\xE3\x83\xBF]+",
         "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
         "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}},
    [PRETOK_STARCODER] = {2, {match_digit, match_gpt2}, {"\\p{N}", REGEX_GPT2}},
    [PRETOK_BLOOM] = {1, {match_bloom}, {REGEX_BLOOM}},
    [PRETOK_VIKING] = {2, {match_bloom, match_digit}, {REGEX_BLOOM, "\\p{N}"}},
};

int pretok_find_regexes(const char *const *regexes, int n) {
    for (int k = 0; k < PRETOK_COUNT; k++) {
        int same = patterns[k].n_levels == n;
        for (int l = 0; same && l < n; l++) same = strcmp(patterns[k].regex[l], regexes[l]) == 0;
        if (same) return k;
    }
    return -1;
}

/* Every name llama.cpp (llama-vocab.cpp of September 2026) gives a "gpt2"
 * vocabulary's pre-tokenizer: the pattern posenc runs for it and whether
 * llama.cpp skips the merges of a pre-token that is a whole piece, or why
 * posenc refuses it.  A name is taken where llama.cpp's regex list is the
 * family's tokenizer.json pattern (its spelling of the case-insensitive
 * contractions and of GPT-2's final \s+ aside). */
#define APPROXIMATED "llama.cpp's regex list for it is its own rewrite of the family's " \
    "tokenizer.json steps (approximate classes, a step left out), not the pattern itself"
#define CUSTOM "llama.cpp splits it with code of its own, not a pattern"
#define UNVERIFIED "its pattern is not one posenc implements (no family of these models uses it, " \
    "and no tokenizer.json on npm has it to verify one against)"
#define NOT_BYTE_LEVEL "llama.cpp runs it over characters, not GPT-2's bytes, on a \"gpt2\" vocabulary"
static const struct {
    const char *name;
    int kind;          /* PretokKind, or -1: refused */
    int ignore_merges;
    const char *why;   /* why it is refused */
} pre_names[] = {
    {"gpt-2", PRETOK_GPT2, 0, NULL}, {"phi-2", PRETOK_GPT2, 0, NULL},
    {"roberta-bpe", PRETOK_GPT2, 0, NULL}, {"jina-es", PRETOK_GPT2, 0, NULL},
    {"jina-de", PRETOK_GPT2, 0, NULL}, {"jina-v1-en", PRETOK_GPT2, 0, NULL},
    {"jina-v2-es", PRETOK_GPT2, 0, NULL}, {"jina-v2-de", PRETOK_GPT2, 0, NULL},
    {"jina-v2-code", PRETOK_GPT2, 0, NULL}, {"gigachat", PRETOK_GPT2, 0, NULL},
    {"mpt", PRETOK_GPT2, 0, NULL}, {"olmo", PRETOK_GPT2, 0, NULL}, {"jais", PRETOK_GPT2, 0, NULL},
    {"a.x-4.0", PRETOK_GPT2, 0, NULL}, {"mellum", PRETOK_GPT2, 0, NULL},
    {"modern-bert", PRETOK_GPT2, 0, NULL}, {"trillion", PRETOK_GPT2, 0, NULL},
    {"granite-docling", PRETOK_GPT2, 0, NULL}, {"exaone4", PRETOK_GPT2, 0, NULL},
    {"llama-bpe", PRETOK_LLAMA3, 1, NULL}, {"llama3", PRETOK_LLAMA3, 1, NULL},
    {"llama-v3", PRETOK_LLAMA3, 1, NULL}, {"falcon3", PRETOK_LLAMA3, 1, NULL},
    {"falcon-h1", PRETOK_LLAMA3, 1, NULL}, {"pixtral", PRETOK_LLAMA3, 1, NULL},
    {"midm-2.0", PRETOK_LLAMA3, 1, NULL}, {"lfm2", PRETOK_LLAMA3, 1, NULL},
    {"jina-v5-nano", PRETOK_LLAMA3, 1, NULL}, {"dbrx", PRETOK_LLAMA3, 0, NULL},
    {"smaug-bpe", PRETOK_LLAMA3, 0, NULL}, {"chatglm-bpe", PRETOK_LLAMA3, 0, NULL},
    {"glm4", PRETOK_LLAMA3, 0, NULL},
    {"qwen2", PRETOK_QWEN2, 0, NULL}, {"deepseek-r1-qwen", PRETOK_QWEN2, 0, NULL},
    {"kormo", PRETOK_QWEN2, 0, NULL}, {"f2llmv2", PRETOK_QWEN2, 0, NULL},
    {"megrez", PRETOK_QWEN2, 0, NULL}, {"stablelm2", PRETOK_QWEN2, 0, NULL},
    {"hunyuan", PRETOK_QWEN2, 0, NULL}, {"solar-open", PRETOK_QWEN2, 0, NULL},
    {"grok-2", PRETOK_QWEN2, 0, NULL},
    {"qwen35", PRETOK_QWEN35, 0, NULL},
    {"deepseek-v3", PRETOK_DEEPSEEK_V3, 0, NULL}, {"hunyuan-dense", PRETOK_DEEPSEEK_V3, 0, NULL},
    {"joyai-llm", PRETOK_DEEPSEEK_V3, 0, NULL},
    {"starcoder", PRETOK_STARCODER, 0, NULL}, {"refact", PRETOK_STARCODER, 0, NULL},
    {"command-r", PRETOK_STARCODER, 0, NULL}, {"smollm", PRETOK_STARCODER, 0, NULL},
    {"codeshell", PRETOK_STARCODER, 0, NULL}, {"exaone", PRETOK_STARCODER, 0, NULL},
    {"minerva-7b", PRETOK_STARCODER, 0, NULL}, {"mellum2", PRETOK_STARCODER, 0, NULL},
    {"bloom", PRETOK_BLOOM, 0, NULL}, {"poro-chat", PRETOK_BLOOM, 0, NULL},
    {"gpt3-finnish", PRETOK_BLOOM, 0, NULL},
    {"viking", PRETOK_VIKING, 0, NULL},
    {"tekken", PRETOK_TEKKEN, 1, NULL},
    {"gpt-4o", PRETOK_GPT4O, 0, NULL}, {"llama4", PRETOK_GPT4O, 0, NULL},
    {"kanana2", PRETOK_GPT4O, 0, NULL}, {"talkie", PRETOK_GPT4O, 0, NULL},
    {"minimax-m2", PRETOK_GPT4O, 0, NULL},
    {"deepseek-llm", -1, 0, APPROXIMATED}, {"deepseek-coder", -1, 0, APPROXIMATED},
    {"falcon", -1, 0, APPROXIMATED}, {"default", -1, 0, APPROXIMATED},
    {"chameleon", -1, 0, APPROXIMATED}, {"granite-embed-multi-97m", -1, 0, APPROXIMATED},
    {"kimi-k2", -1, 0, CUSTOM}, {"afmoe", -1, 0, CUSTOM},
    {"gemma4", -1, 0, NOT_BYTE_LEVEL}, {"granite-embed-multi-311m", -1, 0, NOT_BYTE_LEVEL},
    {"sarvam-moe", -1, 0, NOT_BYTE_LEVEL}, {"whitespace", -1, 0, NOT_BYTE_LEVEL},
    {"jais-2", -1, 0, UNVERIFIED}, {"youtu", -1, 0, UNVERIFIED}, {"exaone-moe", -1, 0, UNVERIFIED},
    {"tiny_aya", -1, 0, UNVERIFIED}, {"cohere2moe", -1, 0, UNVERIFIED},
    {"superbpe", -1, 0, UNVERIFIED}, {"bailingmoe", -1, 0, UNVERIFIED},
    {"bailingmoe2", -1, 0, UNVERIFIED}, {"llada-moe", -1, 0, UNVERIFIED},
    {"seed-coder", -1, 0, UNVERIFIED}, {"laguna", -1, 0, UNVERIFIED},
    {"minicpm5", -1, 0, UNVERIFIED},
};
#define N_PRE_NAMES (sizeof pre_names / sizeof *pre_names)

int pretok_find_name(const char *name, int *ignore_merges, const char **why) {
    *why = NULL;
    for (size_t k = 0; k < N_PRE_NAMES; k++)
        if (strcmp(pre_names[k].name, name) == 0) {
            *ignore_merges = pre_names[k].ignore_merges;
            *why = pre_names[k].why;
            return pre_names[k].kind;
        }
    return -1;
}

/* Splits s[start, end) at one level; pushes the end offsets of the final pieces. */
static void split_level(const SplitMatch *levels, int n_levels, const char *s, size_t start,
                        size_t end, IntBuf *ends) {
    if (n_levels == 0) {
        intbuf_push(ends, (int)end);
        return;
    }
    size_t gap = start, i = start, clen;
    while (i < end) {
        size_t m = levels[0](s, i, end);
        if (m == 0) {
            class_at(s, i, end, &clen);
            i += clen;
            continue;
        }
        if (gap < i) split_level(levels + 1, n_levels - 1, s, gap, i, ends);
        split_level(levels + 1, n_levels - 1, s, i, i + m, ends);
        gap = i += m;
    }
    if (gap < end) split_level(levels + 1, n_levels - 1, s, gap, end, ends);
}

void pretokenize(PretokKind kind, const char *s, size_t start, size_t end, IntBuf *ends) {
    const PretokPattern *p = &patterns[kind];
    split_level(p->levels, p->n_levels, s, start, end, ends);
}
