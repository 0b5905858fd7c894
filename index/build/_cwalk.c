/* The compiled inner loop of a lazy token row: tokens walked byte by byte
 * through the lazy byte automaton's table (tokendfa.build.lazy).
 *
 * The numpy walk pays ~40 us a level in calls whatever the number of tokens,
 * and a cold row inside a JSON string walks ~6k tokens over a dozen levels:
 * about half of a cold row that is not spent discovering states. Here each
 * token goes as far as the resolved cells take it, in one pass; the cells it
 * stops at are resolved by the Python caller (LazyByteDFA._resolve_cells,
 * which discovers states and may grow the table), and the stopped tokens are
 * walked on in the next pass.
 *
 * Plain C over the buffer protocol: no numpy headers at build time. The
 * module is optional; without it the numpy walk serves the same rows.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define UNKNOWN (-1)
#define DEAD 0

typedef struct {
    Py_buffer view;
    int held;
} Buffer;

static int take(PyObject *object, Buffer *buffer, const char *name, Py_ssize_t item, int writable) {
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(object, &buffer->view, flags) < 0) {
        return -1;
    }
    buffer->held = 1;
    if (buffer->view.itemsize != item) {
        PyErr_Format(PyExc_TypeError, "%s: items of %zd bytes expected, got %zd",
                     name, item, buffer->view.itemsize);
        return -1;
    }
    return 0;
}

static void release(Buffer *buffers, int count) {
    for (int i = 0; i < count; i++) {
        if (buffers[i].held) {
            PyBuffer_Release(&buffers[i].view);
            buffers[i].held = 0;
        }
    }
}

/* walk(dfa, columns, vocab_size, at, states, left, ended_tokens, ended_states) -> ended
 *
 * dfa:      the LazyByteDFA, its resolving lock held by the caller: its
 *           ``table`` (int32[n, 256], UNKNOWN -1, DEAD 0) is read directly,
 *           and ``step_held(state, byte)`` resolves a cell still UNKNOWN
 *           (discovering states: the table may grow, and is read anew)
 * columns:  uint8[L * V], byte d of token t at d * V + t
 * at:       int64[k], the flat index of each token's next byte
 * states:   int64[k], the state it is read from
 * left:     int64[k], the token's bytes after that one
 *
 * A token that reads its last byte into a live state goes to ended_* (token
 * id, state); a dead one is dropped. The outputs must hold k items each.
 * Returns how many ended.
 */
static int take_table(PyObject *dfa, PyObject **table_object, Buffer *table) {
    PyObject *current = PyObject_GetAttrString(dfa, "table");
    if (current == NULL) {
        return -1;
    }
    if (current == *table_object) {
        Py_DECREF(current);
        return 0;
    }
    release(table, 1);
    Py_XDECREF(*table_object);
    *table_object = current;
    if (take(current, table, "table", 4, 0) < 0) {
        return -1;
    }
    if (table->view.len % (256 * 4)) {
        PyErr_SetString(PyExc_ValueError, "walk: the table's rows are not 256 cells");
        return -1;
    }
    return 0;
}

static PyObject *walk(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "walk takes 8 arguments");
        return NULL;
    }
    PyObject *dfa = args[0];
    long long vocab_size = PyLong_AsLongLong(args[2]);
    if (vocab_size <= 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "walk: vocab_size must be positive");
        }
        return NULL;
    }
    PyObject *step = PyObject_GetAttrString(dfa, "step_held");
    if (step == NULL) {
        return NULL;
    }
    /* buffers[0] is the table, re-taken whenever a step grows it */
    Buffer buffers[7] = {{0}};
    static const char *names[7] = {"table", "columns", "at", "states", "left", "ended_tokens", "ended_states"};
    static const Py_ssize_t items[7] = {4, 1, 8, 8, 8, 8, 8};
    static const int writable[7] = {0, 0, 0, 0, 0, 1, 1};
    PyObject *table_object = NULL;
    PyObject *result = NULL;
    Py_ssize_t ended = 0;
    if (take_table(dfa, &table_object, &buffers[0]) < 0) {
        goto done;
    }
    for (int i = 1; i < 7; i++) {
        if (take(args[i == 1 ? 1 : i + 1], &buffers[i], names[i], items[i], writable[i]) < 0) {
            goto done;
        }
    }
    const uint8_t *columns = buffers[1].view.buf;
    const int64_t *at = buffers[2].view.buf, *states = buffers[3].view.buf, *left = buffers[4].view.buf;
    int64_t *ended_tokens = buffers[5].view.buf, *ended_states = buffers[6].view.buf;
    Py_ssize_t count = buffers[2].view.len / 8, bytes = buffers[1].view.len;
    if (buffers[3].view.len / 8 != count || buffers[4].view.len / 8 != count
            || buffers[5].view.len / 8 < count || buffers[6].view.len / 8 < count) {
        PyErr_SetString(PyExc_ValueError, "walk: arrays of mismatched lengths");
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t index = at[i], state = states[i], rest = left[i];
        for (;;) {
            Py_ssize_t cells = buffers[0].view.len / 4;
            if (index < 0 || index >= bytes || state < 0 || state * 256 + 255 >= cells) {
                PyErr_SetString(PyExc_IndexError, "walk: a token or state outside the tables");
                goto done;
            }
            const int32_t *table = buffers[0].view.buf;
            int byte = columns[index];
            int64_t next = table[state * 256 + byte];
            if (next == UNKNOWN) {
                PyObject *cell[2] = {PyLong_FromLongLong(state), PyLong_FromLong(byte)};
                PyObject *found = NULL;
                if (cell[0] != NULL && cell[1] != NULL) {
                    found = PyObject_Vectorcall(step, cell, 2, NULL);
                }
                Py_XDECREF(cell[0]);
                Py_XDECREF(cell[1]);
                if (found == NULL) {
                    goto done;
                }
                next = PyLong_AsLongLong(found);
                Py_DECREF(found);
                if (next == -1 && PyErr_Occurred()) {
                    goto done;
                }
                if (take_table(dfa, &table_object, &buffers[0]) < 0) {
                    goto done;
                }
            }
            if (next == DEAD) {
                break;
            }
            if (rest == 0) {
                ended_tokens[ended] = index % vocab_size;
                ended_states[ended] = next;
                ended++;
                break;
            }
            state = next;
            index += vocab_size;
            rest--;
        }
    }
    result = PyLong_FromSsize_t(ended);
done:
    release(buffers, 7);
    Py_XDECREF(table_object);
    Py_DECREF(step);
    return result;
}

static PyMethodDef methods[] = {
    {"walk", (PyCFunction)(void (*)(void))walk, METH_FASTCALL,
     "Walk tokens through a byte automaton's resolved cells (see the module source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef definition = {
    PyModuleDef_HEAD_INIT, "_cwalk",
    "The compiled inner loop of a lazy token row (tokendfa.build.lazy).", -1, methods,
};

PyMODINIT_FUNC PyInit__cwalk(void) {
    return PyModule_Create(&definition);
}
