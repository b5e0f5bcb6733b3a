/*
 * Decoding one full block of bit-packed values, shared by _bm25.c and _boolean.c (both read the
 * postings format's blocks: docs/FORMAT.md, "Postings").
 *
 * A template by inclusion: before `#include "unpack.h"` the includer defines UNPACK_BLOCK, the
 * values of a full block (a multiple of 32: the format's 128).
 *
 * unpack_full_any(in, width, out, acc, kind) decodes UNPACK_BLOCK values of `width` bits
 * (0 ..= 32, checked by the caller) from `in` into `out`: kind 1, ids from `acc`, each the
 * previous plus gap + 1 (returns the last id); kind 0, tfs, each value + 1 (returns `acc`).
 * Reads exactly UNPACK_BLOCK * width / 32 words of `in` and writes UNPACK_BLOCK values.
 */
#ifndef WEFT_UNPACK_H
#define WEFT_UNPACK_H

#include <stdint.h>

/*
 * A full block's run (UNPACK_BLOCK = 4 groups of 32 values; a group of 32 values of W bits is
 * exactly W words), decoded in one pass with the gap prefix sum (kind 1: ids from `acc`, each
 * the previous plus gap + 1) or the tf offset (kind 0: value + 1). W is a constant at each call
 * (one switch case per width) and the 32 values of a group are unrolled, so every word index,
 * shift and mask folds to a constant: no per-value address arithmetic, no branch, and the run's
 * words are read with aligned 4-byte loads inside it (a group reads words 0 ..< W only).
 * Returns the last id (kind 1).
 */
static inline __attribute__((always_inline)) uint64_t unpack_full(const uint32_t *in, const unsigned W,
                                                                   uint32_t *out, uint64_t acc, const int kind) {
    const uint32_t mask = (uint32_t)(((uint64_t)1 << W) - 1);
    for (int g = 0; g < UNPACK_BLOCK / 32; g++, in += W, out += 32) {
#pragma GCC unroll 32
        for (unsigned j = 0; j < 32; j++) {
            const unsigned bit = j * W, at = bit >> 5, shift = bit & 31;
            uint32_t v = in[at] >> shift;
            if (shift + W > 32) v |= in[at + 1] << ((32 - shift) & 31); /* shift > 0 here */
            v &= mask;
            if (kind) {
                acc += (uint64_t)v + 1;
                out[j] = (uint32_t)acc;
            } else {
                out[j] = v + 1;
            }
        }
    }
    return acc;
}

#define UNPACK_FULL_CASE(W) \
    case W: \
        return unpack_full(in, W, out, acc, kind);

/* One case a width, 1 ..= 32 (width 0 is each switch's default). */
#define UNPACK_FULL_CASES \
    UNPACK_FULL_CASE(1) UNPACK_FULL_CASE(2) UNPACK_FULL_CASE(3) UNPACK_FULL_CASE(4) UNPACK_FULL_CASE(5) \
    UNPACK_FULL_CASE(6) UNPACK_FULL_CASE(7) UNPACK_FULL_CASE(8) UNPACK_FULL_CASE(9) UNPACK_FULL_CASE(10) \
    UNPACK_FULL_CASE(11) UNPACK_FULL_CASE(12) UNPACK_FULL_CASE(13) UNPACK_FULL_CASE(14) UNPACK_FULL_CASE(15) \
    UNPACK_FULL_CASE(16) UNPACK_FULL_CASE(17) UNPACK_FULL_CASE(18) UNPACK_FULL_CASE(19) UNPACK_FULL_CASE(20) \
    UNPACK_FULL_CASE(21) UNPACK_FULL_CASE(22) UNPACK_FULL_CASE(23) UNPACK_FULL_CASE(24) UNPACK_FULL_CASE(25) \
    UNPACK_FULL_CASE(26) UNPACK_FULL_CASE(27) UNPACK_FULL_CASE(28) UNPACK_FULL_CASE(29) UNPACK_FULL_CASE(30) \
    UNPACK_FULL_CASE(31) UNPACK_FULL_CASE(32)

/*
 * The dispatch of unpack_full on the width (0 ..= 32, checked at setup). Two switches, one a
 * kind, so that inside each case the kind is known and unpack_full's branch on it folds away.
 */
static uint64_t unpack_full_any(const uint32_t *in, unsigned width, uint32_t *out, uint64_t acc, int kind) {
    if (kind) {
        switch (width) {
            UNPACK_FULL_CASES
        default: /* width 0: every gap is 0 */
            for (int i = 0; i < UNPACK_BLOCK; i++) out[i] = (uint32_t)++acc;
            return acc;
        }
    }
    switch (width) {
        UNPACK_FULL_CASES
    default: /* width 0: every tf is 1 */
        for (int i = 0; i < UNPACK_BLOCK; i++) out[i] = 1;
        return acc;
    }
}

#endif /* WEFT_UNPACK_H */
