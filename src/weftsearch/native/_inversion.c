/* Inversion of a segment's analysed documents, compiled (and, below, the block packing): the per-document term counts (and
 * positions) become the postings grouped by term, terms in sorted order, local ids ascending
 * within a term: what weftsearch.storage.segment_writer's Python path (_flat_postings, then an
 * argsort by (term, doc) in _field_postings) gives, without a Python step or an object per
 * posting.
 *
 * Inverter()
 *   .add(term_maps, position_maps) -> None
 *     term_maps: a list of dicts or Counters (term str -> tf int, 1 <= tf < 2**32), one per document, in
 *     local-id order (appended after the documents of earlier calls); position_maps: None, or a
 *     list as long of dicts (term -> list or tuple of its tf positions, ints). Each new term
 *     gets the next id of the batch's term table (a hash table of the term objects, holding a
 *     reference to each); each posting is kept as (term id, tf), its positions copied out.
 *     Holds the GIL (it reads dicts); the caller slices its documents so no call runs long.
 *   .finish() -> (vocabulary, offsets, ids, tfs, positions)
 *     vocabulary: the terms sorted (by code point, as Python's sorted: UTF-8 bytes compared);
 *     offsets: bytearray of V + 1 uint64 (term t's postings are offsets[t] ..< offsets[t+1]);
 *     ids, tfs: bytearrays of P uint32, sorted by (term, local id); positions: bytearray of
 *     int64, each posting's run in that order (None unless positions were given). The sort
 *     and the counting sort run with the GIL released (no Python object is touched). The
 *     Inverter is spent afterwards, as it is after an add() that raised.
 *
 * json_string(text) -> str
 *   json.encoder.encode_basestring(text) (what a stored record's text becomes): a text with nothing
 *   to escape is copied whole instead of a character at a time.
 *
 * Anything the Python path would treat differently from a plain dict of str -> int (another
 * mapping type, a str subclass, a tf out of range, a positions run whose length is not its tf,
 * a term that cannot be encoded as UTF-8, more than 2**32 - 1 documents) raises
 * UnsupportedInputError: the caller then runs the Python path, which gives its own result or error.
 * Every size computation is checked for overflow; every allocation is proportional to the
 * input.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static PyObject *UnsupportedInputError;
/* collections.Counter: a dict subclass that keeps dict's storage, iteration and values() (the
 * Python path's term counts of a custom analyzer); any other subclass goes to the Python path. */
static PyObject *counter_type;

/* a * b into *out, or 0 when it would not fit a size_t. */
static int mul_size(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return 0;
    *out = a * b;
    return 1;
}

/* Grow *buffer (of *capacity items of width bytes) to hold at least need items (doubling). */
static int reserve(void **buffer, size_t *capacity, size_t need, size_t width) {
    if (need <= *capacity) return 1;
    size_t grown = *capacity ? *capacity : 64;
    while (grown < need) {
        if (grown > SIZE_MAX / 2) {
            grown = need;
            break;
        }
        grown *= 2;
    }
    size_t bytes;
    if (!mul_size(grown, width, &bytes) || bytes > (size_t)PY_SSIZE_T_MAX) {
        PyErr_NoMemory();
        return 0;
    }
    void *moved = realloc(*buffer, bytes);
    if (moved == NULL) {
        PyErr_NoMemory();
        return 0;
    }
    *buffer = moved;
    *capacity = grown;
    return 1;
}

/* A slot of the term table: the term (borrowed from terms[]), its hash, its id + 1 (0: empty).
 * One slot holds what a probe compares, so a probe reads one place. */
typedef struct {
    PyObject *term;
    Py_hash_t hash;
    uint32_t id_plus_1;
} Slot;

typedef struct {
    PyObject_HEAD
    /* the term table: terms[i] (owned); slots: open addressing, linear probing */
    PyObject **terms;
    size_t n_terms, terms_capacity;
    Slot *slots;
    size_t slots_capacity; /* a power of two, at least twice n_terms */
    /* postings in document order */
    uint32_t *term_of, *tf_of;
    size_t n_postings, postings_capacity;
    /* doc_end[d]: postings of documents 0 ..= d */
    size_t *doc_end;
    size_t n_docs, docs_capacity;
    /* positions in document (posting) order, when kept */
    int64_t *positions;
    size_t n_positions, positions_capacity;
    int with_positions; /* -1: not known yet (no add), 0, 1 */
    int spent;
    int busy; /* in add(), which can run Python code (a positions key's __eq__) that calls back in */
} Inverter;

static void inverter_free(Inverter *self) {
    for (size_t i = 0; i < self->n_terms; i++) Py_DECREF(self->terms[i]);
    free(self->terms);
    free(self->slots);
    free(self->term_of);
    free(self->tf_of);
    free(self->doc_end);
    free(self->positions);
    self->terms = NULL;
    self->slots = NULL;
    self->term_of = self->tf_of = NULL;
    self->doc_end = NULL;
    self->positions = NULL;
    self->n_terms = self->terms_capacity = self->slots_capacity = 0;
    self->n_postings = self->postings_capacity = self->n_docs = self->docs_capacity = 0;
    self->n_positions = self->positions_capacity = 0;
}

static void inverter_dealloc(Inverter *self) {
    inverter_free(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *inverter_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    if (PyTuple_GET_SIZE(args) != 0 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)) {
        PyErr_SetString(PyExc_TypeError, "Inverter() takes no arguments");
        return NULL;
    }
    Inverter *self = (Inverter *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->with_positions = -1;
    return (PyObject *)self;
}

/* Double the slots and put every term back. */
static int grow_slots(Inverter *self) {
    size_t capacity = self->slots_capacity ? self->slots_capacity * 2 : 1024;
    size_t bytes;
    if (capacity < self->slots_capacity || !mul_size(capacity, sizeof(Slot), &bytes)) {
        PyErr_NoMemory();
        return 0;
    }
    Slot *slots = calloc(capacity, sizeof(Slot));
    if (slots == NULL) {
        PyErr_NoMemory();
        return 0;
    }
    const size_t mask = capacity - 1;
    for (size_t i = 0; i < self->slots_capacity; i++) {
        const Slot old = self->slots[i];
        if (!old.id_plus_1) continue;
        size_t at = (size_t)old.hash & mask;
        while (slots[at].id_plus_1) at = (at + 1) & mask;
        slots[at] = old;
    }
    free(self->slots);
    self->slots = slots;
    self->slots_capacity = capacity;
    return 1;
}

/* Two exact, ready strs equal? As CPython's own unicode_eq: same length, kind and code units. */
static inline int same_text(PyObject *a, PyObject *b) {
    const Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    if (n != PyUnicode_GET_LENGTH(b) || PyUnicode_KIND(a) != PyUnicode_KIND(b)) return 0;
    return memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)n * PyUnicode_KIND(a)) == 0;
}

/* The id of term (an exact str) in the table, added if new; -1 on error. */
static int64_t term_id(Inverter *self, PyObject *term) {
    if (PyUnicode_READY(term) == -1) return -1;
    const Py_hash_t hash = PyObject_Hash(term);
    if (hash == -1) return -1;
    const size_t mask = self->slots_capacity - 1;
    size_t at = (size_t)hash & mask;
    for (;;) {
        const Slot *slot = &self->slots[at];
        if (!slot->id_plus_1) break;
        if (slot->term == term || (slot->hash == hash && same_text(slot->term, term))) return slot->id_plus_1 - 1;
        at = (at + 1) & mask;
    }
    /* new: the table keeps at most UINT32_MAX - 1 terms (ids + 1 fit a uint32) */
    if (self->n_terms >= UINT32_MAX - 1) {
        PyErr_SetString(UnsupportedInputError, "more than 2**32 - 2 terms in one segment");
        return -1;
    }
    if (!reserve((void **)&self->terms, &self->terms_capacity, self->n_terms + 1, sizeof(PyObject *)))
        return -1;
    const size_t id = self->n_terms++;
    Py_INCREF(term);
    self->terms[id] = term;
    self->slots[at].term = term;
    self->slots[at].hash = hash;
    self->slots[at].id_plus_1 = (uint32_t)(id + 1);
    if (self->n_terms * 2 > self->slots_capacity && !grow_slots(self)) return -1;
    return (int64_t)id;
}

/* Copy the positions run of term (of frequency tf) from positions_map. 0 on error. */
static int copy_run(Inverter *self, PyObject *positions_map, PyObject *term, uint32_t tf) {
    PyObject *run = PyDict_GetItemWithError(positions_map, term); /* borrowed */
    if (run == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(UnsupportedInputError, "a term without positions");
        return 0;
    }
    if (!PyList_CheckExact(run) && !PyTuple_CheckExact(run)) {
        PyErr_SetString(UnsupportedInputError, "positions are not a list or tuple");
        return 0;
    }
    const Py_ssize_t length = PySequence_Fast_GET_SIZE(run);
    if (length != (Py_ssize_t)tf) {
        PyErr_SetString(UnsupportedInputError, "a positions run is not as long as its tf");
        return 0;
    }
    if (self->n_positions > SIZE_MAX - tf) {
        PyErr_NoMemory();
        return 0;
    }
    if (!reserve((void **)&self->positions, &self->positions_capacity, self->n_positions + tf, sizeof(int64_t)))
        return 0;
    PyObject **items = PySequence_Fast_ITEMS(run);
    for (Py_ssize_t i = 0; i < length; i++) {
        if (!PyLong_CheckExact(items[i])) {
            PyErr_SetString(UnsupportedInputError, "a position is not an int");
            return 0;
        }
        int overflow = 0;
        const long long value = PyLong_AsLongLongAndOverflow(items[i], &overflow);
        if (overflow || (value == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            PyErr_SetString(UnsupportedInputError, "a position out of the int64 range");
            return 0;
        }
        self->positions[self->n_positions++] = (int64_t)value;
    }
    return 1;
}

/* One document's postings (and positions) appended: 0 on error. */
static int add_document(Inverter *self, PyObject *map, PyObject *positions_map, int with_positions) {
    if (!PyDict_CheckExact(map) && (PyObject *)Py_TYPE(map) != counter_type) {
        PyErr_SetString(UnsupportedInputError, "a document's terms are not a dict");
        return 0;
    }
    if (with_positions && !PyDict_CheckExact(positions_map)) {
        PyErr_SetString(UnsupportedInputError, "a document's positions are not a dict");
        return 0;
    }
    const size_t terms = (size_t)PyDict_GET_SIZE(map);
    if (self->n_postings > SIZE_MAX - terms) {
        PyErr_NoMemory();
        return 0;
    }
    const size_t need = self->n_postings + terms;
    size_t capacity = self->postings_capacity;
    if (!reserve((void **)&self->term_of, &capacity, need, sizeof(uint32_t))) return 0;
    capacity = self->postings_capacity;
    if (!reserve((void **)&self->tf_of, &capacity, need, sizeof(uint32_t))) return 0;
    self->postings_capacity = capacity;
    Py_ssize_t at = 0;
    PyObject *term, *value;
    while (PyDict_Next(map, &at, &term, &value)) {
        if (!PyUnicode_CheckExact(term) || !PyLong_CheckExact(value)) {
            PyErr_SetString(UnsupportedInputError, "a term that is not a str, or a tf that is not an int");
            return 0;
        }
        int overflow = 0;
        const long long tf = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow || tf < 1 || tf > (long long)UINT32_MAX) {
            PyErr_Clear();
            PyErr_SetString(UnsupportedInputError, "a tf outside 1 .. 2**32 - 1");
            return 0;
        }
        const int64_t id = term_id(self, term);
        if (id < 0) return 0;
        if (with_positions && !copy_run(self, positions_map, term, (uint32_t)tf)) return 0;
        /* that lookup may have run Python code that added to map: never write past what was reserved */
        if (self->n_postings >= need) {
            PyErr_SetString(PyExc_RuntimeError, "a document's terms changed during inversion");
            return 0;
        }
        self->term_of[self->n_postings] = (uint32_t)id;
        self->tf_of[self->n_postings] = (uint32_t)tf;
        self->n_postings++;
    }
    if ((size_t)PyDict_GET_SIZE(map) != terms) {
        PyErr_SetString(PyExc_RuntimeError, "a document's terms changed during inversion");
        return 0;
    }
    self->doc_end[self->n_docs++] = self->n_postings;
    return 1;
}

/* The body of add(): 0 on error (the documents may then be half added). */
static int add_documents(Inverter *self, PyObject *maps, PyObject *position_maps) {
    const int with_positions = position_maps != Py_None;
    if (with_positions &&
        (!PyList_Check(position_maps) || PyList_GET_SIZE(position_maps) != PyList_GET_SIZE(maps))) {
        PyErr_SetString(PyExc_ValueError, "position_maps must be None or a list as long as term_maps");
        return 0;
    }
    if (self->with_positions >= 0 && self->with_positions != with_positions) {
        PyErr_SetString(PyExc_ValueError, "every add() gives positions, or none does");
        return 0;
    }
    self->with_positions = with_positions;
    if (self->slots == NULL && !grow_slots(self)) return 0;
    const Py_ssize_t count = PyList_GET_SIZE(maps);
    if ((size_t)count > (size_t)UINT32_MAX - self->n_docs) {
        PyErr_SetString(UnsupportedInputError, "more than 2**32 - 1 documents in one segment");
        return 0;
    }
    if (!reserve((void **)&self->doc_end, &self->docs_capacity, self->n_docs + (size_t)count, sizeof(size_t)))
        return 0;
    for (Py_ssize_t d = 0; d < count; d++) {
        /* A positions dict's lookup can run a key's __eq__ (Python code) that shrinks the lists or
         * drops a map: re-check the lengths and hold each map while it is read. */
        if (d >= PyList_GET_SIZE(maps) || (with_positions && d >= PyList_GET_SIZE(position_maps))) {
            PyErr_SetString(PyExc_RuntimeError, "the document list changed during inversion");
            return 0;
        }
        PyObject *map = Py_NewRef(PyList_GET_ITEM(maps, d));
        PyObject *positions_map = with_positions ? Py_NewRef(PyList_GET_ITEM(position_maps, d)) : NULL;
        const int added = add_document(self, map, positions_map, with_positions);
        Py_DECREF(map);
        Py_XDECREF(positions_map);
        if (!added) return 0;
    }
    return 1;
}

static PyObject *inverter_add(Inverter *self, PyObject *args) {
    PyObject *maps, *position_maps;
    if (!PyArg_ParseTuple(args, "O!O:add", &PyList_Type, &maps, &position_maps)) return NULL;
    if (self->spent) {
        PyErr_SetString(PyExc_RuntimeError, "this Inverter has finished or failed");
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "this Inverter is in use (add() called from inside add())");
        return NULL;
    }
    self->busy = 1;
    const int added = add_documents(self, maps, position_maps);
    self->busy = 0;
    if (!added) {
        /* a document may be half added: this Inverter cannot be finished */
        self->spent = 1;
        inverter_free(self);
        return NULL;
    }
    Py_RETURN_NONE;
}

typedef struct {
    const char *bytes;
    size_t size;
    uint32_t id;
} Key;

static int compare_keys(const void *a, const void *b) {
    const Key *x = a, *y = b;
    const size_t common = x->size < y->size ? x->size : y->size;
    const int order = memcmp(x->bytes, y->bytes, common);
    if (order) return order;
    return (x->size > y->size) - (x->size < y->size);
}

/* The sort and the counting sort: no Python object touched (run without the GIL). 0: no memory. */
static int invert(Inverter *self, Key *keys, uint64_t *offsets, uint32_t *ids, uint32_t *tfs, int64_t *positions) {
    const size_t v = self->n_terms, p = self->n_postings;
    size_t rank_bytes, cursor_bytes, slot_bytes, run_bytes;
    if (v == SIZE_MAX || p == SIZE_MAX || !mul_size(v + 1, sizeof(uint32_t), &rank_bytes) ||
        !mul_size(v + 1, sizeof(uint64_t), &cursor_bytes) || !mul_size(p + 1, sizeof(uint64_t), &slot_bytes))
        return 0;
    run_bytes = slot_bytes;
    qsort(keys, v, sizeof(Key), compare_keys);
    uint32_t *rank = malloc(rank_bytes);
    uint64_t *cursor = malloc(cursor_bytes);
    uint64_t *slot_of = NULL;
    uint64_t *run_start = NULL;
    if (positions != NULL) {
        slot_of = malloc(slot_bytes);
        run_start = malloc(run_bytes);
    }
    if (rank == NULL || cursor == NULL || (positions != NULL && (slot_of == NULL || run_start == NULL))) {
        free(rank);
        free(cursor);
        free(slot_of);
        free(run_start);
        return 0;
    }
    for (size_t r = 0; r < v; r++) rank[keys[r].id] = (uint32_t)r;
    memset(offsets, 0, (v + 1) * sizeof(uint64_t));
    for (size_t i = 0; i < p; i++) offsets[rank[self->term_of[i]] + 1]++;
    for (size_t r = 0; r < v; r++) offsets[r + 1] += offsets[r];
    memcpy(cursor, offsets, (v + 1) * sizeof(uint64_t));
    size_t i = 0;
    for (size_t d = 0; d < self->n_docs; d++) {
        for (const size_t end = self->doc_end[d]; i < end; i++) {
            const uint64_t slot = cursor[rank[self->term_of[i]]]++;
            ids[slot] = (uint32_t)d;
            tfs[slot] = self->tf_of[i];
            if (slot_of != NULL) slot_of[i] = slot;
        }
    }
    if (positions != NULL) {
        /* each sorted slot's run start, then every run copied from its document-order place */
        run_start[0] = 0;
        for (size_t s = 0; s < p; s++) run_start[s + 1] = run_start[s] + tfs[s];
        size_t from = 0;
        for (size_t k = 0; k < p; k++) {
            const uint32_t tf = self->tf_of[k];
            memcpy(positions + run_start[slot_of[k]], self->positions + from, (size_t)tf * sizeof(int64_t));
            from += tf;
        }
    }
    free(rank);
    free(cursor);
    free(slot_of);
    free(run_start);
    return 1;
}

/* A bytearray of count items of width bytes, or NULL (an error set). */
static PyObject *buffer_of(size_t count, size_t width) {
    size_t bytes;
    if (!mul_size(count, width, &bytes) || bytes > (size_t)PY_SSIZE_T_MAX) return PyErr_NoMemory();
    return PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)bytes);
}

static PyObject *inverter_finish(Inverter *self, PyObject *unused) {
    (void)unused;
    if (self->busy) {
        /* finishing would free the tables the running add() writes to */
        PyErr_SetString(PyExc_RuntimeError, "this Inverter is in use (finish() called from inside add())");
        return NULL;
    }
    if (self->spent) {
        PyErr_SetString(PyExc_RuntimeError, "this Inverter has finished or failed");
        return NULL;
    }
    self->spent = 1;
    const size_t v = self->n_terms, p = self->n_postings;
    const int with_positions = self->with_positions == 1;
    size_t key_bytes;
    if (!mul_size(v ? v : 1, sizeof(Key), &key_bytes)) return PyErr_NoMemory();
    Key *keys = malloc(key_bytes);
    if (keys == NULL) return PyErr_NoMemory();
    for (size_t t = 0; t < v; t++) {
        Py_ssize_t size;
        const char *bytes = PyUnicode_AsUTF8AndSize(self->terms[t], &size); /* kept by the str */
        if (bytes == NULL) {
            free(keys);
            PyErr_Clear();
            PyErr_SetString(UnsupportedInputError, "a term that cannot be encoded as UTF-8");
            return NULL;
        }
        keys[t].bytes = bytes;
        keys[t].size = (size_t)size;
        keys[t].id = (uint32_t)t;
    }
    PyObject *offsets = buffer_of(v + 1, sizeof(uint64_t));
    PyObject *ids = buffer_of(p, sizeof(uint32_t));
    PyObject *tfs = buffer_of(p, sizeof(uint32_t));
    PyObject *positions = with_positions ? buffer_of(self->n_positions, sizeof(int64_t)) : Py_NewRef(Py_None);
    PyObject *vocabulary = PyList_New((Py_ssize_t)v);
    if (offsets == NULL || ids == NULL || tfs == NULL || positions == NULL || vocabulary == NULL) goto error;
    int done;
    Py_BEGIN_ALLOW_THREADS;
    done = invert(self, keys, (uint64_t *)PyByteArray_AS_STRING(offsets), (uint32_t *)PyByteArray_AS_STRING(ids),
                  (uint32_t *)PyByteArray_AS_STRING(tfs),
                  with_positions ? (int64_t *)PyByteArray_AS_STRING(positions) : NULL);
    Py_END_ALLOW_THREADS;
    if (!done) {
        PyErr_NoMemory();
        goto error;
    }
    for (size_t r = 0; r < v; r++) {
        PyObject *term = self->terms[keys[r].id];
        Py_INCREF(term);
        PyList_SET_ITEM(vocabulary, (Py_ssize_t)r, term);
    }
    free(keys);
    inverter_free(self);
    return Py_BuildValue("(NNNNN)", vocabulary, offsets, ids, tfs, positions);
error:
    free(keys);
    Py_XDECREF(offsets);
    Py_XDECREF(ids);
    Py_XDECREF(tfs);
    Py_XDECREF(positions);
    Py_XDECREF(vocabulary);
    inverter_free(self);
    return NULL;
}

static PyMethodDef inverter_methods[] = {
    {"add", (PyCFunction)inverter_add, METH_VARARGS,
     "add(term_maps, position_maps) -> None: the next documents (see the module source)."},
    {"finish", (PyCFunction)inverter_finish, METH_NOARGS,
     "finish() -> (vocabulary, offsets, ids, tfs, positions) (see the module source)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject InverterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "weftsearch.native._inversion.Inverter",
    .tp_basicsize = sizeof(Inverter),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A segment's postings inverted in C: add() documents, then finish() (see the module source).",
    .tp_new = inverter_new,
    .tp_dealloc = (destructor)inverter_dealloc,
    .tp_methods = inverter_methods,
};


/* ---------------------------------------------------------------- block encoding
 *
 * pack(ids, tfs, offsets, lengths) -> (block_offsets, blocks, data_offsets, data)
 *   The compressed postings of docs/FORMAT.md ("Compressed postings"), as
 *   weftsearch.storage.postings.pack_postings packs them in numpy, byte for byte: term t's
 *   postings ids[offsets[t] ..< offsets[t+1]] (uint32, strictly ascending, each below
 *   len(lengths)) and tfs (uint32, >= 1) cut into blocks of 128; per block its last id, max
 *   tf, min document length (lengths: uint32) and widths (w_id | w_tf << 8, the smallest that
 *   hold its id gaps and tf - 1), stored per term as four runs; then its id gaps and tf - 1
 *   bit-packed into uint32 words. offsets: uint64, offsets[0] == 0, ascending, the last at
 *   most len(ids). Returns bytearrays: block_offsets (V + 1 uint64), blocks (4 per block,
 *   uint32), data_offsets (V + 1 uint64), data (uint32 words). Input the numpy path would
 *   treat otherwise raises UnsupportedInputError (the caller runs numpy). Runs without the
 *   GIL (the arrays are held as buffers).
 */

#define BLOCK 128

static unsigned width_of(uint64_t value) {
    unsigned bits = 0;
    while (value) {
        bits++;
        value >>= 1;
    }
    return bits;
}

typedef struct {
    const uint32_t *ids, *tfs, *lengths;
    const uint64_t *offsets;
    size_t n_ids, n_terms, n_docs;
} PackInput;

/* Checks the input and counts the blocks; 0 (and *why set) when the numpy path must run. */
static int pack_check(const PackInput *in, size_t *blocks, const char **why) {
    if (in->offsets[0] != 0) {
        *why = "offsets do not start at 0";
        return 0;
    }
    size_t total = 0;
    for (size_t t = 0; t < in->n_terms; t++) {
        const uint64_t low = in->offsets[t], high = in->offsets[t + 1];
        if (high < low || high > in->n_ids) {
            *why = "offsets are not ascending within the postings";
            return 0;
        }
        total += (size_t)((high - low + BLOCK - 1) / BLOCK);
        for (uint64_t i = low; i < high; i++) {
            if (in->ids[i] >= in->n_docs || in->tfs[i] == 0 || (i > low && in->ids[i] <= in->ids[i - 1])) {
                *why = "a posting's id or tf is out of order or range";
                return 0;
            }
        }
    }
    *blocks = total;
    return 1;
}

/* The block table and each term's first block and word; returns the words, or SIZE_MAX. */
static size_t pack_table(const PackInput *in, uint64_t *block_offsets, uint32_t *table, uint64_t *data_offsets) {
    size_t block = 0, words = 0;
    for (size_t t = 0; t < in->n_terms; t++) {
        const uint64_t low = in->offsets[t], high = in->offsets[t + 1];
        const size_t count = (size_t)((high - low + BLOCK - 1) / BLOCK);
        uint32_t *lasts = table + 4 * block;
        uint32_t *max_tfs = lasts + count, *min_lengths = lasts + 2 * count, *widths = lasts + 3 * count;
        block_offsets[t] = block;
        data_offsets[t] = words;
        int64_t previous = -1;
        for (size_t b = 0; b < count; b++) {
            const uint64_t start = low + (uint64_t)b * BLOCK;
            const uint64_t end = start + BLOCK < high ? start + BLOCK : high;
            uint64_t max_gap = 0;
            uint32_t max_tf = 0, min_length = UINT32_MAX;
            for (uint64_t i = start; i < end; i++) {
                const uint64_t gap = (uint64_t)((int64_t)in->ids[i] - previous - 1);
                previous = in->ids[i];
                if (gap > max_gap) max_gap = gap;
                if (in->tfs[i] > max_tf) max_tf = in->tfs[i];
                /* checked in pack_check; read again so that an array changed meanwhile by another
                 * thread (the GIL is released) can give wrong bytes but never a read out of range */
                const uint32_t length = in->ids[i] < in->n_docs ? in->lengths[in->ids[i]] : 0;
                if (length < min_length) min_length = length;
            }
            const unsigned w_id = width_of(max_gap), w_tf = width_of((uint64_t)max_tf - 1);
            lasts[b] = in->ids[end - 1];
            max_tfs[b] = max_tf;
            min_lengths[b] = min_length;
            widths[b] = (uint32_t)(w_id | (w_tf << 8));
            const size_t c = (size_t)(end - start);
            words += (c * w_id + 31) / 32 + (c * w_tf + 31) / 32;
        }
        block += count;
    }
    block_offsets[in->n_terms] = block;
    data_offsets[in->n_terms] = words;
    return words;
}

/* value's w bits at bit position bit of words (zeroed beforehand). */
static inline void put_bits(uint32_t *words, uint64_t bit, uint64_t value, unsigned w) {
    if (!w) return;
    const uint64_t word = bit >> 5;
    const unsigned shift = (unsigned)(bit & 31);
    words[word] |= (uint32_t)(value << shift);
    if (shift + w > 32) words[word + 1] |= (uint32_t)(value >> (32 - shift));
}

static void pack_data(const PackInput *in, const uint32_t *table, const uint64_t *block_offsets, uint32_t *data) {
    size_t at = 0; /* the next block's first word */
    for (size_t t = 0; t < in->n_terms; t++) {
        const uint64_t low = in->offsets[t], high = in->offsets[t + 1];
        const size_t count = (size_t)(block_offsets[t + 1] - block_offsets[t]);
        const uint32_t *widths = table + 4 * block_offsets[t] + 3 * count;
        int64_t previous = -1;
        for (size_t b = 0; b < count; b++) {
            const uint64_t start = low + (uint64_t)b * BLOCK;
            const uint64_t end = start + BLOCK < high ? start + BLOCK : high;
            const unsigned w_id = widths[b] & 0xFF, w_tf = widths[b] >> 8;
            const size_t c = (size_t)(end - start);
            uint32_t *id_words = data + at, *tf_words = data + at + (c * w_id + 31) / 32;
            for (uint64_t i = start; i < end; i++) {
                const uint64_t k = i - start;
                put_bits(id_words, k * w_id, (uint64_t)((int64_t)in->ids[i] - previous - 1), w_id);
                put_bits(tf_words, k * w_tf, (uint64_t)in->tfs[i] - 1, w_tf);
                previous = in->ids[i];
            }
            at += (c * w_id + 31) / 32 + (c * w_tf + 31) / 32;
        }
    }
}

/* A C-contiguous buffer of itemsize bytes an item (format ignored but its size), or 0. */
static int get_array(PyObject *object, Py_buffer *view, Py_ssize_t itemsize, const char *name) {
    if (PyObject_GetBuffer(object, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return 0;
    if (view->itemsize != itemsize || view->ndim != 1) {
        PyBuffer_Release(view);
        PyErr_Format(UnsupportedInputError, "%s: not a 1-d array of %zd-byte items", name, itemsize);
        return 0;
    }
    return 1;
}

static PyObject *pack(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ids_o, *tfs_o, *offsets_o, *lengths_o;
    if (!PyArg_ParseTuple(args, "OOOO:pack", &ids_o, &tfs_o, &offsets_o, &lengths_o)) return NULL;
    Py_buffer ids = {0}, tfs = {0}, offsets = {0}, lengths = {0};
    PyObject *result = NULL, *block_offsets = NULL, *table = NULL, *data_offsets = NULL, *data = NULL;
    uint64_t *own_offsets = NULL;
    if (!get_array(ids_o, &ids, 4, "ids")) goto done;
    if (!get_array(tfs_o, &tfs, 4, "tfs")) goto done;
    if (!get_array(offsets_o, &offsets, 8, "offsets")) goto done;
    if (!get_array(lengths_o, &lengths, 4, "lengths")) goto done;
    if (ids.shape[0] != tfs.shape[0] || offsets.shape[0] < 1) {
        PyErr_SetString(UnsupportedInputError, "ids and tfs differ in length, or no offsets");
        goto done;
    }
    /* The offsets decide every index and every output size, and another thread may write the
     * caller's array while the GIL is released: check and use a private copy, so a racing write can
     * give wrong bytes but never a read or write out of range. */
    size_t offsets_bytes;
    if (!mul_size((size_t)offsets.shape[0], sizeof(uint64_t), &offsets_bytes) ||
        (own_offsets = malloc(offsets_bytes)) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(own_offsets, offsets.buf, offsets_bytes);
    PackInput in = {ids.buf, tfs.buf, lengths.buf, own_offsets, (size_t)ids.shape[0],
                    (size_t)offsets.shape[0] - 1, (size_t)lengths.shape[0]};
    size_t blocks = 0, table_items;
    const char *why = NULL;
    int fine;
    Py_BEGIN_ALLOW_THREADS;
    fine = pack_check(&in, &blocks, &why);
    Py_END_ALLOW_THREADS;
    if (!fine) {
        PyErr_SetString(UnsupportedInputError, why);
        goto done;
    }
    if (!mul_size(blocks, 4, &table_items)) {
        PyErr_NoMemory();
        goto done;
    }
    block_offsets = buffer_of(in.n_terms + 1, sizeof(uint64_t));
    table = buffer_of(table_items, sizeof(uint32_t));
    data_offsets = buffer_of(in.n_terms + 1, sizeof(uint64_t));
    if (block_offsets == NULL || table == NULL || data_offsets == NULL) goto done;
    size_t words;
    Py_BEGIN_ALLOW_THREADS;
    words = pack_table(&in, (uint64_t *)PyByteArray_AS_STRING(block_offsets), (uint32_t *)PyByteArray_AS_STRING(table),
                       (uint64_t *)PyByteArray_AS_STRING(data_offsets));
    Py_END_ALLOW_THREADS;
    /* at most 2 words a posting plus 2 a block: bounded by the input */
    data = buffer_of(words, sizeof(uint32_t));
    if (data == NULL) goto done;
    uint32_t *out = (uint32_t *)PyByteArray_AS_STRING(data);
    Py_BEGIN_ALLOW_THREADS;
    memset(out, 0, words * sizeof(uint32_t));
    pack_data(&in, (const uint32_t *)PyByteArray_AS_STRING(table), (const uint64_t *)PyByteArray_AS_STRING(block_offsets),
              out);
    Py_END_ALLOW_THREADS;
    result = Py_BuildValue("(OOOO)", block_offsets, table, data_offsets, data);
done:
    free(own_offsets);
    if (ids.obj) PyBuffer_Release(&ids);
    if (tfs.obj) PyBuffer_Release(&tfs);
    if (offsets.obj) PyBuffer_Release(&offsets);
    if (lengths.obj) PyBuffer_Release(&lengths);
    Py_XDECREF(block_offsets);
    Py_XDECREF(table);
    Py_XDECREF(data_offsets);
    Py_XDECREF(data);
    return result;
}

/* ---------------------------------------------------------------- block decoding, checked
 *
 * unpack(data, offsets, block_offsets, blocks, data_offsets, n_docs, lengths) -> (ids, tfs, agrees)
 *   weftsearch.storage.postings.unpack_postings in C: the postings of consecutive terms decoded
 *   with every check the numpy path makes, in the same order of stages, so a damaged input gets
 *   the same message (raised as DecodeError). offsets, block_offsets, data_offsets: int64, T + 1
 *   each (rebased here: each may start above 0); blocks, data: uint32 (the matching slices of
 *   post.blocks and post.data); lengths: None, or uint32 with at least n_docs items, in which case
 *   `agrees` says whether the stored table equals what derive_blocks makes of the decoded
 *   postings (last ids, max tfs, min lengths, exact widths), else None. ids, tfs: bytearrays of
 *   uint32. Why in C: this is a term's first read on a reader (a query's cold cost) and a merge's or
 *   scrub's whole-segment decode; numpy takes ~50 array passes over the postings for it.
 *   Every output is sized by the postings count, which the block table bounds (128 postings a
 *   block, four table words a block), and the table's size is checked before anything is made.
 *   The checks and the decoding run without the GIL.
 */

/* value's w bits (w <= 32) at bit position bit of words; words[word + 1] read only when the value
 * straddles it (it then lies inside the run). */
static inline uint32_t get_bits(const uint32_t *words, uint64_t bit, unsigned w) {
    if (!w) return 0;
    const uint64_t word = bit >> 5;
    const unsigned shift = (unsigned)(bit & 31);
    uint64_t value = words[word] >> shift;
    if (shift + w > 32) value |= (uint64_t)words[word + 1] << (32 - shift);
    return (uint32_t)(value & (((uint64_t)1 << w) - 1));
}

#define UNPACK_BLOCK BLOCK
#include "unpack.h"

typedef struct {
    const uint32_t *data, *blocks, *lengths;
    const int64_t *offsets, *block_offsets, *data_offsets; /* rebased copies, T + 1 each */
    size_t n_terms, n_data, n_blocks_items, n_lengths;
    uint64_t n_docs;
} UnpackInput;

/* The postings of term t's block that starts at posting start: BLOCK, or fewer for its last. */
static inline uint64_t block_size(const UnpackInput *in, size_t t, uint64_t start) {
    const uint64_t left = (uint64_t)in->offsets[t + 1] - start;
    return left < BLOCK ? left : BLOCK;
}

/* The checks before decoding (numpy's first four stages); the message, or NULL. Sets *total and *count. */
static const char *unpack_layout(const UnpackInput *in, uint64_t *word_start, size_t *total, uint64_t *count) {
    size_t blocks = 0;
    for (size_t t = 0; t < in->n_terms; t++) {
        if (in->offsets[t + 1] < in->offsets[t] || in->block_offsets[t] != (int64_t)blocks)
            return "block offsets disagree with the postings counts";
        /* blocks equals a stored int64 here, and a term adds at most 2^57: no overflow */
        const uint64_t postings = (uint64_t)in->offsets[t + 1] - (uint64_t)in->offsets[t];
        blocks += (size_t)(postings / BLOCK + (postings % BLOCK != 0));
    }
    if (in->block_offsets[in->n_terms] != (int64_t)blocks) return "block offsets disagree with the postings counts";
    if (blocks > SIZE_MAX / 4 || in->n_blocks_items != 4 * blocks || in->data_offsets[in->n_terms] < 0 ||
        (uint64_t)in->data_offsets[in->n_terms] != in->n_data)
        return "the block table or the data has the wrong size";
    *total = blocks;
    *count = (uint64_t)in->offsets[in->n_terms];
    if (!blocks) return NULL;
    for (size_t t = 0; t < in->n_terms; t++) {
        const size_t first = (size_t)in->block_offsets[t], n = (size_t)in->block_offsets[t + 1] - first;
        const uint32_t *widths = in->blocks + 4 * first + 3 * n;
        for (size_t b = 0; b < n; b++)
            if ((widths[b] & 0xFF) > 32 || (widths[b] >> 8) > 32) return "a block's bit width is above 32";
    }
    uint64_t words = 0;
    for (size_t t = 0; t < in->n_terms; t++) {
        const size_t first = (size_t)in->block_offsets[t], n = (size_t)in->block_offsets[t + 1] - first;
        const uint32_t *widths = in->blocks + 4 * first + 3 * n;
        if ((uint64_t)in->data_offsets[t] != words) return "a term's blocks do not fill its words";
        for (size_t b = 0; b < n; b++) {
            const uint64_t start = (uint64_t)in->offsets[t] + (uint64_t)b * BLOCK;
            const uint64_t c = block_size(in, t, start);
            word_start[first + b] = words;
            words += (c * (widths[b] & 0xFF) + 31) / 32 + (c * (widths[b] >> 8) + 31) / 32;
        }
    }
    if (words != in->n_data) return "a term's blocks do not fill its words";
    /* bits past a run's last value (in its last word) are zero */
    for (size_t t = 0; t < in->n_terms; t++) {
        const size_t first = (size_t)in->block_offsets[t], n = (size_t)in->block_offsets[t + 1] - first;
        const uint32_t *widths = in->blocks + 4 * first + 3 * n;
        for (size_t b = 0; b < n; b++) {
            const uint64_t start = (uint64_t)in->offsets[t] + (uint64_t)b * BLOCK;
            const uint64_t c = block_size(in, t, start);
            const unsigned w_id = widths[b] & 0xFF, w_tf = widths[b] >> 8;
            const uint64_t id_words = (c * w_id + 31) / 32, tf_words = (c * w_tf + 31) / 32;
            const unsigned used_id = (unsigned)((c * w_id) & 31), used_tf = (unsigned)((c * w_tf) & 31);
            const uint64_t at = word_start[first + b];
            if (id_words && used_id && (in->data[at + id_words - 1] >> used_id))
                return "bits past a block's last value are not zero";
            if (tf_words && used_tf && (in->data[at + id_words + tf_words - 1] >> used_tf))
                return "bits past a block's last value are not zero";
        }
    }
    return NULL;
}

/* Decodes every block (numpy's last two stages, then derive_blocks' comparison when lengths are
 * given: *agrees). The message, or NULL. */
static const char *unpack_values(const UnpackInput *in, const uint64_t *word_start, uint32_t *ids, uint32_t *tfs,
                                 int *agrees) {
    const uint64_t limit = in->n_docs < ((uint64_t)1 << 32) ? in->n_docs : ((uint64_t)1 << 32);
    int past = 0, tf_top = 0, same = 1;
    for (size_t t = 0; t < in->n_terms; t++) {
        const size_t first = (size_t)in->block_offsets[t], n = (size_t)in->block_offsets[t + 1] - first;
        const uint32_t *lasts = in->blocks + 4 * first, *max_tfs = lasts + n, *min_lengths = lasts + 2 * n;
        const uint32_t *widths = lasts + 3 * n;
        uint64_t acc = UINT64_MAX; /* the previous id: -1 before a term's first */
        for (size_t b = 0; b < n; b++) {
            const uint64_t start = (uint64_t)in->offsets[t] + (uint64_t)b * BLOCK;
            const uint64_t c = block_size(in, t, start);
            const unsigned w_id = widths[b] & 0xFF, w_tf = widths[b] >> 8;
            const uint32_t *id_run = in->data + word_start[first + b];
            const uint32_t *tf_run = id_run + (c * w_id + 31) / 32;
            const uint64_t before = acc;
            uint32_t max_gap = 0, max_tf = 0, min_length = UINT32_MAX;
            /* acc is exact in 64 bits (an id past 2^32 is caught below); only the output is truncated */
            if (c == BLOCK) {
                acc = unpack_full_any(id_run, w_id, ids + start, acc, 1);
                unpack_full_any(tf_run, w_tf, tfs + start, 0, 0);
                if (w_tf == 32)
                    for (uint64_t k = 0; k < c; k++) tf_top |= tfs[start + k] == 0; /* tf - 1 = 2^32 - 1 wrapped */
            } else {
                for (uint64_t k = 0; k < c; k++) {
                    const uint32_t gap = get_bits(id_run, k * w_id, w_id);
                    const uint32_t tf_less = get_bits(tf_run, k * w_tf, w_tf);
                    acc += (uint64_t)gap + 1;
                    ids[start + k] = (uint32_t)acc;
                    tf_top |= tf_less == UINT32_MAX;
                    tfs[start + k] = tf_less + 1;
                }
            }
            /* ids ascend within a term: its block's last is its largest */
            if (acc >= limit || acc != (uint64_t)lasts[b]) past = 1;
            if (past || in->lengths == NULL) continue;
            for (uint64_t k = 0; k < c; k++) {
                const uint32_t id = ids[start + k];
                const uint32_t gap = (uint32_t)(id - (k ? ids[start + k - 1] : (uint32_t)before) - 1);
                if (gap > max_gap) max_gap = gap;
                if (tfs[start + k] > max_tf) max_tf = tfs[start + k];
                const uint32_t length = id < in->n_lengths ? in->lengths[id] : 0;
                if (length < min_length) min_length = length;
            }
            if (max_tfs[b] != max_tf || min_lengths[b] != min_length || w_id != width_of(max_gap) ||
                w_tf != width_of((uint64_t)max_tf - 1))
                same = 0;
        }
    }
    if (past) return "ids run past the documents or past their blocks' last ids";
    if (tf_top) return "a term frequency is 2^32";
    *agrees = same;
    return NULL;
}

/* An int64 copy of a T + 1 array, rebased on its first item (numpy's astype(int64) - first). */
static int64_t *rebased(const Py_buffer *view) {
    const size_t n = (size_t)view->shape[0];
    size_t bytes;
    if (!mul_size(n, sizeof(int64_t), &bytes)) return NULL;
    int64_t *out = malloc(bytes ? bytes : 1);
    if (out == NULL) return NULL;
    memcpy(out, view->buf, bytes);
    const uint64_t base = n ? (uint64_t)out[0] : 0;
    for (size_t i = 0; i < n; i++) out[i] = (int64_t)((uint64_t)out[i] - base); /* no signed overflow */
    return out;
}

static PyObject *DecodeError;

static PyObject *unpack(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *data_o, *offsets_o, *block_offsets_o, *blocks_o, *data_offsets_o, *lengths_o;
    unsigned long long n_docs;
    if (!PyArg_ParseTuple(args, "OOOOOKO:unpack", &data_o, &offsets_o, &block_offsets_o, &blocks_o, &data_offsets_o,
                          &n_docs, &lengths_o))
        return NULL;
    Py_buffer data = {0}, offsets = {0}, block_offsets = {0}, blocks = {0}, data_offsets = {0}, lengths = {0};
    int64_t *own[3] = {NULL, NULL, NULL};
    uint64_t *word_start = NULL;
    PyObject *result = NULL, *ids = NULL, *tfs = NULL;
    if (!get_array(data_o, &data, 4, "data") || !get_array(offsets_o, &offsets, 8, "offsets") ||
        !get_array(block_offsets_o, &block_offsets, 8, "block_offsets") || !get_array(blocks_o, &blocks, 4, "blocks") ||
        !get_array(data_offsets_o, &data_offsets, 8, "data_offsets"))
        goto done;
    if (lengths_o != Py_None && !get_array(lengths_o, &lengths, 4, "lengths")) goto done;
    if (offsets.shape[0] < 1 || block_offsets.shape[0] != offsets.shape[0] ||
        data_offsets.shape[0] != offsets.shape[0] || (lengths.obj && (uint64_t)lengths.shape[0] < n_docs)) {
        PyErr_SetString(UnsupportedInputError, "the cuts differ in length, or fewer lengths than documents");
        goto done;
    }
    /* private copies of what decides every index, so a racing write (the GIL is released) can give
     * a wrong verdict but never a read or write out of range */
    if ((own[0] = rebased(&offsets)) == NULL || (own[1] = rebased(&block_offsets)) == NULL ||
        (own[2] = rebased(&data_offsets)) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const size_t n_blocks_items = (size_t)blocks.shape[0];
    UnpackInput in = {data.buf, blocks.buf, lengths.obj ? lengths.buf : NULL, own[0], own[1], own[2],
                      (size_t)offsets.shape[0] - 1, (size_t)data.shape[0], n_blocks_items,
                      lengths.obj ? (size_t)lengths.shape[0] : 0, (uint64_t)n_docs};
    /* a block per 4 table words: word_start is bounded by the table the caller holds */
    size_t word_start_bytes;
    if (!mul_size(n_blocks_items / 4 + 1, sizeof(uint64_t), &word_start_bytes) ||
        (word_start = malloc(word_start_bytes)) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const char *why;
    size_t total = 0;
    uint64_t count = 0;
    Py_BEGIN_ALLOW_THREADS;
    why = unpack_layout(&in, word_start, &total, &count);
    Py_END_ALLOW_THREADS;
    if (why != NULL) {
        PyErr_SetString(DecodeError, why);
        goto done;
    }
    /* the layout check bounds the count by the table: at most 128 postings a block */
    ids = buffer_of(total ? (size_t)count : 0, sizeof(uint32_t));
    tfs = buffer_of(total ? (size_t)count : 0, sizeof(uint32_t));
    if (ids == NULL || tfs == NULL) goto done;
    int agrees = 1;
    if (total) {
        Py_BEGIN_ALLOW_THREADS;
        why = unpack_values(&in, word_start, (uint32_t *)PyByteArray_AS_STRING(ids),
                            (uint32_t *)PyByteArray_AS_STRING(tfs), &agrees);
        Py_END_ALLOW_THREADS;
        if (why != NULL) {
            PyErr_SetString(DecodeError, why);
            goto done;
        }
    }
    result = Py_BuildValue("(OOO)", ids, tfs, lengths.obj ? (agrees ? Py_True : Py_False) : Py_None);
done:
    for (int i = 0; i < 3; i++) free(own[i]);
    free(word_start);
    if (data.obj) PyBuffer_Release(&data);
    if (offsets.obj) PyBuffer_Release(&offsets);
    if (block_offsets.obj) PyBuffer_Release(&block_offsets);
    if (blocks.obj) PyBuffer_Release(&blocks);
    if (data_offsets.obj) PyBuffer_Release(&data_offsets);
    if (lengths.obj) PyBuffer_Release(&lengths);
    Py_XDECREF(ids);
    Py_XDECREF(tfs);
    return result;
}

/* ---------------------------------------------------------------- the term table's binary search
 *
 * lower_bound(blob, offsets, needle) -> int
 *   The first term i (0 ..= n) of a segment's sorted term table whose UTF-8 bytes
 *   blob[offsets[i] ..< offsets[i+1]] are not below needle (bytes compared as Python compares
 *   bytes: memcmp on the common length, then the shorter first), n = len(offsets) - 1. What
 *   weftsearch.storage.segment's Python bisection gives, in one call: a term's first look-up on a
 *   reader probes log2(n) slices of the map, each a few Python objects there. Offsets past the
 *   blob or descending read as numpy slices them (clamped, then empty), so a damaged table gives
 *   the Python answer, never a read out of range (the reader checks the offsets at open anyway).
 *   Holds the GIL: O(log n) comparisons, shorter than releasing it.
 */
static PyObject *lower_bound(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *blob_o, *offsets_o;
    Py_buffer needle = {0};
    if (!PyArg_ParseTuple(args, "OOy*:lower_bound", &blob_o, &offsets_o, &needle)) return NULL;
    Py_buffer blob = {0}, offsets = {0};
    PyObject *result = NULL;
    if (!get_array(blob_o, &blob, 1, "blob") || !get_array(offsets_o, &offsets, 8, "offsets")) goto done;
    if (offsets.shape[0] < 1) {
        PyErr_SetString(UnsupportedInputError, "no offsets");
        goto done;
    }
    const unsigned char *bytes = blob.buf, *want = needle.buf;
    const uint64_t *cuts = offsets.buf, size = (uint64_t)blob.shape[0];
    const size_t want_length = (size_t)needle.len;
    size_t low = 0, high = (size_t)offsets.shape[0] - 1;
    while (low < high) {
        const size_t middle = low + (high - low) / 2;
        uint64_t start = cuts[middle] < size ? cuts[middle] : size;
        uint64_t end = cuts[middle + 1] < size ? cuts[middle + 1] : size;
        if (end < start) end = start;
        const size_t length = (size_t)(end - start);
        const size_t common = length < want_length ? length : want_length;
        const int order = common ? memcmp(bytes + start, want, common) : 0; /* no pointer read for 0 */
        const int below = order < 0 || (order == 0 && length < want_length);
        if (below)
            low = middle + 1;
        else
            high = middle;
    }
    result = PyLong_FromSize_t(low);
done:
    PyBuffer_Release(&needle);
    if (blob.obj) PyBuffer_Release(&blob);
    if (offsets.obj) PyBuffer_Release(&offsets);
    return result;
}

/* ------------------------------------------------------------------ a stored record's JSON string */

/* What a character becomes in JSON as json.encoder.encode_basestring writes it (ensure_ascii=False):
 * the extra characters its escape adds (0: copied as it is). */
static inline int escape_extra(Py_UCS4 c) {
    if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t') return 1;
    return c < 0x20 ? 5 : 0;
}

/* escape_extra of each one-byte character. */
static unsigned char escape_extra1[256];

/* json_string(text) -> str: json.encoder.encode_basestring(text) (quotes, and the escapes of '"', '\\'
 * and the control characters below U+0020; everything else, non-ASCII included, as it is). A text
 * with nothing to escape (the usual case) is copied whole. O(len(text)); holds the GIL (it makes a
 * str, and the copy is at most one text long). */
static PyObject *json_string(PyObject *self, PyObject *arg) {
    (void)self;
    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "json_string() takes a str, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    if (PyUnicode_READY(arg) == -1) return NULL;
    const int kind = PyUnicode_KIND(arg);
    const void *data = PyUnicode_DATA(arg);
    const Py_ssize_t n = PyUnicode_GET_LENGTH(arg);
    Py_ssize_t extra = 0;
    if (kind == PyUnicode_1BYTE_KIND) { /* a table lookup a character: the usual text */
        const Py_UCS1 *bytes = data;
        for (Py_ssize_t i = 0; i < n; i++) {
            const int more = escape_extra1[bytes[i]];
            if (more) {
                if (extra > PY_SSIZE_T_MAX - 2 - n - 5) return PyErr_NoMemory();
                extra += more;
            }
        }
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            const int more = escape_extra(PyUnicode_READ(kind, data, i));
            if (more) {
                if (extra > PY_SSIZE_T_MAX - 2 - n - 5) return PyErr_NoMemory();
                extra += more;
            }
        }
    }
    if (n > PY_SSIZE_T_MAX - 2 - extra) return PyErr_NoMemory();
    /* the escapes are ASCII: the result's widest character is the text's (and a str is canonical) */
    PyObject *out = PyUnicode_New(n + 2 + extra, PyUnicode_MAX_CHAR_VALUE(arg));
    if (out == NULL) return NULL;
    const int out_kind = PyUnicode_KIND(out);
    void *out_data = PyUnicode_DATA(out);
    PyUnicode_WRITE(out_kind, out_data, 0, '"');
    PyUnicode_WRITE(out_kind, out_data, n + 1 + extra, '"');
    if (extra == 0) {
        memcpy((char *)out_data + out_kind, data, (size_t)n * (size_t)kind);
        return out;
    }
    static const char hex[] = "0123456789abcdef";
    Py_ssize_t at = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        const Py_UCS4 c = PyUnicode_READ(kind, data, i);
        const int more = escape_extra(c);
        if (!more) {
            PyUnicode_WRITE(out_kind, out_data, at++, c);
            continue;
        }
        PyUnicode_WRITE(out_kind, out_data, at++, '\\');
        switch (c) {
            case '"': PyUnicode_WRITE(out_kind, out_data, at++, '"'); break;
            case '\\': PyUnicode_WRITE(out_kind, out_data, at++, '\\'); break;
            case '\b': PyUnicode_WRITE(out_kind, out_data, at++, 'b'); break;
            case '\f': PyUnicode_WRITE(out_kind, out_data, at++, 'f'); break;
            case '\n': PyUnicode_WRITE(out_kind, out_data, at++, 'n'); break;
            case '\r': PyUnicode_WRITE(out_kind, out_data, at++, 'r'); break;
            case '\t': PyUnicode_WRITE(out_kind, out_data, at++, 't'); break;
            default:
                PyUnicode_WRITE(out_kind, out_data, at++, 'u');
                PyUnicode_WRITE(out_kind, out_data, at++, '0');
                PyUnicode_WRITE(out_kind, out_data, at++, '0');
                PyUnicode_WRITE(out_kind, out_data, at++, hex[(c >> 4) & 0xf]);
                PyUnicode_WRITE(out_kind, out_data, at++, hex[c & 0xf]);
        }
    }
    return out;
}

static PyMethodDef module_methods[] = {
    {"pack", pack, METH_VARARGS,
     "pack(ids, tfs, offsets, lengths) -> (block_offsets, blocks, data_offsets, data) (see the module source)."},
    {"unpack", unpack, METH_VARARGS,
     "unpack(data, offsets, block_offsets, blocks, data_offsets, n_docs, lengths) -> (ids, tfs, agrees) (see the module source)."},
    {"lower_bound", lower_bound, METH_VARARGS,
     "lower_bound(blob, offsets, needle) -> the first term not below needle (see the module source)."},
    {"json_string", json_string, METH_O,
     "json_string(text) -> json.encoder.encode_basestring(text), with nothing to escape copied whole."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "weftsearch.native._inversion", "A segment's postings inverted and packed in C.", -1,
    module_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__inversion(void) {
    for (int c = 0; c < 256; c++) escape_extra1[c] = (unsigned char)escape_extra((Py_UCS4)c);
    if (PyType_Ready(&InverterType) < 0) return NULL;
    PyObject *collections = PyImport_ImportModule("collections");
    if (collections == NULL) return NULL;
    counter_type = PyObject_GetAttrString(collections, "Counter");
    Py_DECREF(collections);
    if (counter_type == NULL) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    UnsupportedInputError = PyErr_NewException("weftsearch.native._inversion.UnsupportedInputError", PyExc_ValueError, NULL);
    DecodeError = PyErr_NewException("weftsearch.native._inversion.DecodeError", PyExc_ValueError, NULL);
    if (UnsupportedInputError == NULL || PyModule_AddObjectRef(m, "UnsupportedInputError", UnsupportedInputError) < 0 ||
        DecodeError == NULL || PyModule_AddObjectRef(m, "DecodeError", DecodeError) < 0 ||
        PyModule_AddObjectRef(m, "Inverter", (PyObject *)&InverterType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
