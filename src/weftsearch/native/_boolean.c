/*
 * BM25 top-k of a conjunctive query tree over one snapshot's packed postings, in one call
 * (weftsearch.native.boolean binds it; weftsearch.scorers.bm25.conjunction lays out its lists).
 *
 * The query is a flat list of clauses, in the order weftsearch.scorers.bm25.tree sums them:
 *   role 0  must term     (one analysed term: a slot)
 *   role 1  must phrase   (n consecutive slots, with a slop; needs positions)
 *   role 2  should term   (added when the document holds it)
 *   role 3  must_not term (the document is dropped when it holds it)
 * A document matches when it holds every must slot (a phrase's terms included), is mapped to a
 * live, allowed internal id, holds no must_not term and every must phrase occurs in it. Its
 * score is, with c = (w * impact(tf, d)) * boost per clause and impact(tf, d) =
 * (tf * (k1 + 1.0)) / (tf + norm(d)):
 *     s = 0.0;  s = s + c  for each must clause, then each matched should clause, in order;
 *     s = s * root_boost
 * which is tree.py's numpy evaluation operation for operation (a phrase's tf is its frequency,
 * its w the sum of its terms' IDFs, computed by the caller), so the bits are the same
 * (built with -ffp-contract=off and no fast-math).
 *
 * Traversal, per segment: the rarest must slot drives; every other must slot is advanced to the
 * candidate by its blocks' last ids (whole blocks skipped without decoding) and a block is
 * decoded only when it can hold the candidate; a slot ahead of the candidate moves the driver
 * up to it (leapfrog). Should and must_not lists are advanced the same way, only on candidates.
 * Block-max (once k documents are held): when the driver enters a block, each clause's bound over
 * the window from the candidate to that block's last id is its weight times the largest impact
 * its lists' blocks overlapping the window allow (block table: largest tf, smallest length); a
 * window whose bounds sum below the k-th score is passed without decoding or moving any list.
 *
 * Phrases: positions are passed decoded per list (posting j's positions are
 * positions[starts[j] ..< starts[j + 1]]), and read only for candidates that passed the
 * conjunction, the tombstones, the filter and the must_not clauses. The frequency is the number
 * of first-term positions p0 for which each other term i has a position p_i with
 * max(p_i - i) - min(p_i - i) <= slop (p0 included), found by tree.py's fixpoint.
 *
 * Selection: a min-heap of the k best scores and a store of every document that scored at least
 * the heap's minimum on arrival; every stored document >= the k-th score is returned, best first
 * (score descending, internal id ascending), so the caller applies the key tie rule.
 *
 * The packed-block decoder is a copy of _bm25.c's (docs/FORMAT.md "Compressed postings"): per
 * block of 128, id gaps then tf - 1, bit-packed LSB first at the two widths of the block's widths
 * entry; a full block is decoded in one unrolled pass per width, a partial one value by value.
 * Kept apart so the two kernels change independently.
 *
 * Entry points: weft_boolean_top_k (a table of lists laid out part by part by the caller) and
 * weft_boolean_query (each slot's cached per-term rows, laid out here).
 *
 * Errors are return codes, never aborts: -1 out of memory, -2 bad arguments, -3 a corrupt list
 * (its row index in stats[0]).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define WB_BLOCK 128
#define WB_SHIFT 7
#define WB_MAX_SLOTS 64
#define WB_MAX_CLAUSES 64
#define WB_TF_READS 16 /* tfs of one block read one by one before the block's are decoded */
#define WB_PRUNE_RUN 64    /* driver documents checked alone before the check's worth is judged */
#define WB_PRUNE_PAUSE 1024 /* at most this many driver documents then go without it */
#define WB_PREFETCH 8 /* postings ahead on the driving list whose norms are fetched early */

typedef struct {
    int64_t data;       /* address of uint32 packed words */
    int64_t words;      /* their count */
    int64_t count;      /* postings; 0: the term is absent from this part (nothing else read) */
    int64_t meta;       /* address of uint32[4 * n_blocks]: last ids, max tfs, min lengths, widths */
    int64_t n_blocks;   /* ceil(count / 128) */
    int64_t pos_words;  /* address of the term's uint32 packed positions (a phrase's slot; else 0) */
    int64_t pos_n;      /* their count of words */
    int64_t pos_widths; /* address of uint8 bit width per chunk of 128 position codes */
    int64_t n_chunks;   /* chunks */
    int64_t chunk_at;   /* address of int64[n_chunks + 1]: each chunk's first word, the last pos_n */
    int64_t tf_before;  /* address of int64[n_blocks + 1]: positions before each block of postings */
    int64_t spare;
} list_desc;

typedef struct {
    int64_t role, first, n, slop;
} clause_desc;

typedef struct {
    int64_t norms, to_global, base, n_docs;
} part_desc;

typedef struct {
    double score;
    int64_t id;
} scored_id;

static int worse(scored_id a, scored_id b) { return a.score < b.score; }
#include "heap.h"

typedef struct {
    const uint32_t *data, *last, *max_tf, *min_len, *widths;
    int64_t count, n_blocks, pos, block, row;
    int64_t *word_start;
    int tfs_ready;
    int tf_reads; /* tfs of the decoded block read one by one */
    /* positions (a phrase's slot) */
    const uint32_t *pwords;
    const uint8_t *pwidths;
    const int64_t *chunk_at, *tf_before;
    int64_t n_chunks;
    int64_t *at;   /* the candidate's positions, decoded */
    int64_t at_n, at_cap;
    int prefix_ready; /* tf_prefix holds the decoded block's running tf sums */
    /*
     * The buffers last: only the fields above start zeroed (CURSOR_HEAD); these are written
     * before they are read (a decoded block, tfs_ready, prefix_ready), and zeroing them cost
     * ~2 KB of memset per slot per query, 6% of a SciFact intersection's instructions.
     */
    uint32_t ids[WB_BLOCK], tfs[WB_BLOCK];
    int64_t tf_prefix[WB_BLOCK + 1]; /* positions before each posting of the block, from the block's first */
} cursor;

#define CURSOR_HEAD offsetof(cursor, ids)

typedef struct {
    int64_t blocks, blocks_decoded, postings, candidates, scored, corrupt_row, windows_skipped;
} stats_t;

static inline int64_t run_words(int64_t n, unsigned width) { return (n * (int64_t)width + 31) >> 5; }

static inline int64_t block_count(const cursor *c, int64_t block) {
    int64_t start = block << WB_SHIFT;
    return c->count - start < WB_BLOCK ? c->count - start : WB_BLOCK;
}

/* Value i of a run of `width`-bit values (bits i * width ..< (i + 1) * width, inside the run). */
static inline uint64_t value_at(const uint32_t *run, int64_t i, unsigned width) {
    if (!width) return 0;
    uint64_t bit = (uint64_t)i * width, at = bit >> 5;
    unsigned shift = (unsigned)(bit & 31);
    uint64_t value = (uint64_t)run[at] >> shift;
    if (shift + width > 32) value |= (uint64_t)run[at + 1] << (32 - shift);
    return value & (width == 32 ? 0xFFFFFFFFu : (((uint64_t)1 << width) - 1));
}

/* n values of `width` bits from `run` (inside it: n * width bits), as ids (kind 1) or tfs (kind 0). */
static inline uint64_t unpack_run(const uint32_t *run, int64_t n, unsigned width, uint32_t *out, uint64_t acc,
                                  int kind) {
    for (int64_t i = 0; i < n; i++) {
        uint64_t value = value_at(run, i, width);
        if (kind) {
            acc += value + 1;
            out[i] = (uint32_t)acc;
        } else {
            out[i] = (uint32_t)value + 1;
        }
    }
    return acc;
}

/* unpack_full_any: a full block's run decoded in one unrolled pass per width (unpack.h). */
#define UNPACK_BLOCK WB_BLOCK
#include "unpack.h"

/* A run of `n` values: full blocks unrolled by width (0 ..= 32, checked at open), a partial one value by value. */
static uint64_t unpack_block(const uint32_t *in, int64_t n, unsigned width, uint32_t *out, uint64_t acc, int kind) {
    if (n != WB_BLOCK) return unpack_run(in, n, width, out, acc, kind);
    return unpack_full_any(in, width, out, acc, kind);
}

static int decode_block(cursor *c, int64_t block, stats_t *st) {
    if (c->block == block) return 1;
    int64_t n = block_count(c, block);
    unsigned width = c->widths[block] & 0xFF;
    int64_t id = block > 0 ? (int64_t)c->last[block - 1] : -1;
    id = (int64_t)unpack_block(c->data + c->word_start[block], n, width, c->ids, (uint64_t)id, 1);
    if (id != (int64_t)c->last[block]) {
        st->corrupt_row = c->row;
        c->pos = c->count; /* reads as exhausted from here on */
        return 0;
    }
    c->block = block;
    c->tfs_ready = 0;
    c->tf_reads = 0;
    c->prefix_ready = 0;
    st->blocks_decoded++;
    return 1;
}

/* The decoded block's tfs, all of them (a phrase's positions need their running sums). */
static inline void decode_tfs(cursor *c) {
    if (c->tfs_ready) return;
    int64_t n = block_count(c, c->block);
    unsigned wid = c->widths[c->block] & 0xFF, wtf = (c->widths[c->block] >> 8) & 0xFF;
    unpack_block(c->data + c->word_start[c->block] + run_words(n, wid), n, wtf, c->tfs, 0, 0);
    c->tfs_ready = 1;
}

/*
 * The tf of the posting the cursor stands on (its block decoded). A tf is read straight from
 * its bits (value i of a run is bits i * width ..< (i + 1) * width), since a sparse conjunction
 * reads a few tfs of each block it enters and decoding the block's 128 cost more than the rest
 * of the candidate; past WB_TF_READS reads in one block, the block's tfs are decoded at once.
 */
static inline uint32_t tf_now(cursor *c) {
    if (!c->tfs_ready) {
        if (++c->tf_reads <= WB_TF_READS) {
            int64_t n = block_count(c, c->block);
            unsigned wid = c->widths[c->block] & 0xFF, wtf = (c->widths[c->block] >> 8) & 0xFF;
            const uint32_t *run = c->data + c->word_start[c->block] + run_words(n, wid);
            return (uint32_t)value_at(run, c->pos & (WB_BLOCK - 1), wtf) + 1;
        }
        decode_tfs(c);
    }
    return c->tfs[c->pos & (WB_BLOCK - 1)];
}

/*
 * The first block at or after `from` whose last id is >= target (n_blocks: none), by the last ids
 * alone: gallop, then search the bracket, so a long skip costs O(log blocks).
 */
static inline int64_t block_at_least(const cursor *c, int64_t from, int64_t target) {
    if (from >= c->n_blocks || (int64_t)c->last[from] >= target) return from;
    int64_t low = from + 1, step = 1, high = low;
    while (high < c->n_blocks && (int64_t)c->last[high] < target) {
        low = high + 1;
        high += step;
        step <<= 1;
    }
    if (high > c->n_blocks) high = c->n_blocks;
    while (low < high) {
        int64_t mid = low + (high - low) / 2;
        if ((int64_t)c->last[mid] < target)
            low = mid + 1;
        else
            high = mid;
    }
    return low;
}

/*
 * Move to the first posting whose id is >= target: whole blocks by their last ids (no decoding),
 * then the one block that holds it. Returns its id, -1 past the end, -3 corrupt.
 */
static __attribute__((noinline)) int64_t advance_far(cursor *c, int64_t target, stats_t *st) {
    if (c->pos >= c->count) return -1;
    int64_t block = c->pos >> WB_SHIFT;
    if ((int64_t)c->last[block] < target) {
        block = block_at_least(c, block + 1, target);
        if (block >= c->n_blocks) {
            c->pos = c->count;
            return -1;
        }
        c->pos = block << WB_SHIFT;
    }
    if (!decode_block(c, block, st)) return -3;
    int64_t i = c->pos & (WB_BLOCK - 1);
    if (i + 16 < block_count(c, block) && (int64_t)c->ids[i + 16] < target) {
        /*
         * Far ahead: search the rest of the block (its last id is >= target, so the answer is in
         * it) without branches: each step keeps the half that holds the first id >= target,
         * by a conditional move, since the branch of a binary search is a coin toss.
         */
        const uint32_t *first = c->ids + i + 17;
        int64_t len = block_count(c, block) - (i + 17);
        while (len > 1) {
            int64_t half = len >> 1;
            first = (int64_t)first[half - 1] < target ? first + half : first;
            len -= half;
        }
        i = first - c->ids;
    } else {
        while ((int64_t)c->ids[i] < target) i++; /* the block's last id is >= target */
    }
    c->pos = (block << WB_SHIFT) + i;
    return c->ids[i];
}

/*
 * advance_far's common case inline: the target is in the decoded block within a few postings
 * of the cursor (a leapfrog between lists of similar length moves a few postings a step).
 */
static inline __attribute__((always_inline)) int64_t advance(cursor *c, int64_t target, stats_t *st) {
    int64_t pos = c->pos;
    if (pos < c->count && c->block == (pos >> WB_SHIFT)) {
        int64_t i = pos & (WB_BLOCK - 1), end = i + 4, n = block_count(c, c->block);
        if (end > n) end = n;
        for (; i < end; i++)
            if ((int64_t)c->ids[i] >= target) {
                c->pos = (c->block << WB_SHIFT) + i;
                return c->ids[i];
            }
    }
    return advance_far(c, target, st);
}

/* Open a cursor on row `row`; 0 when its table does not describe its words (a corrupt list). */
static int open_cursor(cursor *c, const list_desc *l, int64_t row, int64_t *word_start, int64_t n_docs) {
    c->data = (const uint32_t *)(uintptr_t)l->data;
    c->last = (const uint32_t *)(uintptr_t)l->meta;
    c->max_tf = c->last + l->n_blocks;
    c->min_len = c->last + 2 * l->n_blocks;
    c->widths = c->last + 3 * l->n_blocks;
    c->count = l->count;
    c->n_blocks = l->n_blocks;
    c->pos = 0;
    c->block = -1;
    c->row = row;
    c->word_start = word_start;
    c->pwords = (const uint32_t *)(uintptr_t)l->pos_words;
    c->pwidths = (const uint8_t *)(uintptr_t)l->pos_widths;
    c->chunk_at = (const int64_t *)(uintptr_t)l->chunk_at;
    c->tf_before = (const int64_t *)(uintptr_t)l->tf_before;
    c->n_chunks = l->n_chunks;
    c->at_n = 0;
    int64_t word = 0;
    for (int64_t block = 0; block < c->n_blocks; block++) {
        uint32_t widths = c->widths[block];
        if ((widths & 0xFF) > 32 || ((widths >> 8) & 0xFF) > 32 || (widths >> 16) != 0 ||
            (block > 0 && c->last[block] <= c->last[block - 1]))
            return 0;
        word_start[block] = word;
        int64_t n = block_count(c, block);
        word += run_words(n, widths & 0xFF) + run_words(n, (widths >> 8) & 0xFF);
    }
    if (word != l->words || (int64_t)c->last[c->n_blocks - 1] >= n_docs) return 0;
    if (!c->pwords) return 1;
    /*
     * A phrase's slot: the positions tables must describe the words (the reader checked the
     * positions themselves; this O(blocks + chunks) check keeps every read below inside them).
     */
    if (c->tf_before[0] != 0) return 0;
    /* Each entry bounded before the next sum: a crafted one near INT64_MAX must not wrap it. */
    for (int64_t block = 0; block < c->n_blocks; block++)
        if (c->tf_before[block + 1] > ((int64_t)1 << 40) ||
            c->tf_before[block + 1] < c->tf_before[block] + block_count(c, block)) /* tf >= 1 */
            return 0;
    int64_t total = c->tf_before[c->n_blocks];
    if (c->n_chunks != (total + WB_BLOCK - 1) / WB_BLOCK || c->chunk_at[0] != 0 ||
        c->chunk_at[c->n_chunks] != l->pos_n)
        return 0;
    for (int64_t chunk = 0; chunk < c->n_chunks; chunk++) {
        int64_t n = total - chunk * WB_BLOCK < WB_BLOCK ? total - chunk * WB_BLOCK : WB_BLOCK;
        if (c->pwidths[chunk] > 32 || c->chunk_at[chunk + 1] - c->chunk_at[chunk] != run_words(n, c->pwidths[chunk]))
            return 0;
    }
    return 1;
}

/*
 * Decode the positions of the posting the cursor stands on into c->at (first code absolute,
 * then gap - 1): where they start is the positions before its block plus its block's tfs before
 * it. 1: done, 0: out of memory, -3: the tables disagree with the tfs (corrupt).
 */
static int decode_positions(cursor *c) {
    int64_t block = c->pos >> WB_SHIFT, i = c->pos & (WB_BLOCK - 1);
    decode_tfs(c); /* the block's tfs */
    if (!c->prefix_ready) {
        /* Once per decoded block: a candidate's start is then one look-up, not a sum over the block. */
        int64_t n = block_count(c, block), sum = 0;
        for (int64_t j = 0; j < n; j++) {
            c->tf_prefix[j] = sum;
            sum += c->tfs[j];
        }
        c->tf_prefix[n] = sum;
        c->prefix_ready = 1;
    }
    int64_t start = c->tf_before[block] + c->tf_prefix[i];
    int64_t tf = c->tfs[i];
    if (start + tf > c->tf_before[block + 1]) return -3;
    if (tf > c->at_cap) {
        int64_t cap = tf > 2 * c->at_cap ? tf : 2 * c->at_cap; /* <= 2 * 2^40 entries: no overflow */
        int64_t *grown = realloc(c->at, (size_t)cap * sizeof(int64_t));
        if (!grown) return 0;
        c->at = grown;
        c->at_cap = cap;
    }
    /*
     * The codes in a row: the chunk's width and run are looked up when a chunk starts, and the
     * bit offset moves by the width (every read inside the chunk's run, checked at open).
     */
    uint64_t p = 0;
    int64_t x = start;
    for (int64_t t = 0; t < tf;) {
        int64_t chunk = x >> WB_SHIFT, in_chunk = x & (WB_BLOCK - 1);
        int64_t n = WB_BLOCK - in_chunk < tf - t ? WB_BLOCK - in_chunk : tf - t;
        unsigned width = c->pwidths[chunk];
        const uint32_t *run = c->pwords + c->chunk_at[chunk];
        const uint64_t mask = width == 32 ? 0xFFFFFFFFu : (((uint64_t)1 << width) - 1);
        uint64_t bit = (uint64_t)in_chunk * width;
        for (int64_t j = 0; j < n; j++, t++, bit += width) {
            uint64_t value = 0;
            if (width) {
                unsigned shift = (unsigned)(bit & 31);
                const uint32_t *at = run + (bit >> 5);
                value = (uint64_t)at[0] >> shift;
                if (shift + width > 32) value |= (uint64_t)at[1] << (32 - shift);
                value &= mask;
            }
            p = t == 0 ? value : p + value + 1;
            if (p > ((uint64_t)1 << 40)) return -3; /* a document is not that long: a crafted run */
            c->at[t] = (int64_t)p;
        }
        x += n;
    }
    c->at_n = tf;
    return 1;
}

/* Binary search: the first index in [lo, hi) whose position is >= target. */
static inline int64_t lower_bound(const int64_t *p, int64_t lo, int64_t hi, int64_t target) {
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (p[mid] < target)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/*
 * The phrase's frequency in the document its cursors stand on (tree.py's fixpoint), its terms'
 * positions decoded for this document only. -1: out of memory, -3: corrupt.
 */
static int64_t phrase_frequency(cursor **slots, int64_t n, int64_t slop) {
    for (int64_t i = 0; i < n; i++) {
        int done = decode_positions(slots[i]);
        if (done != 1) return done == 0 ? -1 : -3;
    }
    const int64_t *first = slots[0]->at;
    int64_t count = 0;
    if (slop == 0) {
        /*
         * Exact: p0 counts when every term i holds p0 + i (the fixpoint's answer at slop 0). The
         * anchors ascend, so each term's pointer only moves forward: O(positions), no search.
         */
        int64_t at[WB_MAX_SLOTS] = {0};
        for (int64_t j = 0; j < slots[0]->at_n; j++) {
            int64_t anchor = first[j], hit = 1;
            for (int64_t i = 1; i < n && hit; i++) {
                const cursor *c = slots[i];
                while (at[i] < c->at_n && c->at[at[i]] < anchor + i) at[i]++;
                if (at[i] >= c->at_n) return count; /* this term has no position left: no more */
                hit = c->at[at[i]] == anchor + i;
            }
            count += hit;
        }
        return count;
    }
    for (int64_t j = 0; j < slots[0]->at_n; j++) {
        int64_t anchor = first[j], low = anchor - slop;
        for (;;) {
            int64_t furthest = anchor, alive = 1;
            for (int64_t i = 1; i < n; i++) {
                /* the next shifted position p - i at or after low */
                int64_t at = lower_bound(slots[i]->at, 0, slots[i]->at_n, low + i);
                if (at >= slots[i]->at_n) {
                    alive = 0;
                    break;
                }
                int64_t next = slots[i]->at[at] - i;
                if (next > furthest) furthest = next;
            }
            if (!alive) break;
            int64_t moved = furthest - slop;
            if (moved <= low) {
                count++;
                break;
            }
            if (moved > anchor) break;
            low = moved;
        }
    }
    return count;
}

/*
 * The largest impact (tf * (k1 + 1)) / (tf + norm) any posting of the cursor's list with an id in
 * [lo, hi] can have, from its blocks' largest tf and smallest length (impact rises with tf and
 * falls with length for k1 >= 0, 0 <= b <= 1): only blocks at or after the cursor's position,
 * which hold every id it can still stand on. -1.0: no block holds an id in [lo, hi]. O(blocks
 * overlapping the window + log skipped), no decoding. The norm is the caller's expression
 * (k1 * (1.0 - b + b * len / avgdl)) in the same order, so a document's norm is >= this one.
 */
static double window_impact(const cursor *c, int64_t lo, int64_t hi, double k1, double b, double avgdl) {
    if (!c || c->pos >= c->count) return -1.0;
    double best = -1.0;
    for (int64_t block = block_at_least(c, c->pos >> WB_SHIFT, lo); block < c->n_blocks; block++) {
        if (block > 0 && (int64_t)c->last[block - 1] + 1 > hi) break;
        double tf = (double)c->max_tf[block];
        double norm = k1 * (1.0 - b + b * (double)c->min_len[block] / avgdl);
        double impact = (tf * (k1 + 1.0)) / (tf + norm);
        if (impact > best) best = impact;
    }
    return best;
}

typedef struct {
    scored_id *heap, *store;
    int64_t size, k, stored, store_cap, store_max;
} selection;

static int offer(selection *sel, double score, int64_t id) {
    scored_id item = {score, id};
    if (sel->size == sel->k && score < sel->heap[0].score) return 1;
    if (sel->stored == sel->store_cap) {
        int64_t cap = sel->store_cap ? 2 * sel->store_cap : 256;
        if (cap > sel->store_max) cap = sel->store_max;
        if (cap <= sel->stored) return 0; /* cannot happen: one entry per candidate */
        scored_id *grown = realloc(sel->store, (size_t)cap * sizeof(scored_id));
        if (!grown) return 0;
        sel->store = grown;
        sel->store_cap = cap;
    }
    sel->store[sel->stored++] = item;
    if (sel->size < sel->k)
        push(sel->heap, &sel->size, item);
    else if (worse(sel->heap[0], item))
        replace_root(sel->heap, sel->size, item);
    return 1;
}

static int best_first(const void *a, const void *b) {
    const scored_id *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/*
 * lists: n_parts * n_slots rows (row p * n_slots + s: slot s in part p); clauses: n_clauses;
 * weights, boosts: one per clause; parts: n_parts. Writes at most out_capacity results and
 * returns how many there are (more than out_capacity: call again with more room); stats: 6 int64.
 */
int64_t weft_boolean_top_k(const list_desc *lists, int64_t n_slots, const clause_desc *clauses, int64_t n_clauses,
                           const double *weights, const double *boosts, double root_boost, const part_desc *parts,
                           int64_t n_parts, double k1, double b, double avgdl, int64_t k, int64_t *ids_out,
                           double *scores_out, int64_t out_capacity, int64_t *stats_out) {
    stats_t st = {0, 0, 0, 0, 0, -1, 0};
    if (n_slots < 1 || n_slots > WB_MAX_SLOTS || n_clauses < 1 || n_clauses > WB_MAX_CLAUSES || n_parts < 0 ||
        k < 1 || out_capacity < 0 || !lists || !clauses || !weights || !boosts || (n_parts && !parts))
        return -2;
    if (n_parts > INT64_MAX / n_slots) return -2;
    int slot_role[WB_MAX_SLOTS];
    for (int64_t s = 0; s < n_slots; s++) slot_role[s] = -1;
    int has_must = 0, has_phrase = 0;
    for (int64_t q = 0; q < n_clauses; q++) {
        const clause_desc *cl = &clauses[q];
        if (cl->role < 0 || cl->role > 3 || cl->first < 0 || cl->n < 1 || cl->first > n_slots - cl->n) return -2;
        if (cl->role != 1 && cl->n != 1) return -2;
        if (cl->role == 1 && (cl->slop < 0 || cl->slop > ((int64_t)1 << 32))) return -2;
        for (int64_t s = cl->first; s < cl->first + cl->n; s++) {
            if (slot_role[s] != -1) return -2; /* every slot belongs to one clause */
            slot_role[s] = (int)cl->role;
        }
        if (cl->role <= 1) has_must = 1;
        if (cl->role == 1) has_phrase = 1;
    }
    for (int64_t s = 0; s < n_slots; s++)
        if (slot_role[s] == -1) return -2;
    if (!has_must) return -2;
    /*
     * Block-max skipping needs every factor of a score positive and finite and the norms' own
     * parameters; otherwise (never from the Python side) every candidate is scored.
     */
    int bounded = k1 >= 0.0 && k1 < INFINITY && b >= 0.0 && b <= 1.0 && avgdl > 0.0 && avgdl < INFINITY &&
                  root_boost > 0.0 && root_boost < INFINITY;
    for (int64_t q = 0; q < n_clauses; q++)
        if (!(weights[q] > 0.0 && weights[q] < INFINITY && boosts[q] > 0.0 && boosts[q] < INFINITY)) bounded = 0;
    /* Bounds of the allocations: the blocks of the largest part's lists, the candidates. */
    int64_t max_blocks = 0, candidates = 0;
    for (int64_t p = 0; p < n_parts; p++) {
        int64_t blocks = 0, fewest = -1;
        for (int64_t s = 0; s < n_slots; s++) {
            const list_desc *l = &lists[p * n_slots + s];
            if (l->count < 0 || l->count > ((int64_t)1 << 32)) return -2;
            if (l->count == 0) {
                if (slot_role[s] <= 1) fewest = 0;
                continue;
            }
            if (!l->data || !l->meta || l->n_blocks != (l->count + WB_BLOCK - 1) / WB_BLOCK) return -2;
            if (slot_role[s] == 1 && (!l->pos_words || !l->pos_widths || !l->chunk_at || !l->tf_before ||
                                      l->n_chunks < 0 || l->pos_n < 0))
                return -2;
            if (slot_role[s] != 1 && l->pos_words) return -2;
            blocks += l->n_blocks; /* <= 64 * 2^25: no overflow */
            st.blocks += l->n_blocks;
            st.postings += l->count;
            if (slot_role[s] <= 1 && (fewest < 0 || l->count < fewest)) fewest = l->count;
        }
        if (blocks > max_blocks) max_blocks = blocks;
        if (fewest > 0) {
            if (candidates > INT64_MAX - fewest) return -2;
            candidates += fewest;
        }
    }
    if ((uint64_t)max_blocks > SIZE_MAX / sizeof(int64_t) - 1) return -1;
    int64_t heap_k = k < candidates ? k : candidates;
    if (heap_k < 1) heap_k = 1;
    if ((uint64_t)heap_k > SIZE_MAX / sizeof(scored_id)) return -1;
    cursor *cursors = malloc((size_t)n_slots * sizeof(cursor));
    int64_t *word_starts = malloc((size_t)(max_blocks + 1) * sizeof(int64_t));
    selection sel = {malloc((size_t)heap_k * sizeof(scored_id)), NULL, 0, heap_k, 0, 0, candidates};
    int64_t result = 0;
    if (cursors) /* position buffers start empty; the block buffers are written before read */
        for (int64_t s = 0; s < n_slots; s++) memset(&cursors[s], 0, CURSOR_HEAD);
    if (!cursors || !word_starts || !sel.heap) {
        result = -1;
        goto done;
    }
    const double kp1 = k1 + 1.0;
    for (int64_t p = 0; p < n_parts && result == 0; p++) {
        const part_desc *part = &parts[p];
        const double *norms = (const double *)(uintptr_t)part->norms;
        const int64_t *to_global = (const int64_t *)(uintptr_t)part->to_global;
        const list_desc *row = &lists[p * n_slots];
        cursor *cur[WB_MAX_SLOTS] = {0};
        int64_t must[WB_MAX_SLOTS], n_must = 0, used = 0, skip = 0;
        for (int64_t s = 0; s < n_slots; s++) {
            if (row[s].count == 0) {
                if (slot_role[s] <= 1) skip = 1; /* a must term absent: nothing in this part */
                continue;
            }
            if (!norms) {
                result = -2;
                goto done;
            }
            cur[s] = &cursors[s];
            if (!open_cursor(cur[s], &row[s], p * n_slots + s, word_starts + used, part->n_docs)) {
                st.corrupt_row = p * n_slots + s;
                result = -3;
                goto done;
            }
            used += row[s].n_blocks;
            if (slot_role[s] <= 1) must[n_must++] = s;
        }
        if (skip) continue;
        /* Rarest first: the driver, then the others by ascending length (the likeliest to refuse). */
        for (int64_t i = 1; i < n_must; i++)
            for (int64_t j = i; j > 0 && cur[must[j]]->count < cur[must[j - 1]]->count; j--) {
                int64_t t = must[j];
                must[j] = must[j - 1];
                must[j - 1] = t;
            }
        cursor *driver = cur[must[0]];
        /* The driver's clause when it is a must term (its contribution is known from its list alone). */
        int64_t driver_clause = -1;
        for (int64_t q = 0; q < n_clauses && bounded; q++)
            if (clauses[q].role == 0 && clauses[q].first == must[0]) driver_clause = q;
        double rest = 0.0; /* the other clauses' bounds over the checked block of the driver */
        int64_t prune_tries = 0, prune_hits = 0, pause = 0, pause_next = WB_PRUNE_RUN;
        int64_t doc = advance(driver, 0, &st), checked = -1;
        while (doc >= 0) {
            /*
             * A candidate's norm (and id map) is one random read of an array of 8 bytes a
             * document: at 1M documents a cache miss per candidate, which bound sparse
             * intersections (two thirds of a query's cycles stalled on it). Asked for here, for
             * this document and one a few postings ahead on the driver, it arrives while the
             * other lists are advanced. Only ids of the decoded block are read (each < n_docs,
             * checked when the list was opened and decoded).
             */
            int64_t ahead = (driver->pos & (WB_BLOCK - 1)) + WB_PREFETCH;
            __builtin_prefetch(&norms[doc]);
            if (ahead < block_count(driver, driver->pos >> WB_SHIFT)) {
                __builtin_prefetch(&norms[driver->ids[ahead]]);
                if (to_global) __builtin_prefetch(&to_global[driver->ids[ahead]]);
            }
            if (bounded && sel.size == k && (driver->pos >> WB_SHIFT) != checked) {
                /*
                 * Block-max: the window from doc to the end of the driver's block. Each clause's
                 * bound is its weight times the largest impact its blocks overlapping the window
                 * allow (a phrase's frequency is at most its first term's tf, and at most every
                 * term's at slop 0); a must clause with no block there means no match in it. When
                 * the sum cannot reach the k-th score, the driver's block is passed, and the next
                 * one bounded, until one can: only that one is decoded, and the other lists are
                 * never moved into the passed ones. The sum is taken in the
                 * score's order with a relative margin of 2^-30 (the roundings of <= 64 clauses
                 * are below 2^-45) and an absolute 2^-1000 (underflow); strictly below: ties stay.
                 */
                int64_t block = driver->pos >> WB_SHIFT, lo = doc, skipped = 0;
                for (;;) {
                    int64_t hi = (int64_t)driver->last[block];
                    double bound = 0.0;
                    int none = 0;
                    rest = 0.0;
                    for (int64_t q = 0; q < n_clauses && !none; q++) {
                        const clause_desc *cl = &clauses[q];
                        if (cl->role == 3) continue;
                        double impact = window_impact(cur[cl->first], lo, hi, k1, b, avgdl);
                        if (cl->role == 1 && cl->slop == 0)
                            for (int64_t i = 1; i < cl->n && impact >= 0.0; i++) {
                                double other = window_impact(cur[cl->first + i], lo, hi, k1, b, avgdl);
                                if (other < impact) impact = other;
                            }
                        if (impact < 0.0) {
                            if (cl->role != 2) none = 1;
                            continue;
                        }
                        bound = bound + (weights[q] * impact) * boosts[q];
                        if (q != driver_clause) rest = rest + (weights[q] * impact) * boosts[q];
                    }
                    if (!none && !((bound * root_boost) * (1.0 + 0x1p-30) + 0x1p-1000 < sel.heap[0].score)) break;
                    st.windows_skipped++;
                    skipped = 1;
                    if (++block >= driver->n_blocks) break;
                    lo = hi + 1; /* the next block's ids are above this one's last */
                }
                if (block >= driver->n_blocks) break; /* no block of the driver left can make the top k */
                checked = block;
                if (skipped) {
                    /* Only the block that can make it is decoded: the skipped ones never were. */
                    doc = advance(driver, lo, &st);
                    if (doc < 0) break;
                }
            }
            int alone = driver_clause >= 0 && checked == (driver->pos >> WB_SHIFT);
            if (alone && pause > 0) {
                pause--;
                alone = 0;
            }
            if (alone) {
                /*
                 * The driver's own contribution, exact, plus every other clause's bound over the
                 * block (from the check above): below the k-th score, the document cannot enter
                 * whatever the other lists hold, so they are not moved to it (most documents of
                 * a conjunction of common terms, where the block bounds, each list's largest tf
                 * with its shortest document, rarely pass a whole block). The same margins as
                 * above. The check costs a tf and a division a document, more than it saves when
                 * the conjunction itself turns most documents away (terms of similar, middling
                 * frequency: 35 of 62,000 passed on one such query); so when fewer than a
                 * quarter of a run of WB_PRUNE_RUN checks pass, the next documents go without
                 * it, WB_PRUNE_RUN of them, twice as many after each such run up to
                 * WB_PRUNE_PAUSE, back to WB_PRUNE_RUN after a run where it paid (the k-th
                 * score climbs as the heap fills: an early run says little). Either way the
                 * same documents are scored.
                 */
                double tf = (double)tf_now(driver);
                double mine = (weights[driver_clause] * ((tf * kp1) / (tf + norms[doc]))) * boosts[driver_clause];
                int passed = ((mine + rest) * root_boost) * (1.0 + 0x1p-30) + 0x1p-1000 < sel.heap[0].score;
                prune_hits += passed;
                if (++prune_tries == WB_PRUNE_RUN) {
                    if (prune_hits * 4 < prune_tries) {
                        pause = pause_next;
                        if (pause_next < WB_PRUNE_PAUSE) pause_next *= 2;
                    } else {
                        pause_next = WB_PRUNE_RUN;
                    }
                    prune_tries = prune_hits = 0;
                }
                if (passed) {
                    if (doc + 1 > (int64_t)UINT32_MAX) break;
                    doc = advance(driver, doc + 1, &st);
                    continue;
                }
            }
            int64_t target = doc;
            for (int64_t i = 1; i < n_must; i++) {
                int64_t id = advance(cur[must[i]], target, &st);
                if (id < 0 || id > target) {
                    target = id;
                    break;
                }
            }
            if (target == -3) {
                result = -3;
                break;
            }
            if (target < 0) break; /* a must list ended: no more matches in this part */
            if (target != doc) {
                doc = advance(driver, target, &st);
                continue;
            }
            /* Every must slot stands on doc. */
            st.candidates++;
            int64_t internal = to_global ? to_global[doc] : part->base + doc;
            int keep = internal >= 0;
            for (int64_t q = 0; q < n_clauses && keep; q++) {
                if (clauses[q].role != 3 || !cur[clauses[q].first]) continue;
                int64_t id = advance(cur[clauses[q].first], doc, &st);
                if (id == -3) {
                    result = -3;
                    break;
                }
                if (id == doc) keep = 0;
            }
            if (result) break;
            if (keep && bounded && has_phrase && sel.size == k) {
                /*
                 * A bound before any position is read: a phrase occurs at most as often as its first
                 * term, and the impact rises with tf, so the sum with each phrase's tf replaced by its
                 * first term's bounds the score (in real arithmetic; the same operations in the same
                 * order otherwise, so a relative 2^-30 covers the roundings). Strictly below the k-th
                 * score: the document cannot enter, ties can (they are verified and scored).
                 */
                double bound = 0.0;
                for (int64_t q = 0; q < n_clauses && result == 0; q++) {
                    const clause_desc *cl = &clauses[q];
                    cursor *c = cur[cl->first];
                    if (cl->role == 3 || !c) continue;
                    if (cl->role == 2) {
                        int64_t id = advance(c, doc, &st);
                        if (id == -3) result = -3;
                        if (id != doc) continue;
                    }
                    uint32_t most = tf_now(c);
                    if (cl->role == 1 && cl->slop == 0) /* an exact phrase occurs at most as often as each term */
                        for (int64_t i = 1; i < cl->n; i++) {
                            uint32_t other = tf_now(cur[cl->first + i]);
                            if (other < most) most = other;
                        }
                    double tf = (double)most;
                    bound = bound + (weights[q] * ((tf * kp1) / (tf + norms[doc]))) * boosts[q];
                }
                if (result) break;
                if ((bound * root_boost) * (1.0 + 0x1p-30) < sel.heap[0].score) keep = 0;
            }
            double score = 0.0;
            for (int64_t q = 0; q < n_clauses && keep; q++) {
                const clause_desc *cl = &clauses[q];
                double tf;
                if (cl->role == 0) {
                    tf = (double)tf_now(cur[cl->first]);
                } else if (cl->role == 1) {
                    int64_t freq = phrase_frequency(&cur[cl->first], cl->n, cl->slop);
                    if (freq == -1) {
                        result = -1;
                        break;
                    }
                    if (freq == -3) {
                        st.corrupt_row = p * n_slots + cl->first;
                        result = -3;
                        break;
                    }
                    if (freq == 0) {
                        keep = 0;
                        break;
                    }
                    tf = (double)freq;
                } else if (cl->role == 2) {
                    cursor *c = cur[cl->first];
                    if (!c) continue;
                    int64_t id = advance(c, doc, &st);
                    if (id == -3) {
                        result = -3;
                        break;
                    }
                    if (id != doc) continue;
                    tf = (double)tf_now(c);
                } else {
                    continue;
                }
                double impact = (tf * kp1) / (tf + norms[doc]);
                score = score + (weights[q] * impact) * boosts[q];
            }
            if (result) break;
            if (keep) {
                st.scored++;
                if (!offer(&sel, score * root_boost, internal)) {
                    result = -1;
                    break;
                }
            }
            if (doc + 1 > (int64_t)UINT32_MAX) break;
            doc = advance(driver, doc + 1, &st);
        }
        if (doc == -3) result = -3;
    }
    if (result == 0) {
        double kth = sel.size == k ? sel.heap[0].score : -INFINITY;
        int64_t kept = 0;
        for (int64_t i = 0; i < sel.stored; i++)
            if (sel.store[i].score >= kth) sel.store[kept++] = sel.store[i];
        if (kept > 1) qsort(sel.store, (size_t)kept, sizeof(scored_id), best_first);
        for (int64_t i = 0; i < kept && i < out_capacity; i++) {
            ids_out[i] = sel.store[i].id;
            scores_out[i] = sel.store[i].score;
        }
        result = kept;
    }
done:
    if (result >= 0 || result == -3) {
        stats_out[0] = result == -3 ? st.corrupt_row : st.blocks;
        stats_out[1] = st.blocks_decoded;
        stats_out[2] = st.postings;
        stats_out[3] = st.candidates;
        stats_out[4] = st.scored;
        stats_out[5] = st.windows_skipped;
    }
    if (cursors)
        for (int64_t s = 0; s < n_slots; s++) free(cursors[s].at);
    free(cursors);
    free(word_starts);
    free(sel.heap);
    free(sel.store);
    return result;
}

/*
 * The same search from each slot's cached rows instead of a table laid out by the caller, so a
 * query's set-up in Python is a few look-ups, and its arguments in two arrays (one ctypes
 * conversion each instead of seventeen):
 *   args:  slot_refs, n_slots, clauses, n_clauses, weights, boosts, parts, n_parts, k, ids_out,
 *          scores_out, out_capacity, stats_out   (13 int64; addresses as integers)
 *   reals: root_boost, k1, b, avgdl
 * slot_refs: 3 int64 per slot: the address of its term's rows (n_rows x 8 int64, as _bm25.c's
 * weft_bm25_query takes them: words, word count, postings, block table, blocks, -, part, -;
 * parts strictly ascending), n_rows, and the address of n_rows x 7 int64 positions fields for
 * a phrase's slot (aligned with the rows; else 0). A part where a slot's term has no row is a
 * part without the term (count 0). Returns what weft_boolean_top_k returns; a corrupt row is
 * reported as part * n_slots + slot.
 */
int64_t weft_boolean_query(const int64_t *args, const double *reals) {
    if (!args || !reals) return -2;
    const int64_t *slot_refs = (const int64_t *)(uintptr_t)args[0];
    int64_t n_slots = args[1], n_clauses = args[3], n_parts = args[7], k = args[8], out_capacity = args[11];
    const clause_desc *clauses = (const clause_desc *)(uintptr_t)args[2];
    const double *weights = (const double *)(uintptr_t)args[4], *boosts = (const double *)(uintptr_t)args[5];
    const part_desc *parts = (const part_desc *)(uintptr_t)args[6];
    int64_t *ids_out = (int64_t *)(uintptr_t)args[9], *stats_out = (int64_t *)(uintptr_t)args[12];
    double *scores_out = (double *)(uintptr_t)args[10];
    double root_boost = reals[0], k1 = reals[1], b = reals[2], avgdl = reals[3];
    if (!stats_out || (out_capacity > 0 && (!ids_out || !scores_out))) return -2;
    if (!slot_refs || n_slots < 1 || n_slots > WB_MAX_SLOTS || n_parts < 0) return -2;
    if (n_parts > INT64_MAX / n_slots) return -2;
    int64_t n_lists = n_parts * n_slots;
    if ((uint64_t)n_lists > SIZE_MAX / sizeof(list_desc)) return -1;
    list_desc local[32];
    list_desc *table = local;
    if (n_lists > 32) {
        table = calloc((size_t)n_lists, sizeof(list_desc));
        if (!table) return -1;
    } else {
        memset(local, 0, sizeof(local));
    }
    int64_t result = 0;
    for (int64_t s = 0; s < n_slots && result == 0; s++) {
        const int64_t *rows = (const int64_t *)(uintptr_t)slot_refs[3 * s];
        const int64_t *pos = (const int64_t *)(uintptr_t)slot_refs[3 * s + 2];
        int64_t n_rows = slot_refs[3 * s + 1], last = -1;
        if (n_rows < 0 || n_rows > n_parts || (n_rows && !rows)) result = -2;
        for (int64_t r = 0; r < n_rows && result == 0; r++) {
            const int64_t *row = rows + 8 * r;
            int64_t part = row[6];
            if (part <= last || part >= n_parts) { /* ascending, each part once */
                result = -2;
                break;
            }
            last = part;
            list_desc *l = &table[part * n_slots + s];
            l->data = row[0];
            l->words = row[1];
            l->count = row[2];
            l->meta = row[3];
            l->n_blocks = row[4];
            if (pos) {
                const int64_t *p = pos + 7 * r;
                l->pos_words = p[0];
                l->pos_n = p[1];
                l->pos_widths = p[2];
                l->n_chunks = p[3];
                l->chunk_at = p[4];
                l->tf_before = p[5];
            }
        }
    }
    if (result == 0)
        result = weft_boolean_top_k(table, n_slots, clauses, n_clauses, weights, boosts, root_boost, parts, n_parts, k1,
                                    b, avgdl, k, ids_out, scores_out, out_capacity, stats_out);
    if (table != local) free(table);
    return result;
}
