/* _clnode_live.h - what the extension runs in Python while the library works without the GIL:
 * a solve's or a reverse pass's progress callback, and the log lines that must be seen as they
 * happen (the kernel builds). Only where the caller asked for progress does Python run for it;
 * without a callback the library's is NULL. */
#ifndef CLNODE_PY_LIVE_H
#define CLNODE_PY_LIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "clnode.h"

/* A Python progress callable and the exception it raised (NULL while none). */
typedef struct py_progress {
    PyObject *fn;                   /* borrowed: called as fn(fraction, active, batch, steps) */
    PyObject *etype, *evalue, *etb; /* its exception (PyErr_Fetch's), etype NULL while none */
} py_progress;

/* progress: None or a callable (checked before any work). Returns 0, or -1 with TypeError. */
int check_progress(PyObject *progress);

/* clnode_progress_fn for a py_progress (user): takes the GIL and calls fn; an exception is kept
 * and cancels the work (returns 1). */
int py_progress_call(void *user, size_t active, size_t batch, double fraction, long steps);

/* After the work, with the GIL: raises the kept exception (returns -1), else returns 0. The
 * callback's exception wins over the library's CLNODE_ERR_CANCELLED it caused. */
int py_progress_finish(py_progress *p);

/* Passes one log message to sink(messages, origin) at once, taking the GIL (the calling thread
 * may hold it or not); a failure of the sink is reported as unraisable, never raised. */
void py_log_now(PyObject *sink, clnode_log_level level, clnode_log_code code, const char *message,
                const char *origin);

#endif /* CLNODE_PY_LIVE_H */
