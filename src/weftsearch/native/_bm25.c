/*
 * BM25 top-k over one snapshot's segments in one call, with block-max MaxScore
 * early termination (weftsearch.native.bm25 binds it; weftsearch.scorers.bm25 lays out its lists).
 *
 * Why C, why ctypes: the numpy path (weftsearch.scorers.bm25) must touch every
 * posting of every query term; this one skips blocks of postings that cannot
 * reach the current k-th score, and a ctypes call releases the GIL, so
 * searches in threads overlap. No Python.h: it builds wherever a C compiler does.
 *
 * Scores are bit for bit the numpy path's. For a document d and a query term t
 * of weight w_t = qtf * idf (computed by numpy and passed in):
 *   norm(d)  = k1 * ((1.0 - b) + (b * len(d)) / avgdl)
 *   impact   = (tf * (k1 + 1.0)) / (tf + norm(d))
 *   c_t(d)   = impact * w_t
 *   score(d) = ((0.0 + c_t1) + c_t2) + ...   over d's terms, in sorted term order
 * which is the numpy expressions' order of operations exactly (built with
 * -ffp-contract=off and no fast-math, so no fused multiply-add changes a bit).
 *
 * Block metadata: each term's postings in a segment are cut into blocks of
 * WEFT_BLOCK postings; per block the caller passes the last local id, the
 * largest tf and the smallest document length. The impact rises with tf and
 * falls with len for any k1 >= 0 and 0 <= b <= 1, so w_t * impact(max_tf,
 * min_len) bounds every posting of the block for any (k1, b) in real
 * arithmetic. Rounded arithmetic is not monotone in tf to the last bit (for
 * k1 near 0 the impact is nearly flat in tf and a smaller tf can round one ulp
 * higher), and a sum of bounds taken in another order than the score's sum can
 * round differently, so every comparison of a bound against the threshold
 * multiplies the bound by `margin` = 1 + (m + 8) * 2^-46 for m query terms:
 * the relative error of the score (m - 1 additions) plus that of the bound
 * (m - 1 additions and 4 roundings per term) is below (2m + 8) * 2^-53, which
 * the margin exceeds at least 64 times over. Pruning is on a strict inequality
 * (bound * margin < threshold), so every document tied with the k-th score is
 * scored and kept.
 *
 * The traversal (block-max MaxScore, as Lucene 9.6+ does, with window-at-a-time scoring):
 * the doc-id space is walked in windows that end where the first current block of any list
 * ends (widened to WEFT_MIN_WINDOW ids once there is a threshold, at most WEFT_WINDOW). Per
 * window each list's bound is the largest bound of its blocks that overlap the window; a
 * window whose bounds sum below the threshold is skipped whole (its postings never read).
 * Otherwise the lists are split by ascending window bound into non-essential ones (the
 * longest prefix whose bounds sum below the threshold) and essential ones: only documents of
 * essential lists are candidates. The essential lists are read list at a time into per-window
 * partial sums. A non-essential list is then either read through the window too (adding only
 * to candidates) when it holds fewer than WEFT_PROBE_COST postings per candidate there, or
 * probed per candidate, highest bound first, each probe first checking the bound of the one
 * block that could hold the candidate, until the partial score plus the remaining bounds falls
 * below the threshold. A candidate that survives is scored exactly, in sorted term order: from the
 * contributions the window's reads kept when every list with a posting there was read through it
 * and the part's lists hold few postings per result asked, else by seeking each list again.
 *
 * Selection: a min-heap of the k best scores so far, and a store of every
 * document that scored at least the heap's minimum on arrival (the minimum
 * only rises, so every final member and every tie is stored); at the end,
 * every stored document >= the k-th score is returned, best first (score
 * descending, then internal id ascending).
 *
 * Errors are return codes, never aborts: -1 out of memory, -2 bad arguments.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/*
 * The block-max walk compiled twice (GCC function multiversioning, one copy chosen once at load by
 * the CPU): for x86-64-v3 (Haswell and later: BMI1/2, POPCNT, AVX2) and for the baseline. The walk
 * is bit tests, shifts and counts over the window's candidate bits (tzcnt, blsr, shlx and popcnt
 * instead of a libgcc call): 2-7% less CPU a kernel call on the synthetic 100,000-document corpus.
 * The float operations are the same in both (no fast-math; -ffp-contract=off forbids the fused
 * multiply-adds v3 allows), so both give the same bits. Only where the compiler and the C library
 * support it (ifuncs: GCC with glibc); elsewhere, or built with -DWEFT_NO_CLONES, one portable copy.
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11 && \
    defined(__GLIBC__) && !defined(WEFT_NO_CLONES) /* GCC 11 named x86-64-v3 */
#define WEFT_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define WEFT_CLONES
#endif

#define WEFT_BLOCK 128
/* A block's posting indices are kept in uint8_t (the read-through's candidate list). */
_Static_assert(WEFT_BLOCK <= 256, "a block's posting index must fit in uint8_t");
#define WEFT_BLOCK_SHIFT 7
/* Document ids per window at most: the partial sums of a window stay in L1/L2 (32 KiB). */
#ifndef WEFT_WINDOW
#define WEFT_WINDOW 4096
#endif
#ifndef WEFT_PROBE_COST
#define WEFT_PROBE_COST 32
#endif
/* Partial blocks shorter than this are decoded value by value, longer ones padded to a full block. */
#ifndef WEFT_SHORT_RUN
#define WEFT_SHORT_RUN 32
#endif
/*
 * Document ids per window at least, once there is a threshold: the whole WEFT_WINDOW. A window's
 * bookkeeping (its bounds, the essential split, the candidate words, every list's seek past it)
 * is paid per window, and the bounds a wider window loosens prune little in these lists anyway.
 * Measured on the synthetic corpus (kernel CPU a call, against 512): 100k top-10 / top-100 about
 * 7% / 5% faster (3-4% in ten segments), 1M top-10 / top-100 about 4% / 8%; 5% fewer
 * instructions at 100k top-10; 8192 and 16384 (with WEFT_WINDOW raised) were no faster.
 */
#ifndef WEFT_MIN_WINDOW
#define WEFT_MIN_WINDOW WEFT_WINDOW
#endif
/*
 * Parts of at most this many lists keep each posting's contribution read in a window (8 bytes per
 * document of the window and list: 32 KiB a list), so a candidate's exact score is summed from
 * them rather than by seeking every list again (see score_candidates).
 */
#ifndef WEFT_STORED_LISTS
#define WEFT_STORED_LISTS 16
#endif
/*
 * ... when the query's lists, in all parts together, hold at most this many postings per result
 * asked (k): the documents scored exactly grow with k, the stores with the postings read, and
 * below this ratio seeking the lists again costs less than a store a posting. Measured on the
 * synthetic Zipfian corpus (about 15 and 150 thousand postings a query at 100,000 and 1,000,000
 * documents): top-100 at 100,000 faster (about 150 postings per result), top-10 there and top-100
 * at 1,000,000 (about 1,500) slower. All parts, not the part walked: with the threshold carried
 * from part to part, a part of ten scores about a tenth of the documents one part of them all
 * would, so it stands where the whole snapshot does (1,000,000 in ten parts at top-100 was
 * storing, each part holding a tenth of the postings: about 8% slower than seeking).
 */
#ifndef WEFT_STORE_POSTINGS_PER_K
#define WEFT_STORE_POSTINGS_PER_K 400
#endif
/* int64 words before an impact table's impacts: what it was built for (see weft_bm25_impacts). */
#define WEFT_IMPACT_HEADER 4

/*
 * One term's postings in one segment, as the Python side lays it out (8 int64 per list).
 *
 * Postings are compressed (format version 3, docs/FORMAT.md "Compressed postings"): per block
 * of WEFT_BLOCK, id gaps then tf - 1, bit-packed LSB first at the block's two widths. A block
 * is decoded only when a posting of it is read (a window's essential lists, a probe, the exact
 * score); blocks skipped by their bounds or passed over by a seek are never decoded.
 */
typedef struct {
    int64_t data;     /* address of uint32 packed words of the term */
    int64_t words;    /* length of data in words: every read is bounded by it */
    int64_t count;    /* postings */
    int64_t meta;     /* address of uint32[4 * n_blocks]: last ids, max tfs, min lengths, widths */
    int64_t n_blocks; /* ceil(count / WEFT_BLOCK) */
    int64_t term;     /* index of the term in sorted order, 0 .. m - 1 */
    int64_t part;     /* index of the segment, 0 .. n_parts - 1 (lists are grouped by part) */
    int64_t impacts;  /* address of the list's impact table (weft_bm25_impacts), or 0: decode the blocks */
} list_desc;

/* One segment (4 int64 per part). */
typedef struct {
    int64_t norms;     /* address of float64 k1 * (1 - b + b * len / avgdl), by local id (numpy's bits) */
    int64_t to_global; /* address of int64 internal id by local id (-1: deleted), or 0: base + local */
    int64_t base;      /* internal id of local id 0 when to_global is 0 */
    int64_t n_docs;    /* local documents */
} part_desc;

typedef struct {
    double score;
    int64_t id;
} scored_id;

/* One decoded block. */
typedef struct {
    int64_t block; /* which block the buffers hold, -1: none */
    int64_t tfs_ready; /* tfs holds the block's tfs (else read them with tf_at) */
    uint32_t ids[WEFT_BLOCK];
    uint32_t tfs[WEFT_BLOCK];
} lane;

/*
 * A cursor over one list while its part is walked. Its main position `pos` is either resolved
 * (the block of pos is decoded in `main` and ids[pos] is its id) or pending: pos is the start
 * of a block not yet decoded and `pending` is a lower bound of the cursor's id (the first id
 * >= pending is where the cursor stands, and the block's last id is >= pending). The exact
 * score reads through `exact_pos` and its own decoded block.
 */
typedef struct {
    const uint32_t *data, *last, *max_tf, *min_len, *widths;
    int64_t count, words, pos, exact_pos, n_blocks, term, scored_block, list;
    int64_t resolved, pending;
    double weight, window_bound;
    double *bounds;        /* per block: w * impact(max_tf, min_len), before the margin */
    const double *impacts; /* the list's impact table, by position (NULL: none; see weft_bm25_impacts) */
    const uint32_t *local_ids; /* its ids, by position */
    int64_t *word_start;   /* per block: first word in data */
    lane *main, *exact;
    const lane *exact_from; /* main or exact: the lane holding the exact position's block */
    int *corrupt;          /* set (to the list's index + 1) when a block does not decode */
} cursor;

/* unpack_full / unpack_full_any: a full block's run decoded in one unrolled pass per width (unpack.h). */
#define UNPACK_BLOCK WEFT_BLOCK
#include "unpack.h"

/* Words of a block's id run and tf run (count <= WEFT_BLOCK, widths <= 32: no overflow). */
static inline int64_t run_words(int64_t count, unsigned width) { return (count * (int64_t)width + 31) >> 5; }

static inline int64_t block_count(const cursor *c, int64_t block) {
    int64_t start = block << WEFT_BLOCK_SHIFT;
    return c->count - start < WEFT_BLOCK ? c->count - start : WEFT_BLOCK;
}

/*
 * A partial block's run (the last block of a list, n < WEFT_BLOCK values) through the same
 * unrolled routine: its words are copied into a zeroed block-sized buffer, bits past value n - 1
 * cleared, so the padding decodes as gaps of 0 (each adding exactly 1 to the running id: the id
 * after n values is the returned one minus the padding, exact in 64 bits) and nothing past the
 * run is read. Values n .. WEFT_BLOCK - 1 of `out` are padding, never read.
 */
static uint64_t unpack_partial(const uint32_t *run, int64_t n, unsigned width, uint32_t *out, uint64_t acc,
                               int kind) {
    if (n < WEFT_SHORT_RUN) {
        /* A short run: value by value (decoding a whole padded block would cost more). */
        uint64_t mask = width == 32 ? 0xFFFFFFFFu : (((uint64_t)1 << width) - 1);
        for (int64_t i = 0; i < n; i++) {
            uint64_t bit = (uint64_t)i * width, at = bit >> 5;
            unsigned shift = (unsigned)(bit & 31);
            uint64_t value = width ? (uint64_t)run[at] >> shift : 0; /* width 0: no words */
            if (shift + width > 32) value |= (uint64_t)run[at + 1] << (32 - shift); /* inside the run */
            value &= mask;
            if (kind) {
                acc += value + 1;
                out[i] = (uint32_t)acc;
            } else {
                out[i] = (uint32_t)value + 1;
            }
        }
        return acc;
    }
    uint32_t buf[WEFT_BLOCK]; /* 4 * width <= WEFT_BLOCK words */
    int64_t words = run_words(n, width), used = 4 * (int64_t)width;
    memcpy(buf, run, (size_t)words * sizeof(uint32_t));
    memset(buf + words, 0, (size_t)(used - words) * sizeof(uint32_t));
    unsigned tail = (unsigned)(((uint64_t)n * width) & 31);
    if (tail) buf[words - 1] &= ((uint32_t)1 << tail) - 1;
    acc = unpack_full_any(buf, width, out, acc, kind);
    return kind ? acc - (uint64_t)(WEFT_BLOCK - n) : acc;
}

/*
 * Decode block `block` into `into`. Its ids are the previous block's last id (-1 for the first)
 * plus the running sum of gap + 1; the last must be the table's last id, or the list is corrupt
 * (the cursor then reads as exhausted and the call fails). Words read are inside the block's
 * run, which the setup check placed inside the list's `words`.
 */
static int decode_block(cursor *c, lane *into, int64_t block) {
    if (into->block == block) return 1;
    int64_t n = block_count(c, block);
    unsigned width_id = c->widths[block] & 0xFF;
    const uint32_t *words = c->data + c->word_start[block];
    int64_t id = block > 0 ? (int64_t)c->last[block - 1] : -1;
    if (n == WEFT_BLOCK) {
        /* At most 128 gaps of 32 bits plus 1 each from id >= -1: no overflow in 64 bits. */
        id = (int64_t)unpack_full_any(words, width_id, into->ids, (uint64_t)id, 1);
    } else {
        id = (int64_t)unpack_partial(words, n, width_id, into->ids, (uint64_t)id, 1);
    }
    if (id != (int64_t)c->last[block]) {
        *c->corrupt = (int)(c->list + 1);
        into->block = -1;
        c->pos = c->exact_pos = c->count; /* reads as exhausted from here on */
        return 0;
    }
    into->block = block;
    into->tfs_ready = 0; /* the tf run is decoded when a loop reads many (block_tfs), else one by one (tf_at) */
    return 1;
}

/* The decoded block's tfs, all of them (an essential list's read scores every posting of the window). */
static inline const uint32_t *block_tfs(const cursor *c, lane *l) {
    if (!l->tfs_ready) {
        int64_t block = l->block, n = block_count(c, block);
        unsigned width_id = c->widths[block] & 0xFF, width_tf = (c->widths[block] >> 8) & 0xFF;
        int64_t id_words = run_words(n, width_id);
        if (n == WEFT_BLOCK) {
            unpack_full_any(c->data + c->word_start[block] + id_words, width_tf, l->tfs, 0, 0);
        } else {
            unpack_partial(c->data + c->word_start[block] + id_words, n, width_tf, l->tfs, 0, 0);
        }
        l->tfs_ready = 1;
    }
    return l->tfs;
}

/* One tf of a decoded block, at index i: read from its run alone (a probe, an exact score or a candidate of a
 * non-essential list read through a window needs one). */
static inline uint32_t tf_at(const cursor *c, const lane *l, int64_t i) {
    if (l->tfs_ready) return l->tfs[i];
    int64_t block = l->block, n = block_count(c, block);
    unsigned width_id = c->widths[block] & 0xFF, width = (c->widths[block] >> 8) & 0xFF;
    if (width == 0) return 1;
    const uint32_t *run = c->data + c->word_start[block] + run_words(n, width_id);
    uint64_t bit = (uint64_t)i * width, at = bit >> 5;
    unsigned shift = (unsigned)(bit & 31);
    uint64_t value = (uint64_t)run[at] >> shift;
    if (shift + width > 32) value |= (uint64_t)run[at + 1] << (32 - shift); /* inside the run: i < n */
    uint64_t mask = width == 32 ? 0xFFFFFFFFu : (((uint64_t)1 << width) - 1);
    return (uint32_t)(value & mask) + 1;
}

/* The first index in [from, n) of a decoded block whose id is >= target (the caller knows one exists). */
static inline int64_t first_at_least(const lane *l, int64_t from, int64_t n, uint32_t target) {
    for (int step = 0; step < 8 && from < n; step++, from++)
        if (l->ids[from] >= target) return from;
    int64_t low = from, high = n;
    while (low < high) {
        int64_t middle = low + (high - low) / 2;
        if (l->ids[middle] < target)
            low = middle + 1;
        else
            high = middle;
    }
    return low;
}

/* Make the main position resolved: decode its block, move to the first id >= pending. 0: corrupt. */
static inline int resolve(cursor *c) {
    if (c->resolved || c->pos >= c->count) return 1;
    int64_t block = c->pos >> WEFT_BLOCK_SHIFT;
    /*
     * The two lanes hold the two most recent blocks: the main position moving on to a new block
     * leaves its old one to the exact lane (the window's exact scores, which run after its
     * read-through, mostly need that block: it is not decoded twice), unless the exact lane
     * already holds a later block; a block the exact lane holds already becomes main's undecoded.
     * Positions only move forward, so the older block dropped is never needed again.
     */
    lane *m = c->main, *x = c->exact;
    if (x->block == block || (m->block != block && m->block > x->block)) {
        c->main = x;
        c->exact = m;
    }
    if (!decode_block(c, c->main, block)) return 0;
    int64_t n = block_count(c, block);
    c->pos = (block << WEFT_BLOCK_SHIFT) + first_at_least(c->main, c->pos & (WEFT_BLOCK - 1), n, (uint32_t)c->pending);
    c->resolved = 1;
    return 1;
}

/* A lower bound of the main position's id (its id when resolved). */
static inline int64_t lower_id(const cursor *c) {
    return c->resolved ? (int64_t)c->main->ids[c->pos & (WEFT_BLOCK - 1)] : c->pending;
}

/* The main position's id; the cursor must be resolved and not at the end. */
static inline uint32_t id_now(const cursor *c) { return c->main->ids[c->pos & (WEFT_BLOCK - 1)]; }
static inline uint32_t tf_now(const cursor *c) { return tf_at(c, c->main, c->pos & (WEFT_BLOCK - 1)); }

/*
 * Leave the main position pending at the start of `block` (not decoded), its id at least `target`.
 * The block's first id is its frame of reference plus its first gap, read alone from the id run
 * (one word, no decoding): the pending bound is then the first id itself whenever target is not
 * above it, so windows start where postings are rather than at a stale lower bound.
 */
static inline void pend(cursor *c, int64_t block, int64_t target) {
    c->pos = block << WEFT_BLOCK_SHIFT;
    c->resolved = 0;
    int64_t first = (block > 0 ? (int64_t)c->last[block - 1] : -1) + 1;
    unsigned width = c->widths[block] & 0xFF;
    if (width) {
        uint64_t mask = width == 32 ? 0xFFFFFFFFu : (((uint64_t)1 << width) - 1);
        first += (int64_t)(c->data[c->word_start[block]] & mask); /* value 0 of the run: bits 0 ..< width */
    }
    c->pending = first > target ? first : target;
    if (c->pending > (int64_t)c->last[block]) c->pending = c->last[block]; /* a corrupt first gap: decoding will say */
}

/*
 * Move the main position to the first id >= target without decoding: whole blocks by their
 * last ids; inside a decoded block by its ids; a block not decoded is left pending.
 */
static inline void seek_lazy(cursor *c, uint32_t target) {
    if (c->pos >= c->count || lower_id(c) >= (int64_t)target) return;
    int64_t block = c->pos >> WEFT_BLOCK_SHIFT;
    if (c->last[block] >= target) {
        if (c->resolved) {
            c->pos = (block << WEFT_BLOCK_SHIFT) +
                     first_at_least(c->main, c->pos & (WEFT_BLOCK - 1), block_count(c, block), target);
        } else {
            c->pending = target;
        }
        return;
    }
    while (block < c->n_blocks && c->last[block] < target) block++;
    if (block >= c->n_blocks) {
        c->pos = c->count;
        return;
    }
    pend(c, block, target);
}

/*
 * Move the exact position to the first id >= target, decoding the one block that may hold it
 * (or reading it from the main lane when that holds the block already: most candidates are
 * scored in the window whose postings the main position just read). `exact_from` is the lane
 * that holds the exact position's block.
 */
static inline int seek_exact(cursor *c, uint32_t target) {
    if (c->exact_pos >= c->count) return 1;
    int64_t block = c->exact_pos >> WEFT_BLOCK_SHIFT;
    if (c->last[block] < target) {
        while (block < c->n_blocks && c->last[block] < target) block++;
        if (block >= c->n_blocks) {
            c->exact_pos = c->count;
            return 1;
        }
        c->exact_pos = block << WEFT_BLOCK_SHIFT;
    }
    if (c->main->block == block) {
        c->exact_from = c->main;
    } else {
        if (!decode_block(c, c->exact, block)) return 0;
        c->exact_from = c->exact;
    }
    c->exact_pos = (block << WEFT_BLOCK_SHIFT) +
                   first_at_least(c->exact_from, c->exact_pos & (WEFT_BLOCK - 1), block_count(c, block), target);
    return 1;
}

/* a ranks below b: a lower score (ties are settled after the selection, by id: compare_scored). */
static int worse(scored_id a, scored_id b) { return a.score < b.score; }

#include "heap.h"

typedef struct {
    int64_t k, heap_size, stored, capacity;
    scored_id *heap;
    scored_id *store;
    int failed;
} selection;

/* Offer one scored document; returns the threshold (the k-th best so far, or -inf while fewer than k). */
static double offer(selection *sel, double score, int64_t id) {
    scored_id item = {score, id};
    if (sel->heap_size < sel->k) {
        push(sel->heap, &sel->heap_size, item);
    } else if (score >= sel->heap[0].score) {
        if (score > sel->heap[0].score) replace_root(sel->heap, sel->heap_size, item);
    } else {
        return sel->heap[0].score;
    }
    if (sel->stored == sel->capacity) {
        if (sel->capacity > INT64_MAX / 2 / (int64_t)sizeof(scored_id)) {
            sel->failed = 1;
            return INFINITY;
        }
        int64_t capacity = 2 * sel->capacity;
        scored_id *grown = realloc(sel->store, (size_t)capacity * sizeof(scored_id));
        if (grown == NULL) {
            sel->failed = 1;
            return INFINITY;
        }
        sel->store = grown;
        sel->capacity = capacity;
    }
    sel->store[sel->stored++] = item;
    return sel->heap_size < sel->k ? -INFINITY : sel->heap[0].score;
}

static int compare_scored(const void *a, const void *b) {
    const scored_id *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* A document's length norm k1 * (1 - b + b * len / avgdl): the Python side's expression for the parts' norms. */
static inline double length_norm(double length, double k1, double b, double avgdl) {
    return k1 * (1.0 - b + b * length / avgdl);
}

/* A posting's impact, (tf * (k1 + 1)) / (tf + norm): its share of a score before the term's weight. */
static inline double impact(double tf, double norm, double k1) { return tf * (k1 + 1.0) / (tf + norm); }

/*
 * One posting's share of a score, (tf * (k1 + 1)) / (tf + norm) * w, in numpy's order of operations.
 * The one formula of both the contribution (a posting's tf and its document's norm) and a block's
 * bound (the block's largest tf and the norm of its smallest length), so the bound is the
 * contribution of the block's best possible posting.
 */
static inline double weighted_impact(double tf, double norm, double k1, double weight) {
    return impact(tf, norm, k1) * weight; /* the same operations in the same order as one expression */
}

/* The bound of block `block` of a list, before the margin: w * impact(max_tf, min_len). */
static double block_bound(const cursor *c, int64_t block, double k1, double b, double avgdl, double scale) {
    double norm = length_norm((double)c->min_len[block], k1, b, avgdl);
    return weighted_impact((double)c->max_tf[block], norm, k1, c->weight) * scale;
}

/* A posting's contribution: its weighted impact with its document's norm. */
static inline double contribution(const cursor *c, uint32_t id, uint32_t tf_raw, const double *norms, double k1) {
    return weighted_impact((double)tf_raw, norms[id], k1, c->weight);
}

/* Counted in the walk's counters, written to stats once at the end. */
static inline void count_scored(cursor *c, int64_t pos, int64_t *postings_scored, int64_t *blocks_scored) {
    int64_t block = pos >> WEFT_BLOCK_SHIFT;
    ++*postings_scored;
    if (block != c->scored_block) c->scored_block = block, ++*blocks_scored;
}

/*
 * One query's traversal state: the call's arguments, the working memory (sized by the part with
 * the most lists), the selection and the running threshold, and what was read.
 */
typedef struct {
    const list_desc *lists;
    int64_t n_lists;
    const double *weights;
    double k1, b, avgdl, bound_scale, margin;
    selection sel;
    double threshold;
    int corrupt; /* the index + 1 of a list found corrupt, else 0 */
    cursor *cursors;
    lane *lanes;    /* each cursor's main and exact decoded block */
    int64_t *order; /* live lists of the window, by ascending bound */
    /* cum[e]: the bounds of order[0 ..< e] summed by additions only (a running difference could round below). */
    double *cum;
    double *partial; /* essential lists' sum per document of the window */
    /*
     * When the part has at most WEFT_STORED_LISTS lists (else NULL): per list j, the contribution of
     * each posting read in the window (contrib[j * WEFT_WINDOW + at]) and a bit per document that
     * says it was read (held[j * WEFT_WINDOW / 64 + word]); held is all zero between windows.
     */
    double *contrib;
    uint64_t *held;
    /* Every block's bound and first word, computed once per query: total blocks <= total postings. */
    double *bounds;
    int64_t *word_starts;
    int64_t bounds_used;
    int64_t postings; /* in all the call's lists, every part's: what walk_part weighs against k */
    int64_t postings_scored, blocks_scored, documents_scored;
    uint64_t seen[WEFT_WINDOW / 64]; /* the window's candidates: documents of an essential list */
} walk;

/* One part being walked: its documents' norms and id map, and its lists' cursors (w->cursors[0 ..< n]). */
typedef struct {
    const part_desc *part;
    const double *norms;
    const int64_t *to_global;
    int64_t n;
} part_walk;

/*
 * Check the arguments and measure the call: -2 when any is out of range, else 0 with the postings
 * of all lists in *total and the most lists of one part in *largest_part. Writes stats[0] (blocks)
 * and stats[2] (postings).
 */
static int64_t check_lists(const list_desc *lists, int64_t n_lists, int64_t n_parts, int64_t m, int64_t k,
                           int64_t out_capacity, double k1, double b, double avgdl, int64_t *stats, int64_t *total,
                           int64_t *largest_part) {
    if (n_lists < 0 || n_parts < 0 || m <= 0 || k <= 0 || out_capacity < 0 || !(avgdl > 0.0) || !(k1 >= 0.0) ||
        !(b >= 0.0 && b <= 1.0) || m > (int64_t)(SIZE_MAX / 4 / sizeof(cursor)))
        return -2;
    *total = 0;
    *largest_part = 0;
    for (int64_t i = 0; i < n_lists; i++) {
        const list_desc *l = &lists[i];
        if (l->count <= 0 || l->term < 0 || l->term >= m || l->part < 0 || l->part >= n_parts || l->words < 0 ||
            l->count > INT64_MAX - WEFT_BLOCK || l->n_blocks != (l->count + WEFT_BLOCK - 1) / WEFT_BLOCK ||
            (i > 0 && l->part < lists[i - 1].part) ||
            (i > 0 && l->part == lists[i - 1].part && l->term <= lists[i - 1].term))
            return -2;
        if (l->count > INT64_MAX - *total) return -2;
        *total += l->count;
        stats[0] += l->n_blocks;
    }
    stats[2] = *total;
    for (int64_t p = 0, i = 0; p < n_parts; p++) {
        int64_t in_part = 0;
        while (i < n_lists && lists[i].part == p) in_part++, i++;
        if (in_part > m) return -2;
        if (in_part > *largest_part) *largest_part = in_part;
    }
    return 0;
}

/*
 * Every impact table a list names was built for that list and its part's norms and k1 (its header
 * says so): a table of another snapshot, scorer or segment would score with the wrong impacts, or
 * read past the part's sums. -2 when one was not, else 0. O(lists).
 */
static int64_t check_impacts(const list_desc *lists, int64_t n_lists, const part_desc *parts, double k1) {
    for (int64_t i = 0; i < n_lists; i++) {
        if (lists[i].impacts == 0) continue;
        const int64_t *header = (const int64_t *)(uintptr_t)lists[i].impacts;
        const part_desc *part = &parts[lists[i].part]; /* check_lists placed part in range */
        if (header[0] != lists[i].count || header[1] != part->n_docs || header[2] != part->norms ||
            memcmp(&header[3], &k1, sizeof k1) != 0)
            return -2;
    }
    return 0;
}

/*
 * Working memory a caller keeps across its queries (the batch: one per thread), so a query of a
 * small index neither allocates its walk's buffers nor clears the dense pass's sums afresh: each
 * buffer grows when a query needs more and is freed by scratch_free. All zero: none yet.
 */
typedef struct {
    double *sums;      /* the dense pass's per-document sums: all zero between queries */
    int64_t sums_size; /* documents they have room for */
    scored_id *heap, *store;
    int64_t heap_size, store_size; /* the store's room: offer() grows it, walk_done takes it back */
    cursor *cursors;
    lane *lanes;
    int64_t *order;
    double *cum;
    int64_t width; /* lists of one part the four above have room for */
    double *partial;
    double *contrib;
    uint64_t *held;
    int64_t stored_width; /* lists the two above have room for (at most WEFT_STORED_LISTS) */
    double *bounds;
    int64_t *word_starts;
    int64_t blocks; /* blocks the two above have room for */
} scratch;

static void scratch_free(scratch *keep) {
    free(keep->sums);
    free(keep->heap);
    free(keep->store);
    free(keep->cursors);
    free(keep->lanes);
    free(keep->order);
    free(keep->cum);
    free(keep->partial);
    free(keep->contrib);
    free(keep->held);
    free(keep->bounds);
    free(keep->word_starts);
    *keep = (scratch){0};
}

/*
 * What a thread keeps between its calls stays small: a buffer a large query grew past these
 * (a store of many ties, the block tables of long lists) is freed, not kept for the thread's life.
 * The dense sums are bounded by the dense pass's largest part (weft_bm25_dense_max_docs).
 */
#define SCRATCH_KEEP_STORE 65536
#define SCRATCH_KEEP_BLOCKS 65536
#define SCRATCH_KEEP_HEAP 65536

static void scratch_trim(scratch *keep) {
    if (keep->store_size > SCRATCH_KEEP_STORE) {
        free(keep->store);
        keep->store = NULL;
        keep->store_size = 0;
    }
    if (keep->blocks > SCRATCH_KEEP_BLOCKS) {
        free(keep->bounds);
        free(keep->word_starts);
        keep->bounds = NULL;
        keep->word_starts = NULL;
        keep->blocks = 0;
    }
    if (keep->heap_size > SCRATCH_KEEP_HEAP) {
        free(keep->heap);
        keep->heap = NULL;
        keep->heap_size = 0;
    }
}

/*
 * The walk's working memory for k results and parts of up to `largest_part` lists, from `keep`
 * (grown where it is too small); 0: out of memory (what was allocated stays in keep).
 */
static int walk_alloc(walk *w, int64_t k, int64_t largest_part, scratch *keep) {
    if (keep->heap_size < k) {
        free(keep->heap);
        keep->heap = malloc((size_t)k * sizeof(scored_id));
        keep->heap_size = keep->heap != NULL ? k : 0;
    }
    if (keep->store == NULL) {
        keep->store = malloc(64 * sizeof(scored_id));
        keep->store_size = keep->store != NULL ? 64 : 0;
    }
    int64_t width = largest_part > 0 ? largest_part : 1;
    if (keep->width < width) {
        free(keep->cursors);
        free(keep->lanes);
        free(keep->order);
        free(keep->cum);
        keep->cursors = malloc((size_t)width * sizeof(cursor));
        keep->lanes = malloc(2 * (size_t)width * sizeof(lane));
        keep->order = malloc((size_t)width * sizeof(int64_t));
        keep->cum = malloc(((size_t)width + 1) * sizeof(double));
        keep->width = keep->cursors && keep->lanes && keep->order && keep->cum ? width : 0;
    }
    if (keep->partial == NULL) keep->partial = calloc(WEFT_WINDOW, sizeof(double));
    /* Optional (the walk seeks the lists again without them): no failure when they cannot be had. */
    if (width <= WEFT_STORED_LISTS && keep->stored_width < width) {
        free(keep->contrib);
        free(keep->held);
        keep->contrib = malloc((size_t)width * WEFT_WINDOW * sizeof(double));
        keep->held = malloc((size_t)width * (WEFT_WINDOW / 64) * sizeof(uint64_t));
        keep->stored_width = keep->contrib && keep->held ? width : 0;
    }
    int64_t total_blocks = 0;
    for (int64_t i = 0; i < w->n_lists; i++) total_blocks += w->lists[i].n_blocks;
    int64_t block_slots = total_blocks > 0 ? total_blocks : 1;
    if (keep->blocks < block_slots) {
        free(keep->bounds);
        free(keep->word_starts);
        int fits = (uint64_t)block_slots <= SIZE_MAX / sizeof(double);
        keep->bounds = fits ? malloc((size_t)block_slots * sizeof(double)) : NULL;
        keep->word_starts = fits ? malloc((size_t)block_slots * sizeof(int64_t)) : NULL;
        keep->blocks = keep->bounds && keep->word_starts ? block_slots : 0;
    }
    w->sel = (selection){k, 0, 0, keep->store_size, keep->heap, keep->store, 0};
    w->cursors = keep->cursors;
    w->lanes = keep->lanes;
    w->order = keep->order;
    w->cum = keep->cum;
    w->partial = keep->partial;
    w->contrib = width <= keep->stored_width ? keep->contrib : NULL;
    w->held = width <= keep->stored_width ? keep->held : NULL;
    w->bounds = keep->bounds;
    w->word_starts = keep->word_starts;
    return keep->heap_size >= k && keep->store_size > 0 && keep->width >= width && keep->partial != NULL &&
           keep->blocks >= block_slots;
}

/* The walk is over: `keep` takes back the store, which offer() may have moved and grown. */
static void walk_done(walk *w, scratch *keep) {
    if (w->sel.store != NULL) {
        keep->store = w->sel.store;
        keep->store_size = w->sel.capacity;
    }
}

/*
 * Open a cursor on each list of part p (lists[first ..], the part's run), computing its blocks'
 * bounds and first words. Returns the number opened; sets w->corrupt (and stops) at a list whose
 * block table is corrupt. `dense`: the part will be scored by the dense pass, which uses no bound:
 * none is computed, and a list with an impact table (checked against the part by check_impacts,
 * its ids built below n_docs by weft_bm25_impacts) is read from the table alone, so its block
 * table is neither checked nor touched (ten small segments are ten times the lists of one).
 */
static int64_t open_cursors(walk *w, int64_t p, int64_t first, const part_desc *part, int dense) {
    int64_t n = 0;
    while (first + n < w->n_lists && w->lists[first + n].part == p) {
        const list_desc *l = &w->lists[first + n];
        cursor *c = &w->cursors[n];
        if (dense && l->impacts != 0) {
            c->count = l->count;
            c->n_blocks = l->n_blocks;
            c->term = l->term;
            c->list = first + n;
            c->weight = w->weights[l->term];
            c->corrupt = &w->corrupt;
            c->impacts = (const double *)((const int64_t *)(uintptr_t)l->impacts + WEFT_IMPACT_HEADER);
            c->local_ids = (const uint32_t *)(c->impacts + c->count);
            n++;
            continue;
        }
        c->data = (const uint32_t *)(uintptr_t)l->data;
        c->last = (const uint32_t *)(uintptr_t)l->meta;
        c->max_tf = c->last + l->n_blocks;
        c->min_len = c->max_tf + l->n_blocks;
        c->widths = c->min_len + l->n_blocks;
        c->count = l->count;
        c->words = l->words;
        c->n_blocks = l->n_blocks;
        c->pos = 0;
        c->exact_pos = 0;
        c->resolved = 0;
        c->pending = 0;
        c->term = l->term;
        c->list = first + n;
        c->scored_block = -1;
        c->weight = w->weights[l->term];
        c->bounds = w->bounds + w->bounds_used;
        c->word_start = w->word_starts + w->bounds_used;
        c->main = &w->lanes[2 * n];
        c->exact = &w->lanes[2 * n + 1];
        c->main->block = c->exact->block = -1;
        c->exact_from = c->exact;
        c->corrupt = &w->corrupt;
        c->impacts = NULL;
        c->local_ids = NULL;
        if (l->impacts != 0) { /* checked against the part by check_impacts */
            c->impacts = (const double *)((const int64_t *)(uintptr_t)l->impacts + WEFT_IMPACT_HEADER);
            c->local_ids = (const uint32_t *)(c->impacts + c->count);
        }
        w->bounds_used += l->n_blocks;
        /*
         * The traversal moves forward by the blocks' last ids: they must increase, or a seek
         * could stand still for ever, and the largest must be a document of the part (every
         * decoded id is checked to end at its block's last id, so none is larger). Every
         * block's run must lie inside the list's words. The reader checks all of this and more
         * at a term's first use (docs/FORMAT.md, "Compressed postings"); this O(blocks) check,
         * in the pass that computes the bounds and first words (one pass over the table, not
         * two) and before any of the list's blocks is read, keeps the kernel safe whoever
         * calls it.
         */
        int64_t word = 0;
        for (int64_t block = 0; block < c->n_blocks; block++) {
            uint32_t widths = c->widths[block];
            if ((widths & 0xFF) > 32 || ((widths >> 8) & 0xFF) > 32 || (widths >> 16) != 0 ||
                (block > 0 && c->last[block] <= c->last[block - 1])) {
                w->corrupt = (int)(c->list + 1);
                break;
            }
            if (!dense) c->bounds[block] = block_bound(c, block, w->k1, w->b, w->avgdl, w->bound_scale);
            c->word_start[block] = word;
            int64_t count = block_count(c, block);
            word += run_words(count, widths & 0xFF) + run_words(count, (widths >> 8) & 0xFF);
        }
        if (!w->corrupt && (word != c->words || (int64_t)c->last[c->n_blocks - 1] >= part->n_docs))
            w->corrupt = (int)(c->list + 1);
        if (w->corrupt) break;
        pend(c, 0, 0); /* at the first block, its first id read from its run */
        n++;
    }
    return n;
}

/*
 * The next window [*low, *high]: from the smallest current id (a lower bound of it, for a cursor
 * whose block is not decoded) to the end of the first current block to end, so every list's
 * postings in it lie in its current block, whose bound therefore bounds them. Then widened to at
 * least WEFT_MIN_WINDOW ids once there is a threshold (until k documents are scored windows stay
 * one block narrow), and cut to at most WEFT_WINDOW. Returns 0 when every list is past its end
 * (or one is corrupt).
 */
static inline __attribute__((always_inline)) int next_window(const walk *w, const part_walk *pw, int64_t *low, int64_t *high) {
    *low = -1;
    *high = -1;
    for (int64_t j = 0; j < pw->n; j++) {
        const cursor *c = &w->cursors[j];
        if (c->pos >= c->count) continue;
        int64_t id = lower_id(c), end = c->last[c->pos >> WEFT_BLOCK_SHIFT];
        if (*low < 0 || id < *low) *low = id;
        if (*high < 0 || end < *high) *high = end;
    }
    if (*low < 0 || w->corrupt) return 0;
    if (w->threshold > -INFINITY && *high < *low + WEFT_MIN_WINDOW - 1) *high = *low + WEFT_MIN_WINDOW - 1;
    if (*high > *low + WEFT_WINDOW - 1) *high = *low + WEFT_WINDOW - 1;
    return 1;
}

/*
 * Each live list's bound over the window (the largest bound of its blocks that overlap it; 0 for
 * a list with no posting there), the live lists in w->order by ascending bound. Returns how many
 * lists are live, and their bounds' sum in *sum.
 */
static inline __attribute__((always_inline)) int64_t window_bounds(walk *w, const part_walk *pw, int64_t high, double *sum) {
    int64_t live = 0;
    *sum = 0.0;
    for (int64_t j = 0; j < pw->n; j++) {
        cursor *c = &w->cursors[j];
        c->window_bound = 0.0;
        if (c->pos >= c->count || lower_id(c) > high) continue;
        int64_t block = c->pos >> WEFT_BLOCK_SHIFT;
        double bound = c->bounds[block];
        while (block + 1 < c->n_blocks && c->last[block] < high) {
            block++;
            if (c->bounds[block] > bound) bound = c->bounds[block];
        }
        c->window_bound = bound;
        *sum += c->window_bound;
        int64_t at = live++; /* insertion into order, ascending bound */
        while (at > 0 && w->cursors[w->order[at - 1]].window_bound > c->window_bound) {
            w->order[at] = w->order[at - 1];
            at--;
        }
        w->order[at] = j;
    }
    return live;
}

/*
 * The essential / non-essential split (MaxScore): the non-essential lists are the longest prefix
 * of w->order whose bounds sum below the threshold (a document in those alone cannot enter the
 * top k); fills w->cum with the prefix sums and returns the index of the first essential list.
 */
static inline __attribute__((always_inline)) int64_t split_essential(walk *w, int64_t live) {
    double *cum = w->cum;
    cum[0] = 0.0;
    for (int64_t e = 0; e < live; e++) cum[e + 1] = cum[e] + w->cursors[w->order[e]].window_bound;
    int64_t essential = 0;
    while (essential < live && cum[essential + 1] * w->margin < w->threshold) essential++;
    return essential;
}

/*
 * Where a decoded block's postings leave the window: the first index in [i, n) whose id is past
 * high, n when the block ends inside it (the usual case with windows of WEFT_WINDOW ids). The
 * reads then loop to a known end, without comparing every id with high.
 */
static inline int64_t window_end(const cursor *c, int64_t block, int64_t i, int64_t n, int64_t high) {
    if ((int64_t)c->last[block] <= high) return n;
    return first_at_least(c->main, i, n, (uint32_t)(high + 1)); /* high < last <= UINT32_MAX: exists */
}

/*
 * Read an essential list through the window, block by block (a tight loop over each decoded
 * block's postings there): every posting makes its document a candidate and adds to its
 * partial sum.
 */
static inline __attribute__((always_inline)) void read_essential_as(walk *w, cursor *c, int64_t low, int64_t high,
                                                                    const double *norms, const int store) {
    uint64_t *seen = w->seen;
    double *partial = w->partial;
    double k1 = w->k1;
    int64_t j = c - w->cursors;
    double *contrib = store ? w->contrib + j * WEFT_WINDOW : NULL;
    uint64_t *held = store ? w->held + j * (WEFT_WINDOW / 64) : NULL;
    while (c->pos < c->count && lower_id(c) <= high) {
        if (!resolve(c)) break;
        if (c->pos >= c->count) break;
        int64_t block = c->pos >> WEFT_BLOCK_SHIFT, start = block << WEFT_BLOCK_SHIFT;
        int64_t i = c->pos - start, n = block_count(c, block);
        const uint32_t *ids = c->main->ids;
        int64_t end = window_end(c, block, i, n, high);
        const uint32_t *tfs = i < end ? block_tfs(c, c->main) : NULL;
        if (i < end && block != c->scored_block) c->scored_block = block, w->blocks_scored++;
        int64_t from = i;
        for (; i < end; i++) {
            int64_t at = (int64_t)ids[i] - low;
            uint64_t bit = (uint64_t)1 << (at & 63);
            /*
             * A document's first posting in the window starts its sum from 0.0: the sum so far is
             * kept or masked to +0.0 by the candidate bit, without a branch on it (taken at random
             * across the window's lists). Either way the same addition, 0.0 + share at first.
             */
            uint64_t held_before = (uint64_t)0 - ((seen[at >> 6] >> (at & 63)) & 1), sum_bits;
            seen[at >> 6] |= bit;
            double sum = partial[at]; /* calloc'd once: never an uninitialised read */
            memcpy(&sum_bits, &sum, sizeof sum);
            sum_bits &= held_before;
            memcpy(&sum, &sum_bits, sizeof sum);
            double share = contribution(c, ids[i], tfs[i], norms, k1);
            partial[at] = sum + share;
            if (store) {
                contrib[at] = share;
                held[at >> 6] |= bit;
            }
        }
        w->postings_scored += i - from;
        c->pos = start + i;
        if (i < n) break; /* the next id is past the window: still resolved */
        if (c->pos < c->count) pend(c, block + 1, (int64_t)c->last[block] + 1);
    }
}

/* Read a non-essential list through the window, adding only to the partial sums of candidates. */
static inline __attribute__((always_inline)) void read_candidates_as(walk *w, cursor *c, int64_t low, int64_t high,
                                                                     const double *norms, const int store) {
    const uint64_t *seen = w->seen;
    double *partial = w->partial;
    double k1 = w->k1;
    int64_t j = c - w->cursors;
    double *contrib = store ? w->contrib + j * WEFT_WINDOW : NULL;
    uint64_t *held = store ? w->held + j * (WEFT_WINDOW / 64) : NULL;
    while (c->pos < c->count && lower_id(c) <= high) {
        if (!resolve(c)) break;
        if (c->pos >= c->count) break;
        int64_t block = c->pos >> WEFT_BLOCK_SHIFT, start = block << WEFT_BLOCK_SHIFT;
        int64_t i = c->pos - start, n = block_count(c, block);
        const uint32_t *ids = c->main->ids;
        /*
         * Two passes: the block's postings in the window that are candidates' (their indices,
         * collected without a branch on the candidate bit, which is taken at random), then their
         * contributions. A branch per posting there cost a misprediction every few postings.
         */
        uint8_t hits[WEFT_BLOCK];
        int64_t found = 0, end = window_end(c, block, i, n, high);
        for (; i < end; i++) {
            int64_t at = (int64_t)ids[i] - low;
            hits[found] = (uint8_t)i;
            found += (int64_t)((seen[at >> 6] >> (at & 63)) & 1);
        }
        for (int64_t h = 0; h < found; h++) {
            int64_t x = hits[h], at = (int64_t)ids[x] - low;
            double share = contribution(c, ids[x], tf_at(c, c->main, x), norms, k1);
            partial[at] += share;
            if (store) {
                contrib[at] = share;
                held[at >> 6] |= (uint64_t)1 << (at & 63);
            }
            count_scored(c, start + x, &w->postings_scored, &w->blocks_scored);
        }
        c->pos = start + i;
        if (i < n) break;
        if (c->pos < c->count) pend(c, block + 1, (int64_t)c->last[block] + 1);
    }
}


/*
 * Probing a non-essential list costs a seek per candidate; reading it through the window costs a
 * division per posting. From the highest-bound non-essential list down, read each one whose
 * postings in the window are fewer than WEFT_PROBE_COST times the candidates (adding only to
 * candidates: a document no essential list holds is below the threshold anyway). Returns how
 * many non-essential lists are left to probe.
 */
static inline __attribute__((always_inline)) int64_t read_cheap_lists(walk *w, int64_t essential, int64_t low,
                                                                       int64_t high, const double *norms,
                                                                       const int store) {
    int64_t candidates = 0;
    for (int64_t word = 0; word <= (high - low) >> 6; word++) candidates += __builtin_popcountll(w->seen[word]);
    while (essential > 0) {
        cursor *c = &w->cursors[w->order[essential - 1]];
        int64_t last_block = c->pos >> WEFT_BLOCK_SHIFT;
        while (last_block + 1 < c->n_blocks && c->last[last_block] < high) last_block++;
        int64_t in_window = ((last_block + 1) << WEFT_BLOCK_SHIFT) - c->pos;
        if (in_window > WEFT_PROBE_COST * candidates) break;
        read_candidates_as(w, c, low, high, norms, store);
        essential--;
    }
    return essential;
}

/*
 * Probe the non-essential lists (w->order[0 ..< essential]) for candidate `doc`, highest bound
 * first, adding what each holds to *bound (the partial score); before each list, the partial
 * score plus the lists left, and then plus the bound of the one block that could hold doc, is
 * compared with the threshold. Returns 1 when doc cannot reach the threshold (pruned); a corrupt
 * block stops the probe (w->corrupt says so).
 */
static inline __attribute__((always_inline)) int probe(walk *w, int64_t essential, int64_t doc, const double *norms, double *bound) {
    const double *cum = w->cum;
    double margin = w->margin, threshold = w->threshold;
    for (int64_t e = essential - 1; e >= 0; e--) {
        if ((*bound + cum[e + 1]) * margin < threshold) return 1;
        cursor *c = &w->cursors[w->order[e]];
        /*
         * The bound of the one block that could hold doc is often well below the window's: check
         * it before decoding or reading any posting (ids of block ends only; all sums are
         * additions, so the margin still covers them).
         */
        int64_t block = c->pos >> WEFT_BLOCK_SHIFT;
        while (block < c->n_blocks && c->last[block] < doc) block++;
        if (block >= c->n_blocks) continue; /* past its last id: contributes nothing */
        if ((*bound + cum[e] + c->bounds[block]) * margin < threshold) return 1;
        seek_lazy(c, (uint32_t)doc);
        if (c->pos < c->count && lower_id(c) <= doc) {
            if (!resolve(c)) return 0;
            if (c->pos < c->count && id_now(c) == doc) {
                *bound += contribution(c, (uint32_t)doc, tf_now(c), norms, w->k1);
                count_scored(c, c->pos, &w->postings_scored, &w->blocks_scored);
            }
        }
    }
    return 0;
}

/* The exact score of doc: its contributions summed in sorted term order (cursor order). */
static inline __attribute__((always_inline)) double score_exact(const part_walk *pw, cursor *cursors, int64_t doc, double k1) {
    double score = 0.0;
    for (int64_t j = 0; j < pw->n; j++) {
        cursor *c = &cursors[j];
        if (!seek_exact(c, (uint32_t)doc)) break;
        if (c->exact_pos < c->count && c->exact_from->ids[c->exact_pos & (WEFT_BLOCK - 1)] == doc)
            score += contribution(c, (uint32_t)doc, tf_at(c, c->exact_from, c->exact_pos & (WEFT_BLOCK - 1)),
                                  pw->norms, k1);
    }
    return score;
}

/*
 * The exact score of the window's document `at` from the contributions its lists' reads kept: the
 * same contributions as score_exact's, added in the same (sorted term, cursor) order from 0.0, so
 * the same bits. Only when every list with a posting in the window was read through it.
 */
static inline double stored_score(const walk *w, int64_t n, int64_t at) {
    double score = 0.0;
    uint64_t bit = (uint64_t)1 << (at & 63);
    for (int64_t j = 0; j < n; j++)
        if (w->held[j * (WEFT_WINDOW / 64) + (at >> 6)] & bit) score += w->contrib[j * WEFT_WINDOW + at];
    return score;
}

/*
 * The window's candidates in id order (clearing w->seen and w->held as it goes): skip the deleted,
 * probe the non-essential lists, score exactly the ones that may still reach the threshold and
 * offer them to the selection, which raises the threshold. With no list left to probe (every list
 * with a posting in the window was read through it) and the contributions kept, the exact score is
 * summed from them (stored_score); else each list is sought again (score_exact). Stops at a
 * corrupt block or a failed selection.
 */
static inline __attribute__((always_inline)) void score_candidates(walk *w, const part_walk *pw, int64_t essential,
                                                                   int64_t low, int64_t high, const int store) {
    int stored = store && essential == 0;
    for (int64_t word = 0; word <= (high - low) >> 6 && !w->corrupt; word++) {
        uint64_t bits = w->seen[word];
        w->seen[word] = 0;
        while (bits && !w->corrupt) {
            int64_t at = word * 64 + __builtin_ctzll(bits);
            bits &= bits - 1;
            int64_t doc = low + at;
            if (pw->to_global != NULL && pw->to_global[doc] < 0) continue; /* deleted */
            double bound = w->partial[at];
            int pruned = probe(w, essential, doc, pw->norms, &bound);
            if (w->corrupt) break;
            if (pruned || bound * w->margin < w->threshold) continue;
            double score = stored ? stored_score(w, pw->n, at) : score_exact(pw, w->cursors, doc, w->k1);
            if (w->corrupt) break;
            int64_t id = pw->to_global != NULL ? pw->to_global[doc] : pw->part->base + doc;
            w->threshold = offer(&w->sel, score, id);
            w->documents_scored++;
            if (w->sel.failed) return;
        }
        if (store)
            for (int64_t j = 0; j < pw->n; j++) w->held[j * (WEFT_WINDOW / 64) + word] = 0;
    }
}

/*
 * Walk one part window by window (block-max MaxScore): a window whose bounds sum below the
 * threshold is skipped whole; otherwise the essential lists are read into partial sums, the cheap
 * non-essential ones read through, and the candidates probed and scored. Then every list moves
 * past the window. Stops at a corrupt block or a failed selection. `store`: the reads keep each
 * contribution (w->contrib) for the exact scores (a constant: one loop of each kind, without a
 * branch per posting).
 */
static inline __attribute__((always_inline)) void walk_part_as(walk *w, const part_walk *pw, const int store) {
    memset(w->seen, 0, sizeof w->seen);
    /* A walk cut short (a corrupt block, a failed selection) may have left bits: start from none. */
    if (store) memset(w->held, 0, (size_t)pw->n * (WEFT_WINDOW / 64) * sizeof(uint64_t));
    for (;;) {
        int64_t low, high;
        if (!next_window(w, pw, &low, &high)) break;
        double sum;
        int64_t live = window_bounds(w, pw, high, &sum);
        if (!(sum * w->margin < w->threshold)) {
            int64_t essential = split_essential(w, live);
            for (int64_t e = essential; e < live; e++)
                read_essential_as(w, &w->cursors[w->order[e]], low, high, pw->norms, store);
            if (w->corrupt) break;
            if (essential > 0) {
                essential = read_cheap_lists(w, essential, low, high, pw->norms, store);
                if (w->corrupt) break;
            }
            score_candidates(w, pw, essential, low, high, store);
            if (w->sel.failed) return;
            if (w->corrupt) break;
        }
        /* Past the window: every list moves to its first id after `high`. */
        if (high >= UINT32_MAX) break;
        for (int64_t j = 0; j < pw->n; j++) seek_lazy(&w->cursors[j], (uint32_t)(high + 1));
    }
}

/*
 * Keeping the contributions costs a store a posting read; it saves seeking every list again per
 * document scored exactly: kept when the part's lists fit and the query's hold few postings per
 * result asked (WEFT_STORE_POSTINGS_PER_K).
 */
WEFT_CLONES static void walk_part(walk *w, const part_walk *pw) {
    if (w->contrib != NULL && pw->n <= WEFT_STORED_LISTS && w->postings / WEFT_STORE_POSTINGS_PER_K < w->sel.k)
        walk_part_as(w, pw, 1);
    else
        walk_part_as(w, pw, 0);
}

/*
 * Parts of at most this many documents are scored densely when their lists hold at least a
 * quarter as many postings as the part has documents (weft_bm25_dense_max_docs, exported so the
 * tests can set it to 0 and exercise block-max on small parts too): every posting is decoded and
 * added into a per-document sum, then every document holding a term is offered. There block-max
 * skips little (SciFact: about half the postings, hardly any block) and its windows, bounds and
 * probes cost more than the postings they save; the sums fit in L2 (8 bytes a document).
 * The results are the same to the bit: each sum is ((0.0 + c_t1) + c_t2) + ... in sorted term
 * order, as score_exact sums it, and only documents scoring above 0 (all that hold a term: every
 * contribution is positive) are offered, in id order.
 */
int64_t weft_bm25_dense_max_docs = 65536;

static int use_dense(const walk *w, int64_t p, int64_t first, const part_desc *part) {
    int64_t n_docs = part->n_docs, postings = 0;
    if (n_docs <= 0 || n_docs > weft_bm25_dense_max_docs) return 0;
    /* Counts are positive and their total fits (check_lists summed them all). */
    for (int64_t i = first; i < w->n_lists && w->lists[i].part == p; i++) postings += w->lists[i].count;
    return postings >= n_docs / 4;
}

/*
 * Documents the dense pass's offer scan looks at together: a run whose sums are all below the gate
 * (compared without a branch among them) is passed over with one well-predicted branch.
 */
#define WEFT_SCAN_RUN 8

/* Bits set in an 8-bit mask (no popcnt instruction is assumed: __builtin_popcount would call libgcc). */
static inline unsigned bits8(unsigned x) {
    x = x - ((x >> 1) & 0x55);
    x = (x & 0x33) + ((x >> 2) & 0x33);
    return (x + (x >> 4)) & 0x0F;
}

/*
 * One run of the offer scan, at sums (and to_global, or NULL: every document live): copies the
 * run's n sums (n <= WEFT_SCAN_RUN) to `run` and clears them in sums (the next part finds them
 * zeroed: one pass instead of a scan and a memset), returns a mask with bit i set when
 * run[i] >= gate, and adds to *scored how many live documents of the run are above 0 (whose full
 * scores the dense pass summed). A full run is compared two at a time with SSE2 (every x86-64
 * has it), where the sign bits of to_global tell the deleted. The same comparisons either way: a
 * NaN passes neither.
 */
static inline unsigned scan_run(double *sums, const int64_t *to_global, int64_t n, double gate, int64_t *scored,
                                double *run) {
    unsigned ge = 0, positive = 0, dead = 0;
#ifdef __SSE2__
    if (n == WEFT_SCAN_RUN) {
        const __m128d g = _mm_set1_pd(gate), zero = _mm_setzero_pd();
        for (int i = 0; i < WEFT_SCAN_RUN; i += 2) {
            __m128d v = _mm_loadu_pd(sums + i);
            _mm_storeu_pd(run + i, v);
            _mm_storeu_pd(sums + i, zero);
            ge |= (unsigned)_mm_movemask_pd(_mm_cmpge_pd(v, g)) << i;
            positive |= (unsigned)_mm_movemask_pd(_mm_cmpgt_pd(v, zero)) << i;
        }
        if (to_global != NULL)
            for (int i = 0; i < WEFT_SCAN_RUN; i += 2)
                dead |= (unsigned)_mm_movemask_pd(_mm_castsi128_pd(_mm_loadu_si128((const __m128i *)(to_global + i))))
                        << i;
        *scored += bits8(positive & ~dead);
        return ge;
    }
#endif
    for (int64_t i = 0; i < n; i++) {
        run[i] = sums[i];
        sums[i] = 0.0;
        ge |= (unsigned)(run[i] >= gate) << i;
        positive |= (unsigned)(run[i] > 0.0) << i;
        if (to_global != NULL) dead |= (unsigned)(to_global[i] < 0) << i;
    }
    *scored += bits8(positive & ~dead);
    return ge;
}

/* Selecting a first gate from group maxima (floor_of_groups) pays from this k on. */
#ifndef WEFT_GROUP_GATE_FROM_K
#define WEFT_GROUP_GATE_FROM_K 32
#endif

/* The k-th largest of values[0 ..< n] (1 <= k <= n), reordering them: quickselect, O(n) expected. */
static double kth_largest(double *values, int64_t n, int64_t k) {
    int64_t low = 0, high = n - 1, want = k - 1;
    while (low < high) {
        double pivot = values[low + (high - low) / 2];
        int64_t i = low, j = high;
        while (i <= j) {
            while (values[i] > pivot) i++;
            while (values[j] < pivot) j--;
            if (i <= j) {
                double t = values[i];
                values[i] = values[j];
                values[j] = t;
                i++, j--;
            }
        }
        if (want <= j)
            high = j;
        else if (want >= i)
            low = i;
        else
            return values[want];
    }
    return values[want];
}

/*
 * A lower bound of the k-th best score among n_docs sums, all of live documents: the k-th largest
 * of the maxima of groups of `group` consecutive sums (when at least k groups exist; else 0). At
 * least k groups reach it, each through a document of its own, so at least k documents score at
 * least it, and the k-th best does too. Read-only; `maxima` has room for n_docs / group values.
 */
static double floor_of_groups(const double *sums, int64_t n_docs, int64_t group, int64_t k, double *maxima) {
    int64_t groups = n_docs / group;
    if (groups < k) return 0.0;
    for (int64_t g = 0; g < groups; g++) {
        const double *at = sums + g * group;
        double top = at[0];
        for (int64_t i = 1; i < group; i++) top = at[i] > top ? at[i] : top;
        maxima[g] = top;
    }
    return kth_largest(maxima, groups, k);
}

/*
 * Score one part densely into sums (n_docs zeroed doubles, left zeroed); see weft_bm25_dense_max_docs.
 *
 * The offers: a document is offered when its sum is at least the gate, the running threshold or,
 * before there is one (fewer than k offered), the smallest positive double (so exactly the
 * documents above 0, the ones holding a term). offer() does nothing with a score below the
 * threshold, so skipping those changes nothing; and since the threshold soon sits near the k-th
 * best, almost every run of WEFT_SCAN_RUN documents is passed over whole. The scan used to branch
 * on `score > 0` per document, which half of a long query's documents pass at random: the
 * mispredictions cost more than scoring the postings did (SciFact: two thirds of the call).
 */
static void add_part_dense(walk *w, const part_walk *pw, double *sums) {
    for (int64_t j = 0; j < pw->n && !w->corrupt; j++) {
        cursor *c = &w->cursors[j];
        if (c->impacts != NULL) {
            /* The impact table: no decoding, no division (impact(...) * weight, the same bits). */
            const double *impacts = c->impacts, weight = c->weight;
            const uint32_t *ids = c->local_ids;
            int64_t i = 0;
            /* Four at a time (a list holds an id once, so the four sums are distinct documents): the
             * same additions in the same order per document, with a quarter of the loop's overhead. */
            for (; i + 4 <= c->count; i += 4) {
                sums[ids[i]] += impacts[i] * weight;
                sums[ids[i + 1]] += impacts[i + 1] * weight;
                sums[ids[i + 2]] += impacts[i + 2] * weight;
                sums[ids[i + 3]] += impacts[i + 3] * weight;
            }
            for (; i < c->count; i++) sums[ids[i]] += impacts[i] * weight;
            w->postings_scored += c->count;
            w->blocks_scored += c->n_blocks;
            continue;
        }
        for (int64_t block = 0; block < c->n_blocks; block++) {
            if (!decode_block(c, c->main, block)) break;
            const uint32_t *tfs = block_tfs(c, c->main);
            const uint32_t *ids = c->main->ids;
            int64_t n = block_count(c, block);
            for (int64_t i = 0; i < n; i++) sums[ids[i]] += contribution(c, ids[i], tfs[i], pw->norms, w->k1);
            w->postings_scored += n;
            w->blocks_scored++;
        }
    }
}

/*
 * The dense pass's offers from one part's sums (add_part_dense's), which it leaves zeroed. `floor`:
 * a lower bound of the k-th best score over all parts (the joint floor of several parts' sums,
 * see joint_floor), or negative: none given (then one is taken from this part's own sums when k
 * is large).
 */
static void scan_part_dense(walk *w, const part_walk *pw, double *sums, double floor) {
    int64_t n_docs = pw->part->n_docs;
    const double least = 4.9406564584124654e-324; /* the smallest positive double: score >= it iff score > 0 */
    double gate = w->threshold > least ? w->threshold : least;
    if (floor > gate) gate = floor;
    int64_t scored = 0; /* every live document above 0 had its full score summed: the statistic counts them all */
    double run[WEFT_SCAN_RUN];
    int64_t start = 0;
#ifdef __SSE2__
    if (pw->to_global == NULL && !w->corrupt) {
        /*
         * Every document live (no deletion map): a full run is read into registers, cleared, and
         * counted above 0 with integer lanes (a true comparison is -1 in its lane, subtracted);
         * only a run holding a document at or above the gate (rare once there is a threshold)
         * is copied out and offered, as scan_run's caller does. The same comparisons and offers
         * in the same order as the loop below, in about half its instructions.
         */
        if (floor < 0.0 && w->sel.k >= WEFT_GROUP_GATE_FROM_K) {
            /*
             * A large k: offering every document at or above the running threshold in id order
             * offers about k (1 + ln(documents / k)) of them, each a heap update. A first gate
             * from the groups' maxima (at most WEFT_WINDOW groups, in the walk's window buffer)
             * is at most this part's k-th best score, so no document it passes over could be
             * among the results (they are every document at least the k-th best): the same
             * results, from about k offers.
             */
            int64_t group = WEFT_SCAN_RUN;
            while (n_docs / group > WEFT_WINDOW) group *= 2;
            double own = floor_of_groups(sums, n_docs, group, w->sel.k, w->partial);
            if (own > gate) gate = own;
        }
        const __m128d zero = _mm_setzero_pd();
        __m128i above = _mm_setzero_si128();
        __m128d g = _mm_set1_pd(gate);
        for (; start + WEFT_SCAN_RUN <= n_docs && !w->sel.failed; start += WEFT_SCAN_RUN) {
            double *at = sums + start;
            __m128d v0 = _mm_loadu_pd(at), v1 = _mm_loadu_pd(at + 2), v2 = _mm_loadu_pd(at + 4),
                    v3 = _mm_loadu_pd(at + 6);
            _mm_storeu_pd(at, zero);
            _mm_storeu_pd(at + 2, zero);
            _mm_storeu_pd(at + 4, zero);
            _mm_storeu_pd(at + 6, zero);
            above = _mm_sub_epi64(above, _mm_castpd_si128(_mm_cmpgt_pd(v0, zero)));
            above = _mm_sub_epi64(above, _mm_castpd_si128(_mm_cmpgt_pd(v1, zero)));
            above = _mm_sub_epi64(above, _mm_castpd_si128(_mm_cmpgt_pd(v2, zero)));
            above = _mm_sub_epi64(above, _mm_castpd_si128(_mm_cmpgt_pd(v3, zero)));
            __m128d c0 = _mm_cmpge_pd(v0, g), c1 = _mm_cmpge_pd(v1, g), c2 = _mm_cmpge_pd(v2, g),
                    c3 = _mm_cmpge_pd(v3, g);
            if (!_mm_movemask_pd(_mm_or_pd(_mm_or_pd(c0, c1), _mm_or_pd(c2, c3)))) continue;
            _mm_storeu_pd(run, v0);
            _mm_storeu_pd(run + 2, v1);
            _mm_storeu_pd(run + 4, v2);
            _mm_storeu_pd(run + 6, v3);
            unsigned ge = (unsigned)_mm_movemask_pd(c0) | (unsigned)_mm_movemask_pd(c1) << 2 |
                          (unsigned)_mm_movemask_pd(c2) << 4 | (unsigned)_mm_movemask_pd(c3) << 6;
            while (ge) {
                int bit = __builtin_ctz(ge);
                ge &= ge - 1;
                double score = run[bit];
                if (!(score >= gate)) continue; /* the gate rose within the run */
                w->threshold = offer(&w->sel, score, pw->part->base + start + bit);
                if (w->sel.failed) break;
                if (w->threshold > gate) gate = w->threshold; /* the gate never falls below the floor */
            }
            g = _mm_set1_pd(gate);
        }
        int64_t lanes[2];
        _mm_storeu_si128((__m128i *)lanes, above);
        scored += lanes[0] + lanes[1];
    }
#endif
    for (; start < n_docs && !w->corrupt && !w->sel.failed; start += WEFT_SCAN_RUN) {
        int64_t n = n_docs - start < WEFT_SCAN_RUN ? n_docs - start : WEFT_SCAN_RUN;
        const int64_t *to_global = pw->to_global != NULL ? pw->to_global + start : NULL;
        unsigned ge = scan_run(sums + start, to_global, n, gate, &scored, run);
        while (ge) {
            int at = __builtin_ctz(ge);
            int64_t doc = start + at;
            ge &= ge - 1;
            double score = run[at];
            if (!(score >= gate)) continue; /* the gate rose within the run */
            int64_t id = pw->to_global != NULL ? pw->to_global[doc] : pw->part->base + doc;
            if (id < 0) continue; /* deleted or filtered out */
            w->threshold = offer(&w->sel, score, id);
            if (w->sel.failed) break;
            gate = w->threshold > least ? w->threshold : least;
        }
    }
    w->documents_scored += scored;
    if (start < n_docs) memset(sums + start, 0, (size_t)(n_docs - start) * sizeof(double)); /* a scan cut short */
}

/* Score one part densely into sums (n_docs zeroed doubles, left zeroed); see weft_bm25_dense_max_docs. */
static void walk_part_dense(walk *w, const part_walk *pw, double *sums) {
    add_part_dense(w, pw, sums);
    scan_part_dense(w, pw, sums, -1.0);
}

/*
 * The joint dense pass: with a large k over several small parts, each part's scan would offer
 * every document above the threshold the parts before it left (about k ln(parts) offers more
 * than one part of them all: SciFact in 10 parts at top-100, four times the heap updates). So
 * the parts that qualify are summed first, each into its own slice of one buffer, and one floor
 * is taken from the group maxima of all their sums together (as floor_of_groups does for one
 * part: at least k documents reach it, so it is at most the k-th best); then each part is
 * scanned from that floor. The same documents at least the k-th best are offered, so the same
 * results, to the bit. A part qualifies when it is dense with no id map (its sums are all live
 * documents, which the floor needs) and the qualifying parts' documents fit WEFT_JOINT_MAX_DOCS
 * together (the buffer is kept between queries, like one part's sums).
 */
#ifndef WEFT_JOINT_MAX_DOCS
#define WEFT_JOINT_MAX_DOCS 262144
#endif

/* The k-th largest of the maxima of groups of the first n sums (0 when fewer than k groups). */
static double joint_floor(const walk *w, const double *sums, int64_t n) {
    int64_t group = WEFT_SCAN_RUN;
    while (n / group > WEFT_WINDOW) group *= 2;
    return floor_of_groups(sums, n, group, w->sel.k, w->partial);
}

/*
 * Whether part p (its in_part lists from lists[first]) joins the joint dense pass, `used`
 * documents having joined before it: the one rule the three passes over the parts apply alike.
 */
static int joins(const walk *w, int64_t p, int64_t first, int64_t in_part, const part_desc *part, int64_t used) {
    return in_part > 0 && part->to_global == 0 && use_dense(w, p, first, part) &&
           part->n_docs <= WEFT_JOINT_MAX_DOCS - used;
}

/*
 * The joint pass's sums term by term (each term's lists in every joining part, then the next
 * term's) when every list of the joining parts has an impact table: 1, done; 0, a list has none
 * (then add_part_dense sums each part in turn); -1, out of memory. Why: a term's tables of all
 * the parts lie side by side (weftsearch.scorers.bm25.lists builds them in one buffer, in part
 * order), so read term by term they are one sequential read, as one segment's table is; part by
 * part, each part's table of each term began with a cache miss (SciFact in 10 segments at
 * top-100: the first read of a table was two fifths of the dense pass's time). The same sums to
 * the bit: a document lies in one part, so it still receives its contributions in sorted term
 * order, each added once, from 0.0.
 */
static int add_joint_by_term(walk *w, const part_desc *parts, int64_t n_parts, int64_t m, double *sums) {
    const list_desc *lists = w->lists;
    int64_t local[256];
    int64_t need = (m + 1) + 2 * w->n_lists; /* per term a start, per list its index and slice */
    if ((uint64_t)need > SIZE_MAX / sizeof(int64_t)) return -1;
    int64_t *starts = need <= 256 ? local : malloc((size_t)need * sizeof(int64_t));
    if (starts == NULL) return -1;
    int64_t *slots = starts + (m + 1);
    int done = 1;
    for (int64_t t = 0; t <= m; t++) starts[t] = 0;
    /* Two passes over the joining parts (the rule joins() applies): count by term, then place. */
    for (int pass = 0; pass < 2 && done; pass++) {
        for (int64_t p = 0, first = 0, used = 0; p < n_parts; p++) {
            int64_t in_part = 0;
            while (first + in_part < w->n_lists && lists[first + in_part].part == p) in_part++;
            if (joins(w, p, first, in_part, &parts[p], used)) {
                for (int64_t i = first; i < first + in_part; i++) {
                    if (lists[i].impacts == 0) {
                        done = 0;
                        break;
                    }
                    if (pass == 0) {
                        starts[lists[i].term + 1]++;
                    } else {
                        int64_t at = starts[lists[i].term]++;
                        slots[2 * at] = i;
                        slots[2 * at + 1] = used;
                    }
                }
                if (!done) break;
                used += parts[p].n_docs;
            }
            first += in_part;
        }
        if (pass == 0 && done)
            for (int64_t t = 0; t < m; t++) starts[t + 1] += starts[t];
    }
    if (done) {
        int64_t placed = starts[m]; /* every slot: the second pass left starts[m] the total */
        for (int64_t at = 0; at < placed; at++) {
            const list_desc *l = &lists[slots[2 * at]];
            double *into = sums + slots[2 * at + 1];
            const double *impacts = (const double *)((const int64_t *)(uintptr_t)l->impacts + WEFT_IMPACT_HEADER);
            const uint32_t *ids = (const uint32_t *)(impacts + l->count);
            const double weight = w->weights[l->term];
            int64_t i = 0;
            /* As add_part_dense: four at a time, the same additions in the same order per document. */
            for (; i + 4 <= l->count; i += 4) {
                into[ids[i]] += impacts[i] * weight;
                into[ids[i + 1]] += impacts[i + 1] * weight;
                into[ids[i + 2]] += impacts[i + 2] * weight;
                into[ids[i + 3]] += impacts[i + 3] * weight;
            }
            for (; i < l->count; i++) into[ids[i]] += impacts[i] * weight;
            w->postings_scored += l->count;
            w->blocks_scored += l->n_blocks;
        }
    }
    if (starts != local) free(starts);
    return done;
}

/*
 * Every stored document at least the k-th score, counted; when they fit in out_capacity, written
 * best first (score descending, then internal id ascending). Returns their number.
 */
static int64_t collect(selection *sel, int64_t *ids_out, double *scores_out, int64_t out_capacity) {
    int64_t kept = 0;
    int full = sel->heap_size == sel->k;
    double kth = full ? sel->heap[0].score : -INFINITY;
    for (int64_t i = 0; i < sel->stored; i++)
        if (sel->store[i].score >= kth) sel->store[kept++] = sel->store[i];
    if (kept <= out_capacity) {
        qsort(sel->store, (size_t)kept, sizeof(scored_id), compare_scored);
        for (int64_t i = 0; i < kept; i++) {
            ids_out[i] = sel->store[i].id;
            scores_out[i] = sel->store[i].score;
        }
    }
    return kept;
}

/*
 * The top-k documents of one query over a snapshot.
 *
 * lists: n_lists descriptors (see list_desc), grouped by part, ascending term
 * within a part. parts: n_parts descriptors. weights: m float64, the weight of
 * each term in sorted term order. k >= 1. bound_scale: 1.0 (tests pass less to
 * break the bound on purpose and check that the tests notice). stats (5 int64,
 * written): blocks in all lists, blocks in which at least one posting was
 * scored, postings, postings scored, documents fully scored.
 *
 * Returns the number of results; when it is at most out_capacity they are
 * written to ids_out/scores_out (internal ids, scores), best first; otherwise
 * nothing is written (call again with room for them). -1: out of memory;
 * -2: bad arguments; -3: a list's packed postings are corrupt (a width above
 * 32 or stray bits, blocks that need more or fewer words than the list has,
 * last ids that do not increase or run past the part, a block whose decoded
 * ids do not end at its last id): stats[0] is then the index of that list.
 * Results are every document whose score is at least the k-th best score
 * (ties included), so there may be more than k.
 */
static int64_t top_k_into(const int64_t *lists_raw, int64_t n_lists, const int64_t *parts_raw, int64_t n_parts,
                          const double *weights, int64_t m, double k1, double b, double avgdl, int64_t k,
                          double bound_scale, int64_t *ids_out, double *scores_out, int64_t out_capacity,
                          int64_t *stats, scratch *keep);

int64_t weft_bm25_top_k(const int64_t *lists_raw, int64_t n_lists, const int64_t *parts_raw, int64_t n_parts,
                        const double *weights, int64_t m, double k1, double b, double avgdl, int64_t k,
                        double bound_scale, int64_t *ids_out, double *scores_out, int64_t out_capacity,
                        int64_t *stats) {
    scratch own = {0};
    int64_t result = top_k_into(lists_raw, n_lists, parts_raw, n_parts, weights, m, k1, b, avgdl, k, bound_scale,
                                ids_out, scores_out, out_capacity, stats, &own);
    scratch_free(&own);
    return result;
}

/* weft_bm25_top_k with the caller's working memory (`keep`, whose sums it leaves zeroed). */
static int64_t top_k_into(const int64_t *lists_raw, int64_t n_lists, const int64_t *parts_raw, int64_t n_parts,
                          const double *weights, int64_t m, double k1, double b, double avgdl, int64_t k,
                          double bound_scale, int64_t *ids_out, double *scores_out, int64_t out_capacity,
                          int64_t *stats, scratch *keep) {
    const list_desc *lists = (const list_desc *)lists_raw;
    const part_desc *parts = (const part_desc *)parts_raw;
    for (int i = 0; i < 5; i++) stats[i] = 0;
    int64_t total = 0, largest_part = 0;
    if (check_lists(lists, n_lists, n_parts, m, k, out_capacity, k1, b, avgdl, stats, &total, &largest_part) != 0)
        return -2;
    if (check_impacts(lists, n_lists, parts, k1) != 0) return -2;
    if (total == 0) return 0;
    /* The candidates that exist bound k: never allocate for more. */
    if (k > total) k = total;
    if ((uint64_t)k > SIZE_MAX / sizeof(scored_id)) return -2;
    /* Lists per part are at most m: never near this, but every size below is checked. */
    if ((uint64_t)largest_part > SIZE_MAX / 2 / sizeof(lane)) return -2;

    walk w = {0};
    w.lists = lists;
    w.n_lists = n_lists;
    w.weights = weights;
    w.k1 = k1;
    w.b = b;
    w.avgdl = avgdl;
    w.bound_scale = bound_scale;
    w.margin = 1.0 + ((double)m + 8.0) * ldexp(1.0, -46);
    w.postings = total;
    w.threshold = -INFINITY;
    int64_t result = -1;
    if (!walk_alloc(&w, k, largest_part, keep)) goto done;
    /*
     * The joint dense pass (see joint_floor): which parts join, and room for their sums side by
     * side, then for the largest other dense part's after them (which is summed while theirs wait).
     */
    int64_t joint_docs = 0, joint_parts = 0, other_docs = 0;
    if (k >= WEFT_GROUP_GATE_FROM_K) {
        for (int64_t p = 0, first = 0; p < n_parts; p++) {
            int64_t in_part = 0;
            while (first + in_part < n_lists && lists[first + in_part].part == p) in_part++;
            if (joins(&w, p, first, in_part, &parts[p], joint_docs)) {
                joint_docs += parts[p].n_docs;
                joint_parts++;
            } else if (in_part > 0 && use_dense(&w, p, first, &parts[p]) && parts[p].n_docs > other_docs) {
                other_docs = parts[p].n_docs;
            }
            first += in_part;
        }
        if (joint_parts < 2) joint_docs = 0;
    }
    if (joint_docs > 0 && joint_docs + other_docs > keep->sums_size) {
        free(keep->sums);
        keep->sums_size = 0;
        keep->sums = calloc((size_t)(joint_docs + other_docs), sizeof(double));
        if (keep->sums == NULL) {
            w.sel.failed = 1;
            goto done;
        }
        keep->sums_size = joint_docs + other_docs;
    }
    int64_t joint_used = 0;
    int by_term = joint_docs > 0 ? add_joint_by_term(&w, parts, n_parts, m, keep->sums) : 0;
    if (by_term < 0) {
        w.sel.failed = 1;
        goto done;
    }
    for (int64_t p = 0, first = 0; p < n_parts && !w.sel.failed && !w.corrupt; p++) {
        part_walk pw = {&parts[p], (const double *)(uintptr_t)parts[p].norms,
                        (const int64_t *)(uintptr_t)parts[p].to_global, 0};
        if (by_term) {
            /* Its sums are in (add_joint_by_term): only its place in the joint buffer to count. */
            int64_t in_part = 0;
            while (first + in_part < n_lists && lists[first + in_part].part == p) in_part++;
            if (joins(&w, p, first, in_part, pw.part, joint_used)) {
                joint_used += pw.part->n_docs;
                first += in_part;
                continue;
            }
        }
        int dense = use_dense(&w, p, first, pw.part);
        pw.n = open_cursors(&w, p, first, pw.part, dense);
        first += pw.n;
        if (w.corrupt) break;
        if (pw.n == 0) continue;
        if (joint_docs > 0 && joins(&w, p, first - pw.n, pw.n, pw.part, joint_used)) {
            /* Summed now into its slice, scanned below from the joint floor. */
            add_part_dense(&w, &pw, keep->sums + joint_used);
            joint_used += pw.part->n_docs;
        } else if (dense && joint_docs > 0) {
            walk_part_dense(&w, &pw, keep->sums + joint_docs); /* after the joint slices: room made above */
        } else if (dense) {
            /* Sized by the largest dense part seen; walk_part_dense leaves them zeroed for the next. */
            if (pw.part->n_docs > keep->sums_size) {
                free(keep->sums);
                keep->sums_size = 0;
                keep->sums = calloc((size_t)pw.part->n_docs, sizeof(double));
                if (keep->sums == NULL) {
                    w.sel.failed = 1;
                    break;
                }
                keep->sums_size = pw.part->n_docs;
            }
            walk_part_dense(&w, &pw, keep->sums);
        } else {
            walk_part(&w, &pw);
        }
    }
    if (joint_used > 0 && !w.sel.failed && !w.corrupt) {
        double floor = joint_floor(&w, keep->sums, joint_used);
        for (int64_t p = 0, first = 0, at = 0; p < n_parts && at < joint_used && !w.sel.failed; p++) {
            /* The parts summed above, found again by the same rule (their slices follow in order). */
            int64_t in_part = 0;
            while (first + in_part < n_lists && lists[first + in_part].part == p) in_part++;
            if (joins(&w, p, first, in_part, &parts[p], at)) {
                part_walk pw = {&parts[p], (const double *)(uintptr_t)parts[p].norms, NULL, 0};
                scan_part_dense(&w, &pw, keep->sums + at, floor);
                at += parts[p].n_docs;
            }
            first += in_part;
        }
    }
    if (w.sel.failed) goto done;
    stats[1] = w.blocks_scored;
    stats[3] = w.postings_scored;
    stats[4] = w.documents_scored;
    if (w.corrupt) {
        stats[0] = w.corrupt - 1;
        result = -3;
        goto done;
    }
    result = collect(&w.sel, ids_out, scores_out, out_capacity);
done:
    /*
     * A dense pass cut short (a corrupt list, out of memory) left sums behind; the next query of
     * this scratch (a batch's next, this thread's next) must start from zeros.
     */
    if (result < 0 && keep->sums != NULL) memset(keep->sums, 0, (size_t)keep->sums_size * sizeof(double));
    walk_done(&w, keep);
    return result;
}

/*
 * One list's impact table, which the dense pass reads instead of decoding the list and dividing
 * once a posting (weftsearch.scorers.bm25.lists keeps one per snapshot, (k1, b, avgdl), segment
 * and term, built on a term's first search there). row: one list descriptor (its term, part and
 * impacts fields are ignored); norms: its part's n_docs length norms (the part table's, whose
 * address the table records). table: table_words int64, which must be
 * WEFT_IMPACT_HEADER + count + ceil(count / 2): the header (count, n_docs, the norms' address, k1's
 * bits), then count float64 impacts impact(tf, norm(id), k1), then count uint32 local ids, by
 * position in the list. The same impact() the kernel computes, so impact * weight is the
 * contribution to the bit. Returns 0, -1 out of memory, -2 bad arguments, -3 the postings or their
 * block table are corrupt (the same checks as a query's). O(count).
 */
int64_t weft_bm25_impacts(const int64_t *row_raw, const double *norms, int64_t n_docs, double k1, int64_t *table,
                          int64_t table_words) {
    const list_desc *row = (const list_desc *)row_raw;
    int64_t count = row->count;
    /* count <= (INT64_MAX - header) / 2 keeps header + count + ceil(count / 2) in range. */
    if (count <= 0 || count > (INT64_MAX - WEFT_IMPACT_HEADER) / 2 || n_docs < 0 || !(k1 >= 0.0) ||
        row->words < 0 || row->n_blocks != (count + WEFT_BLOCK - 1) / WEFT_BLOCK || norms == NULL || table == NULL)
        return -2;
    if (table_words != WEFT_IMPACT_HEADER + count + (count + 1) / 2) return -2;
    if ((uint64_t)table_words > SIZE_MAX / sizeof(int64_t)) return -2;
    list_desc one = *row;
    one.term = 0;
    one.part = 0;
    one.impacts = 0;
    part_desc part = {(int64_t)(uintptr_t)norms, 0, 0, n_docs};
    double weight = 1.0;
    scratch own = {0};
    walk w = {0};
    w.lists = &one;
    w.n_lists = 1;
    w.weights = &weight;
    w.k1 = k1;
    w.b = 0.0; /* the bounds open_cursors computes are not used */
    w.avgdl = 1.0;
    w.bound_scale = 1.0;
    w.threshold = -INFINITY;
    int64_t result = -1;
    if (!walk_alloc(&w, 1, 1, &own)) goto done;
    result = -3;
    /* Checks the block table (widths, increasing last ids, the words, the last id below n_docs). */
    if (open_cursors(&w, 0, 0, &part, 0) != 1 || w.corrupt) goto done;
    cursor *c = &w.cursors[0];
    double *impacts = (double *)(table + WEFT_IMPACT_HEADER);
    uint32_t *ids_out = (uint32_t *)(impacts + count);
    for (int64_t block = 0; block < c->n_blocks; block++) {
        if (!decode_block(c, c->main, block)) goto done; /* ids not ending at the block's last id */
        const uint32_t *tfs = block_tfs(c, c->main), *ids = c->main->ids;
        int64_t n = block_count(c, block), start = block << WEFT_BLOCK_SHIFT;
        for (int64_t i = 0; i < n; i++) {
            ids_out[start + i] = ids[i]; /* below n_docs: they ascend to the last id, checked above */
            impacts[start + i] = impact((double)tfs[i], norms[ids[i]], k1);
        }
    }
    table[0] = count;
    table[1] = n_docs;
    table[2] = (int64_t)(uintptr_t)norms;
    memcpy(&table[3], &k1, sizeof k1);
    result = 0;
done:
    walk_done(&w, &own);
    scratch_free(&own);
    return result;
}

/* Bits needed for v (0 for 0). */
static unsigned bit_width(uint64_t v) {
    unsigned width = 0;
    while (v) width++, v >>= 1;
    return width;
}

/*
 * Block metadata of one term's postings in one segment: for each block of
 * WEFT_BLOCK postings, its last local id, largest tf, smallest document
 * length and widths (bits of its largest id gap | bits of its largest tf - 1
 * << 8), into meta (4 * ceil(count / WEFT_BLOCK) uint32: lasts, then max tfs,
 * then min lengths, then widths; format version 3's `post.blocks` of a term).
 * Returns 0, or -2 when an id is outside the n_docs lengths, ids do not
 * increase or a tf is 0. O(count). The stored tables' oracle in the tests.
 */
int64_t weft_bm25_blocks(const uint32_t *ids, const uint32_t *tfs, int64_t count, const uint32_t *lengths,
                         int64_t n_docs, uint32_t *meta) {
    if (count < 0 || n_docs < 0) return -2;
    int64_t n_blocks = (count + WEFT_BLOCK - 1) / WEFT_BLOCK;
    int64_t previous = -1;
    for (int64_t block = 0; block < n_blocks; block++) {
        int64_t start = block << WEFT_BLOCK_SHIFT, end = start + WEFT_BLOCK;
        if (end > count) end = count;
        uint32_t max_tf = 0, min_len = UINT32_MAX;
        uint64_t max_gap = 0;
        for (int64_t i = start; i < end; i++) {
            if ((int64_t)ids[i] >= n_docs || (int64_t)ids[i] <= previous || tfs[i] == 0) return -2;
            uint64_t gap = (uint64_t)((int64_t)ids[i] - previous - 1);
            if (gap > max_gap) max_gap = gap;
            previous = ids[i];
            if (tfs[i] > max_tf) max_tf = tfs[i];
            if (lengths[ids[i]] < min_len) min_len = lengths[ids[i]];
        }
        meta[block] = ids[end - 1];
        meta[n_blocks + block] = max_tf;
        meta[2 * n_blocks + block] = min_len;
        meta[3 * n_blocks + block] = bit_width(max_gap) | (bit_width((uint64_t)max_tf - 1) << 8);
    }
    return 0;
}

/*
 * Many queries in one call (weftsearch.native.bm25.top_k_batch): weft_bm25_top_k for each
 * query in turn, so each query's results are exactly (every bit, every tie) what a call of its
 * own returns; one call lets the caller release the GIL once for the whole batch.
 *
 * Query q's lists are lists[list_starts[q] ..< list_starts[q + 1]] (8 int64 each, as for
 * weft_bm25_top_k), its weights weights[weight_starts[q] ..< weight_starts[q + 1]]; every query
 * reads the same parts and (k1, b, avgdl, k). A query's results go to ids_out/scores_out right
 * after the previous written query's; counts_out[q] is its number of results, and written[q] is 1
 * when they were written, 0 when they did not fit in what was left of out_capacity (the caller
 * runs that query again on its own with room for them). stats (5 * n_queries int64): query q's
 * five statistics (as weft_bm25_top_k writes them) at stats[5 * q ..< 5 * q + 5], so each
 * query's plan says what it read (weft_bm25_top_k_many, which summed them, is gone: a caller
 * built for it finds no batch function and scores query by query).
 * Returns 0, or the first failing query's code (-1 out of memory, -2 bad arguments).
 */
int64_t weft_bm25_top_k_batch(const int64_t *lists_raw, const int64_t *list_starts, const int64_t *parts_raw,
                              int64_t n_parts, const double *weights, const int64_t *weight_starts,
                              int64_t n_queries, double k1, double b, double avgdl, int64_t k, double bound_scale,
                              int64_t *ids_out, double *scores_out, int64_t out_capacity, int64_t *counts_out,
                              int64_t *written, int64_t *stats) {
    int64_t used = 0;
    /* stats holds 5 * n_queries values: that product must not overflow. */
    if (n_queries < 0 || out_capacity < 0 || n_queries > INT64_MAX / 5) return -2;
    for (int64_t q = 0; q < n_queries; q++) {
        /* Offsets into the caller's arrays: checked before any difference or product is formed
         * (a list descriptor is 8 int64 words, so 8 * list_end must fit too). */
        int64_t list_first = list_starts[q], list_end = list_starts[q + 1];
        int64_t weight_first = weight_starts[q], weight_end = weight_starts[q + 1];
        if (list_first < 0 || list_end < list_first || list_end > INT64_MAX / 8 || weight_first < 0 ||
            weight_end < weight_first)
            return -2;
        int64_t n_lists = list_end - list_first, m = weight_end - weight_first;
        int64_t kept = weft_bm25_top_k(lists_raw + 8 * list_first, n_lists, parts_raw, n_parts,
                                       weights + weight_first, m, k1, b, avgdl, k, bound_scale,
                                       ids_out + used, scores_out + used, out_capacity - used, stats + 5 * q);
        if (kept < 0) return kept;
        counts_out[q] = kept;
        written[q] = kept <= out_capacity - used;
        if (written[q]) used += kept;
    }
    return 0;
}

/* --------------------------------------------------------------------------- one query, by term */

/*
 * One query from the snapshot's per-term descriptor tables (weftsearch.native.bm25.query): the
 * caller passes, per query term in sorted term order, the address and length of that term's rows
 * (list descriptors built once per snapshot and term, ascending part, the term field ignored);
 * this function lays them out grouped by part, ascending term within a part (what weft_bm25_top_k
 * takes), so a query's set-up on the Python side is a term lookup and two integers per term.
 *
 * terms: 2 * m int64 (rows address, rows). stats: 6 int64, weft_bm25_top_k's five, then
 * stats[5]: 1 when two written results have the same score (the caller then orders those by key;
 * without ties the internal-id order written here is the canonical order on any snapshot).
 * On -3 (a corrupt list) stats[0] is the term's index and stats[5] the part's.
 * Returns what weft_bm25_top_k returns.
 */
static int64_t query_into(const int64_t *terms, int64_t m, const double *weights, const int64_t *parts_raw,
                          int64_t n_parts, double k1, double b, double avgdl, int64_t k, double bound_scale,
                          int64_t *ids_out, double *scores_out, int64_t out_capacity, int64_t *stats,
                          scratch *keep);

#ifndef _WIN32
#include <pthread.h>
/*
 * Each calling thread's scratch, kept between its queries (freed when the thread exits): a
 * query on a small index then neither allocates its walk's buffers nor zeroes the dense pass's
 * sums afresh (a 41 KB calloc a SciFact query, a sixth of the call's instructions). A thread
 * runs one call at a time, so nothing else touches it during a call.
 */
static pthread_key_t thread_scratch_key;
static pthread_once_t thread_scratch_once = PTHREAD_ONCE_INIT;
static int thread_scratch_ready;

static void thread_scratch_destroy(void *kept) {
    scratch_free(kept);
    free(kept);
}

static void thread_scratch_make_key(void) {
    thread_scratch_ready = pthread_key_create(&thread_scratch_key, thread_scratch_destroy) == 0;
}

/* This thread's scratch, or NULL (then the caller uses one of its own for the call). */
static scratch *thread_scratch(void) {
    if (pthread_once(&thread_scratch_once, thread_scratch_make_key) != 0 || !thread_scratch_ready) return NULL;
    scratch *kept = pthread_getspecific(thread_scratch_key);
    if (kept == NULL) {
        kept = calloc(1, sizeof(scratch));
        if (kept != NULL && pthread_setspecific(thread_scratch_key, kept) != 0) {
            free(kept);
            kept = NULL;
        }
    }
    return kept;
}
#else
static scratch *thread_scratch(void) { return NULL; }
#endif

int64_t weft_bm25_query(const int64_t *terms, int64_t m, const double *weights, const int64_t *parts_raw,
                        int64_t n_parts, double k1, double b, double avgdl, int64_t k, double bound_scale,
                        int64_t *ids_out, double *scores_out, int64_t out_capacity, int64_t *stats) {
    scratch *kept = thread_scratch();
    if (kept != NULL) {
        int64_t result = query_into(terms, m, weights, parts_raw, n_parts, k1, b, avgdl, k, bound_scale, ids_out,
                                    scores_out, out_capacity, stats, kept);
        scratch_trim(kept);
        return result;
    }
    scratch own = {0};
    int64_t result = query_into(terms, m, weights, parts_raw, n_parts, k1, b, avgdl, k, bound_scale, ids_out,
                                scores_out, out_capacity, stats, &own);
    scratch_free(&own);
    return result;
}

/* weft_bm25_query with the caller's working memory (see scratch). */
static int64_t query_into(const int64_t *terms, int64_t m, const double *weights, const int64_t *parts_raw,
                          int64_t n_parts, double k1, double b, double avgdl, int64_t k, double bound_scale,
                          int64_t *ids_out, double *scores_out, int64_t out_capacity, int64_t *stats,
                          scratch *keep) {
    for (int i = 0; i < 6; i++) stats[i] = 0;
    if (m <= 0 || n_parts < 0 || m > INT64_MAX / 2) return -2;
    int64_t n_lists = 0;
    for (int64_t t = 0; t < m; t++) {
        int64_t rows = terms[2 * t + 1];
        if (rows < 0 || rows > n_parts || (rows > 0 && terms[2 * t] == 0)) return -2;
        if (n_lists > INT64_MAX - rows) return -2; /* m * n_parts rows could wrap */
        n_lists += rows;
    }
    if ((uint64_t)n_lists > SIZE_MAX / sizeof(list_desc) || (uint64_t)m > SIZE_MAX / sizeof(int64_t)) return -1;
    /* A handful of terms and segments is the usual query: no allocation for it. */
    list_desc local_lists[64];
    int64_t local_heads[64];
    list_desc *lists = n_lists <= 64 ? local_lists : malloc((size_t)n_lists * sizeof(list_desc));
    int64_t *heads = m <= 64 ? local_heads : malloc((size_t)m * sizeof(int64_t));
    int64_t result = -1;
    if (lists == NULL || heads == NULL) goto done;
    for (int64_t t = 0; t < m; t++) heads[t] = 0;
    /* Merge the terms' rows by part (each term's rows ascend by part): O(lists * terms). */
    for (int64_t filled = 0; filled < n_lists;) {
        int64_t part = INT64_MAX;
        for (int64_t t = 0; t < m; t++) {
            if (heads[t] >= terms[2 * t + 1]) continue;
            const list_desc *row = (const list_desc *)(uintptr_t)terms[2 * t] + heads[t];
            if (row->part < part) part = row->part;
        }
        if (part < 0 || part >= n_parts) {
            result = -2;
            goto done;
        }
        for (int64_t t = 0; t < m; t++) {
            if (heads[t] >= terms[2 * t + 1]) continue;
            const list_desc *row = (const list_desc *)(uintptr_t)terms[2 * t] + heads[t];
            if (row->part != part) continue;
            lists[filled] = *row;
            lists[filled].term = t;
            filled++;
            heads[t]++;
            /* Rows of one term must ascend by part: a repeat would be read twice. */
            if (heads[t] < terms[2 * t + 1] && row[1].part <= part) {
                result = -2;
                goto done;
            }
        }
    }
    result = top_k_into((const int64_t *)lists, n_lists, parts_raw, n_parts, weights, m, k1, b, avgdl, k,
                        bound_scale, ids_out, scores_out, out_capacity, stats, keep);
    if (result == -3) {
        int64_t index = stats[0];
        stats[0] = index >= 0 && index < n_lists ? lists[index].term : -1;
        stats[5] = index >= 0 && index < n_lists ? lists[index].part : -1;
    } else if (result > 0 && result <= out_capacity) {
        for (int64_t i = 1; i < result; i++)
            if (scores_out[i] == scores_out[i - 1]) {
                stats[5] = 1;
                break;
            }
    }
done:
    if (lists != local_lists) free(lists);
    if (heads != local_heads) free(heads);
    return result;
}

/* --------------------------------------------------------------------------- many queries, threads */

typedef struct {
    const int64_t *terms, *term_starts;
    const double *weights;
    const int64_t *parts;
    int64_t n_parts, n_queries, k, slot;
    double k1, b, avgdl, bound_scale;
    int64_t *ids_out, *counts_out, *stats;
    double *scores_out;
    int64_t next; /* the next query to take (atomic) */
} batch_job;

static void run_query(batch_job *job, int64_t q, scratch *keep) {
    int64_t first = job->term_starts[q], end = job->term_starts[q + 1];
    if (first < 0 || end < first || end > INT64_MAX / 2) {
        job->counts_out[q] = -2;
        return;
    }
    job->counts_out[q] = query_into(job->terms + 2 * first, end - first, job->weights + first, job->parts,
                                    job->n_parts, job->k1, job->b, job->avgdl, job->k, job->bound_scale,
                                    job->ids_out + q * job->slot, job->scores_out + q * job->slot, job->slot,
                                    job->stats + 6 * q, keep);
}

/* Takes queries until none is left; its working memory serves all of them (a query leaves it as found). */
static void *batch_worker(void *argument) {
    batch_job *job = argument;
    scratch keep = {0};
    for (;;) {
        int64_t q = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED);
        if (q >= job->n_queries) break;
        run_query(job, q, &keep);
    }
    scratch_free(&keep);
    return NULL;
}

/*
 * Many queries in one call, on `threads` threads (the calling one included): weft_bm25_query for
 * each, so each query's results are exactly what a call of its own returns, whichever thread ran
 * it. Query q's terms are terms[2 * term_starts[q] ..< 2 * term_starts[q + 1]] (pairs as for
 * weft_bm25_query) and its weights weights[term_starts[q] ..< term_starts[q + 1]]; every query
 * reads the same parts and (k1, b, avgdl, k). Its results go to ids_out/scores_out at q * slot,
 * room for `slot`; counts_out[q] is what weft_bm25_query returned (more than slot: not written,
 * the caller runs it again alone with room; negative: that query's error, the caller runs it again
 * alone to raise it), its six statistics at stats[6 * q]. Returns 0, or -2 for bad arguments.
 * A thread that cannot be started leaves its share to the others (the results are the same).
 */
int64_t weft_bm25_query_batch(const int64_t *terms, const int64_t *term_starts, const double *weights,
                              int64_t n_queries, const int64_t *parts_raw, int64_t n_parts, double k1, double b,
                              double avgdl, int64_t k, double bound_scale, int64_t slot, int64_t threads,
                              int64_t *ids_out, double *scores_out, int64_t *counts_out, int64_t *stats) {
    if (n_queries < 0 || slot < 0 || threads < 1 || n_queries > INT64_MAX / 6 ||
        (slot > 0 && n_queries > INT64_MAX / slot))
        return -2;
    batch_job job = {terms,   term_starts, weights, parts_raw, n_parts, n_queries, k,          slot, k1, b,
                     avgdl,   bound_scale, ids_out, counts_out, stats, scores_out, 0};
    if (threads > n_queries) threads = n_queries > 0 ? n_queries : 1;
#ifndef _WIN32
    enum { MOST_THREADS = 64 };
    pthread_t started[MOST_THREADS];
    int64_t n_started = 0;
    for (int64_t i = 1; i < threads && i < MOST_THREADS; i++) {
        if (pthread_create(&started[n_started], NULL, batch_worker, &job) != 0) break;
        n_started++;
    }
    batch_worker(&job);
    for (int64_t i = 0; i < n_started; i++) pthread_join(started[i], NULL);
#else
    batch_worker(&job);
#endif
    return 0;
}

/* --------------------------------------------------------------------------- a search's hits, checked */

/*
 * Whether a search's hits are known sound, in one call (weftsearch.engine.snapshot's _KeyViews: a
 * search reports a hit only when its stored record passed its checksum and its key was checked,
 * verdicts each segment reader keeps, one byte a document). Why here: on a snapshot of several
 * segments the same look-up in Python cost about 150 ns a hit (finding the hit's segment, its local
 * id, two verdicts), a tenth of a 10-segment top-100 search.
 *
 * ids: n internal ids; parts: n_parts rows of WEFT_HIT_PART_FIELDS int64, ascending base: the part's
 * first internal id, its live documents, the address of its live-to-local map (int64; 0: nothing
 * deleted, local = id - base), of its record verdicts (uint8: 1 sound) and of its key verdicts (one
 * byte a document, nonzero: checked; address 0: the reader decoded its whole key table, every key
 * is sound), then those of its key table (weft_ties_by_key reads them). Reads only. Returns the position of the first hit whose record or key is not known sound (n when every
 * one is); -2 when a hit is outside every part or a size is negative.
 */
#define WEFT_HIT_PART_FIELDS 7

/*
 * The row of parts (n_parts > 0 rows, ascending base) holding internal id `id`, and the id's local
 * document number there in *local; NULL when id is outside every part. Few parts: a bisection
 * all the same. What weft_hits_sound and weft_ties_by_key both do for each hit.
 */
static inline const int64_t *hit_part(const int64_t *parts, int64_t n_parts, int64_t id, int64_t *local) {
    int64_t low = 0, high = n_parts;
    while (high - low > 1) {
        int64_t middle = low + (high - low) / 2;
        if (parts[WEFT_HIT_PART_FIELDS * middle] <= id)
            low = middle;
        else
            high = middle;
    }
    const int64_t *part = parts + WEFT_HIT_PART_FIELDS * low;
    int64_t offset = id - part[0];
    if (offset < 0 || offset >= part[1]) return NULL;
    const int64_t *live = (const int64_t *)(uintptr_t)part[2];
    *local = live != NULL ? live[offset] : offset;
    return part;
}

int64_t weft_hits_sound(const int64_t *ids, int64_t n, const int64_t *parts, int64_t n_parts) {
    if (n < 0 || n_parts < 0 || (n > 0 && n_parts == 0)) return -2;
    for (int64_t i = 0; i < n; i++) {
        int64_t local;
        const int64_t *part = hit_part(parts, n_parts, ids[i], &local);
        if (part == NULL) return -2;
        const uint8_t *state = (const uint8_t *)(uintptr_t)part[3], *checked = (const uint8_t *)(uintptr_t)part[4];
        if (state[local] != 1 || (checked != NULL && !checked[local])) return i;
    }
    return n;
}

/*
 * weft_bm25_query, then weft_hits_sound of its first min(kept, k) results in the same call: a
 * search's results and whether its hits' records and keys are known sound, with the GIL released
 * once (the key resolution of issue 31's one call a query). stats has room for 7: the query's six,
 * then the first result not known sound (min(kept, k): every one; -1: not asked, the query failed,
 * or its results did not fit out_capacity). hit_parts NULL: not asked. Returns what
 * weft_bm25_query returns; -2 when hit_parts is given with a negative count or an id of the results
 * falls outside every part (a bug of the caller).
 */
int64_t weft_bm25_query_sound(const int64_t *terms, int64_t m, const double *weights, const int64_t *parts_raw,
                              int64_t n_parts, double k1, double b, double avgdl, int64_t k, double bound_scale,
                              int64_t *ids_out, double *scores_out, int64_t out_capacity, int64_t *stats,
                              const int64_t *hit_parts, int64_t n_hit_parts) {
    stats[6] = -1;
    int64_t kept = weft_bm25_query(terms, m, weights, parts_raw, n_parts, k1, b, avgdl, k, bound_scale, ids_out,
                                   scores_out, out_capacity, stats);
    if (kept < 0 || kept > out_capacity || hit_parts == NULL) return kept;
    int64_t first = weft_hits_sound(ids_out, kept < k ? kept : k, hit_parts, n_hit_parts);
    if (first < 0) return -2;
    stats[6] = first;
    return kept;
}

/*
 * A search's results put in canonical order across segments: ids and scores (n, sorted by score
 * descending then internal id, as weft_bm25_query returns them) have each run of equal scores that
 * starts before position `cut` sorted by key, in place. Keys compare as their UTF-8 bytes, which
 * order as the strings' code points do (every key a verdict calls checked is valid UTF-8, and no
 * two keys of a snapshot are equal). Why here: the same in Python read and decoded each member's
 * key (a synthetic 100,000 in 10 segments: some 30 members a query, half a top-100 search's tail).
 *
 * parts: weft_hits_sound's rows, whose last two fields are the addresses of the part's key table:
 * its offsets (uint64, n_docs + 1) and its bytes. Returns 0; 1 when a member's key was not
 * checked yet (then nothing was moved: the caller checks and orders them itself); -1 out of
 * memory; -2 bad arguments.
 */
typedef struct {
    const uint8_t *key;
    uint64_t length;
    int64_t id;
} keyed_id;

static int compare_keyed(const void *a, const void *b) {
    const keyed_id *x = a, *y = b;
    uint64_t common = x->length < y->length ? x->length : y->length;
    int order = common > 0 ? memcmp(x->key, y->key, (size_t)common) : 0;
    if (order != 0) return order;
    return (x->length > y->length) - (x->length < y->length);
}

int64_t weft_ties_by_key(int64_t *ids, const double *scores, int64_t n, int64_t cut, const int64_t *parts,
                         int64_t n_parts) {
    if (n < 0 || n_parts <= 0 || cut < 0 || (uint64_t)n > SIZE_MAX / sizeof(keyed_id)) return -2;
    keyed_id *keyed = NULL;
    int64_t result = 0;
    /* Two passes over the runs: every member's key found (or 1, nothing moved), then each run sorted. */
    for (int pass = 0; pass < 2 && result == 0; pass++) {
        for (int64_t start = 0; start < n && start < cut;) {
            int64_t end = start + 1;
            while (end < n && scores[end] == scores[start]) end++;
            if (end - start > 1) {
                for (int64_t i = start; i < end; i++) {
                    int64_t id = ids[i], local;
                    const int64_t *part = hit_part(parts, n_parts, id, &local);
                    if (part == NULL) {
                        result = -2;
                        break;
                    }
                    const uint8_t *checked = (const uint8_t *)(uintptr_t)part[4];
                    if (checked != NULL && !checked[local]) {
                        result = 1;
                        break;
                    }
                    if (pass == 1) {
                        const uint64_t *offsets = (const uint64_t *)(uintptr_t)part[5];
                        const uint8_t *bytes = (const uint8_t *)(uintptr_t)part[6];
                        keyed[i - start] = (keyed_id){bytes + offsets[local], offsets[local + 1] - offsets[local], id};
                    }
                }
                if (result != 0) break;
                if (pass == 1) {
                    qsort(keyed, (size_t)(end - start), sizeof(keyed_id), compare_keyed);
                    for (int64_t i = start; i < end; i++) ids[i] = keyed[i - start].id;
                }
            }
            start = end;
        }
        if (pass == 0 && result == 0) {
            keyed = malloc((size_t)(n > 0 ? n : 1) * sizeof(keyed_id));
            if (keyed == NULL) result = -1;
        }
    }
    free(keyed);
    return result;
}
