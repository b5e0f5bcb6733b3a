/* The english analyzer's inner loop, compiled: words of a folded text looked up in the
 * analyzer's memo and counted (weftsearch.analysis.EnglishAnalyzer.term_counts), or their
 * positions listed (EnglishAnalyzer.term_positions).
 *
 * Words are what the regex  \w+(?:['\u2019]\w+)*  finds: runs of word characters, an
 * apostrophe (' or U+2019) kept only between word characters. A word character is what
 * Python's re module calls one in a str pattern: Py_UNICODE_ISALNUM(ch) or '_' (sre's
 * SRE_UNI_IS_WORD), so the words are the regex's exactly.
 *
 * term_counts(folded, memo, stopwords, stem, limit[, cache]) -> (counts, length)
 *   memo maps a word to its term (str) or None (dropped). A word not in it is resolved by
 *   the english rule (EnglishAnalyzer._resolve_word, the same steps): a final 's or \u2019s
 *   removed, then dropped (None) if nothing is left or it is in the frozenset stopwords, else
 *   stem(base) (PyStemmer's stemWord); the memo is emptied first if it holds limit words, then
 *   the word is remembered. Returns counts (term -> frequency, terms in first-seen order, as
 *   collections.Counter gives) and length (the number of terms kept).
 *
 * term_positions(folded, memo, stopwords, stem, limit[, cache]) -> (positions, length)
 *   The same scan; positions maps each term (first-seen order) to the list of its indexes
 *   among the terms kept, ascending: what indexing with positions stores, without a Python
 *   step per term.
 *
 * Both take an optional sixth argument, a WordCache: a C table of word (its code points) ->
 * term, consulted before the memo, so a known word costs no str object and no dict lookup
 * (the memo still serves misses and words longer than WORD_CACHE_LONGEST). It holds a
 * reference to each term; it is emptied when it holds limit words or WORD_CACHE_CHARS code
 * points, so it stays bounded. A word's term is a pure function of the word, so what the
 * cache returns is what the memo would.
 * Counting keeps a reference to each distinct term object in a C table (Tally) and builds the dict
 * once at the end, so a repeated term costs a pointer probe, not a dict lookup and an int object.
 *
 * split_counts(text, limit[, cache]) -> (counts, length)
 * split_positions(text, limit[, cache]) -> (positions, length)
 *   The whitespace analyzer's (weftsearch.analysis.WhitespaceAnalyzer): the tokens of
 *   text.split() (runs of characters that are not Py_UNICODE_ISSPACE, what str.split() splits
 *   on), each its own term, counted as Counter(text.split()) counts them (first-seen order) or
 *   with their indexes. A token of at most WORD_CACHE_LONGEST code points known to the cache
 *   costs no str object; the cache is bounded by limit words as above.
 * token_spans(folded, memo, stopwords, stem, limit) -> (ids, table)
 *   The same scan, for highlighting: ids maps each distinct kept term (first-seen order) to its
 *   number, 0, 1, ... (one object per distinct term, not per word), and table (bytes) holds, for
 *   each kept term in text order, three native int64: its number, and the start and end code point
 *   offsets of its word in folded. The table is at most 12 * (len(folded) + 2) bytes.
 *
 * fragment_windows(text, starts, ends, size) -> windows
 *   For highlighting: for each anchor (starts[k], ends[k]) (int64 buffers, spans of text), the
 *   fragment of about size characters weftsearch.highlight._windows chooses for it, as bytes of
 *   int64 (start, end) pairs: its rule per anchor, reading only the characters it looks at
 *   (whitespace is Py_UNICODE_ISSPACE, what str.isspace tests). O(anchors * size).
 *
 * Holds the GIL throughout (it builds Python objects); O(len(folded)).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* \w for the ASCII range: [0-9A-Za-z_]. */
static unsigned char ascii_word[128];

static inline int is_word(Py_UCS4 ch) {
    return ch < 128 ? ascii_word[ch] : Py_UNICODE_ISALNUM(ch);
}


/* ------------------------------------------------------------------ the word cache */

/* Longest word (code points) the cache keeps; most words are far shorter. */
#define WORD_CACHE_LONGEST 32
/* Code points the cache keeps in all before it is emptied (16 MB of UCS4 at most). */
#define WORD_CACHE_CHARS (1u << 22)

typedef struct {
    uint64_t hash;
    uint32_t start;  /* in chars */
    uint32_t length; /* 0: empty slot */
    PyObject *term;  /* owned: a str, or None (a dropped word) */
} CacheSlot;

typedef struct {
    PyObject_HEAD
    CacheSlot *slots;
    size_t capacity; /* a power of two, at least twice words */
    size_t words;
    Py_UCS4 *chars;
    size_t used;
} WordCache;

static PyTypeObject WordCacheType;

static void cache_clear(WordCache *cache) {
    for (size_t i = 0; i < cache->capacity; i++) {
        if (cache->slots[i].length) {
            Py_CLEAR(cache->slots[i].term);
            cache->slots[i].length = 0;
        }
    }
    cache->words = 0;
    cache->used = 0;
}

static void cache_dealloc(WordCache *cache) {
    if (cache->slots != NULL) cache_clear(cache);
    free(cache->slots);
    free(cache->chars);
    Py_TYPE(cache)->tp_free((PyObject *)cache);
}

static PyObject *cache_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    if (PyTuple_GET_SIZE(args) != 0 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)) {
        PyErr_SetString(PyExc_TypeError, "WordCache() takes no arguments");
        return NULL;
    }
    WordCache *cache = (WordCache *)type->tp_alloc(type, 0);
    if (cache == NULL) return NULL;
    cache->capacity = 1024;
    cache->slots = calloc(cache->capacity, sizeof(CacheSlot));
    cache->chars = malloc(WORD_CACHE_CHARS * sizeof(Py_UCS4));
    if (cache->slots == NULL || cache->chars == NULL) {
        Py_DECREF(cache);
        return PyErr_NoMemory();
    }
    return (PyObject *)cache;
}

static PyObject *cache_len(WordCache *cache, PyObject *unused) {
    (void)unused;
    return PyLong_FromSize_t(cache->words);
}

static PyMethodDef cache_methods[] = {
    {"size", (PyCFunction)cache_len, METH_NOARGS, "size() -> the words the cache holds."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject WordCacheType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "weftsearch.native._analysis.WordCache",
    .tp_basicsize = sizeof(WordCache),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "word -> term, in C, for term_counts and term_positions (see the module source).",
    .tp_new = cache_new,
    .tp_dealloc = (destructor)cache_dealloc,
    .tp_methods = cache_methods,
};

/* FNV-1a over the word's code points. */
static inline uint64_t word_hash(int kind, const void *data, Py_ssize_t start, Py_ssize_t end) {
    uint64_t hash = 1469598103934665603ull;
    for (Py_ssize_t k = start; k < end; k++) {
        hash ^= (uint64_t)PyUnicode_READ(kind, data, k);
        hash *= 1099511628211ull;
    }
    return hash;
}

/* The slot of the word (found, or the empty one where it would go). */
static CacheSlot *cache_probe(WordCache *cache, uint64_t hash, int kind, const void *data, Py_ssize_t start,
                              Py_ssize_t end) {
    const size_t mask = cache->capacity - 1;
    const uint32_t length = (uint32_t)(end - start);
    for (size_t at = (size_t)hash & mask;; at = (at + 1) & mask) {
        CacheSlot *slot = &cache->slots[at];
        if (!slot->length) return slot;
        if (slot->hash != hash || slot->length != length) continue;
        const Py_UCS4 *chars = cache->chars + slot->start;
        Py_ssize_t k = 0;
        if (kind == PyUnicode_1BYTE_KIND) {
            const Py_UCS1 *bytes = (const Py_UCS1 *)data + start;
            while (k < (Py_ssize_t)length && chars[k] == bytes[k]) k++;
        } else {
            while (k < (Py_ssize_t)length && chars[k] == PyUnicode_READ(kind, data, start + k)) k++;
        }
        if (k == (Py_ssize_t)length) return slot;
    }
}

/* Remember word -> term (a new reference is taken). 0 on error (no memory). */
static int cache_put(WordCache *cache, uint64_t hash, int kind, const void *data, Py_ssize_t start, Py_ssize_t end,
                     PyObject *term, Py_ssize_t limit) {
    const size_t length = (size_t)(end - start);
    if ((Py_ssize_t)cache->words >= limit || cache->used + length > WORD_CACHE_CHARS) cache_clear(cache);
    if ((cache->words + 1) * 2 > cache->capacity) {
        const size_t capacity = cache->capacity * 2;
        CacheSlot *slots = calloc(capacity, sizeof(CacheSlot));
        if (slots == NULL) {
            PyErr_NoMemory();
            return 0;
        }
        for (size_t i = 0; i < cache->capacity; i++) {
            if (!cache->slots[i].length) continue;
            size_t at = (size_t)cache->slots[i].hash & (capacity - 1);
            while (slots[at].length) at = (at + 1) & (capacity - 1);
            slots[at] = cache->slots[i];
        }
        free(cache->slots);
        cache->slots = slots;
        cache->capacity = capacity;
    }
    CacheSlot *slot = cache_probe(cache, hash, kind, data, start, end);
    if (slot->length) return 1; /* there already (cannot happen under the GIL; harmless) */
    for (size_t k = 0; k < length; k++) cache->chars[cache->used + k] = PyUnicode_READ(kind, data, start + (Py_ssize_t)k);
    slot->hash = hash;
    slot->start = (uint32_t)cache->used;
    slot->length = (uint32_t)length;
    Py_INCREF(term);
    slot->term = term;
    cache->used += length;
    cache->words++;
    return 1;
}

/* A new word's term (new reference; None when dropped), remembered in memo. */
static PyObject *resolve(PyObject *word, PyObject *memo, PyObject *stopwords, PyObject *stem,
                         Py_ssize_t limit) {
    const Py_ssize_t n = PyUnicode_GET_LENGTH(word);
    const int kind = PyUnicode_KIND(word);
    const void *data = PyUnicode_DATA(word);
    PyObject *base;
    if (n >= 2 && PyUnicode_READ(kind, data, n - 1) == 's' &&
        (PyUnicode_READ(kind, data, n - 2) == '\'' || PyUnicode_READ(kind, data, n - 2) == 0x2019)) {
        base = PyUnicode_Substring(word, 0, n - 2);
    } else {
        base = word;
        Py_INCREF(base);
    }
    if (base == NULL) return NULL;
    PyObject *term;
    int stop = PyUnicode_GET_LENGTH(base) == 0 ? 1 : PySet_Contains(stopwords, base);
    if (stop < 0) {
        Py_DECREF(base);
        return NULL;
    }
    if (stop) {
        term = Py_None;
        Py_INCREF(term);
    } else {
        term = PyObject_CallOneArg(stem, base);
        if (term == NULL) {
            Py_DECREF(base);
            return NULL;
        }
        if (!PyUnicode_Check(term)) {
            PyErr_Format(PyExc_TypeError, "stem(%R) returned %R, not a str", base, term);
            Py_DECREF(term);
            Py_DECREF(base);
            return NULL;
        }
    }
    Py_DECREF(base);
    if (PyDict_GET_SIZE(memo) >= limit) PyDict_Clear(memo);
    if (PyDict_SetItem(memo, word, term) < 0) {
        Py_DECREF(term);
        return NULL;
    }
    return term;
}

/* The next word of data (length n) at or after *i: 1 with its bounds [*start, *i), or 0 when none is
 * left. The regex's words: a run of word characters, then apostrophe + run, repeatedly. */
static inline int next_word(int kind, const void *data, Py_ssize_t n, Py_ssize_t *i, Py_ssize_t *start) {
    Py_ssize_t at = *i;
    while (at < n && !is_word(PyUnicode_READ(kind, data, at))) at++;
    if (at >= n) {
        *i = at;
        return 0;
    }
    *start = at;
    while (at < n && is_word(PyUnicode_READ(kind, data, at))) at++;
    while (at + 1 < n) {
        const Py_UCS4 ch = PyUnicode_READ(kind, data, at);
        if ((ch != '\'' && ch != 0x2019) || !is_word(PyUnicode_READ(kind, data, at + 1))) break;
        at++;
        while (at < n && is_word(PyUnicode_READ(kind, data, at))) at++;
    }
    *i = at;
    return 1;
}

/* The term (new reference; None when dropped) of the word text[start:end], from memo or resolved. */
static PyObject *term_of(PyObject *text, Py_ssize_t start, Py_ssize_t end, PyObject *memo, PyObject *stopwords,
                         PyObject *stem, Py_ssize_t limit) {
    PyObject *word = PyUnicode_Substring(text, start, end);
    if (word == NULL) return NULL;
    PyObject *term = PyDict_GetItemWithError(memo, word); /* borrowed */
    if (term != NULL) {
        Py_INCREF(term); /* owned from here, as resolve's result is */
    } else if (!PyErr_Occurred()) {
        term = resolve(word, memo, stopwords, stem, limit);
    }
    Py_DECREF(word);
    return term;
}


/* ------------------------------------------------------------------ counting without a dict step a word */

/* A text's kept terms counted by object: a term object seen again (the cache and the memo hand out
 * one object per word) costs a pointer probe, not a dict lookup and an int object. The dict is
 * built once at the end, entries in first-seen order; two distinct but equal term objects (two
 * words with one stem) fold into the first one's key there, as Counter would count them. Holds a
 * reference to each term (the cache may be emptied, and a term freed, while the scan runs). */
typedef struct {
    PyObject *term; /* owned */
    Py_ssize_t count;
} TallyEntry;

/* Entries a tally holds before it moves to the heap (most texts have fewer distinct terms). */
#define TALLY_SMALL 256

typedef struct {
    TallyEntry *entries; /* small, or on the heap */
    size_t n, capacity;
    uint32_t *slots; /* entry index + 1, 0: empty; a power of two, at least twice capacity */
    size_t slots_capacity;
    TallyEntry small[TALLY_SMALL];
    uint32_t small_slots[2 * TALLY_SMALL];
} Tally;

static void tally_init(Tally *tally) {
    tally->entries = tally->small;
    tally->capacity = TALLY_SMALL;
    tally->slots = tally->small_slots;
    tally->slots_capacity = 2 * TALLY_SMALL;
    tally->n = 0;
    memset(tally->small_slots, 0, sizeof(tally->small_slots));
}

static void tally_free(Tally *tally) {
    for (size_t i = 0; i < tally->n; i++) Py_DECREF(tally->entries[i].term);
    if (tally->entries != tally->small) free(tally->entries);
    if (tally->slots != tally->small_slots) free(tally->slots);
    tally->entries = NULL;
    tally->slots = NULL;
    tally->n = tally->capacity = tally->slots_capacity = 0;
}

static inline size_t pointer_hash(const void *p) {
    return (size_t)(((uint64_t)(uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull >> 17);
}

/* Room for one more entry (entries double; slots stay at least twice entries). 0: no memory. */
static int tally_grow(Tally *tally) {
    const size_t capacity = tally->capacity * 2;
    /* a text's distinct terms are fewer than its code points, so this bound is never reached by
     * real input; it keeps the products below (and the uint32 slot indexes) in range */
    if (capacity > ((size_t)1 << 30) || capacity > SIZE_MAX / (2 * sizeof(TallyEntry))) {
        PyErr_NoMemory();
        return 0;
    }
    TallyEntry *entries = malloc(capacity * sizeof(TallyEntry));
    const size_t slots_capacity = capacity * 2;
    uint32_t *slots = calloc(slots_capacity, sizeof(uint32_t));
    if (entries == NULL || slots == NULL) {
        free(entries);
        free(slots);
        PyErr_NoMemory();
        return 0;
    }
    memcpy(entries, tally->entries, tally->n * sizeof(TallyEntry));
    const size_t mask = slots_capacity - 1;
    for (size_t i = 0; i < tally->n; i++) {
        size_t at = pointer_hash(entries[i].term) & mask;
        while (slots[at]) at = (at + 1) & mask;
        slots[at] = (uint32_t)(i + 1);
    }
    if (tally->entries != tally->small) free(tally->entries);
    if (tally->slots != tally->small_slots) free(tally->slots);
    tally->entries = entries;
    tally->capacity = capacity;
    tally->slots = slots;
    tally->slots_capacity = slots_capacity;
    return 1;
}

static inline int tally_reserve(Tally *tally) { return tally->n < tally->capacity || tally_grow(tally); }

/* Count one more of term (borrowed). 0: no memory. */
static inline int tally_add(Tally *tally, PyObject *term) {
    if (!tally_reserve(tally)) return 0;
    const size_t mask = tally->slots_capacity - 1;
    size_t at = pointer_hash(term) & mask;
    for (; tally->slots[at]; at = (at + 1) & mask) {
        TallyEntry *entry = &tally->entries[tally->slots[at] - 1];
        if (entry->term == term) {
            entry->count++;
            return 1;
        }
    }
    Py_INCREF(term);
    tally->entries[tally->n].term = term;
    tally->entries[tally->n].count = 1;
    tally->n++;
    tally->slots[at] = (uint32_t)tally->n;
    return 1;
}

/* A new dict sized for n keys: no resize while they go in. */
static PyObject *dict_for(size_t n) {
#if PY_VERSION_HEX < 0x030D0000
    return _PyDict_NewPresized((Py_ssize_t)n);
#else
    (void)n;
    return PyDict_New();
#endif
}

/* The counts as a dict (term -> int), first-seen order; equal terms folded into the first key. */
static PyObject *tally_dict(const Tally *tally) {
    PyObject *out = dict_for(tally->n);
    if (out == NULL) return NULL;
    for (size_t i = 0; i < tally->n; i++) {
        PyObject *term = tally->entries[i].term;
        PyObject *value = PyLong_FromSsize_t(tally->entries[i].count);
        if (value == NULL) goto error;
        /* one lookup for the usual case, a term not there yet (small ints are shared objects,
         * so whether it went in is told by the size, not by the value returned) */
        const Py_ssize_t size = PyDict_GET_SIZE(out);
        PyObject *found = PyDict_SetDefault(out, term, value); /* borrowed */
        if (found == NULL) {
            Py_DECREF(value);
            goto error;
        }
        if (PyDict_GET_SIZE(out) == size) { /* an equal term came first: fold into its count */
            const Py_ssize_t before = PyLong_AsSsize_t(found);
            if (before == -1 && PyErr_Occurred()) {
                Py_DECREF(value);
                goto error;
            }
            Py_DECREF(value);
            value = PyLong_FromSsize_t(before + tally->entries[i].count);
            if (value == NULL) goto error;
            const int failed = PyDict_SetItem(out, term, value);
            Py_DECREF(value);
            if (failed) goto error;
            continue;
        }
        Py_DECREF(value);
    }
    return out;
error:
    Py_DECREF(out);
    return NULL;
}

/* Append position to out[term] (a list, made on the term's first position). 0 on error. */
static int append_position(PyObject *out, PyObject *term, Py_ssize_t position) {
    PyObject *found = PyDict_GetItemWithError(out, term); /* borrowed */
    if (found == NULL && PyErr_Occurred()) return 0;
    PyObject *at = PyLong_FromSsize_t(position);
    if (at == NULL) return 0;
    int failed;
    if (found != NULL) {
        failed = PyList_Append(found, at);
    } else {
        PyObject *runs = PyList_New(1);
        if (runs == NULL) {
            failed = -1;
        } else {
            Py_INCREF(at);
            PyList_SET_ITEM(runs, 0, at);
            failed = PyDict_SetItem(out, term, runs);
            Py_DECREF(runs);
        }
    }
    Py_DECREF(at);
    return !failed;
}

/* The words of text, their terms found or resolved; with out == NULL each kept term is counted
 * into tally, else its position (its index among the kept terms) is appended to out (term -> list
 * of int). Returns the number of terms kept, -1 on error. */
static Py_ssize_t scan(PyObject *text, PyObject *memo, PyObject *stopwords, PyObject *stem, Py_ssize_t limit,
                       PyObject *out, Tally *tally, WordCache *cache) {
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    Py_ssize_t length = 0;
    Py_ssize_t i = 0;
    while (i < n) {
        if (!is_word(PyUnicode_READ(kind, data, i))) {
            i++;
            continue;
        }
        const Py_ssize_t start = i;
        while (i < n && is_word(PyUnicode_READ(kind, data, i))) i++;
        while (i + 1 < n) {
            const Py_UCS4 ch = PyUnicode_READ(kind, data, i);
            if ((ch != '\'' && ch != 0x2019) || !is_word(PyUnicode_READ(kind, data, i + 1))) break;
            i++;
            while (i < n && is_word(PyUnicode_READ(kind, data, i))) i++;
        }
        PyObject *term = NULL;
        const int cached = cache != NULL && i - start <= WORD_CACHE_LONGEST;
        uint64_t hash = 0;
        if (cached) {
            hash = word_hash(kind, data, start, i);
            CacheSlot *slot = cache_probe(cache, hash, kind, data, start, i);
            if (slot->length) {
                term = slot->term;
                Py_INCREF(term); /* owned from here, as resolve's result is */
            }
        }
        if (term == NULL) {
            PyObject *word = PyUnicode_Substring(text, start, i);
            if (word == NULL) return -1;
            term = PyDict_GetItemWithError(memo, word); /* borrowed */
            if (term != NULL) {
                Py_INCREF(term);
            } else if (PyErr_Occurred()) {
                Py_DECREF(word);
                return -1;
            } else {
                term = resolve(word, memo, stopwords, stem, limit);
                if (term == NULL) {
                    Py_DECREF(word);
                    return -1;
                }
            }
            Py_DECREF(word);
            /* probed again inside: resolve may have run other threads' analysis meanwhile */
            if (cached && !cache_put(cache, hash, kind, data, start, i, term, limit)) {
                Py_DECREF(term);
                return -1;
            }
        }
        if (term == Py_None) {
            Py_DECREF(term);
            continue;
        }
        const int ok = out != NULL ? append_position(out, term, length) : tally_add(tally, term);
        Py_DECREF(term);
        if (!ok) return -1;
        length++;
    }
    return length;
}

static PyObject *analyse(PyObject *args, const char *format, int positions) {
    PyObject *text, *memo, *stopwords, *stem, *cache = Py_None;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, format, &text, &PyDict_Type, &memo, &PyFrozenSet_Type, &stopwords, &stem, &limit,
                          &cache))
        return NULL;
    if (cache != Py_None && !PyObject_TypeCheck(cache, &WordCacheType)) {
        PyErr_Format(PyExc_TypeError, "cache must be a WordCache or None, not %R", cache);
        return NULL;
    }
    if (PyUnicode_READY(text) == -1) return NULL;
    WordCache *words = cache == Py_None ? NULL : (WordCache *)cache;
    if (positions) {
        PyObject *out = PyDict_New();
        if (out == NULL) return NULL;
        const Py_ssize_t length = scan(text, memo, stopwords, stem, limit, out, NULL, words);
        if (length < 0) {
            Py_DECREF(out);
            return NULL;
        }
        return Py_BuildValue("(Nn)", out, length);
    }
    Tally tally;
    tally_init(&tally);
    const Py_ssize_t length = scan(text, memo, stopwords, stem, limit, NULL, &tally, words);
    PyObject *out = length < 0 ? NULL : tally_dict(&tally);
    tally_free(&tally);
    if (out == NULL) return NULL;
    return Py_BuildValue("(Nn)", out, length);
}

/* Py_UNICODE_ISSPACE of each one-byte code point (what str.split() splits on). */
static unsigned char space1[256];

/*
 * The next token of data (length n, a wider kind than one byte: split_scan reads one-byte text
 * itself, hashing as it goes) at or after *i: its start, *i set to its end; -1 when none is left.
 */
static inline Py_ssize_t next_token(int kind, const void *data, Py_ssize_t n, Py_ssize_t *i) {
    Py_ssize_t at = *i;
    while (at < n && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, at))) at++;
    if (at >= n) return -1;
    const Py_ssize_t start = at;
    while (at < n && !Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, at))) at++;
    *i = at;
    return start;
}

/* The tokens of text as str.split() finds them (runs of characters that are not
 * Py_UNICODE_ISSPACE, what str.split() with no argument splits on), each one its own term: from
 * the cache where it is known (no str made), else a new str, remembered. Counted into tally, or
 * with out != NULL each token's index appended to out[token]. Returns the number of tokens, -1 on
 * error. */
static Py_ssize_t split_scan(PyObject *text, WordCache *cache, Py_ssize_t limit, PyObject *out, Tally *tally) {
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    Py_ssize_t length = 0;
    Py_ssize_t i = 0;
    for (;;) {
        Py_ssize_t start;
        uint64_t hash = 0;
        if (kind == PyUnicode_1BYTE_KIND) { /* bounds and hash in one pass (word_hash's value) */
            const Py_UCS1 *bytes = data;
            while (i < n && space1[bytes[i]]) i++;
            if (i >= n) break;
            start = i;
            hash = 1469598103934665603ull;
            while (i < n && !space1[bytes[i]]) {
                hash ^= (uint64_t)bytes[i++];
                hash *= 1099511628211ull;
            }
        } else {
            start = next_token(kind, data, n, &i);
            if (start < 0) break;
        }
        PyObject *term = NULL;
        const int cached = cache != NULL && i - start <= WORD_CACHE_LONGEST;
        if (cached) {
            if (kind != PyUnicode_1BYTE_KIND) hash = word_hash(kind, data, start, i);
            CacheSlot *slot = cache_probe(cache, hash, kind, data, start, i);
            if (slot->length) {
                term = slot->term;
                Py_INCREF(term);
            }
        }
        if (term == NULL) {
            term = PyUnicode_Substring(text, start, i);
            if (term == NULL) return -1;
            if (cached && !cache_put(cache, hash, kind, data, start, i, term, limit)) {
                Py_DECREF(term);
                return -1;
            }
        }
        const int ok = out != NULL ? append_position(out, term, length) : tally_add(tally, term);
        Py_DECREF(term);
        if (!ok) return -1;
        length++;
    }
    return length;
}

static PyObject *split_analyse(PyObject *args, const char *format, int positions) {
    PyObject *text, *cache = Py_None;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, format, &text, &limit, &cache)) return NULL;
    if (cache != Py_None && !PyObject_TypeCheck(cache, &WordCacheType)) {
        PyErr_Format(PyExc_TypeError, "cache must be a WordCache or None, not %R", cache);
        return NULL;
    }
    if (limit < 1) {
        PyErr_Format(PyExc_ValueError, "limit must be at least 1, got %zd", limit);
        return NULL;
    }
    if (PyUnicode_READY(text) == -1) return NULL;
    WordCache *words = cache == Py_None ? NULL : (WordCache *)cache;
    if (positions) {
        PyObject *out = PyDict_New();
        if (out == NULL) return NULL;
        const Py_ssize_t length = split_scan(text, words, limit, out, NULL);
        if (length < 0) {
            Py_DECREF(out);
            return NULL;
        }
        return Py_BuildValue("(Nn)", out, length);
    }
    Tally tally;
    tally_init(&tally);
    const Py_ssize_t length = split_scan(text, words, limit, NULL, &tally);
    PyObject *out = length < 0 ? NULL : tally_dict(&tally);
    tally_free(&tally);
    if (out == NULL) return NULL;
    return Py_BuildValue("(Nn)", out, length);
}

static PyObject *split_counts(PyObject *self, PyObject *args) {
    (void)self;
    return split_analyse(args, "Un|O:split_counts", 0);
}

static PyObject *split_positions(PyObject *self, PyObject *args) {
    (void)self;
    return split_analyse(args, "Un|O:split_positions", 1);
}

static PyObject *term_counts(PyObject *self, PyObject *args) {
    (void)self;
    return analyse(args, "UO!O!On|O:term_counts", 0);
}

static PyObject *term_positions(PyObject *self, PyObject *args) {
    (void)self;
    return analyse(args, "UO!O!On|O:term_positions", 1);
}


/* token_spans: see the module comment. */
static PyObject *token_spans(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *text, *memo, *stopwords, *stem;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "UO!O!On:token_spans", &text, &PyDict_Type, &memo, &PyFrozenSet_Type, &stopwords,
                          &stem, &limit))
        return NULL;
    if (PyUnicode_READY(text) == -1) return NULL;
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    /* Words are separated by at least one character, so a text holds at most n / 2 + 1 of them:
     * the table never grows past that bound, which is checked against overflow once here. */
    const Py_ssize_t most = n / 2 + 1;
    if (most > PY_SSIZE_T_MAX / (Py_ssize_t)(3 * sizeof(int64_t))) return PyErr_NoMemory();
    Py_ssize_t capacity = most < 64 ? most : 64;
    int64_t *table = PyMem_Malloc((size_t)capacity * 3 * sizeof(int64_t));
    PyObject *ids = PyDict_New();
    PyObject *result = NULL;
    if (table == NULL || ids == NULL) {
        if (table == NULL) PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t count = 0, i = 0, start;
    while (next_word(kind, data, n, &i, &start)) {
        PyObject *term = term_of(text, start, i, memo, stopwords, stem, limit);
        if (term == NULL) goto done;
        if (term == Py_None) {
            Py_DECREF(term);
            continue;
        }
        Py_ssize_t id;
        PyObject *known = PyDict_GetItemWithError(ids, term); /* borrowed */
        if (known != NULL) {
            id = PyLong_AsSsize_t(known);
        } else if (PyErr_Occurred()) {
            id = -1;
        } else {
            id = PyDict_GET_SIZE(ids);
            PyObject *number = PyLong_FromSsize_t(id);
            if (number == NULL || PyDict_SetItem(ids, term, number) < 0) id = -1;
            Py_XDECREF(number);
        }
        Py_DECREF(term);
        if (id < 0) goto done;
        if (count == capacity) {
            /* Cannot pass most: count < most always holds (see above). */
            const Py_ssize_t grown = capacity > most / 2 ? most : 2 * capacity;
            if (grown <= capacity) { /* cannot happen (see above); refuse rather than overrun */
                PyErr_SetString(PyExc_SystemError, "token_spans: more words than the text can hold");
                goto done;
            }
            int64_t *larger = PyMem_Realloc(table, (size_t)grown * 3 * sizeof(int64_t));
            if (larger == NULL) {
                PyErr_NoMemory();
                goto done;
            }
            table = larger;
            capacity = grown;
        }
        table[3 * count] = id;
        table[3 * count + 1] = start;
        table[3 * count + 2] = i;
        count++;
    }
    PyObject *packed = PyBytes_FromStringAndSize((const char *)table, count * 3 * (Py_ssize_t)sizeof(int64_t));
    if (packed != NULL) result = Py_BuildValue("(ON)", ids, packed);
done:
    PyMem_Free(table);
    Py_XDECREF(ids);
    return result;
}


/* fragment_windows: see the module comment. The rule of weftsearch.highlight._windows, per anchor. */
static PyObject *fragment_windows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *text;
    Py_buffer starts, ends;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "Uy*y*n:fragment_windows", &text, &starts, &ends, &size)) return NULL;
    PyObject *result = NULL;
    if (PyUnicode_READY(text) == -1) goto done;
    const Py_ssize_t count = starts.len / (Py_ssize_t)sizeof(int64_t);
    if (starts.len % (Py_ssize_t)sizeof(int64_t) != 0 || ends.len != starts.len) {
        PyErr_SetString(PyExc_ValueError, "starts and ends must be int64 buffers of the same length");
        goto done;
    }
    if (size < 1 || size > PY_SSIZE_T_MAX / 4) {
        /* the upper bound keeps start + size and the room's arithmetic in range */
        PyErr_Format(PyExc_ValueError, "size must be at least 1 and at most %zd, got %zd", PY_SSIZE_T_MAX / 4, size);
        goto done;
    }
    if (count > PY_SSIZE_T_MAX / (Py_ssize_t)(2 * sizeof(int64_t))) {
        PyErr_NoMemory();
        goto done;
    }
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    result = PyBytes_FromStringAndSize(NULL, count * 2 * (Py_ssize_t)sizeof(int64_t));
    if (result == NULL) goto done;
    int64_t *out = (int64_t *)PyBytes_AS_STRING(result);
    for (Py_ssize_t k = 0; k < count; k++) {
        int64_t anchor_start, anchor_end;
        memcpy(&anchor_start, (const char *)starts.buf + k * (Py_ssize_t)sizeof(int64_t), sizeof(int64_t));
        memcpy(&anchor_end, (const char *)ends.buf + k * (Py_ssize_t)sizeof(int64_t), sizeof(int64_t));
        if (anchor_start < 0 || anchor_end <= anchor_start || anchor_end > n) {
            PyErr_Format(PyExc_ValueError, "anchor %zd (%lld, %lld) is not a span of a text of %zd characters", k,
                         (long long)anchor_start, (long long)anchor_end, n);
            Py_CLEAR(result);
            goto done;
        }
        const Py_ssize_t s = (Py_ssize_t)anchor_start, e = (Py_ssize_t)anchor_end;
        const Py_ssize_t room = size - (e - s) > 0 ? size - (e - s) : 0;
        Py_ssize_t start = s - room / 4 > 0 ? s - room / 4 : 0;
        Py_ssize_t end = start + size < n ? start + size : n;
        if (end < e) end = e;
        if (end - start < size) {
            const Py_ssize_t back = end - size < start ? end - size : start;
            start = back > 0 ? back : 0;
        }
        if (start > 0 && !Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, start - 1))) {
            for (Py_ssize_t at = start; at < s; at++) {
                if (Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, at))) {
                    start = at + 1;
                    break;
                }
            }
        }
        if (end < n && !Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, end))) {
            for (Py_ssize_t at = end - 1; at > e; at--) { /* the last ' ' after e (at e it would not move end) */
                if (PyUnicode_READ(kind, data, at) == ' ') {
                    end = at;
                    break;
                }
            }
        }
        while (start < s && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, start))) start++;
        while (end > e && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, end - 1))) end--;
        out[2 * k] = start;
        out[2 * k + 1] = end;
    }
done:
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    return result;
}

static PyMethodDef methods[] = {
    {"term_counts", term_counts, METH_VARARGS,
     "term_counts(folded, memo, stopwords, stem, limit, cache=None) -> (counts, length) (see the module source)."},
    {"term_positions", term_positions, METH_VARARGS,
     "term_positions(folded, memo, stopwords, stem, limit, cache=None) -> (positions, length) (see the module "
     "source)."},
    {"split_counts", split_counts, METH_VARARGS,
     "split_counts(text, limit, cache=None) -> (counts, length): Counter(text.split()) and its length."},
    {"split_positions", split_positions, METH_VARARGS,
     "split_positions(text, limit, cache=None) -> (positions, length): each token of text.split() with its "
     "indexes."},
    {"token_spans", token_spans, METH_VARARGS,
     "token_spans(folded, memo, stopwords, stem, limit) -> (ids, table) (see the module source)."},
    {"fragment_windows", fragment_windows, METH_VARARGS,
     "fragment_windows(text, starts, ends, size) -> windows (see the module source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "weftsearch.native._analysis", "The english analyzer's compiled inner loop.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__analysis(void) {
    for (int ch = 0; ch < 128; ch++)
        ascii_word[ch] = (unsigned char)(ch == '_' || (ch >= '0' && ch <= '9') || (ch >= 'A' && ch <= 'Z') ||
                                         (ch >= 'a' && ch <= 'z'));
    for (int ch = 0; ch < 256; ch++) space1[ch] = (unsigned char)(Py_UNICODE_ISSPACE((Py_UCS4)ch) ? 1 : 0);
    if (PyType_Ready(&WordCacheType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "WordCache", (PyObject *)&WordCacheType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
