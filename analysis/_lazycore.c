/* The hot path of the lazy subset construction (tokendfa.analysis.lazydfa), compiled.
 *
 * LazyByteDFA resolves a cell by finding its state's cut (the byte ranges of
 * its kernel's edges), the closure of the configurations a range leads to,
 * and the id of that kernel, discovering a state when it is new. In Python
 * each of those is a few microseconds of interpreter work around a dict
 * lookup or a frozenset; a cold token row resolves ~70 cells and discovers
 * ~35 states, ~0.6 ms of a 1.4 ms row (MaskBench's slow steps, Qwen). These
 * functions do the same over the very same Python containers (the dicts,
 * lists and frozensets of the LazyByteDFA, so every other reader keeps
 * working), and hand the rare cases back to the Python methods: closures
 * that call or end a definition (the stack plays a part), kernels on
 * several stacks, shapes not cut yet, and the discovery of a state.
 *
 * Each function takes a context made once per automaton
 * (LazyByteDFA._use_native_core): the containers, the stride, and the Python
 * methods to fall back on. Plain C API, no numpy headers.
 *
 * Under the functions over the Python containers sits a native state store
 * (see "the native state store" below): the kernels, their ids and the NFA's
 * edges and local closures as C arrays, over which a token walk
 * (tokendfa.lazy._cwalk, through the capsule ``_C_API``) resolves most cells
 * of a cold row, discovering states, without the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "_released.h"  /* released_ns(), count_released(): resolve_bytes' time without the GIL */

#if defined(__GNUC__) || defined(__clang__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

#define DEAD 0
#define UNKNOWN_CELL (-1)

/* The automaton's context: what the core reads and writes of a LazyByteDFA,
 * one named field each (lazydfa.LazyByteDFA._use_native_core builds it with
 * keywords, so the two sides cannot disagree on an order). */
enum {
    C_DFA, C_CUTS, C_SHAPE_CUTS, C_STEPS, C_CLOSURES, C_LOCAL_CLOSURES, C_IDS, C_KERNELS,
    C_STRIDE, C_BOUNDED, C_CHECK, C_PY_CLOSURE, C_PY_CUT_OF, C_PY_SHAPE_CUT, C_PY_LOCAL_CLOSURE,
    C_PY_DISCOVER, C_EPS, C_EDGES, C_CALLS, C_ENDS, C_FINAL, C_MAX_STATES,
    C_PUSHES, C_STACK_PARENT, C_STACK_TOP, C_STACK_DEPTH, C_RESOLVED, C_START_OF, C_ENTER,
    C_WIDE_ENDS, C_CUT_BASES, C_SIZE
};

/* The fields' names, in the enum's order. */
static const char *const context_fields[C_SIZE] = {
    "dfa", "cuts", "shape_cuts", "steps", "closures", "local_closures", "ids", "kernels",
    "stride", "bounded", "check", "py_closure", "py_cut_of", "py_shape_cut", "py_local_closure",
    "py_discover", "eps", "edges", "calls", "ends", "final", "max_states",
    "pushes", "stack_parent", "stack_top", "stack_depth", "resolved", "start_of", "enter",
    "wide_ends", "cut_bases",
};

typedef struct Store Store;

typedef struct {
    PyObject_HEAD
    PyObject *items[C_SIZE];
    Store *store;  /* the native state store (see "the native state store" below); NULL until first used */
} ContextObject;

static PyTypeObject *context_type;

#define ITEM(ctx, i) (((ContextObject *)(ctx))->items[(i)])

/* The automaton's attributes the core reads and writes, interned once
 * (PyObject_GetAttrString makes a string each call: a few every new state). */
static PyObject *name_table, *name_count, *name_finals, *name_max_states;

/* Kernels, closures, step keys and cuts hold ints (and tuples and lists of
 * ints, never changed after they are made), so they cannot be part of a
 * reference cycle: the cyclic collector need not follow them. A cold row
 * makes hundreds; tracked, the collection after the row's walk took ~90 us
 * (one in 25 of a slow step's time, more in the largest). */
/* eps[q]: a tuple (a list is read alike); edges[q]: a tuple of (lo, hi,
 * target) triples, flat (lazydfa._LazyNFA says why) */
#define SEQUENCE(o) (PyTuple_Check(o) || PyList_Check(o))

static PyObject *untracked(PyObject *object) {
    if (object != NULL && PyObject_IS_GC(object)) {
        PyObject_GC_UnTrack(object);
    }
    return object;
}

/* ``*found`` = a new reference to dict[key] and 1; 0 when the key is
 * missing; -1 with an exception. */
static int cached(PyObject *dict, PyObject *key, PyObject **found) {
    *found = PyDict_GetItemWithError(dict, key);
    if (*found != NULL) {
        Py_INCREF(*found);
        return 1;
    }
    return PyErr_Occurred() ? -1 : 0;
}

static int check_context(PyObject *ctx) {
    if (!Py_IS_TYPE(ctx, context_type)) {
        PyErr_SetString(PyExc_TypeError, "_lazycore: the first argument must be the automaton's Context");
        return -1;
    }
    return 0;
}

static long long stride_of(PyObject *ctx) {
    return PyLong_AsLongLong(ITEM(ctx, C_STRIDE));
}

/* The automaton's current table (it is replaced when it grows) held in
 * ``view``; returns row ``state`` (release the view after), or NULL with an
 * exception. */
static int32_t *table_row(PyObject *ctx, long long state, Py_buffer *view, int writable) {
    PyObject *table = PyObject_GetAttr(ITEM(ctx, C_DFA), name_table);
    if (table == NULL) {
        return NULL;
    }
    int status = PyObject_GetBuffer(table, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0));
    Py_DECREF(table);  /* the view holds it */
    if (status < 0) {
        return NULL;
    }
    /* state compared with the row count, not (state + 1) * 1024 with the
     * length: a state from Python near 2**54 wrapped that product past zero
     * and passed, and the row was read or written before the table */
    if (view->itemsize != 4 || state < 0 || state >= view->len / 1024) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_IndexError, "_lazycore: a state outside the table");
        return NULL;
    }
    return (int32_t *)view->buf + state * 256;
}

/* Write ``value`` into row ``state`` of the automaton's current table, at
 * the bytes of ``indices`` (a bytes object; NULL: lo..hi). */
static int write_cells(PyObject *ctx, long long state, PyObject *indices, long lo, long hi, int32_t value) {
    Py_buffer view;
    int32_t *row = table_row(ctx, state, &view, 1);
    if (row == NULL) {
        return -1;
    }
    int status = 0;
    if (indices == NULL) {
        for (long b = lo; b <= hi; b++) {
            row[b] = value;
        }
    } else if (!PyBytes_Check(indices)) {
        PyErr_SetString(PyExc_TypeError, "_lazycore: dead bytes must be bytes");
        status = -1;
    } else {
        const uint8_t *at = (const uint8_t *)PyBytes_AS_STRING(indices);
        for (Py_ssize_t i = 0; i < PyBytes_GET_SIZE(indices); i++) {
            row[at[i]] = value;
        }
    }
    PyBuffer_Release(&view);
    return status;
}

/* ``wanted`` (an int, bit b for byte b) as 32 bytes, little-endian. */
static int wanted_bits(PyObject *wanted, unsigned char bits[32]) {
    PyObject *data = PyObject_CallMethod(wanted, "to_bytes", "is", 32, "little");
    if (data == NULL) {
        return -1;
    }
    memcpy(bits, PyBytes_AS_STRING(data), 32);
    Py_DECREF(data);
    return 0;
}

/* The arguments of a module function: ``expected`` of them, the first the
 * automaton's context. */
static int arguments(Py_ssize_t nargs, Py_ssize_t expected, PyObject *const *args, const char *usage) {
    if (nargs != expected) {
        PyErr_Format(PyExc_TypeError, "%s", usage);
        return -1;
    }
    return check_context(args[0]);
}

/* LazyByteDFA._local_closure: the kernel NFA states reachable from ``q`` by
 * epsilon moves alone, or () when a state on the way calls or ends a
 * definition. New reference (a tuple, or an int for one state). */
static PyObject *local_closure_of(PyObject *ctx, PyObject *q) {
    PyObject *eps = ITEM(ctx, C_EPS), *edges = ITEM(ctx, C_EDGES), *calls = ITEM(ctx, C_CALLS);
    PyObject *ends = ITEM(ctx, C_ENDS);
    long long final = PyLong_AsLongLong(ITEM(ctx, C_FINAL));
    if (!PyList_Check(eps) || !PyList_Check(edges) || !PyList_Check(calls) || !PyByteArray_Check(ends)) {
        PyErr_SetString(PyExc_TypeError, "_lazycore: the NFA's tables are not lists and a bytearray");
        return NULL;
    }
    PyObject *seen = PySet_New(NULL), *todo = PyList_New(0), *kernel = PyList_New(0), *result = NULL;
    if (seen == NULL || todo == NULL || kernel == NULL || PySet_Add(seen, q) < 0 || PyList_Append(todo, q) < 0) {
        goto done;
    }
    while (PyList_GET_SIZE(todo)) {
        Py_ssize_t last = PyList_GET_SIZE(todo) - 1;
        PyObject *current = PyList_GET_ITEM(todo, last);
        Py_INCREF(current);
        if (PyList_SetSlice(todo, last, last + 1, NULL) < 0) {
            Py_DECREF(current);
            goto done;
        }
        Py_ssize_t at = PyLong_AsSsize_t(current);
        if (at < 0 || at >= PyList_GET_SIZE(eps) || at >= PyList_GET_SIZE(edges) || at >= PyList_GET_SIZE(calls)
                || at >= PyByteArray_GET_SIZE(ends)) {
            Py_DECREF(current);
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_IndexError, "_lazycore: an NFA state outside the tables");
            }
            goto done;
        }
        int calling = PyObject_IsTrue(PyList_GET_ITEM(calls, at));
        if (calling < 0) {
            Py_DECREF(current);
            goto done;
        }
        if (calling || PyByteArray_AS_STRING(ends)[at]) {
            Py_DECREF(current);
            result = PyTuple_New(0);
            goto done;
        }
        int with_edges = PyObject_IsTrue(PyList_GET_ITEM(edges, at));
        if (with_edges < 0 || ((with_edges || at == final) && PyList_Append(kernel, current) < 0)) {
            Py_DECREF(current);
            goto done;
        }
        Py_DECREF(current);
        PyObject *successors = PyList_GET_ITEM(eps, at);
        if (!SEQUENCE(successors)) {
            PyErr_SetString(PyExc_TypeError, "_lazycore: eps[q] is not a tuple");
            goto done;
        }
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(successors); i++) {
            PyObject *successor = PySequence_Fast_GET_ITEM(successors, i);
            int known = PySet_Contains(seen, successor);
            if (known < 0) {
                goto done;
            }
            if (!known && (PySet_Add(seen, successor) < 0 || PyList_Append(todo, successor) < 0)) {
                goto done;
            }
        }
    }
    if (PyList_GET_SIZE(kernel) == 1) {
        result = PyList_GET_ITEM(kernel, 0);
        Py_INCREF(result);
    } else {
        result = untracked(PyList_AsTuple(kernel));
    }
done:
    Py_XDECREF(seen);
    Py_XDECREF(todo);
    Py_XDECREF(kernel);
    return result;
}

/* The automaton's state bound in ``*bound``: LazyByteDFA.max_states, a
 * public attribute its _discover reads at each new state (the context's
 * max_states is its value when the context was made). Python compares ints
 * of any size: one past 64 bits is saturated, which compares the same with
 * any state count. 0, or -1 with an exception. */
static int state_bound(PyObject *ctx, long long *bound) {
    PyObject *value = PyObject_GetAttr(ITEM(ctx, C_DFA), name_max_states);
    if (value == NULL) {
        return -1;
    }
    if (!PyLong_Check(value)) {
        Py_DECREF(value);
        PyErr_SetString(PyExc_TypeError, "_lazycore: the automaton's max_states is not an int");
        return -1;
    }
    int overflow = 0;
    long long read = PyLong_AsLongLongAndOverflow(value, &overflow);
    Py_DECREF(value);
    if (read == -1 && PyErr_Occurred()) {
        return -1;
    }
    *bound = overflow > 0 ? LLONG_MAX : overflow < 0 ? LLONG_MIN : read;
    return 0;
}

/* LazyByteDFA._discover: a new state for ``kernel``, its row set to UNKNOWN;
 * the Python method when the bound is reached or the table must grow. New
 * reference (an int). */
static PyObject *store_id_of(PyObject *ctx, PyObject *kernel);
static int publish_count_of(PyObject *ctx);

static PyObject *discover(PyObject *ctx, PyObject *kernel) {
    /* Not in ``_ids``: perhaps a state the native store found and has not
     * published (see store_publish), its id read from the store; a new one
     * is numbered after the store's states (the count published first),
     * and only it goes into ``_kernels`` and ``_ids``: ``_kernels`` is
     * keyed by state, not a list that every state before it must fill */
    PyObject *kept = store_id_of(ctx, kernel);
    if (kept != Py_None) {
        return kept;  /* the id, or NULL with an exception */
    }
    Py_DECREF(kept);
    if (publish_count_of(ctx) < 0) {
        return NULL;
    }
    /* The build's time limit, checked once a new state: a cell that finds a
     * known state is a few dictionary lookups, and the Python call a cell
     * (limits.check) was ~25 us of a cold row's ~90 cells. */
    PyObject *checked = PyObject_CallNoArgs(ITEM(ctx, C_CHECK));
    if (checked == NULL) {
        return NULL;
    }
    Py_DECREF(checked);
    PyObject *dfa = ITEM(ctx, C_DFA);
    PyObject *count_object = PyObject_GetAttr(dfa, name_count);
    if (count_object == NULL) {
        return NULL;
    }
    long long count = PyLong_AsLongLong(count_object);
    long long bound = 0;
    if (PyErr_Occurred() || state_bound(ctx, &bound) < 0) {
        Py_DECREF(count_object);
        return NULL;
    }
    PyObject *finals = PyObject_GetAttr(dfa, name_finals);
    if (finals == NULL) {
        Py_DECREF(count_object);
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(finals, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        Py_DECREF(finals);
        Py_DECREF(count_object);
        return NULL;
    }
    PyObject *result = NULL;
    if (view.itemsize != 1 || count >= bound || count >= view.len) {
        /* the bound's error, or a table to grow: the Python method */
        PyBuffer_Release(&view);
        Py_DECREF(finals);
        Py_DECREF(count_object);
        return PyObject_CallOneArg(ITEM(ctx, C_PY_DISCOVER), kernel);
    }
    int final = PySet_Contains(kernel, ITEM(ctx, C_FINAL));
    if (final >= 0) {
        /* the new state's row: the table's rows past the count are undefined */
        Py_buffer row_view;
        int32_t *row = table_row(ctx, count, &row_view, 1);
        if (row == NULL) {
            final = -1;
        } else {
            for (int b = 0; b < 256; b++) {
                row[b] = -1;  /* UNKNOWN */
            }
            PyBuffer_Release(&row_view);
        }
    }
    PyObject *next = final < 0 ? NULL : PyLong_FromLongLong(count + 1);
    if (next != NULL && PyDict_SetItem(ITEM(ctx, C_KERNELS), count_object, kernel) == 0) {
        if (PyDict_SetItem(ITEM(ctx, C_IDS), kernel, count_object) == 0) {
            ((uint8_t *)view.buf)[count] = (uint8_t)final;
            if (PyObject_SetAttr(dfa, name_count, next) == 0) {
                result = count_object;
                Py_INCREF(result);
            }
        } else {  /* the two containers never disagree; the first error is raised */
            PyObject *type, *value, *trace;
            PyErr_Fetch(&type, &value, &trace);
            if (PyDict_DelItem(ITEM(ctx, C_KERNELS), count_object) < 0) {
                PyErr_Clear();
            }
            PyErr_Restore(type, value, trace);
        }
    }
    Py_XDECREF(next);
    PyBuffer_Release(&view);
    Py_DECREF(finals);
    Py_DECREF(count_object);
    return result;
}

typedef struct {
    long lo, hi;
    long long target;
} Edge;

static int by_range_then_target(const void *a, const void *b) {
    const Edge *x = a, *y = b;
    if (x->lo != y->lo) {
        return x->lo < y->lo ? -1 : 1;
    }
    if (x->hi != y->hi) {
        return x->hi < y->hi ? -1 : 1;
    }
    return (x->target > y->target) - (x->target < y->target);
}

/* LazyByteDFA._shape_cut for a shape on one stack whose sorted edges are the
 * cut already (equal or disjoint ranges: JSON strings, keys); the Python
 * method for the rest. New reference (starts, ends, targets, dead). */
/* A range's targets appended to a cut's list: one target as the int itself
 * (LazyByteDFA._shape_cut says why), several as a tuple. 0, or -1 with an
 * exception. */
static int append_targets(PyObject *targets, PyObject *into) {
    PyObject *closed = PyList_GET_SIZE(into) == 1 ? PyList_GET_ITEM(into, 0) : untracked(PyList_AsTuple(into));
    if (closed == NULL) {
        return -1;
    }
    if (PyList_GET_SIZE(into) == 1) {
        Py_INCREF(closed);
    }
    int status = PyList_Append(targets, closed);
    Py_DECREF(closed);
    return status;
}

static PyObject *shape_cut(PyObject *ctx, PyObject *key, PyObject *shape) {
    PyObject *cuts = ITEM(ctx, C_SHAPE_CUTS), *edges = ITEM(ctx, C_EDGES);
    Py_ssize_t total = 0, count = PyList_GET_SIZE(shape);
    long long stride = stride_of(ctx);
    for (Py_ssize_t i = 0; i < count; i++) {
        long long config = PyLong_AsLongLong(PyList_GET_ITEM(shape, i));
        Py_ssize_t q = config < 0 ? -1 : (Py_ssize_t)(config % stride);
        if (q < 0 || q >= PyList_GET_SIZE(edges)) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_IndexError, "_lazycore: an NFA state outside the tables");
            }
            return NULL;
        }
        PyObject *list = PyList_GET_ITEM(edges, q);
        if (!PyTuple_Check(list) || PyTuple_GET_SIZE(list) % 3) {
            PyErr_SetString(PyExc_TypeError, "_lazycore: edges[q] is not a tuple (lo, hi, target, ...)");
            return NULL;
        }
        total += PyTuple_GET_SIZE(list) / 3;
    }
    Edge *own = PyMem_Malloc(sizeof(Edge) * (total ? total : 1));
    if (own == NULL) {
        return PyErr_NoMemory();
    }
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        /* a config of a shape is its slot (the k-th stack) * stride + its NFA state */
        long long config = PyLong_AsLongLong(PyList_GET_ITEM(shape, i));
        long long base = (config / stride) * stride;
        PyObject *list = PyList_GET_ITEM(edges, (Py_ssize_t)(config % stride));
        /* checked above: a tuple of (lo, hi, target) triples, flat */
        for (Py_ssize_t j = 0; j + 2 < PyTuple_GET_SIZE(list) && n < total; j += 3) {
            own[n].lo = PyLong_AsLong(PyTuple_GET_ITEM(list, j));
            own[n].hi = PyLong_AsLong(PyTuple_GET_ITEM(list, j + 1));
            own[n].target = base + PyLong_AsLongLong(PyTuple_GET_ITEM(list, j + 2));
            n++;
        }
    }
    if (PyErr_Occurred()) {
        PyMem_Free(own);
        return NULL;
    }
    qsort(own, n, sizeof(Edge), by_range_then_target);
    /* the ranges of the cut, and where they overlap only in part: the Python cut */
    for (Py_ssize_t i = 1; i < n; i++) {
        int same = own[i].lo == own[i - 1].lo && own[i].hi == own[i - 1].hi;
        if (!same && own[i].lo <= own[i - 1].hi) {
            PyMem_Free(own);
            return PyObject_CallFunctionObjArgs(ITEM(ctx, C_PY_SHAPE_CUT), key, shape, NULL);
        }
    }
    /* the ranges' starts and ends as bytes, not lists of ints (two
     * containers fewer a shape: LazyByteDFA._shape_cut says why) */
    PyObject *starts = NULL, *stops = NULL, *targets = PyList_New(0), *into = PyList_New(0);
    unsigned char dead[256], start_bytes[256], stop_bytes[256];
    Py_ssize_t dead_count = 0, ranges = 0;
    long dead_from = 0;
    PyObject *result = NULL;
    if (targets == NULL || into == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i && own[i].lo == own[i - 1].lo && own[i].hi == own[i - 1].hi) {
            if (own[i].target != own[i - 1].target) {
                PyObject *target = PyLong_FromLongLong(own[i].target);
                if (target == NULL || PyList_Append(into, target) < 0) {
                    Py_XDECREF(target);
                    goto done;
                }
                Py_DECREF(target);
            }
            continue;
        }
        if (i) {
            if (append_targets(targets, into) < 0) {
                goto done;
            }
            if (PyList_SetSlice(into, 0, PyList_GET_SIZE(into), NULL) < 0) {
                goto done;
            }
        }
        if (own[i].lo < dead_from || own[i].lo > own[i].hi || own[i].hi > 255 || ranges >= 256) {
            PyErr_SetString(PyExc_ValueError, "_lazycore: an edge's byte range outside 0..255");
            goto done;
        }
        for (long b = dead_from; b < own[i].lo; b++) {
            dead[dead_count++] = (unsigned char)b;
        }
        dead_from = own[i].hi + 1;
        start_bytes[ranges] = (unsigned char)own[i].lo;
        stop_bytes[ranges++] = (unsigned char)own[i].hi;
        PyObject *target = PyLong_FromLongLong(own[i].target);
        if (target == NULL || PyList_Append(into, target) < 0) {
            Py_XDECREF(target);
            goto done;
        }
        Py_DECREF(target);
    }
    if (n && append_targets(targets, into) < 0) {
        goto done;
    }
    for (long b = dead_from; b < 256; b++) {
        dead[dead_count++] = (unsigned char)b;
    }
    PyObject *dead_bytes;
    if (dead_count) {
        dead_bytes = PyBytes_FromStringAndSize((const char *)dead, dead_count);
        if (dead_bytes == NULL) {
            goto done;
        }
    } else {
        dead_bytes = Py_None;
        Py_INCREF(dead_bytes);
    }
    starts = PyBytes_FromStringAndSize((const char *)start_bytes, ranges);
    stops = PyBytes_FromStringAndSize((const char *)stop_bytes, ranges);
    untracked(targets);
    if (starts != NULL && stops != NULL) {
        result = untracked(PyTuple_Pack(4, starts, stops, targets, dead_bytes));
    }
    Py_DECREF(dead_bytes);
    if (result != NULL && PyDict_SetItem(cuts, key, result) < 0) {
        Py_CLEAR(result);
    }
done:
    PyMem_Free(own);
    Py_XDECREF(starts);
    Py_XDECREF(stops);
    Py_XDECREF(targets);
    Py_XDECREF(into);
    return result;
}

/* LazyByteDFA._push: the stack ``stack`` with ``ret`` on top. New reference (an int). */
static PyObject *push(PyObject *ctx, long long stack, PyObject *ret) {
    /* keyed by stack * stride + ret, an int, as LazyByteDFA._push */
    long long stride = stride_of(ctx), top_state = PyLong_AsLongLong(ret);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (stack < 0 || top_state < 0 || top_state >= stride || stack > (LLONG_MAX - top_state) / stride) {
        PyErr_SetString(PyExc_IndexError, "_lazycore: a return state outside the NFA");
        return NULL;
    }
    PyObject *stack_object = PyLong_FromLongLong(stack);
    if (stack_object == NULL) {
        return NULL;
    }
    PyObject *key = PyLong_FromLongLong(stack * stride + top_state);
    if (key == NULL) {
        Py_DECREF(stack_object);
        return NULL;
    }
    PyObject *pushes = ITEM(ctx, C_PUSHES), *found;
    if (cached(pushes, key, &found) == 0) {
        PyObject *parent = ITEM(ctx, C_STACK_PARENT), *top = ITEM(ctx, C_STACK_TOP), *depth = ITEM(ctx, C_STACK_DEPTH);
        if (stack < 0 || stack >= PyList_GET_SIZE(depth)) {
            PyErr_SetString(PyExc_IndexError, "_lazycore: a stack not made");
        } else {
            long long below = PyLong_AsLongLong(PyList_GET_ITEM(depth, stack));
            PyObject *deeper = (below == -1 && PyErr_Occurred()) ? NULL : PyLong_FromLongLong(below + 1);
            found = PyLong_FromSsize_t(PyList_GET_SIZE(parent));
            if (deeper == NULL || found == NULL || PyList_Append(parent, stack_object) < 0
                    || PyList_Append(top, ret) < 0 || PyList_Append(depth, deeper) < 0
                    || PyDict_SetItem(pushes, key, found) < 0) {
                Py_CLEAR(found);
            }
            Py_XDECREF(deeper);
        }
    }
    Py_DECREF(key);
    Py_DECREF(stack_object);
    return found;
}

/* _LazyNFA.enter: definition ``d``'s start state; the Python method resolves
 * a definition on its first call. */
static long long enter(PyObject *ctx, PyObject *d) {
    Py_ssize_t index = PyLong_AsSsize_t(d);
    PyObject *resolved = ITEM(ctx, C_RESOLVED), *start_of = ITEM(ctx, C_START_OF);
    if (index >= 0 && index < PyByteArray_GET_SIZE(resolved) && index < PyList_GET_SIZE(start_of)
            && PyByteArray_AS_STRING(resolved)[index]) {
        return PyLong_AsLongLong(PyList_GET_ITEM(start_of, index));
    }
    if (PyErr_Occurred()) {
        return -1;
    }
    PyObject *start = PyObject_CallOneArg(ITEM(ctx, C_ENTER), d);
    if (start == NULL) {
        return -1;
    }
    long long value = PyLong_AsLongLong(start);
    Py_DECREF(start);
    return value;
}

/* Add ``value`` to the search of full_closure when it is new. */
static int visit(PyObject *seen, PyObject *todo, long long value) {
    PyObject *item = PyLong_FromLongLong(value);
    if (item == NULL) {
        return -1;
    }
    int known = PySet_Contains(seen, item);
    int status = known < 0 ? -1 : 0;
    if (known == 0 && (PySet_Add(seen, item) < 0 || PyList_Append(todo, item) < 0)) {
        status = -1;
    }
    Py_DECREF(item);
    return status;
}

static int stacks_keeper(PyObject *ctx, Store **keeper);
static long long keeper_push(Store *s, long long stack, PyObject *ret);
static int keeper_pop(Store *s, long long stack, long long *below, long long *back);

/* LazyByteDFA._closure's search without a depth bound: epsilon moves, calls
 * (push the return state, enter the callee) and returns (the end of a
 * definition pops the stack). The stacks are the native store's when it
 * keeps them (stacks_keeper), else the Python containers'. New reference
 * (a frozenset, cached). */
static PyObject *full_closure(PyObject *ctx, PyObject *config) {
    PyObject *eps = ITEM(ctx, C_EPS), *edges = ITEM(ctx, C_EDGES), *calls = ITEM(ctx, C_CALLS);
    PyObject *ends = ITEM(ctx, C_ENDS), *parent = ITEM(ctx, C_STACK_PARENT), *top = ITEM(ctx, C_STACK_TOP);
    long long size = stride_of(ctx), final = PyLong_AsLongLong(ITEM(ctx, C_FINAL));
    Store *keeper = NULL;
    if (PyErr_Occurred() || stacks_keeper(ctx, &keeper) < 0) {
        return NULL;
    }
    PyObject *seen = PySet_New(NULL), *todo = PyList_New(0), *kernel = PyList_New(0), *result = NULL;
    if (seen == NULL || todo == NULL || kernel == NULL || PySet_Add(seen, config) < 0
            || PyList_Append(todo, config) < 0) {
        goto done;
    }
    while (PyList_GET_SIZE(todo)) {
        Py_ssize_t last = PyList_GET_SIZE(todo) - 1;
        PyObject *current = PyList_GET_ITEM(todo, last);
        Py_INCREF(current);
        if (PyList_SetSlice(todo, last, last + 1, NULL) < 0) {
            Py_DECREF(current);
            goto done;
        }
        long long value = PyLong_AsLongLong(current);
        long long stack = value / size, base = stack * size;
        Py_ssize_t q = (Py_ssize_t)(value % size);
        if (value < 0 || q >= PyList_GET_SIZE(eps) || q >= PyList_GET_SIZE(edges) || q >= PyList_GET_SIZE(calls)
                || q >= PyByteArray_GET_SIZE(ends)) {
            Py_DECREF(current);
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_IndexError, "_lazycore: a configuration outside the NFA");
            }
            goto done;
        }
        int with_edges = PyObject_IsTrue(PyList_GET_ITEM(edges, q));
        if (with_edges < 0 || ((with_edges || q == final) && PyList_Append(kernel, current) < 0)) {
            Py_DECREF(current);
            goto done;
        }
        Py_DECREF(current);
        /* held: entering a definition may prune the NFA's lists of another fragment */
        PyObject *successors = PyList_GET_ITEM(eps, q), *called = PyList_GET_ITEM(calls, q);
        Py_INCREF(successors);
        Py_INCREF(called);
        int failed = !SEQUENCE(successors) || !PyTuple_Check(called);
        for (Py_ssize_t i = 0; !failed && i < PySequence_Fast_GET_SIZE(successors); i++) {
            long long t = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(successors, i));
            failed = (t == -1 && PyErr_Occurred()) || visit(seen, todo, base + t) < 0;
        }
        for (Py_ssize_t i = 0; !failed && i < PyTuple_GET_SIZE(called); i++) {
            PyObject *call = PyTuple_GET_ITEM(called, i);  /* (definition, return state) */
            if (!PyTuple_Check(call) || PyTuple_GET_SIZE(call) != 2) {
                failed = 1;
                break;
            }
            if (keeper != NULL) {
                long long on = keeper_push(keeper, stack, PyTuple_GET_ITEM(call, 1));
                long long start = on < 0 ? -1 : enter(ctx, PyTuple_GET_ITEM(call, 0));
                failed = on < 0 || PyErr_Occurred() || visit(seen, todo, on * size + start) < 0;
                continue;
            }
            PyObject *pushed = push(ctx, stack, PyTuple_GET_ITEM(call, 1));
            long long start = pushed == NULL ? -1 : enter(ctx, PyTuple_GET_ITEM(call, 0));
            long long on = pushed == NULL ? -1 : PyLong_AsLongLong(pushed);
            Py_XDECREF(pushed);
            failed = pushed == NULL || PyErr_Occurred() || visit(seen, todo, on * size + start) < 0;
        }
        Py_DECREF(successors);
        Py_DECREF(called);
        if (failed) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "_lazycore: the NFA's tables are not of the expected types");
            }
            goto done;
        }
        if (PyByteArray_AS_STRING(ends)[q] && stack && keeper != NULL) {
            long long below, back;
            if (keeper_pop(keeper, stack, &below, &back) < 0 || visit(seen, todo, below * size + back) < 0) {
                goto done;
            }
        } else if (PyByteArray_AS_STRING(ends)[q] && stack) {
            if (stack >= PyList_GET_SIZE(parent) || stack >= PyList_GET_SIZE(top)) {
                PyErr_SetString(PyExc_IndexError, "_lazycore: a stack not made");
                goto done;
            }
            long long below = PyLong_AsLongLong(PyList_GET_ITEM(parent, stack));
            long long back = PyLong_AsLongLong(PyList_GET_ITEM(top, stack));
            if (PyErr_Occurred() || visit(seen, todo, below * size + back) < 0) {
                goto done;
            }
        }
    }
    result = untracked(PyFrozenSet_New(kernel));
    if (result != NULL && PyDict_SetItem(ITEM(ctx, C_CLOSURES), config, result) < 0) {
        Py_CLEAR(result);
    }
done:
    Py_XDECREF(seen);
    Py_XDECREF(todo);
    Py_XDECREF(kernel);
    return result;
}

/* LazyByteDFA._closure: cached, or the NFA state's own closure on this stack
 * when no call or end is on the way (made afresh each time, not cached);
 * else the Python method. New reference. */
static PyObject *closure_of(PyObject *ctx, PyObject *config) {
    PyObject *closures = ITEM(ctx, C_CLOSURES), *found;
    int known = cached(closures, config, &found);
    if (known) {
        return found;  /* or NULL with the error */
    }
    if (!PyObject_IsTrue(ITEM(ctx, C_BOUNDED))) {
        long long stride = stride_of(ctx), value = PyLong_AsLongLong(config);
        if (value == -1 && PyErr_Occurred()) {
            return NULL;
        }
        long long stack = value / stride, base = stack * stride;
        PyObject *q = PyLong_FromLongLong(value % stride);
        if (q == NULL) {
            return NULL;
        }
        PyObject *locals = ITEM(ctx, C_LOCAL_CLOSURES);
        PyObject *local;
        if (cached(locals, q, &local) == 0) {
            local = local_closure_of(ctx, q);
            if (local != NULL && PyDict_SetItem(locals, q, local) < 0) {
                Py_CLEAR(local);
            }
        }
        Py_DECREF(q);
        if (local == NULL) {
            return NULL;
        }
        if (PyLong_Check(local)) {
            /* one NFA state (most): the frozenset of its configuration */
            long long t = PyLong_AsLongLong(local);
            Py_DECREF(local);
            PyObject *item = (t == -1 && PyErr_Occurred()) ? NULL : PyLong_FromLongLong(base + t);
            PyObject *result = item == NULL ? NULL : PyFrozenSet_New(NULL);
            if (result != NULL && PySet_Add(result, item) < 0) {
                Py_CLEAR(result);
            }
            Py_XDECREF(item);
            return untracked(result);
        }
        if (!PyTuple_Check(local)) {
            Py_DECREF(local);
            PyErr_SetString(PyExc_TypeError, "_lazycore: a local closure must be a tuple or an int");
            return NULL;
        }
        Py_ssize_t size = PyTuple_GET_SIZE(local);
        if (size > 0) {
            PyObject *result;
            if (base == 0) {
                result = untracked(PyFrozenSet_New(local));
            } else {
                PyObject *shifted = PyTuple_New(size);
                if (shifted == NULL) {
                    Py_DECREF(local);
                    return NULL;
                }
                for (Py_ssize_t i = 0; i < size; i++) {
                    long long t = PyLong_AsLongLong(PyTuple_GET_ITEM(local, i));
                    PyObject *item = (t == -1 && PyErr_Occurred()) ? NULL : PyLong_FromLongLong(base + t);
                    if (item == NULL) {
                        Py_DECREF(shifted);
                        Py_DECREF(local);
                        return NULL;
                    }
                    PyTuple_SET_ITEM(shifted, i, item);
                }
                result = untracked(PyFrozenSet_New(shifted));
                Py_DECREF(shifted);
            }
            Py_DECREF(local);
            return result;  /* not kept: LazyByteDFA._closure says why */
        }
        Py_DECREF(local);
        return full_closure(ctx, config);
    }
    return PyObject_CallOneArg(ITEM(ctx, C_PY_CLOSURE), config);
}

/* The configuration ``base + t`` (an int base), or ``base[t // stride] + t %
 * stride`` (a tuple of bases, one a slot); -1 with an exception. */
static long long configuration(PyObject *base, long long single, int slotted, long long stride, long long t) {
    if (!slotted) {
        return single + t;
    }
    Py_ssize_t slot = (Py_ssize_t)(t / stride);
    if (t < 0 || slot >= PyTuple_GET_SIZE(base)) {
        PyErr_SetString(PyExc_IndexError, "_lazycore: a target's slot outside its bases");
        return -1;
    }
    long long b = PyLong_AsLongLong(PyTuple_GET_ITEM(base, slot));
    return (b == -1 && PyErr_Occurred()) ? -1 : b + t % stride;
}

/* The state of one configuration, keyed by it (an int: LazyByteDFA._step
 * says why). New reference (an int). */
static PyObject *step_to(PyObject *ctx, long long config) {
    PyObject *key = PyLong_FromLongLong(config);
    if (key == NULL) {
        return NULL;
    }
    PyObject *steps = ITEM(ctx, C_STEPS), *found;
    if (cached(steps, key, &found) == 0) {
        PyObject *closed = closure_of(ctx, key);
        if (closed != NULL) {
            if (!PyFrozenSet_Check(closed)) {
                PyErr_SetString(PyExc_TypeError, "_lazycore: a closure must be a frozenset");
            } else if (cached(ITEM(ctx, C_IDS), closed, &found) == 0) {
                found = discover(ctx, closed);
            }
            if (found != NULL && PyDict_SetItem(steps, key, found) < 0) {
                Py_CLEAR(found);
            }
            Py_DECREF(closed);
        }
    }
    Py_DECREF(key);
    return found;
}

/* LazyByteDFA._step: ``targets`` a tuple, or one target as an int. New
 * reference (an int). */
static PyObject *step_of(PyObject *ctx, PyObject *targets, PyObject *base) {
    int one = PyLong_Check(targets);
    if (!one && !PyTuple_Check(targets)) {
        PyErr_SetString(PyExc_TypeError, "_lazycore: targets must be a tuple or an int");
        return NULL;
    }
    long long stride = stride_of(ctx);
    int slotted = PyTuple_Check(base);
    long long single = slotted ? 0 : PyLong_AsLongLong(base);
    if (stride <= 0 || (single == -1 && PyErr_Occurred())) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "_lazycore: the stride must be positive");
        }
        return NULL;
    }
    Py_ssize_t count = one ? 1 : PyTuple_GET_SIZE(targets);
    if (count == 1) {
        long long t = PyLong_AsLongLong(one ? targets : PyTuple_GET_ITEM(targets, 0));
        long long config = (t == -1 && PyErr_Occurred()) ? -1 : configuration(base, single, slotted, stride, t);
        return (config == -1 && PyErr_Occurred()) ? NULL : step_to(ctx, config);
    }
    /* several targets: keyed by their configurations packed as int64 in a
     * bytes, not a (base, targets) tuple (LazyByteDFA._step says why) */
    long long small[16], *configs = small;
    if (count > 16) {
        configs = PyMem_Malloc(sizeof(long long) * (size_t)count);
        if (configs == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
    }
    PyObject *key = NULL, *found = NULL, *closed = NULL, *gathered = NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        long long t = PyLong_AsLongLong(PyTuple_GET_ITEM(targets, i));
        configs[i] = (t == -1 && PyErr_Occurred()) ? -1 : configuration(base, single, slotted, stride, t);
        if (configs[i] == -1 && PyErr_Occurred()) {
            goto done;
        }
    }
    key = PyBytes_FromStringAndSize((const char *)configs, (Py_ssize_t)(sizeof(long long) * (size_t)count));
    if (key == NULL) {
        goto done;
    }
    PyObject *steps = ITEM(ctx, C_STEPS);
    if (cached(steps, key, &found)) {
        goto done;  /* found, or NULL with the error */
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *config_object = PyLong_FromLongLong(configs[i]);
        if (config_object == NULL) {
            goto done;
        }
        PyObject *part = closure_of(ctx, config_object);
        Py_DECREF(config_object);
        if (part == NULL) {
            goto done;
        }
        if (gathered == NULL) {
            gathered = PySet_New(part);
            Py_DECREF(part);
            if (gathered == NULL) {
                goto done;
            }
        } else {
            PyObject *merged = PyNumber_InPlaceOr(gathered, part);
            Py_DECREF(part);
            if (merged == NULL) {
                goto done;
            }
            Py_DECREF(merged);  /* the same set, updated in place */
        }
    }
    closed = untracked(gathered != NULL ? PyFrozenSet_New(gathered) : PyFrozenSet_New(NULL));
    if (closed == NULL) {
        goto done;
    }
    if (cached(ITEM(ctx, C_IDS), closed, &found) == 0) {
        found = discover(ctx, closed);
    }
    if (found != NULL && PyDict_SetItem(steps, key, found) < 0) {
        Py_CLEAR(found);
    }
done:
    if (configs != small) {
        PyMem_Free(configs);
    }
    Py_XDECREF(closed);
    Py_XDECREF(gathered);
    Py_XDECREF(key);
    return found;
}

static PyObject *kernel_at(PyObject *ctx, PyObject *state, Py_ssize_t index);
static PyObject *cut_of_kernel(PyObject *ctx, PyObject *state, PyObject *kernel);

/* LazyByteDFA._cut_of: a state's cut, from its shape's (on one stack, or
 * on several numbered as slots), DEAD written on the bytes outside it. New
 * reference. */
static PyObject *cut_of(PyObject *ctx, PyObject *state) {
    /* A state keeps its shape's cut (shared) and its base, in two dicts: a
     * 4-tuple kept a state is a container (LazyByteDFA._cut_of says why);
     * the one returned is made for the caller. */
    PyObject *cuts = ITEM(ctx, C_CUTS), *bases = ITEM(ctx, C_CUT_BASES), *found;
    int known = cached(cuts, state, &found);
    if (known < 0) {
        return NULL;
    }
    if (known) {
        PyObject *kept_base = PyDict_GetItemWithError(bases, state);  /* borrowed */
        PyObject *result = NULL;
        if (kept_base == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_KeyError, "_lazycore: a cut without its base");
            }
        } else if (!PyTuple_Check(found) || PyTuple_GET_SIZE(found) != 4) {
            PyErr_SetString(PyExc_TypeError, "_lazycore: a shape's cut must be a 4-tuple");
        } else {
            result = PyTuple_Pack(4, PyTuple_GET_ITEM(found, 0), PyTuple_GET_ITEM(found, 1),
                                  PyTuple_GET_ITEM(found, 2), kept_base);
        }
        Py_DECREF(found);
        return result;
    }
    Py_ssize_t index = PyLong_AsSsize_t(state);
    if (index == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *kernel = kernel_at(ctx, state, index);
    if (kernel == NULL) {
        return NULL;
    }
    PyObject *cut = cut_of_kernel(ctx, state, kernel);
    Py_DECREF(kernel);
    return cut;
}

/* cut_of for a state not cut yet, its kernel (borrowed) read. */
static PyObject *cut_of_kernel(PyObject *ctx, PyObject *state, PyObject *kernel) {
    PyObject *cuts = ITEM(ctx, C_CUTS), *bases = ITEM(ctx, C_CUT_BASES), *found;
    Py_ssize_t index = PyLong_AsSsize_t(state);  /* checked by cut_of */
    long long stride = stride_of(ctx), stack = -1;
    PyObject *shape = PyList_New(0);
    if (shape == NULL) {
        return NULL;
    }
    PyObject *configs = PyObject_GetIter(kernel), *config;
    if (configs == NULL) {
        Py_DECREF(shape);
        return NULL;
    }
    int several = 0;
    while ((config = PyIter_Next(configs)) != NULL) {
        long long value = PyLong_AsLongLong(config);
        Py_DECREF(config);  /* the kernel holds it */
        if (value == -1 && PyErr_Occurred()) {
            Py_DECREF(configs);
            Py_DECREF(shape);
            return NULL;
        }
        long long on = value / stride;
        if (on != stack) {
            if (stack >= 0) {
                several = 1;
                break;
            }
            stack = on;
        }
        PyObject *q = PyLong_FromLongLong(value % stride);
        if (q == NULL || PyList_Append(shape, q) < 0) {
            Py_XDECREF(q);
            Py_DECREF(configs);
            Py_DECREF(shape);
            return NULL;
        }
        Py_DECREF(q);
    }
    Py_DECREF(configs);
    if (PyErr_Occurred()) {
        Py_DECREF(shape);
        return NULL;
    }
    PyObject *key, *base = NULL;
    if (several) {
        /* configurations on several stacks (a counted string's digits): the
         * shape numbers the stacks in order, slot k standing for the k-th */
        Py_DECREF(shape);
        PyObject *sorted = PySequence_List(kernel);
        PyObject *bases = PyList_New(0);
        shape = PyList_New(0);
        if (sorted == NULL || bases == NULL || shape == NULL || PyList_Sort(sorted) < 0) {
            Py_XDECREF(sorted);
            Py_XDECREF(bases);
            Py_XDECREF(shape);
            return NULL;
        }
        long long last = -1, slot = -1;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(sorted); i++) {
            long long value = PyLong_AsLongLong(PyList_GET_ITEM(sorted, i));
            long long on = value / stride;
            PyObject *item = NULL, *stack_base = NULL;
            int failed = value == -1 && PyErr_Occurred();
            if (!failed && on != last) {
                last = on;
                slot++;
                stack_base = PyLong_FromLongLong(on * stride);
                failed = stack_base == NULL || PyList_Append(bases, stack_base) < 0;
                Py_XDECREF(stack_base);
            }
            if (!failed) {
                item = PyLong_FromLongLong(slot * stride + value % stride);
                failed = item == NULL || PyList_Append(shape, item) < 0;
                Py_XDECREF(item);
            }
            if (failed) {
                Py_DECREF(sorted);
                Py_DECREF(bases);
                Py_DECREF(shape);
                return NULL;
            }
        }
        Py_DECREF(sorted);
        key = untracked(PyList_AsTuple(shape));
        base = untracked(PyList_AsTuple(bases));
        Py_DECREF(bases);
        if (key == NULL || base == NULL) {
            Py_XDECREF(key);
            Py_XDECREF(base);
            Py_DECREF(shape);
            return NULL;
        }
    } else if (PyList_GET_SIZE(shape) == 1) {
        key = PyList_GET_ITEM(shape, 0);
        Py_INCREF(key);
    } else {
        key = untracked(PyFrozenSet_New(shape));
    }
    if (key == NULL) {
        Py_DECREF(shape);
        return NULL;
    }
    if (base == NULL) {
        base = PyLong_FromLongLong((stack > 0 ? stack : 0) * stride);
        if (base == NULL) {
            Py_DECREF(key);
            Py_DECREF(shape);
            return NULL;
        }
    }
    PyObject *cut;
    if (cached(ITEM(ctx, C_SHAPE_CUTS), key, &cut) == 0) {
        cut = shape_cut(ctx, key, shape);
    }
    Py_DECREF(key);
    Py_DECREF(shape);
    if (cut == NULL) {
        Py_DECREF(base);
        return NULL;
    }
    if (!PyTuple_Check(cut) || PyTuple_GET_SIZE(cut) != 4) {
        Py_DECREF(cut);
        Py_DECREF(base);
        PyErr_SetString(PyExc_TypeError, "_lazycore: a shape's cut must be a 4-tuple");
        return NULL;
    }
    PyObject *dead = PyTuple_GET_ITEM(cut, 3);
    if (dead != Py_None && write_cells(ctx, index, dead, 0, 0, DEAD) < 0) {
        Py_DECREF(cut);
        Py_DECREF(base);
        return NULL;
    }
    found = NULL;
    /* the base first: a cut kept is one whose base is there */
    if (PyDict_SetItem(bases, state, base) == 0 && PyDict_SetItem(cuts, state, cut) == 0) {
        found = PyTuple_Pack(4, PyTuple_GET_ITEM(cut, 0), PyTuple_GET_ITEM(cut, 1),
                             PyTuple_GET_ITEM(cut, 2), base);
    }
    Py_DECREF(base);
    Py_DECREF(cut);
    return found;
}

/* A cut's ranges (cut_of's 4-tuple): its starts and ends, bytes of one
 * length, and its targets, a list at least as long. The count of ranges, or
 * -1 with an exception. */
static Py_ssize_t cut_ranges(PyObject *cut, const unsigned char **starts, const unsigned char **ends) {
    PyObject *s = PyTuple_GET_ITEM(cut, 0), *e = PyTuple_GET_ITEM(cut, 1), *t = PyTuple_GET_ITEM(cut, 2);
    if (!PyBytes_Check(s) || !PyBytes_Check(e) || !PyList_Check(t) || PyBytes_GET_SIZE(s) != PyBytes_GET_SIZE(e)
            || PyList_GET_SIZE(t) < PyBytes_GET_SIZE(s)) {
        PyErr_SetString(PyExc_TypeError, "_lazycore: a cut's starts and ends must be bytes of one length, "
                        "its targets a list as long");
        return -1;
    }
    *starts = (const unsigned char *)PyBytes_AS_STRING(s);
    *ends = (const unsigned char *)PyBytes_AS_STRING(e);
    return PyBytes_GET_SIZE(s);
}

/* The last index i with items[i] <= value, or -1 (bisect_right - 1). */
static Py_ssize_t last_at_most(const unsigned char *items, Py_ssize_t count, long value) {
    Py_ssize_t lo = 0, hi = count;
    while (lo < hi) {
        Py_ssize_t middle = (lo + hi) / 2;
        if (value < (long)items[middle]) {
            hi = middle;
        } else {
            lo = middle + 1;
        }
    }
    return lo - 1;
}

static PyObject *py_closure(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arguments(nargs, 2, args, "closure(context, config)") < 0) {
        return NULL;
    }
    return closure_of(args[0], args[1]);
}

static PyObject *py_step(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arguments(nargs, 3, args, "step(context, targets, base)") < 0) {
        return NULL;
    }
    return step_of(args[0], args[1], args[2]);
}

static PyObject *py_cut_of(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arguments(nargs, 2, args, "cut_of(context, state)") < 0) {
        return NULL;
    }
    return cut_of(args[0], args[1]);
}

/* LazyByteDFA.step_held: the successor of an UNKNOWN cell, its range of the
 * cut written into the table. */
static PyObject *py_step_held(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arguments(nargs, 3, args, "step_held(context, state, byte)") < 0) {
        return NULL;
    }
    PyObject *ctx = args[0];
    long long state = PyLong_AsLongLong(args[1]);
    long byte = PyLong_AsLong(args[2]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (byte < 0 || byte > 255) {
        PyErr_SetString(PyExc_ValueError, "step_held: a byte is 0..255");
        return NULL;
    }
    PyObject *cut = cut_of(ctx, args[1]);
    if (cut == NULL) {
        return NULL;
    }
    const unsigned char *starts, *ends;
    Py_ssize_t ranges = cut_ranges(cut, &starts, &ends);
    if (ranges < 0) {
        Py_DECREF(cut);
        return NULL;
    }
    PyObject *targets = PyTuple_GET_ITEM(cut, 2), *base = PyTuple_GET_ITEM(cut, 3);
    Py_ssize_t at = last_at_most(starts, ranges, byte);
    if (at < 0 || byte > (long)ends[at]) {
        Py_DECREF(cut);
        return PyLong_FromLong(DEAD);  /* outside every range: the cut wrote DEAD there */
    }
    PyObject *successor = step_of(ctx, PyList_GET_ITEM(targets, at), base);
    if (successor != NULL) {
        /* after the step: it may have grown the table */
        long lo = starts[at], hi = ends[at];
        long long value = PyLong_AsLongLong(successor);
        if (PyErr_Occurred() || write_cells(ctx, state, NULL, lo, hi, (int32_t)value) < 0) {
            Py_CLEAR(successor);
        }
    }
    Py_DECREF(cut);
    return successor;
}

/* LazyByteDFA._resolve_bytes: every range of ``state``'s cut that holds a
 * byte of ``wanted`` (an int, bit b for byte b) resolved, in byte order. */
static int resolve_bytes(PyObject *ctx, PyObject *state_object, const unsigned char *bits);
static int resolve_bytes_held(PyObject *ctx, PyObject *state_object, const unsigned char *bits);

static PyObject *py_resolve_bytes(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    unsigned char bits[32];
    if (arguments(nargs, 3, args, "resolve_bytes(context, state, wanted)") < 0
            || wanted_bits(args[2], bits) < 0) {
        return NULL;
    }
    if (resolve_bytes(args[0], args[1], bits) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* The ranges of ``state``'s cut that hold a byte of ``bits`` (bit b for byte
 * b) resolved, in byte order, over the Python containers; 0, or -1 with an
 * exception (resolve_bytes uses the native state store where it can). */
static int resolve_bytes_held(PyObject *ctx, PyObject *state_object, const unsigned char *bits) {
    long long state = PyLong_AsLongLong(state_object);
    if (state == -1 && PyErr_Occurred()) {
        return -1;
    }
    PyObject *cut = cut_of(ctx, state_object);
    if (cut == NULL) {
        return -1;
    }
    const unsigned char *starts, *ends;
    Py_ssize_t ranges = cut_ranges(cut, &starts, &ends);
    if (ranges < 0) {
        Py_DECREF(cut);
        return -1;
    }
    PyObject *targets = PyTuple_GET_ITEM(cut, 2), *base = PyTuple_GET_ITEM(cut, 3);
    for (Py_ssize_t at = 0; at < ranges; at++) {
        long lo = starts[at], hi = ends[at];
        if (lo > hi) {
            PyErr_SetString(PyExc_ValueError, "_lazycore: a cut's range ends before it starts");
            Py_DECREF(cut);
            return -1;
        }
        int hit = 0;
        for (long b = lo; b <= hi && !hit; b++) {
            hit = (bits[b >> 3] >> (b & 7)) & 1;
        }
        if (!hit) {
            continue;
        }
        /* the range's first cell, read from the current table */
        Py_buffer view;
        int32_t *row = table_row(ctx, state, &view, 0);
        if (row == NULL) {
            Py_DECREF(cut);
            return -1;
        }
        int unknown = row[lo] == -1;
        PyBuffer_Release(&view);
        if (!unknown) {
            continue;
        }
        PyObject *successor = step_of(ctx, PyList_GET_ITEM(targets, at), base);
        long long value = successor == NULL ? -1 : PyLong_AsLongLong(successor);
        Py_XDECREF(successor);
        if (successor == NULL || PyErr_Occurred() || write_cells(ctx, state, NULL, lo, hi, (int32_t)value) < 0) {
            Py_DECREF(cut);
            return -1;
        }
    }
    Py_DECREF(cut);
    return 0;
}

/* LazyByteDFA.class_successor: the one state every byte of ``wanted`` (an
 * int, bit b for byte b) leads to from ``state``, its ranges resolved
 * first; DEAD when every one is dead, -2 when they part ways. */
static PyObject *py_class_successor(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    unsigned char bits[32];
    if (arguments(nargs, 3, args, "class_successor(context, state, wanted)") < 0
            || wanted_bits(args[2], bits) < 0 || resolve_bytes(args[0], args[1], bits) < 0) {
        return NULL;
    }
    Py_buffer view;
    const int32_t *row = table_row(args[0], PyLong_AsLongLong(args[1]), &view, 0);
    if (row == NULL) {
        return NULL;
    }
    long long found = -3;  /* no byte wanted yet */
    for (int b = 0; b < 256; b++) {
        if (!((bits[b >> 3] >> (b & 7)) & 1)) {
            continue;
        }
        if (found == -3) {
            found = row[b];
        } else if (row[b] != found) {
            found = -2;
            break;
        }
    }
    PyBuffer_Release(&view);
    return PyLong_FromLongLong(found == -3 ? DEAD : found);
}

/* Every UTF-8 sequence of a character of two or more bytes, as byte ranges
 * (lazydfa.WIDE_SEQUENCES; the module's WIDE_SEQUENCES, which a test holds
 * to it): {count, {lo, hi} x count}. */
static const int wide_sequences[8][9] = {
    {2, 0xC2, 0xDF, 0x80, 0xBF},
    {3, 0xE0, 0xE0, 0xA0, 0xBF, 0x80, 0xBF},
    {3, 0xE1, 0xEC, 0x80, 0xBF, 0x80, 0xBF},
    {3, 0xED, 0xED, 0x80, 0x9F, 0x80, 0xBF},
    {3, 0xEE, 0xEF, 0x80, 0xBF, 0x80, 0xBF},
    {4, 0xF0, 0xF0, 0x90, 0xBF, 0x80, 0xBF, 0x80, 0xBF},
    {4, 0xF1, 0xF3, 0x80, 0xBF, 0x80, 0xBF, 0x80, 0xBF},
    {4, 0xF4, 0xF4, 0x80, 0x8F, 0x80, 0xBF, 0x80, 0xBF},
};

/* A small set of NFA states: sorted, distinct. */
typedef struct {
    long long *items;
    Py_ssize_t count, capacity;
} States;

static int states_add(States *set, long long value) {
    Py_ssize_t at = 0;
    while (at < set->count && set->items[at] < value) {
        at++;
    }
    if (at < set->count && set->items[at] == value) {
        return 0;
    }
    if (set->count == set->capacity) {
        Py_ssize_t capacity = set->capacity ? 2 * set->capacity : 16;
        long long *grown = PyMem_Realloc(set->items, capacity * sizeof(long long));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        set->items = grown;
        set->capacity = capacity;
    }
    memmove(set->items + at + 1, set->items + at, (set->count - at) * sizeof(long long));
    set->items[at] = value;
    set->count++;
    return 0;
}

/* LazyByteDFA._nfa_wide_ends, compiled: the NFA states every character of
 * two or more bytes leads to from NFA state ``q`` by byte edges alone (a
 * frozenset; empty: every one dies), or None (see the Python method). In
 * Python ~30 us an NFA state: 5% of Snowplow/sp_0's steps, whose counted
 * strings have hundreds of NFA states in their kernels. */
static PyObject *nfa_wide_ends(PyObject *ctx, long long q) {
    PyObject *eps = ITEM(ctx, C_EPS), *edges = ITEM(ctx, C_EDGES), *calls = ITEM(ctx, C_CALLS);
    PyObject *ends = ITEM(ctx, C_ENDS);
    long long final = PyLong_AsLongLong(ITEM(ctx, C_FINAL));
    if (final == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (!PyList_Check(eps) || !PyList_Check(edges) || !PyList_Check(calls) || !PyByteArray_Check(ends)) {
        PyErr_SetString(PyExc_TypeError, "_lazycore: the NFA's tables are not lists and a bytearray");
        return NULL;
    }
    Py_ssize_t size = PyList_GET_SIZE(edges);
    if (PyList_GET_SIZE(eps) < size || PyList_GET_SIZE(calls) < size || PyByteArray_GET_SIZE(ends) < size) {
        PyErr_SetString(PyExc_ValueError, "_lazycore: the NFA's tables differ in length");
        return NULL;
    }
    States found = {0}, current = {0}, following = {0};
    int have_found = 0, undecided = 0;
    PyObject *result = NULL;
    for (int s = 0; s < 8 && !undecided; s++) {
        current.count = 0;
        if (states_add(&current, q) < 0) {
            goto done;
        }
        for (int position = 0; position < wide_sequences[s][0] && current.count && !undecided; position++) {
            long lo = wide_sequences[s][1 + 2 * position], hi = wide_sequences[s][2 + 2 * position];
            following.count = 0;
            for (Py_ssize_t i = 0; i < current.count && !undecided; i++) {
                long long node = current.items[i];
                if (node < 0 || node >= size) {
                    PyErr_SetString(PyExc_IndexError, "_lazycore: an NFA state outside the tables");
                    goto done;
                }
                if (position) {
                    PyObject *own_eps = PyList_GET_ITEM(eps, node), *own_calls = PyList_GET_ITEM(calls, node);
                    if (!SEQUENCE(own_eps) || !SEQUENCE(own_calls)) {
                        PyErr_SetString(PyExc_TypeError, "_lazycore: eps[q] and calls[q] must be tuples");
                        goto done;
                    }
                    if (PySequence_Fast_GET_SIZE(own_eps) || PySequence_Fast_GET_SIZE(own_calls)
                            || PyByteArray_AS_STRING(ends)[node] || node == final) {
                        undecided = 1;
                        break;
                    }
                }
                PyObject *own_edges = PyList_GET_ITEM(edges, node);
                if (!PyTuple_Check(own_edges) || PyTuple_GET_SIZE(own_edges) % 3) {
                    PyErr_SetString(PyExc_TypeError, "_lazycore: edges[q] is not a tuple (lo, hi, target, ...)");
                    goto done;
                }
                for (Py_ssize_t e = 0; e + 2 < PyTuple_GET_SIZE(own_edges); e += 3) {
                    long edge_lo = PyLong_AsLong(PyTuple_GET_ITEM(own_edges, e));
                    long edge_hi = PyLong_AsLong(PyTuple_GET_ITEM(own_edges, e + 1));
                    long long target = PyLong_AsLongLong(PyTuple_GET_ITEM(own_edges, e + 2));
                    if (PyErr_Occurred()) {
                        goto done;
                    }
                    if (edge_hi < lo || edge_lo > hi) {
                        continue;
                    }
                    if (edge_lo > lo || edge_hi < hi) {
                        undecided = 1;  /* the range's bytes part ways */
                        break;
                    }
                    if (states_add(&following, target) < 0) {
                        goto done;
                    }
                }
            }
            States swap = current;
            current = following;
            following = swap;
        }
        if (undecided) {
            break;
        }
        if (!have_found) {
            States swap = found;
            found = current;
            current = swap;
            have_found = 1;
        } else if (found.count != current.count
                   || (found.count && memcmp(found.items, current.items, found.count * sizeof(long long)))) {
            undecided = 1;
        }
    }
    if (undecided) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    PyObject *members = PyList_New(found.count);
    if (members == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < found.count; i++) {
        PyObject *item = PyLong_FromLongLong(found.items[i]);
        if (item == NULL) {
            Py_DECREF(members);
            goto done;
        }
        PyList_SET_ITEM(members, i, item);
    }
    result = untracked(PyFrozenSet_New(members));
    Py_DECREF(members);
done:
    PyMem_Free(found.items);
    PyMem_Free(current.items);
    PyMem_Free(following.items);
    return result;
}

/* LazyByteDFA._wide_targets: the configurations every character of two or
 * more bytes leads to from ``state``'s kernel (a sorted tuple), or None. */
static PyObject *py_wide_targets(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arguments(nargs, 2, args, "wide_targets(context, state)") < 0) {
        return NULL;
    }
    PyObject *ctx = args[0];
    Py_ssize_t index = PyLong_AsSsize_t(args[1]);
    PyObject *known = ITEM(ctx, C_WIDE_ENDS);
    if (index == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *kernel = kernel_at(ctx, args[1], index);
    if (kernel == NULL) {
        return NULL;
    }
    long long stride = stride_of(ctx);
    PyObject *targets = PySet_New(NULL), *configs = PyObject_GetIter(kernel);
    Py_DECREF(kernel);  /* the iterator holds it */
    PyObject *config, *result = NULL;
    if (targets == NULL || configs == NULL) {
        goto done;
    }
    while ((config = PyIter_Next(configs)) != NULL) {
        long long value = PyLong_AsLongLong(config);
        Py_DECREF(config);
        if (value == -1 && PyErr_Occurred()) {
            goto done;
        }
        long long q = value % stride, base = value - q;
        PyObject *q_object = PyLong_FromLongLong(q);
        if (q_object == NULL) {
            goto done;
        }
        PyObject *ends;
        if (cached(known, q_object, &ends) == 0) {
            ends = nfa_wide_ends(ctx, q);
            if (ends != NULL && PyDict_SetItem(known, q_object, ends) < 0) {
                Py_CLEAR(ends);
            }
        }
        Py_DECREF(q_object);
        if (ends == NULL) {
            goto done;
        }
        if (ends == Py_None) {
            Py_DECREF(ends);
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
        PyObject *each = PyObject_GetIter(ends), *end;
        Py_DECREF(ends);
        if (each == NULL) {
            goto done;
        }
        while ((end = PyIter_Next(each)) != NULL) {
            long long t = PyLong_AsLongLong(end);
            Py_DECREF(end);
            PyObject *target = (t == -1 && PyErr_Occurred()) ? NULL : PyLong_FromLongLong(base + t);
            if (target == NULL || PySet_Add(targets, target) < 0) {
                Py_XDECREF(target);
                Py_DECREF(each);
                goto done;
            }
            Py_DECREF(target);
        }
        Py_DECREF(each);
        if (PyErr_Occurred()) {
            goto done;
        }
    }
    if (PyErr_Occurred()) {
        goto done;
    }
    PyObject *ordered = PySequence_List(targets);
    if (ordered != NULL && PyList_Sort(ordered) == 0) {
        result = untracked(PyList_AsTuple(ordered));
    }
    Py_XDECREF(ordered);
done:
    Py_XDECREF(targets);
    Py_XDECREF(configs);
    return result;
}

/* _LazyNFA._alive: alive[q] for q in base..stop, q reaching ``end`` through
 * the fragment (a call passes where its definition is known to complete).
 * A bytearray of ``stop`` items (below base unused). Resolving a definition
 * on its first call runs it two or three times over the whole fragment:
 * ~17% of a cold row's walk on schemas with many definitions, in Python. */
static PyObject *py_alive(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "alive(eps, edges, calls, completes, base, stop, end)");
        return NULL;
    }
    PyObject *eps = args[0], *edges = args[1], *calls = args[2], *completes = args[3];
    Py_ssize_t base = PyLong_AsSsize_t(args[4]), stop = PyLong_AsSsize_t(args[5]), end = PyLong_AsSsize_t(args[6]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (!PyList_Check(eps) || !PyList_Check(edges) || !PyList_Check(calls) || !PyList_Check(completes)
            || base < 0 || stop < base || stop > PyList_GET_SIZE(eps) || stop > PyList_GET_SIZE(edges)
            || stop > PyList_GET_SIZE(calls) || end < base || end >= stop) {
        PyErr_SetString(PyExc_ValueError, "alive: a span outside the NFA's tables");
        return NULL;
    }
    Py_ssize_t size = stop - base;
    Py_ssize_t *first = PyMem_Calloc(size + 1, sizeof(Py_ssize_t));
    Py_ssize_t *sources = NULL, *todo = NULL;
    PyObject *alive = NULL;
    if (first == NULL) {
        return PyErr_NoMemory();
    }
    /* two passes over the arcs: count each target's predecessors, then place them */
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            for (Py_ssize_t i = 0; i < size; i++) {
                first[i + 1] += first[i];
            }
            sources = PyMem_Malloc(sizeof(Py_ssize_t) * (first[size] ? first[size] : 1));
            if (sources == NULL) {
                PyErr_NoMemory();
                goto done;
            }
        }
        Py_ssize_t *fill = pass == 1 ? PyMem_Calloc(size ? size : 1, sizeof(Py_ssize_t)) : NULL;
        if (pass == 1 && fill == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t q = base; q < stop; q++) {
            PyObject *out = PyList_GET_ITEM(eps, q), *by_byte = PyList_GET_ITEM(edges, q);
            PyObject *called = PyList_GET_ITEM(calls, q);
            Py_ssize_t n_out = SEQUENCE(out) ? PySequence_Fast_GET_SIZE(out) : -1;
            /* edges[q]: (lo, hi, target) triples, flat; n_byte counts the triples */
            Py_ssize_t n_byte = PyTuple_Check(by_byte) && PyTuple_GET_SIZE(by_byte) % 3 == 0
                                ? PyTuple_GET_SIZE(by_byte) / 3 : -1;
            Py_ssize_t n_called = PyTuple_Check(called) ? PyTuple_GET_SIZE(called) : -1;
            if (n_out < 0 || n_byte < 0 || n_called < 0) {
                PyErr_SetString(PyExc_TypeError, "alive: the NFA's tables are not of the expected types");
                PyMem_Free(fill);
                goto done;
            }
            for (Py_ssize_t i = 0; i < n_out + n_byte + n_called; i++) {
                Py_ssize_t target;
                if (i < n_out) {
                    target = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(out, i));
                } else if (i < n_out + n_byte) {
                    target = PyLong_AsSsize_t(PyTuple_GET_ITEM(by_byte, 3 * (i - n_out) + 2));
                } else {
                    PyObject *call = PyTuple_GET_ITEM(called, i - n_out - n_byte);
                    if (!PyTuple_Check(call) || PyTuple_GET_SIZE(call) != 2) {
                        target = -1;
                    } else {
                        Py_ssize_t d = PyLong_AsSsize_t(PyTuple_GET_ITEM(call, 0));
                        if (d < 0 || d >= PyList_GET_SIZE(completes)) {
                            target = -1;
                        } else {
                            int passes = PyObject_IsTrue(PyList_GET_ITEM(completes, d));
                            if (passes < 0) {
                                PyMem_Free(fill);
                                goto done;
                            }
                            if (!passes) {
                                continue;
                            }
                            target = PyLong_AsSsize_t(PyTuple_GET_ITEM(call, 1));
                        }
                    }
                }
                if (target < base || target >= stop) {
                    if (!PyErr_Occurred()) {
                        PyErr_SetString(PyExc_IndexError, "alive: an arc leaves the fragment");
                    }
                    PyMem_Free(fill);
                    goto done;
                }
                if (pass == 0) {
                    first[target - base + 1]++;
                } else {
                    sources[first[target - base] + fill[target - base]++] = q;
                }
            }
        }
        PyMem_Free(fill);
    }
    alive = PyByteArray_FromStringAndSize(NULL, stop);
    todo = PyMem_Malloc(sizeof(Py_ssize_t) * (size ? size : 1));
    if (alive == NULL || todo == NULL) {
        if (todo == NULL) {
            PyErr_NoMemory();
        }
        Py_CLEAR(alive);
        goto done;
    }
    char *flags = PyByteArray_AS_STRING(alive);
    memset(flags, 0, stop);
    Py_ssize_t pending = 0;
    flags[end] = 1;
    todo[pending++] = end;
    while (pending) {
        Py_ssize_t target = todo[--pending] - base;
        for (Py_ssize_t i = first[target]; i < first[target + 1]; i++) {
            Py_ssize_t source = sources[i];
            if (!flags[source]) {
                flags[source] = 1;
                todo[pending++] = source;
            }
        }
    }
done:
    PyMem_Free(first);
    PyMem_Free(sources);
    PyMem_Free(todo);
    return alive;
}

/* untrack_rows(rows, start, stop): each tuple of ``rows[start:stop]`` (a list),
 * and each tuple inside one, untracked by the cyclic collector when it
 * holds only ints: the NFA's eps and edges, built once and never in a
 * cycle. The collector would untrack them itself, but only after walking
 * them all in a collection of the young generation. */
static int only_ints(PyObject *tuple) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); i++) {
        if (!PyLong_CheckExact(PyTuple_GET_ITEM(tuple, i))) {
            return 0;
        }
    }
    return 1;
}

static PyObject *py_untrack_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    Py_ssize_t start = nargs == 3 ? PyLong_AsSsize_t(args[1]) : -1;
    Py_ssize_t stop = nargs == 3 ? PyLong_AsSsize_t(args[2]) : -1;
    if (nargs != 3 || !PyList_Check(args[0]) || start < 0 || stop < start) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "untrack_rows(rows: list, start: int >= 0, stop: int >= start)");
        }
        return NULL;
    }
    PyObject *rows = args[0];
    for (Py_ssize_t q = start; q < stop && q < PyList_GET_SIZE(rows); q++) {
        PyObject *row = PyList_GET_ITEM(rows, q);
        if (!PyTuple_CheckExact(row)) {
            continue;
        }
        int plain = 1;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(row); i++) {
            PyObject *item = PyTuple_GET_ITEM(row, i);
            if (PyTuple_CheckExact(item) && only_ints(item)) {
                if (PyObject_GC_IsTracked(item)) {
                    PyObject_GC_UnTrack(item);  /* an edge (lo, hi, target) */
                }
            } else if (!PyLong_CheckExact(item)) {
                plain = 0;
            }
        }
        if (plain && PyObject_GC_IsTracked(row)) {
            PyObject_GC_UnTrack(row);
        }
    }
    Py_RETURN_NONE;
}

/* untrack_table(rows): the list ``rows`` itself off the cyclic collector's
 * lists (an NFA's eps, edges or calls: rows of ints that no cycle passes
 * through). Built at the first mask, such a list is young during the first
 * steps, and each collection of the younger generations walked all of it:
 * up to 3.5 ms in one step (a 64k-state NFA), 17 of ~400 MaskBench-like
 * steps over 1 ms only because of the collector, 9 with the lists off. */
static PyObject *py_untrack_table(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 1 || !PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "untrack_table(rows: list)");
        return NULL;
    }
    if (PyObject_GC_IsTracked(args[0])) {
        PyObject_GC_UnTrack(args[0]);
    }
    Py_RETURN_NONE;
}

/* reserve_table(rows, need): the list ``rows``'s storage made to hold at
 * least ``need`` items (half as many again as ``need`` when it grows), its
 * items and length unchanged, the new part not written. The NFA's tables
 * grow by a fragment at each definition's first call: list.extend's own
 * growth (an eighth) moved them at nearly every call, into newly written
 * pages, a page fault for each 4 KiB in a fresh fork of a warm process. */
static PyObject *py_reserve_table(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2 || !PyList_CheckExact(args[0]) || !PyLong_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "reserve_table(rows: list, need: int)");
        return NULL;
    }
    Py_ssize_t need = PyLong_AsSsize_t(args[1]);
    if (need == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyListObject *list = (PyListObject *)args[0];
    if (need <= list->allocated) {
        Py_RETURN_NONE;
    }
    if (need > (PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(PyObject *)) / 2) {
        return PyErr_NoMemory();
    }
    Py_ssize_t capacity = need + need / 2;
    PyObject **items = PyMem_Realloc(list->ob_item, (size_t)capacity * sizeof(PyObject *));
    if (items == NULL) {
        return PyErr_NoMemory();
    }
    list->ob_item = items;
    list->allocated = capacity;
    Py_RETURN_NONE;
}

/* untrack_node(node, key, fields, calls): a regex tree node just made and
 * interned (regex_tree), with its intern key, its tuple field (children or
 * ranges; None without one) and the frozenset of definitions it calls, off
 * the cyclic collector's lists. Nodes are immutable and made after what
 * they hold, so none is part of a cycle, unless a key it calls is an object
 * that could later refer back to it: the node stays tracked when a key is
 * one the collector follows (placeholders are str, int, or tuples of them). A schema's trees
 * are most of what a lazy index keeps alive (sp_0: 12,700 of 13,900
 * tracked objects left after MaskBench's walk), and each full collection
 * walked them all. */
/* Whether the collector need not follow ``object``: one it does not track,
 * or a tuple of such (untracked here, as the collector itself would at its
 * next collection), ``depth`` levels down at most. */
static int settled(PyObject *object, int depth) {
    if (!PyObject_GC_IsTracked(object)) {
        return 1;
    }
    if (depth == 0 || !PyTuple_CheckExact(object)) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(object); i++) {
        if (!settled(PyTuple_GET_ITEM(object, i), depth - 1)) {
            return 0;
        }
    }
    PyObject_GC_UnTrack(object);
    return 1;
}

static PyObject *py_untrack_node(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4 || !PyTuple_CheckExact(args[1]) || !PyFrozenSet_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "untrack_node(node, key: tuple, fields: tuple | None, calls: frozenset)");
        return NULL;
    }
    PyObject *node = args[0], *key = args[1], *fields = args[2], *calls = args[3];
    if (PyObject_GC_IsTracked(calls)) {
        PyObject *keys = PyObject_GetIter(calls);
        if (keys == NULL) {
            return NULL;
        }
        PyObject *item;
        int plain = 1;
        while (plain && (item = PyIter_Next(keys)) != NULL) {
            plain = settled(item, 4);
            Py_DECREF(item);
        }
        Py_DECREF(keys);
        if (PyErr_Occurred()) {
            return NULL;
        }
        if (!plain) {
            Py_RETURN_NONE;
        }
        PyObject_GC_UnTrack(calls);
    }
    if (PyObject_GC_IsTracked(key)) {
        PyObject_GC_UnTrack(key);
    }
    if (PyTuple_CheckExact(fields) && PyObject_GC_IsTracked(fields)) {
        PyObject_GC_UnTrack(fields);
    }
    if (PyObject_GC_IsTracked(node)) {
        PyObject_GC_UnTrack(node);
    }
    Py_RETURN_NONE;
}

static PyObject *py_nfa_wide_ends(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arguments(nargs, 2, args, "nfa_wide_ends(context, q)") < 0) {
        return NULL;
    }
    long long q = PyLong_AsLongLong(args[1]);
    if (q == -1 && PyErr_Occurred()) {
        return NULL;
    }
    return nfa_wide_ends(args[0], q);
}

/* The sequences of nfa_wide_ends, as lazydfa.WIDE_SEQUENCES spells them. */
static PyObject *py_wide_sequences(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    PyObject *all = PyTuple_New(8);
    for (int s = 0; all != NULL && s < 8; s++) {
        PyObject *sequence = PyTuple_New(wide_sequences[s][0]);
        if (sequence == NULL) {
            Py_CLEAR(all);
            break;
        }
        PyTuple_SET_ITEM(all, s, sequence);
        for (int position = 0; position < wide_sequences[s][0]; position++) {
            PyObject *range = Py_BuildValue("(ii)", wide_sequences[s][1 + 2 * position],
                                            wide_sequences[s][2 + 2 * position]);
            if (range == NULL) {
                Py_CLEAR(all);
                break;
            }
            PyTuple_SET_ITEM(sequence, position, range);
        }
    }
    return all;
}

/* --- the native state store -------------------------------------------------
 *
 * The states of the automaton, their kernels and the call stacks, kept in
 * arrays owned by C, so that a cell is resolved without the GIL: by the
 * token walk (tokendfa.lazy._cwalk, between its passes, through the capsule
 * ``_C_API``; see LazyCoreAPI) and by resolve_bytes (whole and partial
 * rows). A cell's cut (at its byte only), the closure of the configurations
 * it leads to, the kernel's id and a new state's discovery are computed
 * here over:
 *
 *   - every kernel the automaton has (sorted configurations, one pool) and an
 *     open-addressing table kernel -> id (LazyByteDFA's ``_kernels`` and
 *     ``_ids`` hold only those Python discovered or read: see below);
 *   - one configuration -> its state (the single-target steps);
 *   - the call stacks (parent, top, depth; stack * stride + return state ->
 *     stack; ``_stack_parent``, ``_stack_top``, ``_stack_depth`` and
 *     ``_pushes`` hold those made before the store and those published);
 *   - each NFA state's edges, epsilon moves, calls, end flag and local
 *     closure (no call or end on the way), and each entered definition's
 *     start, copied from the NFA with the GIL the first time a cell needs
 *     them, with the states around them in their fragment (they never
 *     change once a fragment is entered).
 *
 * What it cannot do alone it hands back, with the GIL, to the compiled core
 * over the Python containers (py_step_held): a call of a definition not
 * entered yet (entering it compiles it, in Python), a depth bound, a full
 * table or the state bound. The store is the record of its states and
 * stacks: the count is published to the automaton before any Python runs on
 * it (before a hand-back, at a limits check every 64 new states, and when
 * the walk or row ends); the core over the Python containers reads a kernel
 * from the store (kernel_at), looks a kernel up there (store_id_of), pushes
 * and pops the store's stacks (stacks_keeper) and numbers a state it
 * discovers after the store's (discover), which alone goes into
 * ``_kernels`` (a dict keyed by state) and ``_ids``; the rest is published
 * only for a reader of the containers (store_publish). The states Python
 * discovered are copied into the store when a walk opens it and after each
 * hand-back. Everything runs under the automaton's resolving lock, which the
 * caller holds. Every index read here is checked against the arrays'
 * lengths, and every value copied from the NFA against the NFA's and a
 * byte's bounds: a bad state, NFA state, edge or stack gives a hand-back or
 * an error, never a read or write out of bounds. */

#define NEED_GIL (-2)

enum { WANT_PYTHON, WANT_EDGES, WANT_LOCAL, WANT_CHECK, WANT_NFA, WANT_DEF };

struct Store {
    long long stride, final, max_states;
    int bounded;
    int64_t *pool;                 /* the kernels' configurations, one after another */
    size_t pool_len, pool_cap;
    size_t *koff;                  /* state s is pool[koff[s]:koff[s + 1]] */
    size_t count, koff_cap;        /* states known to the store */
    size_t published;              /* states in the Python containers too (_kernels, _ids) */
    int32_t *ids;                  /* kernel -> state + 1 (0: empty), open addressing */
    size_t ids_cap;
    int64_t *step_keys;            /* one configuration -> its state (-1: empty) */
    int32_t *step_values;
    size_t steps_cap, steps_count;
    int64_t *local_at;             /* NFA state -> offset in local_pool, -1 unknown, -2 not local */
    int32_t *local_len;
    int64_t *local_pool;
    size_t local_pool_len, local_pool_cap;
    int64_t *edge_at;              /* NFA state -> offset in edge_pool, -1 unknown */
    int32_t *edge_len;
    Edge *edge_pool;
    size_t edge_pool_len, edge_pool_cap;
    size_t nfa_cap;                /* length of the per-NFA-state arrays */
    int64_t *scratch;
    size_t scratch_cap;
    int64_t *targets;
    size_t targets_cap;
    uint32_t *stamps;              /* NFA state -> the fill that last visited it */
    size_t stamps_cap, stamps_seen;
    uint32_t stamp;
    uint32_t *marks;               /* NFA state -> the region fill that last queued it */
    size_t marks_cap, marks_seen;
    uint32_t mark;
    int64_t *queue;
    size_t queue_cap;
    /* the NFA's epsilon moves, calls and ends, for closures through calls */
    int64_t *eps_at, *calls_at;    /* NFA state -> offset in eps_pool / calls_pool */
    int32_t *eps_len, *calls_len;
    uint8_t *ends, *nfa_filled;
    int64_t *eps_pool, *calls_pool;  /* calls_pool: (definition, return state) pairs */
    size_t eps_pool_len, eps_pool_cap, calls_pool_len, calls_pool_cap;
    int64_t *def_start;            /* definition -> its fragment's start, -1 not entered (yet) */
    size_t def_cap;
    /* the call stacks (LazyByteDFA._stack_parent, _stack_top, _stack_depth, _pushes) */
    int64_t *stack_parent, *stack_top, *stack_depth;
    size_t stacks, stacks_cap, stacks_published;
    int64_t *push_keys;            /* stack * stride + return state -> the stack it pushes (-1: empty) */
    int32_t *push_values;
    size_t pushes_cap, pushes_count;
    int64_t *seen_keys;            /* a closure's configurations, open addressing with a generation */
    uint32_t *seen_gen;
    size_t seen_cap, seen_count;
    uint32_t generation;
    int64_t *todo;
    size_t todo_cap;
    /* a counted class's chain (class_chain): each NFA state's wide ends
     * (LazyByteDFA._wide_ends) and each state's wide target, once known */
    int64_t *wide_at;              /* NFA state -> offset in wide_pool, -1 unknown, -2 the NFA does not show them */
    int32_t *wide_len;
    size_t wide_cap;
    int64_t *wide_pool;
    size_t wide_pool_len, wide_pool_cap;
    int64_t *wide_state;           /* state -> its wide target, WIDE_UNKNOWN or WIDE_ASK */
    size_t wide_state_cap;
    /* state -> 1 once store_fast wrote DEAD on the bytes its cut leaves out
     * (they never change after): each later cell of the row skips that
     * pass over the 256 bytes, half of store_fast's time (perf annotate on
     * MaskBench's 250-1500 us steps) */
    uint8_t *cut_written;
    size_t cut_written_cap;
    unsigned long long cut_passes;  /* those passes made (store_info) */
    int want;                      /* why the last store_fast needs the GIL */
    long long want_q;
    unsigned fresh;                /* states discovered since the last limits check */
    unsigned long long fast_found, fast_discovered, handed_back;
    unsigned long long publishes;  /* store_publish calls (LazyByteDFA._publish) */
    unsigned long long kernels_lent;  /* kernels made for a reader, not published (kernel_at) */
    unsigned long long store_ids;     /* ids of unpublished kernels read from the store (store_id_of) */
    unsigned long long why[3];     /* fast-path refusals by reason (store_info): a state the store
                                    * does not have, a call of a definition not entered (or a
                                    * closure it could not finish), the state bound or a full table */
};

/* ``*items`` grown to hold ``need`` items of ``size`` bytes (doubling); -1
 * when out of memory (no exception: it may run without the GIL). */
static int reserve(void **items, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) {
        return 0;
    }
    size_t grown = *cap ? *cap : 16;
    while (grown < need) {
        grown *= 2;
    }
    void *moved = realloc(*items, grown * size);
    if (moved == NULL) {
        return -1;
    }
    *items = moved;
    *cap = grown;
    return 0;
}

static void store_free(Store *s) {
    if (s == NULL) {
        return;
    }
    free(s->pool); free(s->koff); free(s->ids); free(s->step_keys); free(s->step_values);
    free(s->local_at); free(s->local_len); free(s->local_pool); free(s->edge_at); free(s->edge_len);
    free(s->edge_pool); free(s->scratch); free(s->targets); free(s->stamps); free(s->marks); free(s->queue);
    free(s->eps_at); free(s->calls_at); free(s->eps_len); free(s->calls_len); free(s->ends); free(s->nfa_filled);
    free(s->eps_pool); free(s->calls_pool); free(s->def_start); free(s->stack_parent); free(s->stack_top);
    free(s->stack_depth); free(s->push_keys); free(s->push_values); free(s->seen_keys); free(s->seen_gen);
    free(s->todo); free(s->wide_at); free(s->wide_len); free(s->wide_pool); free(s->wide_state);
    free(s->cut_written);
    free(s);
}

static uint64_t kernel_hash(const int64_t *k, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint64_t)k[i] + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

static uint64_t config_hash(int64_t c) {
    uint64_t h = (uint64_t)c * 0x9E3779B97F4A7C15ULL;
    return h ^ (h >> 29);
}

/* The state of kernel ``k`` (``n`` sorted configurations), or -1. */
static int64_t ids_find(const Store *s, const int64_t *k, size_t n) {
    if (!s->ids_cap) {
        return -1;
    }
    size_t mask = s->ids_cap - 1;
    for (size_t i = kernel_hash(k, n) & mask;; i = (i + 1) & mask) {
        int32_t v = s->ids[i];
        if (!v) {
            return -1;
        }
        size_t state = (size_t)v - 1, from = s->koff[state], len = s->koff[state + 1] - from;
        if (len == n && !memcmp(s->pool + from, k, n * sizeof(int64_t))) {
            return (int64_t)state;
        }
    }
}

static void ids_place(int32_t *ids, size_t cap, const Store *s, size_t state) {
    size_t from = s->koff[state], mask = cap - 1;
    size_t i = kernel_hash(s->pool + from, s->koff[state + 1] - from) & mask;
    while (ids[i]) {
        i = (i + 1) & mask;
    }
    ids[i] = (int32_t)(state + 1);
}

/* Kernel ``k`` appended as state ``s->count``; the state, or -1 out of memory. */
static int64_t store_add(Store *s, const int64_t *k, size_t n) {
    if (s->count >= (size_t)INT32_MAX - 1
            || reserve((void **)&s->pool, &s->pool_cap, s->pool_len + n, sizeof(int64_t)) < 0
            || reserve((void **)&s->koff, &s->koff_cap, s->count + 2, sizeof(size_t)) < 0) {
        return -1;
    }
    if ((s->count + 1) * 2 > s->ids_cap) {
        size_t cap = s->ids_cap ? s->ids_cap * 2 : 64;
        while ((s->count + 1) * 2 > cap) {
            cap *= 2;
        }
        int32_t *ids = calloc(cap, sizeof(int32_t));
        if (ids == NULL) {
            return -1;
        }
        for (size_t state = 0; state < s->count; state++) {
            ids_place(ids, cap, s, state);
        }
        free(s->ids);
        s->ids = ids;
        s->ids_cap = cap;
    }
    if (s->count == 0) {
        s->koff[0] = 0;
    }
    memcpy(s->pool + s->pool_len, k, n * sizeof(int64_t));
    s->pool_len += n;
    size_t state = s->count++;
    s->koff[state + 1] = s->pool_len;
    ids_place(s->ids, s->ids_cap, s, state);
    return (int64_t)state;
}

static int64_t steps_find(const Store *s, int64_t c) {
    if (!s->steps_cap) {
        return -1;
    }
    size_t mask = s->steps_cap - 1;
    for (size_t i = config_hash(c) & mask;; i = (i + 1) & mask) {
        if (s->step_keys[i] == -1) {
            return -1;
        }
        if (s->step_keys[i] == c) {
            return s->step_values[i];
        }
    }
}

/* An open-addressing map of int64 keys (-1: empty) to int32 values, twice
 * as many slots, its entries placed again; -1 out of memory (the map kept). */
static int map_grow(int64_t **keys_at, int32_t **values_at, size_t *cap_at) {
    size_t old = *cap_at, cap = old ? old * 2 : 64;
    int64_t *keys = malloc(cap * sizeof(int64_t)), *old_keys = *keys_at;
    int32_t *values = malloc(cap * sizeof(int32_t)), *old_values = *values_at;
    if (keys == NULL || values == NULL) {
        free(keys);
        free(values);
        return -1;
    }
    memset(keys, 0xff, cap * sizeof(int64_t));
    for (size_t i = 0; i < old; i++) {
        if (old_keys[i] != -1) {
            size_t j = config_hash(old_keys[i]) & (cap - 1);
            while (keys[j] != -1) {
                j = (j + 1) & (cap - 1);
            }
            keys[j] = old_keys[i];
            values[j] = old_values[i];
        }
    }
    free(old_keys);
    free(old_values);
    *keys_at = keys;
    *values_at = values;
    *cap_at = cap;
    return 0;
}

/* Remember one configuration's state (nothing when out of memory: a cache). */
static void steps_add(Store *s, int64_t c, int64_t state) {
    if ((s->steps_count + 1) * 2 > s->steps_cap
            && map_grow(&s->step_keys, &s->step_values, &s->steps_cap) < 0) {
        return;
    }
    size_t mask = s->steps_cap - 1, i = config_hash(c) & mask;
    while (s->step_keys[i] != -1) {
        if (s->step_keys[i] == c) {
            return;
        }
        i = (i + 1) & mask;
    }
    s->step_keys[i] = c;
    s->step_values[i] = (int32_t)state;
    s->steps_count++;
}

static int by_value(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* items[0:n] ascending: by insertion up to SORT_INSERTION items (a cell's
 * targets and most kernels: a few to a few tens), else qsort. glibc's qsort
 * calls by_value through a pointer for each comparison and takes a buffer
 * from malloc past 1 kB: 0.6% of MaskBench's 250-1500 us steps (perf) went
 * to msort_with_tmp and by_value under store_fast and store_state_of. */
#define SORT_INSERTION 32
static void sort_values(int64_t *items, size_t n) {
    if (n > SORT_INSERTION) {
        qsort(items, n, sizeof(int64_t), by_value);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        int64_t item = items[i];
        size_t j = i;
        while (j > 0 && items[j - 1] > item) {
            items[j] = items[j - 1];
            j--;
        }
        items[j] = item;
    }
}

/* items[0:n] sorted and their repeats dropped: the count kept. */
static ALWAYS_INLINE size_t sort_distinct(int64_t *items, size_t n) {
    sort_values(items, n);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (!kept || items[kept - 1] != items[i]) {
            items[kept++] = items[i];
        }
    }
    return kept;
}

/* ``*array`` reallocated to ``cap`` items of ``size`` bytes; -1 out of memory
 * (the old array kept). */
static int grow_to(void **array, size_t cap, size_t size) {
    if (cap > SIZE_MAX / size) {
        return -1;
    }
    void *grown = realloc(*array, cap * size);
    if (grown == NULL) {
        return -1;
    }
    *array = grown;
    return 0;
}

/* ``item``, an NFA state below ``size``, in ``*state``; -1 with the error
 * set (``what`` names it) otherwise. */
static int read_nfa_state(PyObject *item, Py_ssize_t size, const char *what, long long *state) {
    long long t = PyLong_AsLongLong(item);
    if (t == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (t < 0 || t >= size) {
        PyErr_Format(PyExc_IndexError, "_lazycore: %s outside the NFA", what);
        return -1;
    }
    *state = t;
    return 0;
}

/* A new visit over ``size`` NFA states: ``*visits`` (NFA state -> the visit
 * that last saw it; ``*seen`` entries initialised) long enough, and
 * ``*current`` a number no entry holds yet (all cleared when it wraps), so
 * a visit needs no clearing pass; -1 out of memory. */
static int next_visit(uint32_t **visits, size_t *cap, size_t *seen, uint32_t *current, size_t size) {
    if (reserve((void **)visits, cap, size, sizeof(uint32_t)) < 0) {
        return -1;
    }
    if (*seen < size) {
        memset(*visits + *seen, 0, (size - *seen) * sizeof(uint32_t));
        *seen = size;
    }
    if (++*current == 0) {  /* wrapped: every visit cleared */
        memset(*visits, 0, *seen * sizeof(uint32_t));
        *current = 1;
    }
    return 0;
}

/* The per-NFA-state arrays long enough for NFA state ``q``; -1 out of memory. */
static int store_reach(Store *s, size_t q) {
    if (q < s->nfa_cap) {
        return 0;
    }
    size_t cap = s->nfa_cap ? s->nfa_cap : 256;
    while (cap <= q) {
        cap *= 2;
    }
    if (grow_to((void **)&s->local_at, cap, sizeof(int64_t)) < 0
            || grow_to((void **)&s->edge_at, cap, sizeof(int64_t)) < 0
            || grow_to((void **)&s->local_len, cap, sizeof(int32_t)) < 0
            || grow_to((void **)&s->edge_len, cap, sizeof(int32_t)) < 0
            || grow_to((void **)&s->eps_at, cap, sizeof(int64_t)) < 0
            || grow_to((void **)&s->calls_at, cap, sizeof(int64_t)) < 0
            || grow_to((void **)&s->eps_len, cap, sizeof(int32_t)) < 0
            || grow_to((void **)&s->calls_len, cap, sizeof(int32_t)) < 0
            || grow_to((void **)&s->ends, cap, 1) < 0
            || grow_to((void **)&s->nfa_filled, cap, 1) < 0) {
        return -1;   /* the arrays grown so far are longer than nfa_cap: harmless */
    }
    for (size_t i = s->nfa_cap; i < cap; i++) {
        s->local_at[i] = -1;
        s->edge_at[i] = -1;
        s->local_len[i] = 0;
        s->edge_len[i] = 0;
        s->eps_at[i] = s->calls_at[i] = 0;
        s->eps_len[i] = s->calls_len[i] = 0;
        s->ends[i] = s->nfa_filled[i] = 0;
    }
    s->nfa_cap = cap;
    return 0;
}

/* The three stack arrays long enough for ``need`` stacks, grown together
 * (doubling; they share stacks_cap, set once all three have grown); -1 out
 * of memory (those grown so far are longer than stacks_cap: harmless). */
static int stacks_reach(Store *s, size_t need) {
    if (need <= s->stacks_cap) {
        return 0;
    }
    size_t cap = s->stacks_cap ? s->stacks_cap : 16;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            return -1;
        }
        cap *= 2;
    }
    if (grow_to((void **)&s->stack_parent, cap, sizeof(int64_t)) < 0
            || grow_to((void **)&s->stack_top, cap, sizeof(int64_t)) < 0
            || grow_to((void **)&s->stack_depth, cap, sizeof(int64_t)) < 0) {
        return -1;
    }
    s->stacks_cap = cap;
    return 0;
}

/* The stack ``stack`` with ``ret`` on top (LazyByteDFA._push), made when
 * new; -1 out of memory (no exception: it may run without the GIL). */
static int64_t store_push(Store *s, int64_t stack, int64_t ret) {
    int64_t key = stack * s->stride + ret;
    if (s->pushes_cap) {
        size_t mask = s->pushes_cap - 1;
        for (size_t i = config_hash(key) & mask;; i = (i + 1) & mask) {
            if (s->push_keys[i] == -1) {
                break;
            }
            if (s->push_keys[i] == key) {
                return s->push_values[i];
            }
        }
    }
    if ((s->pushes_count + 1) * 2 > s->pushes_cap
            && map_grow(&s->push_keys, &s->push_values, &s->pushes_cap) < 0) {
        return -1;
    }
    if (s->stacks >= (size_t)INT32_MAX - 1 || stacks_reach(s, s->stacks + 1) < 0) {
        return -1;
    }
    int64_t made = (int64_t)s->stacks++;
    s->stack_parent[made] = stack;
    s->stack_top[made] = ret;
    s->stack_depth[made] = stack >= 0 && stack < made ? s->stack_depth[stack] + 1 : 0;
    size_t mask = s->pushes_cap - 1, i = config_hash(key) & mask;
    while (s->push_keys[i] != -1) {
        i = (i + 1) & mask;
    }
    s->push_keys[i] = key;
    s->push_values[i] = (int32_t)made;
    s->pushes_count++;
    return made;
}

/* Whether ``config`` was seen in the closure under way (and mark it); -1
 * out of memory. */
static int closure_seen(Store *s, int64_t config) {
    if ((s->seen_count + 1) * 2 > s->seen_cap) {
        size_t cap = s->seen_cap ? s->seen_cap * 2 : 256;
        int64_t *keys = malloc(cap * sizeof(int64_t));
        uint32_t *gens = calloc(cap, sizeof(uint32_t));
        if (keys == NULL || gens == NULL) {
            free(keys);
            free(gens);
            return -1;
        }
        for (size_t i = 0; i < s->seen_cap; i++) {
            if (s->seen_gen[i] == s->generation) {
                size_t j = config_hash(s->seen_keys[i]) & (cap - 1);
                while (gens[j] == s->generation) {
                    j = (j + 1) & (cap - 1);
                }
                keys[j] = s->seen_keys[i];
                gens[j] = s->generation;
            }
        }
        free(s->seen_keys);
        free(s->seen_gen);
        s->seen_keys = keys;
        s->seen_gen = gens;
        s->seen_cap = cap;
    }
    size_t mask = s->seen_cap - 1;
    for (size_t i = config_hash(config) & mask;; i = (i + 1) & mask) {
        if (s->seen_gen[i] != s->generation) {
            s->seen_gen[i] = s->generation;
            s->seen_keys[i] = config;
            s->seen_count++;
            return 0;
        }
        if (s->seen_keys[i] == config) {
            return 1;
        }
    }
}

/* The closure of ``config`` through calls and ends (LazyByteDFA._closure
 * without a depth bound), its kernel configurations appended to s->scratch
 * from ``closed`` on: the new length, or NEED_GIL (an NFA state not copied,
 * a definition not entered, out of memory) with the reason in s->want. */
static int64_t store_full_closure(Store *s, int64_t config, size_t closed) {
    long long stride = s->stride;
    if (++s->generation == 0) {  /* wrapped: every mark cleared */
        if (s->seen_gen != NULL) {
            memset(s->seen_gen, 0, s->seen_cap * sizeof(uint32_t));
        }
        s->generation = 1;
    }
    s->seen_count = 0;
    size_t todo = 0;
    if (reserve((void **)&s->todo, &s->todo_cap, 1, sizeof(int64_t)) < 0 || closure_seen(s, config) < 0) {
        return NEED_GIL;
    }
    s->todo[todo++] = config;
    while (todo) {
        int64_t current = s->todo[--todo];
        int64_t stack = current / stride, q = current % stride;
        if (current < 0 || (size_t)q >= s->nfa_cap || !s->nfa_filled[q] || s->edge_at[q] < 0) {
            s->want = current < 0 ? WANT_PYTHON : WANT_NFA;
            s->want_q = q;
            return NEED_GIL;
        }
        if ((size_t)stack >= s->stacks || s->seen_count > (1u << 20)) {
            s->want = WANT_PYTHON;
            return NEED_GIL;
        }
        if (s->edge_len[q] || q == s->final) {
            if (reserve((void **)&s->scratch, &s->scratch_cap, closed + 1, sizeof(int64_t)) < 0) {
                s->want = WANT_PYTHON;
                return NEED_GIL;
            }
            s->scratch[closed++] = current;
        }
        int64_t base = stack * stride;
        size_t more = (size_t)s->eps_len[q] + (size_t)s->calls_len[q] + 1;
        if (reserve((void **)&s->todo, &s->todo_cap, todo + more, sizeof(int64_t)) < 0) {
            s->want = WANT_PYTHON;
            return NEED_GIL;
        }
        for (int32_t i = 0; i < s->eps_len[q]; i++) {
            int64_t next = base + s->eps_pool[s->eps_at[q] + i];
            int known = closure_seen(s, next);
            if (known < 0) {
                s->want = WANT_PYTHON;
                return NEED_GIL;
            }
            if (!known) {
                s->todo[todo++] = next;
            }
        }
        for (int32_t i = 0; i < s->calls_len[q]; i++) {
            int64_t d = s->calls_pool[s->calls_at[q] + 2 * i], ret = s->calls_pool[s->calls_at[q] + 2 * i + 1];
            if ((size_t)d >= s->def_cap || s->def_start[d] < 0) {
                s->want = WANT_DEF;
                s->want_q = d;
                return NEED_GIL;
            }
            int64_t pushed = store_push(s, stack, ret);
            if (pushed < 0) {
                s->want = WANT_PYTHON;
                return NEED_GIL;
            }
            int64_t next = pushed * stride + s->def_start[d];
            int known = closure_seen(s, next);
            if (known < 0) {
                s->want = WANT_PYTHON;
                return NEED_GIL;
            }
            if (!known) {
                s->todo[todo++] = next;
            }
        }
        if (s->ends[q] && stack) {
            int64_t next = s->stack_parent[stack] * stride + s->stack_top[stack];
            int known = closure_seen(s, next);
            if (known < 0) {
                s->want = WANT_PYTHON;
                return NEED_GIL;
            }
            if (!known) {
                s->todo[todo++] = next;
            }
        }
    }
    return (int64_t)closed;
}

/* ``value`` written into ``row``'s cells lo..hi. */
static void write_range(int32_t *row, long lo, long hi, int32_t value) {
    for (long b = lo; b <= hi; b++) {
        row[b] = value;
    }
}

static int64_t store_state_of(Store *s, int32_t *table, int64_t rows, uint8_t *finals, int64_t finals_len,
                              size_t count);

/* The piece of a state's cut that holds ``byte`` and the targets of every
 * kernel edge over it: k[0:n] the state's configurations (each checked to
 * have its edges), the piece written to [*lo_at, *hi_at] and the targets,
 * sorted and distinct, to s->targets; ``covered``, where not NULL, gets a 1
 * on every byte some edge covers. The targets' count, or -1 where
 * s->targets could not grow. store_fast's and chain_range_targets' one
 * loop (inlined: store_fast resolves most cells of a cold row). */
static ALWAYS_INLINE Py_ssize_t cut_piece(Store *s, const int64_t *k, size_t n, int byte, uint8_t *covered,
                                           long *lo_at, long *hi_at) {
    long long stride = s->stride;
    long lo = 0, hi = 255;
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        long long q = k[i] % stride, base = k[i] - q;
        const Edge *edges = s->edge_pool + s->edge_at[q];
        for (int32_t j = 0; j < s->edge_len[q]; j++) {
            long from_byte = edges[j].lo, to_byte = edges[j].hi;  /* 0 <= lo <= hi <= 255: store_fill_edges */
            if (covered) {
                memset(covered + from_byte, 1, (size_t)(to_byte - from_byte + 1));
            }
            if (from_byte <= byte && byte <= to_byte) {
                if (from_byte > lo) {
                    lo = from_byte;
                }
                if (to_byte < hi) {
                    hi = to_byte;
                }
                if (reserve((void **)&s->targets, &s->targets_cap, count + 1, sizeof(int64_t)) < 0) {
                    return -1;
                }
                s->targets[count++] = base + edges[j].target;
            } else if (to_byte < byte) {
                if (to_byte + 1 > lo) {
                    lo = to_byte + 1;
                }
            } else if (from_byte - 1 < hi) {
                hi = from_byte - 1;
            }
        }
    }
    *lo_at = lo;
    *hi_at = hi;
    if (!count) {
        return 0;
    }
    return (Py_ssize_t)sort_distinct(s->targets, count);
}

/* The cell (state, byte) resolved from the store alone, without the GIL:
 * the successor (its range written into ``table``, DEAD written on the
 * bytes outside the cut), or NEED_GIL with the reason in ``s->want``.
 * ``table`` has ``rows`` rows, ``finals`` ``finals_len`` flags. */
static int64_t store_fast(Store *s, int32_t *table, int64_t rows, uint8_t *finals, int64_t finals_len,
                          int64_t state, int byte) {
    s->want = WANT_PYTHON;
    if (s->bounded || state < 0 || (size_t)state >= s->count || state >= rows || byte < 0 || byte > 255) {
        s->why[0]++;
        return NEED_GIL;
    }
    long long stride = s->stride;
    size_t from = s->koff[state], n = s->koff[state + 1] - from;
    if (!n) {
        return NEED_GIL;
    }
    const int64_t *k = s->pool + from;
    /* The cut (LazyByteDFA._cut_of) at ``byte`` only: the kernel's edges,
     * each on its configuration's stack (a byte edge keeps the stack), cut
     * where any edge starts or ends (regex_compiler.cut_ranges' pieces;
     * disjoint or equal ranges are their own pieces); the byte's piece leads
     * to the targets of every edge over it, sorted and distinct, as in the
     * cut. DEAD is written on the bytes no edge covers, as the cut does. */
    for (size_t i = 0; i < n; i++) {
        long long q = k[i] % stride;
        if (k[i] < 0 || (size_t)q >= s->nfa_cap || s->edge_at[q] < 0) {
            s->want = k[i] < 0 ? WANT_PYTHON : WANT_EDGES;
            s->want_q = q;
            return NEED_GIL;
        }
    }
    int cut_written = (size_t)state < s->cut_written_cap && s->cut_written[state];
    uint8_t covered[256];
    if (!cut_written) {
        memset(covered, 0, sizeof(covered));
    }
    long lo, hi;
    /* two inlined copies, each with its own test of ``covered`` known: one
     * with a test in the loop cost session_fast 4% more instructions */
    Py_ssize_t kept = cut_written ? cut_piece(s, k, n, byte, NULL, &lo, &hi)
                                  : cut_piece(s, k, n, byte, covered, &lo, &hi);
    if (kept < 0) {
        return NEED_GIL;
    }
    int32_t *row = table + state * 256;
    if (!cut_written) {
        s->cut_passes++;
        for (int b = 0; b < 256; b++) {
            if (!covered[b]) {
                row[b] = DEAD;
            }
        }
        size_t before = s->cut_written_cap;
        if (reserve((void **)&s->cut_written, &s->cut_written_cap, (size_t)state + 1, 1) == 0) {
            memset(s->cut_written + before, 0, s->cut_written_cap - before);
            s->cut_written[state] = 1;
        }  /* else the next cell writes them again */
    }
    if (!kept) {
        return DEAD;  /* outside every range */
    }
    int64_t found = store_state_of(s, table, rows, finals, finals_len, kept);
    if (found >= 0) {
        write_range(row, lo, hi, (int32_t)found);
    }
    return found;
}

/* The state of the configurations s->targets[0:count] (sorted, distinct, at
 * least one), from the store alone, without the GIL: a new state's row
 * written UNKNOWN and its final flag set; NEED_GIL with the reason in
 * ``s->want`` (LazyByteDFA._step over the store: store_fast for a cell's
 * range, chain_wide_target for a wide character). */
static int64_t store_state_of(Store *s, int32_t *table, int64_t rows, uint8_t *finals, int64_t finals_len,
                              size_t count) {
    long long stride = s->stride;
    int64_t *targets = s->targets;
    s->want = WANT_PYTHON;
    if (count == 1) {
        int64_t known = steps_find(s, targets[0]);
        if (known >= 0) {
            s->fast_found++;
            return known;
        }
    }
    /* the closure: each configuration's NFA state's local closure, on its stack */
    size_t closed = 0;
    for (size_t i = 0; i < count; i++) {
        long long on = targets[i] / stride, q = targets[i] % stride;
        if (q < 0 || (size_t)q >= s->nfa_cap || s->local_at[q] == -1) {
            s->want = q < 0 ? WANT_PYTHON : WANT_LOCAL;
            s->want_q = q;
            return NEED_GIL;
        }
        if (s->local_at[q] == -2) {
            /* a call or an end on the way: the stack plays a part */
            int64_t grown = store_full_closure(s, targets[i], closed);
            if (grown < 0) {
                s->why[1]++;
                return NEED_GIL;
            }
            closed = (size_t)grown;
            continue;
        }
        if (reserve((void **)&s->scratch, &s->scratch_cap, closed + (size_t)s->local_len[q], sizeof(int64_t)) < 0) {
            return NEED_GIL;
        }
        const int64_t *local = s->local_pool + s->local_at[q];
        for (int32_t j = 0; j < s->local_len[q]; j++) {
            s->scratch[closed++] = on * stride + local[j];
        }
    }
    int64_t *kernel = s->scratch;
    size_t distinct = sort_distinct(kernel, closed);
    int64_t found = ids_find(s, kernel, distinct);
    if (found < 0) {
        if ((long long)s->count >= s->max_states || (int64_t)s->count >= rows || (int64_t)s->count >= finals_len
                || distinct == 0) {
            s->why[2]++;
            return NEED_GIL;  /* the bound's error, or a table to grow: the Python path */
        }
        if (s->fresh >= 64) {
            s->want = WANT_CHECK;
            return NEED_GIL;
        }
        uint8_t final = 0;
        for (size_t i = 0; i < distinct; i++) {
            final |= kernel[i] == s->final;
        }
        found = store_add(s, kernel, distinct);
        if (found < 0) {
            return NEED_GIL;
        }
        s->fresh++;
        s->fast_discovered++;
        write_range(table + found * 256, 0, 255, UNKNOWN_CELL);
        finals[found] = final;
        /* the new row and flag before any cell that leads there (readers take no lock) */
        __atomic_thread_fence(__ATOMIC_RELEASE);
    } else {
        s->fast_found++;
    }
    if (count == 1) {
        steps_add(s, targets[0], found);
    }
    return found;
}

/* The store's copy of the automaton's state bound (see state_bound), read
 * again at each store_sync: a bound changed after the store was made
 * applies from the next walk or hand-back on. */
static int store_bound(PyObject *ctx, Store *s) {
    return state_bound(ctx, &s->max_states);
}

static Store *store_of(PyObject *ctx) {
    ContextObject *self = (ContextObject *)ctx;
    if (self->store == NULL) {
        Store *s = calloc(1, sizeof(Store));
        if (s == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        s->stride = stride_of(ctx);
        s->final = PyLong_AsLongLong(ITEM(ctx, C_FINAL));
        s->bounded = PyObject_IsTrue(ITEM(ctx, C_BOUNDED));
        if (PyErr_Occurred() || s->bounded < 0 || s->stride <= 0 || store_bound(ctx, s) < 0) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "_lazycore: the stride must be positive");
            }
            free(s);
            return NULL;
        }
        /* The store computes configurations (stack * stride + NFA state, stacks
         * below 2**31) in int64 unchecked: past a stride of 2**32 (an NFA bound
         * of 4 billion states; the default is 2 million) it is not offered, as
         * with a depth bound, and the core over the Python containers, whose
         * conversions are checked, does the work. */
        if (s->stride > ((long long)1 << 32)) {
            s->bounded = 1;
        }
        self->store = s;
    }
    return self->store;
}

/* The call stacks the Python containers have and the store not yet, copied.
 * The Python lists hold the stacks published (store_publish_stacks) and,
 * after them, those made by Python while the store did not keep them (a
 * closure before the store was made): they never both grow at once. */
static int store_sync_stacks(PyObject *ctx, Store *s) {
    PyObject *parent = ITEM(ctx, C_STACK_PARENT), *top = ITEM(ctx, C_STACK_TOP);
    if (!PyList_Check(parent) || !PyList_Check(top) || PyList_GET_SIZE(top) != PyList_GET_SIZE(parent)
            || (size_t)PyList_GET_SIZE(parent) < s->stacks_published) {
        PyErr_SetString(PyExc_RuntimeError, "_lazycore: the state store and the automaton's stacks disagree");
        return -1;
    }
    if ((size_t)PyList_GET_SIZE(parent) == s->stacks_published) {
        return 0;  /* nothing new from Python (the store's own may wait to be published) */
    }
    if (s->stacks_published != s->stacks) {
        PyErr_SetString(PyExc_RuntimeError, "_lazycore: the state store and the automaton's stacks disagree");
        return -1;
    }
    for (Py_ssize_t i = (Py_ssize_t)s->stacks; i < PyList_GET_SIZE(parent); i++) {
        long long below = PyLong_AsLongLong(PyList_GET_ITEM(parent, i));
        long long ret = PyLong_AsLongLong(PyList_GET_ITEM(top, i));
        if (PyErr_Occurred()) {
            return -1;
        }
        if (i == 0) {  /* the empty stack: no push makes it */
            if (stacks_reach(s, 1) < 0) {
                PyErr_NoMemory();
                return -1;
            }
            s->stack_parent[0] = 0;
            s->stack_top[0] = -1;
            s->stack_depth[0] = 0;
            s->stacks = 1;
            continue;
        }
        if (below < 0 || below >= i || ret < 0 || ret >= s->stride) {
            PyErr_SetString(PyExc_ValueError, "_lazycore: a stack outside the stacks or the NFA");
            return -1;
        }
        int64_t made = store_push(s, below, ret);
        if (made != i) {
            if (made < 0) {
                PyErr_NoMemory();
            } else {
                PyErr_SetString(PyExc_RuntimeError, "_lazycore: a stack made twice");
            }
            return -1;
        }
    }
    s->stacks_published = s->stacks;
    return 0;
}

/* The stacks the store made, recorded in the Python containers. */
static int store_publish_stacks(PyObject *ctx, Store *s) {
    PyObject *parent = ITEM(ctx, C_STACK_PARENT), *top = ITEM(ctx, C_STACK_TOP), *depth = ITEM(ctx, C_STACK_DEPTH);
    PyObject *pushes = ITEM(ctx, C_PUSHES);
    if (s->stacks_published == s->stacks) {
        return 0;
    }
    if (!PyList_Check(parent) || !PyList_Check(top) || !PyList_Check(depth)
            || (size_t)PyList_GET_SIZE(parent) != s->stacks_published) {
        PyErr_SetString(PyExc_RuntimeError, "_lazycore: the state store and the automaton's stacks disagree");
        return -1;
    }
    for (size_t i = s->stacks_published; i < s->stacks; i++) {
        PyObject *below = PyLong_FromLongLong(s->stack_parent[i]), *ret = PyLong_FromLongLong(s->stack_top[i]);
        PyObject *deep = PyLong_FromLongLong(s->stack_depth[i]), *id = PyLong_FromSize_t(i);
        PyObject *key = PyLong_FromLongLong(s->stack_parent[i] * s->stride + s->stack_top[i]);
        Py_ssize_t before = PyList_GET_SIZE(parent);
        int failed = below == NULL || ret == NULL || deep == NULL || id == NULL || key == NULL
            || PyList_Append(parent, below) < 0 || PyList_Append(top, ret) < 0 || PyList_Append(depth, deep) < 0
            || PyDict_SetItem(pushes, key, id) < 0;
        if (failed) {  /* the three lists back to the published length: they never disagree */
            PyObject *type, *value, *trace;
            PyErr_Fetch(&type, &value, &trace);
            PyObject *lists[3] = {parent, top, depth};
            for (int l = 0; l < 3; l++) {
                if (PyList_GET_SIZE(lists[l]) > before && PyList_SetSlice(lists[l], before, PY_SSIZE_T_MAX, NULL) < 0) {
                    PyErr_Clear();
                }
            }
            PyErr_Restore(type, value, trace);
        }
        Py_XDECREF(below);
        Py_XDECREF(ret);
        Py_XDECREF(deep);
        Py_XDECREF(id);
        Py_XDECREF(key);
        if (failed) {
            return -1;
        }
        s->stacks_published = i + 1;
    }
    return 0;
}

/* The store that keeps the call stacks, in ``*keeper`` (NULL when the
 * Python containers keep them: no store made yet, or one a depth bound or
 * a stride past 2**32 keeps closed), with the stacks Python made copied in.
 * Once the store exists, the closures through calls that the core over the
 * Python containers computes (a hand-back) push and pop the store's
 * stacks, and the Python lists get them only when Python reads them
 * (LazyByteDFA._publish): publishing each new stack to them at a walk's
 * end was 9,288 stacks on MaskBench's sample (4 per source), one
 * hand-back of 340 reading any. 0, or -1 with an exception. */
static int stacks_keeper(PyObject *ctx, Store **keeper) {
    Store *s = ((ContextObject *)ctx)->store;
    *keeper = NULL;
    if (s == NULL || s->bounded) {
        return 0;
    }
    if (store_sync_stacks(ctx, s) < 0) {
        return -1;
    }
    *keeper = s;
    return 0;
}

/* The store's stack ``stack`` with the return state ``ret`` on top, made
 * when new (LazyByteDFA._push); -1 with an exception. */
static long long keeper_push(Store *s, long long stack, PyObject *ret) {
    long long top_state = PyLong_AsLongLong(ret);
    if (top_state == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (stack < 0 || (size_t)stack >= s->stacks || top_state < 0 || top_state >= s->stride) {
        PyErr_SetString(PyExc_IndexError, "_lazycore: a stack not made, or a return state outside the NFA");
        return -1;
    }
    int64_t made = store_push(s, stack, top_state);
    if (made < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return made;
}

/* The store's stack ``stack`` (not empty) popped: the stack below and the
 * state it returns to. 0, or -1 with an exception. */
static int keeper_pop(Store *s, long long stack, long long *below, long long *back) {
    if (stack <= 0 || (size_t)stack >= s->stacks) {
        PyErr_SetString(PyExc_IndexError, "_lazycore: a stack not made");
        return -1;
    }
    *below = s->stack_parent[stack];
    *back = s->stack_top[stack];
    return 0;
}

/* The kernels the Python containers have and the store not yet, copied:
 * the states Python discovered, numbered from the store's count on (see
 * discover), each in ``_kernels`` (a dict keyed by state). */
static int store_sync(PyObject *ctx, Store *s) {
    if (store_bound(ctx, s) < 0 || store_sync_stacks(ctx, s) < 0) {
        return -1;
    }
    PyObject *kernels = ITEM(ctx, C_KERNELS);
    if (!PyDict_Check(kernels)) {
        PyErr_SetString(PyExc_TypeError, "_lazycore: the automaton's kernels are not a dict");
        return -1;
    }
    PyObject *count = PyObject_GetAttr(ITEM(ctx, C_DFA), name_count);
    if (count == NULL) {
        return -1;
    }
    Py_ssize_t known = PyLong_AsSsize_t(count);
    Py_DECREF(count);
    if (known == -1 && PyErr_Occurred()) {
        return -1;
    }
    for (Py_ssize_t state = (Py_ssize_t)s->count; state < known; state++) {
        PyObject *key = PyLong_FromSsize_t(state);
        PyObject *kernel = key == NULL ? NULL : PyDict_GetItemWithError(kernels, key);  /* borrowed */
        Py_XDECREF(key);
        if (kernel == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_RuntimeError, "_lazycore: the state store and the automaton's kernels disagree");
            }
            return -1;
        }
        Py_ssize_t n = PySet_Size(kernel);
        if (n < 0 || reserve((void **)&s->scratch, &s->scratch_cap, (size_t)n + 1, sizeof(int64_t)) < 0) {
            return n < 0 ? -1 : (PyErr_NoMemory(), -1);
        }
        PyObject *items = PyObject_GetIter(kernel), *item;
        if (items == NULL) {
            return -1;
        }
        Py_ssize_t i = 0;
        while ((item = PyIter_Next(items)) != NULL) {
            long long value = PyLong_AsLongLong(item);
            Py_DECREF(item);
            if (value == -1 && PyErr_Occurred()) {
                break;  /* the first error is the one raised */
            }
            if (i < n) {
                s->scratch[i++] = value;
            }
        }
        Py_DECREF(items);
        if (PyErr_Occurred()) {
            return -1;
        }
        qsort(s->scratch, (size_t)i, sizeof(int64_t), by_value);
        if (store_add(s, s->scratch, (size_t)i) < 0) {
            PyErr_NoMemory();
            return -1;
        }
        s->published++;  /* Python's own: in the containers already */
    }
    return 0;
}

/* State ``state``'s kernel (below s->count) as the frozenset Python keeps:
 * a new reference, untracked (see untracked), or NULL with an exception. */
static PyObject *store_kernel(Store *s, size_t state) {
    size_t from = s->koff[state], n = s->koff[state + 1] - from;
    PyObject *configs = PyTuple_New((Py_ssize_t)n);
    if (configs == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        PyObject *item = PyLong_FromLongLong(s->pool[from + i]);
        if (item == NULL) {
            Py_DECREF(configs);
            return NULL;
        }
        PyTuple_SET_ITEM(configs, (Py_ssize_t)i, item);
    }
    PyObject *kernel = untracked(PyFrozenSet_New(configs));
    Py_DECREF(configs);
    return kernel;
}

/* The kernel of state ``index`` (``state`` as an int) for a reader (cut_of,
 * wide_targets): the one in ``_kernels``, or for a state the store has not
 * published, one made from the store's pool, nothing published (a reader
 * asked for one kernel: publishing every state before it was ~1,100 of the
 * ~1,400 publishes on MaskBench's sample). New reference, or NULL with an
 * IndexError past the states. */
static PyObject *kernel_at(PyObject *ctx, PyObject *state, Py_ssize_t index) {
    PyObject *kernels = ITEM(ctx, C_KERNELS);
    Store *s = ((ContextObject *)ctx)->store;
    if (!PyDict_Check(kernels)) {
        PyErr_SetString(PyExc_TypeError, "_lazycore: the automaton's kernels are not a dict");
        return NULL;
    }
    PyObject *kernel = PyDict_GetItemWithError(kernels, state);  /* borrowed */
    if (kernel != NULL) {
        Py_INCREF(kernel);
        return kernel;
    }
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (index < 0 || s == NULL || (size_t)index >= s->count) {
        PyErr_SetString(PyExc_IndexError, "_lazycore: a state not discovered");
        return NULL;
    }
    s->kernels_lent++;
    return store_kernel(s, (size_t)index);
}

/* The id of ``kernel`` (a frozenset of configurations) among the store's
 * states (the caller found it in no ``_ids``): a new reference to an int,
 * None when it is not one of them, NULL with an exception. */
static PyObject *store_id_of(PyObject *ctx, PyObject *kernel) {
    Store *s = ((ContextObject *)ctx)->store;
    if (s == NULL || s->published == s->count) {
        Py_RETURN_NONE;  /* every state is in ``_ids`` */
    }
    Py_ssize_t n = PySet_Size(kernel);
    if (n < 0) {
        return NULL;
    }
    if (reserve((void **)&s->scratch, &s->scratch_cap, (size_t)n + 1, sizeof(int64_t)) < 0) {
        return PyErr_NoMemory();
    }
    PyObject *items = PyObject_GetIter(kernel), *item;
    if (items == NULL) {
        return NULL;
    }
    Py_ssize_t i = 0;
    while ((item = PyIter_Next(items)) != NULL) {
        long long value = PyLong_AsLongLong(item);
        Py_DECREF(item);
        if (value == -1 && PyErr_Occurred()) {
            break;
        }
        if (i < n) {
            s->scratch[i++] = value;
        }
    }
    Py_DECREF(items);
    if (PyErr_Occurred()) {
        return NULL;
    }
    qsort(s->scratch, (size_t)i, sizeof(int64_t), by_value);
    int64_t found = ids_find(s, s->scratch, (size_t)i);
    if (found < 0) {
        Py_RETURN_NONE;
    }
    s->store_ids++;
    return PyLong_FromLongLong(found);
}

/* The count of states (LazyByteDFA._count) recorded in the automaton; the
 * kernels and stacks wait (store_publish). */
static int store_publish_count(PyObject *ctx, Store *s) {
    PyObject *dfa = ITEM(ctx, C_DFA), *count = PyObject_GetAttr(dfa, name_count);
    if (count == NULL) {
        return -1;
    }
    size_t known = PyLong_AsSize_t(count);
    Py_DECREF(count);
    if (known == (size_t)-1 && PyErr_Occurred()) {
        return -1;
    }
    if (known >= s->count) {
        /* nothing new; or Python's states not copied yet (a store that a
         * depth bound keeps closed): the count never goes back */
        return 0;
    }
    count = PyLong_FromSize_t(s->count);
    int status = count == NULL ? -1 : PyObject_SetAttr(dfa, name_count, count);
    Py_XDECREF(count);
    return status;
}

/* store_publish_count for the automaton of ``ctx`` (none without a store):
 * before Python numbers a new state after the store's. */
static int publish_count_of(PyObject *ctx) {
    Store *s = ((ContextObject *)ctx)->store;
    return s == NULL ? 0 : store_publish_count(ctx, s);
}

/* Every state and stack of the store recorded in the Python containers:
 * kernels (``_kernels``, a dict keyed by state), ids, stacks and the count
 * (their rows and flags are written already). Only for a reader of those
 * containers outside the core (LazyByteDFA._publish: a test's or a
 * benchmark's inspection). The core reads one kernel from the store
 * (kernel_at), looks one up there (store_id_of) and numbers a state Python
 * discovers after the store's (discover), so nothing else publishes: a
 * frozenset and a dict entry were ~0.5 us a state, and publishing every
 * state before the one Python discovered put 34,025 of 39,803 states into
 * the containers on MaskBench's sample (4 per source), 315 times. */
static int store_publish(PyObject *ctx, Store *s) {
    if (!s->bounded && store_sync(ctx, s) < 0) {
        return -1;  /* Python's own states and stacks first: the counts below are then exact */
    }
    if (store_publish_stacks(ctx, s) < 0) {
        return -1;
    }
    PyObject *kernels = ITEM(ctx, C_KERNELS), *ids = ITEM(ctx, C_IDS);
    if (!PyDict_Check(kernels)) {
        PyErr_SetString(PyExc_TypeError, "_lazycore: the automaton's kernels are not a dict");
        return -1;
    }
    for (size_t state = 0; state < s->count && s->published < s->count; state++) {
        PyObject *id = PyLong_FromSize_t(state);
        int known = id == NULL ? -1 : PyDict_Contains(kernels, id);
        if (known != 0) {
            Py_XDECREF(id);
            if (known < 0) {
                return -1;
            }
            continue;
        }
        PyObject *kernel = store_kernel(s, state);
        /* ``_ids`` first: a failed entry in ``_kernels`` is then undone
         * there, and the two containers never disagree */
        int failed = kernel == NULL || PyDict_SetItem(ids, kernel, id) < 0;
        if (!failed && PyDict_SetItem(kernels, id, kernel) < 0) {
            PyObject *type, *value, *trace;
            PyErr_Fetch(&type, &value, &trace);
            if (PyDict_DelItem(ids, kernel) < 0) {
                PyErr_Clear();
            }
            PyErr_Restore(type, value, trace);
            failed = 1;
        }
        Py_XDECREF(kernel);
        Py_DECREF(id);
        if (failed) {
            return -1;
        }
        s->published++;
    }
    s->publishes++;
    return store_publish_count(ctx, s);
}

/* NFA state q's edges copied into the store (with the GIL). */
static int store_fill_edges(PyObject *ctx, Store *s, long long q) {
    PyObject *edges = ITEM(ctx, C_EDGES);
    if (!PyList_Check(edges) || q < 0 || q >= PyList_GET_SIZE(edges) || q >= s->stride) {
        PyErr_SetString(PyExc_IndexError, "_lazycore: an NFA state outside the tables");
        return -1;
    }
    PyObject *list = PyList_GET_ITEM(edges, q);
    if (!PyTuple_Check(list) || PyTuple_GET_SIZE(list) % 3) {
        PyErr_SetString(PyExc_TypeError, "_lazycore: edges[q] is not a tuple (lo, hi, target, ...)");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(list) / 3;
    if (store_reach(s, (size_t)q) < 0
            || reserve((void **)&s->edge_pool, &s->edge_pool_cap, s->edge_pool_len + (size_t)n + 1, sizeof(Edge)) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    Edge *into = s->edge_pool + s->edge_pool_len;
    for (Py_ssize_t j = 0; j < n; j++) {
        long lo = PyLong_AsLong(PyTuple_GET_ITEM(list, 3 * j));
        long hi = PyLong_AsLong(PyTuple_GET_ITEM(list, 3 * j + 1));
        long long target = PyLong_AsLongLong(PyTuple_GET_ITEM(list, 3 * j + 2));
        if (PyErr_Occurred()) {
            return -1;
        }
        if (lo < 0 || hi > 255 || lo > hi || target < 0 || target >= s->stride) {
            PyErr_SetString(PyExc_ValueError, "_lazycore: an edge outside 0..255 or the NFA");
            return -1;
        }
        into[j] = (Edge){lo, hi, target};
    }
    s->edge_at[q] = (int64_t)s->edge_pool_len;
    s->edge_len[q] = (int32_t)n;
    s->edge_pool_len += (size_t)n;
    return 0;
}

/* NFA state q's local closure (LazyByteDFA._local_closure: the kernel NFA
 * states reachable by epsilon moves alone, or none when a state on the way
 * calls or ends a definition) computed into the store, with the GIL: a walk
 * over the NFA's lists with a stamp a state (the set and list work of
 * local_closure_of cost ~2 us a state, and a new automaton fills one for
 * each NFA state its cold rows reach). */
static int store_fill_local(PyObject *ctx, Store *s, long long q) {
    PyObject *eps = ITEM(ctx, C_EPS), *edges = ITEM(ctx, C_EDGES), *calls = ITEM(ctx, C_CALLS);
    PyObject *ends = ITEM(ctx, C_ENDS);
    if (!PyList_Check(eps) || !PyList_Check(edges) || !PyList_Check(calls) || !PyByteArray_Check(ends)) {
        PyErr_SetString(PyExc_TypeError, "_lazycore: the NFA's tables are not lists and a bytearray");
        return -1;
    }
    Py_ssize_t size = PyList_GET_SIZE(eps);
    if (PyList_GET_SIZE(edges) < size) size = PyList_GET_SIZE(edges);
    if (PyList_GET_SIZE(calls) < size) size = PyList_GET_SIZE(calls);
    if (PyByteArray_GET_SIZE(ends) < size) size = PyByteArray_GET_SIZE(ends);
    if (q < 0 || q >= size || q >= s->stride || store_reach(s, (size_t)size) < 0
            || next_visit(&s->stamps, &s->stamps_cap, &s->stamps_seen, &s->stamp, (size_t)size) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_IndexError, "_lazycore: an NFA state outside the tables");
        }
        return -1;
    }
    const char *ending = PyByteArray_AS_STRING(ends);
    long long final = s->final;
    size_t todo = 0, found = 0, pool_from = s->local_pool_len;
    int local = 1;
    if (reserve((void **)&s->scratch, &s->scratch_cap, 1, sizeof(int64_t)) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    s->scratch[todo++] = q;
    s->stamps[q] = s->stamp;
    while (todo) {
        Py_ssize_t at = (Py_ssize_t)s->scratch[--todo];
        PyObject *calling = PyList_GET_ITEM(calls, at), *out = PyList_GET_ITEM(edges, at);
        PyObject *next = PyList_GET_ITEM(eps, at);
        int calls_here = PyObject_IsTrue(calling);
        if (calls_here < 0) {
            return -1;
        }
        if (calls_here || ending[at]) {
            local = 0;
            break;
        }
        if (!SEQUENCE(next) || !SEQUENCE(out)) {
            PyErr_SetString(PyExc_TypeError, "_lazycore: eps[q] and edges[q] must be tuples");
            return -1;
        }
        if (PySequence_Fast_GET_SIZE(out) || at == final) {
            if (reserve((void **)&s->local_pool, &s->local_pool_cap, pool_from + found + 1, sizeof(int64_t)) < 0) {
                PyErr_NoMemory();
                return -1;
            }
            s->local_pool[pool_from + found++] = at;
        }
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(next); i++) {
            long long t;
            if (read_nfa_state(PySequence_Fast_GET_ITEM(next, i), size, "an epsilon move", &t) < 0) {
                return -1;
            }
            if (s->stamps[t] != s->stamp) {
                s->stamps[t] = s->stamp;
                if (reserve((void **)&s->scratch, &s->scratch_cap, todo + 1, sizeof(int64_t)) < 0) {
                    PyErr_NoMemory();
                    return -1;
                }
                s->scratch[todo++] = t;
            }
        }
    }
    if (!local || found == 0) {
        s->local_at[q] = -2;  /* a call or an end on the way (or nothing): the full closure */
    } else {
        s->local_at[q] = (int64_t)pool_from;
        s->local_len[q] = (int32_t)found;
        s->local_pool_len = pool_from + found;
    }
    return 0;
}

/* NFA state q's epsilon moves, calls (each callee's start where it is
 * entered) and end flag copied into the store, with its edges (with the
 * GIL). */
static int store_fill_nfa(PyObject *ctx, Store *s, long long q) {
    PyObject *eps = ITEM(ctx, C_EPS), *calls = ITEM(ctx, C_CALLS), *ends = ITEM(ctx, C_ENDS);
    PyObject *resolved = ITEM(ctx, C_RESOLVED), *start_of = ITEM(ctx, C_START_OF);
    if (!PyList_Check(eps) || !PyList_Check(calls) || !PyByteArray_Check(ends) || !PyByteArray_Check(resolved)
            || !PyList_Check(start_of)) {
        PyErr_SetString(PyExc_TypeError, "_lazycore: the NFA's tables are not of the expected types");
        return -1;
    }
    if (q < 0 || q >= PyList_GET_SIZE(eps) || q >= PyList_GET_SIZE(calls) || q >= PyByteArray_GET_SIZE(ends)
            || q >= s->stride || store_reach(s, (size_t)q) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_IndexError, "_lazycore: an NFA state outside the tables");
        }
        return -1;
    }
    if (s->edge_at[q] < 0 && store_fill_edges(ctx, s, q) < 0) {
        return -1;
    }
    PyObject *next = PyList_GET_ITEM(eps, q), *called = PyList_GET_ITEM(calls, q);
    if (!SEQUENCE(next) || !PyTuple_Check(called)) {
        PyErr_SetString(PyExc_TypeError, "_lazycore: the NFA's tables are not of the expected types");
        return -1;
    }
    Py_ssize_t moves = PySequence_Fast_GET_SIZE(next), count = PyTuple_GET_SIZE(called);
    if (reserve((void **)&s->eps_pool, &s->eps_pool_cap, s->eps_pool_len + (size_t)moves + 1, sizeof(int64_t)) < 0
            || reserve((void **)&s->calls_pool, &s->calls_pool_cap, s->calls_pool_len + 2 * (size_t)count + 2,
                       sizeof(int64_t)) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < moves; i++) {
        long long t = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(next, i));
        if (t == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (t < 0 || t >= s->stride) {
            PyErr_SetString(PyExc_ValueError, "_lazycore: an epsilon move outside the NFA");
            return -1;
        }
        s->eps_pool[s->eps_pool_len + (size_t)i] = t;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *call = PyTuple_GET_ITEM(called, i);
        if (!PyTuple_Check(call) || PyTuple_GET_SIZE(call) != 2) {
            PyErr_SetString(PyExc_TypeError, "_lazycore: a call is not (definition, return state)");
            return -1;
        }
        long long d = PyLong_AsLongLong(PyTuple_GET_ITEM(call, 0));
        long long ret = PyLong_AsLongLong(PyTuple_GET_ITEM(call, 1));
        if (PyErr_Occurred()) {
            return -1;
        }
        if (d < 0 || d >= PyList_GET_SIZE(start_of) || ret < 0 || ret >= s->stride) {
            PyErr_SetString(PyExc_ValueError, "_lazycore: a call outside the definitions or the NFA");
            return -1;
        }
        if ((size_t)d >= s->def_cap) {
            size_t old = s->def_cap;
            if (reserve((void **)&s->def_start, &s->def_cap, (size_t)d + 1, sizeof(int64_t)) < 0) {
                PyErr_NoMemory();
                return -1;
            }
            for (size_t j = old; j < s->def_cap; j++) {
                s->def_start[j] = -1;
            }
        }
        if (d < PyByteArray_GET_SIZE(resolved) && PyByteArray_AS_STRING(resolved)[d]) {
            long long start = PyLong_AsLongLong(PyList_GET_ITEM(start_of, d));
            if ((start == -1 && PyErr_Occurred())) {
                return -1;
            }
            s->def_start[d] = start >= 0 && start < s->stride ? start : -1;
        }
        s->calls_pool[s->calls_pool_len + 2 * (size_t)i] = d;
        s->calls_pool[s->calls_pool_len + 2 * (size_t)i + 1] = ret;
    }
    s->eps_at[q] = (int64_t)s->eps_pool_len;
    s->eps_len[q] = (int32_t)moves;
    s->eps_pool_len += (size_t)moves;
    s->calls_at[q] = (int64_t)s->calls_pool_len;
    s->calls_len[q] = (int32_t)count;
    s->calls_pool_len += 2 * (size_t)count;
    s->ends[q] = PyByteArray_AS_STRING(ends)[q] != 0;
    s->nfa_filled[q] = 1;
    return 0;
}

/* Definition d's start copied into the store once it is entered: 1 when it
 * is, 0 when not (the core over the Python containers enters it), -1 with
 * an exception. */
static int store_fill_definition(PyObject *ctx, Store *s, long long d) {
    PyObject *resolved = ITEM(ctx, C_RESOLVED), *start_of = ITEM(ctx, C_START_OF);
    if (!PyByteArray_Check(resolved) || !PyList_Check(start_of) || d < 0 || (size_t)d >= s->def_cap
            || d >= PyList_GET_SIZE(start_of)) {
        PyErr_SetString(PyExc_IndexError, "_lazycore: a definition outside the NFA");
        return -1;
    }
    if (d >= PyByteArray_GET_SIZE(resolved) || !PyByteArray_AS_STRING(resolved)[d]) {
        return 0;
    }
    long long start = PyLong_AsLongLong(PyList_GET_ITEM(start_of, d));
    if (start == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (start < 0 || start >= s->stride) {
        return 0;
    }
    s->def_start[d] = start;
    return 1;
}

/* The NFA states around ``q`` copied into the store: the edges of each
 * state reachable from ``q`` inside its fragment (by epsilon moves, byte
 * edges and calls' return states; entering a callee is left to the
 * closure), and the local closure of each edge's target, up to
 * REGION_STATES states a call. Each entered fragment is final (pruned when
 * first entered), and a state in a kernel is in an entered fragment, as is
 * all it reaches inside it. One at a time, the store asked the GIL back for
 * ~2,000 NFA states a run of bench_batch's workload, ~4,000 fills. */
#define REGION_STATES 64

static int store_fill_region(PyObject *ctx, Store *s, long long q) {
    PyObject *eps = ITEM(ctx, C_EPS), *edges = ITEM(ctx, C_EDGES), *calls = ITEM(ctx, C_CALLS);
    if (!PyList_Check(eps) || !PyList_Check(edges) || !PyList_Check(calls)) {
        PyErr_SetString(PyExc_TypeError, "_lazycore: the NFA's tables are not lists");
        return -1;
    }
    Py_ssize_t size = PyList_GET_SIZE(eps);
    if (PyList_GET_SIZE(edges) < size) size = PyList_GET_SIZE(edges);
    if (PyList_GET_SIZE(calls) < size) size = PyList_GET_SIZE(calls);
    if (q < 0 || q >= size || q >= s->stride || store_reach(s, (size_t)size) < 0
            || next_visit(&s->marks, &s->marks_cap, &s->marks_seen, &s->mark, (size_t)size) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_IndexError, "_lazycore: an NFA state outside the tables");
        }
        return -1;
    }
    size_t head = 0, tail = 0;
    if (reserve((void **)&s->queue, &s->queue_cap, 1, sizeof(int64_t)) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    s->queue[tail++] = q;
    s->marks[q] = s->mark;
    while (head < tail && head < REGION_STATES) {
        long long at = s->queue[head++];
        if (!s->nfa_filled[at] && store_fill_nfa(ctx, s, at) < 0) {
            return -1;
        }
        PyObject *next = PyList_GET_ITEM(eps, at), *called = PyList_GET_ITEM(calls, at);
        if (!SEQUENCE(next) || !PyTuple_Check(called)) {
            PyErr_SetString(PyExc_TypeError, "_lazycore: the NFA's tables are not of the expected types");
            return -1;
        }
        Py_ssize_t count = PySequence_Fast_GET_SIZE(next) + PyTuple_GET_SIZE(called) + s->edge_len[at];
        if (reserve((void **)&s->queue, &s->queue_cap, tail + (size_t)count, sizeof(int64_t)) < 0) {
            PyErr_NoMemory();
            return -1;
        }
        for (int32_t j = 0; j < s->edge_len[at]; j++) {
            long long t = s->edge_pool[s->edge_at[at] + j].target;  /* 0 <= t < stride: store_fill_edges */
            if (t >= size) {
                PyErr_SetString(PyExc_IndexError, "_lazycore: an edge outside the NFA");
                return -1;
            }
            if (s->local_at[t] == -1 && store_fill_local(ctx, s, t) < 0) {
                return -1;
            }
            if (s->marks[t] != s->mark) {
                s->marks[t] = s->mark;
                s->queue[tail++] = t;
            }
        }
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(next) + PyTuple_GET_SIZE(called); i++) {
            PyObject *item;
            if (i < PySequence_Fast_GET_SIZE(next)) {
                item = PySequence_Fast_GET_ITEM(next, i);
            } else {
                PyObject *call = PyTuple_GET_ITEM(called, i - PySequence_Fast_GET_SIZE(next));
                if (!PyTuple_Check(call) || PyTuple_GET_SIZE(call) != 2) {
                    PyErr_SetString(PyExc_TypeError, "_lazycore: a call is not (definition, return state)");
                    return -1;
                }
                item = PyTuple_GET_ITEM(call, 1);
            }
            long long t;
            if (read_nfa_state(item, size, "a move", &t) < 0) {
                return -1;
            }
            if (s->marks[t] != s->mark) {
                s->marks[t] = s->mark;
                s->queue[tail++] = t;
            }
        }
    }
    return 0;
}

/* A walk's hold on the store: the context and writable views of the
 * automaton's table and finals (taken again when the table grows). */
typedef struct {
    PyObject *ctx, *table_object, *finals_object;
    Py_buffer table, finals;
    int has_table, has_finals;
} LazySession;

static int session_buffers(LazySession *session) {
    PyObject *dfa = ITEM(session->ctx, C_DFA);
    PyObject *table = PyObject_GetAttr(dfa, name_table);
    PyObject *finals = table == NULL ? NULL : PyObject_GetAttr(dfa, name_finals);
    if (finals == NULL) {
        Py_XDECREF(table);
        return -1;
    }
    if (table != session->table_object) {
        if (session->has_table) {
            PyBuffer_Release(&session->table);
            session->has_table = 0;
        }
        Py_XSETREF(session->table_object, table);
        if (PyObject_GetBuffer(table, &session->table, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
            Py_DECREF(finals);
            return -1;
        }
        session->has_table = 1;
        if (session->table.itemsize != 4 || session->table.len % 1024) {
            Py_DECREF(finals);
            PyErr_SetString(PyExc_ValueError, "_lazycore: the table's rows are not 256 int32 cells");
            return -1;
        }
    } else {
        Py_DECREF(table);
    }
    if (finals != session->finals_object) {
        if (session->has_finals) {
            PyBuffer_Release(&session->finals);
            session->has_finals = 0;
        }
        Py_XSETREF(session->finals_object, finals);
        if (PyObject_GetBuffer(finals, &session->finals, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
            return -1;
        }
        session->has_finals = 1;
        if (session->finals.itemsize != 1) {
            PyErr_SetString(PyExc_ValueError, "_lazycore: the finals are not one byte each");
            return -1;
        }
    } else {
        Py_DECREF(finals);
    }
    return 0;
}

static int session_close(LazySession *session);
static int session_open_context(PyObject *ctx, LazySession *session);

/* Open the store of ``dfa`` (a LazyByteDFA, its lock held) for a walk:
 * 0, 1 when the automaton has no native store to offer (no compiled core,
 * a depth bound), -1 with an exception. */
static int session_open(PyObject *dfa, LazySession *session) {
    memset(session, 0, sizeof(*session));
    PyObject *ctx = PyObject_GetAttrString(dfa, "_core_context");
    if (ctx == NULL) {
        PyErr_Clear();
        return 1;
    }
    if (!Py_IS_TYPE(ctx, context_type)) {
        Py_DECREF(ctx);
        return 1;
    }
    int opened = session_open_context(ctx, session);
    Py_DECREF(ctx);
    return opened;
}

/* session_open for the automaton's context ``ctx`` (the session takes a
 * reference of its own). */
static int session_open_context(PyObject *ctx, LazySession *session) {
    memset(session, 0, sizeof(*session));
    Py_INCREF(ctx);
    session->ctx = ctx;
    Store *s = store_of(ctx);
    if (s != NULL && s->bounded) {
        session_close(session);
        return 1;
    }
    if (s == NULL || store_sync(ctx, s) < 0 || session_buffers(session) < 0) {
        session_close(session);
        return -1;
    }
    return 0;
}

/* The cell without the GIL: the successor, or NEED_GIL (then session_held). */
static int64_t session_fast(LazySession *session, int64_t state, int byte) {
    Store *s = ((ContextObject *)session->ctx)->store;
    return store_fast(s, session->table.buf, session->table.len / 1024, session->finals.buf,
                      session->finals.len, state, byte);
}

static PyObject *py_step_held(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* What the store asked for (s->want) before it can go on, with the GIL: an
 * NFA state's local closure or edges copied in, a definition entered, or
 * (its states published first) the limits checked. 1: ask the store again;
 * 0: the core over the Python containers takes it from here (a definition
 * not entered yet, or what the store cannot do); -1 with an exception. */
static int store_supply(PyObject *ctx, Store *s) {
    if (s->want == WANT_LOCAL) {
        return store_fill_local(ctx, s, s->want_q) < 0 || store_fill_region(ctx, s, s->want_q) < 0 ? -1 : 1;
    }
    if (s->want == WANT_NFA) {
        return store_fill_nfa(ctx, s, s->want_q) < 0 || store_fill_region(ctx, s, s->want_q) < 0 ? -1 : 1;
    }
    if (s->want == WANT_DEF) {
        int entered = store_fill_definition(ctx, s, s->want_q);
        if (entered != 0) {
            return entered < 0 ? -1 : 1;
        }
        /* not entered yet: the core over the Python containers enters it */
    }
    /* the count: the core over the Python containers publishes the kernels
     * it reads (cut_of, wide_targets) and before it discovers a state */
    if (store_publish_count(ctx, s) < 0) {
        return -1;
    }
    PyObject *checked = PyObject_CallNoArgs(ITEM(ctx, C_CHECK));
    if (checked == NULL) {
        return -1;
    }
    Py_DECREF(checked);
    s->fresh = 0;
    return s->want == WANT_CHECK;
}

/* The cell with the GIL: what the store cannot do alone is done first (an
 * NFA state's edges or local closure copied, a limits check) or handed to
 * the core over the Python containers. The successor, or -2 with an
 * exception. The table may have grown: the caller takes it again. */
static int64_t session_held(LazySession *session, int64_t state, int byte) {
    PyObject *ctx = session->ctx;
    Store *s = ((ContextObject *)ctx)->store;
    for (;;) {
        int64_t found = session_fast(session, state, byte);
        if (found >= 0) {
            return found;
        }
        if (s->want == WANT_EDGES) {
            if (store_fill_region(ctx, s, s->want_q) < 0) {
                return -2;
            }
            continue;
        }
        int supplied = store_supply(ctx, s);
        if (supplied < 0) {
            return -2;
        }
        if (supplied) {
            continue;
        }
        s->handed_back++;
        PyObject *cell[3] = {ctx, PyLong_FromLongLong(state), PyLong_FromLong(byte)};
        PyObject *result = NULL;
        if (cell[1] != NULL && cell[2] != NULL) {
            result = py_step_held(NULL, cell, 3);
        }
        Py_XDECREF(cell[1]);
        Py_XDECREF(cell[2]);
        if (result == NULL) {
            return -2;
        }
        found = PyLong_AsLongLong(result);
        Py_DECREF(result);
        if ((found == -1 && PyErr_Occurred()) || store_sync(ctx, s) < 0 || session_buffers(session) < 0) {
            return -2;
        }
        /* The callers check ``state`` against the table once, before their
         * loops over its bytes, and go on reading its row of the table taken
         * again (resolve_bytes, class_chain). LazyByteDFA's table only grows;
         * one replaced by a shorter table meanwhile (a subclass's _table:
         * tests/test_lazycore_bounds.py) would have them read past its end.
         * Checked here, once a hand-back (itself a Python call), not in
         * their loops. */
        if (state >= session->table.len / 1024) {
            PyErr_SetString(PyExc_IndexError, "_lazycore: a state outside the table taken again");
            return -2;
        }
        return found;
    }
}

/* End a walk's hold: the store's states published, the views released.
 * 0, or -1 with an exception (an exception already set is kept). */
static int session_close(LazySession *session) {
    int status = 0;
    if (session->ctx != NULL && ((ContextObject *)session->ctx)->store != NULL) {
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        status = store_publish_count(session->ctx, ((ContextObject *)session->ctx)->store);
        if (type != NULL) {
            if (status < 0) {
                PyErr_Clear();
            }
            PyErr_Restore(type, value, traceback);
            status = -1;
        }
    }
    if (session->has_table) {
        PyBuffer_Release(&session->table);
    }
    if (session->has_finals) {
        PyBuffer_Release(&session->finals);
    }
    Py_CLEAR(session->table_object);
    Py_CLEAR(session->finals_object);
    Py_CLEAR(session->ctx);
    session->has_table = session->has_finals = 0;
    return status;
}

/* The ranges of ``state``'s cut that hold a byte of ``bits`` resolved (a
 * whole row: LazyByteDFA.materialise; a class's bytes: class_successor) in
 * the native state store, in byte order, without the GIL but for what the
 * store hands back; over the Python containers with a depth bound. The
 * caller holds the automaton's lock. 0, or -1 with an exception. */
static int resolve_bytes(PyObject *ctx, PyObject *state_object, const unsigned char *bits) {
    long long state = PyLong_AsLongLong(state_object);
    if (state == -1 && PyErr_Occurred()) {
        return -1;
    }
    LazySession session;
    int opened = session_open_context(ctx, &session);
    if (opened < 0) {
        return -1;
    }
    if (opened > 0) {
        return resolve_bytes_held(ctx, state_object, bits);
    }
    /* a state the store has (the automaton's count: synced at the open), in
     * the table (rows compared, not bytes: no product to overflow); the rows
     * past the count are undefined, and Python's kernels[state] raises there */
    if (state < 0 || (size_t)state >= ((ContextObject *)ctx)->store->count || state >= session.table.len / 1024) {
        session_close(&session);
        PyErr_SetString(PyExc_IndexError, "_lazycore: a state not discovered");
        return -1;
    }
    uint64_t since = thread_ns();
    PyThreadState *released = PyEval_SaveThread();
    int status = 0;
    for (int b = 0; b < 256 && status == 0; b++) {
        if (!((bits[b >> 3] >> (b & 7)) & 1) || ((const int32_t *)session.table.buf)[state * 256 + b] != UNKNOWN_CELL) {
            continue;
        }
        if (session_fast(&session, state, b) == NEED_GIL) {
            released_add(since);
            PyEval_RestoreThread(released);
            status = session_held(&session, state, b) < -1 ? -1 : 0;  /* the table may have grown: taken again */
            since = thread_ns();
            released = PyEval_SaveThread();
        }
    }
    released_add(since);
    PyEval_RestoreThread(released);
    if (session_close(&session) < 0) {
        status = -1;
    }
    return status;
}

/* --- a counted class's chain ------------------------------------------------
 *
 * LazyByteDFA.class_chain: from a state, while every byte of a class leads
 * to one next state (and, for a class with the wide characters, every
 * character of two or more bytes leads there too), that state, up to a
 * limit. The Python reference is one class_successor and one wide_target a
 * link, each behind the automaton's lock and over the Python containers:
 * 8-40 us a link, up to 127 links in one cold row inside a counted string
 * (MaskBench's Snowplow/sp_0, Qwen: 1-7 ms a row, cProfile). Here one call
 * walks the whole chain over the native state store, in the reference's
 * order (a state's class ranges in byte order, then its wide target), so
 * the states discovered and their ids are the reference's. */

#define WIDE_UNKNOWN (-3)
#define WIDE_ASK (-4)
/* How a chain ends (lazydfa.ChainEnd, which a test holds to these). */
enum { CHAIN_LIMIT, CHAIN_DEAD, CHAIN_LEAVES, CHAIN_LOOPS, CHAIN_ASK };

static Py_ssize_t chain_range_targets(Store *s, int64_t rows, int64_t state, int byte, long *lo_at, long *hi_at);

/* The targets of a chain link's ranges resolved so far, and their states
 * (py_class_chain, chain_wide_target): the first and the latest. */
typedef struct {
    Py_ssize_t count[2];
    int64_t state[2];
    int64_t targets[2][64];
} ChainKnown;

static int64_t chain_known(const ChainKnown *known, const int64_t *targets, Py_ssize_t count);
static void chain_remember(ChainKnown *known, const int64_t *targets, Py_ssize_t count, int64_t state);

/* NFA state q's wide ends (lazydfa.LazyByteDFA._nfa_wide_ends) copied into
 * the store, from the automaton's ``_wide_ends`` (computed and kept there
 * first when missing, as _wide_targets does). 0, or -1 with an exception. */
static int store_fill_wide(PyObject *ctx, Store *s, long long q) {
    if (q < 0 || q >= s->stride) {
        PyErr_SetString(PyExc_IndexError, "_lazycore: an NFA state outside the tables");
        return -1;
    }
    if ((size_t)q >= s->wide_cap) {
        size_t cap = s->wide_cap ? s->wide_cap : 256;
        while (cap <= (size_t)q) {
            cap *= 2;
        }
        if (grow_to((void **)&s->wide_at, cap, sizeof(int64_t)) < 0
                || grow_to((void **)&s->wide_len, cap, sizeof(int32_t)) < 0) {
            PyErr_NoMemory();
            return -1;  /* the arrays grown so far are longer than wide_cap: harmless */
        }
        for (size_t i = s->wide_cap; i < cap; i++) {
            s->wide_at[i] = -1;
            s->wide_len[i] = 0;
        }
        s->wide_cap = cap;
    }
    if (s->wide_at[q] != -1) {
        return 0;
    }
    PyObject *known = ITEM(ctx, C_WIDE_ENDS), *key = PyLong_FromLongLong(q), *ends = NULL;
    if (key == NULL) {
        return -1;
    }
    if (cached(known, key, &ends) == 0) {
        ends = nfa_wide_ends(ctx, q);
        if (ends != NULL && PyDict_SetItem(known, key, ends) < 0) {
            Py_CLEAR(ends);
        }
    }
    Py_DECREF(key);
    if (ends == NULL) {
        return -1;
    }
    if (ends == Py_None) {
        Py_DECREF(ends);
        s->wide_at[q] = -2;
        return 0;
    }
    Py_ssize_t n = PyObject_Size(ends);
    PyObject *each = n < 0 ? NULL : PyObject_GetIter(ends), *end;
    Py_DECREF(ends);
    if (each == NULL) {
        return -1;
    }
    if (reserve((void **)&s->wide_pool, &s->wide_pool_cap, s->wide_pool_len + (size_t)n, sizeof(int64_t)) < 0) {
        Py_DECREF(each);
        PyErr_NoMemory();
        return -1;
    }
    size_t at = s->wide_pool_len, count = 0;
    while ((end = PyIter_Next(each)) != NULL) {
        long long t = PyLong_AsLongLong(end);
        Py_DECREF(end);
        if ((t == -1 && PyErr_Occurred()) || (Py_ssize_t)count >= n) {
            break;
        }
        if (t < 0 || t >= s->stride) {
            PyErr_SetString(PyExc_ValueError, "_lazycore: a wide end outside the NFA");
            break;
        }
        s->wide_pool[at + count++] = t;
    }
    Py_DECREF(each);
    if (PyErr_Occurred()) {
        return -1;
    }
    s->wide_pool_len += count;
    s->wide_at[q] = (int64_t)at;
    s->wide_len[q] = (int32_t)count;
    return 0;
}

/* The state of s->targets[0:count] (sorted, distinct, at least one) with
 * the GIL: the store first, what it cannot do alone filled in or handed to
 * the core over the Python containers (session_held's way, for a set of
 * configurations rather than a cell). The state, or -1 with an exception;
 * the table may have grown (the session's views are taken again). */
static int64_t session_state_of(LazySession *session, size_t count) {
    PyObject *ctx = session->ctx;
    Store *s = ((ContextObject *)ctx)->store;
    for (;;) {
        int64_t found = store_state_of(s, session->table.buf, session->table.len / 1024, session->finals.buf,
                                       session->finals.len, count);
        if (found >= 0) {
            return found;
        }
        int supplied = store_supply(ctx, s);
        if (supplied < 0) {
            return -1;
        }
        if (supplied) {
            continue;
        }
        s->handed_back++;
        PyObject *targets = PyTuple_New((Py_ssize_t)count), *zero = PyLong_FromLong(0), *result = NULL;
        for (size_t i = 0; targets != NULL && i < count; i++) {
            PyObject *item = PyLong_FromLongLong(s->targets[i]);
            if (item == NULL) {
                Py_CLEAR(targets);
                break;
            }
            PyTuple_SET_ITEM(targets, (Py_ssize_t)i, item);
        }
        if (targets != NULL && zero != NULL) {
            result = step_of(ctx, targets, zero);
        }
        Py_XDECREF(targets);
        Py_XDECREF(zero);
        if (result == NULL) {
            return -1;
        }
        found = PyLong_AsLongLong(result);
        Py_DECREF(result);
        if ((found == -1 && PyErr_Occurred()) || store_sync(ctx, s) < 0 || session_buffers(session) < 0) {
            return -1;
        }
        if (found < 0) {
            PyErr_SetString(PyExc_RuntimeError, "_lazycore: a step gave no state");
            return -1;
        }
        return found;
    }
}

/* The state every character of two or more bytes leads to from ``state``
 * (LazyByteDFA.wide_target over the store; kept a state): the state (DEAD
 * when every one dies), WIDE_ASK when the NFA does not show one state, or
 * -1 with an exception. */
static int64_t chain_wide_target(LazySession *session, int64_t state, const ChainKnown *known) {
    PyObject *ctx = session->ctx;
    Store *s = ((ContextObject *)ctx)->store;
    if (state < 0 || (size_t)state >= s->count) {
        PyErr_SetString(PyExc_RuntimeError, "_lazycore: a chain's state the store does not have");
        return -1;
    }
    if ((size_t)state >= s->wide_state_cap) {
        size_t cap = s->wide_state_cap ? s->wide_state_cap : 1024;
        while (cap <= (size_t)state) {
            cap *= 2;
        }
        if (grow_to((void **)&s->wide_state, cap, sizeof(int64_t)) < 0) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = s->wide_state_cap; i < cap; i++) {
            s->wide_state[i] = WIDE_UNKNOWN;
        }
        s->wide_state_cap = cap;
    }
    if (s->wide_state[state] != WIDE_UNKNOWN) {
        return s->wide_state[state];
    }
    long long stride = s->stride;
    size_t from = s->koff[state], n = s->koff[state + 1] - from, total = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t config = s->pool[from + i];
        if (config < 0) {
            PyErr_SetString(PyExc_ValueError, "_lazycore: a negative configuration");
            return -1;
        }
        long long q = config % stride;
        if (store_fill_wide(ctx, s, q) < 0) {
            return -1;
        }
        if (s->wide_at[q] == -2) {
            s->wide_state[state] = WIDE_ASK;
            return WIDE_ASK;
        }
        total += (size_t)s->wide_len[q];
    }
    if (reserve((void **)&s->targets, &s->targets_cap, total + 1, sizeof(int64_t)) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t config = s->pool[from + i];
        long long q = config % stride, base = config - q;
        const int64_t *ends = s->wide_pool + s->wide_at[q];
        for (int32_t j = 0; j < s->wide_len[q]; j++) {
            s->targets[count++] = base + ends[j];
        }
    }
    int64_t found = DEAD;
    if (count) {
        sort_values(s->targets, count);
        size_t kept = 0;
        for (size_t i = 0; i < count; i++) {
            if (!kept || s->targets[kept - 1] != s->targets[i]) {
                s->targets[kept++] = s->targets[i];
            }
        }
        /* the state of a range of the class with the same targets, where
         * one has them (along a chain: the class's state), else found */
        found = known != NULL ? chain_known(known, s->targets, (Py_ssize_t)kept) : -1;
        if (found < 0) {
            found = session_state_of(session, kept);
        }
        if (found < 0) {
            return -1;
        }
    }
    s->wide_state[state] = found;
    return found;
}

/* LazyByteDFA.class_chain, over the store: ``(states, end)``, the states
 * the chain reaches from ``state`` (not included), at most ``limit``, and
 * how it ends (CHAIN_*); None when the automaton has no store (a depth
 * bound): the caller walks the reference. The caller holds the lock. */
static PyObject *py_class_chain(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    unsigned char bits[32];
    if (arguments(nargs, 5, args, "class_chain(context, state, wanted, wide, limit)") < 0
            || wanted_bits(args[2], bits) < 0) {
        return NULL;
    }
    PyObject *ctx = args[0];
    long long current = PyLong_AsLongLong(args[1]);
    int wide = PyObject_IsTrue(args[3]);
    Py_ssize_t limit = PyLong_AsSsize_t(args[4]);
    if ((current == -1 || limit == -1) && PyErr_Occurred()) {
        return NULL;
    }
    if (wide < 0) {
        return NULL;
    }
    /* the class's bytes, ascending, listed once for every link: two loops
     * a link over the 256 bits took ~8k of a link's ~33k instructions
     * (callgrind, MaskBench's Snowplow sp_0 on Qwen, 2,758 links: this
     * function's own instructions 22.6M -> 6.7M, of 92M with its calls) */
    unsigned char class_bytes[256];
    int num_class = 0;
    for (int b = 0; b < 256; b++) {
        if ((bits[b >> 3] >> (b & 7)) & 1) {
            class_bytes[num_class++] = (unsigned char)b;
        }
    }
    if (!num_class) {
        PyErr_SetString(PyExc_ValueError, "class_chain: the class has no byte");
        return NULL;
    }
    LazySession session;
    int opened = session_open_context(ctx, &session);
    if (opened < 0) {
        return NULL;
    }
    if (opened > 0) {
        Py_RETURN_NONE;
    }
    Store *s = ((ContextObject *)ctx)->store;
    PyObject *states = PyList_New(0);
    int end = CHAIN_LIMIT, failed = states == NULL;
    for (Py_ssize_t link = 0; !failed && link < limit; link++) {
        if (link && !(link & 31)) {  /* the time limit, as a walk of many cells checks it */
            PyObject *checked = store_publish_count(ctx, s) < 0 ? NULL : PyObject_CallNoArgs(ITEM(ctx, C_CHECK));
            if (checked == NULL) {
                failed = 1;
                break;
            }
            Py_DECREF(checked);
        }
        if (current < 0 || (size_t)current >= s->count || current >= session.table.len / 1024) {
            PyErr_SetString(PyExc_IndexError, "_lazycore: a state not discovered");
            failed = 1;
            break;
        }
        /* the class's ranges of ``current`` resolved in byte order
         * (resolve_bytes). Along a chain every range leads to one state:
         * a range whose targets (before their closure) are those of a
         * range resolved before it is written with that one's state, with
         * no closure or lookup of the same kernel again, and so is the
         * wide target (chain_range_targets, chain_known). Callgrind on
         * MaskBench's Snowplow sp_0 (qwen2.5, 2,758 links): this call
         * 76.3M -> 47.8M instructions, session_fast 8,184 -> 2,740 calls;
         * the same states, in the same order, as before */
        ChainKnown known = {{-1, -1}, {-1, -1}, {{0}}};
        for (int i = 0; i < num_class && !failed; i++) {
            int b = class_bytes[i];
            if (((const int32_t *)session.table.buf)[current * 256 + b] != UNKNOWN_CELL) {
                continue;
            }
            long lo = 0, hi = 0;
            Py_ssize_t count = chain_range_targets(s, session.table.len / 1024, current, b, &lo, &hi);
            int64_t same = count > 0 ? chain_known(&known, s->targets, count) : -1;
            if (same >= 0) {
                write_range((int32_t *)session.table.buf + current * 256, lo, hi, (int32_t)same);
                continue;
            }
            if (session_fast(&session, current, b) == NEED_GIL && session_held(&session, current, b) < -1) {
                failed = 1;
                break;
            }
            int32_t cell = ((const int32_t *)session.table.buf)[current * 256 + b];
            if (cell > DEAD) {
                /* the range's targets (s->targets is the store's scratch:
                 * computed again, as store_fast left them there or not) */
                count = chain_range_targets(s, session.table.len / 1024, current, b, &lo, &hi);
                chain_remember(&known, s->targets, count, cell);
            }
        }
        if (failed) {
            break;
        }
        const int32_t *row = (const int32_t *)session.table.buf + current * 256;
        long long following = row[class_bytes[0]];  /* class_successor */
        for (int i = 1; i < num_class; i++) {
            if (row[class_bytes[i]] != following) {
                following = -2;
                break;
            }
        }
        if (following == DEAD || following < 0) {
            end = following == DEAD ? CHAIN_DEAD : CHAIN_LEAVES;
            break;
        }
        if (wide) {
            int64_t target = chain_wide_target(&session, current, &known);
            if (target == -1) {
                failed = 1;
                break;
            }
            if (target == WIDE_ASK) {
                end = CHAIN_ASK;
                break;
            }
            if (target != following) {
                end = CHAIN_LEAVES;
                break;
            }
        }
        if (following == current) {
            end = CHAIN_LOOPS;
            break;
        }
        PyObject *item = PyLong_FromLongLong(following);
        if (item == NULL || PyList_Append(states, item) < 0) {
            Py_XDECREF(item);
            failed = 1;
            break;
        }
        Py_DECREF(item);
        current = following;
    }
    if (session_close(&session) < 0) {
        failed = 1;
    }
    if (failed) {
        Py_XDECREF(states);
        return NULL;
    }
    PyObject *result = Py_BuildValue("(Ni)", states, end);
    return result;
}

/* What tokendfa.lazy._cwalk calls, through the capsule ``_C_API``. */
typedef struct {
    int version;
    size_t session_size;
    int (*open)(PyObject *dfa, void *session);
    int64_t (*fast)(void *session, int64_t state, int byte);
    int64_t (*held)(void *session, int64_t state, int byte);
    int (*close)(void *session);
} LazyCoreAPI;

static int api_open(PyObject *dfa, void *session) { return session_open(dfa, session); }
static int64_t api_fast(void *session, int64_t state, int byte) { return session_fast(session, state, byte); }
static int64_t api_held(void *session, int64_t state, int byte) { return session_held(session, state, byte); }
static int api_close(void *session) { return session_close(session); }

static LazyCoreAPI core_api = {1, sizeof(LazySession), api_open, api_fast, api_held, api_close};

/* store_info(context) -> dict: the store's counts (tests and benchmarks). */
/* LazyByteDFA._publish: every state of the store in ``_kernels`` and ``_ids``. */
static PyObject *py_publish(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arguments(nargs, 1, args, "publish(context)") < 0) {
        return NULL;
    }
    Store *s = ((ContextObject *)args[0])->store;
    if (s != NULL && store_publish(args[0], s) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *py_store_info(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arguments(nargs, 1, args, "store_info(context)") < 0) {
        return NULL;
    }
    Store *s = ((ContextObject *)args[0])->store;
    if (s == NULL) {
        return Py_BuildValue("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "states", 0, "published", 0,
                             "stacks", 0, "stacks_published", 0,
                             "fast_found", 0, "fast_discovered", 0, "handed_back", 0, "by_state", 0, "by_call", 0,
                             "by_bound", 0, "cut_passes", 0, "publishes", 0, "kernels_lent", 0, "store_ids", 0);
    }
    return Py_BuildValue("{s:n,s:n,s:n,s:n,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}", "states", (Py_ssize_t)s->count,
                         "published", (Py_ssize_t)s->published, "stacks", (Py_ssize_t)s->stacks,
                         "stacks_published", (Py_ssize_t)s->stacks_published, "fast_found", s->fast_found, "fast_discovered",
                         s->fast_discovered, "handed_back", s->handed_back, "by_state", s->why[0],
                         "by_call", s->why[1], "by_bound", s->why[2], "cut_passes", s->cut_passes,
                         "publishes", s->publishes, "kernels_lent", s->kernels_lent,
                         "store_ids", s->store_ids);
}

/* --- the Context type ------------------------------------------------------ */

/* Context(**fields): every field by name, each exactly once. */
static PyObject *context_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    if (PyTuple_GET_SIZE(args) != 0) {
        PyErr_SetString(PyExc_TypeError, "Context takes its fields by keyword only");
        return NULL;
    }
    Py_ssize_t given = kwds == NULL ? 0 : PyDict_GET_SIZE(kwds);
    ContextObject *self = (ContextObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    for (int i = 0; i < C_SIZE; i++) {
        PyObject *value = kwds == NULL ? NULL : PyDict_GetItemString(kwds, context_fields[i]);
        if (value == NULL) {
            PyErr_Format(PyExc_TypeError, "Context: field '%s' is missing", context_fields[i]);
            Py_DECREF(self);
            return NULL;
        }
        Py_INCREF(value);
        self->items[i] = value;
    }
    if (given != C_SIZE) {  /* every field was found, so some other keyword was given too */
        PyObject *key, *value;
        Py_ssize_t position = 0;
        while (PyDict_Next(kwds, &position, &key, &value)) {
            int known = 0;
            for (int i = 0; i < C_SIZE && !known; i++) {
                known = PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, context_fields[i]) == 0;
            }
            if (!known) {
                PyErr_Format(PyExc_TypeError, "Context: no field named %R", key);
                break;
            }
        }
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int context_traverse(ContextObject *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(self));
    for (int i = 0; i < C_SIZE; i++) {
        Py_VISIT(self->items[i]);
    }
    return 0;
}

static int context_clear(ContextObject *self) {
    for (int i = 0; i < C_SIZE; i++) {
        Py_CLEAR(self->items[i]);
    }
    return 0;
}

static void context_finalize_store(ContextObject *self) {
    store_free(self->store);
    self->store = NULL;
}

static void context_dealloc(ContextObject *self) {
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    context_clear(self);
    context_finalize_store(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

/* One read-only member a field, named as in context_fields (filled at import). */
static PyMemberDef context_members[C_SIZE + 1];

static PyType_Slot context_slots[] = {
    {Py_tp_doc, (void *)"What the compiled core reads and writes of a LazyByteDFA, one named field each."},
    {Py_tp_new, context_new},
    {Py_tp_traverse, context_traverse},
    {Py_tp_clear, context_clear},
    {Py_tp_dealloc, context_dealloc},
    {Py_tp_members, context_members},
    {0, NULL},
};

static PyType_Spec context_spec = {
    "tokendfa.analysis._lazycore.Context", sizeof(ContextObject), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, context_slots,
};

/* --- the table's memory ------------------------------------------------------
 *
 * LazyByteDFA's table (int32[rows, 256], 1 KB a state) grows while walks run.
 * Copied into a mapping twice as large, the growth from 8k to 16k rows took
 * 2 to 23 ms of one step (8 MB copied into 16 MB of new pages, 2 MB pages
 * the kernel zero-fills, and may compact memory to find): the worst step of the
 * MaskBench sample, 16 ms in one run. A Table is one private anonymous mapping
 * that grows in place (mremap without MREMAP_MAYMOVE): the rows stay where
 * they are, so nothing is copied and a reader that took the table before
 * (a walk without the GIL) keeps reading valid memory, the first rows of the
 * same pages. For in-place growth to find free addresses after the mapping,
 * each table is placed (a hint: the kernel takes it only where it is free)
 * at the start of its own slot, as long as the automaton's state bound,
 * in a range of addresses nothing else uses on 64-bit Linux (the kernel
 * places a program and its mappings far above it). Only
 * the mapped bytes count against an address-space limit (RLIMIT_AS), as
 * before. Where the hint is not taken or growing in place fails, grow()
 * says so and the caller copies into a new Table (the reference's way).
 *
 * Table(rows, most): ``rows`` rows mapped, in a slot of ``most`` rows;
 * MemoryError when the mapping fails (an address-space limit, no memory).
 * It exports its mapped bytes (a writable buffer of unsigned bytes). */

#if defined(__linux__) && UINTPTR_MAX > 0xffffffffu
#define TABLE_IN_PLACE 1
#include <sys/mman.h>
#endif

#define TABLE_ROW_BYTES 1024
/* the first 4 MB stay on 4 kB pages (a small automaton keeps its few small
 * pages), past them 2 MB pages, as numpy asks for arrays that large: a table
 * of tens of thousands of states read at random rows missed the translation
 * cache on 4 kB pages */
#define TABLE_SMALL_PAGES ((size_t)4 << 20)
#define TABLE_HUGE ((size_t)2 << 20)
/* rows a Table may have: a state is an int32 */
#define TABLE_MOST_ROWS ((size_t)1 << 31)
/* slots: [32 TB, 64 TB), each at most 64 GB (a larger bound copies past
 * it). x86-64 Linux places a program near 85 TB and mappings down from
 * 127 TB; AddressSanitizer's shadow ends at 16 TB. Where the addresses do
 * not exist (39-bit arm64: 512 GB) the kernel ignores the hint. */
#define TABLE_SLOTS_START ((uintptr_t)32 << 40)
#define TABLE_SLOTS_END ((uintptr_t)64 << 40)
#define TABLE_SLOT_MOST ((size_t)64 << 30)

typedef struct {
    PyObject_HEAD
    char *data;         /* NULL: nothing mapped */
    size_t mapped;      /* bytes mapped (rows * 1024) */
    int in_place;       /* whether grow() may extend the mapping (mmap, not malloc) */
} TableObject;

static PyTypeObject *table_type;

#ifdef TABLE_IN_PLACE
static uintptr_t table_next_slot = TABLE_SLOTS_START;  /* the GIL guards it */

static void table_advise(char *data, size_t from, size_t to) {
#ifdef MADV_HUGEPAGE
    if (from < TABLE_SMALL_PAGES) {
        from = TABLE_SMALL_PAGES;
    }
    if (to > from) {
        (void)madvise(data + from, to - from, MADV_HUGEPAGE);  /* no THP: 4 kB pages throughout */
    }
#else
    (void)data; (void)from; (void)to;
#endif
}
#endif

/* rows (and most) from Python, checked: 1 <= rows <= TABLE_MOST_ROWS */
static int table_rows_arg(PyObject *object, size_t *rows, const char *what) {
    long long value = PyLong_AsLongLong(object);
    if (value == -1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            value = -1;
        } else {
            return -1;
        }
    }
    /* the second bound matters where size_t has 32 bits: rows * 1024 must not wrap */
    if (value < 1 || (unsigned long long)value > TABLE_MOST_ROWS
            || (unsigned long long)value > SIZE_MAX / TABLE_ROW_BYTES) {
        PyErr_Format(PyExc_ValueError, "Table: %s must be 1 to 2**31 rows (and fit this platform's sizes)", what);
        return -1;
    }
    *rows = (size_t)value;
    return 0;
}

static PyObject *table_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *rows_object, *most_object;
    static char *keywords[] = {"rows", "most", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:Table", keywords, &rows_object, &most_object)) {
        return NULL;
    }
    size_t rows, most;
    if (table_rows_arg(rows_object, &rows, "rows") < 0 || table_rows_arg(most_object, &most, "most") < 0) {
        return NULL;
    }
    if (most < rows) {
        most = rows;
    }
    TableObject *self = (TableObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    size_t size = rows * TABLE_ROW_BYTES;
#ifdef TABLE_IN_PLACE
    size_t slot = most * TABLE_ROW_BYTES;
    slot = slot > TABLE_SLOT_MOST ? TABLE_SLOT_MOST : (slot + TABLE_HUGE - 1) & ~(TABLE_HUGE - 1);
    if (table_next_slot + slot > TABLE_SLOTS_END || table_next_slot + slot < table_next_slot) {
        table_next_slot = TABLE_SLOTS_START;
    }
    void *hint = (void *)table_next_slot;
    void *data = mmap(hint, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data == MAP_FAILED) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    if (data == hint) {
        table_next_slot += slot;  /* the next table's slot; one not taken is tried again */
    }
    self->data = data;
    self->mapped = size;
    self->in_place = 1;
    table_advise(self->data, 0, size);
#else
    self->data = PyMem_RawMalloc(size);
    if (self->data == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    self->mapped = size;
#endif
    return (PyObject *)self;
}

/* grow(rows): True when the mapping now has ``rows`` rows, the same
 * addresses (nothing copied); False when it could not grow in place (the
 * caller copies into a new Table). */
static PyObject *table_grow(TableObject *self, PyObject *rows_object) {
    size_t rows;
    if (table_rows_arg(rows_object, &rows, "rows") < 0) {
        return NULL;
    }
    size_t size = rows * TABLE_ROW_BYTES;
    if (size <= self->mapped) {
        Py_RETURN_TRUE;
    }
#ifdef TABLE_IN_PLACE
    if (self->in_place && self->data != NULL) {
        /* mremap takes one mapping (VMA): past 4 MB, the 2 MB pages' advice
         * made the bytes after the first 4 MB a mapping of their own, and
         * that one is extended (keeping its advice) */
        size_t tail = self->mapped > TABLE_SMALL_PAGES ? TABLE_SMALL_PAGES : 0;
        void *grown = mremap(self->data + tail, self->mapped - tail, size - tail, 0);
        if (grown == (void *)(self->data + tail)) {
            size_t before = self->mapped;
            self->mapped = size;
            table_advise(self->data, before, size);
            Py_RETURN_TRUE;
        }
        if (grown != MAP_FAILED) {  /* cannot happen without MREMAP_MAYMOVE; never keep a moved mapping */
            (void)munmap(grown, size - tail);
            if (tail) {
                (void)munmap(self->data, tail);
            }
            self->data = NULL;
            self->mapped = 0;
            PyErr_SetString(PyExc_SystemError, "Table: mremap moved the mapping");
            return NULL;
        }
    }
#endif
    Py_RETURN_FALSE;
}

static PyObject *table_rows(TableObject *self, void *closure) {
    (void)closure;
    return PyLong_FromSize_t(self->mapped / TABLE_ROW_BYTES);
}

static int table_getbuffer(TableObject *self, Py_buffer *view, int flags) {
    if (self->data == NULL) {
        PyErr_SetString(PyExc_BufferError, "Table: nothing mapped");
        view->obj = NULL;
        return -1;
    }
    return PyBuffer_FillInfo(view, (PyObject *)self, self->data, (Py_ssize_t)self->mapped, 0, flags);
}

static void table_dealloc(TableObject *self) {
    PyTypeObject *type = Py_TYPE(self);
    /* every export holds a reference: none is left */
    if (self->data != NULL) {
#ifdef TABLE_IN_PLACE
        (void)munmap(self->data, self->mapped);
#else
        PyMem_RawFree(self->data);
#endif
    }
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static PyMethodDef table_methods[] = {
    {"grow", (PyCFunction)table_grow, METH_O,
     "grow(rows): True when the table now has rows rows at the same addresses, False when it must be copied."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef table_getset[] = {
    {"rows", (getter)table_rows, NULL, "The rows mapped.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot table_slots[] = {
    {Py_tp_doc, (void *)"Table(rows, most): a lazy automaton's table memory, grown in place (see _lazycore.c)."},
    {Py_tp_new, table_new},
    {Py_tp_dealloc, table_dealloc},
    {Py_tp_methods, table_methods},
    {Py_tp_getset, table_getset},
    {Py_bf_getbuffer, table_getbuffer},
    {0, NULL},
};

static PyType_Spec table_spec = {
    "tokendfa.analysis._lazycore.Table", sizeof(TableObject), 0, Py_TPFLAGS_DEFAULT, table_slots,
};

/* Exclusive(): lazydfa._Exclusive compiled (that class is its reference,
 * and what TOKENDFA_NATIVE=0 runs): the lock that resolving cells takes,
 * with the cyclic collector paused process-wide while any automaton holds
 * one (the holders counted; the first one in records whether the collector
 * was on, the last one out turns it back on). Taken ~2.7 times a cold row
 * (the compiled walk, a first row, a wide target...), where the class's
 * __enter__ and __exit__ and the pause's enter and leave were four Python
 * calls and a second lock: ~1.35 us a time in process, ~0.1 here. The GIL
 * guards the holders' count: nothing between the count and the collector's
 * switch lets it go. A thread that waits for the lock lets the GIL go (the
 * holder may be walking without it, and needs it back to resolve a cell). */
typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    int held;
} ExclusiveObject;

static Py_ssize_t exclusive_holders;  /* the GIL guards both */
static int exclusive_collector_was_on;

static PyObject *exclusive_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    if (PyTuple_GET_SIZE(args) != 0 || (kwds != NULL && PyDict_GET_SIZE(kwds) != 0)) {
        PyErr_SetString(PyExc_TypeError, "Exclusive() takes no arguments");
        return NULL;
    }
    ExclusiveObject *self = (ExclusiveObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->lock = PyThread_allocate_lock();
    if (self->lock == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static void exclusive_dealloc(ExclusiveObject *self) {
    PyTypeObject *type = Py_TYPE(self);
    if (self->lock != NULL) {
        PyThread_free_lock(self->lock);
    }
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static PyObject *exclusive_enter(ExclusiveObject *self, PyObject *unused) {
    (void)unused;
    if (!PyThread_acquire_lock(self->lock, NOWAIT_LOCK)) {
        Py_BEGIN_ALLOW_THREADS
        (void)PyThread_acquire_lock(self->lock, WAIT_LOCK);
        Py_END_ALLOW_THREADS
    }
    self->held = 1;
    if (exclusive_holders++ == 0) {
        exclusive_collector_was_on = PyGC_Disable();
    }
    Py_RETURN_NONE;
}

static PyObject *exclusive_exit(ExclusiveObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)args;
    (void)nargs;
    if (!self->held) {  /* threading.Lock's answer to a release of a lock not held */
        PyErr_SetString(PyExc_RuntimeError, "Exclusive: released while not held");
        return NULL;
    }
    if (--exclusive_holders == 0 && exclusive_collector_was_on) {
        PyGC_Enable();
    }
    self->held = 0;
    PyThread_release_lock(self->lock);
    Py_RETURN_FALSE;
}

static PyMethodDef exclusive_methods[] = {
    {"__enter__", (PyCFunction)exclusive_enter, METH_NOARGS, "Take the lock; the collector paused."},
    {"__exit__", (PyCFunction)(void (*)(void))exclusive_exit, METH_FASTCALL,
     "Release the lock; the collector back on after the last holder, if it was on."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot exclusive_slots[] = {
    {Py_tp_doc, (void *)"Exclusive(): the lock resolving cells takes, the cyclic collector paused (lazydfa._Exclusive)."},
    {Py_tp_new, exclusive_new},
    {Py_tp_dealloc, exclusive_dealloc},
    {Py_tp_methods, exclusive_methods},
    {0, NULL},
};

static PyType_Spec exclusive_spec = {
    "tokendfa.analysis._lazycore.Exclusive", sizeof(ExclusiveObject), 0, Py_TPFLAGS_DEFAULT, exclusive_slots,
};

static PyMethodDef methods[] = {
    {"reserve_table", (PyCFunction)(void (*)(void))py_reserve_table, METH_FASTCALL,
     "reserve_table(rows, need): the list's storage made to hold need items (more when it grows)"},
    {"untrack_table", (PyCFunction)(void (*)(void))py_untrack_table, METH_FASTCALL,
     "Take a list of rows of ints (an NFA's table) off the cyclic collector's lists."},
    {"nfa_wide_ends", (PyCFunction)(void (*)(void))py_nfa_wide_ends, METH_FASTCALL,
     "LazyByteDFA._nfa_wide_ends, compiled."},
    {"wide_sequences", (PyCFunction)py_wide_sequences, METH_NOARGS,
     "The UTF-8 sequences nfa_wide_ends follows (lazydfa.WIDE_SEQUENCES)."},
    {"untrack_node", (PyCFunction)(void (*)(void))py_untrack_node, METH_FASTCALL,
     "Untrack a regex tree node just made, its intern key, tuple field and calls (see regex_tree)."},
    {"untrack_rows", (PyCFunction)(void (*)(void))py_untrack_rows, METH_FASTCALL,
     "Untrack the int tuples of rows[start:stop] (the NFA's eps and edges)."},
    {"closure", (PyCFunction)(void (*)(void))py_closure, METH_FASTCALL, "LazyByteDFA._closure, compiled."},
    {"step", (PyCFunction)(void (*)(void))py_step, METH_FASTCALL, "LazyByteDFA._step, compiled."},
    {"cut_of", (PyCFunction)(void (*)(void))py_cut_of, METH_FASTCALL, "LazyByteDFA._cut_of, compiled."},
    {"step_held", (PyCFunction)(void (*)(void))py_step_held, METH_FASTCALL, "LazyByteDFA.step_held, compiled."},
    {"resolve_bytes", (PyCFunction)(void (*)(void))py_resolve_bytes, METH_FASTCALL,
     "LazyByteDFA._resolve_bytes, compiled."},
    {"wide_targets", (PyCFunction)(void (*)(void))py_wide_targets, METH_FASTCALL,
     "LazyByteDFA._wide_targets, compiled."},
    {"alive", (PyCFunction)(void (*)(void))py_alive, METH_FASTCALL, "_LazyNFA._alive, compiled."},
    {"class_chain", (PyCFunction)(void (*)(void))py_class_chain, METH_FASTCALL,
     "LazyByteDFA.class_chain over the native state store: (states, end), or None."},
    {"class_successor", (PyCFunction)(void (*)(void))py_class_successor, METH_FASTCALL,
     "LazyByteDFA.class_successor, compiled (the caller holds the lock)."},
    {"count_released", (PyCFunction)count_released, METH_O,
     "Turn the count of released_ns() on (True) or off (False; the default)."},
    {"released_ns", (PyCFunction)released_ns, METH_NOARGS,
     "CPU time (each thread's own) resolve_bytes has spent without the GIL, in ns, over the process."},
    {"released_count", (PyCFunction)released_count, METH_NOARGS,
     "How many sections released_ns() has counted (each a point where the GIL may change hands)."},
    {"publish", (PyCFunction)(void (*)(void))py_publish, METH_FASTCALL,
     "Every state of the native store published to the automaton's _kernels and _ids."},
    {"store_info", (PyCFunction)(void (*)(void))py_store_info, METH_FASTCALL,
     "The native state store's counts: states, published (of them, those in _kernels and _ids), stacks, "
     "stacks_published (in _stack_parent), fast_found, fast_discovered, handed_back, "
     "the fast path's refusals by reason (by_state, by_call, by_bound), and cut_passes (the rows whose "
     "bytes outside the cut were written DEAD), publishes (LazyByteDFA._publish calls), kernels_lent "
     "(kernels made for a cut or a wide target, not published) and store_ids (ids of "
     "unpublished kernels read from the store)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef definition = {
    PyModuleDef_HEAD_INIT, "_lazycore",
    "The hot path of the lazy subset construction (tokendfa.analysis.lazydfa), compiled.", -1, methods,
};

PyMODINIT_FUNC PyInit__lazycore(void) {
    name_table = PyUnicode_InternFromString("_table");
    name_count = PyUnicode_InternFromString("_count");
    name_finals = PyUnicode_InternFromString("_finals");
    name_max_states = PyUnicode_InternFromString("max_states");
    if (name_table == NULL || name_count == NULL || name_finals == NULL || name_max_states == NULL) {
        return NULL;
    }
    for (int i = 0; i < C_SIZE; i++) {
        context_members[i] = (PyMemberDef){(char *)context_fields[i], T_OBJECT_EX,
                                           offsetof(ContextObject, items) + i * sizeof(PyObject *), READONLY, NULL};
    }
    PyObject *module = PyModule_Create(&definition);
    if (module == NULL) {
        return NULL;
    }
    context_type = (PyTypeObject *)PyType_FromSpec(&context_spec);
    if (context_type == NULL || PyModule_AddObjectRef(module, "Context", (PyObject *)context_type) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    table_type = (PyTypeObject *)PyType_FromSpec(&table_spec);
    if (table_type == NULL || PyModule_AddObjectRef(module, "Table", (PyObject *)table_type) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    PyObject *exclusive_type = PyType_FromSpec(&exclusive_spec);
    if (exclusive_type == NULL || PyModule_AddObject(module, "Exclusive", exclusive_type) < 0) {
        Py_XDECREF(exclusive_type);
        Py_DECREF(module);
        return NULL;
    }
    PyObject *capsule = PyCapsule_New(&core_api, "tokendfa.analysis._lazycore._C_API", NULL);
    if (capsule == NULL || PyModule_AddObject(module, "_C_API", capsule) < 0) {
        Py_XDECREF(capsule);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}


/* --- a chain link's ranges (py_class_chain) ------------------------------
 *
 * The cell (state, byte) as store_fast computes it, up to its targets: the
 * byte's piece of the cut ``[*lo_at, *hi_at]`` and the targets of every
 * kernel edge over it, sorted and distinct, in s->targets[0:count] (their
 * closure, the state's kernel and its lookup not made). 0 for a byte no
 * edge covers, -1 where store_fast would need the GIL or has not written
 * the row's cut yet (the caller resolves the cell the usual way). Along a
 * chain the class's ranges (three for a JSON string's characters) lead to
 * one state: py_class_chain writes a range whose targets are a resolved
 * range's with that range's state (chain_known). Callgrind on MaskBench's
 * Snowplow sp_0 (qwen2.5), 2,758 links: 27.7k instructions a link before,
 * ~2.3k of them a range's closure and lookup in store_state_of. */
static Py_ssize_t chain_range_targets(Store *s, int64_t rows, int64_t state, int byte, long *lo_at, long *hi_at) {
    if (s->bounded || state < 0 || (size_t)state >= s->count || state >= rows || byte < 0 || byte > 255
            || (size_t)state >= s->cut_written_cap || !s->cut_written[state]) {
        return -1;
    }
    long long stride = s->stride;
    size_t from = s->koff[state], n = s->koff[state + 1] - from;
    if (!n) {
        return -1;
    }
    const int64_t *k = s->pool + from;
    for (size_t i = 0; i < n; i++) {
        long long q = k[i] % stride;
        if (k[i] < 0 || (size_t)q >= s->nfa_cap || s->edge_at[q] < 0) {
            return -1;
        }
    }
    return cut_piece(s, k, n, byte, NULL, lo_at, hi_at);
}

/* The state of the range ``known`` holds with ``targets[0:count]`` (sorted,
 * distinct), or -1. */
static int64_t chain_known(const ChainKnown *known, const int64_t *targets, Py_ssize_t count) {
    for (int i = 0; i < 2; i++) {
        if (known->count[i] == count && count > 0
                && memcmp(known->targets[i], targets, (size_t)count * sizeof(int64_t)) == 0) {
            return known->state[i];
        }
    }
    return -1;
}

/* ``targets[0:count]`` and their ``state`` kept in ``known``: the first
 * range's in slot 0, the latest's in slot 1 (none past 64 targets). */
static void chain_remember(ChainKnown *known, const int64_t *targets, Py_ssize_t count, int64_t state) {
    if (count <= 0 || count > 64) {
        return;
    }
    int slot = known->count[0] < 0 ? 0 : 1;
    memcpy(known->targets[slot], targets, (size_t)count * sizeof(int64_t));
    known->count[slot] = count;
    known->state[slot] = state;
}
