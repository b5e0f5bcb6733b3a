/*
 * BM25 top-k over one snapshot's segments in one call, with block-max MaxScore
 * early termination (weftsearch.engine.bm25_kernel is the Python side).
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
 * below the threshold. A candidate that survives is scored exactly, in sorted term order.
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

#define WEFT_BLOCK 128
#define WEFT_BLOCK_SHIFT 7
/* Document ids per window at most: the partial sums of a window stay in L1/L2 (32 KiB). */
#define WEFT_WINDOW 4096
#ifndef WEFT_PROBE_COST
#define WEFT_PROBE_COST 32
#endif
#ifndef WEFT_MIN_WINDOW
#define WEFT_MIN_WINDOW 512
#endif

/* One term's postings in one segment, as the Python side lays it out (8 int64 per list). */
typedef struct {
    int64_t ids;      /* address of uint32 local ids, ascending */
    int64_t tfs;      /* address of uint32 term frequencies (>= 1) */
    int64_t count;    /* postings */
    int64_t meta;     /* address of uint32[3 * n_blocks]: last ids, max tfs, min lengths */
    int64_t n_blocks; /* ceil(count / WEFT_BLOCK) */
    int64_t term;     /* index of the term in sorted order, 0 .. m - 1 */
    int64_t part;     /* index of the segment, 0 .. n_parts - 1 (lists are grouped by part) */
    int64_t spare;
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

/* A cursor over one list while its part is walked. */
typedef struct {
    const uint32_t *ids, *tfs, *last, *max_tf, *min_len;
    int64_t count, pos, exact_pos, n_blocks, term, scored_block;
    double weight, window_bound;
    double *bounds; /* per block: w * impact(max_tf, min_len), before the margin */
} cursor;

typedef struct {
    int64_t k, heap_size, stored, capacity;
    scored_id *heap;
    scored_id *store;
    int failed;
} selection;

static void sift_down(scored_id *heap, int64_t size, int64_t at) {
    for (;;) {
        int64_t left = 2 * at + 1, lowest = at;
        if (left < size && heap[left].score < heap[lowest].score) lowest = left;
        if (left + 1 < size && heap[left + 1].score < heap[lowest].score) lowest = left + 1;
        if (lowest == at) return;
        scored_id swap = heap[at];
        heap[at] = heap[lowest];
        heap[lowest] = swap;
        at = lowest;
    }
}

static void push(scored_id *heap, int64_t *size, scored_id item) {
    int64_t at = (*size)++;
    heap[at] = item;
    while (at > 0) {
        int64_t parent = (at - 1) / 2;
        if (!(heap[at].score < heap[parent].score)) return;
        scored_id swap = heap[at];
        heap[at] = heap[parent];
        heap[parent] = swap;
        at = parent;
    }
}

/* Offer one scored document; returns the threshold (the k-th best so far, or -inf while fewer than k). */
static double offer(selection *sel, double score, int64_t id) {
    scored_id item = {score, id};
    if (sel->heap_size < sel->k) {
        push(sel->heap, &sel->heap_size, item);
    } else if (score >= sel->heap[0].score) {
        if (score > sel->heap[0].score) {
            sel->heap[0] = item;
            sift_down(sel->heap, sel->heap_size, 0);
        }
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

/* The bound of block `block` of a list, before the margin: w * impact(max_tf, min_len). */
static double block_bound(const cursor *c, int64_t block, double k1, double b, double avgdl, double scale) {
    double tf = (double)c->max_tf[block];
    double norm = k1 * (1.0 - b + b * (double)c->min_len[block] / avgdl);
    return tf * (k1 + 1.0) / (tf + norm) * c->weight * scale;
}

/* The first position at or after *pos whose id is >= target (or count): whole blocks first, then a binary search. */
static inline __attribute__((always_inline)) void seek_at(const cursor *c, int64_t *pos, uint32_t target) {
    if (*pos >= c->count || c->ids[*pos] >= target) return;
    /* Most seeks land a few postings ahead: look there before skipping blocks. */
    for (int step = 0; step < 8; step++) {
        ++*pos;
        if (*pos >= c->count || c->ids[*pos] >= target) return;
    }
    int64_t block = *pos >> WEFT_BLOCK_SHIFT;
    while (block < c->n_blocks && c->last[block] < target) block++;
    if (block >= c->n_blocks) {
        *pos = c->count;
        return;
    }
    int64_t low = block << WEFT_BLOCK_SHIFT;
    if (low < *pos) low = *pos;
    int64_t high = (block + 1) << WEFT_BLOCK_SHIFT;
    if (high > c->count) high = c->count;
    while (low < high) { /* the block's last id is >= target, so the answer is inside */
        int64_t middle = low + (high - low) / 2;
        if (c->ids[middle] < target)
            low = middle + 1;
        else
            high = middle;
    }
    *pos = low;
}

/* A posting's contribution, in numpy's order of operations: (tf * (k1 + 1)) / (tf + norm) * w. */
static inline double contribution_of(const cursor *c, int64_t pos, const double *norms, double k1) {
    double tf = (double)c->tfs[pos];
    return tf * (k1 + 1.0) / (tf + norms[c->ids[pos]]) * c->weight;
}

/* Counted in locals (registers), written to stats once at the end. */
static inline void count_scored(cursor *c, int64_t pos, int64_t *postings_scored, int64_t *blocks_scored) {
    int64_t block = pos >> WEFT_BLOCK_SHIFT;
    ++*postings_scored;
    if (block != c->scored_block) c->scored_block = block, ++*blocks_scored;
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
 * -2: bad arguments. Results are every document whose score is at least the
 * k-th best score (ties included), so there may be more than k.
 */
int64_t weft_bm25_top_k(const int64_t *lists_raw, int64_t n_lists, const int64_t *parts_raw, int64_t n_parts,
                        const double *weights, int64_t m, double k1, double b, double avgdl, int64_t k,
                        double bound_scale, int64_t *ids_out, double *scores_out, int64_t out_capacity,
                        int64_t *stats) {
    const list_desc *lists = (const list_desc *)lists_raw;
    const part_desc *parts = (const part_desc *)parts_raw;
    for (int i = 0; i < 5; i++) stats[i] = 0;
    if (n_lists < 0 || n_parts < 0 || m <= 0 || k <= 0 || out_capacity < 0 || !(avgdl > 0.0) || !(k1 >= 0.0) ||
        !(b >= 0.0 && b <= 1.0) || m > (int64_t)(SIZE_MAX / 4 / sizeof(cursor)))
        return -2;
    /* The candidates that exist bound k: never allocate for more. */
    int64_t total = 0, largest_part = 0;
    for (int64_t i = 0; i < n_lists; i++) {
        const list_desc *l = &lists[i];
        if (l->count <= 0 || l->term < 0 || l->term >= m || l->part < 0 || l->part >= n_parts ||
            l->n_blocks != (l->count + WEFT_BLOCK - 1) / WEFT_BLOCK || (i > 0 && l->part < lists[i - 1].part) ||
            (i > 0 && l->part == lists[i - 1].part && l->term <= lists[i - 1].term))
            return -2;
        if (l->count > INT64_MAX - total) return -2;
        /* Every id indexes the part's norms and id map: the largest (the last block's last id) must fit. */
        if ((int64_t)((const uint32_t *)(uintptr_t)l->meta)[l->n_blocks - 1] >= parts[l->part].n_docs) return -2;
        /*
         * The traversal moves forward by the blocks' last ids: each must be the id that ends its
         * block, and they must increase, or a seek could stand still for ever. The reader checks
         * this already (docs/FORMAT.md, "Block metadata"); an O(blocks) check here keeps the kernel
         * safe whoever calls it.
         */
        {
            const uint32_t *last = (const uint32_t *)(uintptr_t)l->meta;
            const uint32_t *list_ids = (const uint32_t *)(uintptr_t)l->ids;
            for (int64_t block = 0; block < l->n_blocks; block++) {
                int64_t end = (block + 1) * WEFT_BLOCK < l->count ? (block + 1) * WEFT_BLOCK : l->count;
                if (last[block] != list_ids[end - 1] || (block > 0 && last[block] <= last[block - 1])) return -2;
            }
        }
        total += l->count;
        stats[0] += l->n_blocks;
    }
    stats[2] = total;
    for (int64_t p = 0, i = 0; p < n_parts; p++) {
        int64_t in_part = 0;
        while (i < n_lists && lists[i].part == p) in_part++, i++;
        if (in_part > m) return -2;
        if (in_part > largest_part) largest_part = in_part;
    }
    if (total == 0) return 0;
    if (k > total) k = total;
    if ((uint64_t)k > SIZE_MAX / sizeof(scored_id)) return -2;

    double margin = 1.0 + ((double)m + 8.0) * ldexp(1.0, -46);
    selection sel = {k, 0, 0, 64, NULL, NULL, 0};
    sel.heap = malloc((size_t)k * sizeof(scored_id));
    sel.store = malloc((size_t)sel.capacity * sizeof(scored_id));
    size_t width = (size_t)(largest_part > 0 ? largest_part : 1);
    cursor *cursors = malloc(width * sizeof(cursor));
    int64_t *order = malloc(width * sizeof(int64_t)); /* live lists of the window, by ascending bound */
    /* cum[e]: the bounds of order[0 ..< e] summed by additions only (a running difference could round below). */
    double *cum = malloc((width + 1) * sizeof(double));
    double *partial = malloc(WEFT_WINDOW * sizeof(double)); /* essential lists' sum per document of the window */
    /* Every block's bound, computed once per query: total blocks <= total postings. */
    int64_t total_blocks = 0;
    for (int64_t i = 0; i < n_lists; i++) total_blocks += lists[i].n_blocks;
    double *bounds = (uint64_t)total_blocks > SIZE_MAX / sizeof(double)
                         ? NULL
                         : malloc((size_t)(total_blocks > 0 ? total_blocks : 1) * sizeof(double));
    uint64_t seen[WEFT_WINDOW / 64];
    int64_t result = -1;
    if (!sel.heap || !sel.store || !cursors || !order || !cum || !partial || !bounds) goto done;

    double threshold = -INFINITY;
    int64_t first = 0, bounds_used = 0, postings_scored = 0, blocks_scored = 0, documents_scored = 0;
    for (int64_t p = 0; p < n_parts && !sel.failed; p++) {
        const part_desc *part = &parts[p];
        const double *norms = (const double *)(uintptr_t)part->norms;
        const int64_t *to_global = (const int64_t *)(uintptr_t)part->to_global;
        int64_t n = 0;
        while (first + n < n_lists && lists[first + n].part == p) {
            const list_desc *l = &lists[first + n];
            cursor *c = &cursors[n];
            c->ids = (const uint32_t *)(uintptr_t)l->ids;
            c->tfs = (const uint32_t *)(uintptr_t)l->tfs;
            c->last = (const uint32_t *)(uintptr_t)l->meta;
            c->max_tf = c->last + l->n_blocks;
            c->min_len = c->max_tf + l->n_blocks;
            c->count = l->count;
            c->n_blocks = l->n_blocks;
            c->pos = 0;
            c->exact_pos = 0;
            c->term = l->term;
            c->scored_block = -1;
            c->weight = weights[l->term];
            c->bounds = bounds + bounds_used;
            bounds_used += l->n_blocks;
            for (int64_t block = 0; block < c->n_blocks; block++)
                c->bounds[block] = block_bound(c, block, k1, b, avgdl, bound_scale);
            n++;
        }
        first += n;
        if (n == 0) continue;
        memset(seen, 0, sizeof seen);
        for (;;) {
            /*
             * The window: from the smallest current id to the end of the first current block to
             * end, at most WEFT_WINDOW ids wide. Every list's postings in it lie in its current
             * block, whose bound therefore bounds them.
             */
            int64_t low = -1, high = -1;
            for (int64_t j = 0; j < n; j++) {
                cursor *c = &cursors[j];
                if (c->pos >= c->count) continue;
                int64_t id = c->ids[c->pos], end = c->last[c->pos >> WEFT_BLOCK_SHIFT];
                if (low < 0 || id < low) low = id;
                if (high < 0 || end < high) high = end;
            }
            if (low < 0) break;
            /*
             * At least WEFT_MIN_WINDOW ids (fewer windows to set up), at most WEFT_WINDOW; a list's
             * bound is then the largest of its blocks that overlap the window.
             */
            /* (Until k documents are scored there is no threshold: windows stay one block narrow.) */
            if (threshold > -INFINITY && high < low + WEFT_MIN_WINDOW - 1) high = low + WEFT_MIN_WINDOW - 1;
            if (high > low + WEFT_WINDOW - 1) high = low + WEFT_WINDOW - 1;
            int64_t live = 0;
            double sum = 0.0;
            for (int64_t j = 0; j < n; j++) {
                cursor *c = &cursors[j];
                c->window_bound = 0.0;
                if (c->pos >= c->count || c->ids[c->pos] > high) continue;
                int64_t block = c->pos >> WEFT_BLOCK_SHIFT;
                double bound = c->bounds[block];
                while (block + 1 < c->n_blocks && c->last[block] < high) {
                    block++;
                    if (c->bounds[block] > bound) bound = c->bounds[block];
                }
                c->window_bound = bound;
                sum += c->window_bound;
                int64_t at = live++; /* insertion into order, ascending bound */
                while (at > 0 && cursors[order[at - 1]].window_bound > c->window_bound) {
                    order[at] = order[at - 1];
                    at--;
                }
                order[at] = j;
            }
            if (!(sum * margin < threshold)) {
                /* Non-essential lists: the longest prefix of order whose bounds sum below the threshold. */
                cum[0] = 0.0;
                for (int64_t e = 0; e < live; e++) cum[e + 1] = cum[e] + cursors[order[e]].window_bound;
                int64_t essential = 0;
                while (essential < live && cum[essential + 1] * margin < threshold) essential++;
                /* Essential lists, list at a time: their partial sums per document of the window. */
                for (int64_t e = essential; e < live; e++) {
                    cursor *c = &cursors[order[e]];
                    while (c->pos < c->count && c->ids[c->pos] <= high) {
                        int64_t at = (int64_t)c->ids[c->pos] - low;
                        uint64_t bit = (uint64_t)1 << (at & 63);
                        if (!(seen[at >> 6] & bit)) {
                            seen[at >> 6] |= bit;
                            partial[at] = 0.0;
                        }
                        partial[at] += contribution_of(c, c->pos, norms, k1);
                        count_scored(c, c->pos, &postings_scored, &blocks_scored);
                        c->pos++;
                    }
                }
                /*
                 * Probing a non-essential list costs a seek per candidate; reading it through the
                 * window costs a division per posting. When its postings in the window are fewer
                 * than WEFT_PROBE_COST times the candidates, read it instead (adding only to
                 * candidates: a document no essential list holds is below the threshold anyway).
                 */
                if (essential > 0) {
                    int64_t candidates = 0;
                    for (int64_t word = 0; word <= (high - low) >> 6; word++)
                        candidates += __builtin_popcountll(seen[word]);
                    while (essential > 0) {
                        cursor *c = &cursors[order[essential - 1]];
                        int64_t last_block = c->pos >> WEFT_BLOCK_SHIFT;
                        while (last_block + 1 < c->n_blocks && c->last[last_block] < high) last_block++;
                        int64_t in_window = ((last_block + 1) << WEFT_BLOCK_SHIFT) - c->pos;
                        if (in_window > WEFT_PROBE_COST * candidates) break;
                        while (c->pos < c->count && c->ids[c->pos] <= high) {
                            int64_t at = (int64_t)c->ids[c->pos] - low;
                            if (seen[at >> 6] & ((uint64_t)1 << (at & 63))) {
                                partial[at] += contribution_of(c, c->pos, norms, k1);
                                count_scored(c, c->pos, &postings_scored, &blocks_scored);
                            }
                            c->pos++;
                        }
                        essential--;
                    }
                }
                /* Their documents in id order: probe the non-essential lists, then score exactly. */
                for (int64_t word = 0; word <= (high - low) >> 6; word++) {
                    uint64_t bits = seen[word];
                    seen[word] = 0;
                    while (bits) {
                        int64_t at = word * 64 + __builtin_ctzll(bits);
                        bits &= bits - 1;
                        int64_t doc = low + at;
                        if (to_global != NULL && to_global[doc] < 0) continue; /* deleted */
                        double bound = partial[at];
                        int pruned = 0;
                        for (int64_t e = essential - 1; e >= 0; e--) {
                            if ((bound + cum[e + 1]) * margin < threshold) {
                                pruned = 1;
                                break;
                            }
                            cursor *c = &cursors[order[e]];
                            /*
                             * The bound of the one block that could hold doc is often well below
                             * the window's: check it before reading any posting (ids of block
                             * ends only; all sums are additions, so the margin still covers them).
                             */
                            int64_t block = c->pos >> WEFT_BLOCK_SHIFT;
                            while (block < c->n_blocks && c->last[block] < doc) block++;
                            if (block >= c->n_blocks) continue; /* past its last id: contributes nothing */
                            if ((bound + cum[e] + c->bounds[block]) * margin < threshold) {
                                pruned = 1;
                                break;
                            }
                            seek_at(c, &c->pos, (uint32_t)doc);
                            if (c->pos < c->count && c->ids[c->pos] == doc) {
                                bound += contribution_of(c, c->pos, norms, k1);
                                count_scored(c, c->pos, &postings_scored, &blocks_scored);
                            }
                        }
                        if (pruned || bound * margin < threshold) continue;
                        /* The score itself: contributions summed in sorted term order (cursor order). */
                        double score = 0.0;
                        for (int64_t j = 0; j < n; j++) {
                            cursor *c = &cursors[j];
                            seek_at(c, &c->exact_pos, (uint32_t)doc);
                            if (c->exact_pos < c->count && c->ids[c->exact_pos] == doc)
                                score += contribution_of(c, c->exact_pos, norms, k1);
                        }
                        int64_t id = to_global != NULL ? to_global[doc] : part->base + doc;
                        threshold = offer(&sel, score, id);
                        documents_scored++;
                        if (sel.failed) goto done;
                    }
                }
            }
            /* Past the window: every list moves to its first id after `high`. */
            if (high >= UINT32_MAX) break;
            for (int64_t j = 0; j < n; j++) seek_at(&cursors[j], &cursors[j].pos, (uint32_t)(high + 1));
        }
    }
    stats[1] = blocks_scored;
    stats[3] = postings_scored;
    stats[4] = documents_scored;
    if (sel.failed) goto done;
    /* Keep every stored document at least the k-th score. */
    int64_t kept = 0;
    int full = sel.heap_size == sel.k;
    double kth = full ? sel.heap[0].score : -INFINITY;
    for (int64_t i = 0; i < sel.stored; i++)
        if (sel.store[i].score >= kth) sel.store[kept++] = sel.store[i];
    result = kept;
    if (kept <= out_capacity) {
        qsort(sel.store, (size_t)kept, sizeof(scored_id), compare_scored);
        for (int64_t i = 0; i < kept; i++) {
            ids_out[i] = sel.store[i].id;
            scores_out[i] = sel.store[i].score;
        }
    }
done:
    free(bounds);
    free(partial);
    free(cum);
    free(order);
    free(cursors);
    free(sel.store);
    free(sel.heap);
    return result;
}

/*
 * Block metadata of one term's postings in one segment: for each block of
 * WEFT_BLOCK postings, its last local id, largest tf and smallest document
 * length, into meta (3 * ceil(count / WEFT_BLOCK) uint32: lasts, then max tfs,
 * then min lengths). Returns 0, or -2 when an id is outside the n_docs lengths.
 * O(count).
 */
int64_t weft_bm25_blocks(const uint32_t *ids, const uint32_t *tfs, int64_t count, const uint32_t *lengths,
                         int64_t n_docs, uint32_t *meta) {
    if (count < 0 || n_docs < 0) return -2;
    int64_t n_blocks = (count + WEFT_BLOCK - 1) / WEFT_BLOCK;
    for (int64_t block = 0; block < n_blocks; block++) {
        int64_t start = block << WEFT_BLOCK_SHIFT, end = start + WEFT_BLOCK;
        if (end > count) end = count;
        uint32_t max_tf = 0, min_len = UINT32_MAX;
        for (int64_t i = start; i < end; i++) {
            if ((int64_t)ids[i] >= n_docs) return -2;
            if (tfs[i] > max_tf) max_tf = tfs[i];
            if (lengths[ids[i]] < min_len) min_len = lengths[ids[i]];
        }
        meta[block] = ids[end - 1];
        meta[n_blocks + block] = max_tf;
        meta[2 * n_blocks + block] = min_len;
    }
    return 0;
}

/*
 * Many queries in one call (weftsearch.engine.bm25_kernel.search_many): weft_bm25_top_k for each
 * query in turn, so each query's results are exactly (every bit, every tie) what a call of its
 * own returns; one call lets the caller release the GIL once for the whole batch.
 *
 * Query q's lists are lists[list_starts[q] ..< list_starts[q + 1]] (8 int64 each, as for
 * weft_bm25_top_k), its weights weights[weight_starts[q] ..< weight_starts[q + 1]]; every query
 * reads the same parts and (k1, b, avgdl, k). A query's results go to ids_out/scores_out right
 * after the previous written query's; counts_out[q] is its number of results, and written[q] is 1
 * when they were written, 0 when they did not fit in what was left of out_capacity (the caller
 * runs that query again on its own with room for them). stats (5 int64) are summed over queries.
 * Returns 0, or the first failing query's code (-1 out of memory, -2 bad arguments).
 */
int64_t weft_bm25_top_k_many(const int64_t *lists_raw, const int64_t *list_starts, const int64_t *parts_raw,
                             int64_t n_parts, const double *weights, const int64_t *weight_starts,
                             int64_t n_queries, double k1, double b, double avgdl, int64_t k, double bound_scale,
                             int64_t *ids_out, double *scores_out, int64_t out_capacity, int64_t *counts_out,
                             int64_t *written, int64_t *stats) {
    int64_t used = 0, one[5];
    for (int i = 0; i < 5; i++) stats[i] = 0;
    if (n_queries < 0 || out_capacity < 0) return -2;
    for (int64_t q = 0; q < n_queries; q++) {
        int64_t n_lists = list_starts[q + 1] - list_starts[q], m = weight_starts[q + 1] - weight_starts[q];
        if (n_lists < 0 || m < 0) return -2;
        int64_t kept = weft_bm25_top_k(lists_raw + 8 * list_starts[q], n_lists, parts_raw, n_parts,
                                       weights + weight_starts[q], m, k1, b, avgdl, k, bound_scale,
                                       ids_out + used, scores_out + used, out_capacity - used, one);
        if (kept < 0) return kept;
        counts_out[q] = kept;
        written[q] = kept <= out_capacity - used;
        if (written[q]) used += kept;
        for (int i = 0; i < 5; i++) stats[i] += one[i];
    }
    return 0;
}
