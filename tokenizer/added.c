/* Added pieces (tokenizer.json's added_tokens, GGUF's user-defined and
 * control tokens) split the text before the model, in the kinds that have
 * them: GPT2, HF_BPE, HF_UNIGRAM.  The longest at the leftmost place where
 * one starts is taken, as Hugging Face's added-token splitter does, with the
 * whitespace beside it when it lstrips/rstrips; the model never sees them,
 * and the text on either side is encoded alone. */
#include "tokenizer/tokenizer_impl.h"

void added_pieces_init(Tokenizer *t) {
    static const int user_only[7] = {[TOKEN_USER_DEFINED] = 1};
    static const int user_and_control[7] = {[TOKEN_USER_DEFINED] = 1, [TOKEN_CONTROL] = 1};
    piece_trie_build(&t->added_trie, t, user_only);
    piece_trie_build(&t->special_trie, t, user_and_control);
}

void added_pieces_free(Tokenizer *t) {
    piece_trie_free(&t->added_trie);
    piece_trie_free(&t->special_trie);
}

/* Where the run of White_Space characters that ends at s[end] starts, no
 * earlier than `lo` (an lstrip token takes it). */
static size_t space_run_start(const char *s, size_t lo, size_t end) {
    while (end > lo) {
        size_t c = end - 1, clen;
        while (c > lo && ((unsigned char)s[c] & 0xC0) == 0x80 && end - c < 4) c--;
        if (utf8_class(s + c, end - c, &clen) != UCLASS_SPACE || c + clen != end) break;
        end = c;
    }
    return end;
}

/* Where the run of White_Space characters that starts at s[start] ends
 * (an rstrip token takes it). */
static size_t space_run_end(const char *s, size_t start, size_t len) {
    size_t clen;
    while (start < len && utf8_class(s + start, len - start, &clen) == UCLASS_SPACE) start += clen;
    return start;
}

int added_pieces_encode(const Tokenizer *t, const char *text, size_t len,
                        SectionEncodeFn encode_section, IntBuf *out, TokScratch *s,
                        PosencError *err) {
    if (len >= INT32_MAX) return posenc_error(err, "text too long to encode");
    const PieceTrie *added = t->parse_special ? &t->special_trie : &t->added_trie;
    size_t section = 0;
    for (size_t i = 0; added->n_nodes && i < len; i++) {
        size_t m = piece_trie_longest(added, text + i, len - i);
        if (m == 0) continue;
        int id = tokenizer_lookup(t, text + i, m), flags = t->added_flags ? t->added_flags[id] : 0;
        size_t start = flags & ADDED_LSTRIP ? space_run_start(text, section, i) : i;
        size_t stop = flags & ADDED_RSTRIP ? space_run_end(text, i + m, len) : i + m;
        if (section < start && encode_section(t, text, section, start, out, s, err)) return -1;
        intbuf_push(out, id);
        section = stop;
        i = section - 1;
    }
    return section < len ? encode_section(t, text, section, len, out, s, err) : 0;
}
