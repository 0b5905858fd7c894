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

/* walk(table, columns, vocab_size, at, states, left, ended_tokens, ended_states,
 *      stopped_at, stopped_states, stopped_left) -> (ended, stopped)
 *
 * table:    int32[n * 256], the automaton's cells (UNKNOWN -1, DEAD 0)
 * columns:  uint8[L * V], byte d of token t at d * V + t
 * at:       int64[k], the flat index of each token's next byte
 * states:   int64[k], the state it is read from
 * left:     int64[k], the token's bytes after that one
 *
 * A token that reads its last byte into a live state goes to ended_* (token
 * id, state); one that meets an UNKNOWN cell to stopped_* as it stands
 * there; a dead one is dropped. The outputs must hold k items each.
 */
static PyObject *walk(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "walk takes 11 arguments");
        return NULL;
    }
    long long vocab_size = PyLong_AsLongLong(args[2]);
    if (vocab_size <= 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "walk: vocab_size must be positive");
        }
        return NULL;
    }
    Buffer buffers[10] = {{0}};
    static const char *names[10] = {"table", "columns", "at", "states", "left", "ended_tokens",
                                    "ended_states", "stopped_at", "stopped_states", "stopped_left"};
    static const Py_ssize_t items[10] = {4, 1, 8, 8, 8, 8, 8, 8, 8, 8};
    static const int writable[10] = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1};
    static const int argument[10] = {0, 1, 3, 4, 5, 6, 7, 8, 9, 10};
    for (int i = 0; i < 10; i++) {
        if (take(args[argument[i]], &buffers[i], names[i], items[i], writable[i]) < 0) {
            release(buffers, 10);
            return NULL;
        }
    }
    const int32_t *table = buffers[0].view.buf;
    const uint8_t *columns = buffers[1].view.buf;
    const int64_t *at = buffers[2].view.buf, *states = buffers[3].view.buf, *left = buffers[4].view.buf;
    int64_t *ended_tokens = buffers[5].view.buf, *ended_states = buffers[6].view.buf;
    int64_t *stopped_at = buffers[7].view.buf, *stopped_states = buffers[8].view.buf;
    int64_t *stopped_left = buffers[9].view.buf;
    Py_ssize_t count = buffers[2].view.len / 8;
    Py_ssize_t cells = buffers[0].view.len / 4, bytes = buffers[1].view.len;
    int ok = buffers[3].view.len / 8 == count && buffers[4].view.len / 8 == count;
    for (int i = 5; i < 10; i++) {
        ok = ok && buffers[i].view.len / 8 >= count;
    }
    if (!ok) {
        release(buffers, 10);
        PyErr_SetString(PyExc_ValueError, "walk: arrays of mismatched lengths");
        return NULL;
    }
    Py_ssize_t ended = 0, stopped = 0;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t index = at[i], state = states[i], rest = left[i];
        for (;;) {
            if (index < 0 || index >= bytes || state < 0 || state * 256 + 255 >= cells) {
                bad = 1;
                break;
            }
            int32_t next = table[state * 256 + columns[index]];
            if (next == UNKNOWN) {
                stopped_at[stopped] = index;
                stopped_states[stopped] = state;
                stopped_left[stopped] = rest;
                stopped++;
                break;
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
        if (bad) {
            break;
        }
    }
    Py_END_ALLOW_THREADS
    release(buffers, 10);
    if (bad) {
        PyErr_SetString(PyExc_IndexError, "walk: a token or state outside the tables");
        return NULL;
    }
    return Py_BuildValue("nn", ended, stopped);
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
