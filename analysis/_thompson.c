/* The Thompson construction of tokendfa.analysis.regex_compiler, compiled.
 *
 * build(tree, request) walks a regex tree (tokendfa.analysis.regex_tree's
 * nodes, read through their attributes) and returns the NFA fragment that
 * ThompsonNFA.build would make, state for state and edge for edge: the
 * Python class is the reference, the tests compare the two on the case
 * table and on real schemas, and TOKENDFA_NATIVE=0 selects it.
 *
 * The construction is append-only: a fragment adds moves to its source and
 * to the states it makes, never to an older state. So the moves are kept as
 * three logs (epsilon moves, byte-range edges, calls), each move with its
 * source state, and a state's moves are the log's entries from it, in log
 * order, which is the order ThompsonNFA appends them to its lists. A
 * repeat's copies replay the segment of the logs its first copy wrote,
 * shifted (every entry of the segment is a move of the block's states). At
 * the end the logs are sorted by source (stably) into the rows Python asks
 * for.
 *
 * The interface with Python is named: configure(spec) once, with a
 * NamedTuple of the node classes and the Python helpers it calls
 * (regex_compiler.NativeSpec), and build(tree, request) with a NamedTuple
 * of the build's options (regex_compiler.NativeRequest); the result is the
 * spec's fragment class (regex_compiler.NFAFragment, a NamedTuple), made
 * as tuple.__new__ makes it, its fields in their order.
 *
 * NodeBase is the base class of regex_tree.Node: the structural hash a
 * node stores when it is made, returned by tp_hash without a Python call.
 *
 * Trees, templates and literal automata are checked as they are read
 * (types, byte values, state numbers within their fragment, counts that fit):
 * a malformed input raises, it never makes this code read or write out of
 * bounds. Plain C API, no numpy headers (literal automata are read through
 * the buffer protocol).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>

/* Local states are int32; past this many the build stops (the default bound
 * on NFA states is 2,000,000). */
#define HARD_CAP ((int64_t)1 << 30)
/* Nesting deeper than Python's recursion limit, or this, raises
 * RecursionError, as ThompsonNFA.build does (the caller turns it into a
 * RegexError); the bound keeps the C stack small (a few hundred bytes a level). */
#define MAX_DEPTH 4000
/* An ASCII run longer than this is reserved (and the deadline checked) a
 * chunk at a time, as ThompsonNFA._ascii_chain does. */
#define CHAIN_CHUNK (1 << 15)
/* limits.check() once every this many reservations: a call is ~0.15 us, and
 * a 6,000-state fragment makes ~4,000 reservations. */
#define CHECK_EVERY 64
/* The rows are made this many at a time, the deadline checked between. */
#define RESULT_CHUNK (1 << 14)

/* --- configuration ------------------------------------------------------- */

enum { K_CHARS, K_TEXT, K_CONCAT, K_ALT, K_REPEAT, K_CALL, K_LITERAL_SET, K_EXCLUDING, K_COUNT };
static const char *const kind_fields[K_COUNT] = {
    "chars", "text", "concat", "alt", "repeat", "call", "literal_set", "excluding"};
static PyObject *kinds[K_COUNT];
static PyObject *set_template_fn, *literal_automaton_fn, *fragment_type;

static PyObject *s_text, *s_ranges, *s_items, *s_body, *s_lo, *s_hi, *s_key;
static PyObject *s_names, *s_single, *s_multi, *s_rest;
static PyObject *s_starts, *s_target, *s_finals;
static PyObject *s_base, *s_max_states, *s_unchecked, *s_min_branches, *s_calls, *s_defined,
    *s_template, *s_flat, *s_check, *s_reserve, *s_start, *s_end, *s_eps, *s_edges;

/* --- the builder ------------------------------------------------------------ */

typedef struct { int32_t from, to; } EpsMove;
typedef struct { int32_t from, to; uint8_t lo, hi; } EdgeMove;
typedef struct { int32_t from, ret; Py_ssize_t key; } CallMove;

/* configure()'s classes and helpers as one build holds them: strong
 * references taken when it starts, so a helper that calls configure() again
 * (the module globals then change) cannot free what the build still calls,
 * and the build tells nodes apart by one spec throughout. */
typedef struct {
    PyObject *kinds[K_COUNT];
    PyObject *set_template_fn, *literal_automaton_fn, *fragment_type;
} Spec;

typedef struct {
    Spec spec;
    int64_t n;            /* local states made */
    int64_t base;         /* global number of local state 0 */
    int64_t max_states, unchecked, next_memory;
    Py_ssize_t min_branches;
    int calls_mode, flat;
    PyObject *defined, *template_fn, *check, *reserve_fn; /* py_build holds them (its held[]) */
    PyObject *keys;       /* list: the calls' keys */
    EpsMove *eps; Py_ssize_t n_eps, cap_eps;
    EdgeMove *edges; Py_ssize_t n_edges, cap_edges;
    CallMove *calls; Py_ssize_t n_calls, cap_calls;
    unsigned reserves;
    int depth, max_depth;
} Builder;

/* The move logs and the result's scratch arrays of the last build, kept for
 * the next one (up to KEPT_MAX bytes each) instead of freed. In a fresh fork
 * of a warm process a build's new heap blocks land in the parent's free
 * chunks, a page copied for each (~4 heap pages of the ~8 a median MaskBench
 * schema's first fragment copied), while kept ones were written by the
 * child's earlier builds already. A build takes them (one nested in it,
 * through a callback, finds none and allocates its own) and gives them back
 * at its end unless others were given back meanwhile; the GIL orders it all. */
#define KEPT_MAX ((size_t)1 << 20)
static struct {
    EpsMove *eps; Py_ssize_t cap_eps;
    EdgeMove *edges; Py_ssize_t cap_edges;
    CallMove *calls; Py_ssize_t cap_calls;
    char *scratch; size_t cap_scratch;
} kept;

/* ``data`` (``cap`` items of ``item`` bytes) kept in ``*slot`` when that is
 * empty and it is small enough, else freed. */
static void give_back(void **slot, Py_ssize_t *slot_cap, void *data, Py_ssize_t cap, size_t item) {
    if (*slot == NULL && data != NULL && (size_t)cap <= KEPT_MAX / item) {
        *slot = data;
        *slot_cap = cap;
    } else {
        PyMem_Free(data);
    }
}

static int grow(void **data, Py_ssize_t *cap, Py_ssize_t need, size_t item) {
    if (need <= *cap) {
        return 0;
    }
    Py_ssize_t cap2 = *cap ? *cap : 256;
    while (cap2 < need) {
        if (cap2 > PY_SSIZE_T_MAX / 2 / (Py_ssize_t)item) {
            PyErr_NoMemory();
            return -1;
        }
        cap2 *= 2;
    }
    void *grown = PyMem_Realloc(*data, (size_t)cap2 * item);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *data = grown;
    *cap = cap2;
    return 0;
}

static inline int add_eps(Builder *b, int64_t from, int64_t to) {
    if (b->n_eps == b->cap_eps && grow((void **)&b->eps, &b->cap_eps, b->n_eps + 1, sizeof(EpsMove)) < 0) {
        return -1;
    }
    b->eps[b->n_eps++] = (EpsMove){(int32_t)from, (int32_t)to};
    return 0;
}

static inline int add_edge(Builder *b, int64_t from, long lo, long hi, int64_t to) {
    if (b->n_edges == b->cap_edges &&
        grow((void **)&b->edges, &b->cap_edges, b->n_edges + 1, sizeof(EdgeMove)) < 0) {
        return -1;
    }
    b->edges[b->n_edges++] = (EdgeMove){(int32_t)from, (int32_t)to, (uint8_t)lo, (uint8_t)hi};
    return 0;
}

static int call_check(Builder *b) {
    PyObject *r = PyObject_CallNoArgs(b->check);
    if (r == NULL) {
        return -1;
    }
    Py_DECREF(r);
    return 0;
}

/* What ThompsonNFA._reserve does before a fragment of ``count`` states: the
 * deadline (every CHECK_EVERY calls here), the state bound and the memory
 * budget (request.reserve(reached), which raises, past ``unchecked``). */
static int reserve(Builder *b, int64_t count) {
    if (count < 0 || count > HARD_CAP) {
        count = HARD_CAP;
    }
    int64_t reached = b->base + b->n + count;
    if ((++b->reserves % CHECK_EVERY) == 0 && call_check(b) < 0) {
        return -1;
    }
    if (reached > b->unchecked && (reached > b->max_states || reached >= b->next_memory)) {
        PyObject *r = PyObject_CallFunction(b->reserve_fn, "L", (long long)reached);
        if (r == NULL) {
            return -1;
        }
        Py_DECREF(r);
        b->next_memory = reached + reached / 8 + 4096;
    }
    if (b->n + count >= HARD_CAP || reached > b->max_states) {
        PyErr_Format(PyExc_MemoryError, "an NFA of more than %lld states", (long long)reached);
        return -1;
    }
    return 0;
}

static inline int64_t new_state(Builder *b) {
    if (b->n + 1 >= HARD_CAP) {
        PyErr_SetString(PyExc_MemoryError, "an NFA of more than 2**30 states");
        return -1;
    }
    return b->n++;
}

static int64_t build(Builder *b, PyObject *node, int64_t source);

/* --- reading Python values, checked ---------------------------------------- */

static int read_long(PyObject *value, long lo, long hi, long *out, const char *what) {
    if (!PyLong_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s: not an int", what);
        return -1;
    }
    int overflow = 0;
    long v = PyLong_AsLongAndOverflow(value, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow || v < lo || v > hi) {
        PyErr_Format(PyExc_ValueError, "%s out of range", what);
        return -1;
    }
    *out = v;
    return 0;
}

/* a (lo, hi, target) triple: bytes, and 0 <= target < limit */
static int read_triple(PyObject *triple, long limit, long *lo, long *hi, long *target) {
    if (!PyTuple_Check(triple) || PyTuple_GET_SIZE(triple) != 3) {
        PyErr_SetString(PyExc_TypeError, "an edge is a (lo, hi, target) tuple");
        return -1;
    }
    if (read_long(PyTuple_GET_ITEM(triple, 0), 0, 255, lo, "an edge's low byte") < 0 ||
        read_long(PyTuple_GET_ITEM(triple, 1), *lo, 255, hi, "an edge's high byte") < 0 ||
        read_long(PyTuple_GET_ITEM(triple, 2), 0, limit - 1, target, "an edge's target") < 0) {
        return -1;
    }
    return 0;
}

/* --- fragments ------------------------------------------------------------- */

/* ThompsonNFA._ascii_chain: one state a byte after ``source``. */
static int64_t ascii_chain(Builder *b, const uint8_t *codes, Py_ssize_t count, int64_t source) {
    while (count > CHAIN_CHUNK) {
        source = ascii_chain(b, codes, CHAIN_CHUNK, source);
        if (source < 0) {
            return -1;
        }
        codes += CHAIN_CHUNK;
        count -= CHAIN_CHUNK;
    }
    if (count <= 0) {
        PyErr_SetString(PyExc_ValueError, "an empty literal in a regex tree");
        return -1;
    }
    if (count == CHAIN_CHUNK && call_check(b) < 0) {
        return -1;
    }
    if (reserve(b, count) < 0) {
        return -1;
    }
    int64_t first = b->n;
    if (add_edge(b, source, codes[0], codes[0], first) < 0) {
        return -1;
    }
    b->n += count;
    for (Py_ssize_t i = 1; i < count; i++) {
        if (add_edge(b, first + i - 1, codes[i], codes[i], first + i) < 0) {
            return -1;
        }
    }
    return first + count - 1;
}

/* One row of a set template (its edges ``(lo, hi, node)``) added from state
 * ``from``; node i >= 1 is state base + i. */
static int stamp_set_row(Builder *b, PyObject *row, long nodes, int64_t from, int64_t base) {
    if (!PyTuple_Check(row)) {
        PyErr_SetString(PyExc_TypeError, "a set template's row is a tuple");
        return -1;
    }
    long lo, hi, t;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(row); k++) {
        if (read_triple(PyTuple_GET_ITEM(row, k), nodes, &lo, &hi, &t) < 0) {
            return -1;
        }
        if (t < 1) {
            PyErr_SetString(PyExc_ValueError, "a set template's edge goes back to its source");
            return -1;
        }
        if (add_edge(b, from, lo, hi, base + t) < 0) {
            return -1;
        }
    }
    return 0;
}

/* ThompsonNFA._character_set: a set's template (regex_compiler._set_template,
 * ``(num_nodes, edges)``) stamped after ``source``. */
static int64_t stamp_set(Builder *b, PyObject *template, int64_t source) {
    if (!PyTuple_Check(template) || PyTuple_GET_SIZE(template) != 2) {
        PyErr_SetString(PyExc_TypeError, "a set template is (num_nodes, edges)");
        return -1;
    }
    long nodes;
    if (read_long(PyTuple_GET_ITEM(template, 0), 2, 1L << 24, &nodes, "a set template's size") < 0) {
        return -1;
    }
    PyObject *rows = PyTuple_GET_ITEM(template, 1);
    if (!PyTuple_Check(rows) || PyTuple_GET_SIZE(rows) != nodes) {
        PyErr_SetString(PyExc_TypeError, "a set template has one row of edges a node");
        return -1;
    }
    if (reserve(b, nodes - 1) < 0) {
        return -1;
    }
    int64_t base = b->n - 1; /* local node i >= 1 is state base + i */
    b->n += nodes - 1;
    /* row 0 leaves the set's source, rows 2.. its inner nodes; row 1 is the
     * end, which has no edges. The inner rows first: the edges' order is
     * ThompsonNFA's. */
    for (long node = 2; node < nodes; node++) {
        if (stamp_set_row(b, PyTuple_GET_ITEM(rows, node), nodes, base + node, base) < 0) {
            return -1;
        }
    }
    PyObject *end = PyTuple_GET_ITEM(rows, 1);
    if (!PyTuple_Check(end) || PyTuple_GET_SIZE(end) != 0) {
        PyErr_SetString(PyExc_ValueError, "a set template's end has edges");
        return -1;
    }
    if (stamp_set_row(b, PyTuple_GET_ITEM(rows, 0), nodes, source, base) < 0) {
        return -1;
    }
    return base + 1;
}

/* A set of ASCII characters only (a key trie's "any other letter", digits,
 * hex digits: most of a schema's sets) as _set_template's template for it
 * would stamp it, one edge a range to one new state, without the call (the
 * cache's hash of the ranges, and in a fresh process the template made in
 * Python). Sets ``*other`` when ``ranges`` is not such a set (then nothing
 * is done: the template path decides, and reports what is wrong). */
static int64_t ascii_set(Builder *b, PyObject *ranges, int64_t source, int *other) {
    *other = 1;
    if (!PyTuple_Check(ranges)) {
        return -1;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(ranges);
    if (count < 1 || count > 64) {
        return -1;
    }
    long lo[64], hi[64];
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *pair = PyTuple_GET_ITEM(ranges, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 ||
            !PyLong_CheckExact(PyTuple_GET_ITEM(pair, 0)) || !PyLong_CheckExact(PyTuple_GET_ITEM(pair, 1))) {
            return -1;
        }
        int overflow = 0;
        lo[i] = PyLong_AsLongAndOverflow(PyTuple_GET_ITEM(pair, 0), &overflow);
        if (overflow || lo[i] < 0 || lo[i] > 127) {
            return -1;
        }
        hi[i] = PyLong_AsLongAndOverflow(PyTuple_GET_ITEM(pair, 1), &overflow);
        if (overflow || hi[i] < lo[i] || hi[i] > 127) {
            return -1;
        }
    }
    *other = 0;
    if (reserve(b, 1) < 0) {
        return -1;
    }
    int64_t target = b->n++;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (add_edge(b, source, lo[i], hi[i], target) < 0) {
            return -1;
        }
    }
    return target;
}

static int64_t character_set(Builder *b, PyObject *ranges, int64_t source) {
    int other;
    int64_t end = ascii_set(b, ranges, source, &other);
    if (!other) {
        return end;
    }
    PyObject *template = PyObject_CallOneArg(b->spec.set_template_fn, ranges);
    if (template == NULL) {
        return -1;
    }
    end = stamp_set(b, template, source);
    Py_DECREF(template);
    return end;
}

/* ThompsonNFA._text: runs of ASCII as chains, other characters as sets. */
static int64_t text(Builder *b, PyObject *value, int64_t source) {
    if (!PyUnicode_Check(value) || PyUnicode_READY(value) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "a Text node's text is a str");
        }
        return -1;
    }
    Py_ssize_t length = PyUnicode_GET_LENGTH(value);
    if (PyUnicode_IS_ASCII(value)) {
        return ascii_chain(b, (const uint8_t *)PyUnicode_DATA(value), length, source);
    }
    int kind = PyUnicode_KIND(value);
    const void *data = PyUnicode_DATA(value);
    uint8_t *run = PyMem_Malloc(length > 0 ? (size_t)length : 1);
    if (run == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t in_run = 0;
    for (Py_ssize_t i = 0; i < length && source >= 0; i++) {
        Py_UCS4 code = PyUnicode_READ(kind, data, i);
        if (code < 0x80) {
            run[in_run++] = (uint8_t)code;
            continue;
        }
        if (in_run) {
            source = ascii_chain(b, run, in_run, source);
            in_run = 0;
            if (source < 0) {
                break;
            }
        }
        PyObject *ranges = Py_BuildValue("((kk))", (unsigned long)code, (unsigned long)code);
        if (ranges == NULL) {
            source = -1;
            break;
        }
        source = character_set(b, ranges, source);
        Py_DECREF(ranges);
    }
    if (source >= 0 && in_run) {
        source = ascii_chain(b, run, in_run, source);
    }
    PyMem_Free(run);
    return source;
}

/* A buffer of ``count`` items of ``itemsize`` bytes, contiguous. */
static int get_array(PyObject *owner, PyObject *name, Py_buffer *view, Py_ssize_t itemsize, PyObject **held) {
    *held = PyObject_GetAttr(owner, name);
    if (*held == NULL) {
        return -1;
    }
    if (PyObject_GetBuffer(*held, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        Py_CLEAR(*held);
        return -1;
    }
    if (view->itemsize != itemsize || view->ndim != 1) {
        PyBuffer_Release(view);
        Py_CLEAR(*held);
        PyErr_SetString(PyExc_TypeError, "a literal automaton's arrays are one-dimensional, int64 and bool");
        return -1;
    }
    return 0;
}

/* stamp_literal_dfa (tokendfa.analysis.literal_sets) after ``source``: a
 * LiteralDFA whose arrays are contiguous int64 (bool for finals). */
static int64_t stamp_literal(Builder *b, PyObject *dfa, int64_t source) {
    PyObject *names[5] = {s_starts, s_lo, s_hi, s_target, s_finals};
    Py_ssize_t sizes[5] = {8, 8, 8, 8, 1};
    Py_buffer views[5];
    PyObject *held[5] = {NULL, NULL, NULL, NULL, NULL};
    int got = 0;
    int64_t end = -1;
    for (; got < 5; got++) {
        if (get_array(dfa, names[got], &views[got], sizes[got], &held[got]) < 0) {
            goto done;
        }
    }
    const int64_t *starts = views[0].buf, *lo = views[1].buf, *hi = views[2].buf, *target = views[3].buf;
    const uint8_t *finals = views[4].buf;
    Py_ssize_t n = views[4].shape[0], m = views[1].shape[0];
    if (views[0].shape[0] != n + 1 || views[2].shape[0] != m || views[3].shape[0] != m || starts[0] != 0 ||
        starts[n] > m) {
        PyErr_SetString(PyExc_ValueError, "a literal automaton's arrays disagree");
        goto done;
    }
    for (Py_ssize_t q = 0; q < n; q++) {
        if (starts[q + 1] < starts[q]) {
            PyErr_SetString(PyExc_ValueError, "a literal automaton's edge index decreases");
            goto done;
        }
    }
    for (Py_ssize_t k = 0; k < starts[n]; k++) {
        if (lo[k] < 0 || hi[k] > 255 || lo[k] > hi[k] || target[k] < 1 || target[k] >= n) {
            PyErr_SetString(PyExc_ValueError, "a literal automaton's edge is out of range");
            goto done;
        }
    }
    if (reserve(b, n) < 0) {
        goto done;
    }
    int64_t base = b->n - 1; /* DFA state q > 0 is base + q */
    if (n == 0) {
        end = new_state(b);
        goto done;
    }
    for (int64_t k = starts[0]; k < starts[1]; k++) {
        if (add_edge(b, source, (long)lo[k], (long)hi[k], base + target[k]) < 0) {
            goto done;
        }
    }
    if (n == 1) {
        end = source; /* the set of the empty string */
        goto done;
    }
    b->n += n - 1;
    for (Py_ssize_t q = 1; q < n - 1; q++) { /* the last state's edges are dropped */
        for (int64_t k = starts[q]; k < starts[q + 1]; k++) {
            if (add_edge(b, base + q, (long)lo[k], (long)hi[k], base + target[k]) < 0) {
                goto done;
            }
        }
    }
    int64_t last = base + n - 1;
    for (Py_ssize_t q = 0; q < n - 1; q++) {
        if (finals[q] && add_eps(b, q ? base + q : source, last) < 0) {
            goto done;
        }
    }
    end = last;
done:
    for (int i = 0; i < got; i++) {
        PyBuffer_Release(&views[i]);
        Py_DECREF(held[i]);
    }
    return end;
}

/* ThompsonNFA.place_definition: a copy of a definition's minimal DFA,
 * ``(edges, finals)`` over local states (0 initial), after ``source``. */
static int64_t place_definition(Builder *b, PyObject *template, int64_t source) {
    if (!PyTuple_Check(template) || PyTuple_GET_SIZE(template) != 2 ||
        !PyTuple_Check(PyTuple_GET_ITEM(template, 0)) || !PyTuple_Check(PyTuple_GET_ITEM(template, 1))) {
        PyErr_SetString(PyExc_TypeError, "a definition's template is (edges, finals), two tuples");
        return -1;
    }
    PyObject *rows = PyTuple_GET_ITEM(template, 0), *finals = PyTuple_GET_ITEM(template, 1);
    Py_ssize_t size = PyTuple_GET_SIZE(rows);
    if (PyTuple_GET_SIZE(finals) == 0) {
        return new_state(b);
    }
    if (size < 1 || size >= HARD_CAP) {
        PyErr_SetString(PyExc_ValueError, "a definition's template has finals but no states");
        return -1;
    }
    if (reserve(b, size + 1) < 0) {
        return -1;
    }
    int64_t base = b->n;
    b->n += size;
    long lo, hi, t, s;
    for (Py_ssize_t q = 0; q < size; q++) {
        PyObject *row = PyTuple_GET_ITEM(rows, q);
        if (!PyTuple_Check(row)) {
            PyErr_SetString(PyExc_TypeError, "a definition template's row is a tuple");
            return -1;
        }
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(row); k++) {
            if (read_triple(PyTuple_GET_ITEM(row, k), (long)size, &lo, &hi, &t) < 0 ||
                add_edge(b, base + q, lo, hi, base + t) < 0) {
                return -1;
            }
        }
    }
    int64_t end = new_state(b);
    if (end < 0) {
        return -1;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(finals); k++) {
        if (read_long(PyTuple_GET_ITEM(finals, k), 0, (long)size - 1, &s, "a definition's final state") < 0 ||
            add_eps(b, base + s, end) < 0) {
            return -1;
        }
    }
    if (add_eps(b, source, base) < 0) {
        return -1;
    }
    return end;
}

/* ThompsonNFA.copy_block: the block of states first .. first + size - 1,
 * whose moves are the log entries from the marks to the ends given, copied
 * after the last state. */
static int copy_block(Builder *b, int64_t first, int64_t size, Py_ssize_t eps_from, Py_ssize_t eps_to,
                      Py_ssize_t edges_from, Py_ssize_t edges_to, Py_ssize_t calls_from, Py_ssize_t calls_to) {
    if (call_check(b) < 0) {
        return -1;
    }
    int32_t offset = (int32_t)(b->n - first);
    if (grow((void **)&b->eps, &b->cap_eps, b->n_eps + (eps_to - eps_from), sizeof(EpsMove)) < 0 ||
        grow((void **)&b->edges, &b->cap_edges, b->n_edges + (edges_to - edges_from), sizeof(EdgeMove)) < 0 ||
        grow((void **)&b->calls, &b->cap_calls, b->n_calls + (calls_to - calls_from), sizeof(CallMove)) < 0) {
        return -1;
    }
    for (Py_ssize_t i = eps_from; i < eps_to; i++) {
        EpsMove e = b->eps[i];
        b->eps[b->n_eps++] = (EpsMove){e.from + offset, e.to + offset};
    }
    for (Py_ssize_t i = edges_from; i < edges_to; i++) {
        EdgeMove e = b->edges[i];
        b->edges[b->n_edges++] = (EdgeMove){e.from + offset, e.to + offset, e.lo, e.hi};
    }
    for (Py_ssize_t i = calls_from; i < calls_to; i++) {
        CallMove c = b->calls[i];
        b->calls[b->n_calls++] = (CallMove){c.from + offset, c.ret + offset, c.key};
    }
    b->n += size;
    return 0;
}

static int64_t saturated(PyObject *value, int *is_none, const char *what) {
    if (value == Py_None) {
        *is_none = 1;
        return 0;
    }
    *is_none = 0;
    if (!PyLong_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s: not an int", what);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow < 0 || (!overflow && v < 0)) {
        PyErr_Format(PyExc_ValueError, "%s is negative", what);
        return -1;
    }
    if (overflow > 0 || v > HARD_CAP) {
        return HARD_CAP; /* more copies than any NFA may hold: reserve() refuses them */
    }
    return (int64_t)v;
}

/* ThompsonNFA._repeat: ``body{low,high}`` expanded into copies. */
static int64_t repeat(Builder *b, PyObject *node, int64_t source) {
    PyObject *body = PyObject_GetAttr(node, s_body);
    PyObject *lo_obj = body ? PyObject_GetAttr(node, s_lo) : NULL;
    PyObject *hi_obj = lo_obj ? PyObject_GetAttr(node, s_hi) : NULL;
    int64_t end = -1;
    int no_low, unbounded;
    if (hi_obj == NULL) {
        goto done;
    }
    int64_t low = saturated(lo_obj, &no_low, "a repeat's low count");
    if (low < 0 || (no_low && (PyErr_SetString(PyExc_TypeError, "a repeat's low count is None"), 1))) {
        goto done;
    }
    int64_t high = saturated(hi_obj, &unbounded, "a repeat's high count");
    if (high < 0) {
        goto done;
    }
    if (!unbounded && high == 0) {
        end = source;
        goto done;
    }
    int64_t entry = new_state(b);
    if (entry < 0) {
        goto done;
    }
    Py_ssize_t eps_mark = b->n_eps, edges_mark = b->n_edges, calls_mark = b->n_calls;
    int64_t exit_ = build(b, body, entry);
    if (exit_ < 0) {
        goto done;
    }
    int64_t size = b->n - entry;
    Py_ssize_t eps_end = b->n_eps, edges_end = b->n_edges, calls_end = b->n_calls;
    int64_t copies = unbounded ? low : high;
    if (copies < 1) {
        copies = 1;
    }
    /* size >= 1 and copies <= HARD_CAP: the product fits, or reserve() refuses it */
    if (reserve(b, copies - 1 > HARD_CAP / size ? HARD_CAP : size * (copies - 1)) < 0) {
        goto done;
    }
    for (int64_t k = 1; k < copies; k++) {
        if (copy_block(b, entry, size, eps_mark, eps_end, edges_mark, edges_end, calls_mark, calls_end) < 0) {
            goto done;
        }
    }
    /* block k: entry + k * size .. exit_ + k * size */
    int64_t current = source;
    if (unbounded) {
        for (int64_t k = 0; k < copies - 1; k++) {
            if (add_eps(b, current, entry + k * size) < 0) {
                goto done;
            }
            current = exit_ + k * size;
        }
        int64_t loop_entry = entry + (copies - 1) * size, loop_exit = exit_ + (copies - 1) * size;
        int64_t last = new_state(b);
        if (last < 0 || add_eps(b, current, loop_entry) < 0 || add_eps(b, loop_exit, loop_entry) < 0 ||
            add_eps(b, loop_exit, last) < 0 || (low == 0 && add_eps(b, loop_entry, last) < 0)) {
            goto done;
        }
        end = last;
        goto done;
    }
    int64_t last = -1;
    if (low < high && (last = new_state(b)) < 0) {
        goto done;
    }
    for (int64_t k = 0; k < copies; k++) {
        if (k >= low && add_eps(b, current, last) < 0) {
            goto done;
        }
        if (add_eps(b, current, entry + k * size) < 0) {
            goto done;
        }
        current = exit_ + k * size;
    }
    if (last < 0) {
        end = current;
        goto done;
    }
    if (add_eps(b, current, last) < 0) {
        goto done;
    }
    end = last;
done:
    Py_XDECREF(body);
    Py_XDECREF(lo_obj);
    Py_XDECREF(hi_obj);
    return end;
}

/* ThompsonNFA.build for a call: a call (lazy construction) or a copy of the
 * definition's DFA (eager), a fresh dead end for a key nobody defined. */
static int64_t call(Builder *b, PyObject *node, int64_t source) {
    PyObject *key = PyObject_GetAttr(node, s_key);
    if (key == NULL) {
        return -1;
    }
    int64_t end = -1;
    int defined = 0;
    if (b->defined != Py_None && (defined = PySequence_Contains(b->defined, key)) < 0) {
        goto done;
    }
    if (!defined) {
        end = new_state(b);
    } else if (b->calls_mode) {
        int64_t ret = new_state(b);
        if (ret < 0 || grow((void **)&b->calls, &b->cap_calls, b->n_calls + 1, sizeof(CallMove)) < 0 ||
            PyList_Append(b->keys, key) < 0) {
            goto done;
        }
        b->calls[b->n_calls++] = (CallMove){(int32_t)source, (int32_t)ret, PyList_GET_SIZE(b->keys) - 1};
        end = ret;
    } else {
        PyObject *template = PyObject_CallOneArg(b->template_fn, key);
        if (template != NULL) {
            end = place_definition(b, template, source);
            Py_DECREF(template);
        }
    }
done:
    Py_DECREF(key);
    return end;
}

static int64_t literal(Builder *b, PyObject *node, int64_t source, int *none) {
    PyObject *dfa = PyObject_CallOneArg(b->spec.literal_automaton_fn, node);
    if (dfa == NULL) {
        return -1;
    }
    *none = dfa == Py_None;
    int64_t end = *none ? 0 : stamp_literal(b, dfa, source);
    Py_DECREF(dfa);
    return end;
}

/* ThompsonNFA._excluding: an Excluding node straight from the trie of its
 * names (ASCII, every character in ``single``, checked). The trie's nodes
 * are numbered as the names make them, their children kept in that order
 * (first/next/last lists), as the Python's lists of (byte, child) are. */
typedef struct {
    int32_t *first, *next, *last;
    uint8_t *byte, *named;
    Py_ssize_t count, cap;
} Trie;

static int trie_grow(Trie *trie) {
    if (trie->count < trie->cap) {
        return 0;
    }
    Py_ssize_t cap = trie->cap ? trie->cap * 2 : 64;
    if (cap >= HARD_CAP) {
        PyErr_SetString(PyExc_MemoryError, "a trie of more than 2**30 nodes");
        return -1;
    }
    int32_t *first = PyMem_Realloc(trie->first, (size_t)cap * sizeof(int32_t));
    if (first) trie->first = first;
    int32_t *next = first ? PyMem_Realloc(trie->next, (size_t)cap * sizeof(int32_t)) : NULL;
    if (next) trie->next = next;
    int32_t *last = next ? PyMem_Realloc(trie->last, (size_t)cap * sizeof(int32_t)) : NULL;
    if (last) trie->last = last;
    uint8_t *byte = last ? PyMem_Realloc(trie->byte, (size_t)cap) : NULL;
    if (byte) trie->byte = byte;
    uint8_t *named = byte ? PyMem_Realloc(trie->named, (size_t)cap) : NULL;
    if (named == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    trie->named = named;
    trie->cap = cap;
    return 0;
}

static int32_t trie_add(Trie *trie, uint8_t byte) {
    if (trie_grow(trie) < 0) {
        return -1;
    }
    int32_t t = (int32_t)trie->count++;
    trie->first[t] = trie->next[t] = trie->last[t] = -1;
    trie->byte[t] = byte;
    trie->named[t] = 0;
    return t;
}

/* excluding_fragment's tables of single, on the heap: the function recurses
 * (multi and rest are built inside it), and in its frame these made it 2.5 KB
 * a level, which overflowed an 8 MB stack at ~3,000 nested Excluding nodes. */
typedef struct {
    long range_lo[128], range_hi[128];
    uint8_t allowed[128], taken[128];
} SingleTables;

static int64_t excluding_fragment(Builder *b, PyObject *names, PyObject *single, PyObject *multi, PyObject *rest,
                                  int64_t source) {
    if (!PyTuple_Check(names) || !PyTuple_Check(single)) {
        PyErr_SetString(PyExc_TypeError, "Excluding: names and single are tuples");
        return -1;
    }
    /* single: sorted disjoint ASCII ranges */
    Py_ssize_t n_ranges = PyTuple_GET_SIZE(single);
    if (n_ranges > 128) {
        PyErr_SetString(PyExc_ValueError, "Excluding: single holds more than 128 ranges");
        return -1;
    }
    SingleTables *tables = PyMem_Calloc(1, sizeof(SingleTables));
    if (tables == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    long *range_lo = tables->range_lo, *range_hi = tables->range_hi;
    uint8_t *allowed = tables->allowed, *taken = tables->taken;
    Trie trie = {0};
    int64_t end = -1;
    for (Py_ssize_t i = 0; i < n_ranges; i++) {
        PyObject *pair = PyTuple_GET_ITEM(single, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "Excluding: a range of single is a (lo, hi) pair");
            goto done;
        }
        if (read_long(PyTuple_GET_ITEM(pair, 0), i ? range_hi[i - 1] + 1 : 0, 127, &range_lo[i],
                      "Excluding: a range's low end") < 0 ||
            read_long(PyTuple_GET_ITEM(pair, 1), range_lo[i], 127, &range_hi[i],
                      "Excluding: a range's high end") < 0) {
            goto done;
        }
        for (long c = range_lo[i]; c <= range_hi[i]; c++) {
            allowed[c] = 1;
        }
    }
    if (trie_add(&trie, 0) < 0) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        if (!PyUnicode_Check(name) || PyUnicode_READY(name) < 0 || !PyUnicode_IS_ASCII(name)) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "Excluding: a name is an ASCII str");
            }
            goto done;
        }
        const uint8_t *chars_ = PyUnicode_1BYTE_DATA(name);
        Py_ssize_t length = PyUnicode_GET_LENGTH(name);
        int32_t at = 0;
        for (Py_ssize_t k = 0; k < length; k++) {
            uint8_t c = chars_[k];
            if (!allowed[c]) {
                PyErr_SetString(PyExc_ValueError, "Excluding: a name's character is not in single");
                goto done;
            }
            int32_t child = trie.first[at];
            while (child >= 0 && trie.byte[child] != c) {
                child = trie.next[child];
            }
            if (child < 0) {
                child = trie_add(&trie, c);
                if (child < 0) {
                    goto done;
                }
                if (trie.last[at] < 0) {
                    trie.first[at] = child;
                } else {
                    trie.next[trie.last[at]] = child;
                }
                trie.last[at] = child;
            }
            at = child;
        }
        trie.named[at] = 1;
    }
    if (reserve(b, (int64_t)trie.count + 2) < 0) {
        goto done;
    }
    int64_t base = b->n - 1; /* trie node t >= 1 is state base + t */
    b->n += trie.count - 1;
    int64_t exit_ = new_state(b);
    int64_t entry = exit_ < 0 ? -1 : new_state(b);
    if (entry < 0) {
        goto done;
    }
    int64_t multi_end = build(b, multi, entry);
    if (multi_end < 0 || add_eps(b, multi_end, exit_) < 0) {
        goto done;
    }
    int64_t rest_end = build(b, rest, exit_);
    int64_t last = rest_end < 0 ? -1 : new_state(b);
    if (last < 0 || add_eps(b, rest_end, last) < 0) {
        goto done;
    }
    for (Py_ssize_t t = 0; t < trie.count; t++) {
        if ((t & 4095) == 4095 && call_check(b) < 0) {
            goto done;
        }
        int64_t state = t ? base + t : source;
        memset(taken, 0, 128);
        for (int32_t child = trie.first[t]; child >= 0; child = trie.next[child]) {
            taken[trie.byte[child]] = 1;
            if (add_edge(b, state, trie.byte[child], trie.byte[child], base + child) < 0) {
                goto done;
            }
        }
        for (Py_ssize_t i = 0; i < n_ranges; i++) {
            long c = range_lo[i];
            while (c <= range_hi[i]) {
                if (taken[c]) {
                    c++;
                    continue;
                }
                long run = c;
                while (c + 1 <= range_hi[i] && !taken[c + 1]) {
                    c++;
                }
                if (add_edge(b, state, run, c, exit_) < 0) {
                    goto done;
                }
                c++;
            }
        }
        if (add_eps(b, state, entry) < 0 || (!trie.named[t] && add_eps(b, state, last) < 0)) {
            goto done;
        }
    }
    end = last;
done:
    PyMem_Free(tables);
    PyMem_Free(trie.first);
    PyMem_Free(trie.next);
    PyMem_Free(trie.last);
    PyMem_Free(trie.byte);
    PyMem_Free(trie.named);
    return end;
}

static int64_t excluding(Builder *b, PyObject *node, int64_t source) {
    PyObject *names = PyObject_GetAttr(node, s_names);
    PyObject *single = names ? PyObject_GetAttr(node, s_single) : NULL;
    PyObject *multi = single ? PyObject_GetAttr(node, s_multi) : NULL;
    PyObject *rest = multi ? PyObject_GetAttr(node, s_rest) : NULL;
    int64_t end = rest ? excluding_fragment(b, names, single, multi, rest, source) : -1;
    Py_XDECREF(names);
    Py_XDECREF(single);
    Py_XDECREF(multi);
    Py_XDECREF(rest);
    return end;
}

static int64_t build_node(Builder *b, PyObject *node, int64_t source) {
    PyObject *cls = (PyObject *)Py_TYPE(node);
    if (cls == b->spec.kinds[K_TEXT]) {
        PyObject *value = PyObject_GetAttr(node, s_text);
        if (value == NULL) {
            return -1;
        }
        int64_t end = text(b, value, source);
        Py_DECREF(value);
        return end;
    }
    if (cls == b->spec.kinds[K_CHARS]) {
        PyObject *ranges = PyObject_GetAttr(node, s_ranges);
        if (ranges == NULL) {
            return -1;
        }
        int64_t end = character_set(b, ranges, source);
        Py_DECREF(ranges);
        return end;
    }
    if (cls == b->spec.kinds[K_CONCAT] || cls == b->spec.kinds[K_ALT]) {
        PyObject *items = PyObject_GetAttr(node, s_items);
        if (items == NULL) {
            return -1;
        }
        int64_t end = -1;
        if (!PyTuple_Check(items)) {
            PyErr_SetString(PyExc_TypeError, "a node's items are a tuple");
            goto items_done;
        }
        Py_ssize_t count = PyTuple_GET_SIZE(items);
        if (cls == b->spec.kinds[K_CONCAT]) {
            end = source;
            for (Py_ssize_t i = 0; i < count && end >= 0; i++) {
                end = build(b, PyTuple_GET_ITEM(items, i), end);
            }
            goto items_done;
        }
        if (count >= b->min_branches) {
            int none = 0;
            end = literal(b, node, source, &none);
            if (!none) {
                goto items_done;
            }
        }
        int64_t last = new_state(b);
        if (last < 0) {
            end = -1;
            goto items_done;
        }
        end = last;
        for (Py_ssize_t i = 0; i < count; i++) {
            int64_t branch = build(b, PyTuple_GET_ITEM(items, i), source);
            if (branch < 0 || add_eps(b, branch, last) < 0) {
                end = -1;
                break;
            }
        }
    items_done:
        Py_DECREF(items);
        return end;
    }
    if (cls == b->spec.kinds[K_REPEAT]) {
        return repeat(b, node, source);
    }
    if (cls == b->spec.kinds[K_LITERAL_SET]) {
        int none = 0;
        int64_t end = literal(b, node, source, &none);
        if (none && end >= 0) {
            PyErr_SetString(PyExc_TypeError, "a LiteralSet without an automaton");
            return -1;
        }
        return end;
    }
    if (cls == b->spec.kinds[K_CALL]) {
        return call(b, node, source);
    }
    if (cls == b->spec.kinds[K_EXCLUDING]) {
        return excluding(b, node, source);
    }
    PyErr_Format(PyExc_TypeError, "not a regex tree node: %R", node);
    return -1;
}

static int64_t build(Builder *b, PyObject *node, int64_t source) {
    if (++b->depth > b->max_depth) {
        b->depth--;
        PyErr_SetString(PyExc_RecursionError, "a regex tree nested too deeply");
        return -1;
    }
    int64_t end = build_node(b, node, source);
    b->depth--;
    return end;
}

/* --- the result ---------------------------------------------------------------- */

static PyObject *state_number(Builder *b, int64_t local) {
    return PyLong_FromLongLong(b->base + local);
}

/* The ints a build's rows (or relocated()'s) name states by, made once a
 * state: a new reference to the int ``value``, from a direct-mapped cache
 * of the last ints made (a slot holds a reference; clear_numbers() drops
 * them). Rows name a state from places close together, so nearly every
 * name of a state gets the same object: the rows of the 126 fragments two
 * schemas a source reach name each state 1.9 times, and sharing made them
 * 15% smaller (4,670 to 3,986 KB with their lists; relocated copies 3,927
 * to 3,200 KB), the build 4% and the relocation 8% fewer instructions, and
 * in MaskBench's fresh forks the builds at first calls 8% fewer page
 * faults (new objects fault pages there). On the C
 * stack, not in the kept scratch block: one slot a state there made each
 * build write 8 more bytes a state of the block, pages a fresh fork copies
 * (its first mask faulted more). */
#define NUMBER_CACHE 512
typedef struct { long long value; PyObject *number; } NumberSlot;

static PyObject *cached_number(NumberSlot *cache, long long value) {
    NumberSlot *slot = &cache[(size_t)value & (NUMBER_CACHE - 1)];
    if (slot->number == NULL || slot->value != value) {
        PyObject *made = PyLong_FromLongLong(value);
        if (made == NULL) {
            return NULL;
        }
        Py_XSETREF(slot->number, made);
        slot->value = value;
    }
    return Py_NewRef(slot->number);
}

static void clear_numbers(NumberSlot *cache) {
    for (size_t i = 0; i < NUMBER_CACHE; i++) {
        Py_CLEAR(cache[i].number);
    }
}

/* The rows, as ThompsonNFA's lists hold them: eps[q] a tuple of targets,
 * edges[q] a tuple of (lo, hi, target) or, ``flat``, one flat tuple; calls
 * a list of (state, ((key, return), ...)) by state. */
/* Whether every local state reaches ``end`` through the fragment's moves, a
 * call passing to its return state (as though each callee matched
 * something): then the lazy automaton, once it knows its callees match,
 * needs no alive pass and no prune over the fragment (tokendfa.analysis.
 * lazydfa, _LazyNFA.enter; the Python construction reports False and the
 * passes run). The moves are checked to lie within the fragment before
 * this runs. ``area`` holds n + 1 Py_ssize_t (zeroed), then moves + 1 and
 * 2 (n + 1) int32 (the last n + 1 zeroed, read as flags). */
static int fragment_dense(Builder *b, int64_t end, char *area) {
    int64_t n = b->n;
    Py_ssize_t moves = b->n_eps + b->n_edges + b->n_calls;
    Py_ssize_t *first = (Py_ssize_t *)area;
    int32_t *sources = (int32_t *)(first + n + 1);
    int32_t *todo = sources + moves + 1;
    int32_t *seen = todo + n + 1;
    /* predecessors by target: counted, placed (first[] advances), stepped back */
    for (Py_ssize_t i = 0; i < b->n_eps; i++) {
        first[b->eps[i].to + 1]++;
    }
    for (Py_ssize_t i = 0; i < b->n_edges; i++) {
        first[b->edges[i].to + 1]++;
    }
    for (Py_ssize_t i = 0; i < b->n_calls; i++) {
        first[b->calls[i].ret + 1]++;
    }
    for (int64_t q = 0; q < n; q++) {
        first[q + 1] += first[q];
    }
    for (Py_ssize_t i = 0; i < b->n_eps; i++) {
        sources[first[b->eps[i].to]++] = b->eps[i].from;
    }
    for (Py_ssize_t i = 0; i < b->n_edges; i++) {
        sources[first[b->edges[i].to]++] = b->edges[i].from;
    }
    for (Py_ssize_t i = 0; i < b->n_calls; i++) {
        sources[first[b->calls[i].ret]++] = b->calls[i].from;
    }
    for (int64_t q = n; q > 0; q--) {
        first[q] = first[q - 1];
    }
    first[0] = 0;
    Py_ssize_t pending = 0;
    int64_t reached = 1;
    seen[end] = 1;
    todo[pending++] = (int32_t)end;
    while (pending) {
        int32_t target = todo[--pending];
        for (Py_ssize_t i = first[target]; i < first[target + 1]; i++) {
            int32_t source = sources[i];
            if (!seen[source]) {
                seen[source] = 1;
                todo[pending++] = source;
                reached++;
            }
        }
    }
    return reached == n;
}

static PyObject *result(Builder *b, int64_t start, int64_t end) {
    int64_t n = b->n;
    PyObject *eps = NULL, *edges = NULL, *calls = NULL, *out = NULL;
    /* one block (the kept scratch when it is large enough): the three at
     * arrays (zeroed), then edges_sorted, calls_sorted and eps_sorted */
    Py_ssize_t *eps_at = NULL, *edges_at = NULL, *calls_at = NULL, *edges_sorted = NULL, *calls_sorted = NULL;
    int32_t *eps_sorted = NULL;
    NumberSlot numbers[NUMBER_CACHE];
    memset(numbers, 0, sizeof numbers);
    int dense = 0;
    char *block = kept.scratch;
    size_t cap = kept.cap_scratch;
    kept.scratch = NULL;
    kept.cap_scratch = 0;
    /* counts below 2**30 states and moves of them, checked so the sizes cannot wrap */
    if (n < 0 || n >= HARD_CAP || b->n_eps < 0 || b->n_edges < 0 || b->n_calls < 0 ||
        (uint64_t)b->n_eps >= ((uint64_t)1 << 40) || (uint64_t)b->n_edges >= ((uint64_t)1 << 40) ||
        (uint64_t)b->n_calls >= ((uint64_t)1 << 40)) {
        PyErr_SetString(PyExc_SystemError, "an NFA fragment's counts out of range");
        goto done;
    }
    if (start < 0 || start >= n || end < 0 || end >= n) {
        PyErr_SetString(PyExc_SystemError, "a fragment's start or end outside it");
        goto done;
    }
    size_t at_items = (size_t)n + 1;
    size_t need = sizeof(Py_ssize_t) * (3 * at_items + (size_t)b->n_edges + 1 + (size_t)b->n_calls + 1) +
                  sizeof(int32_t) * ((size_t)b->n_eps + 1);
    /* fragment_dense's area, after the rest (lazy builds only) */
    size_t moves = (size_t)b->n_eps + (size_t)b->n_edges + (size_t)b->n_calls;
    size_t dense_at = (need + sizeof(Py_ssize_t) - 1) / sizeof(Py_ssize_t) * sizeof(Py_ssize_t);
    size_t dense_zeroed = sizeof(Py_ssize_t) * at_items;
    if (b->calls_mode) {
        need = dense_at + dense_zeroed + sizeof(int32_t) * (moves + 1 + 2 * at_items);
    }
    if (cap < need) {
        PyMem_Free(block);
        block = PyMem_Malloc(need);
        cap = block == NULL ? 0 : need;
        if (block == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    memset(block, 0, sizeof(Py_ssize_t) * 3 * at_items);
    eps_at = (Py_ssize_t *)block;
    edges_at = eps_at + at_items;
    calls_at = edges_at + at_items;
    edges_sorted = calls_at + at_items;
    calls_sorted = edges_sorted + b->n_edges + 1;
    eps_sorted = (int32_t *)(calls_sorted + b->n_calls + 1);
    /* every move within the fragment (a broken invariant would show here) */
    for (Py_ssize_t i = 0; i < b->n_eps; i++) {
        if (b->eps[i].from < 0 || b->eps[i].from >= n || b->eps[i].to < 0 || b->eps[i].to >= n) {
            PyErr_SetString(PyExc_SystemError, "an epsilon move outside the fragment");
            goto done;
        }
        eps_at[b->eps[i].from + 1]++;
    }
    for (Py_ssize_t i = 0; i < b->n_edges; i++) {
        if (b->edges[i].from < 0 || b->edges[i].from >= n || b->edges[i].to < 0 || b->edges[i].to >= n) {
            PyErr_SetString(PyExc_SystemError, "an edge outside the fragment");
            goto done;
        }
        edges_at[b->edges[i].from + 1]++;
    }
    for (Py_ssize_t i = 0; i < b->n_calls; i++) {
        if (b->calls[i].from < 0 || b->calls[i].from >= n || b->calls[i].ret < 0 || b->calls[i].ret >= n ||
            b->calls[i].key < 0 || b->calls[i].key >= PyList_GET_SIZE(b->keys)) {
            PyErr_SetString(PyExc_SystemError, "a call outside the fragment");
            goto done;
        }
        calls_at[b->calls[i].from + 1]++;
    }
    if (b->calls_mode) {
        char *area = block + dense_at;
        memset(area, 0, dense_zeroed);
        memset(area + dense_zeroed + sizeof(int32_t) * (moves + 1 + at_items), 0, sizeof(int32_t) * at_items);
        dense = fragment_dense(b, end, area);
    }
    for (int64_t q = 0; q < n; q++) {
        eps_at[q + 1] += eps_at[q];
        edges_at[q + 1] += edges_at[q];
        calls_at[q + 1] += calls_at[q];
    }
    /* stable counting sorts (the at arrays advance, then step back) */
    for (Py_ssize_t i = 0; i < b->n_eps; i++) {
        eps_sorted[eps_at[b->eps[i].from]++] = b->eps[i].to;
    }
    for (Py_ssize_t i = 0; i < b->n_edges; i++) {
        edges_sorted[edges_at[b->edges[i].from]++] = i;
    }
    for (Py_ssize_t i = 0; i < b->n_calls; i++) {
        calls_sorted[calls_at[b->calls[i].from]++] = i;
    }
    for (int64_t q = n; q > 0; q--) {
        eps_at[q] = eps_at[q - 1];
        edges_at[q] = edges_at[q - 1];
        calls_at[q] = calls_at[q - 1];
    }
    eps_at[0] = edges_at[0] = calls_at[0] = 0;

    eps = PyList_New((Py_ssize_t)n);
    edges = PyList_New((Py_ssize_t)n);
    calls = PyList_New(0);
    if (!eps || !edges || !calls) {
        goto done;
    }
    for (int64_t q = 0; q < n; q++) {
        /* 150,000 rows are ~20 ms: the deadline is checked between chunks */
        if ((q & (RESULT_CHUNK - 1)) == RESULT_CHUNK - 1 && call_check(b) < 0) {
            goto done;
        }
        Py_ssize_t a = eps_at[q], z = eps_at[q + 1];
        PyObject *row = PyTuple_New(z - a);
        if (row == NULL) {
            goto done;
        }
        PyList_SET_ITEM(eps, q, row);
        for (Py_ssize_t i = a; i < z; i++) {
            PyObject *t = cached_number(numbers, b->base + eps_sorted[i]);
            if (t == NULL) {
                goto done;
            }
            PyTuple_SET_ITEM(row, i - a, t);
        }
        if (z > a && PyObject_GC_IsTracked(row)) {
            PyObject_GC_UnTrack(row);  /* ints only: never in a cycle */
        }
        a = edges_at[q];
        z = edges_at[q + 1];
        row = PyTuple_New(b->flat ? 3 * (z - a) : z - a);
        if (row == NULL) {
            goto done;
        }
        PyList_SET_ITEM(edges, q, row);
        for (Py_ssize_t i = a; i < z; i++) {
            EdgeMove e = b->edges[edges_sorted[i]];
            PyObject *lo = PyLong_FromLong(e.lo), *hi = PyLong_FromLong(e.hi), *t = cached_number(numbers, b->base + e.to);
            if (!lo || !hi || !t) {
                Py_XDECREF(lo);
                Py_XDECREF(hi);
                Py_XDECREF(t);
                goto done;
            }
            if (b->flat) {
                PyTuple_SET_ITEM(row, 3 * (i - a), lo);
                PyTuple_SET_ITEM(row, 3 * (i - a) + 1, hi);
                PyTuple_SET_ITEM(row, 3 * (i - a) + 2, t);
            } else {
                PyObject *triple = PyTuple_New(3);
                if (triple == NULL) {
                    Py_DECREF(lo);
                    Py_DECREF(hi);
                    Py_DECREF(t);
                    goto done;
                }
                PyTuple_SET_ITEM(triple, 0, lo);
                PyTuple_SET_ITEM(triple, 1, hi);
                PyTuple_SET_ITEM(triple, 2, t);
                PyObject_GC_UnTrack(triple);
                PyTuple_SET_ITEM(row, i - a, triple);
            }
        }
        if (z > a && PyObject_GC_IsTracked(row)) {
            PyObject_GC_UnTrack(row);
        }
        a = calls_at[q];
        z = calls_at[q + 1];
        if (z > a) {
            PyObject *items = PyTuple_New(z - a);
            if (items == NULL) {
                goto done;
            }
            for (Py_ssize_t i = a; i < z; i++) {
                CallMove c = b->calls[calls_sorted[i]];
                PyObject *pair = Py_BuildValue("(ON)", PyList_GET_ITEM(b->keys, c.key), cached_number(numbers, b->base + c.ret));
                if (pair == NULL) {
                    Py_DECREF(items);
                    goto done;
                }
                PyTuple_SET_ITEM(items, i - a, pair);
            }
            PyObject *entry = Py_BuildValue("(NN)", cached_number(numbers, b->base + q), items);
            if (entry == NULL || PyList_Append(calls, entry) < 0) {
                Py_XDECREF(entry);
                goto done;
            }
            Py_DECREF(entry);
        }
    }
    /* tuple.__new__(fragment, (start, end, eps, edges, calls)), what the
     * NamedTuple's own __new__ does, without its Python frame and a dict of
     * keywords made from C strings (configure() checked it is a tuple
     * subclass). Paired in children of one warmed parent (the median band of
     * ttfm_phases.py, with lazydfa adopting the main fragment's lists): the
     * Thompson phase 0.0669 -> 0.0596 ms CPU, 6.67 -> 6.38 faults a schema. */
    PyObject *fields = Py_BuildValue("(NNOOOO)", cached_number(numbers, b->base + start),
                                     cached_number(numbers, b->base + end), eps, edges, calls,
                                     dense ? Py_True : Py_False);
    PyObject *args = fields == NULL ? NULL : PyTuple_Pack(1, fields);
    Py_XDECREF(fields);
    if (args != NULL) {
        out = PyTuple_Type.tp_new((PyTypeObject *)b->spec.fragment_type, args, NULL);
        Py_DECREF(args);
    }
done:
    clear_numbers(numbers);
    if (kept.scratch == NULL && block != NULL && cap <= KEPT_MAX) {
        kept.scratch = block;
        kept.cap_scratch = cap;
    } else {
        PyMem_Free(block);
    }
    Py_XDECREF(eps);
    Py_XDECREF(edges);
    Py_XDECREF(calls);
    return out;
}

/* --- the module's functions -------------------------------------------------------- */

static int request_long(PyObject *request, PyObject *name, int64_t *out) {
    PyObject *value = PyObject_GetAttr(request, name);
    if (value == NULL) {
        return -1;
    }
    long long v = PyLong_Check(value) ? PyLong_AsLongLong(value) : -1;
    Py_DECREF(value);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        v = -1;
    }
    if (v < 0) {
        PyErr_Format(PyExc_ValueError, "request.%U must be an int >= 0 that fits 64 bits", name);
        return -1;
    }
    *out = v;
    return 0;
}

static PyObject *py_build(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "build(tree, request)");
        return NULL;
    }
    if (fragment_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_thompson.configure() was not called");
        return NULL;
    }
    PyObject *tree = args[0], *request = args[1];
    Builder b;
    memset(&b, 0, sizeof b);
    b.eps = kept.eps;
    b.cap_eps = kept.cap_eps;
    b.edges = kept.edges;
    b.cap_edges = kept.cap_edges;
    b.calls = kept.calls;
    b.cap_calls = kept.cap_calls;
    kept.eps = NULL;
    kept.edges = NULL;
    kept.calls = NULL;
    kept.cap_eps = kept.cap_edges = kept.cap_calls = 0;
    PyObject *result_ = NULL;
    PyObject *held[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < K_COUNT; i++) {
        b.spec.kinds[i] = Py_NewRef(kinds[i]);
    }
    b.spec.set_template_fn = Py_NewRef(set_template_fn);
    b.spec.literal_automaton_fn = Py_NewRef(literal_automaton_fn);
    b.spec.fragment_type = Py_NewRef(fragment_type);
    int64_t min_branches, calls_mode, flat;
    if (request_long(request, s_base, &b.base) < 0 || request_long(request, s_max_states, &b.max_states) < 0 ||
        request_long(request, s_unchecked, &b.unchecked) < 0 ||
        request_long(request, s_min_branches, &min_branches) < 0 ||
        request_long(request, s_calls, &calls_mode) < 0 || request_long(request, s_flat, &flat) < 0) {
        goto done;
    }
    if (b.base >= HARD_CAP) {
        PyErr_SetString(PyExc_MemoryError, "an NFA of more than 2**30 states");
        goto done;
    }
    b.min_branches = min_branches > PY_SSIZE_T_MAX ? PY_SSIZE_T_MAX : (Py_ssize_t)min_branches;
    b.calls_mode = calls_mode != 0;
    b.flat = flat != 0;
    b.next_memory = 0;
    b.max_depth = Py_GetRecursionLimit() < MAX_DEPTH ? Py_GetRecursionLimit() : MAX_DEPTH;
    held[0] = b.defined = PyObject_GetAttr(request, s_defined);
    held[1] = b.template_fn = held[0] ? PyObject_GetAttr(request, s_template) : NULL;
    held[2] = b.check = held[1] ? PyObject_GetAttr(request, s_check) : NULL;
    held[3] = b.reserve_fn = held[2] ? PyObject_GetAttr(request, s_reserve) : NULL;
    if (held[3] == NULL) {
        goto done;
    }
    if (!PyCallable_Check(b.check) || !PyCallable_Check(b.reserve_fn) ||
        (!b.calls_mode && b.defined != Py_None && !PyCallable_Check(b.template_fn))) {
        PyErr_SetString(PyExc_TypeError, "request.check, request.reserve (and request.template for copies) "
                                         "must be callable");
        goto done;
    }
    b.keys = PyList_New(0);
    if (b.keys == NULL) {
        goto done;
    }
    int64_t start = new_state(&b);
    int64_t end = start < 0 ? -1 : build(&b, tree, start);
    if (end >= 0) {
        result_ = result(&b, start, end);
    }
done:
    for (int i = 0; i < 4; i++) {
        Py_XDECREF(held[i]);
    }
    for (int i = 0; i < K_COUNT; i++) {
        Py_DECREF(b.spec.kinds[i]);
    }
    Py_DECREF(b.spec.set_template_fn);
    Py_DECREF(b.spec.literal_automaton_fn);
    Py_DECREF(b.spec.fragment_type);
    Py_XDECREF(b.keys);
    give_back((void **)&kept.eps, &kept.cap_eps, b.eps, b.cap_eps, sizeof(EpsMove));
    give_back((void **)&kept.edges, &kept.cap_edges, b.edges, b.cap_edges, sizeof(EdgeMove));
    give_back((void **)&kept.calls, &kept.cap_calls, b.calls, b.cap_calls, sizeof(CallMove));
    return result_;
}

/* relocated(rows, offset, stride): the tuples of ``rows`` (a tuple or list
 * of tuples of ints) with ``offset`` added to every ``stride``-th item,
 * counted from item ``stride - 1`` (1: every item, epsilon targets; 3: the
 * targets of flat (lo, hi, target) edges), as a list of new tuples off the
 * cyclic collector (ints only). A fragment's rows stamped at another place
 * (lazydfa._LazyNFA._stamp_template). */
static PyObject *py_relocated(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !(PyTuple_Check(args[0]) || PyList_Check(args[0])) || !PyLong_Check(args[1]) ||
        !PyLong_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "relocated(rows: tuple | list, offset: int, stride: int)");
        return NULL;
    }
    long long offset = PyLong_AsLongLong(args[1]);
    long stride = PyLong_AsLong(args[2]);
    if ((offset == -1 || stride == -1) && PyErr_Occurred()) {
        return NULL;
    }
    if (stride < 1 || stride > 3 || offset < -HARD_CAP || offset > HARD_CAP) {
        PyErr_SetString(PyExc_ValueError, "relocated: stride 1 to 3, |offset| < 2**30");
        return NULL;
    }
    /* a tuple of the rows, not the list itself: the tuples made below may run
     * the collector, whose finalisers could resize a list under its items */
    PyObject *rows = PySequence_Tuple(args[0]);
    if (rows == NULL) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(rows);
    PyObject **items = PySequence_Fast_ITEMS(rows);
    NumberSlot made[NUMBER_CACHE];  /* the shifted ints (cached_number) */
    memset(made, 0, sizeof made);
    PyObject *out = PyList_New(n);
    if (out == NULL) {
        Py_DECREF(rows);
        return NULL;
    }
    for (Py_ssize_t q = 0; q < n; q++) {
        PyObject *row = items[q];
        if (!PyTuple_Check(row)) {
            PyErr_SetString(PyExc_TypeError, "relocated: a row is a tuple");
            goto fail;
        }
        Py_ssize_t size = PyTuple_GET_SIZE(row);
        if (size == 0) {
            Py_INCREF(row);
            PyList_SET_ITEM(out, q, row);
            continue;
        }
        PyObject *moved = PyTuple_New(size);
        if (moved == NULL) {
            goto fail;
        }
        PyList_SET_ITEM(out, q, moved);
        for (Py_ssize_t i = 0; i < size; i++) {
            PyObject *item = PyTuple_GET_ITEM(row, i);
            if (i % stride != stride - 1) {
                Py_INCREF(item);
                PyTuple_SET_ITEM(moved, i, item);
                continue;
            }
            if (!PyLong_Check(item)) {
                PyErr_SetString(PyExc_TypeError, "relocated: a target is an int");
                goto fail;
            }
            long long t = PyLong_AsLongLong(item);
            if (t == -1 && PyErr_Occurred()) {
                goto fail;
            }
            if (t < -HARD_CAP || t > HARD_CAP) {
                PyErr_SetString(PyExc_ValueError, "relocated: a target out of range");
                goto fail;
            }
            PyObject *shifted = cached_number(made, t + offset);
            if (shifted == NULL) {
                goto fail;
            }
            PyTuple_SET_ITEM(moved, i, shifted);
        }
        if (PyObject_GC_IsTracked(moved)) {
            PyObject_GC_UnTrack(moved);
        }
    }
    Py_DECREF(rows);
    clear_numbers(made);
    return out;
fail:
    Py_DECREF(rows);
    Py_DECREF(out);
    clear_numbers(made);
    return NULL;
}

static PyObject *py_configure(PyObject *module, PyObject *spec) {
    PyObject *found[K_COUNT + 3] = {NULL};
    const char *names[K_COUNT + 3];
    for (int i = 0; i < K_COUNT; i++) {
        names[i] = kind_fields[i];
    }
    names[K_COUNT] = "set_template";
    names[K_COUNT + 1] = "literal_automaton";
    names[K_COUNT + 2] = "fragment";
    for (int i = 0; i < K_COUNT + 3; i++) {
        found[i] = PyObject_GetAttrString(spec, names[i]);
        if (found[i] == NULL || (i < K_COUNT && !PyType_Check(found[i])) || !PyCallable_Check(found[i])) {
            if (found[i] != NULL) {
                PyErr_Format(PyExc_TypeError, "spec.%s must be a class or a function", names[i]);
            }
            for (int j = 0; j <= i; j++) {
                Py_XDECREF(found[j]);
            }
            return NULL;
        }
    }
    PyObject *fragment = found[K_COUNT + 2];
    if (!PyType_Check(fragment) || !PyType_IsSubtype((PyTypeObject *)fragment, &PyTuple_Type)) {
        /* result() makes it as tuple.__new__ does */
        PyErr_SetString(PyExc_TypeError, "spec.fragment must be a tuple subclass (a NamedTuple)");
        for (int j = 0; j < K_COUNT + 3; j++) {
            Py_DECREF(found[j]);
        }
        return NULL;
    }
    for (int i = 0; i < K_COUNT; i++) {
        Py_XSETREF(kinds[i], found[i]);
    }
    Py_XSETREF(set_template_fn, found[K_COUNT]);
    Py_XSETREF(literal_automaton_fn, found[K_COUNT + 1]);
    Py_XSETREF(fragment_type, found[K_COUNT + 2]);
    Py_RETURN_NONE;
}

/* --- the nodes' hash --------------------------------------------------------- */

/* NodeBase: the base of regex_tree.Node, holding the structural hash that a
 * node computes once, when it is made (its _hash, set once through the
 * member), and returning it as the type's tp_hash. A Python __hash__ is a
 * call through the type's slot, ~60 ns; the interning of a median MaskBench
 * schema's tree hashes ~230 nodes (tuple keys of nodes, alternations'
 * deduplication). The Python twin is the same class without this base
 * (TOKENDFA_NATIVE=0): a _hash slot and a __hash__ method. */
typedef struct {
    PyObject_HEAD
    Py_hash_t hash;
} NodeBase;

static Py_hash_t node_base_hash(PyObject *self) {
    Py_hash_t hash = ((NodeBase *)self)->hash;
    return hash == -1 ? -2 : hash;   /* -1 is an error to the caller; hash() never makes it */
}

static PyMemberDef node_base_members[] = {
    {"_hash", T_PYSSIZET, offsetof(NodeBase, hash), 0, "the node's structural hash, set once when it is made"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject NodeBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tokendfa.analysis._thompson.NodeBase",
    .tp_basicsize = sizeof(NodeBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The base of regex tree nodes: a stored hash, returned by tp_hash.",
    .tp_hash = node_base_hash,
    .tp_members = node_base_members,
    .tp_new = PyType_GenericNew,
};

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)py_configure, METH_O,
     "configure(spec): the node classes and Python helpers (regex_compiler.NativeSpec)."},
    {"relocated", (PyCFunction)(void (*)(void))py_relocated, METH_FASTCALL,
     "relocated(rows, offset, stride) -> list: rows with offset added to every stride-th item."},
    {"build", (PyCFunction)(void (*)(void))py_build, METH_FASTCALL,
     "build(tree, request) -> fragment: ThompsonNFA's construction of tree (regex_compiler.NativeRequest)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef definition = {
    PyModuleDef_HEAD_INIT, "_thompson",
    "The Thompson construction of tokendfa.analysis.regex_compiler, compiled.", -1, methods,
};

PyMODINIT_FUNC PyInit__thompson(void) {
    struct { PyObject **slot; const char *name; } names[] = {
        {&s_text, "text"}, {&s_ranges, "ranges"}, {&s_items, "items"}, {&s_body, "body"}, {&s_lo, "lo"},
        {&s_hi, "hi"}, {&s_key, "key"}, {&s_names, "names"}, {&s_single, "single"}, {&s_multi, "multi"},
        {&s_rest, "rest"}, {&s_starts, "starts"}, {&s_target, "target"}, {&s_finals, "finals"},
        {&s_base, "base"}, {&s_max_states, "max_states"}, {&s_unchecked, "unchecked"},
        {&s_min_branches, "min_branches"}, {&s_calls, "calls"}, {&s_defined, "defined"},
        {&s_template, "template"}, {&s_flat, "flat"}, {&s_check, "check"}, {&s_reserve, "reserve"},
        {&s_start, "start"}, {&s_end, "end"}, {&s_eps, "eps"}, {&s_edges, "edges"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        *names[i].slot = PyUnicode_InternFromString(names[i].name);
        if (*names[i].slot == NULL) {
            return NULL;
        }
    }
    if (PyType_Ready(&NodeBaseType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&definition);
    if (module == NULL) {
        return NULL;
    }
    Py_INCREF(&NodeBaseType);
    if (PyModule_AddObject(module, "NodeBase", (PyObject *)&NodeBaseType) < 0) {
        Py_DECREF(&NodeBaseType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
