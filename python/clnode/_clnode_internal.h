/* _clnode_internal.h - what the files of the extension clnode._clnode share: the numpy headers,
 * the exceptions, the log, Ctrl-C, the library's names and the three types (Model, Context, Tape).
 * One concern per file:
 *   _clnode.c          the module: its method table and init
 *   _clnode_errors.c   clnode.Error and its subclasses, a library status raised as one
 *   _clnode_log.c      the library's log handed to Python (clnode._log_sink)
 *   _clnode_sigint.c   Ctrl-C while the library works without the GIL
 *   _clnode_live.c     Python called inside that work: progress, kernel builds (_clnode_live.h)
 *   _clnode_names.c    the library's names of results, activations and methods
 *   _clnode_devices.c  the device listing
 *   _clnode_model.c    Model
 *   _clnode_context.c  Context, but for its solve
 *   _clnode_options.c  the solve option table, its flags and a solve's options from a dict
 *   _clnode_solve.c    Context.solve: its arrays, certificate and solution; save_slots
 *   _clnode_tape.c     Tape: a solution kept for its reverse pass
 *   _clnode_cuda.c     solve_cuda: clnode.torch's CUDA tensors solved on their device
 * Every name here is the extension's own: the version script (_clnode.map) keeps all but
 * PyInit__clnode private. Each file includes this header before any standard header, as Python.h
 * must be. */
#ifndef CLNODE_PY_INTERNAL_H
#define CLNODE_PY_INTERNAL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* numpy's C API table is one per extension (PY_ARRAY_UNIQUE_SYMBOL), filled by import_array in
 * the module's init (_clnode.c, which defines CLN_PY_IMPORT_ARRAY); the other files use it. */
#define PY_ARRAY_UNIQUE_SYMBOL clnode_ARRAY_API
#ifndef CLN_PY_IMPORT_ARRAY
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

/* The extension is built against numpy 2's headers (it then runs with numpy 1.23 and later, as
 * NPY_TARGET_VERSION says); an extension built against numpy 1.x's fails to import under numpy 2.
 * A numpy 1.x <numpy/arrayobject.h> found first (Debian's python3-numpy puts one in
 * /usr/include/python3.X/numpy) stops the build here rather than the import. */
#if !defined(NPY_ABI_VERSION) || NPY_ABI_VERSION < 0x02000000
#ifdef CLN_NUMPY_INCLUDE
#pragma message("clnode: the numpy headers meant for this build are in " CLN_NUMPY_INCLUDE)
#endif
#error "clnode: the <numpy/arrayobject.h> found first is numpy 1.x's (NPY_ABI_VERSION < 0x02000000), not numpy 2's: Debian's python3-numpy installs its 1.x headers as /usr/include/python3.X/numpy; the build must search numpy 2's include directory (numpy.get_include()) before Python's (python/meson.build)"
#endif

#include "clnode.h"
#include "_clnode_live.h"

/* ------------------------------------------------------------------------------------------------
 * Exceptions (_clnode_errors.c) */

extern PyObject *Error, *InvalidArgumentError, *ModelError, *FileError, *DeviceError,
    *UnsupportedError, *PrecisionError, *CancelledError, *ContextBusyError;

/* Raises the exception of `st` with `msg` (or the status's own message) and its status name as
 * the attribute `status`. Returns NULL. */
PyObject *raise_status(clnode_status st, const char *msg);

/* Creates clnode.Error and its subclasses and adds them to the module `m`, with STATUS, the
 * library's status codes by name. Returns 0, or -1 with an exception. */
int errors_add(PyObject *m);

/* ------------------------------------------------------------------------------------------------
 * The library's log (_clnode_log.c): collected in a buffer (the logger may run while the GIL is
 * released) and handed to clnode._log_sink(messages) after the call, with the GIL. */

typedef struct log_buf {
    char *data; /* records: one level byte, one code byte, the message, a NUL */
    size_t len, cap;
} log_buf;

/* The clnode_log_fn of a context (user: its log_buf): collects a message for the sink after the
 * call; a kernel build's goes to the sink at once (it announces a wait of up to a minute). */
void on_log(void *user, clnode_log_level level, clnode_log_code code, const char *message);

/* Passes the collected messages to the sink as a list of (level, code, message) and empties the
 * buffer. Keeps an exception already set (the sink's own failure is then dropped). */
int flush_log(log_buf *b, const char *origin);

/* _set_log_sink(sink): the module function that sets the sink. */
PyObject *set_log_sink(PyObject *self, PyObject *sink);

/* Adds LOG_CODES, the log codes by name, to the module `m`. Returns 0, or -1 with an exception. */
int log_codes_add(PyObject *m);

/* ------------------------------------------------------------------------------------------------
 * Ctrl-C (_clnode_sigint.c) */

#include "_clnode_sigint.h"

/* ------------------------------------------------------------------------------------------------
 * The library's names (_clnode_names.c) */

/* The library's names by code, as a tuple: name_at(0), name_at(1), ... up to the first NULL. */
PyObject *names_tuple(const char *(*name_at)(size_t));

/* The names as one string, "a, b, c", for messages. */
PyObject *names_text(const char *(*name_at)(size_t));

/* The name of result, activation or method i, NULL past the last. */
const char *result_at(size_t i);
const char *activation_at(size_t i);
const char *method_at(size_t i);

/* ------------------------------------------------------------------------------------------------
 * Model (_clnode_model.c) */

typedef struct {
    PyObject_HEAD clnode_model *model;
} ModelObject;

extern PyTypeObject ModelType;

/* A float64 array copy of n0 values (n1 0) or of n0 x n1 values at p. */
PyObject *copy_doubles(const double *p, npy_intp n0, npy_intp n1);

/* ------------------------------------------------------------------------------------------------
 * Context (_clnode_context.c; its solve in _clnode_solve.c) */

typedef struct {
    PyObject_HEAD clnode_context *ctx;
    log_buf log;
    int busy; /* a solve runs on it (read and written with the GIL held) */
} ContextObject;

extern PyTypeObject ContextType;

/* 1 if the context is initialised and not solving in another thread, else 0 with an exception. */
int context_ok(ContextObject *self);

/* Context.solve (_clnode_solve.c) */
PyObject *context_solve(ContextObject *self, PyObject *args, PyObject *kw);

/* solve_cuda(...): a solve of CUDA device arrays on the caller's stream (_clnode_cuda.c) */
PyObject *solve_cuda(PyObject *self, PyObject *args, PyObject *kw);

/* ------------------------------------------------------------------------------------------------
 * The solve options (_clnode_options.c) and the module functions of solves and devices */

/* The options of a solve from a dict {name: value} of the library's option table. Returns 0, or
 * -1 with InvalidArgumentError carrying the library's message. */
int apply_options(clnode_solve_options *o, PyObject *dict);

/* solve_options() -> the library's option table, a tuple of dicts in its order. */
PyObject *solve_options(PyObject *self, PyObject *noargs);

/* Adds the option flags OPTION_MIN_OPEN, ... OPTION_SAME_BITS (CLNODE_OPTION_* of
 * clnode/solver.h, the bits of solve_options()'s "flags") to the module `m`. Returns 0, or -1
 * with an exception. */
int option_flags_add(PyObject *m);

/* save_slots(*, save_t0, save_t1, n_ts, save_steps, max_steps) -> T (_clnode_solve.c) */
PyObject *save_slots(PyObject *self, PyObject *args, PyObject *kw);

/* devices() -> (device dicts, backend dicts) (_clnode_devices.c) */
PyObject *devices(PyObject *self, PyObject *noargs);

/* ------------------------------------------------------------------------------------------------
 * Tape (_clnode_tape.c) */

extern PyTypeObject TapeType;

/* A Tape taking *sol (NULL afterwards) of a solve on `context` of `model` with `slots` time slots
 * of dimension `dim`. Returns NULL with an exception (*sol left to the caller). */
PyObject *tape_wrap(clnode_solution **sol, PyObject *context, PyObject *model, size_t slots,
                    size_t dim);
PyObject *tape_import(PyObject *self, PyObject *args);

#endif /* CLNODE_PY_INTERNAL_H */
