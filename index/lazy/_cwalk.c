/* The compiled inner loops of a lazy token row: tokens walked byte by byte
 * through the lazy byte automaton's table (tokendfa.lazy), and the
 * bit and group work around them: a cold row's walk plan (walk_plan,
 * grouped), the state each planned token starts in (start_states), the
 * row's ASCII target (ascii_target), and its mask and successors from
 * what the walk found (finish_row), each in place of numpy calls made with
 * the GIL (the numpy code stays as the reference, TOKENDFA_NATIVE=0).
 *
 * The numpy walk pays ~40 us a level in calls whatever the number of tokens,
 * and a cold row inside a JSON string walks ~6k tokens over a dozen levels.
 * Here the tokens go to their end or their dead byte without the GIL, a
 * cell not resolved yet resolved on the way by the lazy core's native state
 * store where it can alone (tokendfa.analysis._lazycore: most cells of a
 * cold row, new states included); the cells the store cannot resolve alone
 * stop their tokens, are resolved together with the GIL (the store's
 * hand-back, or the automaton's ``step_held`` where there is no store;
 * either may grow the table), and the walk goes on: a few passes a row.
 *
 * Plain C over the buffer protocol: no numpy headers at build time. The
 * module is optional; without it the numpy walk serves the same rows.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include "_released.h"  /* released_ns(), count_released(): the walks' time without the GIL */
#if defined(__unix__) || defined(__APPLE__)
#define SCRATCH_KEPT 1
#include <pthread.h>
#endif

#define UNKNOWN (-1)
#define DEAD 0
#if defined(__GNUC__) || defined(__clang__)
#define NOINLINE __attribute__((noinline))
#define ALWAYS_INLINE __attribute__((always_inline))
#else
#define NOINLINE
#define ALWAYS_INLINE
#endif

/* The automaton's attributes the walk reads, interned once. */
static PyObject *name_table, *name_step_held, *name_num_states;

typedef struct {
    Py_buffer view;
    int held;
} Buffer;

/* What take() expects of an item besides its size: a signed integer of n
 * bytes is written n (the callers' tables of sizes: 1, 2, 4, 8); an
 * unsigned one, or a flag (a bool or a uint8, read as zero or not), has its
 * bit above the size. The kind is checked from the buffer's format, so that
 * a float64 array is refused where int64 is read, and so is an array in the
 * other byte order (its values would be read swapped). Asking numpy for the
 * format costs ~15 ns an array (group_plan's 11: 278 -> 433 ns a call); a
 * warm step calls nothing here, a cold one a few calls of ~10 arrays. */
#define UNSIGNED 0x100
#define FLAG 0x200
#define U8 (UNSIGNED | 1)
#define U32 (UNSIGNED | 4)
#define U64 (UNSIGNED | 8)
#define FLAGS (FLAG | 1)
#if PY_BIG_ENDIAN
#define NATIVE_ORDER '>'
#else
#define NATIVE_ORDER '<'
#endif

static int item_is(const Py_buffer *view, Py_ssize_t kind) {
    if (view->itemsize != (kind & 0xff)) {
        return 0;
    }
    const char *format = view->format == NULL ? "B" : view->format;  /* NULL: unsigned bytes */
    if (*format == '@' || *format == '=' || *format == NATIVE_ORDER) {
        format++;
    }
    if (format[0] == '\0' || format[1] != '\0') {
        return 0;
    }
    if (kind & FLAG) {
        return format[0] == '?' || format[0] == 'B';
    }
    return strchr(kind & UNSIGNED ? "BHILQN" : "bhilqn", format[0]) != NULL;
}

static const char *kind_name(Py_ssize_t kind) {
    return kind & FLAG ? "bool or uint8" : kind & UNSIGNED ? "unsigned integer" : "signed integer";
}

static int take(PyObject *object, Buffer *buffer, const char *name, Py_ssize_t kind, int writable) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(object, &buffer->view, flags) < 0) {
        return -1;
    }
    buffer->held = 1;
    if (!item_is(&buffer->view, kind)) {
        PyErr_Format(PyExc_TypeError, "%s: items of %zd bytes expected, got %zd (format '%s'; %s items expected)",
                     name, kind & 0xff, buffer->view.itemsize, buffer->view.format == NULL ? "B" : buffer->view.format,
                     kind_name(kind));
        return -1;
    }
    return 0;
}

/* A plan's picks, as start_states and walk_row read them: a walk plan's
 * skipped flags (bool) or a chain plan's links (int32). */
static int take_picks(PyObject *object, Buffer *buffer, const char *function) {
    if (PyObject_GetBuffer(object, &buffer->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        return -1;
    }
    buffer->held = 1;
    if (!item_is(&buffer->view, FLAGS) && !item_is(&buffer->view, 4)) {
        PyErr_Format(PyExc_TypeError, "%s: picks of 1 (bool) or 4 (int32) bytes expected", function);
        return -1;
    }
    return 0;
}

/* Whether a module function got the ``expected`` number of arguments;
 * -1 with a TypeError naming the function when not. */
static int arity(Py_ssize_t nargs, Py_ssize_t expected, const char *name) {
    if (nargs != expected) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments", name, expected);
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

/* parts[0:count] made, bytes objects of ``items`` items of widths[i] bytes
 * each (contents undefined); -1 with an exception, those made left in
 * parts for the caller to drop. */
static int make_parts(PyObject **parts, int count, Py_ssize_t items, const Py_ssize_t *widths) {
    for (int i = 0; i < count; i++) {
        parts[i] = PyBytes_FromStringAndSize(NULL, items * widths[i]);
        if (parts[i] == NULL) {
            return -1;
        }
    }
    return 0;
}

/* The automaton a walk reads: its ``table`` (int32[n, 256], UNKNOWN -1,
 * DEAD 0) read directly, ``step_held(state, byte)`` called for a cell still
 * UNKNOWN (discovering states: the table may grow, and is re-taken), and
 * the number of states discovered when the walk began (the table's rows
 * past them are undefined: its pages are reserved ahead, so a starting
 * state is checked against this, not the table's length). */
typedef struct {
    PyObject *dfa, *step, *table_object;
    Buffer table;
    long long discovered;
    PyThreadState *released;  /* non-NULL while this walk runs without the GIL */
    uint64_t released_at;     /* the thread's CPU time when it let the GIL go (thread_ns()) */
    void *session;            /* the lazy core's native state store, held for the walk (NULL: none) */
    int deferring;            /* the store refused a cell in this pass: the pass's other cells wait too */
    int stay_released;        /* walk_entries returns without taking the GIL back when it succeeds (walk_row) */
    /* A loop row's loop state and, per entry, where the run of its loop
     * set's ASCII bytes that ends the entry begins (walk_row's loop_from;
     * NULL: none): first_pass ends an entry there with no byte read. */
    const uint8_t *loop_from;
    uint32_t loop_state;
} Automaton;

/* The native state store of tokendfa.analysis._lazycore, through its capsule
 * ``_C_API`` (the struct is that module's LazyCoreAPI, version 1): a cell
 * the walk stops at is resolved by ``fast`` without the GIL when the store
 * can do it alone (most cells of a cold row: a known state, or a new one
 * whose closure stays in its fragment), and by ``held``, with it, when not.
 * Absent (the core not built, or an automaton without a store: the eager
 * builder's), every cell goes to ``step_held`` as before. */
typedef struct {
    int version;
    size_t session_size;
    int (*open)(PyObject *dfa, void *session);
    int64_t (*fast)(void *session, int64_t state, int byte);
    int64_t (*held)(void *session, int64_t state, int byte);
    int (*close)(void *session);
} LazyCoreAPI;

static const LazyCoreAPI *core_api;
static int core_api_tried;

/* The store of the automaton, opened for the walk where there is one. */
static int open_session(Automaton *automaton) {
    if (!core_api_tried) {
        core_api_tried = 1;
        const LazyCoreAPI *api = PyCapsule_Import("tokendfa.analysis._lazycore._C_API", 0);
        if (api == NULL) {
            PyErr_Clear();  /* built without the core: step_held for every cell */
        } else if (api->version == 1) {
            core_api = api;
        }
    }
    if (core_api == NULL || !PyObject_HasAttrString(automaton->dfa, "_core_context")) {
        return 0;
    }
    void *session = PyMem_Malloc(core_api->session_size);
    if (session == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int opened = core_api->open(automaton->dfa, session);
    if (opened != 0) {
        PyMem_Free(session);
        return opened < 0 ? -1 : 0;
    }
    automaton->session = session;
    return 0;
}

/* A walk reads the table with the GIL released, so that other threads (the
 * cold rows of other lazy indexes: tokendfa.runtime.fill_masks) run Python
 * meanwhile, and takes it back for what needs it: resolving a cell
 * (step_held, Python) and setting an error. The table is safe to read
 * unlocked: the caller holds the automaton's resolving lock, the only lock
 * under which its cells are written or the table replaced, and the walk's
 * buffer keeps the table it read alive. */
static void let_go(Automaton *automaton) {
    if (automaton->released == NULL) {
        automaton->released_at = thread_ns();
        automaton->released = PyEval_SaveThread();
    }
}

static void hold(Automaton *automaton) {
    if (automaton->released != NULL) {
        released_add(automaton->released_at);
        PyEval_RestoreThread(automaton->released);
        automaton->released = NULL;
    }
}

/* The GIL let go around a plain C loop over buffers a call holds, when the
 * loop is long enough to pay for it (a few thousand items: a vocabulary's
 * tokens, a loop row's 2-60k), counted in released_ns() as a walk's. */
#define RELEASE_FROM 4096

typedef struct {
    PyThreadState *state;
    uint64_t since;
} Released;

static void let_go_for(Released *released, Py_ssize_t work) {
    released->state = NULL;
    if (work >= RELEASE_FROM) {
        released->since = thread_ns();
        released->state = PyEval_SaveThread();
    }
}

static void take_back(Released *released) {
    if (released->state != NULL) {
        released_add(released->since);
        PyEval_RestoreThread(released->state);
        released->state = NULL;
    }
}

static int take_table(Automaton *automaton) {
    PyObject *current = PyObject_GetAttr(automaton->dfa, name_table);
    if (current == NULL) {
        return -1;
    }
    if (current == automaton->table_object) {
        Py_DECREF(current);
        return 0;
    }
    Py_ssize_t before = automaton->table.held ? automaton->table.view.len : 0;
    release(&automaton->table, 1);
    Py_XDECREF(automaton->table_object);
    automaton->table_object = current;
    if (take(current, &automaton->table, "table", 4, 0) < 0) {
        return -1;
    }
    if (automaton->table.view.len % (256 * 4)) {
        PyErr_SetString(PyExc_ValueError, "walk: the table's rows are not 256 cells");
        return -1;
    }
    /* A walk checks a state against the table when it stops at one of its
     * cells, and reads that cell after the cells before it were resolved
     * (walk_entries, over the state store), which may have replaced the
     * table. LazyByteDFA's only grows, keeping every state checked inside
     * it; a shorter one is refused here, once a table taken again, rather
     * than a check at every cell read. */
    if (automaton->table.view.len < before) {
        PyErr_SetString(PyExc_IndexError, "walk: a state outside the table (the table taken again is shorter)");
        return -1;
    }
    return 0;
}

static int open_automaton(PyObject *dfa, Automaton *automaton) {
    automaton->dfa = dfa;
    automaton->step = PyObject_GetAttr(dfa, name_step_held);
    if (automaton->step == NULL || take_table(automaton) < 0) {
        return -1;
    }
    PyObject *count_object = PyObject_GetAttr(dfa, name_num_states);
    automaton->discovered = count_object == NULL ? -1 : PyLong_AsLongLong(count_object);
    Py_XDECREF(count_object);
    if (automaton->discovered < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "walk: the automaton has no states");
        }
        return -1;
    }
    return open_session(automaton);
}

/* The walk's end: the store's new states published to the automaton (an
 * error there is raised unless one is already). */
static int close_automaton(Automaton *automaton) {
    hold(automaton);
    int status = 0;
    if (automaton->session != NULL) {
        status = core_api->close(automaton->session);
        PyMem_Free(automaton->session);
        automaton->session = NULL;
    }
    release(&automaton->table, 1);
    Py_XDECREF(automaton->table_object);
    Py_XDECREF(automaton->step);
    return status;
}

/* The cell (state, byte), UNKNOWN in the table, resolved by the store
 * without the GIL where it can alone: the successor, or -2 (the cell
 * waits for the pass's resolution, with the GIL). After a refusal the
 * pass asks no more: a store that refused one cell (its limits check every
 * 64 new states, a definition to enter) would compute and refuse the
 * others' cuts and closures as well. Kept out of line so that walk_known,
 * inlined, stays a tight loop. */
static NOINLINE int64_t resolve_fast(Automaton *automaton, int64_t state, int byte) {
    int64_t found = core_api->fast(automaton->session, state, byte);
    if (found < 0) {
        automaton->deferring = 1;
    }
    return found;
}

/* An UNKNOWN cell met by a walk: resolve_fast's answer, or -2 at once where
 * there is no store or the pass already defers (one test inline, the call
 * only where the store is asked). */
static inline ALWAYS_INLINE int64_t try_resolve(Automaton *automaton, int64_t state, int byte) {
    return automaton->session != NULL && !automaton->deferring ? resolve_fast(automaton, state, byte) : -2;
}

/* Walk bytes[from:count] from ``state`` over resolved cells and those the
 * store resolves alone (resolve_fast), without the GIL: 1 with the end
 * state in ``*end`` when every byte keeps the automaton alive, 0 when one is
 * dead, 2 at a cell still UNKNOWN (its position in ``*stop``, the state
 * there in ``*end``), -1 on error (the GIL taken back, the error set). The
 * later passes' walk; the first is first_pass. */
static inline int walk_known(Automaton *automaton, int64_t state, const uint8_t *bytes, Py_ssize_t from,
                             Py_ssize_t count, int64_t *end, Py_ssize_t *stop) {
    const int32_t *table = automaton->table.view.buf;
    uint64_t rows = (uint64_t)(automaton->table.view.len / 1024);
    for (Py_ssize_t at = from; at < count; at++) {
        if ((uint64_t)state >= rows) {
            hold(automaton);
            PyErr_SetString(PyExc_IndexError, "walk: a state outside the table");
            return -1;
        }
        int32_t next = table[state * 256 + bytes[at]];
        if ((uint32_t)(next + 1) <= 1u) {  /* UNKNOWN (-1) or DEAD (0): one test a byte for both */
            if (next == UNKNOWN) {
                /* resolved here by the store when it can alone, without
                 * the GIL (it never replaces the table: ``rows`` holds) */
                int64_t found = try_resolve(automaton, state, bytes[at]);
                if (found < 0) {
                    *end = state;
                    *stop = at;
                    return 2;
                }
                next = (int32_t)found;
            }
            if (next == DEAD) {
                return 0;
            }
        }
        state = next;
    }
    *end = state;
    return 1;
}

/* The cell (state, byte) resolved with ``step_held``, with the GIL held:
 * the successor, or -2 on error. The table may grow: it is taken again. */
static int64_t resolve(Automaton *automaton, int64_t state, int byte) {
    /* the state was checked against the table the walk read then; an
     * earlier cell's step_held may have replaced the table since */
    if (state < 0 || (state + 1) * 256 > automaton->table.view.len / 4) {
        PyErr_SetString(PyExc_IndexError, "walk: a state outside the table");
        return -2;
    }
    const int32_t *table = automaton->table.view.buf;
    int64_t next = table[state * 256 + byte];
    if (next != UNKNOWN) {  /* resolved meanwhile, with an earlier cell's range */
        return next;
    }
    PyObject *cell[2] = {PyLong_FromLongLong(state), PyLong_FromLong(byte)};
    PyObject *found = NULL;
    if (cell[0] != NULL && cell[1] != NULL) {
        found = PyObject_Vectorcall(automaton->step, cell, 2, NULL);
    }
    Py_XDECREF(cell[0]);
    Py_XDECREF(cell[1]);
    if (found == NULL) {
        return -2;
    }
    next = PyLong_AsLongLong(found);
    Py_DECREF(found);
    if ((next == -1 && PyErr_Occurred()) || take_table(automaton) < 0) {
        return -2;
    }
    if (next < 0 || next > INT32_MAX) {  /* kept as an int32 state: never truncated, never an unset error */
        PyErr_SetString(PyExc_IndexError, "walk: step_held gave a state outside int32");
        return -2;
    }
    return next;
}

/* A thread's scratch for the walks, kept from one cold row to the next.
 * A walk of k tokens worked in 56 bytes a token (walk_row's start and ended
 * states, walk_entries' waiting entries and ends): 2.8 MB for 49k tokens,
 * taken fresh from malloc and freed each row, every page of it was a minor
 * fault each time it was first written after a fork (MaskBench runs each
 * schema in a fresh fork: 623 of the 1,369 faults of a 6 ms step of
 * Github_medium o1; the 250-1500 us band's steps, 71 faults each at the
 * median, were mostly this scratch). Kept per thread, a block's pages fault
 * once per process (or once after a fork) instead of once a row. Slot 0 is
 * walk_row's (12 bytes a token) or walk_span's (24, or 48 over several
 * ranges), slot 1 walk_entries' (16, called inside either); a slot busy (a walk re-entered on the same thread) or a
 * request over SCRATCH_KEEP bytes (a vocabulary of over ~350k tokens) falls
 * back to malloc and free. A thread that walks holds 2 x SCRATCH_KEEP bytes
 * of address space (it counts against RLIMIT_AS), backed only where
 * written: on Qwen's 151k tokens at most 3.6 + 2.4 MB; freed when the
 * thread exits. */
#define SCRATCH_SLOTS 2
#define SCRATCH_KEEP ((size_t)8 << 20)

typedef struct {
    void *data[SCRATCH_SLOTS];  /* SCRATCH_KEEP bytes each, or NULL */
    int busy[SCRATCH_SLOTS];
} Scratch;

#ifdef SCRATCH_KEPT
static pthread_key_t scratch_key;
static int scratch_key_made;

static void scratch_drop(void *kept) {
    Scratch *scratch = kept;
    for (int slot = 0; slot < SCRATCH_SLOTS; slot++) {
        free(scratch->data[slot]);
    }
    free(scratch);
}

static Scratch *scratch_of_thread(void) {
    if (!scratch_key_made) {
        return NULL;
    }
    Scratch *scratch = pthread_getspecific(scratch_key);
    if (scratch == NULL) {
        scratch = calloc(1, sizeof(Scratch));
        if (scratch != NULL && pthread_setspecific(scratch_key, scratch) != 0) {
            free(scratch);
            scratch = NULL;
        }
    }
    return scratch;
}
#endif

/* ``bytes`` of scratch (uninitialised) for ``slot``; NULL when out of memory.
 * Given back with scratch_give(slot, ...). Any thread, with or without the GIL. */
static void *scratch_take(int slot, size_t bytes) {
    bytes = bytes ? bytes : 8;
#ifdef SCRATCH_KEPT
    Scratch *scratch = bytes <= SCRATCH_KEEP ? scratch_of_thread() : NULL;
    if (scratch != NULL && !scratch->busy[slot]) {
        if (scratch->data[slot] == NULL) {
            /* the largest block at once, never grown: malloc maps a block
             * this large (over its mmap threshold) and the kernel backs only
             * the pages written, so a larger row writes on the pages a
             * smaller one left mapped instead of on a new block's */
            scratch->data[slot] = malloc(SCRATCH_KEEP);
        }
        if (scratch->data[slot] != NULL) {
            scratch->busy[slot] = 1;
            return scratch->data[slot];
        }
    }
#else
    (void)slot;
#endif
    return malloc(bytes);
}

static void scratch_give(int slot, void *data) {
#ifdef SCRATCH_KEPT
    Scratch *scratch = data != NULL && scratch_key_made ? pthread_getspecific(scratch_key) : NULL;
    if (scratch != NULL && scratch->busy[slot] && data == scratch->data[slot]) {
        scratch->busy[slot] = 0;
        return;
    }
#else
    (void)slot;
#endif
    free(data);
}

/* walk_entries' first pass (see there): every entry walked from its start
 * state as far as resolved cells go, a cell still UNKNOWN resolved by the
 * store where it can alone (resolve_fast); the entries that reach another
 * go to entry/position/state (how many is returned), the others' ends to
 * reached (-1: dead). -1 on error (the GIL taken back, the error set).
 *
 * Most of a cold row's walk is here, over short entries (MaskBench's
 * heaviest schemas: ~2.5 bytes an entry past its first, 80% of them alive
 * at their end), so an entry's own work counts as much as its bytes'.
 * Compiled once for int32 offsets (``narrow``, a plan's) and once for int64,
 * with the table, its bounds and the start states' bound in registers and
 * one test a byte: the successor s is a live state inside the table when
 * s - 1 < rows - 1 as uint32, which UNKNOWN (-1), DEAD (0) and a state
 * outside the table all fail (then told apart off the hot path). Over the
 * compiled walks of sp_0, o73917 and o65424's MaskBench steps (qwen2.5,
 * callgrind), walk_entries' own instructions went from 958M to 809M with
 * it and the cells resolved on the way. */
/* The states of an entry's first bytes kept for the next entry's shared
 * prefix (first_pass's path): 64 bytes cover all but Qwen's longest tokens
 * (runs of spaces), and their rest is walked as before. */
#define TRIE_DEPTH 64

/* Where first_pass's walk of an entry's bytes stopped: alive 1 when every
 * byte kept the automaton alive (at is then the walk's stop), 0 at a dead
 * byte, -1 at a cell that waits for the pass's resolution, -2 on error (the
 * GIL taken back, the error set); the state there in ``current``. */
typedef struct {
    const uint8_t *at;
    uint32_t current;
    int alive;
} Walked;

/* first_pass's walk of bytes [at, stop) from ``current`` over resolved
 * cells and those the store resolves alone, with one test a byte (see
 * walk_entries). With ``path`` (the trie's), the state after each byte is
 * kept at path[its offset from ``begin`` + 1]. Inlined at each of
 * first_pass's walks (an entry's first TRIE_DEPTH bytes with their states
 * kept, the rest of a long one, an entry of the plain pass), ``path`` a
 * constant there. The per-byte loop compiles as the three loops written
 * out did; around it, a few moves more an entry (callgrind over o65424,
 * o73917, sp_0 and o1: walk_entries +1.8%, the whole +0.3%; with the
 * position and state written through pointers +2.5% and +0.56%, and a
 * step function returning the successor +4.4%: a test a byte more). */
static inline ALWAYS_INLINE Walked walk_bytes(Automaton *automaton, const int32_t *table, uint32_t live_bound,
                                              const uint8_t *at, const uint8_t *stop, uint32_t current,
                                              uint32_t *path, const uint8_t *begin) {
    for (; at < stop; at++) {
        int32_t next = table[(size_t)current * 256 + *at];
        if ((uint32_t)next - 1u >= live_bound) {
            if (next == UNKNOWN) {
                int64_t found = try_resolve(automaton, current, *at);
                if (found < 0) {
                    return (Walked){at, current, -1};  /* waits */
                }
                next = (int32_t)found;
            }
            if (next == DEAD) {
                return (Walked){at, current, 0};
            }
            if ((uint32_t)next - 1u >= live_bound) {
                hold(automaton);
                PyErr_SetString(PyExc_IndexError, "walk: a state outside the table");
                return (Walked){at, current, -2};
            }
        }
        current = (uint32_t)next;
        if (path != NULL) {
            path[at - begin + 1] = current;
        }
    }
    return (Walked){at, current, 1};
}

static inline ALWAYS_INLINE Py_ssize_t first_pass(Automaton *automaton, Py_ssize_t count, const uint8_t *bytes,
                                                  const void *starts_at, const void *stops_at, const int narrow,
                                                  const void *states_at, const int wide_states,
                                                  const uint8_t *shared, const int trie,
                                                  int32_t *entry, int32_t *position, int32_t *state,
                                                  int32_t *reached, int32_t *alive_list, Py_ssize_t *alive_count) {
    const int32_t *table = automaton->table.view.buf;
    uint64_t rows = (uint64_t)(automaton->table.view.len / 1024);
    /* a start state: discovered when the walk began, inside the table, an int32 */
    uint64_t first_bound = (uint64_t)automaton->discovered;
    if (first_bound > rows) {
        first_bound = rows;
    }
    if (first_bound > (uint64_t)INT32_MAX + 1) {
        first_bound = (uint64_t)INT32_MAX + 1;
    }
    uint32_t live_bound = rows > (uint64_t)INT32_MAX ? (uint32_t)INT32_MAX : (uint32_t)(rows ? rows - 1 : 0);
    Py_ssize_t waiting = 0;
    /* With ``shared`` (trie; alive_list given): an entry's end is written
     * to reached only where it is alive, and listed in alive_list.
     * path[d], the state the previous entry walked
     * (or the last one it shared its fate with) reached after its first d
     * bytes, for d <= known <= TRIE_DEPTH; an entry of the same start state
     * that shares more than ``dead_from`` bytes with it dies at the same
     * byte, one that shares more than ``waits_from`` waits at the same
     * cell (PY_SSIZE_T_MAX: it did neither). */
    uint32_t path[TRIE_DEPTH + 1];
    int64_t previous = -1;
    Py_ssize_t known = 0, dead_from = PY_SSIZE_T_MAX, waits_from = PY_SSIZE_T_MAX;
    Py_ssize_t listed = 0;
    const uint8_t *loop_from = trie ? automaton->loop_from : NULL;
    const uint32_t loop_state = automaton->loop_state;
#define STATE(i) (wide_states ? ((const int64_t *)states_at)[i] : (int64_t)((const int32_t *)states_at)[i])
    for (Py_ssize_t i = 0; i < count; i++) {
        if ((uint64_t)STATE(i) >= first_bound) {
            hold(automaton);
            if (STATE(i) >= 0 && STATE(i) < automaton->discovered && STATE(i) <= INT32_MAX) {
                PyErr_SetString(PyExc_IndexError, "walk: a state outside the table");
            } else {
                PyErr_SetString(PyExc_IndexError, "walk: a state outside the automaton");
            }
            return -1;
        }
        Py_ssize_t share = 0;
        if (trie) {
            share = STATE(i) == previous ? shared[i] : 0;
            previous = STATE(i);
            if (share > dead_from) {
                /* the byte the previous entry died at is this one's too,
                 * and the next ones' that share more than dead_from bytes
                 * with their previous one: dead with no byte read (the
                 * path and dead_from stay: what they share with the next
                 * entry as far as dead_from, it shares with the walked one) */
                while (i + 1 < count && STATE(i + 1) == previous && shared[i + 1] > dead_from) {
                    i++;
                }
                continue;
            }
        }
        int64_t from = narrow ? (int64_t)((const int32_t *)starts_at)[i] : ((const int64_t *)starts_at)[i];
        int64_t to = narrow ? (int64_t)((const int32_t *)stops_at)[i] : ((const int64_t *)stops_at)[i];
        if (!narrow && to - from > INT32_MAX) {  /* int32 offsets differ by less */
            hold(automaton);
            PyErr_SetString(PyExc_ValueError, "walk: an entry of more than 2**31 bytes");
            return -1;
        }
        const uint8_t *begin = bytes + from, *at = begin, *stop = bytes + (to > from ? to : from);
        if (trie) {
            /* shared is a hint the walk never reads past an entry by */
            share = share < stop - begin ? share : stop - begin;
            if (share > waits_from) {
                /* waits at the cell the previous entry waits at */
                entry[waiting] = (int32_t)i;
                position[waiting] = (int32_t)waits_from;
                state[waiting++] = (int32_t)path[waits_from];
                continue;
            }
            path[0] = (uint32_t)STATE(i);
            Py_ssize_t resume = share < known ? share : known;
            uint32_t current = path[resume];
            if (loop_from != NULL && current == loop_state && loop_from[i] <= resume) {
                /* in the loop state, with only bytes of its loop set left
                 * (each of their cells resolved to the loop state itself):
                 * alive there, no byte read. The path stays known as far as
                 * the shared prefix (what the next entry shares with this
                 * one past it, it walks again over resolved cells). */
                known = resume;
                dead_from = waits_from = PY_SSIZE_T_MAX;
                reached[i] = (int32_t)current;
                alive_list[listed++] = (int32_t)i;
                /* the entries after it of the same start state that share
                 * its first ``resume`` bytes and whose run begins by then
                 * end there too (what the loop above would find for each,
                 * the path unchanged), taken here with no more than that
                 * test each */
                while (i + 1 < count && STATE(i + 1) == previous && shared[i + 1] >= resume
                       && loop_from[i + 1] <= resume
                       && (narrow ? (int64_t)((const int32_t *)stops_at)[i + 1]
                                        - ((const int32_t *)starts_at)[i + 1]
                                  : ((const int64_t *)stops_at)[i + 1] - ((const int64_t *)starts_at)[i + 1])
                              >= resume) {
                    i++;
                    reached[i] = (int32_t)current;
                    alive_list[listed++] = (int32_t)i;
                }
                continue;
            }
            at += resume;
            /* the bytes up to TRIE_DEPTH keep their states; the rest is walked after */
            const uint8_t *kept = stop - begin > TRIE_DEPTH ? begin + TRIE_DEPTH : stop;
            Walked walked = walk_bytes(automaton, table, live_bound, at, kept, current, path, begin);
            known = walked.at - begin;
            if (walked.alive > 0) {
                walked = walk_bytes(automaton, table, live_bound, walked.at, stop, walked.current, NULL, begin);
            }
            int alive = walked.alive;
            at = walked.at;
            current = walked.current;
            Py_ssize_t stopped = at - begin;
            dead_from = alive == 0 ? stopped : PY_SSIZE_T_MAX;
            waits_from = alive < 0 && stopped <= known ? stopped : PY_SSIZE_T_MAX;
            if (alive > 0) {
                reached[i] = (int32_t)current;
                alive_list[listed++] = (int32_t)i;
            } else if (alive < 0) {
                if (alive < -1) {  /* an error: tested off the hot path */
                    return -1;
                }
                entry[waiting] = (int32_t)i;
                position[waiting] = (int32_t)stopped;
                state[waiting++] = (int32_t)current;
            }
            continue;
        }
        uint32_t current = (uint32_t)STATE(i);
        Walked walked = walk_bytes(automaton, table, live_bound, at, stop, current, NULL, begin);
        int alive = walked.alive;
        at = walked.at;
        current = walked.current;
        reached[i] = alive > 0 ? (int32_t)current : -1;
        if (alive_list != NULL) {
            alive_list[listed] = (int32_t)i;
            listed += alive > 0;
        }
        if (alive < 0) {
            if (alive < -1) {
                return -1;
            }
            entry[waiting] = (int32_t)i;
            position[waiting] = (int32_t)(at - begin);
            state[waiting++] = (int32_t)current;
        }
    }
    *alive_count = listed;
    return waiting;
#undef STATE
}

/* Walk entry i = bytes[starts[i]:stops[i]] from states[i] for each of
 * ``count`` entries (checked by the caller), in passes: a pass walks every
 * entry left as far as it can without the GIL (resolved cells, and those
 * the store resolves alone: first_pass, walk_known); then the cells the
 * stopped ones wait on are resolved together, with it, and the next pass
 * goes on from there. Resolved on the way, a cold row's cells no longer
 * stop most of its entries (sp_0, o73917 and o65424 on qwen2.5: 3.6M of
 * 9.2M entries waited for a pass, 0.6M now), each a second walk_known
 * call and a resolution loop's turn. starts and stops are int64, or int32 where
 * ``narrow`` (a plan's packed offsets); states int64 where ``wide_states``,
 * else int32. An entry whose bytes keep the automaton alive
 * goes to ended_* as (ids[i], or i without ids; end state). Returns how
 * many ended, or -1 on error (GIL held). With ``reached_out`` and
 * ``alive_out`` (count int32 each), ended_* are not written: the entries
 * alive at their end are listed in alive_out (in no order), their end
 * states left at reached_out[i] (what it holds for the others is not
 * defined) and their number returned, for finish_compute to read only
 * those: a cold row's entries are mostly dead, and reading each one's end
 * there cost ~23 instructions an entry. reached_out may be the int32
 * states themselves: the walk writes reached_out[i] only once it has read
 * states[i], and never reads states[j], j <= i, after that (walk_row's and
 * walk_span's scratch, whose pages a fresh fork's row writes once instead
 * of twice). With ``shared`` as well, an entry
 * that shares a prefix with the one before it (same start state) goes on
 * from where that one was there (first_pass). Taking the GIL back once a cell
 * (~50 a cold row) made a thread walking beside another wait for that
 * one's switch interval at every cell; once a pass, it waits a few times a
 * row. The cells resolved are the same (those some entry reaches), in
 * another order: state ids are discovery order and may differ. */
static Py_ssize_t walk_entries(Automaton *automaton, Py_ssize_t count, const uint8_t *bytes,
                               const void *starts_at, const void *stops_at, int narrow, const void *states,
                               int wide_states, const uint8_t *shared,
                               const int64_t *ids, int64_t *ended_ids, int64_t *ended_states, int32_t *reached_out,
                               int32_t *alive_out) {
#define START(i) (narrow ? (int64_t)((const int32_t *)starts_at)[i] : ((const int64_t *)starts_at)[i])
#define STOP(i) (narrow ? (int64_t)((const int32_t *)stops_at)[i] : ((const int64_t *)stops_at)[i])
    Py_ssize_t ended = 0, waiting = 0;
    /* int32 throughout (16 bytes an entry, the pages a cold row first
     * writes halved): entries up to INT32_MAX, states are int32 (the
     * table's cells), positions within an entry checked below */
    if (count > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "walk: more than 2**31 entries");
        return -1;
    }
    size_t items = (size_t)(count ? count : 1);
    int32_t *entry = scratch_take(1, 4 * sizeof(int32_t) * items);
    if (entry == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int32_t *position = entry + items, *state = position + items;
    int32_t *reached = reached_out != NULL ? reached_out : state + items;
    let_go(automaton);
    int32_t *alive_list = reached_out != NULL ? alive_out : NULL;
    Py_ssize_t listed = 0;
    /* int32 start states are walk_row's and walk_span's (their scratch),
     * int64 those a caller hands in (walk, walk_packed, walk_and_pack,
     * which list no alive entries and share no prefixes) */
    if (shared != NULL && alive_list != NULL && !wide_states) {
        waiting = narrow ? first_pass(automaton, count, bytes, starts_at, stops_at, 1, states, 0, shared, 1, entry,
                                      position, state, reached, alive_list, &listed)
                         : first_pass(automaton, count, bytes, starts_at, stops_at, 0, states, 0, shared, 1, entry,
                                      position, state, reached, alive_list, &listed);
    } else if (!wide_states) {
        waiting = narrow ? first_pass(automaton, count, bytes, starts_at, stops_at, 1, states, 0, NULL, 0, entry,
                                      position, state, reached, alive_list, &listed)
                         : first_pass(automaton, count, bytes, starts_at, stops_at, 0, states, 0, NULL, 0, entry,
                                      position, state, reached, alive_list, &listed);
    } else {
        waiting = narrow ? first_pass(automaton, count, bytes, starts_at, stops_at, 1, states, 1, NULL, 0, entry,
                                      position, state, reached, alive_list, &listed)
                         : first_pass(automaton, count, bytes, starts_at, stops_at, 0, states, 1, NULL, 0, entry,
                                      position, state, reached, alive_list, &listed);
    }
    if (waiting < 0) {
        ended = -1;
        goto done;
    }
    while (waiting) {
        automaton->deferring = 0;
        for (Py_ssize_t k = 0; k < waiting; k++) {
            int byte = bytes[START(entry[k]) + position[k]];
            int64_t next = -2;
            if (automaton->session != NULL) {
                next = ((const int32_t *)automaton->table.view.buf)[(int64_t)state[k] * 256 + byte];
                if (next == UNKNOWN) {  /* not resolved with an earlier cell's range */
                    next = core_api->fast(automaton->session, state[k], byte);
                }
                if (next == -2) {
                    hold(automaton);
                    next = core_api->held(automaton->session, state[k], byte);
                    if (next < -1 || take_table(automaton) < 0) {
                        ended = -1;
                        goto done;
                    }
                }
            } else {
                hold(automaton);
                next = resolve(automaton, state[k], bytes[START(entry[k]) + position[k]]);
                if (next < -1) {
                    ended = -1;
                    goto done;
                }
            }
            state[k] = (int32_t)next;  /* a state: the table holds int32 */
        }
        let_go(automaton);
        Py_ssize_t left = 0;
        for (Py_ssize_t k = 0; k < waiting; k++) {
            if (state[k] == DEAD) {
                continue;
            }
            Py_ssize_t i = entry[k];
            int64_t end;
            Py_ssize_t stop;
            int found = walk_known(automaton, state[k], bytes + START(i), position[k] + 1, STOP(i) - START(i),
                                   &end, &stop);
            if (found < 0) {
                ended = -1;
                goto done;
            }
            if (found == 1) {
                reached[i] = (int32_t)end;
                if (alive_list != NULL) {
                    alive_list[listed++] = (int32_t)i;
                }
            } else if (found == 2) {
                entry[left] = (int32_t)i;
                position[left] = (int32_t)stop;
                state[left++] = (int32_t)end;
            }
        }
        waiting = left;
    }
    if (reached_out != NULL) {
        ended = listed;  /* the caller reads the ends of those listed there */
        goto done;
    }
    /* in entry order, as a walk of one entry after another gives them: the
     * ended entries' indices gathered into the scratch's entry column
     * (free now) without a branch on each entry's fate, then copied out.
     * Tested an entry (alive or dead, at random), the branch was
     * mispredicted often enough to take 15% of walk_entries' time (perf
     * annotate over MaskBench's 250-1500 us steps); the outputs past the
     * ended ones are not written. */
    for (Py_ssize_t i = 0; i < count; i++) {
        entry[ended] = (int32_t)i;
        ended += reached[i] >= 0;
    }
    if (ids != NULL) {
        for (Py_ssize_t k = 0; k < ended; k++) {
            ended_ids[k] = ids[entry[k]];
            ended_states[k] = reached[entry[k]];
        }
    } else {
        for (Py_ssize_t k = 0; k < ended; k++) {
            ended_ids[k] = entry[k];
            ended_states[k] = reached[entry[k]];
        }
    }
done:
    if (ended < 0 || !automaton->stay_released) {
        hold(automaton);
    }
    scratch_give(1, entry);
    return ended;
#undef START
#undef STOP
}

/* walk(dfa, spellings, offsets, tokens, states, positions, ended_tokens, ended_states) -> ended
 *
 * dfa:        the LazyByteDFA, its resolving lock held by the caller (see
 *             Automaton)
 * spellings:  uint8[total], every token's bytes one after another
 * offsets:    int64[V + 1], token t is spellings[offsets[t]:offsets[t + 1]]
 * tokens:     int64[k], the tokens to walk
 * states:     int64[k], the state each one's walk starts in
 * positions:  int64[k], the position of its next byte there
 *
 * A token whose bytes keep the automaton alive to its end goes to ended_*
 * (token id, state); a dead one is dropped. The outputs must hold k items
 * each. Returns how many ended. A token's bytes are contiguous here: read
 * down the [L, V] column layout, every byte of a walk was another cache line
 * (~25 ns a token on Qwen, a fifth of a cold row's walk).
 */
static PyObject *walk(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 8, "walk") < 0) {
        return NULL;
    }
    Automaton automaton = {0};
    Buffer buffers[8] = {{0}};  /* buffers[0] unused: the table is the automaton's */
    static const char *names[8] = {"", "spellings", "offsets", "tokens", "states", "positions",
                                   "ended_tokens", "ended_states"};
    static const Py_ssize_t items[8] = {0, U8, 8, 8, 8, 8, 8, 8};
    static const int writable[8] = {0, 0, 0, 0, 0, 0, 1, 1};
    PyObject *result = NULL;
    Py_ssize_t ended = 0;
    if (open_automaton(args[0], &automaton) < 0) {
        goto done;
    }
    for (int i = 1; i < 8; i++) {
        if (take(args[i], &buffers[i], names[i], items[i], writable[i]) < 0) {
            goto done;
        }
    }
    const uint8_t *spellings = buffers[1].view.buf;
    const int64_t *offsets = buffers[2].view.buf;
    const int64_t *tokens = buffers[3].view.buf, *states = buffers[4].view.buf, *positions = buffers[5].view.buf;
    int64_t *ended_tokens = buffers[6].view.buf, *ended_states = buffers[7].view.buf;
    Py_ssize_t count = buffers[3].view.len / 8, total = buffers[1].view.len;
    Py_ssize_t vocab_size = buffers[2].view.len / 8 - 1;
    if (buffers[4].view.len / 8 != count || buffers[5].view.len / 8 != count
            || buffers[6].view.len / 8 < count || buffers[7].view.len / 8 < count || vocab_size < 0) {
        PyErr_SetString(PyExc_ValueError, "walk: arrays of mismatched lengths");
        goto done;
    }
    int64_t *starts = PyMem_Malloc(sizeof(int64_t) * (size_t)(2 * count + 1));
    if (starts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t *stops = starts + count;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t token = tokens[i];
        if (token < 0 || token >= vocab_size || positions[i] < 0 || offsets[token] < 0
                || offsets[token] + positions[i] > offsets[token + 1] || offsets[token + 1] > total) {
            PyMem_Free(starts);
            PyErr_SetString(PyExc_IndexError, "walk: a token outside the tables");
            goto done;
        }
        starts[i] = offsets[token] + positions[i];
        stops[i] = offsets[token + 1];
    }
    ended = walk_entries(&automaton, count, spellings, starts, stops, 0, states, 1, NULL, tokens, ended_tokens, ended_states,
                         NULL, NULL);
    PyMem_Free(starts);
    if (ended >= 0) {
        result = PyLong_FromSsize_t(ended);
    }
done:
    release(buffers, 8);
    if (close_automaton(&automaton) < 0) {
        Py_CLEAR(result);
    }
    return result;
}

/* walk_and_pack(dfa, spellings, offsets, tokens, states, positions, ended_entries, ended_states,
 *               packed_offsets) -> (ended, data)
 *
 * ``walk`` that packs as it goes (a plan's tokens and positions, int32):
 * every token's remaining bytes (as ``pack``
 * writes them) are copied into ``data``, a new bytes object, entry i at
 * data[packed_offsets[i]:packed_offsets[i + 1]] (packed_offsets: int32[k +
 * 1], written here), and walked from there as ``walk_packed`` walks them; a
 * live one goes to ended_* as (i, end state). The same cells are resolved in
 * the same order as by ``walk`` (the same entries, the same passes). Reading
 * a token's bytes by id is a cache miss or two a token either way; the copy
 * of the line just read costs little, where packing in a pass of its own
 * reads them all by id again: ~40-90 us a plan of 5-10k Qwen tokens, inside
 * a cold row (~110 us on average in the rows around MaskBench's p99).
 */
static PyObject *walk_and_pack(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 9, "walk_and_pack") < 0) {
        return NULL;
    }
    Automaton automaton = {0};
    Buffer buffers[9] = {{0}};  /* buffers[0] unused: the table is the automaton's */
    static const char *names[9] = {"", "spellings", "offsets", "tokens", "states", "positions",
                                   "ended_entries", "ended_states", "packed_offsets"};
    static const Py_ssize_t items[9] = {0, U8, 8, 4, 8, 4, 8, 8, 4};
    static const int writable[9] = {0, 0, 0, 0, 0, 0, 1, 1, 1};
    PyObject *result = NULL, *data = NULL;
    Py_ssize_t ended = 0;
    if (open_automaton(args[0], &automaton) < 0) {
        goto done;
    }
    for (int i = 1; i < 9; i++) {
        if (take(args[i], &buffers[i], names[i], items[i], writable[i]) < 0) {
            goto done;
        }
    }
    const uint8_t *spellings = buffers[1].view.buf;
    const int64_t *offsets = buffers[2].view.buf;
    const int32_t *tokens = buffers[3].view.buf, *positions = buffers[5].view.buf;
    const int64_t *states = buffers[4].view.buf;
    int64_t *ended_entries = buffers[6].view.buf, *ended_states = buffers[7].view.buf;
    int32_t *packed_offsets = buffers[8].view.buf;
    Py_ssize_t count = buffers[3].view.len / 4, total = buffers[1].view.len;
    Py_ssize_t vocab_size = buffers[2].view.len / 8 - 1;
    if (buffers[4].view.len / 8 != count || buffers[5].view.len / 4 != count
            || buffers[6].view.len / 8 < count || buffers[7].view.len / 8 < count
            || buffers[8].view.len / 4 != count + 1 || vocab_size < 0) {
        PyErr_SetString(PyExc_ValueError, "walk_and_pack: arrays of mismatched lengths");
        goto done;
    }
    /* The offsets and the copy read the spellings at random (a cache miss or
     * two a token, ~40-90 us a plan of 5-10k Qwen tokens): without the GIL. */
    packed_offsets[0] = 0;
    int outside = 0;
    let_go(&automaton);
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t token = tokens[i];
        if (token < 0 || token >= vocab_size || positions[i] < 0 || offsets[token] < 0
                || offsets[token] + positions[i] > offsets[token + 1] || offsets[token + 1] > total) {
            outside = 1;
            break;
        }
        int64_t next = packed_offsets[i] + (offsets[token + 1] - offsets[token] - positions[i]);
        if (next > INT32_MAX) {  /* a plan's packed bytes are indexed by int32 */
            outside = 1;
            break;
        }
        packed_offsets[i + 1] = (int32_t)next;
    }
    hold(&automaton);
    if (outside) {
        PyErr_SetString(PyExc_IndexError, "walk_and_pack: a token outside the tables");
        goto done;
    }
    data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)packed_offsets[count]);
    if (data == NULL) {
        goto done;
    }
    uint8_t *packed = (uint8_t *)PyBytes_AS_STRING(data);
    let_go(&automaton);
    for (Py_ssize_t i = 0; i < count; i++) {
        memcpy(packed + packed_offsets[i], spellings + offsets[tokens[i]] + positions[i],
               (size_t)(packed_offsets[i + 1] - packed_offsets[i]));
    }
    hold(&automaton);
    ended = walk_entries(&automaton, count, packed, packed_offsets, packed_offsets + 1, 1, states, 1, NULL, NULL,
                         ended_entries, ended_states, NULL, NULL);
    if (ended >= 0) {
        result = Py_BuildValue("(nO)", ended, data);
    }
done:
    Py_XDECREF(data);
    release(buffers, 9);
    if (close_automaton(&automaton) < 0) {
        Py_CLEAR(result);
    }
    return result;
}

/* walk_packed(dfa, data, offsets, states, ended_entries, ended_states) -> ended
 *
 * ``walk`` for bytes packed in walking order: entry i walks
 * data[offsets[i]:offsets[i + 1]] from states[i] (offsets: int32[k + 1],
 * states: int64[k]); a live one goes to ended_* as (i, end state). Every
 * read is then sequential: read through the token ids' offsets, a cold
 * row's ~4.6-37k tokens each cost a cache miss or two (with the caches
 * flushed, sp_0's 4.6k-token chain rows: ~190 us by id, ~40 us packed;
 * o65424's 10.8k-token rows: ~550 against ~100 us, a warm cache's time).
 */
static PyObject *walk_packed(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 6, "walk_packed") < 0) {
        return NULL;
    }
    Automaton automaton = {0};
    Buffer buffers[6] = {{0}};  /* buffers[0] unused: the table is the automaton's */
    static const char *names[6] = {"", "data", "offsets", "states", "ended_entries", "ended_states"};
    static const Py_ssize_t items[6] = {0, U8, 4, 8, 8, 8};
    static const int writable[6] = {0, 0, 0, 0, 1, 1};
    PyObject *result = NULL;
    Py_ssize_t ended = 0;
    if (open_automaton(args[0], &automaton) < 0) {
        goto done;
    }
    for (int i = 1; i < 6; i++) {
        if (take(args[i], &buffers[i], names[i], items[i], writable[i]) < 0) {
            goto done;
        }
    }
    const uint8_t *data = buffers[1].view.buf;
    const int32_t *offsets = buffers[2].view.buf;
    const int64_t *states = buffers[3].view.buf;
    int64_t *ended_entries = buffers[4].view.buf, *ended_states = buffers[5].view.buf;
    Py_ssize_t count = buffers[3].view.len / 8, total = buffers[1].view.len;
    if (buffers[2].view.len / 4 != count + 1 || buffers[4].view.len / 8 < count || buffers[5].view.len / 8 < count) {
        PyErr_SetString(PyExc_ValueError, "walk_packed: arrays of mismatched lengths");
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (offsets[i] < 0 || offsets[i] > offsets[i + 1] || offsets[i + 1] > total) {
            PyErr_SetString(PyExc_IndexError, "walk_packed: an entry outside the data");
            goto done;
        }
    }
    ended = walk_entries(&automaton, count, data, offsets, offsets + 1, 1, states, 1, NULL, NULL, ended_entries, ended_states,
                         NULL, NULL);
    if (ended >= 0) {
        result = PyLong_FromSsize_t(ended);
    }
done:
    release(buffers, 6);
    if (close_automaton(&automaton) < 0) {
        Py_CLEAR(result);
    }
    return result;
}

/* pack(spellings, offsets, tokens, positions, data) -> None
 *
 * The bytes each of ``tokens`` has left from its position (spellings and
 * offsets as for ``walk``), one after another into ``data`` (uint8, exactly
 * their total): what ``walk_packed`` reads.
 */
static PyObject *pack(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 5, "pack") < 0) {
        return NULL;
    }
    Buffer buffers[5] = {{0}};
    static const char *names[5] = {"spellings", "offsets", "tokens", "positions", "data"};
    static const Py_ssize_t items[5] = {U8, 8, 8, 8, U8};
    static const int writable[5] = {0, 0, 0, 0, 1};
    PyObject *result = NULL;
    for (int i = 0; i < 5; i++) {
        if (take(args[i], &buffers[i], names[i], items[i], writable[i]) < 0) {
            goto done;
        }
    }
    const uint8_t *spellings = buffers[0].view.buf;
    const int64_t *offsets = buffers[1].view.buf, *tokens = buffers[2].view.buf, *positions = buffers[3].view.buf;
    uint8_t *data = buffers[4].view.buf;
    Py_ssize_t count = buffers[2].view.len / 8, vocab_size = buffers[1].view.len / 8 - 1;
    Py_ssize_t total = buffers[0].view.len, room = buffers[4].view.len, filled = 0;
    if (buffers[3].view.len / 8 != count || vocab_size < 0) {
        PyErr_SetString(PyExc_ValueError, "pack: arrays of mismatched lengths");
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t token = tokens[i];
        if (token < 0 || token >= vocab_size || positions[i] < 0) {
            PyErr_SetString(PyExc_IndexError, "pack: a token outside the tables");
            goto done;
        }
        int64_t at = offsets[token] + positions[i], end = offsets[token + 1];
        if (offsets[token] < 0 || at > end || end > total || filled + (end - at) > room) {
            PyErr_SetString(PyExc_IndexError, "pack: a token outside the tables, or more bytes than data holds");
            goto done;
        }
        memcpy(data + filled, spellings + at, (size_t)(end - at));
        filled += end - at;
    }
    if (filled != room) {
        PyErr_SetString(PyExc_ValueError, "pack: data is not the tokens' remaining bytes");
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    release(buffers, 5);
    return result;
}

/* How many leading bytes a[:most] and b[:most] share, a before b and
 * both inside a buffer that ends at ``end``: eight at a time where eight
 * bytes from b are inside it, with no branch on where they differ (a byte
 * loop's exit, at a length no predictor learns, cost ~10 ns an entry:
 * 0.72 ms for a narrow loop set's 73k rest tokens on Qwen). */
static inline Py_ssize_t common_length(const uint8_t *a, const uint8_t *b, Py_ssize_t most, const uint8_t *end) {
    Py_ssize_t n = 0;
#if (defined(__GNUC__) || defined(__clang__)) && PY_LITTLE_ENDIAN
    while (n < most && end - (b + n) >= 8) {
        uint64_t x, y;
        memcpy(&x, a + n, 8);
        memcpy(&y, b + n, 8);
        uint64_t differ = x ^ y;
        if (differ) {
            n += __builtin_ctzll(differ) >> 3;
            return n < most ? n : most;
        }
        n += 8;
    }
#endif
    while (n < most && a[n] == b[n]) {
        n++;
    }
    return n < most ? n : most;
}

/* common_prefixes's loop over offsets of one width, checked as it goes;
 * the problem met, or NULL. */
#define COMMON_PREFIXES(NAME, TYPE)                                                                   \
static const char *NAME(const uint8_t *data, Py_ssize_t total, const TYPE *offsets, Py_ssize_t count,   \
                        uint8_t *out) {                                                               \
    int64_t start = 0;  /* entry j - 1's, which ends where entry j starts */                          \
    for (Py_ssize_t j = 0; j < count; j++) {                                                          \
        int64_t from = offsets[j], to = offsets[j + 1];                                               \
        if (from < 0 || from > to || to > total) {                                                    \
            return "common_prefixes: an entry outside the data";                                      \
        }                                                                                             \
        int64_t most = from - start < to - from ? from - start : to - from;                           \
        most = j == 0 ? 0 : most < 255 ? most : 255;                                                  \
        out[j] = (uint8_t)common_length(data + start, data + from, most, data + total);               \
        start = from;                                                                                 \
    }                                                                                                 \
    return NULL;                                                                                      \
}
COMMON_PREFIXES(common_prefixes_32, int32_t)
COMMON_PREFIXES(common_prefixes_64, int64_t)

/* common_prefixes(data, offsets, out) -> None
 *
 * out[j] (uint8, one an entry): how many leading bytes entry j =
 * data[offsets[j]:offsets[j + 1]] shares with entry j - 1, at most 255 (0
 * for the first entry); offsets int64 or int32 (a plan's packed ones),
 * ascending inside data. What first_pass reads as ``shared``: computed once
 * for the vocabulary's grouped spellings and once a packed plan, not at
 * every row.
 */
static PyObject *common_prefixes(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 3, "common_prefixes") < 0) {
        return NULL;
    }
    Buffer buffers[3] = {{0}};
    PyObject *result = NULL;
    if (take(args[0], &buffers[0], "data", U8, 0) < 0 || take(args[2], &buffers[2], "out", U8, 1) < 0) {
        goto done;
    }
    if (PyObject_GetBuffer(args[1], &buffers[1].view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        goto done;
    }
    buffers[1].held = 1;
    int wide = item_is(&buffers[1].view, 8);
    if (!wide && !item_is(&buffers[1].view, 4)) {
        PyErr_SetString(PyExc_TypeError, "common_prefixes: int32 or int64 offsets expected");
        goto done;
    }
    Py_ssize_t count = buffers[2].view.len;
    if (buffers[1].view.len / buffers[1].view.itemsize != count + 1) {
        PyErr_SetString(PyExc_ValueError, "common_prefixes: arrays of mismatched lengths");
        goto done;
    }
    const char *problem = wide ? common_prefixes_64(buffers[0].view.buf, buffers[0].view.len, buffers[1].view.buf,
                                                    count, buffers[2].view.buf)
                               : common_prefixes_32(buffers[0].view.buf, buffers[0].view.len, buffers[1].view.buf,
                                                    count, buffers[2].view.buf);
    if (problem != NULL) {
        PyErr_SetString(PyExc_IndexError, problem);
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    release(buffers, 3);
    return result;
}

/* set_bits(mask, tokens): bit t of the uint32 words of ``mask`` set for each
 * int64 t of ``tokens`` (a cold row's ~9k walked tokens: packing a bool per
 * token cost ~30 us of numpy). */
static PyObject *set_bits(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 2, "set_bits") < 0) {
        return NULL;
    }
    Buffer buffers[2] = {{0}};
    if (take(args[0], &buffers[0], "mask", U32, 1) < 0 || take(args[1], &buffers[1], "tokens", 8, 0) < 0) {
        release(buffers, 2);
        return NULL;
    }
    uint32_t *mask = buffers[0].view.buf;
    const int64_t *tokens = buffers[1].view.buf;
    Py_ssize_t words = buffers[0].view.len / 4, count = buffers[1].view.len / 8;
    int outside = 0;
    Released released;
    let_go_for(&released, count);
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t token = tokens[i];
        if (token < 0 || token >= (int64_t)words * 32) {
            outside = 1;
            break;
        }
        mask[token >> 5] |= (uint32_t)1 << (token & 31);
    }
    take_back(&released);
    release(buffers, 2);
    if (outside) {
        PyErr_SetString(PyExc_IndexError, "set_bits: a token outside the mask");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* group_bits(mask, items, offsets, groups): set_bits for the tokens of
 * ``groups`` (int64), group g being items[offsets[g]:offsets[g + 1]] (the
 * tokens by first byte): a loop row's first-byte side without gathering
 * its tokens into an array first (~2-60k tokens on Qwen). */
static PyObject *group_bits(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 4, "group_bits") < 0) {
        return NULL;
    }
    Buffer buffers[4] = {{0}};
    static const char *names[4] = {"mask", "items", "offsets", "groups"};
    static const Py_ssize_t items_size[4] = {U32, 8, 8, 8};
    PyObject *result = NULL;
    for (int i = 0; i < 4; i++) {
        if (take(args[i], &buffers[i], names[i], items_size[i], i == 0) < 0) {
            goto done;
        }
    }
    uint32_t *mask = buffers[0].view.buf;
    const int64_t *items = buffers[1].view.buf, *offsets = buffers[2].view.buf, *groups = buffers[3].view.buf;
    Py_ssize_t words = buffers[0].view.len / 4, count = buffers[1].view.len / 8;
    Py_ssize_t num_groups = buffers[2].view.len / 8 - 1, asked = buffers[3].view.len / 8;
    const char *problem = NULL;
    Released released;
    let_go_for(&released, count);  /* the items are the work's bound (~2-60k tokens a loop row) */
    for (Py_ssize_t i = 0; i < asked && problem == NULL; i++) {
        int64_t g = groups[i];
        if (g < 0 || g >= num_groups || offsets[g] < 0 || offsets[g] > offsets[g + 1] || offsets[g + 1] > count) {
            problem = "group_bits: a group outside the offsets";
            break;
        }
        for (int64_t at = offsets[g]; at < offsets[g + 1]; at++) {
            int64_t token = items[at];
            if (token < 0 || token >= (int64_t)words * 32) {
                problem = "group_bits: a token outside the mask";
                break;
            }
            mask[token >> 5] |= (uint32_t)1 << (token & 31);
        }
    }
    take_back(&released);
    if (problem != NULL) {
        PyErr_SetString(PyExc_IndexError, problem);
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    release(buffers, 4);
    return result;
}

/* distinct(values, marks, out) -> n: the distinct int32 ``values`` in the
 * order first met, in out[:n] (int64); ``marks`` is a zeroed uint8 array
 * longer than every value, left zeroed. The successors of a cold row: ~9k
 * end states, tens of them distinct (np.sort of them was ~150 us). */
static PyObject *distinct(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 3, "distinct") < 0) {
        return NULL;
    }
    Buffer buffers[3] = {{0}};
    if (take(args[0], &buffers[0], "values", 4, 0) < 0 || take(args[1], &buffers[1], "marks", U8, 1) < 0
            || take(args[2], &buffers[2], "out", 8, 1) < 0) {
        release(buffers, 3);
        return NULL;
    }
    const int32_t *values = buffers[0].view.buf;
    uint8_t *marks = buffers[1].view.buf;
    int64_t *out = buffers[2].view.buf;
    Py_ssize_t count = buffers[0].view.len / 4, bound = buffers[1].view.len, found = 0;
    if (buffers[2].view.len / 8 < count) {
        release(buffers, 3);
        PyErr_SetString(PyExc_ValueError, "distinct: out is shorter than values");
        return NULL;
    }
    int bad = 0;
    Released released;
    let_go_for(&released, count);
    for (Py_ssize_t i = 0; i < count; i++) {
        int32_t value = values[i];
        if (value < 0 || value >= bound) {
            bad = 1;
            break;
        }
        if (!marks[value]) {
            marks[value] = 1;
            out[found++] = value;
        }
    }
    for (Py_ssize_t i = 0; i < found; i++) {
        marks[out[i]] = 0;
    }
    take_back(&released);
    release(buffers, 3);
    if (bad) {
        PyErr_SetString(PyExc_IndexError, "distinct: a value outside the marks");
        return NULL;
    }
    return PyLong_FromSsize_t(found);
}

/* walk_table(table, spellings, offsets, tokens, states, positions, ends):
 * the eager build's exact walk (tokendfa.builder.narrow.exact_walk) over a
 * complete byte table (int32[n, 256], DEAD 0, no UNKNOWN cell): ends[i]
 * (int32) is the state tokens[i]'s bytes from positions[i] on lead to from
 * states[i], 0 when they die, states[i] when none are left. numpy walked the
 * pairs a byte a level (~40 us a level); a 74-character schema's build on a
 * 32k vocabulary spent 14 of its 35 ms there. */
static PyObject *walk_table(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 7, "walk_table") < 0) {
        return NULL;
    }
    Buffer buffers[7] = {{0}};
    static const char *names[7] = {"table", "spellings", "offsets", "tokens", "states", "positions", "ends"};
    static const Py_ssize_t items[7] = {4, U8, 8, 8, 8, 8, 4};
    for (int i = 0; i < 7; i++) {
        if (take(args[i], &buffers[i], names[i], items[i], i == 6) < 0) {
            release(buffers, 7);
            return NULL;
        }
    }
    const int32_t *table = buffers[0].view.buf;
    const uint8_t *spellings = buffers[1].view.buf;
    const int64_t *offsets = buffers[2].view.buf, *tokens = buffers[3].view.buf;
    const int64_t *states = buffers[4].view.buf, *positions = buffers[5].view.buf;
    int32_t *ends = buffers[6].view.buf;
    Py_ssize_t rows = buffers[0].view.len / (256 * 4), count = buffers[3].view.len / 8;
    Py_ssize_t vocab_size = buffers[2].view.len / 8 - 1, total = buffers[1].view.len;
    const char *problem = NULL;
    if (buffers[0].view.len % (256 * 4) || buffers[4].view.len / 8 != count || buffers[5].view.len / 8 != count
            || buffers[6].view.len / 4 != count || vocab_size < 0) {
        problem = "walk_table: a table whose rows are not 256 cells, or arrays of mismatched lengths";
    }
    Py_BEGIN_ALLOW_THREADS  /* plain C over buffers the call holds */
    for (Py_ssize_t i = 0; i < count && problem == NULL; i++) {
        int64_t token = tokens[i], state = states[i];
        if (token < 0 || token >= vocab_size || positions[i] < 0 || state < 0 || state >= rows
                || offsets[token] < 0 || offsets[token] > offsets[token + 1] || offsets[token + 1] > total) {
            problem = "walk_table: a token or state outside the tables";
            break;
        }
        for (int64_t at = offsets[token] + positions[i]; at < offsets[token + 1]; at++) {
            state = table[state * 256 + spellings[at]];
            if (state <= DEAD || state >= rows) {
                if (state != DEAD) {
                    problem = "walk_table: a cell outside the table (not a complete automaton)";
                }
                state = DEAD;
                break;
            }
        }
        ends[i] = (int32_t)state;
    }
    Py_END_ALLOW_THREADS
    release(buffers, 7);
    if (problem != NULL) {
        PyErr_SetString(PyExc_ValueError, problem);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* The spellings, their offsets and a byte set (uint8[256], non-zero: in the
 * set), taken together for leading_runs; the vocabulary's
 * size, or -1 with an exception. */
static Py_ssize_t take_spellings(PyObject *const *args, Buffer *buffers) {
    if (take(args[0], &buffers[0], "spellings", U8, 0) < 0 || take(args[1], &buffers[1], "offsets", 8, 0) < 0
            || take(args[2], &buffers[2], "bytes", U8, 0) < 0) {
        return -1;
    }
    Py_ssize_t size = buffers[1].view.len / 8 - 1;
    const int64_t *offsets = buffers[1].view.buf;
    if (size < 0 || buffers[2].view.len != 256) {
        PyErr_SetString(PyExc_ValueError, "spellings: no offsets, or a byte set that is not 256 flags");
        return -1;
    }
    for (Py_ssize_t t = 0; t < size; t++) {
        if (offsets[t] < 0 || offsets[t] > offsets[t + 1] || offsets[t + 1] > buffers[0].view.len) {
            PyErr_SetString(PyExc_IndexError, "spellings: offsets outside the spellings");
            return -1;
        }
    }
    return size;
}

/* leading_runs(spellings, offsets, inside, wide, run, ascii_run, chars):
 * for each token (int32 outputs) the bytes of its leading run of bytes in
 * ``inside`` (its length when it is all run), the bytes of that run before
 * its first byte of 128 or more, and the characters that start in the run
 * (``wide``: a byte below 128 or from 0xC0 starts one; else every byte
 * does). A class's runs on Qwen: ~2 ms, where numpy's column by column
 * passes took ~15. */
static PyObject *leading_runs(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 7, "leading_runs") < 0) {
        return NULL;
    }
    int wide = PyObject_IsTrue(args[3]);
    if (wide < 0) {
        return NULL;
    }
    Buffer buffers[7] = {{0}};
    Py_ssize_t size = take_spellings(args, buffers);
    if (size < 0 || take(args[4], &buffers[4], "run", 4, 1) < 0
            || take(args[5], &buffers[5], "ascii_run", 4, 1) < 0 || take(args[6], &buffers[6], "chars", 4, 1) < 0) {
        release(buffers, 7);
        return NULL;
    }
    if (buffers[4].view.len / 4 != size || buffers[5].view.len / 4 != size || buffers[6].view.len / 4 != size) {
        release(buffers, 7);
        PyErr_SetString(PyExc_ValueError, "leading_runs: an output is not one item a token");
        return NULL;
    }
    const uint8_t *spellings = buffers[0].view.buf, *inside = buffers[2].view.buf;
    const int64_t *offsets = buffers[1].view.buf;
    int32_t *run = buffers[4].view.buf, *ascii_run = buffers[5].view.buf, *chars = buffers[6].view.buf;
    Released released;
    let_go_for(&released, size);
    for (Py_ssize_t t = 0; t < size; t++) {
        const uint8_t *token = spellings + offsets[t];
        int32_t length = (int32_t)(offsets[t + 1] - offsets[t]), here = 0, ascii = -1, count = 0;
        for (; here < length && inside[token[here]]; here++) {
            uint8_t byte = token[here];
            if (byte >= 0x80 && ascii < 0) {
                ascii = here;
            }
            count += !wide || byte < 0x80 || byte >= 0xC0;
        }
        run[t] = here;
        ascii_run[t] = ascii < 0 ? here : ascii;
        chars[t] = count;
    }
    take_back(&released);
    release(buffers, 7);
    Py_RETURN_NONE;
}

/* skips(spellings, offsets, loops, tokens, first_char, out):
 * for each of ``tokens`` (int64 ids) the position of its first byte after
 * its first character that is not in ``loops`` (256 flags), its length when
 * there is none, and 0 when it is not text (first_char, int8 a token: the
 * bytes of its first character, 0 when it is not text). The resume points
 * of a loop set's other tokens (tokendfa.lazy.tables._skips), read token
 * by token: numpy's passes over the first 32 byte columns made a new loop
 * set's tail tokens (a pattern's class) cost 2-6 ms on Qwen, inside the
 * cold row that meets it; 0.3-0.5 ms with this. */
static PyObject *skips(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 6, "skips") < 0) {
        return NULL;
    }
    Buffer buffers[6] = {{0}};
    Py_ssize_t size = take_spellings(args, buffers);
    if (size < 0 || take(args[3], &buffers[3], "tokens", 8, 0) < 0
            || take(args[4], &buffers[4], "first_char", 1, 0) < 0 || take(args[5], &buffers[5], "out", 2, 1) < 0) {
        release(buffers, 6);
        return NULL;
    }
    Py_ssize_t count = buffers[3].view.len / 8;
    if (buffers[4].view.len != size || buffers[5].view.len / 2 != count) {
        release(buffers, 6);
        PyErr_SetString(PyExc_ValueError, "skips: first_char is not one item a token, or out not one a token asked");
        return NULL;
    }
    const uint8_t *spellings = buffers[0].view.buf, *loops = buffers[2].view.buf;
    const int64_t *offsets = buffers[1].view.buf, *tokens = buffers[3].view.buf;
    const int8_t *first_char = buffers[4].view.buf;
    int16_t *out = buffers[5].view.buf;
    int outside = 0;
    Released released;
    let_go_for(&released, count);
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t t = tokens[i];
        if (t < 0 || t >= size) {
            outside = 1;
            break;
        }
        if (first_char[t] <= 0) {
            out[i] = 0;
            continue;
        }
        const uint8_t *token = spellings + offsets[t];
        int64_t length = offsets[t + 1] - offsets[t], at = first_char[t];
        while (at < length && loops[token[at]]) {
            at++;
        }
        out[i] = (int16_t)(at < length ? at : length);
    }
    take_back(&released);
    release(buffers, 6);
    if (outside) {
        PyErr_SetString(PyExc_IndexError, "skips: a token outside the tables");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* tail_split(tail_low, tail_high, tail_wide, first_char, by_first_byte,
 *            first_offsets, low, high, wide, mask, rest, rest_offsets) -> n
 *
 * A loop set's tail set (tokendfa.lazy.tables._tail_tokens) in two passes:
 * token t is inside when it is text (first_char[t] > 0) and its tail bytes
 * (tail_low[t], tail_high[t]: uint64 bits of the ASCII bytes after its first
 * character; tail_wide[t]: a byte of 128 or more there) are in the set
 * (``low``, ``high``: its ASCII bytes; ``wide``: every wide character);
 * its bit is set in ``mask`` (uint32 words, written whole). The
 * spelled tokens outside, in the order of ``by_first_byte`` (int64, by
 * first byte; those of byte b at first_offsets[b]..first_offsets[b + 1]),
 * go to rest[:n], those of byte b at rest_offsets[b]..rest_offsets[b + 1].
 * In numpy the gathers in first-byte order were ~0.7 of a new loop set's
 * ~1 ms on Qwen; the whole split here is ~0.4 ms warm. */
static PyObject *tail_split(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 12, "tail_split") < 0) {
        return NULL;
    }
    int wide = PyObject_IsTrue(args[8]);
    unsigned long long low = PyLong_AsUnsignedLongLong(args[6]), high = PyLong_AsUnsignedLongLong(args[7]);
    if (wide < 0 || PyErr_Occurred()) {
        return NULL;
    }
    Buffer buffers[9] = {{0}};
    static const char *names[9] = {"tail_low", "tail_high", "tail_wide", "first_char", "by_first_byte",
                                   "first_offsets", "mask", "rest", "rest_offsets"};
    static const Py_ssize_t items[9] = {U64, U64, U8, 1, 8, 8, U32, 8, 8};
    static const int writable[9] = {0, 0, 0, 0, 0, 0, 1, 1, 1};
    static const int argument[9] = {0, 1, 2, 3, 4, 5, 9, 10, 11};
    PyObject *result = NULL;
    for (int i = 0; i < 9; i++) {
        if (take(args[argument[i]], &buffers[i], names[i], items[i], writable[i]) < 0) {
            goto done;
        }
    }
    Py_ssize_t size = buffers[0].view.len / 8, count = buffers[4].view.len / 8;
    if (buffers[1].view.len / 8 != size || buffers[2].view.len != size || buffers[3].view.len != size
            || buffers[5].view.len != 257 * 8 || buffers[8].view.len != 257 * 8
            || buffers[6].view.len / 4 * 32 < size || buffers[7].view.len / 8 < count) {
        PyErr_SetString(PyExc_ValueError, "tail_split: arrays of mismatched lengths");
        goto done;
    }
    const uint64_t *tail_low = buffers[0].view.buf, *tail_high = buffers[1].view.buf;
    const uint8_t *tail_wide = buffers[2].view.buf;
    const int8_t *first_char = buffers[3].view.buf;
    const int64_t *by_first_byte = buffers[4].view.buf, *first_offsets = buffers[5].view.buf;
    uint32_t *mask = buffers[6].view.buf;
    int64_t *rest = buffers[7].view.buf, *rest_offsets = buffers[8].view.buf;
    for (int b = 0; b < 257; b++) {
        if (first_offsets[b] < 0 || first_offsets[b] > count || (b && first_offsets[b] < first_offsets[b - 1])) {
            PyErr_SetString(PyExc_ValueError, "tail_split: first_offsets are not offsets into by_first_byte");
            goto done;
        }
    }
    /* Branch-free: a token is inside about two times in three, at no
     * pattern a branch predictor could learn (branching, 0.85 ms on Qwen). */
    uint64_t outside_low = ~(uint64_t)low, outside_high = ~(uint64_t)high;
    uint8_t wide_allowed = wide ? 1 : 0;
    int outside = 0;
    Released released;
    let_go_for(&released, size);
    for (Py_ssize_t word = 0; word * 32 < size; word++) {
        uint32_t bits = 0;
        Py_ssize_t last = size - word * 32 < 32 ? size - word * 32 : 32;
        for (Py_ssize_t j = 0; j < last; j++) {
            Py_ssize_t t = word * 32 + j;
            uint32_t inside = (uint32_t)((first_char[t] > 0) & ((tail_low[t] & outside_low) == 0)
                                         & ((tail_high[t] & outside_high) == 0) & (wide_allowed | !tail_wide[t]));
            bits |= inside << j;
        }
        mask[word] = bits;
    }
    for (Py_ssize_t i = first_offsets[0]; i < first_offsets[256]; i++) {
        if (by_first_byte[i] < 0 || by_first_byte[i] >= size) {
            outside = 1;
            break;
        }
    }
    Py_ssize_t n = 0;
    for (int b = 0; b < 256 && !outside; b++) {
        rest_offsets[b] = n;
        for (int64_t i = first_offsets[b]; i < first_offsets[b + 1]; i++) {
            int64_t token = by_first_byte[i];
            rest[n] = token;
            n += !(mask[token >> 5] >> (token & 31) & 1);
        }
    }
    take_back(&released);
    if (outside) {
        PyErr_SetString(PyExc_IndexError, "tail_split: a token outside the tables");
        goto done;
    }
    rest_offsets[256] = n;
    result = PyLong_FromSsize_t(n);
done:
    release(buffers, 9);
    return result;
}

/* tail_pack(mask, by_first_byte, first_offsets, grouped, grouped_offsets,
 *           rest, rest_offsets, rest_skips, data, data_offsets, shared) -> bytes
 *
 * A tail set's rest (tail_split's ``mask``, ``rest`` and ``rest_offsets``,
 * with its resume points ``rest_skips``, int16) packed for the walk plans: rest
 * entry k's bytes from max(rest_skips[k], 1) to its end one after another
 * into ``data`` (uint8, room for them), entry k at
 * data[data_offsets[k]:data_offsets[k + 1]] (int32[n + 1]), and in
 * ``shared`` (uint8[n]) how many leading bytes it shares with entry k - 1
 * (common_prefixes' answer). Returns the bytes written. The spellings are
 * read from the grouped ones (``grouped``, entry i of by_first_byte at
 * grouped[grouped_offsets[i]:grouped_offsets[i + 1]]): the rest is
 * by_first_byte's tokens outside the mask, in its order, so one forward
 * pass finds each rest token's place there. Checked as it goes: a rest that
 * is not that, or bytes past ``data``, is an error.
 *
 * Github_medium o1's step 7 (a new loop set's first mask in a fresh fork,
 * MaskBench's worst step) packed its 42k-token rest of Qwen's 151k with
 * numpy and pack (the tokens' lengths and places in by_first_byte
 * gathered, their cumulative sum, the positions made int64), then
 * common_prefixes: ~2.6-2.8 ms and ~330 fresh pages in the fork; here
 * ~1.2 ms and 118 pages (0.35 ms warm). */
static PyObject *tail_pack(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 11, "tail_pack") < 0) {
        return NULL;
    }
    enum { MASK, BY_FIRST_BYTE, FIRST_OFFSETS, GROUPED, GROUPED_OFFSETS, REST, REST_OFFSETS, REST_SKIPS, DATA,
           DATA_OFFSETS, SHARED, ARRAYS };
    Buffer buffers[ARRAYS] = {{0}};
    static const char *names[ARRAYS] = {"mask", "by_first_byte", "first_offsets", "grouped", "grouped_offsets", "rest",
                                        "rest_offsets", "rest_skips", "data", "data_offsets", "shared"};
    static const Py_ssize_t items[ARRAYS] = {U32, 8, 8, U8, 8, 8, 8, 2, U8, 4, U8};
    static const int writable[ARRAYS] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1};
    PyObject *result = NULL;
    for (int i = 0; i < ARRAYS; i++) {
        if (take(args[i], &buffers[i], names[i], items[i], writable[i]) < 0) {
            goto done;
        }
    }
    const uint32_t *mask = buffers[MASK].view.buf;
    const int64_t *by_first_byte = buffers[BY_FIRST_BYTE].view.buf, *first_offsets = buffers[FIRST_OFFSETS].view.buf;
    const uint8_t *grouped = buffers[GROUPED].view.buf;
    const int64_t *grouped_offsets = buffers[GROUPED_OFFSETS].view.buf;
    const int64_t *rest = buffers[REST].view.buf, *rest_offsets = buffers[REST_OFFSETS].view.buf;
    const int16_t *rest_skips = buffers[REST_SKIPS].view.buf;
    uint8_t *data = buffers[DATA].view.buf, *shared = buffers[SHARED].view.buf;
    int32_t *data_offsets = buffers[DATA_OFFSETS].view.buf;
    Py_ssize_t count = buffers[BY_FIRST_BYTE].view.len / 8, total = buffers[GROUPED].view.len;
    Py_ssize_t n = buffers[REST].view.len / 8, room = buffers[DATA].view.len;
    uint64_t tokens = (uint64_t)(buffers[MASK].view.len / 4) * 32;  /* the mask's bits */
    if (tokens == 0) {
        PyErr_SetString(PyExc_ValueError, "tail_pack: an empty mask");
        goto done;
    }
    if (buffers[FIRST_OFFSETS].view.len != 257 * 8 || buffers[GROUPED_OFFSETS].view.len / 8 != count + 1
            || buffers[REST_OFFSETS].view.len != 257 * 8 || buffers[REST_SKIPS].view.len / 2 != n
            || buffers[DATA_OFFSETS].view.len / 4 != n + 1 || buffers[SHARED].view.len != n) {
        PyErr_SetString(PyExc_ValueError, "tail_pack: arrays of mismatched lengths");
        goto done;
    }
    for (int b = 0; b < 257; b++) {
        if (first_offsets[b] < 0 || first_offsets[b] > count || (b && first_offsets[b] < first_offsets[b - 1])
                || rest_offsets[b] < 0 || rest_offsets[b] > n || (b && rest_offsets[b] < rest_offsets[b - 1])) {
            PyErr_SetString(PyExc_ValueError, "tail_pack: offsets that are not offsets into by_first_byte and rest");
            goto done;
        }
    }
    if (rest_offsets[0] != 0 || rest_offsets[256] != n) {
        PyErr_SetString(PyExc_ValueError, "tail_pack: rest_offsets do not cover rest");
        goto done;
    }
    if (count > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "tail_pack: more than 2**31 spelled tokens");
        goto done;
    }
    const char *problem = NULL;
    Py_ssize_t filled = 0;
    Released released;
    let_go_for(&released, count);
    /* First each rest entry's place in by_first_byte, into data_offsets[k + 1]
     * (free until the entry is packed), from the mask: no branch on whether
     * a token is in the rest (about one in three, at no pattern a predictor
     * learns) and no step waiting on the one before, as comparing with
     * rest[k] did (the whole call on o1's rest, warm: 0.86 -> 0.47 ms).
     * Past a group's rest, the writes go to data_offsets[0]; the second
     * pass checks each place's token against rest. */
    for (int b = 0; b < 256; b++) {
        int64_t k = rest_offsets[b], last = rest_offsets[b + 1];
        for (int64_t i = first_offsets[b]; i < first_offsets[b + 1]; i++) {
            uint64_t token = (uint64_t)by_first_byte[i];
            token = token < tokens ? token : 0;  /* one outside the mask is caught below */
            data_offsets[k < last ? k + 1 : 0] = (int32_t)i;
            k += !(mask[token >> 5] >> (token & 31) & 1);
        }
        if (k != last) {
            problem = "tail_pack: rest is not by_first_byte's tokens in its order";
            break;
        }
    }
    data_offsets[0] = 0;
    /* entry k - 1's bytes, and their length, read from the grouped
     * spellings: compared in data, just written, a load of eight bytes
     * over two stores waited for them (a third of the pass, warm) */
    const uint8_t *previous = grouped;
    Py_ssize_t previous_length = 0;
    for (Py_ssize_t k = 0; k < n && problem == NULL; k++) {
        int64_t i = data_offsets[k + 1];
        if (by_first_byte[i] != rest[k]) {
            problem = "tail_pack: rest is not by_first_byte's tokens in its order";
            break;
        }
        int64_t from = grouped_offsets[i], to = grouped_offsets[i + 1];
        int64_t at = from + (rest_skips[k] > 1 ? rest_skips[k] : 1);
        if (from < 0 || to > total || at > to) {
            problem = "tail_pack: a rest token's bytes outside the grouped spellings";
            break;
        }
        Py_ssize_t length = (Py_ssize_t)(to - at);
        if (length > room - filled || filled + length > INT32_MAX) {
            problem = "tail_pack: more bytes than data holds";
            break;
        }
        uint8_t *here = data + filled;
        if (length <= 16 && total - at >= 16 && room - filled >= 16) {
            memcpy(here, grouped + at, 16);  /* a fixed copy: the bytes past the entry are the next one's room */
        } else {
            memcpy(here, grouped + at, (size_t)length);
        }
        Py_ssize_t most = previous_length < length ? previous_length : length;
        shared[k] = (uint8_t)common_length(previous, grouped + at, most < 255 ? most : 255, grouped + total);
        previous = grouped + at;
        previous_length = length;
        filled += length;
        data_offsets[k + 1] = (int32_t)filled;
    }
    take_back(&released);
    if (problem != NULL) {
        PyErr_SetString(PyExc_ValueError, problem);
        goto done;
    }
    result = PyLong_FromSsize_t(filled);
done:
    release(buffers, ARRAYS);
    return result;
}

/* loop_rest(mask, by_first_byte, first_offsets, grouped, grouped_offsets,
 *           rest, rest_offsets, rest_skips, starts, most)
 *     -> (tokens, positions, skipped, first_bytes, data, data_offsets)
 *
 * A loop row's rest (tokendfa.lazy.tables._LoopRest) where the tail set's
 * rest is not packed whole (past _PLAN_MAX_TOKENS: a narrow loop's): the
 * entries of tail_split's ``rest`` starting with the bytes ``starts``
 * (int64, ascending), in rest order, as bytes objects: their tokens and
 * positions (int64: max(rest_skips, 1)), whether they have a resume point
 * (bool: rest_skips > 0), their first bytes (uint8), and, where there are
 * at most ``most`` of them, their bytes from their positions packed one
 * after another (``data``, entry k at data[o[k]:o[k + 1]], ``data_offsets``
 * int32; both None past ``most``). The bytes are read from the grouped
 * spellings (tail_pack's way: each entry's place in by_first_byte found by
 * one forward pass over its group and the mask), where numpy's gathers
 * and a pack by token id took ~2.9 ms of WashingtonPost wp_76's step 24
 * (MaskBench's worst lazy step on 440eebc: 29.6k entries of a 74k rest,
 * in a fresh fork), ~1.4 ms so (279 page faults, not 512); Github_easy
 * o21855's step 4 (1.5k entries): ~1.0 -> ~0.35 ms. */
static PyObject *loop_rest(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 10, "loop_rest") < 0) {
        return NULL;
    }
    enum { MASK, BY_FIRST_BYTE, FIRST_OFFSETS, GROUPED, GROUPED_OFFSETS, REST, REST_OFFSETS, REST_SKIPS, STARTS,
           ARRAYS };
    Buffer buffers[ARRAYS] = {{0}};
    static const char *names[ARRAYS] = {"mask", "by_first_byte", "first_offsets", "grouped", "grouped_offsets", "rest",
                                        "rest_offsets", "rest_skips", "starts"};
    static const Py_ssize_t items[ARRAYS] = {U32, 8, 8, U8, 8, 8, 8, 2, 8};
    PyObject *result = NULL, *parts[6] = {NULL};
    int32_t *places = NULL;
    Py_ssize_t most = PyLong_AsSsize_t(args[9]);
    if (most == -1 && PyErr_Occurred()) {
        return NULL;
    }
    for (int i = 0; i < ARRAYS; i++) {
        if (take(args[i], &buffers[i], names[i], items[i], 0) < 0) {
            goto done;
        }
    }
    const uint32_t *mask = buffers[MASK].view.buf;
    const int64_t *by_first_byte = buffers[BY_FIRST_BYTE].view.buf, *first_offsets = buffers[FIRST_OFFSETS].view.buf;
    const uint8_t *grouped = buffers[GROUPED].view.buf;
    const int64_t *grouped_offsets = buffers[GROUPED_OFFSETS].view.buf;
    const int64_t *rest = buffers[REST].view.buf, *rest_offsets = buffers[REST_OFFSETS].view.buf;
    const int16_t *rest_skips = buffers[REST_SKIPS].view.buf;
    const int64_t *starts = buffers[STARTS].view.buf;
    Py_ssize_t count = buffers[BY_FIRST_BYTE].view.len / 8, total = buffers[GROUPED].view.len;
    Py_ssize_t n = buffers[REST].view.len / 8, groups = buffers[STARTS].view.len / 8;
    uint64_t tokens_in_mask = (uint64_t)(buffers[MASK].view.len / 4) * 32;
    if (buffers[FIRST_OFFSETS].view.len != 257 * 8 || buffers[GROUPED_OFFSETS].view.len / 8 != count + 1
            || buffers[REST_OFFSETS].view.len != 257 * 8 || buffers[REST_SKIPS].view.len / 2 != n) {
        PyErr_SetString(PyExc_ValueError, "loop_rest: arrays of mismatched lengths");
        goto done;
    }
    for (int b = 0; b < 257; b++) {
        if (first_offsets[b] < 0 || first_offsets[b] > count || (b && first_offsets[b] < first_offsets[b - 1])
                || rest_offsets[b] < 0 || rest_offsets[b] > n || (b && rest_offsets[b] < rest_offsets[b - 1])) {
            PyErr_SetString(PyExc_ValueError, "loop_rest: offsets that are not offsets into by_first_byte and rest");
            goto done;
        }
    }
    Py_ssize_t picked = 0;
    for (Py_ssize_t g = 0; g < groups; g++) {
        if (starts[g] < 0 || starts[g] > 255 || (g && starts[g] <= starts[g - 1])) {
            PyErr_SetString(PyExc_ValueError, "loop_rest: starts are not ascending bytes");
            goto done;
        }
        picked += rest_offsets[starts[g] + 1] - rest_offsets[starts[g]];
    }
    int pack = picked <= most;
    static const Py_ssize_t widths[4] = {8, 8, 1, 1};
    if (make_parts(parts, 4, picked, widths) < 0) {
        goto done;
    }
    int64_t *tokens = (int64_t *)PyBytes_AS_STRING(parts[0]), *positions = (int64_t *)PyBytes_AS_STRING(parts[1]);
    uint8_t *skipped = (uint8_t *)PyBytes_AS_STRING(parts[2]), *first_bytes = (uint8_t *)PyBytes_AS_STRING(parts[3]);
    if (pack) {
        if (picked > INT32_MAX - 1) {
            PyErr_SetString(PyExc_ValueError, "loop_rest: more entries than int32 offsets index");
            goto done;
        }
        places = malloc((size_t)(picked ? picked : 1) * sizeof(int32_t));
        if (places == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    const char *problem = NULL;
    int64_t bytes = 0;
    Released released;
    let_go_for(&released, picked);
    Py_ssize_t k = 0;
    for (Py_ssize_t g = 0; g < groups && problem == NULL; g++) {
        int b = (int)starts[g];
        int64_t from = rest_offsets[b], last = rest_offsets[b + 1], j = k;
        for (int64_t r = from; r < last; r++, k++) {
            int16_t skip = rest_skips[r];
            tokens[k] = rest[r];
            positions[k] = skip > 1 ? skip : 1;
            skipped[k] = skip > 0;
            first_bytes[k] = (uint8_t)b;
        }
        if (!pack) {
            continue;
        }
        /* each entry's place in by_first_byte: its group's tokens outside
         * the mask, in order (tail_pack's pass, over this group alone) */
        for (int64_t i = first_offsets[b]; i < first_offsets[b + 1] && j < k; i++) {
            uint64_t token = (uint64_t)by_first_byte[i];
            if (token >= tokens_in_mask) {
                problem = "loop_rest: a token outside the mask";
                break;
            }
            if (!(mask[token >> 5] >> (token & 31) & 1)) {
                if ((int64_t)token != tokens[j]) {
                    problem = "loop_rest: rest is not by_first_byte's tokens outside the mask, in its order";
                    break;
                }
                int64_t at = grouped_offsets[i] + positions[j], to = grouped_offsets[i + 1];
                if (grouped_offsets[i] < 0 || to > total || at > to) {
                    problem = "loop_rest: a rest token's bytes outside the grouped spellings";
                    break;
                }
                places[j++] = (int32_t)(i - first_offsets[b]);
                bytes += to - at;
            }
        }
        if (problem == NULL && j != k) {
            problem = "loop_rest: rest is not by_first_byte's tokens outside the mask, in its order";
        }
    }
    take_back(&released);
    if (problem != NULL) {
        PyErr_SetString(PyExc_ValueError, problem);
        goto done;
    }
    if (!pack) {
        parts[4] = Py_NewRef(Py_None);
        parts[5] = Py_NewRef(Py_None);
    } else {
        if (bytes > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "loop_rest: more packed bytes than int32 offsets index");
            goto done;
        }
        parts[4] = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)bytes);
        parts[5] = PyBytes_FromStringAndSize(NULL, (picked + 1) * (Py_ssize_t)sizeof(int32_t));
        if (parts[4] == NULL || parts[5] == NULL) {
            goto done;
        }
        uint8_t *data = (uint8_t *)PyBytes_AS_STRING(parts[4]);
        int32_t *offsets = (int32_t *)PyBytes_AS_STRING(parts[5]);
        let_go_for(&released, picked);
        int64_t filled = 0;
        k = 0;
        offsets[0] = 0;
        for (Py_ssize_t g = 0; g < groups; g++) {
            int b = (int)starts[g];
            for (int64_t r = rest_offsets[b]; r < rest_offsets[b + 1]; r++, k++) {
                int64_t i = first_offsets[b] + places[k];
                int64_t at = grouped_offsets[i] + positions[k], length = grouped_offsets[i + 1] - at;
                memcpy(data + filled, grouped + at, (size_t)length);
                filled += length;
                offsets[k + 1] = (int32_t)filled;
            }
        }
        take_back(&released);
    }
    result = PyTuple_New(6);
    if (result != NULL) {
        for (int i = 0; i < 6; i++) {
            PyTuple_SET_ITEM(result, i, parts[i]);
            parts[i] = NULL;
        }
    }
done:
    free(places);
    for (int i = 0; i < 6; i++) {
        Py_XDECREF(parts[i]);
    }
    release(buffers, ARRAYS);
    return result;
}

/* The tokens of ``groups`` (int64 group numbers) one group after another,
 * group g being items[offsets[g]:offsets[g + 1]] (items and offsets int64):
 * written to ``out`` (int64, or int32 where ``narrow``: a plan's tokens) from ``at``. Returns the next
 * free place, or -1 when an item is outside int32 or a group or its offsets fall outside (nothing read past a buffer). The GIL
 * may be let go: only the buffers are read. */
static Py_ssize_t gather_groups(const int64_t *items, Py_ssize_t num_items, const int64_t *offsets,
                                Py_ssize_t num_groups, const int64_t *groups, Py_ssize_t asked,
                                void *out, int narrow, Py_ssize_t at, Py_ssize_t room) {
    for (Py_ssize_t i = 0; i < asked; i++) {
        int64_t g = groups[i];
        if (g < 0 || g >= num_groups) {
            return -1;
        }
        int64_t lo = offsets[g], hi = offsets[g + 1];
        if (lo < 0 || lo > hi || hi > num_items || hi - lo > room - at) {
            return -1;
        }
        if (!narrow) {
            memcpy((int64_t *)out + at, items + lo, (size_t)(hi - lo) * sizeof(int64_t));
            at += (Py_ssize_t)(hi - lo);
            continue;
        }
        for (int64_t k = lo; k < hi; k++) {
            if (items[k] < 0 || items[k] > INT32_MAX) {
                return -1;
            }
            ((int32_t *)out)[at++] = (int32_t)items[k];
        }
    }
    return at;
}

/* How many items ``groups`` hold (see gather_groups); -1 when a group or
 * its offsets fall outside. */
static Py_ssize_t groups_size(Py_ssize_t num_items, const int64_t *offsets, Py_ssize_t num_groups,
                              const int64_t *groups, Py_ssize_t asked) {
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < asked; i++) {
        int64_t g = groups[i];
        if (g < 0 || g >= num_groups) {
            return -1;
        }
        int64_t lo = offsets[g], hi = offsets[g + 1];
        if (lo < 0 || lo > hi || hi > num_items) {
            return -1;
        }
        total += (Py_ssize_t)(hi - lo);
    }
    return total;
}

/* grouped(items, offsets, groups) -> bytearray: the int64 items of
 * ``groups`` (int64), group g being items[offsets[g]:offsets[g + 1]], one
 * group after another (tokendfa.lazy.kernels._grouped: numpy's cumsum,
 * repeat and arange over a plan's ~5k tokens were ~6% of the cold steps of
 * 0.25-1.5 ms on the MaskBench sample). */
static PyObject *grouped(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 3, "grouped") < 0) {
        return NULL;
    }
    Buffer buffers[3] = {{0}};
    static const char *names[3] = {"items", "offsets", "groups"};
    PyObject *result = NULL;
    for (int i = 0; i < 3; i++) {
        if (take(args[i], &buffers[i], names[i], 8, 0) < 0) {
            goto done;
        }
    }
    const int64_t *items = buffers[0].view.buf, *offsets = buffers[1].view.buf, *groups = buffers[2].view.buf;
    Py_ssize_t num_items = buffers[0].view.len / 8, num_groups = buffers[1].view.len / 8 - 1;
    Py_ssize_t asked = buffers[2].view.len / 8;
    Py_ssize_t total = groups_size(num_items, offsets, num_groups, groups, asked);
    if (total < 0) {
        PyErr_SetString(PyExc_IndexError, "grouped: a group outside the offsets");
        goto done;
    }
    result = PyByteArray_FromStringAndSize(NULL, total * 8);
    if (result == NULL) {
        goto done;
    }
    Released released;
    let_go_for(&released, total);
    Py_ssize_t filled = gather_groups(items, num_items, offsets, num_groups, groups, asked,
                                      (int64_t *)PyByteArray_AS_STRING(result), 0, 0, total);
    take_back(&released);
    if (filled != total) {  /* the buffers changed under us: not met with numpy arrays */
        Py_CLEAR(result);
        PyErr_SetString(PyExc_IndexError, "grouped: a group outside the offsets");
    }
done:
    release(buffers, 3);
    return result;
}

/* walk_plan(by_first_byte, first_offsets, groups, rest_tokens, rest_first_bytes,
 *           rest_positions, rest_skipped) -> (tokens, first_bytes, positions, skipped)
 *
 * The arrays of a walk plan (tokendfa.lazy.plans._WalkPlan) as bytes
 * (tokens and positions int32, first bytes uint8, skipped bool: 10 bytes a
 * token, not 25, in a fork's first writes and in the plan caches): the
 * tokens of the first-byte ``groups`` (int64, each 0-255; by_first_byte and
 * its 257 first_offsets, int64), each at position 1, not skipped, its first
 * byte its group's, then the ``rest_*`` ones (int64, uint8, int64, bool) as
 * given. numpy's ~15 calls for these were ~70 us of a cold row whose plan
 * was not cached (every plan is new in a fresh process: MaskBench's steps),
 * and gathering each token's first byte from the vocabulary's first column
 * read a cache line a token. */
static PyObject *walk_plan(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 7, "walk_plan") < 0) {
        return NULL;
    }
    Buffer buffers[7] = {{0}};
    static const char *names[7] = {"by_first_byte", "first_offsets", "groups", "rest_tokens",
                                   "rest_first_bytes", "rest_positions", "rest_skipped"};
    static const Py_ssize_t items_size[7] = {8, 8, 8, 8, U8, 8, FLAGS};
    PyObject *parts[4] = {NULL, NULL, NULL, NULL}, *result = NULL;
    for (int i = 0; i < 7; i++) {
        if (take(args[i], &buffers[i], names[i], items_size[i], 0) < 0) {
            goto done;
        }
    }
    const int64_t *by_first_byte = buffers[0].view.buf, *first_offsets = buffers[1].view.buf;
    const int64_t *groups = buffers[2].view.buf, *rest_tokens = buffers[3].view.buf;
    const uint8_t *rest_first_bytes = buffers[4].view.buf;
    const int64_t *rest_positions = buffers[5].view.buf;
    const uint8_t *rest_skipped = buffers[6].view.buf;
    Py_ssize_t num_items = buffers[0].view.len / 8, asked = buffers[2].view.len / 8, rest = buffers[3].view.len / 8;
    if (buffers[1].view.len != 257 * 8 || buffers[4].view.len != rest || buffers[5].view.len / 8 != rest
            || buffers[6].view.len != rest) {
        PyErr_SetString(PyExc_ValueError, "walk_plan: arrays of mismatched lengths");
        goto done;
    }
    Py_ssize_t head = groups_size(num_items, first_offsets, 256, groups, asked);
    if (head < 0) {
        PyErr_SetString(PyExc_IndexError, "walk_plan: a group outside the offsets");
        goto done;
    }
    Py_ssize_t total = head + rest;
    for (Py_ssize_t i = 0; i < rest; i++) {
        if (rest_tokens[i] < 0 || rest_tokens[i] > INT32_MAX || rest_positions[i] < 0 || rest_positions[i] > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "walk_plan: a rest token or position outside int32");
            goto done;
        }
    }
    static const Py_ssize_t widths[4] = {4, 1, 4, 1};
    if (make_parts(parts, 4, total, widths) < 0) {
        goto done;
    }
    int32_t *tokens = (int32_t *)PyBytes_AS_STRING(parts[0]);
    uint8_t *first_bytes = (uint8_t *)PyBytes_AS_STRING(parts[1]);
    int32_t *positions = (int32_t *)PyBytes_AS_STRING(parts[2]);
    uint8_t *skipped = (uint8_t *)PyBytes_AS_STRING(parts[3]);
    Released released;
    let_go_for(&released, total);
    /* groups_size checked every group's offsets: the copies stay inside */
    Py_ssize_t at = 0;
    int wide = 0;  /* a token outside int32 met */
    for (Py_ssize_t i = 0; i < asked; i++) {
        int64_t lo = first_offsets[groups[i]], hi = first_offsets[groups[i] + 1];
        for (int64_t k = 0; k < hi - lo; k++) {
            wide |= by_first_byte[lo + k] < 0 || by_first_byte[lo + k] > INT32_MAX;
            tokens[at + k] = (int32_t)by_first_byte[lo + k];
            first_bytes[at + k] = (uint8_t)groups[i];
            positions[at + k] = 1;
            skipped[at + k] = 0;
        }
        at += (Py_ssize_t)(hi - lo);
    }
    if (rest) {
        for (Py_ssize_t i = 0; i < rest; i++) {
            tokens[head + i] = (int32_t)rest_tokens[i];
            positions[head + i] = (int32_t)rest_positions[i];
            first_bytes[head + i] = rest_first_bytes[i];
            skipped[head + i] = rest_skipped[i] != 0;
        }
    }
    take_back(&released);
    if (wide) {
        PyErr_SetString(PyExc_ValueError, "walk_plan: a token outside int32");
        goto done;
    }
    result = PyTuple_Pack(4, parts[0], parts[1], parts[2], parts[3]);
done:
    for (int i = 0; i < 4; i++) {
        Py_XDECREF(parts[i]);
    }
    release(buffers, 7);
    return result;
}

/* chain_plan(by_first_byte, first_offsets, first_column, others, irregular,
 *            irregular_offsets, starting, partial, partial_offsets, chars,
 *            full_by_chars, full_offsets, ascii, length, dies)
 *     -> (tokens, links, first_bytes, positions)
 *
 * The arrays of a chain plan (tokendfa.lazy.plans._ChainPlan, which says
 * what each part is) as bytes (tokens, links and positions int32, first
 * bytes uint8), from
 * the vocabulary's tokens by first
 * byte (by_first_byte, its 257 first_offsets; first_column: each token's
 * first byte, uint8[V]) and a class's runs (tokendfa.lazy.tables._ClassRuns:
 * irregular and its 257 offsets, partial and its offsets, chars and ascii
 * int16[V] or int32[V] (both the same: the compiled class runs make int16,
 * numpy's int32), full_by_chars and its offsets; int64 otherwise): the tokens of
 * the first-byte groups ``others`` and the irregular ones of ``starting``
 * (int64 bytes), walked from their first byte; the partial ones that stop
 * within ``length`` characters, from the link of their run; the longer
 * ones, from the chain's last link where their ASCII run goes past it,
 * else from their first byte; ``dies`` 1 (True) drops the first kind (every
 * ASCII byte of the class dies after the last link), 2 drops both (every
 * character of the class does), 0 (False) neither. ~20 numpy calls, ~150 us
 * a chain plan not cached yet. */
static PyObject *chain_plan(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 15, "chain_plan") < 0) {
        return NULL;
    }
    Buffer buffers[13] = {{0}};
    static const char *names[13] = {"by_first_byte", "first_offsets", "first_column", "others", "irregular",
                                    "irregular_offsets", "starting", "partial", "partial_offsets", "chars",
                                    "full_by_chars", "full_offsets", "ascii"};
    /* 0: chars and ascii, int16 or int32 (checked below) */
    static const Py_ssize_t items_size[13] = {8, 8, U8, 8, 8, 8, 8, 8, 8, 0, 8, 8, 0};
    PyObject *parts[4] = {NULL, NULL, NULL, NULL}, *result = NULL;
    Py_ssize_t length = PyLong_AsSsize_t(args[13]);
    long dies = PyLong_AsLong(args[14]);
    if ((length == -1 || dies == -1) && PyErr_Occurred()) {
        return NULL;
    }
    if (dies < 0 || dies > 2) {
        PyErr_SetString(PyExc_ValueError, "chain_plan: dies is 0, 1 or 2");
        return NULL;
    }
    for (int i = 0; i < 13; i++) {
        /* chars: int16 or int32, whichever it is (2 bytes tried first); ascii as chars */
        Py_ssize_t item = items_size[i] ? items_size[i] : i == 12 ? buffers[9].view.itemsize : 2;
        if (i == 9 && take(args[i], &buffers[i], names[i], 2, 0) < 0) {
            PyErr_Clear();
            release(buffers + 9, 1);
            item = 4;
        } else if (i == 9) {
            continue;
        }
        if (take(args[i], &buffers[i], names[i], item, 0) < 0) {
            goto done;
        }
    }
    const int64_t *by_first_byte = buffers[0].view.buf, *first_offsets = buffers[1].view.buf;
    const uint8_t *first_column = buffers[2].view.buf;
    const int64_t *others = buffers[3].view.buf, *irregular = buffers[4].view.buf;
    const int64_t *irregular_offsets = buffers[5].view.buf, *starting = buffers[6].view.buf;
    const int64_t *partial = buffers[7].view.buf, *partial_offsets = buffers[8].view.buf;
    const void *chars = buffers[9].view.buf, *ascii = buffers[12].view.buf;
    const int narrow = buffers[9].view.itemsize == 2;
#define RUN_AT(array, token) (narrow ? (int64_t)((const int16_t *)(array))[token] : (int64_t)((const int32_t *)(array))[token])
    const int64_t *full_by_chars = buffers[10].view.buf, *full_offsets = buffers[11].view.buf;
    Py_ssize_t vocab_size = buffers[2].view.len, num_partial = buffers[7].view.len / 8;
    Py_ssize_t num_partial_offsets = buffers[8].view.len / 8, num_full = buffers[10].view.len / 8;
    Py_ssize_t num_full_offsets = buffers[11].view.len / 8;
    if (buffers[1].view.len != 257 * 8 || buffers[5].view.len != 257 * 8 || num_partial_offsets < 257
            || num_full_offsets < 1 || buffers[9].view.len / buffers[9].view.itemsize != vocab_size
            || buffers[12].view.len / buffers[12].view.itemsize != vocab_size
            || length < 0 || length > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "chain_plan: arrays of mismatched lengths");
        goto done;
    }
    Py_ssize_t head = groups_size(buffers[0].view.len / 8, first_offsets, 256, others, buffers[3].view.len / 8);
    Py_ssize_t inner = groups_size(buffers[4].view.len / 8, irregular_offsets, 256, starting, buffers[6].view.len / 8);
    /* the partial ones that stop within the chain, and where the longer ones begin */
    Py_ssize_t cut = 256 * (length + 1) < num_partial_offsets - 1 ? 256 * (length + 1) : num_partial_offsets - 1;
    int64_t partial_lo = partial_offsets[256], partial_hi = partial_offsets[cut];
    Py_ssize_t full_cut = length + 1 < num_full_offsets - 1 ? length + 1 : num_full_offsets - 1;
    int64_t full_lo = full_offsets[full_cut];
    if (head < 0 || inner < 0 || partial_lo < 0 || partial_lo > partial_hi || partial_hi > num_partial
            || full_lo < 0 || full_lo > num_full) {
        PyErr_SetString(PyExc_IndexError, "chain_plan: a group outside the offsets");
        goto done;
    }
    /* the longer tokens: full_by_chars[full_lo:] then partial[partial_hi:]
     * (none read when every one dies: ~140k of Qwen's at a JSON string's last character) */
    Py_ssize_t longer = dies == 2 ? 0 : (num_full - full_lo) + (num_partial - partial_hi), kept = 0;
    for (Py_ssize_t k = 0; k < longer; k++) {
        int64_t token = k < num_full - full_lo ? full_by_chars[full_lo + k] : partial[partial_hi + k - (num_full - full_lo)];
        if (token < 0 || token >= vocab_size) {
            PyErr_SetString(PyExc_IndexError, "chain_plan: a token outside the tables");
            goto done;
        }
        kept += !dies || (dies == 1 && RUN_AT(ascii, token) <= length);
    }
    Py_ssize_t total = head + inner + (Py_ssize_t)(partial_hi - partial_lo) + kept;
    if (vocab_size > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "chain_plan: tokens outside int32");
        goto done;
    }
    static const Py_ssize_t widths[4] = {4, 4, 1, 4};
    if (make_parts(parts, 4, total, widths) < 0) {
        goto done;
    }
    int32_t *tokens = (int32_t *)PyBytes_AS_STRING(parts[0]);
    int32_t *links = (int32_t *)PyBytes_AS_STRING(parts[1]);
    uint8_t *first_bytes = (uint8_t *)PyBytes_AS_STRING(parts[2]);
    int32_t *positions = (int32_t *)PyBytes_AS_STRING(parts[3]);
    Py_ssize_t at = gather_groups(by_first_byte, buffers[0].view.len / 8, first_offsets, 256, others,
                                  buffers[3].view.len / 8, tokens, 1, 0, total);
    at = at < 0 ? -1 : gather_groups(irregular, buffers[4].view.len / 8, irregular_offsets, 256, starting,
                                     buffers[6].view.len / 8, tokens, 1, at, total);
    if (at != head + inner) {
        PyErr_SetString(PyExc_IndexError, "chain_plan: a group outside the offsets");
        goto done;
    }
    for (Py_ssize_t i = 0; i < at; i++) {
        links[i] = -1;
        positions[i] = 1;
    }
    for (int64_t k = partial_lo; k < partial_hi; k++, at++) {
        int64_t token = partial[k];
        if (token < 0 || token >= vocab_size) {
            PyErr_SetString(PyExc_IndexError, "chain_plan: a token outside the tables");
            goto done;
        }
        tokens[at] = (int32_t)token;
        links[at] = positions[at] = (int32_t)RUN_AT(chars, token);
    }
    for (Py_ssize_t k = 0; k < longer; k++) {
        int64_t token = k < num_full - full_lo ? full_by_chars[full_lo + k] : partial[partial_hi + k - (num_full - full_lo)];
        int regular = RUN_AT(ascii, token) > length;
        if ((dies == 1 && regular) || dies == 2) {
            continue;
        }
        tokens[at] = (int32_t)token;
        links[at] = regular ? (int32_t)length : -1;
        positions[at++] = regular ? (int32_t)length : 1;
    }
    for (Py_ssize_t i = 0; i < total; i++) {
        if (tokens[i] < 0 || tokens[i] >= vocab_size) {
            PyErr_SetString(PyExc_IndexError, "chain_plan: a token outside the tables");
            goto done;
        }
        first_bytes[i] = first_column[tokens[i]];
    }
    result = PyTuple_Pack(4, parts[0], parts[1], parts[2], parts[3]);
#undef RUN_AT
done:
    for (int i = 0; i < 4; i++) {
        Py_XDECREF(parts[i]);
    }
    release(buffers, 13);
    return result;
}

/* pack_plan(grouped, grouped_offsets, first_offsets, groups, rest_data,
 *           rest_offsets) -> (data, offsets)
 *
 * A walk plan's packed bytes (tokendfa.lazy.plans._PackedBytes; data uint8
 * and offsets int32[k + 1] as bytes), made with the plan: the tokens of
 * the first-byte ``groups`` (int64) from their second byte, read from
 * ``grouped`` (uint8: the spelled tokens' bytes in by_first_byte order,
 * entry j at grouped[grouped_offsets[j]:grouped_offsets[j + 1]]; the 257
 * first_offsets index it by first byte), then the loop's rest, packed
 * already (rest_data uint8, rest_offsets int32 from 0). Packing at the
 * first walk read every token's offsets and bytes by id, a cache miss or
 * two a token: ~60 us of a new ~4.6k-token JSON string plan's first walk
 * (112 us against 49 packed, caches flushed; qwen2.5). */
static PyObject *pack_plan(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 6, "pack_plan") < 0) {
        return NULL;
    }
    Buffer buffers[6] = {{0}};
    static const char *names[6] = {"grouped", "grouped_offsets", "first_offsets", "groups", "rest_data",
                                   "rest_offsets"};
    static const Py_ssize_t items_size[6] = {U8, 8, 8, 8, U8, 4};
    PyObject *data = NULL, *offsets_object = NULL, *result = NULL;
    for (int i = 0; i < 6; i++) {
        if (take(args[i], &buffers[i], names[i], items_size[i], 0) < 0) {
            goto done;
        }
    }
    const uint8_t *grouped = buffers[0].view.buf, *rest_data = buffers[4].view.buf;
    const int64_t *grouped_offsets = buffers[1].view.buf, *first_offsets = buffers[2].view.buf;
    const int64_t *groups = buffers[3].view.buf;
    const int32_t *rest_offsets = buffers[5].view.buf;
    Py_ssize_t num_grouped = buffers[1].view.len / 8 - 1, grouped_bytes = buffers[0].view.len;
    Py_ssize_t asked = buffers[3].view.len / 8, rest = buffers[5].view.len / 4 - 1;
    if (num_grouped < 0 || buffers[2].view.len != 257 * 8 || rest < 0) {
        PyErr_SetString(PyExc_ValueError, "pack_plan: arrays of mismatched lengths");
        goto done;
    }
    Py_ssize_t head = groups_size(num_grouped, first_offsets, 256, groups, asked);
    if (head < 0) {
        PyErr_SetString(PyExc_IndexError, "pack_plan: a group outside the offsets");
        goto done;
    }
    offsets_object = PyBytes_FromStringAndSize(NULL, (head + rest + 1) * 4);
    if (offsets_object == NULL) {
        goto done;
    }
    int32_t *offsets = (int32_t *)PyBytes_AS_STRING(offsets_object);
    const char *problem = NULL;
    Py_ssize_t at = 0;
    offsets[0] = 0;
    for (Py_ssize_t i = 0; i < asked && problem == NULL; i++) {
        for (int64_t j = first_offsets[groups[i]]; j < first_offsets[groups[i] + 1]; j++, at++) {
            int64_t lo = grouped_offsets[j], hi = grouped_offsets[j + 1];
            if (lo < 0 || lo >= hi || hi > grouped_bytes) {  /* a spelled token has a first byte */
                problem = "pack_plan: an entry outside the grouped bytes";
                break;
            }
            if (offsets[at] + (hi - lo - 1) > INT32_MAX) {
                problem = "pack_plan: more packed bytes than int32 offsets index";
                break;
            }
            offsets[at + 1] = (int32_t)(offsets[at] + (hi - lo - 1));
        }
    }
    int64_t head_bytes = offsets[at];
    if (problem == NULL && (rest_offsets[0] != 0 || rest_offsets[rest] > buffers[4].view.len)) {
        problem = "pack_plan: rest offsets outside the rest's bytes";
    }
    for (Py_ssize_t i = 0; i < rest && problem == NULL; i++, at++) {
        if (rest_offsets[i] > rest_offsets[i + 1] || head_bytes + rest_offsets[i + 1] > INT32_MAX) {
            problem = "pack_plan: rest offsets outside the rest's bytes";
            break;
        }
        offsets[at + 1] = (int32_t)(head_bytes + rest_offsets[i + 1]);
    }
    if (problem != NULL) {
        PyErr_SetString(PyExc_IndexError, problem);
        goto done;
    }
    data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)offsets[at]);
    if (data == NULL) {
        goto done;
    }
    uint8_t *packed = (uint8_t *)PyBytes_AS_STRING(data);
    Released released;
    let_go_for(&released, at);
    /* every range was checked above */
    at = 0;
    for (Py_ssize_t i = 0; i < asked; i++) {
        int64_t lo = first_offsets[groups[i]], hi = first_offsets[groups[i] + 1];
        /* each token's bytes but its first: the reads go forward through the group's stretch */
        for (int64_t j = lo; j < hi; j++, at++) {
            memcpy(packed + offsets[at], grouped + grouped_offsets[j] + 1, (size_t)(offsets[at + 1] - offsets[at]));
        }
    }
    memcpy(packed + head_bytes, rest_data, (size_t)rest_offsets[rest]);
    take_back(&released);
    result = PyTuple_Pack(2, data, offsets_object);
done:
    Py_XDECREF(data);
    Py_XDECREF(offsets_object);
    release(buffers, 6);
    return result;
}

static int compare_int32(const void *left, const void *right) {
    int32_t a = *(const int32_t *)left, b = *(const int32_t *)right;
    return (a > b) - (a < b);
}

/* mask_fingerprint(mask, num_words): a 64-bit fingerprint of a finished
 * mask, by which the lazy index finds the masks it keeps that may equal a
 * new one (then compared bytewise: equal masks are shared exactly). Python's
 * hash of the mask's bytes (SipHash) cost ~5.4 us a cold row on qwen2.5's
 * 18,960 bytes; this sum of independent 32x32-bit products (NH, keys made
 * from the pair's position) vectorises and is computed without the GIL.
 * Pairs of words (w[2j], w[2j+1], 0 past the end):
 *   h = sum_j ((w[2j] + j*K1) mod 2^32) * ((w[2j+1] + j*K2 + K3) mod 2^32) mod 2^64,
 * then h ^ num_words through murmur3's 64-bit finaliser. The twin is
 * tokendfa.lazy.kernels._mask_fingerprint. */
#define PRINT_K1 0x9E3779B9u
#define PRINT_K2 0x85EBCA6Bu
#define PRINT_K3 0x68E31DA4u
static uint64_t mask_fingerprint(const uint32_t *mask, Py_ssize_t num_words) {
    uint64_t h = 0;
    Py_ssize_t pairs = num_words / 2;
    uint32_t k1 = 0, k2 = PRINT_K3;  /* j * K1, j * K2 + K3 (mod 2^32), stepped: SSE2 has no 32-bit vector multiply */
    for (Py_ssize_t j = 0; j < pairs; j++, k1 += PRINT_K1, k2 += PRINT_K2) {
        h += (uint64_t)(mask[2 * j] + k1) * (mask[2 * j + 1] + k2);
    }
    if (num_words & 1) {
        uint32_t a = mask[num_words - 1] + (uint32_t)pairs * PRINT_K1, b = (uint32_t)pairs * PRINT_K2 + PRINT_K3;
        h += (uint64_t)a * b;
    }
    h ^= (uint64_t)num_words;
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 33;
    return h;
}

/* finish_arrays in three parts, so that walk_row and walk_span compute the
 * row inside their walk's last section without the GIL (walk_finished):
 * finish_begin allocates (the GIL held), finish_compute fills (plain C over
 * the buffers: the GIL held or not), finish_end makes the result or raises
 * (the GIL held). */
typedef struct {
    PyObject *mask_object;
    int32_t *found;
    uint8_t *marks;
    Py_ssize_t distinct;
    uint64_t fingerprint;
    const char *problem;  /* "" out of memory, else an IndexError's message */
} Finish;

static int finish_begin(Finish *finish, Py_ssize_t num_words, Py_ssize_t states) {
    finish->found = NULL;
    finish->marks = NULL;
    finish->distinct = 0;
    finish->fingerprint = 0;
    finish->problem = NULL;
    finish->mask_object = PyBytes_FromStringAndSize(NULL, num_words * 4);
    finish->found = PyMem_RawMalloc(sizeof(int32_t) * (size_t)(states ? states : 1));
    if (finish->mask_object == NULL || finish->found == NULL) {
        if (finish->found == NULL) {
            PyErr_NoMemory();
        }
        Py_CLEAR(finish->mask_object);
        PyMem_RawFree(finish->found);
        finish->found = NULL;
        return -1;
    }
    return 0;
}

static void finish_compute(Finish *finish, const uint32_t *loop_mask, Py_ssize_t num_words, const void *tokens,
                           int wide_tokens, Py_ssize_t num_tokens, const int64_t *entries, const int64_t *ends,
                           Py_ssize_t count, const int64_t *loop_ends, Py_ssize_t num_loop_ends, const int64_t *eos,
                           Py_ssize_t num_eos, int final, const int32_t *reached, const int32_t *alive,
                           Py_ssize_t num_alive) {
    Py_ssize_t states = count + num_loop_ends;
    int32_t *found = finish->found;
    uint8_t *marks = NULL;
    uint32_t *mask = (uint32_t *)PyBytes_AS_STRING(finish->mask_object);
    int64_t bound = (int64_t)num_words * 32, largest = -1;
    const char *problem = NULL;
    Py_ssize_t distinct = 0;
    if (loop_mask != NULL) {
        memcpy(mask, loop_mask, (size_t)num_words * 4);
    } else {
        memset(mask, 0, (size_t)num_words * 4);
    }
    if (reached != NULL) {
        if (count > num_tokens) {
            problem = "finish_row: an entry outside the tokens";
        }
        for (Py_ssize_t k = 0; k < num_alive && problem == NULL; k++) {
            int64_t token = wide_tokens ? ((const int64_t *)tokens)[alive[k]] : ((const int32_t *)tokens)[alive[k]];
            if ((uint64_t)token >= (uint64_t)bound) {
                problem = "finish_row: a token outside the mask";
                break;
            }
            mask[token >> 5] |= (uint32_t)1 << (token & 31);
        }
    }
    for (Py_ssize_t i = 0; reached == NULL && i < count; i++) {
        int64_t entry = entries[i];
        if (entry < 0 || entry >= num_tokens) {
            problem = "finish_row: an entry outside the tokens";
            break;
        }
        int64_t token = wide_tokens ? ((const int64_t *)tokens)[entry] : ((const int32_t *)tokens)[entry];
        if (token < 0 || token >= bound) {
            problem = "finish_row: a token outside the mask";
            break;
        }
        mask[token >> 5] |= (uint32_t)1 << (token & 31);
    }
    for (Py_ssize_t i = 0; final && i < num_eos && problem == NULL; i++) {
        if (eos[i] < 0 || eos[i] >= bound) {
            problem = "finish_row: a token outside the mask";
            break;
        }
        mask[eos[i] >> 5] |= (uint32_t)1 << (eos[i] & 31);
    }
    Py_ssize_t from = 0;  /* the states checked in the loops below: the reached ones are -1 or a state */
    if (reached != NULL) {
        int32_t most = -1;
        for (Py_ssize_t k = 0; k < num_alive; k++) {
            most = reached[alive[k]] > most ? reached[alive[k]] : most;
        }
        largest = most;
        from = count;
    }
    for (Py_ssize_t i = from; i < states && problem == NULL; i++) {
        int64_t state = i < count ? ends[i] : loop_ends[i - count];
        if (state < 0 || state > INT32_MAX) {
            problem = "finish_row: a state outside int32";
            break;
        }
        largest = state > largest ? state : largest;
    }
    if (problem == NULL && states) {
        /* untouched pages stay unmapped: states up to ~1e6; one more byte
         * in front for a dead entry's -1, marked seen */
        marks = PyMem_RawCalloc((size_t)largest + 2, 1);
        if (marks == NULL) {
            problem = "";
        } else {
            marks[0] = 1;
        }
    }
    uint8_t *seen = marks != NULL ? marks + 1 : NULL;
    for (Py_ssize_t k = 0; reached != NULL && k < num_alive && problem == NULL; k++) {
        int32_t state = reached[alive[k]];
        if (!seen[state]) {
            seen[state] = 1;
            found[distinct++] = state;
        }
    }
    for (Py_ssize_t i = from; i < states && problem == NULL; i++) {
        int64_t state = i < count ? ends[i] : loop_ends[i - count];
        if (!seen[state]) {
            seen[state] = 1;
            found[distinct++] = (int32_t)state;
        }
    }
    uint64_t fingerprint = 0;
    if (problem == NULL) {
        qsort(found, (size_t)distinct, sizeof(int32_t), compare_int32);
        fingerprint = mask_fingerprint(mask, num_words);
    }
    finish->marks = marks;
    finish->distinct = distinct;
    finish->fingerprint = fingerprint;
    finish->problem = problem;
}

static PyObject *finish_end(Finish *finish) {
    PyObject *result = NULL;
    if (finish->problem != NULL) {
        if (*finish->problem) {
            PyErr_SetString(PyExc_IndexError, finish->problem);
        } else {
            PyErr_NoMemory();
        }
    } else {
        PyObject *successors = PyBytes_FromStringAndSize((const char *)finish->found, finish->distinct * 4);
        PyObject *print = PyLong_FromUnsignedLongLong(finish->fingerprint);
        if (successors != NULL && print != NULL) {
            result = PyTuple_Pack(3, finish->mask_object, successors, print);
        }
        Py_XDECREF(successors);
        Py_XDECREF(print);
    }
    Py_CLEAR(finish->mask_object);
    PyMem_RawFree(finish->found);
    PyMem_RawFree(finish->marks);
    finish->found = NULL;
    finish->marks = NULL;
    return result;
}

/* The mask and successors of finish_row (see there) from checked lengths:
 * loop_mask NULL or num_words words; entries and ends of count items;
 * tokens int64 where wide_tokens (a vocabulary's), else int32 (a plan's).
 * With ``reached`` (walk_row, walk_span: walk_entries' reached_out),
 * entries and ends are NULL: the entries alive[:num_alive] (each < count,
 * count <= num_tokens: walk_entries' list) ended in reached[alive[k]], the
 * others are dead. Read in place, the ended entries are not gathered into
 * two int64 arrays first: walk_entries' gather and finish_arrays' loops
 * were ~22% of the compiled walks' instructions (callgrind, the cold steps
 * of sp_0, o73917 and o65424 on qwen2.5), and reading every entry's end
 * ~10% after that. The GIL held on entry and on return. */
static PyObject *finish_arrays(const uint32_t *loop_mask, Py_ssize_t num_words, const void *tokens,
                               int wide_tokens, Py_ssize_t num_tokens, const int64_t *entries, const int64_t *ends, Py_ssize_t count,
                               const int64_t *loop_ends, Py_ssize_t num_loop_ends, const int64_t *eos,
                               Py_ssize_t num_eos, int final, const int32_t *reached) {
    Finish finish;
    if (finish_begin(&finish, num_words, count + num_loop_ends) < 0) {
        return NULL;
    }
    Released released;
    /* as set_bits: the GIL let go for thousands of walked tokens, not for
     * the ~2 us of a mask copy and a few hundred bits (each hand-off can
     * cost a wait for another thread's switch interval) */
    let_go_for(&released, count);
    finish_compute(&finish, loop_mask, num_words, tokens, wide_tokens, num_tokens, entries, ends, count, loop_ends,
                   num_loop_ends, eos, num_eos, final, reached, NULL, 0);
    take_back(&released);
    return finish_end(&finish);
}

/* finish_row(loop_mask, num_words, tokens, entries, ends, count, loop_ends,
 *            eos, final) -> (mask, successors, fingerprint)
 *
 * A cold row's mask and successors from its walk (tokendfa.lazy.index,
 * LazyIndex._new_row with a covering vocabulary), where ~15 numpy calls
 * made them: ``mask`` (bytes, num_words uint32 words) is ``loop_mask``
 * (uint32[num_words]; None: no bit) with the bits of tokens[entries[i]]
 * set for i < count (tokens int32, a plan's; entries int64: a walk's ended
 * entries of it), and of the ``eos`` tokens (int64) when ``final``;
 * ``successors`` (bytes, int32) the distinct states of ends[:count] (int64)
 * and ``loop_ends`` (int64), ascending; ``fingerprint`` the mask's
 * (mask_fingerprint, an int in [0, 2**64)). */
static PyObject *finish_row(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 9, "finish_row") < 0) {
        return NULL;
    }
    Buffer buffers[9] = {{0}};  /* 0: loop_mask (or none), 2: tokens, 3: entries, 4: ends, 6: loop_ends, 7: eos */
    PyObject *result = NULL;
    Py_ssize_t num_words = PyLong_AsSsize_t(args[1]), count = PyLong_AsSsize_t(args[5]);
    int final = PyObject_IsTrue(args[8]);
    if (PyErr_Occurred() || final < 0) {
        return NULL;
    }
    if (args[0] != Py_None && take(args[0], &buffers[0], "loop_mask", U32, 0) < 0) {
        goto done;
    }
    static const char *names[8] = {"", "", "tokens", "entries", "ends", "", "loop_ends", "eos"};
    static const int taken[5] = {2, 3, 4, 6, 7};
    for (int k = 0; k < 5; k++) {
        if (take(args[taken[k]], &buffers[taken[k]], names[taken[k]], taken[k] == 2 ? 4 : 8, 0) < 0) {
            goto done;
        }
    }
    Py_ssize_t num_tokens = buffers[2].view.len / 4, num_loop_ends = buffers[6].view.len / 8;
    Py_ssize_t num_eos = buffers[7].view.len / 8;
    if (num_words < 0 || num_words > PY_SSIZE_T_MAX / 64 || count < 0 || count > buffers[3].view.len / 8
            || count > buffers[4].view.len / 8
            || (buffers[0].held && buffers[0].view.len != num_words * 4)) {
        PyErr_SetString(PyExc_ValueError, "finish_row: arrays of mismatched lengths");
        goto done;
    }
    result = finish_arrays(buffers[0].held ? buffers[0].view.buf : NULL, num_words, buffers[2].view.buf, 0, num_tokens,
                           buffers[3].view.buf, buffers[4].view.buf, count, buffers[6].view.buf, num_loop_ends,
                           buffers[7].view.buf, num_eos, final, NULL);
done:
    release(buffers, 9);
    return result;
}

/* The loop of start_states (see there) over checked lengths, into int64
 * ``out`` or, where ``narrow_out``, int32 (walk_row's scratch; 2: an
 * along state outside int32 written as -1, which the walk refuses as a
 * state outside the automaton where it is picked); the problem met (an
 * index outside), or NULL. No Python object is touched. */
static inline ALWAYS_INLINE const char *fill_loop(const int32_t *first_row, const uint8_t *first_bytes,
                                                  const void *picks, int wide_picks, Py_ssize_t count,
                                                  const int64_t *along, Py_ssize_t num_along,
                                                  void *restrict out, const int narrow_out) {
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t pick = wide_picks ? ((const int32_t *)picks)[i] : (((const uint8_t *)picks)[i] ? 0 : -1);
        if (pick >= 0) {
            if (pick >= num_along) {
                return "start_states: a link outside the chain";
            }
            if (narrow_out == 2) {
                ((int32_t *)out)[i] = along[pick] >= INT32_MIN && along[pick] <= INT32_MAX ? (int32_t)along[pick] : -1;
            } else if (narrow_out) {
                ((int32_t *)out)[i] = (int32_t)along[pick];  /* fill_start_states: it fits */
            } else {
                ((int64_t *)out)[i] = along[pick];
            }
        } else if (narrow_out) {
            ((int32_t *)out)[i] = first_row[first_bytes[i]];  /* uint8: inside the row's 256 cells */
        } else {
            ((int64_t *)out)[i] = first_row[first_bytes[i]];
        }
    }
    return NULL;
}

/* fill_loop, with the along states checked once where ``out`` is int32
 * (a test an entry in the loop was ~3 instructions an entry: +0.7% of the
 * cold walks' instructions, callgrind over o65424, o73917, sp_0 and o1). */
static const char *fill_start_states(const int32_t *first_row, const uint8_t *first_bytes, const void *picks,
                                     int wide_picks, Py_ssize_t count, const int64_t *along, Py_ssize_t num_along,
                                     void *out, int narrow_out) {
    if (!narrow_out) {
        return fill_loop(first_row, first_bytes, picks, wide_picks, count, along, num_along, out, 0);
    }
    for (Py_ssize_t k = 0; k < num_along; k++) {
        if (along[k] < INT32_MIN || along[k] > INT32_MAX) {
            return fill_loop(first_row, first_bytes, picks, wide_picks, count, along, num_along, out, 2);
        }
    }
    return fill_loop(first_row, first_bytes, picks, wide_picks, count, along, num_along, out, 1);
}

/* start_states(first_row, first_bytes, picks, along, out): the state each
 * entry of a plan starts its walk in, into out (int64[k]): along[0] where
 * picks[i] (a walk plan's skipped, bool) is set, along[picks[i]] where
 * picks[i] (a chain plan's links, int32) is 0 or more, else
 * first_row[first_bytes[i]] (first_row: the row's 256 int32 cells,
 * first_bytes uint8[k], along int64). numpy's gathers, the boolean store
 * and the int32 -> int64 copy a walk reads cost ~15 us a cold row with
 * the GIL; here ~2. */
static PyObject *start_states(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 5, "start_states") < 0) {
        return NULL;
    }
    Buffer buffers[5] = {{0}};
    PyObject *result = NULL;
    if (take(args[0], &buffers[0], "first_row", 4, 0) < 0 || take(args[1], &buffers[1], "first_bytes", U8, 0) < 0
            || take_picks(args[2], &buffers[2], "start_states") < 0
            || take(args[3], &buffers[3], "along", 8, 0) < 0 || take(args[4], &buffers[4], "out", 8, 1) < 0) {
        goto done;
    }
    const int32_t *first_row = buffers[0].view.buf;
    const uint8_t *first_bytes = buffers[1].view.buf;
    const int64_t *along = buffers[3].view.buf;
    int64_t *out = buffers[4].view.buf;
    Py_ssize_t count = buffers[1].view.len, num_along = buffers[3].view.len / 8;
    int wide_picks = buffers[2].view.itemsize == 4;
    if (buffers[0].view.len != 256 * 4 || buffers[2].view.len / buffers[2].view.itemsize != count
            || buffers[4].view.len / 8 != count) {
        PyErr_SetString(PyExc_ValueError, "start_states: arrays of mismatched lengths");
        goto done;
    }
    const char *problem = fill_start_states(first_row, first_bytes, buffers[2].view.buf, wide_picks, count, along,
                                            num_along, out, 0);
    if (problem != NULL) {
        PyErr_SetString(PyExc_IndexError, problem);
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    release(buffers, 5);
    return result;
}

/* walk_entries over ``count`` entries (reached_out: ``reached``, alive_out:
 * ``alive``, count int32 each) with the
 * automaton opened, then the row made of where they ended as finish_arrays
 * makes it, inside the walk's last section without the GIL: a section a
 * row fewer than taking the GIL back after the walk and letting it go
 * again, and the ~5-10 us of the mask copy, its bits, the distinct states
 * and the fingerprint where another thread runs Python (under RELEASE_FROM
 * entries, finish_arrays holds the GIL for them). Closes the automaton;
 * the GIL held on entry and on return. */
static PyObject *walk_finished(Automaton *automaton, Py_ssize_t count, const uint8_t *bytes, const void *starts,
                               const void *stops, int narrow, const int32_t *states, const uint8_t *shared,
                               int32_t *reached, int32_t *alive,
                               const uint32_t *loop_mask, Py_ssize_t num_words, const void *tokens, int wide_tokens,
                               const int64_t *loop_ends, Py_ssize_t num_loop_ends, const int64_t *eos,
                               Py_ssize_t num_eos, int final) {
    Finish finish;
    if (finish_begin(&finish, num_words, count + num_loop_ends) < 0) {
        close_automaton(automaton);
        return NULL;
    }
    automaton->stay_released = 1;
    Py_ssize_t ended = walk_entries(automaton, count, bytes, starts, stops, narrow, states, 0, shared, NULL, NULL,
                                    NULL, reached, alive);
    automaton->stay_released = 0;
    if (ended >= 0) {
        finish_compute(&finish, loop_mask, num_words, tokens, wide_tokens, count, NULL, NULL, count, loop_ends,
                       num_loop_ends, eos, num_eos, final, reached, alive, ended);
    }
    if (close_automaton(automaton) < 0 || ended < 0) {  /* takes the GIL back */
        Py_CLEAR(finish.mask_object);
        PyMem_RawFree(finish.found);
        PyMem_RawFree(finish.marks);
        return NULL;
    }
    return finish_end(&finish);
}

/* walk_row(dfa, data, offsets, first_row, first_bytes, picks, along, tokens,
 *          loop_mask, num_words, loop_ends, eos, final, shared[, loop_from]) -> (mask, successors, fingerprint)
 *
 * A cold row from its packed plan in one call (tokendfa.lazy.index,
 * LazyIndex._compiled_row): each entry's start state as start_states
 * makes it (first_row, the plan's first_bytes, picks and along), the walk
 * of the packed bytes (data, offsets) as walk_packed, the automaton's
 * resolving lock held by the caller, and the mask, successors and fingerprint
 * of the plan's ``tokens`` that end alive as finish_row makes them (loop_mask,
 * num_words, loop_ends, eos, final). Three calls and their arrays made
 * with the GIL in Python (~5 us a row) where this takes one; the walk's
 * scratch is its own. ``shared`` (uint8, one an entry, or None): the
 * leading bytes each packed entry shares with the one before it
 * (common_prefixes), walked once where both start in the same state
 * (first_pass). ``loop_from`` (uint8, one an entry, or None; a loop row's,
 * with ``shared``): where each entry's closing run of the loop set's bytes
 * begins (the function loop_from), along[0] the loop state whose loop set
 * it is: an entry whose shared prefix reaches the loop state at or past
 * it ends there, alive, with no byte read. */
static PyObject *walk_row(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 15 && arity(nargs, 14, "walk_row") < 0) {
        return NULL;
    }
    Buffer runs = {0};  /* loop_from's */
    Automaton automaton = {0};
    /* 1 data, 2 offsets, 3 first_row, 4 first_bytes, 5 picks, 6 along, 7 tokens, 8 loop_mask, 10 loop_ends, 11 eos,
     * 13 shared (12, final, is no buffer) */
    Buffer buffers[14] = {{0}};
    static const char *names[14] = {"", "data", "offsets", "first_row", "first_bytes", "picks", "along", "tokens",
                                    "loop_mask", "", "loop_ends", "eos", "", "shared"};
    static const Py_ssize_t items[14] = {0, U8, 4, 4, U8, 0, 8, 4, U32, 0, 8, 8, 0, U8};
    PyObject *result = NULL;
    int32_t *states = NULL;
    Py_ssize_t num_words = PyLong_AsSsize_t(args[9]);
    int final = PyObject_IsTrue(args[12]);
    if ((num_words == -1 && PyErr_Occurred()) || final < 0) {
        return NULL;
    }
    for (int i = 1; i < 14; i++) {
        if (i == 9 || i == 12 || ((i == 8 || i == 13) && args[i] == Py_None)) {
            continue;
        }
        if (i == 5) {  /* a walk plan's skipped (bool) or a chain plan's links (int32) */
            if (take_picks(args[5], &buffers[5], "walk_row") < 0) {
                goto done;
            }
            continue;
        }
        if (take(args[i], &buffers[i], names[i], items[i], 0) < 0) {
            goto done;
        }
    }
    const uint8_t *data = buffers[1].view.buf;
    const int32_t *offsets = buffers[2].view.buf;
    Py_ssize_t count = buffers[4].view.len, total = buffers[1].view.len;
    if (buffers[2].view.len / 4 != count + 1 || buffers[3].view.len != 256 * 4
            || buffers[5].view.len / buffers[5].view.itemsize != count || buffers[7].view.len / 4 != count
            || num_words < 0 || num_words > PY_SSIZE_T_MAX / 64
            || (buffers[8].held && buffers[8].view.len != num_words * 4)
            || (buffers[13].held && buffers[13].view.len != count)) {
        PyErr_SetString(PyExc_ValueError, "walk_row: arrays of mismatched lengths");
        goto done;
    }
    /* ascending from 0 to at most total: every entry inside the data. One
     * or-ed test an entry, which the compiler vectorises (three tests and
     * branches an entry were 5% of the compiled walks' instructions) */
    int descending = count && (offsets[0] < 0 || offsets[count] > total);
    for (Py_ssize_t i = 0; i < count; i++) {
        descending |= offsets[i] > offsets[i + 1];
    }
    if (descending) {
        PyErr_SetString(PyExc_IndexError, "walk_row: an entry outside the data");
        goto done;
    }
    size_t room = (size_t)(count ? count : 1);
    /* each entry's start state (int32), overwritten by its end where it
     * ends alive (walk_entries), then the list of those alive (read in
     * place by finish_arrays; its pages written only as far as it goes).
     * 8 bytes an entry, where an int64 start state and an end of its own
     * took 16: these pages are most of what a loop row first writes in a
     * fresh fork (Github_medium o1's step 7, MaskBench's worst: walk_row's
     * faults 310 -> 223) */
    states = room <= PY_SSIZE_T_MAX / 16 ? scratch_take(0, 2 * sizeof(int32_t) * room) : NULL;
    if (states == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int32_t *reached = states;
    const char *problem = fill_start_states(buffers[3].view.buf, buffers[4].view.buf, buffers[5].view.buf,
                                            buffers[5].view.itemsize == 4, count, buffers[6].view.buf,
                                            buffers[6].view.len / 8, states, 1);
    if (problem != NULL) {
        PyErr_SetString(PyExc_IndexError, problem);
        goto done;
    }
    if (nargs == 15 && args[14] != Py_None && buffers[6].view.len >= 8) {
        /* a loop row's: the loop state is along[0], where its skipped
         * entries start (a state beyond int32 is none the walk reaches) */
        int64_t loop_state = ((const int64_t *)buffers[6].view.buf)[0];
        if (take(args[14], &runs, "loop_from", U8, 0) < 0) {
            goto done;
        }
        if (runs.view.len != count) {
            PyErr_SetString(PyExc_ValueError, "walk_row: arrays of mismatched lengths");
            goto done;
        }
        if (loop_state > 0 && loop_state <= INT32_MAX) {
            automaton.loop_from = runs.view.buf;
            automaton.loop_state = (uint32_t)loop_state;
        }
    }
    if (open_automaton(args[0], &automaton) < 0) {
        close_automaton(&automaton);
        goto done;
    }
    result = walk_finished(&automaton, count, data, offsets, offsets + 1, 1, states,
                           buffers[13].held ? buffers[13].view.buf : NULL, reached, reached + room,
                           buffers[8].held ? buffers[8].view.buf : NULL, num_words, buffers[7].view.buf, 0,
                           buffers[10].view.buf, buffers[10].view.len / 8, buffers[11].view.buf,
                           buffers[11].view.len / 8, final);
done:
    scratch_give(0, states);
    release(buffers, 14);
    release(&runs, 1);
    return result;
}

/* loop_from(data, offsets, low, high) -> bytes
 *
 * For each entry i = data[offsets[i]:offsets[i + 1]] of a loop row's
 * packed plan (offsets int32, ascending inside data), where the run of
 * bytes of the loop set (ASCII byte b where bit b of low | high << 64 is
 * set) that ends it begins, counted from the entry's start (0: every byte
 * is one; 255: 255 or more). walk_row, given them with the loop state as
 * along[0], ends an entry with no byte read where its shared prefix leads
 * to the loop state at or past that point (first_pass): the loop's cells
 * of those bytes are the loop state itself. In a free key's rows (JSON
 * object keys not declared, qwen2.5: Snowplow sp_0's 18,118 entries a
 * row, Github_hard o73917's 13,029, Github_ultra o65424's 7,547) that is
 * 75%, 71% and 56% of the entries, and their walk_row calls, replayed
 * warm, went 136 -> 101, 92 -> 71 and 51 -> 42 us: what such an entry
 * costs is its own handling in first_pass more than its bytes, so the
 * entries after it that end the same are taken in a loop of one test each
 * (81, 58 and 36 us). Kept with
 * the plan, whose key holds the loop set (tokendfa.lazy.plans._loop_from). */
static PyObject *loop_from(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 4, "loop_from") < 0) {
        return NULL;
    }
    Buffer buffers[2] = {{0}};
    PyObject *result = NULL;
    uint64_t low = PyLong_AsUnsignedLongLong(args[2]), high = PyLong_AsUnsignedLongLong(args[3]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (take(args[0], &buffers[0], "data", U8, 0) < 0 || take(args[1], &buffers[1], "offsets", 4, 0) < 0) {
        goto done;
    }
    const uint8_t *data = buffers[0].view.buf;
    const int32_t *offsets = buffers[1].view.buf;
    Py_ssize_t count = buffers[1].view.len / 4 - 1, total = buffers[0].view.len;
    if (count < 0) {
        PyErr_SetString(PyExc_ValueError, "loop_from: no offsets");
        goto done;
    }
    int descending = count && (offsets[0] < 0 || offsets[count] > total);
    for (Py_ssize_t i = 0; i < count; i++) {
        descending |= offsets[i] > offsets[i + 1];
    }
    if (descending) {
        PyErr_SetString(PyExc_IndexError, "loop_from: an entry outside the data");
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, count);
    if (result == NULL) {
        goto done;
    }
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(result);
    for (Py_ssize_t i = 0; i < count; i++) {
        int32_t from = offsets[i], at = offsets[i + 1];
        while (at > from) {
            uint8_t b = data[at - 1];
            if (b >= 128 || !(((b < 64 ? low >> b : high >> (b - 64)) & 1))) {
                break;
            }
            at--;
        }
        out[i] = at - from > 255 ? 255 : (uint8_t)(at - from);
    }
done:
    release(buffers, 2);
    return result;
}

/* A loop row's walk plan read from the vocabulary's groups (group_plan):
 * the tokens by_first_byte starting with each byte of ``walked``, then the
 * loop's rest tokens starting with each byte of ``rested`` but those that
 * die at once (rest_dies), each group's offsets and the bytes of its
 * entries checked by measure_groups before fill_groups reads them. */
typedef struct {
    const int64_t *walked, *by_first_byte, *first_offsets, *grouped_offsets;
    const int64_t *rested, *rest_tokens, *rest_offsets;
    const int32_t *rest_data_offsets;
    const uint8_t *grouped, *rest_data, *dead, *grouped_shared, *rest_shared;
    const int16_t *rest_skips;
    Py_ssize_t num_walked, num_rested, num_by_first, num_grouped, num_rest, num_rest_data;
} Groups;

/* Whether rest entry j (its offsets checked) starts its walk in the loop's
 * state (a resume point) with an ASCII byte that is dead there (bit b of
 * ``dead``, 16 bytes): it dies at its first byte, and the plan leaves it
 * out. */
static inline int rest_dies(const Groups *g, int64_t j) {
    if (g->rest_skips[j] <= 0 || g->rest_data_offsets[j] == g->rest_data_offsets[j + 1]) {
        return 0;
    }
    uint8_t b = g->rest_data[g->rest_data_offsets[j]];
    return b < 128 && (g->dead[b >> 3] >> (b & 7)) & 1;
}

/* How many entries and bytes the groups hold, checking every offset they
 * read (a spelled token has a byte at least); the problem met, or NULL. */
static const char *measure_groups(const Groups *g, Py_ssize_t *entries, Py_ssize_t *bytes) {
    Py_ssize_t count = 0, total = 0;
    for (Py_ssize_t k = 0; k < g->num_walked; k++) {
        int64_t b = g->walked[k];
        if (b < 0 || b > 255) {
            return "group_plan: a first byte outside the row";
        }
        int64_t from = g->first_offsets[b], to = g->first_offsets[b + 1];
        if (from < 0 || from > to || to > g->num_by_first) {
            return "group_plan: a group outside the tokens";
        }
        for (int64_t j = from; j < to; j++) {
            if (g->grouped_offsets[j] < 0 || g->grouped_offsets[j] >= g->grouped_offsets[j + 1]
                    || g->grouped_offsets[j + 1] > g->num_grouped) {
                return "group_plan: a token outside the grouped bytes";
            }
            if (g->by_first_byte[j] < 0 || g->by_first_byte[j] > INT32_MAX) {
                return "group_plan: a token outside int32";
            }
            total += (Py_ssize_t)(g->grouped_offsets[j + 1] - g->grouped_offsets[j] - 1);
        }
        count += (Py_ssize_t)(to - from);
    }
    for (Py_ssize_t k = 0; k < g->num_rested; k++) {
        int64_t b = g->rested[k];
        if (b < 0 || b > 255) {
            return "group_plan: a first byte outside the row";
        }
        int64_t from = g->rest_offsets[b], to = g->rest_offsets[b + 1];
        if (from < 0 || from > to || to > g->num_rest) {
            return "group_plan: a group outside the rest";
        }
        for (int64_t j = from; j < to; j++) {
            if (g->rest_data_offsets[j] < 0 || g->rest_data_offsets[j] > g->rest_data_offsets[j + 1]
                    || g->rest_data_offsets[j + 1] > g->num_rest_data) {
                return "group_plan: a token outside the rest's bytes";
            }
            if (g->rest_tokens[j] < 0 || g->rest_tokens[j] > INT32_MAX) {
                return "group_plan: a token outside int32";
            }
            if (!rest_dies(g, j)) {
                total += (Py_ssize_t)(g->rest_data_offsets[j + 1] - g->rest_data_offsets[j]);
                count++;
            }
        }
    }
    if (total > INT32_MAX) {
        return "group_plan: more packed bytes than int32 offsets index";
    }
    *entries = count;
    *bytes = total;
    return NULL;
}

/* The plan's entries (measure_groups checked their offsets): tokens,
 * first bytes, skipped flags, their bytes packed into data at
 * offsets (count + 1), and how many leading bytes each shares with the one
 * before it, read off the groups' and the rest's (grouped_shared and
 * rest_shared: common_prefixes of their bytes, made once per vocabulary
 * and loop set). Comparing the bytes here took ~20 instructions an entry,
 * as much as the rest of a plan. */
static void fill_groups(const Groups *g, int32_t *tokens, uint8_t *first_bytes, uint8_t *skipped, uint8_t *data,
                        int32_t *offsets, uint8_t *shared) {
    Py_ssize_t i = 0, at = 0;
    offsets[0] = 0;
    for (Py_ssize_t k = 0; k < g->num_walked; k++) {
        int64_t b = g->walked[k];
        for (int64_t j = g->first_offsets[b]; j < g->first_offsets[b + 1]; j++) {
            int64_t from = g->grouped_offsets[j] + 1, length = g->grouped_offsets[j + 1] - from;
            memcpy(data + at, g->grouped + from, (size_t)length);
            /* the whole spellings share their first byte: one fewer from the second */
            uint8_t whole = g->grouped_shared[j];
            shared[i] = j == g->first_offsets[b] || whole == 0 ? 0 : (uint8_t)(whole - 1);
            at += length;
            tokens[i] = (int32_t)g->by_first_byte[j];
            first_bytes[i] = (uint8_t)b;
            skipped[i] = 0;
            offsets[++i] = (int32_t)at;  /* measure_groups: the total fits int32 */
        }
    }
    for (Py_ssize_t k = 0; k < g->num_rested; k++) {
        int64_t b = g->rested[k];
        /* what the entry shares with the last one kept: the least of what
         * each shares with the one before it since (those left out between) */
        uint8_t span = 0;
        for (int64_t j = g->rest_offsets[b]; j < g->rest_offsets[b + 1]; j++) {
            span = g->rest_shared[j] < span ? g->rest_shared[j] : span;
            if (rest_dies(g, j)) {
                continue;
            }
            int64_t from = g->rest_data_offsets[j], length = g->rest_data_offsets[j + 1] - from;
            memcpy(data + at, g->rest_data + from, (size_t)length);
            shared[i] = span;
            span = 255;
            at += length;
            tokens[i] = (int32_t)g->rest_tokens[j];
            first_bytes[i] = (uint8_t)b;
            skipped[i] = g->rest_skips[j] > 0;
            offsets[++i] = (int32_t)at;  /* measure_groups: the total fits int32 */
        }
    }
}

/* group_plan(by_first_byte, first_offsets, grouped, grouped_offsets, walked,
 *            rest_tokens, rest_offsets, rest_skips, rest_data,
 *            rest_data_offsets, rested, dead, grouped_shared, rest_shared)
 *     -> (tokens, first_bytes, skipped, data, offsets, shared)
 *
 * A loop row's walk plan (tokendfa.lazy.plans._group_plan) in one call,
 * read from the vocabulary's groups: the tokens starting with each byte of
 * ``walked`` (int64 bytes; groups of ``by_first_byte`` by ``first_offsets``,
 * int64[257], their bytes in ``grouped`` at ``grouped_offsets``, int64, one
 * more than by_first_byte) from their second byte; then the loop's rest
 * tokens starting with each byte of ``rested`` (``rest_tokens`` int64 by
 * first byte, groups by ``rest_offsets`` int64[257]; ``rest_skips`` int16
 * beside them, their resume points; their bytes from there packed in
 * ``rest_data`` at ``rest_data_offsets``, int32, one more than
 * rest_tokens) from their resume point (at least 1), skipped (starting in
 * the loop's state) where they have one, but those whose first byte from
 * the loop's state is an ASCII byte set in ``dead`` (uint8[16], bit b of
 * byte b >> 3: the loop state's ASCII cells that are DEAD): they die at
 * once. A JSON string's rest is mostly such (a control character, or a
 * quote where the string cannot end: 2.2M of the 12.9M entries that
 * MaskBench's qwen2.5 sample walked). As bytes: tokens int32, first bytes
 * uint8, skipped bool, one an entry, and the entries' bytes
 * packed and their offsets (int32, one more), and how many leading bytes
 * each entry shares with the one before it in its group, or fewer (uint8,
 * one an entry; 0 for a group's first), from ``grouped_shared`` (uint8,
 * one a token of by_first_byte) and ``rest_shared`` (uint8, one a rest
 * token), common_prefixes of the grouped bytes and of the rest's packed
 * ones. No positions: the plan comes packed, and an entry's position is
 * its token's length less its packed bytes (plans._plan_positions); the
 * int32 a token were ~43 of the 248 pages Github_medium o1's step 7 wrote
 * here in a fresh fork. The walk_plan and pack_plan
 * of the rest a loop row's first bytes gather (tables._loop_mask) made the
 * same arrays in ~10 numpy calls and three C calls: ~300-400 us for a
 * declared key's prefix inside a free key in a fresh fork, 57 such sets
 * in MaskBench's sample. */
static PyObject *group_plan(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 14, "group_plan") < 0) {
        return NULL;
    }
    enum { BY_FIRST, FIRST_OFFSETS, GROUPED, GROUPED_OFFSETS, WALKED, REST_TOKENS, REST_OFFSETS, REST_SKIPS,
           REST_DATA, REST_DATA_OFFSETS, RESTED, DEAD_BYTES, GROUPED_SHARED, REST_SHARED, COUNT };
    static const char *names[COUNT] = {"by_first_byte", "first_offsets", "grouped", "grouped_offsets", "walked",
                                       "rest_tokens", "rest_offsets", "rest_skips", "rest_data",
                                       "rest_data_offsets", "rested", "dead", "grouped_shared", "rest_shared"};
    static const Py_ssize_t items[COUNT] = {8, 8, U8, 8, 8, 8, 8, 2, U8, 4, 8, U8, U8, U8};
    Buffer buffers[COUNT] = {{0}};
    PyObject *parts[6] = {NULL, NULL, NULL, NULL, NULL, NULL}, *result = NULL;
    for (int i = 0; i < COUNT; i++) {
        if (take(args[i], &buffers[i], names[i], items[i], 0) < 0) {
            goto done;
        }
    }
    Groups g = {
        .walked = buffers[WALKED].view.buf, .by_first_byte = buffers[BY_FIRST].view.buf,
        .first_offsets = buffers[FIRST_OFFSETS].view.buf, .grouped_offsets = buffers[GROUPED_OFFSETS].view.buf,
        .rested = buffers[RESTED].view.buf, .rest_tokens = buffers[REST_TOKENS].view.buf,
        .rest_offsets = buffers[REST_OFFSETS].view.buf, .rest_data_offsets = buffers[REST_DATA_OFFSETS].view.buf,
        .grouped = buffers[GROUPED].view.buf, .rest_data = buffers[REST_DATA].view.buf,
        .rest_skips = buffers[REST_SKIPS].view.buf, .dead = buffers[DEAD_BYTES].view.buf,
        .grouped_shared = buffers[GROUPED_SHARED].view.buf, .rest_shared = buffers[REST_SHARED].view.buf,
        .num_walked = buffers[WALKED].view.len / 8, .num_rested = buffers[RESTED].view.len / 8,
        .num_by_first = buffers[BY_FIRST].view.len / 8, .num_grouped = buffers[GROUPED].view.len,
        .num_rest = buffers[REST_TOKENS].view.len / 8, .num_rest_data = buffers[REST_DATA].view.len,
    };
    if (buffers[FIRST_OFFSETS].view.len != 257 * 8 || buffers[GROUPED_OFFSETS].view.len / 8 != g.num_by_first + 1
            || buffers[REST_OFFSETS].view.len != 257 * 8 || buffers[REST_SKIPS].view.len / 2 != g.num_rest
            || buffers[REST_DATA_OFFSETS].view.len / 4 != g.num_rest + 1 || buffers[DEAD_BYTES].view.len != 16
            || buffers[GROUPED_SHARED].view.len != g.num_by_first || buffers[REST_SHARED].view.len != g.num_rest) {
        PyErr_SetString(PyExc_ValueError, "group_plan: arrays of mismatched lengths");
        goto done;
    }
    Py_ssize_t count = 0, total = 0;
    const char *problem = measure_groups(&g, &count, &total);
    if (problem != NULL) {
        PyErr_SetString(PyExc_IndexError, problem);
        goto done;
    }
    static const Py_ssize_t widths[3] = {4, 1, 1};
    if (make_parts(parts, 3, count, widths) < 0
            || (parts[3] = PyBytes_FromStringAndSize(NULL, total)) == NULL
            || (parts[4] = PyBytes_FromStringAndSize(NULL, 4 * (count + 1))) == NULL
            || (parts[5] = PyBytes_FromStringAndSize(NULL, count)) == NULL) {
        goto done;
    }
    Released released;
    let_go_for(&released, count);
    fill_groups(&g, (int32_t *)PyBytes_AS_STRING(parts[0]), (uint8_t *)PyBytes_AS_STRING(parts[1]),
                (uint8_t *)PyBytes_AS_STRING(parts[2]), (uint8_t *)PyBytes_AS_STRING(parts[3]),
                (int32_t *)PyBytes_AS_STRING(parts[4]), (uint8_t *)PyBytes_AS_STRING(parts[5]));
    take_back(&released);
    result = PyTuple_Pack(6, parts[0], parts[1], parts[2], parts[3], parts[4], parts[5]);
done:
    for (int i = 0; i < 6; i++) {
        Py_XDECREF(parts[i]);
    }
    release(buffers, COUNT);
    return result;
}

/* walk_span(dfa, data, offsets, ranges, state, tokens, loop_mask,
 *           num_words, loop_ends, eos, final, shared) -> (mask, successors, fingerprint)
 *
 * A cold row with no loop walked with no plan (tokendfa.lazy.index,
 * LazyIndex._span_row): for each pair [lo, hi) of ``ranges`` (int64[k, 2],
 * ascending), the tokens ``tokens[lo:hi]`` (int64: the vocabulary's
 * by_first_byte), whose whole bytes are data[offsets[j]:offsets[j + 1]]
 * (offsets int64, one more than tokens: the grouped spellings), each
 * walked from its first byte in ``state``, the automaton's resolving lock
 * held by the caller. One range is read in place; several are gathered
 * into the walk's arrays first. ``mask``, ``successors`` and
 * ``fingerprint`` as finish_row makes them. The walk plan of such a row (a declared key's first letters,
 * a literal's, a number's end) cost ~100-450 us to make in a fresh fork,
 * for every new set of live bytes.
 *
 * ``shared`` (uint8, one a token, or None): how many leading bytes entry j
 * shares with entry j - 1 (common_prefixes of the grouped spellings, the
 * tokens in spelling order): the walk goes on from the state the previous
 * entry reached there, and an entry whose shared prefix holds the byte the
 * previous one died at dies with no byte walked (first_pass). */
static PyObject *walk_span(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 12, "walk_span") < 0) {
        return NULL;
    }
    enum { DATA = 1, OFFSETS, RANGES, STATE, TOKENS, LOOP_MASK, NUM_WORDS, LOOP_ENDS, EOS, FINAL, SHARED, COUNT };
    static const char *names[COUNT] = {"", "data", "offsets", "ranges", "", "tokens", "loop_mask", "", "loop_ends",
                                       "eos", "", "shared"};
    static const Py_ssize_t items[COUNT] = {0, U8, 8, 8, 0, 8, U32, 0, 8, 8, 0, U8};
    Automaton automaton = {0};
    Buffer buffers[COUNT] = {{0}};
    PyObject *result = NULL;
    int64_t *scratch = NULL;
    long long state = PyLong_AsLongLong(args[STATE]);
    Py_ssize_t num_words = PyLong_AsSsize_t(args[NUM_WORDS]);
    int final = PyObject_IsTrue(args[FINAL]);
    if (((state == -1 || num_words == -1) && PyErr_Occurred()) || final < 0) {
        return NULL;
    }
    for (int i = 1; i < COUNT; i++) {
        if (items[i] == 0 || ((i == LOOP_MASK || i == SHARED) && args[i] == Py_None)) {
            continue;
        }
        if (take(args[i], &buffers[i], names[i], items[i], 0) < 0) {
            goto done;
        }
    }
    const int64_t *offsets = buffers[OFFSETS].view.buf, *ranges = buffers[RANGES].view.buf;
    const int64_t *all_tokens = buffers[TOKENS].view.buf;
    Py_ssize_t num_tokens = buffers[TOKENS].view.len / 8, total = buffers[DATA].view.len;
    Py_ssize_t num_ranges = buffers[RANGES].view.len / 16;
    if (buffers[OFFSETS].view.len / 8 != num_tokens + 1 || buffers[RANGES].view.len % 16 || num_words < 0
            || num_words > PY_SSIZE_T_MAX / 64
            || (buffers[LOOP_MASK].held && buffers[LOOP_MASK].view.len != num_words * 4)
            || (buffers[SHARED].held && buffers[SHARED].view.len != num_tokens)) {
        PyErr_SetString(PyExc_ValueError, "walk_span: arrays of mismatched lengths");
        goto done;
    }
    Py_ssize_t count = 0;
    for (Py_ssize_t r = 0; r < num_ranges; r++) {
        int64_t lo = ranges[2 * r], hi = ranges[2 * r + 1];
        if (lo < (r ? ranges[2 * r - 1] : 0) || lo > hi || hi > num_tokens) {
            PyErr_SetString(PyExc_IndexError, "walk_span: a range outside the tokens");
            goto done;
        }
        for (int64_t j = lo; j < hi; j++) {
            if (offsets[j] < 0 || offsets[j] > offsets[j + 1] || offsets[j + 1] > total) {
                PyErr_SetString(PyExc_IndexError, "walk_span: an entry outside the data");
                goto done;
            }
        }
        count += (Py_ssize_t)(hi - lo);
    }
    /* start states, ended entries, ended states; with several ranges also
     * the entries' starts, stops and tokens, and their shared prefixes */
    int gathered = num_ranges > 1;
    /* walk_row's kept slot (a span row is not walked inside one): taken
     * from malloc each row, its pages (48 bytes a token, ~0.2-1 MB) were
     * minor faults again and again in a fresh fork, 3% of the 250-1500 us
     * steps of MaskBench (perf, page faults under walk_span) */
    size_t room = (size_t)(count ? count : 1);
    /* first the start states (int32), each overwritten by its end where
     * it ends alive (walk_entries), and the list of those alive: 8 bytes
     * an entry (as walk_row's) */
    scratch = room <= PY_SSIZE_T_MAX / 49 ? scratch_take(0, (sizeof(int64_t) * (gathered ? 4 : 1) + 1) * room) : NULL;
    if (scratch == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int32_t *states = (int32_t *)scratch;
    const int64_t *starts = offsets, *tokens = all_tokens;
    const uint8_t *all_shared = buffers[SHARED].held ? buffers[SHARED].view.buf : NULL, *shared = all_shared;
    if (num_ranges == 1) {
        starts = offsets + ranges[0];
        tokens = all_tokens + ranges[0];
        shared = all_shared != NULL ? all_shared + ranges[0] : NULL;  /* the first entry's is not read */
    } else if (gathered) {
        int64_t *gathered_starts = scratch + count, *gathered_tokens = scratch + 3 * count;
        uint8_t *gathered_shared = (uint8_t *)(scratch + 4 * count);
        Py_ssize_t i = 0;
        for (Py_ssize_t r = 0; r < num_ranges; r++) {
            for (int64_t j = ranges[2 * r]; j < ranges[2 * r + 1]; j++, i++) {
                gathered_starts[i] = offsets[j];
                gathered_starts[count + i] = offsets[j + 1];
                gathered_tokens[i] = all_tokens[j];
                /* a range's first entry shares nothing with the one walked before it */
                gathered_shared[i] = all_shared != NULL && j > ranges[2 * r] ? all_shared[j] : 0;
            }
        }
        starts = gathered_starts;
        tokens = gathered_tokens;
        shared = all_shared != NULL ? gathered_shared : NULL;
    }
    /* checked by the walk against the automaton's states (-1 outside int32: refused there) */
    int32_t start = state >= 0 && state <= INT32_MAX ? (int32_t)state : -1;
    for (Py_ssize_t i = 0; i < count; i++) {
        states[i] = start;
    }
    if (open_automaton(args[0], &automaton) < 0) {
        close_automaton(&automaton);
        goto done;
    }
    /* each alive entry's end over its start state, and the list of those
     * alive, read in place by finish_arrays */
    result = walk_finished(&automaton, count, buffers[DATA].view.buf, starts, gathered ? starts + count : starts + 1,
                           0, states, shared, states, states + count, buffers[LOOP_MASK].held ? buffers[LOOP_MASK].view.buf : NULL,
                           num_words, tokens, 1, buffers[LOOP_ENDS].view.buf, buffers[LOOP_ENDS].view.len / 8,
                           buffers[EOS].view.buf, buffers[EOS].view.len / 8, final);
done:
    scratch_give(0, scratch);
    release(buffers, COUNT);
    return result;
}

/* ascii_target(first_row) -> (target, count): the state most of the 128
 * ASCII cells of a row (int32[256]) lead to, other than DEAD, the smallest
 * id of a tie, and how many lead there ((0, 0): every one is dead). A
 * Counter over the cells cost ~5 us a cold row. */
static PyObject *ascii_target(PyObject *module, PyObject *row) {
    (void)module;
    Buffer buffer = {0};
    if (take(row, &buffer, "first_row", 4, 0) < 0) {
        release(&buffer, 1);
        return NULL;
    }
    if (buffer.view.len < 128 * 4) {
        release(&buffer, 1);
        PyErr_SetString(PyExc_ValueError, "ascii_target: a row of 256 cells expected");
        return NULL;
    }
    const int32_t *cells = buffer.view.buf;
    int32_t seen[128];
    int counts[128], distinct = 0;
    for (int b = 0; b < 128; b++) {
        int32_t cell = cells[b];
        if (cell == DEAD) {
            continue;
        }
        int k = 0;
        while (k < distinct && seen[k] != cell) {
            k++;
        }
        if (k == distinct) {
            seen[distinct] = cell;
            counts[distinct++] = 0;
        }
        counts[k]++;
    }
    int32_t target = 0;
    int most = 0;
    for (int k = 0; k < distinct; k++) {
        if (counts[k] > most || (counts[k] == most && seen[k] < target)) {
            most = counts[k];
            target = seen[k];
        }
    }
    release(&buffer, 1);
    return Py_BuildValue("(ii)", (int)target, most);
}

/* row_runs(first_row, first_offsets) -> (live, ranges)
 *
 * A row with no loop (tokendfa.lazy.index.LazyIndex._loop_row): its live
 * first bytes (cells of first_row, int32[256], not DEAD), ascending, as
 * int64 bytes (a walk plan's cache key), and for each run of consecutive
 * ones the range [first_offsets[first], first_offsets[last + 1]) of
 * by_first_byte (first_offsets int64[257]), as int64 pairs: what
 * walk_span walks. numpy's flatnonzero, diff, r_ and stack took ~20 us. */
static PyObject *row_runs(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 2, "row_runs") < 0) {
        return NULL;
    }
    Buffer buffers[2] = {{0}};
    PyObject *result = NULL;
    if (take(args[0], &buffers[0], "first_row", 4, 0) < 0 || take(args[1], &buffers[1], "first_offsets", 8, 0) < 0) {
        goto done;
    }
    if (buffers[0].view.len != 256 * 4 || buffers[1].view.len != 257 * 8) {
        PyErr_SetString(PyExc_ValueError, "row_runs: a row of 256 cells and 257 offsets expected");
        goto done;
    }
    const int32_t *cells = buffers[0].view.buf;
    const int64_t *offsets = buffers[1].view.buf;
    int64_t live[256], ranges[2 * 128];
    int count = 0, runs = 0;
    for (int b = 0; b < 256; b++) {
        if (cells[b] == DEAD) {
            continue;
        }
        if (count == 0 || live[count - 1] != b - 1) {
            ranges[2 * runs++] = offsets[b];
        }
        ranges[2 * runs - 1] = offsets[b + 1];
        live[count++] = b;
    }
    result = Py_BuildValue("(y#y#)", (const char *)live, (Py_ssize_t)count * 8, (const char *)ranges,
                           (Py_ssize_t)runs * 16);
done:
    release(buffers, 2);
    return result;
}

/* loop_bits(tail_mask, by_first_byte, first_offsets, first) -> mask
 *
 * A loop row's mask (tokendfa.lazy.tables._loop_bits): the bits of
 * ``tail_mask`` (uint32 words: the tokens whose tail loops) of the tokens
 * whose first byte is in ``first`` (256 bools), as bytes. Of the bytes a
 * text token can start with (0x00-0x7F, 0xC2-0xF4), the side of ``first``
 * (in it or not) that starts fewer tokens is read: the tail mask's bits of
 * those tokens kept (in it) or cleared (not), the tokens by first byte in
 * ``by_first_byte`` (int64) at ``first_offsets`` (int64[257]). numpy took
 * ~10 calls and two fresh masks for it: ~20 us a new set of first bytes
 * warm, more in a fresh fork. */
static int text_first_byte(int b) {
    return b < 0x80 || (b >= 0xC2 && b <= 0xF4);
}

static PyObject *loop_bits(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 4, "loop_bits") < 0) {
        return NULL;
    }
    Buffer buffers[4] = {{0}};
    static const char *names[4] = {"tail_mask", "by_first_byte", "first_offsets", "first"};
    static const Py_ssize_t items[4] = {U32, 8, 8, U8};
    PyObject *result = NULL;
    for (int i = 0; i < 4; i++) {
        if (take(args[i], &buffers[i], names[i], items[i], 0) < 0) {
            goto done;
        }
    }
    const uint32_t *tail_mask = buffers[0].view.buf;
    const int64_t *tokens = buffers[1].view.buf, *offsets = buffers[2].view.buf;
    const uint8_t *first = buffers[3].view.buf;
    Py_ssize_t num_words = buffers[0].view.len / 4, num_tokens = buffers[1].view.len / 8;
    if (buffers[2].view.len != 257 * 8 || buffers[3].view.len != 256) {
        PyErr_SetString(PyExc_ValueError, "loop_bits: arrays of mismatched lengths");
        goto done;
    }
    int64_t inside = 0, outside = 0;
    for (int b = 0; b < 256; b++) {
        if (offsets[b] < 0 || offsets[b] > offsets[b + 1] || offsets[b + 1] > num_tokens) {
            PyErr_SetString(PyExc_IndexError, "loop_bits: a group outside the tokens");
            goto done;
        }
        if (text_first_byte(b)) {
            *(first[b] ? &inside : &outside) += offsets[b + 1] - offsets[b];
        }
    }
    int keep = inside <= outside;  /* read the tokens of first's bytes, else of the others */
    result = PyBytes_FromStringAndSize(NULL, num_words * 4);
    if (result == NULL) {
        goto done;
    }
    uint32_t *mask = (uint32_t *)PyBytes_AS_STRING(result);
    if (keep) {
        memset(mask, 0, (size_t)num_words * 4);
    } else {
        memcpy(mask, tail_mask, (size_t)num_words * 4);
    }
    int64_t bound = (int64_t)num_words * 32;
    for (int b = 0; b < 256; b++) {
        if (!text_first_byte(b) || (first[b] != 0) != keep) {
            continue;
        }
        for (int64_t j = offsets[b]; j < offsets[b + 1]; j++) {
            int64_t token = tokens[j];
            if (token < 0 || token >= bound) {
                Py_CLEAR(result);
                PyErr_SetString(PyExc_IndexError, "loop_bits: a token outside the mask");
                goto done;
            }
            uint32_t bit = (uint32_t)1 << (token & 31);
            if (keep) {
                mask[token >> 5] |= tail_mask[token >> 5] & bit;
            } else {
                mask[token >> 5] &= ~bit;
            }
        }
    }
done:
    release(buffers, 4);
    return result;
}

/* equal_bits(cells, value) -> (low, high): the first 128 cells (int32)
 * equal to ``value`` as bits 0-63 and 64-127 (a loop set's ASCII half,
 * tokendfa.lazy.index.LazyIndex._loop), where numpy's comparison,
 * packbits and views cost ~3 us a new state. */
static PyObject *equal_bits(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 2, "equal_bits") < 0) {
        return NULL;
    }
    long long value = PyLong_AsLongLong(args[1]);
    if (value == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Buffer buffer = {0};
    if (take(args[0], &buffer, "cells", 4, 0) < 0) {
        release(&buffer, 1);
        return NULL;
    }
    if (buffer.view.len < 128 * 4) {
        release(&buffer, 1);
        PyErr_SetString(PyExc_ValueError, "equal_bits: 128 cells at least expected");
        return NULL;
    }
    const int32_t *cells = buffer.view.buf;
    uint64_t halves[2] = {0, 0};
    for (int b = 0; b < 128; b++) {
        if (cells[b] == value) {
            halves[b >> 6] |= (uint64_t)1 << (b & 63);
        }
    }
    release(&buffer, 1);
    return Py_BuildValue("(KK)", (unsigned long long)halves[0], (unsigned long long)halves[1]);
}

/* row_first(first_row, target, lead) -> (first, key, outside, low, high)
 *
 * The bytes of a row (int32[256] cells) whose first character leads to
 * ``target`` (tokendfa.lazy.index.LazyIndex._loop_row): ``first`` (bytes
 * of 256 bools: the ASCII bytes whose cell is target, and the lead bytes
 * 0xC2-0xF4 when ``lead``), ``key`` (numpy's packbits of it, as the loop
 * mask and plan caches are keyed), ``outside`` (int64 bytes: the live
 * bytes, cell not DEAD, outside ``first``, ascending) and first's ASCII
 * bits as two ints (bits 0-63, 64-127, as a loop set's key). ~10 numpy
 * calls a cold row, ~5 us with the GIL. */
static PyObject *row_first(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 3, "row_first") < 0) {
        return NULL;
    }
    long long target = PyLong_AsLongLong(args[1]);
    int lead = PyObject_IsTrue(args[2]);
    if ((target == -1 && PyErr_Occurred()) || lead < 0) {
        return NULL;
    }
    Buffer buffer = {0};
    if (take(args[0], &buffer, "first_row", 4, 0) < 0) {
        release(&buffer, 1);
        return NULL;
    }
    if (buffer.view.len != 256 * 4) {
        release(&buffer, 1);
        PyErr_SetString(PyExc_ValueError, "row_first: a row of 256 cells expected");
        return NULL;
    }
    const int32_t *cells = buffer.view.buf;
    uint8_t first[256], key[32] = {0};
    int64_t outside[256];
    int outside_count = 0;
    uint64_t low = 0, high = 0;
    for (int b = 0; b < 256; b++) {
        first[b] = b < 128 ? cells[b] == target : (lead && b >= 0xC2 && b <= 0xF4);
        if (first[b]) {
            key[b >> 3] |= (uint8_t)(0x80 >> (b & 7));  /* packbits' big bit order */
            if (b < 64) {
                low |= (uint64_t)1 << b;
            } else if (b < 128) {
                high |= (uint64_t)1 << (b - 64);
            }
        } else if (cells[b] != DEAD) {
            outside[outside_count++] = b;
        }
    }
    release(&buffer, 1);
    return Py_BuildValue("(y#y#y#KK)", (const char *)first, (Py_ssize_t)256, (const char *)key, (Py_ssize_t)32,
                         (const char *)outside, (Py_ssize_t)outside_count * 8,
                         (unsigned long long)low, (unsigned long long)high);
}

/* chain_links(links, state, target, limit) -> (chain, end, ends)
 *
 * A chain row's chain (tokendfa.lazy.index.LazyIndex._chain) read off the
 * links its class has followed so far: ``links`` (int64, indexed by state)
 * holds each state's next state along the class (DEAD 0: every class byte
 * dies there; CHAIN_NO_LINK -2: the class's characters part ways;
 * CHAIN_UNSET -3, or a state past the array's end: not followed yet; the
 * state itself: the class loops there). From [state, target] it appends
 * each next state until the chain holds limit + 1 states (a loop repeats
 * its state to the end). ``chain`` (int64 bytes) and ``end``: CHAIN_FULL
 * (0), CHAIN_DIES (1) or CHAIN_STOPS (2), with ``ends`` the distinct states
 * of chain[1:] ascending (int64 bytes); or CHAIN_MISSING (-1) where the
 * last state of ``chain`` has no link yet (``ends`` empty): the caller
 * follows it and asks again. The Python loop over a dict of links cost
 * ~25 us a chain row of ~65 links (Snowplow sp_0's counted strings). */
#define CHAIN_NO_LINK (-2)
#define CHAIN_UNSET (-3)
#define CHAIN_MAX_LIMIT (1 << 20)
static int compare_int64(const void *left, const void *right) {
    int64_t a = *(const int64_t *)left, b = *(const int64_t *)right;
    return (a > b) - (a < b);
}

static PyObject *chain_links(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 4, "chain_links") < 0) {
        return NULL;
    }
    long long state = PyLong_AsLongLong(args[1]), target = PyLong_AsLongLong(args[2]);
    Py_ssize_t limit = PyLong_AsSsize_t(args[3]);
    if ((state == -1 || target == -1 || limit == -1) && PyErr_Occurred()) {
        return NULL;
    }
    if (state < 0 || target < 0 || limit < 1 || limit > CHAIN_MAX_LIMIT) {
        PyErr_SetString(PyExc_ValueError, "chain_links: a negative state or target, or a limit out of range");
        return NULL;
    }
    Buffer buffer = {0};
    if (take(args[0], &buffer, "links", 8, 0) < 0) {
        release(&buffer, 1);
        return NULL;
    }
    const int64_t *links = buffer.view.buf;
    Py_ssize_t num_links = buffer.view.len / 8;
    PyObject *chain = PyBytes_FromStringAndSize(NULL, 8 * (limit + 1)), *ends = NULL, *result = NULL;
    if (chain == NULL) {
        release(&buffer, 1);
        return NULL;
    }
    int64_t *out = (int64_t *)PyBytes_AS_STRING(chain);
    Py_ssize_t length = 2;
    int end = 0;
    out[0] = state;
    out[1] = target;
    while (length <= limit) {
        int64_t current = out[length - 1];
        int64_t following = current < num_links ? links[current] : CHAIN_UNSET;
        if (following < 0 && following != CHAIN_NO_LINK && following != CHAIN_UNSET) {
            PyErr_SetString(PyExc_ValueError, "chain_links: a link out of range");
            goto done;
        }
        if (following == CHAIN_UNSET) {
            end = -1;
            break;
        }
        if (following == DEAD || following == CHAIN_NO_LINK) {
            end = following == DEAD ? 1 : 2;
            break;
        }
        if (following == current) {
            while (length <= limit) {
                out[length++] = current;
            }
            break;
        }
        out[length++] = following;
    }
    if (end == -1) {
        ends = PyBytes_FromStringAndSize(NULL, 0);
    } else {
        /* the distinct states after the first, ascending: at most limit of them */
        ends = PyBytes_FromStringAndSize(NULL, 8 * (length - 1));
        if (ends != NULL) {
            int64_t *distinct = (int64_t *)PyBytes_AS_STRING(ends);
            memcpy(distinct, out + 1, 8 * (size_t)(length - 1));
            qsort(distinct, (size_t)(length - 1), 8, compare_int64);
            Py_ssize_t kept = 0;
            for (Py_ssize_t i = 0; i < length - 1; i++) {
                if (!kept || distinct[i] != distinct[kept - 1]) {
                    distinct[kept++] = distinct[i];
                }
            }
            _PyBytes_Resize(&ends, 8 * kept);
        }
    }
    if (ends != NULL && _PyBytes_Resize(&chain, 8 * length) == 0) {
        result = Py_BuildValue("(OiO)", chain, end, ends);
    }
done:
    Py_XDECREF(chain);
    Py_XDECREF(ends);
    release(&buffer, 1);
    return result;
}

/* A warm step's own arrays (a kept mask, the automaton's table), taken
 * without their format: numpy builds the format string and compares it with
 * the one it keeps at every request (~500 of the ~11,600 instructions of a
 * warm MaskBench step besides its copy, callgrind). Their callers pass the
 * index's own uint32/int32 arrays; only the lengths guard the reads. */
static int take_words(PyObject *object, Buffer *buffer) {
    if (PyObject_GetBuffer(object, &buffer->view, PyBUF_C_CONTIGUOUS) < 0) {
        return -1;
    }
    buffer->held = 1;
    if (buffer->view.itemsize != 4) {
        PyErr_SetString(PyExc_TypeError, "a buffer of 4-byte words expected");
        return -1;
    }
    return 0;
}

/* copy_mask(mask, out, row) -> bool
 *
 * A warm step's mask written (tokendfa.lazy.index.LazyIndex.write_mask_into):
 * the words of mask (the index's uint32 array) copied into out, a writable
 * C-contiguous buffer of 4-byte integers (int32 or uint32 numpy) at least
 * as wide as the mask, and the words past it cleared: a one-row buffer (row
 * None) or row ``row`` of a batch (a Python int, 0 <= row < rows; vLLM's
 * rows are as wide as the model's vocabulary, which may be wider than the
 * tokenizer's). False, with nothing written and no
 * error, for any other buffer or row: the caller's general copy then writes
 * it or raises its error. In numpy (the row's view, a casting
 * assignment, and for a wider row a second view and a fill) the copy was
 * ~7,100 instructions of cast loop and a few thousand more of calls; a
 * warm MaskBench step ran ~29,500 instructions before this and
 * advance_token, ~9,600 after besides the memmove (callgrind,
 * benchmarks/lazy_warm_steps.py). */
static PyObject *copy_mask(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 3, "copy_mask") < 0) {
        return NULL;
    }
    PyObject *row = args[2];
    Py_ssize_t at = -1;
    if (row != Py_None) {
        if (!PyLong_CheckExact(row)) {
            Py_RETURN_FALSE;
        }
        at = PyLong_AsSsize_t(row);
        if (at < 0) {
            PyErr_Clear();  /* a negative row (or one too large for an index): the general copy's */
            Py_RETURN_FALSE;
        }
    }
    if (!PyObject_CheckBuffer(args[1])) {
        Py_RETURN_FALSE;  /* a torch tensor, a list: the general copy */
    }
    Buffer buffers[2] = {{0}};
    if (take_words(args[0], &buffers[0]) < 0) {
        release(buffers, 2);
        return NULL;
    }
    if (PyObject_GetBuffer(args[1], &buffers[1].view,
                           PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) {
        PyErr_Clear();  /* read-only or strided: the general copy writes or refuses it */
        release(buffers, 2);
        Py_RETURN_FALSE;
    }
    buffers[1].held = 1;
    const Py_buffer *out = &buffers[1].view;
    Py_ssize_t words = buffers[0].view.len / 4, width = 0;
    char *target = NULL;
    /* the format says int32 or uint32, not float32 (the general copy refuses a float buffer) */
    if ((item_is(out, 4) || item_is(out, U32)) && out->shape != NULL && out->ndim == (at < 0 ? 1 : 2)) {
        width = out->shape[out->ndim - 1];
        if (width < words) {
            target = NULL;  /* too narrow: the general copy's error */
        } else if (at < 0) {
            target = out->buf;
        } else if (at < out->shape[0]) {
            target = (char *)out->buf + at * width * 4;
        }
    }
    if (target != NULL) {
        memmove(target, buffers[0].view.buf, (size_t)words * 4);
        memset(target + words * 4, 0, (size_t)(width - words) * 4);  /* past the vocabulary */
    }
    release(buffers, 2);
    return PyBool_FromLong(target != NULL);
}

/* advance_token(mask, table, tokens, state, token) -> int
 *
 * A warm step's commit (tokendfa.lazy.index.LazyIndex.advance): with bit
 * ``token`` of mask (the row of ``state``, uint32 words) set, ``state``
 * where tokens[token] is None (EOS, set only in a final state), else the
 * state after its bytes walked from ``state`` through table (the
 * automaton's cells, int32[rows, 256]). -1 in every other case, for the
 * caller's Python walk to answer: a bit clear (a refusal to raise), a token
 * or state that is not a Python int, a token outside tokens (a tuple of
 * bytes or None), a cell on the way not resolved yet (UNKNOWN) or a state
 * outside the table (one that grew since it was taken). The tokens' bytes
 * are read in place, with no reference taken: their pages stay shared with
 * a parent that forked this process. In Python the check, the walk (a
 * memoryview read a byte) and the table's property were three calls and
 * ~20 bytecodes a byte. */
static PyObject *advance_token(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (arity(nargs, 5, "advance_token") < 0) {
        return NULL;
    }
    PyObject *tokens = args[2];
    if (!PyLong_Check(args[3]) || !PyLong_Check(args[4]) || !PyTuple_CheckExact(tokens)) {
        return PyLong_FromLong(-1);
    }
    Py_ssize_t state = PyLong_AsSsize_t(args[3]);
    Py_ssize_t token = PyLong_AsSsize_t(args[4]);
    if ((state == -1 || token == -1) && PyErr_Occurred()) {
        PyErr_Clear();  /* too large for an index: the caller's walk says so */
        return PyLong_FromLong(-1);
    }
    if (token < 0 || token >= PyTuple_GET_SIZE(tokens)) {
        return PyLong_FromLong(-1);
    }
    PyObject *data = PyTuple_GET_ITEM(tokens, token);
    if (data != Py_None && !PyBytes_Check(data)) {
        return PyLong_FromLong(-1);
    }
    Buffer buffers[2] = {{0}};
    if (take_words(args[0], &buffers[0]) < 0 || take_words(args[1], &buffers[1]) < 0) {
        release(buffers, 2);
        return NULL;
    }
    const uint32_t *mask = buffers[0].view.buf;
    Py_ssize_t rows = buffers[1].view.len / (256 * 4);
    Py_ssize_t found = -1;
    if ((token >> 5) < buffers[0].view.len / 4 && (mask[token >> 5] >> (token & 31)) & 1) {
        found = state;
        if (data != Py_None) {
            const int32_t *table = buffers[1].view.buf;
            const unsigned char *bytes = (const unsigned char *)PyBytes_AS_STRING(data);
            Py_ssize_t length = PyBytes_GET_SIZE(data);
            for (Py_ssize_t i = 0; i < length && found >= 0; i++) {
                found = found < rows ? table[found * 256 + bytes[i]] : -1;
            }
            if (found >= rows) {
                found = -1;
            }
        }
    }
    release(buffers, 2);
    return PyLong_FromSsize_t(found < 0 ? -1 : found);
}

static PyMethodDef methods[] = {
    {"walk", (PyCFunction)(void (*)(void))walk, METH_FASTCALL,
     "Walk tokens through a byte automaton's resolved cells (see the module source)."},
    {"walk_packed", (PyCFunction)(void (*)(void))walk_packed, METH_FASTCALL,
     "walk for bytes packed in walking order (see the module source)."},
    {"walk_and_pack", (PyCFunction)(void (*)(void))walk_and_pack, METH_FASTCALL,
     "walk that packs the tokens' remaining bytes as it goes, for walk_packed (see the module source)."},
    {"pack", (PyCFunction)(void (*)(void))pack, METH_FASTCALL,
     "Pack tokens' remaining bytes one after another, for walk_packed."},
    {"set_bits", (PyCFunction)(void (*)(void))set_bits, METH_FASTCALL, "Set the bits of tokens in a uint32 mask."},
    {"group_bits", (PyCFunction)(void (*)(void))group_bits, METH_FASTCALL,
     "Set the bits of the tokens of some groups (by offsets) in a uint32 mask."},
    {"distinct", (PyCFunction)(void (*)(void))distinct, METH_FASTCALL, "The distinct int32 values, first met first."},
    {"walk_table", (PyCFunction)(void (*)(void))walk_table, METH_FASTCALL,
     "Walk tokens through a complete byte table: each one's end state (0: dead)."},
    {"leading_runs", (PyCFunction)(void (*)(void))leading_runs, METH_FASTCALL,
     "Each token's leading run of bytes in a set: bytes, ASCII bytes, characters."},
    {"skips", (PyCFunction)(void (*)(void))skips, METH_FASTCALL,
     "Each token's first byte after its first character outside a loop set (its length if none; 0: not text)."},
    {"tail_split", (PyCFunction)(void (*)(void))tail_split, METH_FASTCALL,
     "A loop set's tail tokens as a mask, and the other spelled tokens by first byte."},
    {"loop_rest", (PyCFunction)(void (*)(void))loop_rest, METH_FASTCALL,
     "A loop row's rest of some first bytes, packed from the grouped spellings."},
    {"tail_pack", (PyCFunction)(void (*)(void))tail_pack, METH_FASTCALL,
     "A tail set's rest packed from its resume points, with each entry's prefix shared with the one before."},
    {"grouped", (PyCFunction)(void (*)(void))grouped, METH_FASTCALL,
     "The int64 items of some groups (by offsets), one group after another, as a bytearray."},
    {"walk_plan", (PyCFunction)(void (*)(void))walk_plan, METH_FASTCALL,
     "A walk plan's tokens, first bytes, positions and skipped flags, as bytes (see the module source)."},
    {"chain_plan", (PyCFunction)(void (*)(void))chain_plan, METH_FASTCALL,
     "A chain plan's tokens, links, first bytes and positions, as bytes (see the module source)."},
    {"pack_plan", (PyCFunction)(void (*)(void))pack_plan, METH_FASTCALL,
     "A walk plan's packed bytes, made with the plan (see the module source)."},
    {"walk_row", (PyCFunction)(void (*)(void))walk_row, METH_FASTCALL,
     "A cold row's mask and successors from its packed plan: start states, walk and finish in one call."},
    {"loop_from", (PyCFunction)(void (*)(void))loop_from, METH_FASTCALL,
     "Where each packed entry's closing run of a loop set's bytes begins, for walk_row (see the module source)."},
    {"group_plan", (PyCFunction)(void (*)(void))group_plan, METH_FASTCALL,
     "A loop row's walk plan and its packed bytes, read from the vocabulary's groups (see the module source)."},
    {"common_prefixes", (PyCFunction)(void (*)(void))common_prefixes, METH_FASTCALL,
     "How many leading bytes each packed entry shares with the one before it (uint8, at most 255)."},
    {"walk_span", (PyCFunction)(void (*)(void))walk_span, METH_FASTCALL,
     "A cold row with no loop walked over ranges of the grouped spellings, with no plan (see the module source)."},
    {"finish_row", (PyCFunction)(void (*)(void))finish_row, METH_FASTCALL,
     "A cold row's mask and distinct successors from its walk, as bytes (see the module source)."},
    {"start_states", (PyCFunction)(void (*)(void))start_states, METH_FASTCALL,
     "The state each entry of a walk or chain plan starts in (see the module source)."},
    {"ascii_target", (PyCFunction)ascii_target, METH_O,
     "The state most ASCII cells of a row lead to (not DEAD; smallest id of a tie) and how many lead there."},
    {"row_runs", (PyCFunction)(void (*)(void))row_runs, METH_FASTCALL,
     "A row's live first bytes and the ranges of by_first_byte of their runs (see the module source)."},
    {"loop_bits", (PyCFunction)(void (*)(void))loop_bits, METH_FASTCALL,
     "A loop row's mask: a tail mask's bits of the tokens starting with given bytes (see the module source)."},
    {"equal_bits", (PyCFunction)(void (*)(void))equal_bits, METH_FASTCALL,
     "The first 128 int32 cells equal to a value, as two 64-bit halves."},
    {"row_first", (PyCFunction)(void (*)(void))row_first, METH_FASTCALL,
     "The bytes of a row whose first character leads to a target, as the loop caches key them (see the module source)."},
    {"chain_links", (PyCFunction)(void (*)(void))chain_links, METH_FASTCALL,
     "A chain row's chain of states read off its class's links, and its distinct ends (see the module source)."},
    {"copy_mask", (PyCFunction)(void (*)(void))copy_mask, METH_FASTCALL,
     "A warm mask copied into a caller's one-row or batch buffer of int32/uint32 words, or False (see the module source)."},
    {"advance_token", (PyCFunction)(void (*)(void))advance_token, METH_FASTCALL,
     "A warm step's commit: the state after a token, or -1 for the Python walk to answer (see the module source)."},
    {"count_released", (PyCFunction)count_released, METH_O,
     "Turn the count of released_ns() on (True) or off (False; the default)."},
    {"released_ns", (PyCFunction)released_ns, METH_NOARGS,
     "CPU time (each walking thread's own) that walks have spent without the GIL, in ns, over the process."},
    {"released_count", (PyCFunction)released_count, METH_NOARGS,
     "How many sections released_ns() has counted (each a point where the GIL may change hands)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef definition = {
    PyModuleDef_HEAD_INIT, "_cwalk",
    "The compiled inner loop of a lazy token row (tokendfa.lazy).", -1, methods,
};

PyMODINIT_FUNC PyInit__cwalk(void) {
    name_table = PyUnicode_InternFromString("table");
    name_step_held = PyUnicode_InternFromString("step_held");
    name_num_states = PyUnicode_InternFromString("num_states");
    if (name_table == NULL || name_step_held == NULL || name_num_states == NULL) {
        return NULL;
    }
#ifdef SCRATCH_KEPT
    if (!scratch_key_made && pthread_key_create(&scratch_key, scratch_drop) == 0) {
        scratch_key_made = 1;  /* else every walk takes its scratch from malloc */
    }
#endif
    return PyModule_Create(&definition);
}
