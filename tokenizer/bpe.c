/* The merge loop shared by every BPE flavour: a binary heap of candidate
 * pairs over a linked list of symbols, O(n log n) instead of rescanning
 * all pairs after each merge.  Stale heap entries are dropped when popped. */
#include "tokenizer/tokenizer_impl.h"

/* a is popped before b */
static int pair_before(const BpePair *a, const BpePair *b) {
    return a->priority > b->priority || (a->priority == b->priority && a->left < b->left);
}

static void heap_push(BpeHeap *h, BpePair p) {
    if (h->n == h->cap) buf_reserve((void **)&h->heap, &h->cap, h->n, 1, sizeof(BpePair));
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!pair_before(&p, &h->heap[parent])) break;
        h->heap[i] = h->heap[parent];
        i = parent;
    }
    h->heap[i] = p;
}

static BpePair heap_pop(BpeHeap *h) {
    BpePair top = h->heap[0], last = h->heap[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && pair_before(&h->heap[c + 1], &h->heap[c])) c++;
        if (!pair_before(&h->heap[c], &last)) break;
        h->heap[i] = h->heap[c];
        i = c;
    }
    if (h->n > 0) h->heap[i] = last;
    return top;
}

typedef struct {
    BpeSymbol *syms;
    BpePairFn pair_fn;
    const void *ctx;
    BpeHeap *heap;
    BpeHeap pending; /* pairs created during a rank batch */
    int batching;
} Merger;

static void add_pair(Merger *m, int left, int right) {
    if (left < 0 || right < 0) return;
    const BpeSymbol *a = &m->syms[left], *b = &m->syms[right];
    if (a->frozen || b->frozen) return;
    BpePair p = {0, left, right, a->len + b->len, -1};
    if (!m->pair_fn(m->ctx, a, b, &p.priority, &p.result)) return;
    if (m->batching) {
        if (m->pending.n == m->pending.cap)
            buf_reserve((void **)&m->pending.heap, &m->pending.cap, m->pending.n, 1,
                        sizeof(BpePair));
        m->pending.heap[m->pending.n++] = p;
    } else {
        heap_push(m->heap, p);
    }
}

static int pair_live(const BpeSymbol *syms, const BpePair *p) {
    return syms[p->left].len > 0 && syms[p->right].len > 0 &&
           syms[p->left].len + syms[p->right].len == p->len;
}

void bpe_merge(BpeSymbol *syms, int n, BpePairFn pair_fn, const void *ctx, int rank_batches,
               BpeHeap *heap) {
    Merger m = {syms, pair_fn, ctx, heap, {0}, 0};
    heap->n = 0;
    for (int i = 1; i < n; i++) add_pair(&m, i - 1, i);
    while (heap->n > 0) {
        BpePair top = heap_pop(heap);
        if (!pair_live(syms, &top)) continue;
        BpeSymbol *a = &syms[top.left], *b = &syms[top.right];
        a->len += b->len;
        a->id = top.result;
        a->next = b->next;
        if (b->next >= 0) syms[b->next].prev = top.left;
        b->len = 0;
        m.batching = rank_batches;
        add_pair(&m, a->prev, top.left);
        add_pair(&m, top.left, a->next);
        if (!rank_batches) continue;
        /* the batch ends when no live pair of this priority is left */
        while (heap->n > 0 && !pair_live(syms, &heap->heap[0])) heap_pop(heap);
        if (heap->n > 0 && heap->heap[0].priority == top.priority) continue;
        for (size_t i = 0; i < m.pending.n; i++) heap_push(heap, m.pending.heap[i]);
        m.pending.n = 0;
    }
    free(m.pending.heap);
}
