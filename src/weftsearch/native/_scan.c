/*
 * The vector scorer's per-segment scan in one call: rank the IVF lists, read the
 * probed rows (or every row), divide by the row norms, keep the k best and
 * every tie with the k-th.
 *
 * Why C: the work per query is a few microseconds of arithmetic wrapped in
 * about 25 numpy calls of 1-3 us each (docs/BENCHMARKS.md); one foreign call
 * removes the wrapping. Why no Python.h: the library is loaded with ctypes,
 * so it builds wherever a C compiler does, with or without Python's headers.
 *
 * The inner product is not computed here: the caller passes faiss's own
 * fvec_inner_product, the function faiss's fvec_inner_products_by_idx calls
 * per row, so every score is the same bits as on the numpy path
 * (weftsearch.native.scan) and a document's score never depends on the
 * path that found it. Division is plain IEEE float division (built with
 * -ffp-contract=off, no fast-math), as numpy's float32 divide.
 *
 * The rules, which the Python path follows too (tests compare both):
 *  - usable rows: id >= 0 and norm > 0 (a NaN norm is not > 0);
 *  - lists: the nprobe largest closeness values (centroid . query), ties to
 *    the lower list, a NaN closeness never chosen;
 *  - selection: with n <= k candidates all are kept; otherwise every score
 *    >= the k-th largest number is kept (NaN never), or every number when
 *    fewer than k are numbers.
 *
 * Sizes: every argument is checked before anything is allocated (a negative
 * size, k < 1, a list offset outside the matrix, a product of sizes that
 * does not fit in size_t are refused with WEFT_BAD_ARGUMENT); k is clamped to
 * the rows that exist and nprobe to the lists that exist, so no allocation
 * is ever larger than the input it describes. A huge k from a caller (issue
 * 13: k * 16 wrapped for k >= 2^60 and the heap was overwritten) costs
 * nothing more than k = row_count. Every multiplication that sizes memory or
 * an address is commented where it is proven not to overflow.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define WEFT_X86 1
#endif

/* Return codes of weft_probe_scan below 0 (native/scan.py maps them to typed errors). */
#define WEFT_NO_MEMORY (-1)
#define WEFT_BAD_ARGUMENT (-2)

typedef float (*weft_dot_fn)(const float *, const float *, size_t);

/*
 * float16 rows are widened to float32, one row at a time into a buffer, and
 * then go through the same dot as float32 rows. Widening is exact (every
 * half is a float), so a float16 row scores the bits the numpy path gives it
 * after its own exact conversion.
 */
static float half_to_float(uint16_t half) {
    uint32_t sign = (uint32_t)(half & 0x8000u) << 16;
    uint32_t exponent = (half >> 10) & 0x1fu;
    uint32_t mantissa = half & 0x3ffu;
    uint32_t bits;
    if (exponent == 0x1fu) {
        bits = sign | 0x7f800000u | (mantissa << 13); /* inf, NaN */
    } else if (exponent != 0) {
        bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        bits = sign;
    } else { /* subnormal half: a normal float */
        exponent = 113u;
        while (!(mantissa & 0x400u)) {
            mantissa <<= 1;
            exponent--;
        }
        bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
    }
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static void widen_portable(float *out, const uint16_t *in, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = half_to_float(in[i]);
}

#ifdef WEFT_X86
__attribute__((target("avx,f16c"))) static void widen_f16c(float *out, const uint16_t *in, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i halves = _mm_loadu_si128((const __m128i *)(in + i));
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(halves));
    }
    for (; i < n; i++) out[i] = half_to_float(in[i]);
}
#endif

typedef void (*widen_fn)(float *, const uint16_t *, int64_t);

static widen_fn choose_widen(void) {
#ifdef WEFT_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c")) return widen_f16c;
#endif
    return widen_portable;
}

/* Widen n halves to floats (n < 1: nothing; out and in hold n items, the caller's promise): exported so the tests can check it against numpy on every half. */
void weft_widen_halves(float *out, const uint16_t *in, int64_t n) { choose_widen()(out, in, n); }

typedef struct {
    float score;
    int64_t id;
} scored_id;

/* a ranks below b: a lower score, or an equal score and a higher id (NaN is never put in a heap). */
static int worse(scored_id a, scored_id b) { return a.score < b.score || (a.score == b.score && a.id > b.id); }

/*
 * A heap of the best items seen, worst at the root (heap.h): lists by closeness (ties to the
 * lower list number) and candidates by score share it.
 */
#include "heap.h"

static int compare_id(const void *a, const void *b) {
    int64_t x = ((const scored_id *)a)->id, y = ((const scored_id *)b)->id;
    return (x > y) - (x < y);
}

/*
 * Choose the lists to probe: up to nprobe (closeness, list) pairs into
 * chosen, sorted by list number so the probed lists are read front to back
 * through the matrix. Returns how many (fewer when lists have NaN
 * closeness).
 */
static int64_t nearest_lists(weft_dot_fn dot, const float *query, int64_t dim, const float *centroids,
                             int64_t nlist, int64_t nprobe, scored_id *chosen) {
    int64_t size = 0;
    for (int64_t l = 0; l < nlist; l++) {
        /* Overflow: l < nlist and nlist * dim * sizeof(float) was checked to fit in size_t. */
        scored_id list = {dot(query, centroids + l * dim, (size_t)dim), l};
        if (isnan(list.score)) continue;
        if (size < nprobe) {
            push(chosen, &size, list);
        } else if (worse(chosen[0], list)) {
            replace_root(chosen, size, list);
        }
    }
    qsort(chosen, (size_t)size, sizeof(scored_id), compare_id); /* size <= nprobe <= nlist */
    return size;
}

/*
 * The candidates of one scan, kept in one pass: a min-heap of the k best
 * numbers so far, and a growing store of every candidate that was at least
 * the heap's minimum when it arrived (the minimum only rises, so every final
 * member is stored), plus the NaNs while no more than k candidates have been
 * seen (they are kept only when n <= k).
 */
typedef struct {
    int64_t k, seen, heap_size, stored, capacity, limit; /* limit: most candidates there can be (rows) */
    scored_id *heap;
    scored_id *store;
    int failed;
} selection;

static void offer(selection *sel, float score, int64_t id) {
    scored_id candidate = {score, id};
    sel->seen++;
    if (isnan(score)) {
        if (sel->seen > sel->k) return;
    } else if (sel->heap_size < sel->k) {
        push(sel->heap, &sel->heap_size, candidate);
    } else if (score >= sel->heap[0].score) {
        /* An equal score leaves the k-th score where it is: stored, the heap unchanged. */
        if (score > sel->heap[0].score) replace_root(sel->heap, sel->heap_size, candidate);
    } else {
        return;
    }
    if (sel->stored == sel->capacity) {
        /*
         * Overflow: capacity never exceeds limit (the rows of the block; each
         * row is offered at most once, so stored <= limit), and limit *
         * sizeof(scored_id) was checked to fit in size_t before the scan; the
         * doubling is done only below limit / 2, so 2 * capacity cannot wrap.
         */
        if (sel->capacity >= sel->limit) { /* more offers than rows: the lists overlap, refused up front */
            sel->failed = 1;
            return;
        }
        int64_t capacity = sel->capacity <= sel->limit / 2 ? 2 * sel->capacity : sel->limit;
        scored_id *grown = realloc(sel->store, (size_t)capacity * sizeof(scored_id));
        if (grown == NULL) {
            sel->failed = 1;
            return;
        }
        sel->store = grown;
        sel->capacity = capacity;
    }
    sel->store[sel->stored].score = score;
    sel->store[sel->stored].id = id;
    sel->stored++;
}

/* Keep the final members at the front of the store; returns their number. */
static int64_t settle(selection *sel) {
    /* stored <= seen <= row_count: the store holds every candidate offered at most once. */
    if (sel->seen <= sel->k) return sel->stored; /* n <= k: every candidate, NaN included */
    int full = sel->heap_size == sel->k;
    float kth = full ? sel->heap[0].score : 0.0f;
    int64_t kept = 0;
    for (int64_t i = 0; i < sel->stored; i++) {
        float score = sel->store[i].score;
        /* Fewer than k numbers: every number is kept. */
        if (isnan(score) || (full && score < kth)) continue;
        sel->store[kept++] = sel->store[i];
    }
    return kept;
}

/* The rows being scanned: float32, or float16 widened a row at a time into `row`. */
typedef struct {
    weft_dot_fn dot;
    const float *query;
    int64_t dim;
    const void *matrix;
    int half;
    widen_fn widen;
    float *row;
} rows_view;

/* Offer rows [start, end) that are usable (live, non-zero norm). */
static void scan_range(const rows_view *view, const float *norms, const int64_t *ids, int64_t start, int64_t end,
                       selection *sel) {
    const size_t dim = (size_t)view->dim;
    for (int64_t r = start; r < end && !sel->failed; r++) {
        float norm = norms[r];
        if (ids[r] < 0 || !(norm > 0.0f)) continue;
        const float *row;
        /* Overflow: r < row_count and row_count * dim * element size was checked to fit in size_t. */
        if (view->half) {
            view->widen(view->row, (const uint16_t *)view->matrix + r * view->dim, view->dim);
            row = view->row;
        } else {
            row = (const float *)view->matrix + r * view->dim;
        }
        offer(sel, view->dot(view->query, row, dim) / norm, ids[r]);
    }
}

/* Best first: higher score, then lower id; NaN after every number (numpy's sort order). */
static int compare_scored(const void *a, const void *b) {
    const scored_id *x = a, *y = b;
    int x_nan = isnan(x->score), y_nan = isnan(y->score);
    if (x_nan != y_nan) return x_nan - y_nan;
    if (!x_nan && x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/*
 * Whether count items of size bytes each make an object size (count >= 0, size >= 1): at most
 * PTRDIFF_MAX bytes, the largest object C allows, which is below both SIZE_MAX and INT64_MAX here,
 * so the product is then a valid size_t and a valid int64_t offset.
 */
static int fits(int64_t count, size_t size) { return (uint64_t)count <= (uint64_t)PTRDIFF_MAX / size; }

/*
 * One segment's candidates for one query.
 *
 * query: the unit query (dim floats). matrix: row_count x dim, C order,
 * floats, or IEEE halves when half is 1. norms, ids: one per row. centroids: nlist x dim floats and offsets:
 * nlist + 1 row offsets, non-decreasing from 0 to at most row_count; nprobe == 0 scans every row. k >= 1
 * (any size: it is clamped to row_count, as nprobe is to nlist). Returns the number of
 * kept candidates, WEFT_NO_MEMORY (-1) when out of memory, or WEFT_BAD_ARGUMENT (-2)
 * for arguments no block has (dim < 1, k < 1, a negative count, offsets out of order or
 * past the rows, sizes whose product does not fit in size_t); nothing is allocated
 * before the arguments are checked. When the count is at most
 * out_capacity, ids_out/scores_out hold them as (internal id, cosine), best
 * first: score descending, then id ascending, NaN last; otherwise nothing is
 * written (call again with room for them).
 * O(nlist * dim + scanned * dim + stored * log k + kept * log kept); memory O(min(k, row_count) +
 * stored + min(nprobe, nlist) + dim), never more than the rows and lists that exist.
 */
int64_t weft_probe_scan(weft_dot_fn dot, const float *query, int64_t dim, const void *matrix, int64_t half,
                        int64_t row_count, const float *norms, const int64_t *ids, const float *centroids,
                        const uint64_t *offsets, int64_t nlist, int64_t nprobe, int64_t k, int64_t *ids_out,
                        double *scores_out, int64_t out_capacity) {
    size_t element = half ? sizeof(uint16_t) : sizeof(float); /* bytes per matrix element */
    if (dim < 1 || row_count < 0 || k < 1 || nprobe < 0 || nlist < 0 || out_capacity < 0) return WEFT_BAD_ARGUMENT;
    /* Overflow: row_count * dim elements (every row address, r * dim) must be a size; checked in two steps. */
    if (!fits(row_count, (size_t)dim) || !fits(row_count * dim, element)) return WEFT_BAD_ARGUMENT;
    /* Overflow: the candidate store and heap hold at most row_count items of 16 bytes. */
    if (!fits(row_count, sizeof(scored_id))) return WEFT_BAD_ARGUMENT;
    /* Overflow: a widened row is dim floats. */
    if (!fits(dim, sizeof(float))) return WEFT_BAD_ARGUMENT;
    if (nprobe > 0) {
        if (centroids == NULL || offsets == NULL || nlist < 1) return WEFT_BAD_ARGUMENT;
        /* Overflow: centroid addresses l * dim for l < nlist, and the chosen lists (nlist items at most). */
        if (!fits(nlist, (size_t)dim) || !fits(nlist * dim, sizeof(float))) return WEFT_BAD_ARGUMENT;
        if (!fits(nlist, sizeof(scored_id))) return WEFT_BAD_ARGUMENT;
        /*
         * Offsets come from a file: each list must lie inside the matrix and
         * lists must not overlap (then every row is offered at most once and
         * the store never holds more than row_count candidates).
         */
        for (int64_t l = 0; l < nlist; l++) {
            if (offsets[l] > offsets[l + 1] || offsets[l + 1] > (uint64_t)row_count) return WEFT_BAD_ARGUMENT;
        }
        if (nprobe > nlist) nprobe = nlist; /* no more lists than exist: bounds `chosen` */
    }
    /* The candidates that exist: no more than the rows (k >= 1 keeps the heap non-empty). */
    if (k > row_count) k = row_count > 0 ? row_count : 1;
    int64_t first_capacity = row_count < 64 ? (row_count > 0 ? row_count : 1) : 64;
    selection sel = {k, 0, 0, 0, first_capacity, first_capacity > row_count ? first_capacity : row_count,
                     NULL, NULL, 0};
    rows_view view = {dot, query, dim, matrix, half != 0, NULL, NULL};
    int64_t kept = WEFT_NO_MEMORY;
    scored_id *chosen = NULL;
    /* Sizes below: k <= max(row_count, 1), capacity <= row_count or 64, nprobe <= nlist, dim: all checked above. */
    sel.heap = malloc((size_t)k * sizeof(scored_id));
    sel.store = malloc((size_t)sel.capacity * sizeof(scored_id));
    if (nprobe > 0) chosen = malloc((size_t)nprobe * sizeof(scored_id));
    if (view.half) {
        view.widen = choose_widen();
        view.row = malloc((size_t)dim * sizeof(float));
        if (view.row == NULL) goto done;
    }
    if (sel.heap == NULL || sel.store == NULL || (nprobe > 0 && chosen == NULL)) goto done;
    if (nprobe <= 0) {
        scan_range(&view, norms, ids, 0, row_count, &sel);
    } else {
        int64_t lists = nearest_lists(dot, query, dim, centroids, nlist, nprobe, chosen);
        for (int64_t i = 0; i < lists; i++) {
            int64_t l = chosen[i].id;
            /* Offsets were checked: within [0, row_count], so the casts keep their values. */
            scan_range(&view, norms, ids, (int64_t)offsets[l], (int64_t)offsets[l + 1], &sel);
        }
    }
    if (sel.failed) goto done;
    kept = settle(&sel);
    if (kept <= out_capacity) {
        qsort(sel.store, (size_t)kept, sizeof(scored_id), compare_scored);
        for (int64_t i = 0; i < kept; i++) {
            ids_out[i] = sel.store[i].id;
            scores_out[i] = (double)sel.store[i].score;
        }
    }
done:
    free(view.row);
    free(chosen);
    free(sel.store);
    free(sel.heap);
    return kept;
}

/*
 * The same scan over chosen rows: rows[0 .. row_total) are strictly ascending row numbers in
 * [0, row_count) (a filter's matching rows, or those of the probed lists), each scored and
 * selected exactly as weft_probe_scan scores and selects a row it reads, so a row's score is
 * the same bits on both and the same rules keep the same candidates. Unusable rows (id < 0,
 * norm not > 0) are skipped, as there.
 *
 * Returns as weft_probe_scan: the number kept (written when at most out_capacity),
 * WEFT_NO_MEMORY, or WEFT_BAD_ARGUMENT for arguments no call has (dim < 1, k < 1, a negative
 * count, a row out of range or out of order, sizes whose product does not fit in size_t);
 * the rows are checked before anything is allocated. O(row_total * dim + stored * log k +
 * kept * log kept); memory O(min(k, row_total) + stored + dim).
 */
int64_t weft_rows_scan(weft_dot_fn dot, const float *query, int64_t dim, const void *matrix, int64_t half,
                       int64_t row_count, const float *norms, const int64_t *ids, const int64_t *rows,
                       int64_t row_total, int64_t k, int64_t *ids_out, double *scores_out, int64_t out_capacity) {
    size_t element = half ? sizeof(uint16_t) : sizeof(float);
    if (dim < 1 || row_count < 0 || row_total < 0 || k < 1 || out_capacity < 0) return WEFT_BAD_ARGUMENT;
    if (!fits(row_count, (size_t)dim) || !fits(row_count * dim, element)) return WEFT_BAD_ARGUMENT;
    if (!fits(row_total, sizeof(scored_id)) || !fits(dim, sizeof(float))) return WEFT_BAD_ARGUMENT;
    if (row_total > row_count) return WEFT_BAD_ARGUMENT; /* ascending and in range: at most row_count */
    for (int64_t i = 0; i < row_total; i++) {
        if (rows[i] < 0 || rows[i] >= row_count || (i > 0 && rows[i] <= rows[i - 1])) return WEFT_BAD_ARGUMENT;
    }
    if (k > row_total) k = row_total > 0 ? row_total : 1; /* candidates that exist: bounds the heap */
    int64_t first_capacity = row_total < 64 ? (row_total > 0 ? row_total : 1) : 64;
    /* limit: each listed row is offered at most once (strictly ascending), so stored <= row_total. */
    selection sel = {k, 0, 0, 0, first_capacity, first_capacity > row_total ? first_capacity : row_total,
                     NULL, NULL, 0};
    rows_view view = {dot, query, dim, matrix, half != 0, NULL, NULL};
    int64_t kept = WEFT_NO_MEMORY;
    sel.heap = malloc((size_t)k * sizeof(scored_id));
    sel.store = malloc((size_t)sel.capacity * sizeof(scored_id));
    if (view.half) {
        view.widen = choose_widen();
        view.row = malloc((size_t)dim * sizeof(float));
        if (view.row == NULL) goto done;
    }
    if (sel.heap == NULL || sel.store == NULL) goto done;
    for (int64_t i = 0; i < row_total && !sel.failed; i++) {
        /* One row through the very loop weft_probe_scan runs: the same checks, dot and division. */
        scan_range(&view, norms, ids, rows[i], rows[i] + 1, &sel);
    }
    if (sel.failed) goto done;
    kept = settle(&sel);
    if (kept <= out_capacity) {
        qsort(sel.store, (size_t)kept, sizeof(scored_id), compare_scored);
        for (int64_t i = 0; i < kept; i++) {
            ids_out[i] = sel.store[i].id;
            scores_out[i] = (double)sel.store[i].score;
        }
    }
done:
    free(view.row);
    free(sel.store);
    free(sel.heap);
    return kept;
}
