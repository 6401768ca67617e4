/* A byte trie over pieces, for prefix searches: the unigram lattice walks
 * it from every character, the user-defined matcher takes its longest hit. */
#include "tokenizer/tokenizer_impl.h"

int piece_trie_step(const PieceTrie *pt, int node, unsigned char c) {
    if (node < 0) return pt->root[c];
    for (int k = pt->nodes[node].first_child; k >= 0; k = pt->nodes[k].next_sibling)
        if (pt->nodes[k].label == c) return k;
    return -1;
}

static int add_child(PieceTrie *pt, int parent, unsigned char c) {
    if ((size_t)pt->n_nodes == pt->cap)
        buf_reserve((void **)&pt->nodes, &pt->cap, pt->cap, 1, sizeof(PieceTrieNode));
    int id = pt->n_nodes++;
    PieceTrieNode *nd = &pt->nodes[id];
    nd->first_child = -1;
    nd->value = -1;
    nd->label = c;
    if (parent < 0) {
        nd->next_sibling = -1;
        pt->root[c] = id;
    } else {
        nd->next_sibling = pt->nodes[parent].first_child;
        pt->nodes[parent].first_child = id;
    }
    return id;
}

void piece_trie_build(PieceTrie *pt, const Tokenizer *t, const int keep[7]) {
    memset(pt, 0, sizeof *pt);
    for (int c = 0; c < 256; c++) pt->root[c] = -1;
    for (int id = 0; id < t->vocab_size; id++) {
        if (!keep[t->types[id]]) continue;
        int node = -1;
        for (const unsigned char *p = (const unsigned char *)t->pieces[id]; *p; p++) {
            int next = piece_trie_step(pt, node, *p);
            node = next >= 0 ? next : add_child(pt, node, *p);
        }
        if (node >= 0 && pt->nodes[node].value < 0) pt->nodes[node].value = id;
    }
}

void piece_trie_free(PieceTrie *pt) {
    free(pt->nodes);
    memset(pt, 0, sizeof *pt);
}

size_t piece_trie_longest(const PieceTrie *pt, const char *s, size_t n) {
    size_t best = 0;
    int node = -1;
    for (size_t i = 0; i < n && pt->n_nodes > 0; i++) {
        node = piece_trie_step(pt, node, (unsigned char)s[i]);
        if (node < 0) break;
        if (pt->nodes[node].value >= 0) best = i + 1;
    }
    return best;
}
