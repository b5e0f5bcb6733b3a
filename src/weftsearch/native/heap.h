/*
 * The binary heap both kernels select with (_bm25.c: the k best documents; _scan.c: the k best
 * rows and the nprobe closest lists): the worst item kept sits at the root, so a better
 * candidate replaces it in O(log size).
 *
 * A template by inclusion: before `#include "heap.h"` the includer defines the item type
 * `scored_id` (a struct with at least `score` and `id`) and
 *     static int worse(scored_id a, scored_id b);   (a ranks below b)
 * Each kernel keeps its own ranking (float scores with ties to the lower id for the scan,
 * double scores alone for BM25, which settles ties after its selection), and the two share
 * one heap's code.
 *
 * Bounds: callers push only while *size is below the heap's capacity (k items, or nprobe lists),
 * and each caller has checked that capacity to fit SIZE_MAX / sizeof(scored_id) (_scan.c: even
 * PTRDIFF_MAX / sizeof(scored_id)); an item is at least 16 bytes, so at < 2^60 and 2 * at + 2
 * never overflows an int64_t.
 */
#ifndef WEFT_HEAP_H
#define WEFT_HEAP_H

#include <stdint.h>

/* Restore the heap order below `at` after the item there got better than it was (or was replaced). */
static void sift_down(scored_id *heap, int64_t size, int64_t at) {
    for (;;) {
        int64_t left = 2 * at + 1, lowest = at;
        if (left < size && worse(heap[left], heap[lowest])) lowest = left;
        if (left + 1 < size && worse(heap[left + 1], heap[lowest])) lowest = left + 1;
        if (lowest == at) return;
        scored_id swap = heap[at];
        heap[at] = heap[lowest];
        heap[lowest] = swap;
        at = lowest;
    }
}

/* Add `item` (the caller has room for it: *size < capacity) and move it up to its place. */
static void push(scored_id *heap, int64_t *size, scored_id item) {
    int64_t at = (*size)++;
    heap[at] = item;
    while (at > 0) {
        int64_t parent = (at - 1) / 2;
        if (!worse(heap[at], heap[parent])) return;
        scored_id swap = heap[at];
        heap[at] = heap[parent];
        heap[parent] = swap;
        at = parent;
    }
}

/* Drop the worst item (the root) for `item`, which the caller knows ranks above it. */
static void replace_root(scored_id *heap, int64_t size, scored_id item) {
    heap[0] = item;
    sift_down(heap, size, 0);
}

#endif
