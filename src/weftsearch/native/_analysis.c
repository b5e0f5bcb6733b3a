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
 *
 * Holds the GIL throughout (it builds Python objects); O(len(folded)).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

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
        while (k < (Py_ssize_t)length && chars[k] == PyUnicode_READ(kind, data, start + k)) k++;
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

/* The words of text, their terms found or resolved; with positions == 0 each kept term is
 * counted into out (term -> int), else its position (its index among the kept terms) is
 * appended to out (term -> list of int). Returns the number of terms kept, -1 on error. */
static Py_ssize_t scan(PyObject *text, PyObject *memo, PyObject *stopwords, PyObject *stem, Py_ssize_t limit,
                       PyObject *out, int positions, WordCache *cache) {
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    PyObject *one = PyLong_FromLong(1);
    Py_ssize_t length = 0;
    Py_ssize_t i = 0;
    if (one == NULL) return -1;
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
            if (word == NULL) goto error;
            term = PyDict_GetItemWithError(memo, word); /* borrowed */
            if (term != NULL) {
                Py_INCREF(term);
            } else if (PyErr_Occurred()) {
                Py_DECREF(word);
                goto error;
            } else {
                term = resolve(word, memo, stopwords, stem, limit);
                if (term == NULL) {
                    Py_DECREF(word);
                    goto error;
                }
            }
            Py_DECREF(word);
            /* probed again inside: resolve may have run other threads' analysis meanwhile */
            if (cached && !cache_put(cache, hash, kind, data, start, i, term, limit)) {
                Py_DECREF(term);
                goto error;
            }
        }
        if (term == Py_None) {
            Py_DECREF(term);
            continue;
        }
        PyObject *found = PyDict_GetItemWithError(out, term); /* borrowed */
        int failed;
        if (positions) {
            PyObject *at = PyLong_FromSsize_t(length);
            if (at == NULL) {
                failed = -1;
            } else if (found != NULL) {
                failed = PyList_Append(found, at);
            } else if (PyErr_Occurred()) {
                failed = -1;
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
            Py_XDECREF(at);
        } else if (found == NULL) {
            failed = PyErr_Occurred() ? -1 : PyDict_SetItem(out, term, one);
        } else {
            PyObject *next = PyNumber_Add(found, one);
            failed = next == NULL ? -1 : PyDict_SetItem(out, term, next);
            Py_XDECREF(next);
        }
        Py_DECREF(term);
        if (failed) goto error;
        length++;
    }
    Py_DECREF(one);
    return length;
error:
    Py_DECREF(one);
    return -1;
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
    PyObject *out = PyDict_New();
    if (out == NULL) return NULL;
    const Py_ssize_t length =
        scan(text, memo, stopwords, stem, limit, out, positions, cache == Py_None ? NULL : (WordCache *)cache);
    if (length < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return Py_BuildValue("(Nn)", out, length);
}

static PyObject *term_counts(PyObject *self, PyObject *args) {
    (void)self;
    return analyse(args, "UO!O!On|O:term_counts", 0);
}

static PyObject *term_positions(PyObject *self, PyObject *args) {
    (void)self;
    return analyse(args, "UO!O!On|O:term_positions", 1);
}

static PyMethodDef methods[] = {
    {"term_counts", term_counts, METH_VARARGS,
     "term_counts(folded, memo, stopwords, stem, limit, cache=None) -> (counts, length) (see the module source)."},
    {"term_positions", term_positions, METH_VARARGS,
     "term_positions(folded, memo, stopwords, stem, limit, cache=None) -> (positions, length) (see the module "
     "source)."},
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
    if (PyType_Ready(&WordCacheType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "WordCache", (PyObject *)&WordCacheType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
