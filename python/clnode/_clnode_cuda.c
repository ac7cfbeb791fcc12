/* _clnode_cuda.c - _clnode.solve_cuda: a solve of arrays in CUDA device memory on a context
 * adopting the caller's stream (clnode_context_create_cuda, clnode_solve_device), for
 * clnode.torch's CUDA tensors: y0, the inputs and the save times are read, and the values at the
 * save times written, on the caller's stream, with no copy through the host. */
#include "_clnode_internal.h"
#include "_clnode_xla_internal.h"

#include <stdint.h>

#ifdef CLNODE_HAVE_CUDA
/* t0s, t1s and dt0s (Python objects, None: the options') as host float64 arrays of B values:
 * tarr[i] holds a reference (the caller releases it), tptr[i] its data. -1 with an exception. */
static int time_arrays(PyObject *const tin[3], size_t B, PyArrayObject *tarr[3],
                       const double *tptr[3])
{
    for (int i = 0; i < 3; i++) {
        if (tin[i] == Py_None)
            continue;
        tarr[i] = (PyArrayObject *)PyArray_FROMANY(tin[i], NPY_DOUBLE, 1, 1, NPY_ARRAY_IN_ARRAY);
        if (!tarr[i])
            return -1;
        if ((size_t)PyArray_DIM(tarr[i], 0) != B) {
            PyErr_Format(InvalidArgumentError,
                         "solve_cuda: a time array of %zd values for %zu "
                         "trajectories",
                         (Py_ssize_t)PyArray_DIM(tarr[i], 0), B);
            return -1;
        }
        tptr[i] = PyArray_DATA(tarr[i]);
    }
    return 0;
}

/* The kept solution's tape bytes (clnode_solution_tape_export, tape_bytes of them) as a new
 * uint8 array, or NULL with an exception. */
static PyObject *tape_array(const clnode_model *model, const clnode_solution *kept,
                            size_t tape_bytes)
{
    const npy_intp dn[1] = {(npy_intp)tape_bytes};
    PyObject *tape = PyArray_SimpleNew(1, dn, NPY_UINT8);
    if (!tape)
        return NULL;
    const clnode_status st = clnode_solution_tape_export(
        NULL, model, kept, PyArray_DATA((PyArrayObject *)tape), tape_bytes, &tape_bytes);
    if (st != CLNODE_OK) {
        Py_DECREF(tape);
        raise_status(st, "clnode.torch: the tape's export failed");
        return NULL;
    }
    return tape;
}

/* solve_cuda's result tuple (stats, tinfo, saved, tape) from the host results of B
 * trajectories; tape NULL: None. NULL with an exception. */
static PyObject *solve_cuda_result(const clnode_trajectory_stats *stats, const size_t *saved,
                                   size_t B, PyObject *tape)
{
    PyObject *ret = NULL;
    const npy_intp d5[2] = {(npy_intp)B, 5}, d2[2] = {(npy_intp)B, 2}, d1[1] = {(npy_intp)B};
    PyArrayObject *so = (PyArrayObject *)PyArray_SimpleNew(2, d5, NPY_INT64);
    PyArrayObject *ti = (PyArrayObject *)PyArray_SimpleNew(2, d2, NPY_DOUBLE);
    PyArrayObject *sv = (PyArrayObject *)PyArray_SimpleNew(1, d1, NPY_INT64);
    if (so && ti && sv) {
        int64_t *s = PyArray_DATA(so), *n = PyArray_DATA(sv);
        double *t = PyArray_DATA(ti);
        for (size_t b = 0; b < B; b++) {
            s[5 * b + 0] = (int64_t)stats[b].result;
            s[5 * b + 1] = stats[b].num_steps;
            s[5 * b + 2] = stats[b].num_accepted;
            s[5 * b + 3] = stats[b].num_rejected;
            s[5 * b + 4] = stats[b].num_rhs_evals;
            t[2 * b + 0] = stats[b].first_step;
            t[2 * b + 1] = stats[b].t_final;
            n[b] = (int64_t)saved[b];
        }
        ret = PyTuple_Pack(4, so, ti, sv, tape ? tape : Py_None);
    }
    Py_XDECREF(so);
    Py_XDECREF(ti);
    Py_XDECREF(sv);
    return ret;
}
#endif

/* solve_cuda(model, options, *, device, stream, batch, y0, ys, save_ts, n_ts, ts_rows, inputs,
 * t0s, t1s, dt0s) -> (stats (B, 5) int64: result, num_steps, accepted, rejected, rhs_evals;
 * tinfo (B, 2) float64: first_step, t_final; saved (B,) int64: the save times reached; tape: the
 * kept solution's tape bytes (clnode_solution_tape_export) as a uint8 array with the options'
 * keep_tape, else None). y0, ys, save_ts and inputs are device pointers (ints; 0: none) in the
 * solve's precision; t0s, t1s, dt0s host float64 arrays of B values or None (the options' t0,
 * t1, dt0). */
PyObject *solve_cuda(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"model",  "options", "device",  "stream", "batch",
                             "y0",     "ys",      "save_ts", "n_ts",   "ts_rows",
                             "inputs", "t0s",     "t1s",     "dt0s",   NULL};
    PyObject *mo, *opts, *t0so = Py_None, *t1so = Py_None, *dt0so = Py_None;
    int device = 0, ts_rows = 0;
    unsigned long long stream = 0, y0 = 0, ys = 0, ts = 0, inputs = 0;
    Py_ssize_t batch = 0, n_ts = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!|$iKnKKKnpKOOO", kwlist, &ModelType, &mo,
                                     &PyDict_Type, &opts, &device, &stream, &batch, &y0, &ys, &ts,
                                     &n_ts, &ts_rows, &inputs, &t0so, &t1so, &dt0so))
        return NULL;
#ifndef CLNODE_HAVE_CUDA
    (void)mo;
    (void)opts;
    PyErr_SetString(DeviceError, "this build of clnode has no CUDA backend: CUDA tensors cannot "
                                 "be solved on their device");
    return NULL;
#else
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    if (apply_options(&o, opts) < 0)
        return NULL;
    if (batch < 1 || n_ts < 0) {
        PyErr_Format(InvalidArgumentError, "solve_cuda: batch %zd, n_ts %zd", batch, n_ts);
        return NULL;
    }
    const size_t B = (size_t)batch;
    PyArrayObject *tarr[3] = {NULL, NULL, NULL};
    PyObject *const tin[3] = {t0so, t1so, dt0so};
    const double *tptr[3] = {NULL, NULL, NULL};
    PyObject *ret = NULL, *tape = NULL;
    clnode_solution *kept = NULL;
    clnode_trajectory_stats *stats = NULL;
    size_t *saved = NULL;
    if (time_arrays(tin, B, tarr, tptr) < 0)
        goto done;
    clnode_device_problem p;
    clnode_device_problem_default(&p);
    p.batch = B;
    p.y0.handle = (void *)(uintptr_t)y0;
    p.t0s = tptr[0];
    p.t1s = tptr[1];
    p.dt0s = tptr[2];
    p.inputs.handle = (void *)(uintptr_t)inputs;
    p.save_ts.handle = (void *)(uintptr_t)ts;
    p.n_save_ts = (size_t)n_ts;
    p.save_ts_per_trajectory = ts_rows;
    p.ys.handle = (void *)(uintptr_t)ys;
    if (o.keep_tape)
        p.kept = &kept;
    stats = calloc(B, sizeof *stats);
    saved = calloc(B, sizeof *saved);
    if (!stats || !saved) {
        PyErr_NoMemory();
        goto done;
    }
    xla_fail e = {CLNODE_OK, ""};
    clnode_status st = CLNODE_OK;
    const clnode_model *model = ((ModelObject *)mo)->model;
    size_t tape_bytes = 0;
    Py_BEGIN_ALLOW_THREADS;
    cuda_adopted *a = cuda_adopt_take(device, (void *)(uintptr_t)stream, "clnode.torch", &e);
    if (a) {
        clnode_context *ctx = cuda_adopt_context(a);
        st = clnode_solve_device(ctx, model, &o, &p, stats, saved);
        if (st == CLNODE_OK && kept)
            st = clnode_solution_tape_export(ctx, model, kept, NULL, 0, &tape_bytes);
        if (st != CLNODE_OK)
            snprintf(e.msg, sizeof e.msg, "%s", clnode_context_last_error(ctx));
        cuda_adopt_give(a);
    } else {
        st = e.st;
    }
    Py_END_ALLOW_THREADS;
    if (st != CLNODE_OK) {
        raise_status(st, e.msg);
        goto done;
    }
    if (kept && !(tape = tape_array(model, kept, tape_bytes)))
        goto done;
    ret = solve_cuda_result(stats, saved, B, tape);
done:
    Py_XDECREF(tape);
    clnode_solution_destroy(&kept);
    for (int i = 0; i < 3; i++)
        Py_XDECREF(tarr[i]);
    free(stats);
    free(saved);
    return ret;
#endif
}
