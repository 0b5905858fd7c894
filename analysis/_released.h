/* The CPU time a compiled module spends without the GIL, counted on request.
 *
 * A cold row's compiled parts (the walk, tokendfa.lazy._cwalk; the cells its
 * state store resolves, tokendfa.analysis._lazycore) let the GIL go where
 * they can, so that other threads run Python meanwhile. How much of a row
 * that is bounds what several threads can gain (tokendfa.runtime.fill_masks,
 * benchmarks/bench_batch.py), so each module counts the CPU time (each
 * thread's own) it spent without the GIL, over the process: what its
 * ``released_ns()`` reports (and ``released_count()`` in how many sections)
 * once its ``count_released(True)`` has turned the count on. Off by default: a thread's CPU clock is a system call
 * (~0.5 us), two a pass.
 *
 * Included by both modules' sources (each keeps its own count, in the
 * static variables below); the build names this folder in their include
 * directories (pyproject.toml). Needs Python.h included first.
 */
#ifndef TOKENDFA_RELEASED_H
#define TOKENDFA_RELEASED_H

#include <stdint.h>
#include <time.h>

static uint64_t released_total;
static uint64_t released_sections;  /* how many times the GIL was let go (each a hand-off) */
static int counting_released;

/* The calling thread's CPU time in ns while the count is on, else 0. */
static uint64_t thread_ns(void) {
    if (!counting_released) {
        return 0;
    }
#ifdef CLOCK_THREAD_CPUTIME_ID
    struct timespec now;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now) == 0) {
        return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    }
#endif
    return 0;
}

/* Counts the time since ``since`` (a thread_ns() taken when the GIL was let
 * go): nothing when the count was off then (0) or is off now. */
static void released_add(uint64_t since) {
    if (counting_released && since != 0) {
        __atomic_fetch_add(&released_total, thread_ns() - since, __ATOMIC_RELAXED);
        __atomic_fetch_add(&released_sections, 1, __ATOMIC_RELAXED);
    }
}

static PyObject *count_released(PyObject *module, PyObject *on) {
    (void)module;
    int value = PyObject_IsTrue(on);
    if (value < 0) {
        return NULL;
    }
    counting_released = value;
    Py_RETURN_NONE;
}

static PyObject *released_ns(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    return PyLong_FromUnsignedLongLong(__atomic_load_n(&released_total, __ATOMIC_RELAXED));
}

/* The number of sections counted in released_ns(): with two threads on a
 * batch each is a point where the GIL may change hands, so the time over
 * the count says whether those hand-offs (a futex wake-up each, tens of
 * microseconds on a loaded machine) are worth what runs without it. */
static PyObject *released_count(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    return PyLong_FromUnsignedLongLong(__atomic_load_n(&released_sections, __ATOMIC_RELAXED));
}

#endif
