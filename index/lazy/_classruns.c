/* A counted class's runs over a vocabulary (tokendfa.lazy.tables._ClassRuns), compiled.
 *
 * A chain row (a state inside a counted string, ``maxLength``) needs, for
 * its class, how each token begins with characters of the class: the
 * tokens that are all class characters by their count, those whose ASCII
 * run stops before their end by run length and the stopping byte, and the
 * others that start with a class byte. Made once per vocabulary and class,
 * inside the cold row that first meets the class. In numpy, after a
 * compiled pass for the runs, a dozen passes over the vocabulary (masks,
 * nonzero, two stable argsorts, searchsorted) took 2.0-3.5 ms on Qwen's
 * 151k tokens in process and ~7 ms in a fresh fork child (MaskBench's
 * Github_easy/o10012: its worst step, 8.5 ms); here two passes with
 * counting sorts.
 *
 * class_runs(spellings, offsets, first_char, inside, wide[, tail_low, tail_high, tail_wide])
 *     -> (chars, ascii, full_by_chars, full_offsets, partial, partial_offsets,
 *         irregular, irregular_offsets, stop_bytes)
 *
 * spellings (uint8) and offsets (int64[V + 1]): token t's bytes are
 * spellings[offsets[t]:offsets[t + 1]]; first_char (int8[V]): the bytes of
 * its first character, 0 when it is not text; inside (256 flags): the class's
 * bytes; wide: whether its characters of two or more bytes count one each
 * (a byte below 128 or from 0xC0 starts one) rather than a byte each. Each
 * result is a bytes object of native int16 (chars, ascii) or int64 items,
 * the fields of _ClassRuns in order (tables.py says what each holds); the
 * irregular tokens come by first byte then id (the numpy twin's order).
 * Both passes go through the tokens in id order (reading them in first-byte
 * order, a cache miss or three a token, was ~1 ms of a class's ~2.5). They run without the GIL. Plain C
 * API, no numpy headers.
 *
 * An ASCII class (not ``wide``, no byte of 128 or more inside: a pattern's
 * class, a format's) takes a shorter way (ascii_runs): a token's run read
 * eight bytes at a time, eight flags looked up and the first one clear
 * found, with no branch a byte (a branch mispredicted at the end of each
 * run was most of the pass); its chars and ascii are one array (the same
 * object twice: each character is an ASCII byte, so the two are equal);
 * and the second pass goes over the tokens found, not over a kind written
 * for each token. Github_easy o10012's 92-byte class on Qwen (its step 3,
 * MaskBench's worst lazy step): the call 1.75 -> 1.30 ms warm (best of
 * 30), 3.4-4.6 -> 2.5-2.9 ms in a fresh fork child (best of 10, three
 * paired runs), 553 -> 429 page faults.
 *
 * Given the vocabulary's tail bytes too (tokendfa.lazy.tables._tail_bytes:
 * tail_low, tail_high, uint64[V], the ASCII bytes of each text token after
 * its first character; tail_wide, a byte a token: one of 128 or more
 * there), a text token starting with a class byte is all run when its tail
 * bits are inside (two ANDs), and its bytes are read only when they are
 * not (13k of Qwen's 151k tokens for that class, where 100k were read).
 * That reads 2.4 MB more, which a fork child paid for until the tables
 * were in 2 MB pages (tokendfa.lazy.kernels._in_huge_pages); see
 * tables._class_runs for the figures.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    Py_buffer view;
    int taken;
} Buffer;

static int take(PyObject *object, Buffer *buffer, const char *name, Py_ssize_t itemsize) {
    if (PyObject_GetBuffer(object, &buffer->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        return -1;
    }
    buffer->taken = 1;
    if (buffer->view.itemsize != itemsize) {
        PyErr_Format(PyExc_ValueError, "class_runs: %s must have %zd-byte items", name, itemsize);
        return -1;
    }
    return 0;
}

static void release(Buffer *buffers, int count) {
    for (int i = 0; i < count; i++) {
        if (buffers[i].taken) {
            PyBuffer_Release(&buffers[i].view);
            buffers[i].taken = 0;
        }
    }
}

/* A bytes object of ``count`` int64 items, written through ``*items``. */
static PyObject *int64_bytes(Py_ssize_t count, int64_t **items) {
    PyObject *made = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t));
    if (made != NULL) {
        *items = (int64_t *)PyBytes_AS_STRING(made);
    }
    return made;
}

enum { NONE, FULL, PARTIAL, IRREGULAR };

/* The run of bytes inside (``flags``: 0 or 1 a byte) at the start of
 * ``token`` (``length`` bytes; ``readable`` bytes may be read from it, at
 * least ``length``): eight flags at a time, the first clear one found with
 * no branch a byte; bytes past the token are read only inside ``readable``. */
static inline int32_t ascii_run(const uint8_t *restrict token, int32_t length, Py_ssize_t readable,
                                const uint8_t *restrict flags) {
    int32_t here = 0;
    while (here < length && readable - here >= 8) {
        const uint8_t *restrict at = token + here;
        uint32_t inside = (uint32_t)flags[at[0]] | (uint32_t)flags[at[1]] << 1 | (uint32_t)flags[at[2]] << 2
                          | (uint32_t)flags[at[3]] << 3 | (uint32_t)flags[at[4]] << 4 | (uint32_t)flags[at[5]] << 5
                          | (uint32_t)flags[at[6]] << 6 | (uint32_t)flags[at[7]] << 7;
        if (inside != 0xFF) {
            int32_t stop = here + __builtin_ctz(~inside);
            return stop < length ? stop : length;
        }
        here += 8;
    }
    if (here >= length) {
        return length;
    }
    while (here < length && flags[token[here]]) {  /* the last bytes of the spellings */
        here++;
    }
    return here;
}

/* class_runs for an ASCII class (see the top), the same nine results:
 * ``size`` tokens with checked offsets into ``total`` bytes, the longest
 * ``longest`` bytes; ``flags`` the class's bytes, 0 or 1 each, none of 128
 * or more; the tail bytes (``size`` items each), or NULL. */
static PyObject *ascii_runs(const uint8_t *restrict spellings, Py_ssize_t total, const int64_t *restrict offsets,
                            const int8_t *restrict first_char, const uint8_t *restrict flags, Py_ssize_t size,
                            int64_t longest, const uint64_t *restrict tail_low, const uint64_t *restrict tail_high,
                            const uint8_t *restrict tail_wide) {
    size_t groups = 256 * ((size_t)longest + 1), words = ((size_t)size + 31) / 32;
    uint32_t *full_bits = calloc(words ? words : 1, sizeof(uint32_t));
    /* the partial and irregular tokens in id order (room for every token:
     * only the pages written are taken) */
    int32_t *partial_ids = malloc((size_t)(size ? size : 1) * sizeof(int32_t));
    int32_t *irregular_ids = malloc((size_t)(size ? size : 1) * sizeof(int32_t));
    int64_t *full_count = calloc((size_t)longest + 2, sizeof(int64_t));
    int32_t *partial_count = calloc(groups + 1, sizeof(int32_t));
    PyObject *chars_object = PyBytes_FromStringAndSize(NULL, size * (Py_ssize_t)sizeof(int16_t));
    PyObject *result = NULL, *parts[7] = {NULL};
    if (full_bits == NULL || partial_ids == NULL || irregular_ids == NULL || full_count == NULL
            || partial_count == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (chars_object == NULL) {
        goto done;
    }
    int16_t *restrict chars = (int16_t *)PyBytes_AS_STRING(chars_object);
    int64_t full_chars = 0, partial_chars = 0, full_total = 0, partial_total = 0, irregular_total = 0;
    int64_t irregular_count[257] = {0};
    uint64_t outside_low = 0, outside_high = 0;  /* the ASCII bytes outside the class */
    for (int b = 0; b < 128; b++) {
        if (!flags[b]) {
            *(b < 64 ? &outside_low : &outside_high) |= (uint64_t)1 << (b & 63);
        }
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t t = 0; t < size; t++) {
        int64_t start = offsets[t];
        int32_t length = (int32_t)(offsets[t + 1] - start);
        const uint8_t *restrict token = spellings + start;
        if (first_char[t] <= 0) {  /* not text: irregular when it starts with a byte of the class */
            chars[t] = 0;
            if (length && flags[token[0]]) {
                irregular_ids[irregular_total++] = (int32_t)t;
                irregular_count[token[0]]++;
            }
            continue;
        }
        int32_t here;
        if (tail_low != NULL && length && flags[token[0]]
                && ((tail_low[t] & outside_low) | (tail_high[t] & outside_high) | tail_wide[t]) == 0) {
            here = length;  /* its first byte and every later one inside: all run, not read */
        } else {
            here = ascii_run(token, length, total - start, flags);
        }
        chars[t] = (int16_t)here;  /* a character a byte, all ASCII: chars == ascii == here */
        if (here == length) {  /* all run */
            full_bits[t >> 5] |= (uint32_t)1 << (t & 31);
            full_count[length]++;
            full_total++;
            full_chars = length > full_chars ? length : full_chars;
        } else if (here >= 1) {  /* stopped by a byte outside (class_runs's ascii >= count holds) */
            partial_ids[partial_total++] = (int32_t)t;
            partial_count[256 * (size_t)here + token[here]]++;
            partial_chars = here > partial_chars ? here : partial_chars;
        }
    }
    Py_END_ALLOW_THREADS
    int64_t *full_by_chars, *full_offsets, *partial, *partial_offsets, *irregular, *irregular_offsets, *stop_bytes;
    Py_ssize_t partial_groups = 256 * (Py_ssize_t)(partial_chars + 1);
    int stops = 0;
    for (int b = 0; b < 256; b++) {
        for (int64_t c = 0; c <= partial_chars; c++) {
            if (partial_count[256 * c + b]) {
                stops++;
                break;
            }
        }
    }
    parts[0] = int64_bytes(full_total, &full_by_chars);
    parts[1] = int64_bytes(full_chars + 2, &full_offsets);
    parts[2] = int64_bytes(partial_total, &partial);
    parts[3] = int64_bytes(partial_groups + 1, &partial_offsets);
    parts[4] = int64_bytes(irregular_total, &irregular);
    parts[5] = int64_bytes(257, &irregular_offsets);
    parts[6] = int64_bytes(stops, &stop_bytes);
    for (int i = 0; i < 7; i++) {
        if (parts[i] == NULL) {
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    int64_t sum = 0;
    for (int64_t c = 0; c <= full_chars + 1; c++) {
        full_offsets[c] = sum;
        if (c <= full_chars) {
            sum += full_count[c];
            full_count[c] = full_offsets[c];  /* now the next free place */
        }
    }
    sum = 0;
    for (Py_ssize_t g = 0; g <= partial_groups; g++) {
        partial_offsets[g] = sum;
        if (g < partial_groups) {
            sum += partial_count[g];
            partial_count[g] = (int32_t)partial_offsets[g];
        }
    }
    sum = 0;
    for (int b = 0; b <= 256; b++) {
        irregular_offsets[b] = sum;
        sum += irregular_count[b];
        irregular_count[b] = irregular_offsets[b];
    }
    /* each kind's tokens placed in id order, so each group keeps ids ascending (stable) */
    for (size_t w = 0; w < words; w++) {
        for (uint32_t bits = full_bits[w]; bits; bits &= bits - 1) {
            Py_ssize_t t = (Py_ssize_t)(w * 32 + (size_t)__builtin_ctz(bits));
            full_by_chars[full_count[chars[t]]++] = t;
        }
    }
    for (int64_t k = 0; k < partial_total; k++) {
        int32_t t = partial_ids[k];
        partial[partial_count[256 * (size_t)chars[t] + spellings[offsets[t] + chars[t]]]++] = t;
    }
    for (int64_t k = 0; k < irregular_total; k++) {
        int32_t t = irregular_ids[k];
        irregular[irregular_count[spellings[offsets[t]]]++] = t;
    }
    stops = 0;
    for (int b = 0; b < 256; b++) {
        for (int64_t c = 0; c <= partial_chars; c++) {
            if (partial_offsets[256 * c + b + 1] > partial_offsets[256 * c + b]) {
                stop_bytes[stops++] = b;
                break;
            }
        }
    }
    Py_END_ALLOW_THREADS
    /* chars twice: an ASCII class's ascii is its chars */
    result = PyTuple_Pack(9, chars_object, chars_object, parts[0], parts[1], parts[2], parts[3], parts[4], parts[5],
                          parts[6]);
done:
    free(full_bits);
    free(partial_ids);
    free(irregular_ids);
    free(full_count);
    free(partial_count);
    Py_XDECREF(chars_object);
    for (int i = 0; i < 7; i++) {
        Py_XDECREF(parts[i]);
    }
    return result;
}

static PyObject *class_runs(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 5 && nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "class_runs(spellings, offsets, first_char, inside, wide[, tail_low, "
                                         "tail_high, tail_wide]) takes 5 or 8 arguments");
        return NULL;
    }
    int wide = PyObject_IsTrue(args[4]);
    if (wide < 0) {
        return NULL;
    }
    Buffer buffers[7] = {{{0}}};
    if (take(args[0], &buffers[0], "spellings", 1) < 0 || take(args[1], &buffers[1], "offsets", 8) < 0
            || take(args[2], &buffers[2], "first_char", 1) < 0 || take(args[3], &buffers[3], "inside", 1) < 0
            || (nargs == 8 && (take(args[5], &buffers[4], "tail_low", 8) < 0
                               || take(args[6], &buffers[5], "tail_high", 8) < 0
                               || take(args[7], &buffers[6], "tail_wide", 1) < 0))) {
        release(buffers, 7);
        return NULL;
    }
    const uint8_t *restrict spellings = buffers[0].view.buf, *restrict inside = buffers[3].view.buf;
    const int64_t *offsets = buffers[1].view.buf;
    const int8_t *first_char = buffers[2].view.buf;
    Py_ssize_t size = buffers[1].view.len / 8 - 1;
    if (size < 0 || buffers[2].view.len != size || buffers[3].view.len != 256
            || (nargs == 8 && (buffers[4].view.len != 8 * size || buffers[5].view.len != 8 * size
                               || buffers[6].view.len != size))) {
        release(buffers, 7);
        PyErr_SetString(PyExc_ValueError, "class_runs: no offsets, first_char or a tail array not one item a "
                                          "token, or a byte set that is not 256 flags");
        return NULL;
    }
    int64_t longest = 0;
    for (Py_ssize_t t = 0; t < size; t++) {
        if (offsets[t] < 0 || offsets[t] > offsets[t + 1] || offsets[t + 1] > buffers[0].view.len) {
            release(buffers, 7);
            PyErr_SetString(PyExc_IndexError, "class_runs: offsets outside the spellings");
            return NULL;
        }
        if (offsets[t + 1] - offsets[t] > longest) {
            longest = offsets[t + 1] - offsets[t];
        }
    }
    /* per token: its kind (a byte); per count of characters (and stop byte),
     * how many full (partial) tokens have it. What is written here and in the
     * results is kept small: in a fork child of a warm parent each page the
     * call first writes is a copy-on-write fault, ~2.5 us (714 of them, 2 of
     * a broad class's 3.5 ms, with int32 chars and a stop byte a token). */
    if (longest > INT16_MAX) {
        release(buffers, 7);
        PyErr_SetString(PyExc_OverflowError, "class_runs: a token longer than 32767 bytes (the counts are int16)");
        return NULL;
    }
    uint8_t flags[256];
    int ascii_class = !wide;
    for (int b = 0; b < 256; b++) {
        flags[b] = inside[b] != 0;
        ascii_class &= b < 128 || !flags[b];
    }
    if (ascii_class && size <= INT32_MAX) {
        PyObject *found = ascii_runs(spellings, buffers[0].view.len, offsets, first_char, flags, size, longest,
                                     nargs == 8 ? buffers[4].view.buf : NULL, nargs == 8 ? buffers[5].view.buf : NULL,
                                     nargs == 8 ? buffers[6].view.buf : NULL);
        release(buffers, 7);
        return found;
    }
    size_t groups = 256 * ((size_t)longest + 1);
    uint8_t *kind = malloc((size_t)(size ? size : 1));
    int64_t *full_count = calloc((size_t)longest + 2, sizeof(int64_t));
    int64_t *partial_count = calloc(groups + 1, sizeof(int64_t));
    PyObject *chars_object = PyBytes_FromStringAndSize(NULL, size * (Py_ssize_t)sizeof(int16_t));
    PyObject *ascii_object = PyBytes_FromStringAndSize(NULL, size * (Py_ssize_t)sizeof(int16_t));
    PyObject *result = NULL, *parts[7] = {NULL};
    if (kind == NULL || full_count == NULL || partial_count == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (chars_object == NULL || ascii_object == NULL) {
        goto done;
    }
    int16_t *restrict chars = (int16_t *)PyBytes_AS_STRING(chars_object);
    int16_t *restrict ascii = (int16_t *)PyBytes_AS_STRING(ascii_object);
    int64_t full_chars = 0, partial_chars = 0, full_total = 0, partial_total = 0, irregular_total = 0;
    int64_t irregular_count[257] = {0};
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t t = 0; t < size; t++) {
        const uint8_t *restrict token = spellings + offsets[t];
        int32_t length = (int32_t)(offsets[t + 1] - offsets[t]), here = 0, first_wide = -1, count;
        if (wide) {
            for (count = 0; here < length && inside[token[here]]; here++) {
                uint8_t byte = token[here];
                if (byte >= 0x80 && first_wide < 0) {
                    first_wide = here;
                }
                count += byte < 0x80 || byte >= 0xC0;
            }
        } else {  /* a byte is a character (the class's bytes are ASCII: first_wide stays -1) */
            while (here < length && inside[token[here]]) {
                here++;
            }
            count = here;
        }
        kind[t] = NONE;
        if (first_char[t] <= 0) {  /* not text: irregular when it starts with a byte of the class */
            chars[t] = ascii[t] = 0;
            if (length && inside[token[0]]) {
                kind[t] = IRREGULAR;
                irregular_count[token[0]]++;
                irregular_total++;
            }
            continue;
        }
        chars[t] = (int16_t)count;
        ascii[t] = (int16_t)(first_wide < 0 ? here : first_wide);
        if (here == length) {
            kind[t] = FULL;
            full_count[count]++;
            full_total++;
            if (count > full_chars) {
                full_chars = count;
            }
        } else if (count >= 1 && ascii[t] >= count) {
            kind[t] = PARTIAL;  /* its run is ASCII (a wide character would make ascii < count): chars[t] == here */
            partial_count[256 * (size_t)count + token[here]]++;
            partial_total++;
            if (count > partial_chars) {
                partial_chars = count;
            }
        } else if (length && inside[token[0]]) {
            kind[t] = IRREGULAR;
            irregular_count[token[0]]++;
            irregular_total++;
        }
    }
    Py_END_ALLOW_THREADS
    int64_t *full_by_chars, *full_offsets, *partial, *partial_offsets, *irregular, *irregular_offsets, *stop_bytes;
    Py_ssize_t partial_groups = 256 * (Py_ssize_t)(partial_chars + 1);
    int stops = 0;
    for (int b = 0; b < 256; b++) {
        for (int64_t c = 0; c <= partial_chars; c++) {
            if (partial_count[256 * c + b]) {
                stops++;
                break;
            }
        }
    }
    parts[0] = int64_bytes(full_total, &full_by_chars);
    parts[1] = int64_bytes(full_chars + 2, &full_offsets);
    parts[2] = int64_bytes(partial_total, &partial);
    parts[3] = int64_bytes(partial_groups + 1, &partial_offsets);
    parts[4] = int64_bytes(irregular_total, &irregular);
    parts[5] = int64_bytes(257, &irregular_offsets);
    parts[6] = int64_bytes(stops, &stop_bytes);
    for (int i = 0; i < 7; i++) {
        if (parts[i] == NULL) {
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    /* offsets: how many come before each count (group, first byte); then each
     * token placed in id order, so each group keeps ids ascending (stable) */
    int64_t sum = 0;
    for (int64_t c = 0; c <= full_chars + 1; c++) {
        full_offsets[c] = sum;
        sum += c <= full_chars ? full_count[c] : 0;
        if (c <= full_chars) {
            full_count[c] = full_offsets[c];  /* now the next free place */
        }
    }
    sum = 0;
    for (Py_ssize_t g = 0; g <= partial_groups; g++) {
        partial_offsets[g] = sum;
        if (g < partial_groups) {
            sum += partial_count[g];
            partial_count[g] = partial_offsets[g];
        }
    }
    sum = 0;
    for (int b = 0; b <= 256; b++) {
        irregular_offsets[b] = sum;
        sum += irregular_count[b];
        irregular_count[b] = irregular_offsets[b];
    }
    for (Py_ssize_t t = 0; t < size; t++) {
        if (kind[t] == FULL) {
            full_by_chars[full_count[chars[t]]++] = t;
        } else if (kind[t] == PARTIAL) {
            partial[partial_count[256 * (size_t)chars[t] + spellings[offsets[t] + chars[t]]]++] = t;
        } else if (kind[t] == IRREGULAR) {
            irregular[irregular_count[spellings[offsets[t]]]++] = t;
        }
    }
    stops = 0;
    for (int b = 0; b < 256; b++) {
        for (int64_t c = 0; c <= partial_chars; c++) {
            if (partial_offsets[256 * c + b + 1] > partial_offsets[256 * c + b]) {
                stop_bytes[stops++] = b;
                break;
            }
        }
    }
    Py_END_ALLOW_THREADS
    result = PyTuple_Pack(9, chars_object, ascii_object, parts[0], parts[1], parts[2], parts[3], parts[4], parts[5],
                          parts[6]);
done:
    release(buffers, 7);
    free(kind);
    free(full_count);
    free(partial_count);
    Py_XDECREF(chars_object);
    Py_XDECREF(ascii_object);
    for (int i = 0; i < 7; i++) {
        Py_XDECREF(parts[i]);
    }
    return result;
}

static PyMethodDef methods[] = {
    {"class_runs", (PyCFunction)(void (*)(void))class_runs, METH_FASTCALL,
     "A counted class's runs over a vocabulary (tokendfa.lazy.tables._ClassRuns's fields, as bytes)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef definition = {
    PyModuleDef_HEAD_INIT, "_classruns", "A counted class's runs over a vocabulary, compiled.", -1, methods,
};

PyMODINIT_FUNC PyInit__classruns(void) {
    return PyModule_Create(&definition);
}
