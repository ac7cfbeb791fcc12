/* _clnode_solve.c - Context.solve: the arrays it reads, the solve and its precision certificate
 * without the GIL, the arrays of the solution as diffrax lays out the saved points (t0, then ts
 * and steps in time order, then t1, padded with +inf); save_slots, their count known before. */
#include "_clnode_internal.h"

#include <stdlib.h>
#include <string.h>

/* Certifies a finished solve (clnode_certify with the certificate's fraction and seed), with the
 * GIL released by the caller: the solve's options, cancel callback included, reach the
 * re-solves. */
static clnode_status certify_nogil(ContextObject *self, const clnode_model *model,
                                   const clnode_solve_options *o, const clnode_problem *p,
                                   const clnode_solution *sol, double fraction,
                                   unsigned long long seed, clnode_certificate **out)
{
    clnode_certify_options co;
    clnode_certify_default_options(&co);
    co.fraction = fraction;
    co.seed = (uint64_t)seed;
    return clnode_certify(self->ctx, model, o, p, sol, &co, out);
}

/* The precision certificate of a finished solve (clnode_certify, clnode/precision.h) as a dict:
 * the summary's fields and "samples", a list of dicts, one per re-solved trajectory (the
 * certificate is destroyed). */
static PyObject *certificate_dict(clnode_certificate *c)
{
    clnode_certificate_summary sm;
    clnode_certificate_get(c, &sm);
    PyObject *samples = PyList_New((Py_ssize_t)sm.num_sampled);
    for (size_t k = 0; samples && k < sm.num_sampled; ++k) {
        clnode_certificate_sample p;
        clnode_certificate_sample_get(c, k, &p);
        PyObject *d =
            Py_BuildValue("{s:n,s:d,s:d,s:l,s:l,s:l,s:O,s:O}", "trajectory", (Py_ssize_t)p.traj,
                          "deviation_rtol", p.deviation_rtol, "spread_rtol", p.spread_rtol, "steps",
                          p.steps, "steps_min", p.steps_min, "steps_max", p.steps_max, "complete",
                          p.complete ? Py_True : Py_False, "within", p.within ? Py_True : Py_False);
        if (!d) {
            Py_CLEAR(samples);
            break;
        }
        PyList_SET_ITEM(samples, (Py_ssize_t)k, d);
    }
    clnode_certificate_destroy(&c);
    if (!samples)
        return NULL;
    return Py_BuildValue(
        "{s:O,s:n,s:n,s:n,s:n,s:d,s:d,s:d,s:n,s:d,s:N}", "certified",
        sm.certified ? Py_True : Py_False, "batch", (Py_ssize_t)sm.batch, "num_sampled",
        (Py_ssize_t)sm.num_sampled, "num_failed", (Py_ssize_t)sm.num_failed, "num_ill_conditioned",
        (Py_ssize_t)sm.num_ill_conditioned, "rtol", sm.rtol, "max_deviation_rtol",
        sm.max_deviation_rtol, "max_spread_rtol", sm.max_spread_rtol, "worst_trajectory",
        (Py_ssize_t)sm.worst_traj, "seconds", sm.seconds, "samples", samples);
}

/* A per-trajectory float64 array argument (None: absent): `ndim` dimensions, the first of B rows
 * and, for ndim 2, `cols` columns. Returns 0 with *out set (or NULL for None), -1 with an
 * exception. */
static int batch_array(PyObject *o, const char *name, int ndim, size_t B, size_t cols,
                       PyArrayObject **out)
{
    *out = NULL;
    if (o == Py_None)
        return 0;
    PyArrayObject *a =
        (PyArrayObject *)PyArray_FROMANY(o, NPY_DOUBLE, ndim, ndim, NPY_ARRAY_IN_ARRAY);
    if (!a)
        return -1;
    if ((size_t)PyArray_DIM(a, 0) != B || (ndim == 2 && (size_t)PyArray_DIM(a, 1) != cols)) {
        if (ndim == 2)
            PyErr_Format(InvalidArgumentError, "%s must have shape (%zu, %zu), not (%zd, %zd)",
                         name, B, cols, (Py_ssize_t)PyArray_DIM(a, 0),
                         (Py_ssize_t)PyArray_DIM(a, 1));
        else
            PyErr_Format(InvalidArgumentError, "%s must have shape (%zu,), not (%zd,)", name, B,
                         (Py_ssize_t)PyArray_DIM(a, 0));
        Py_DECREF(a);
        return -1;
    }
    *out = a;
    return 0;
}

/* The largest max_steps with saved steps: the arrays returned have max_steps slots per
 * trajectory (diffrax's layout), allocated before the solve. */
#define MAX_STEPS_SAVED (1L << 24)

/* max_steps in the library's range and, with saved steps, in MAX_STEPS_SAVED. Returns 0, or -1
 * with InvalidArgumentError. */
static int check_max_steps(const clnode_solve_options *o)
{
    if (o->max_steps >= 1 && o->max_steps <= CLNODE_MAX_STEPS_LIMIT &&
        (!o->save_steps || o->max_steps <= MAX_STEPS_SAVED))
        return 0;
    if (o->save_steps)
        PyErr_Format(InvalidArgumentError,
                     "max_steps must be in [1, %ld] with SaveAt(steps=True), whose arrays have "
                     "max_steps slots per trajectory ([1, %ld] otherwise) (got %ld)",
                     MAX_STEPS_SAVED, (long)CLNODE_MAX_STEPS_LIMIT, o->max_steps);
    else
        PyErr_Format(InvalidArgumentError, "max_steps must be in [1, %ld] (got %ld)",
                     (long)CLNODE_MAX_STEPS_LIMIT, o->max_steps);
    return -1;
}

/* The arrays a solve reads: y0 and the optional ones (NULL: absent). */
typedef struct solve_arrays {
    PyArrayObject *y0, *ts, *t0s, *t1s, *dt0s, *inputs;
} solve_arrays;

static void solve_arrays_release(solve_arrays *in)
{
    Py_XDECREF(in->y0);
    Py_XDECREF(in->ts);
    Py_XDECREF(in->t0s);
    Py_XDECREF(in->t1s);
    Py_XDECREF(in->dt0s);
    Py_XDECREF(in->inputs);
}

/* y0 (B, N) and the optional t0s, t1s, dt0s, inputs and ts arguments (None: absent) as float64
 * arrays in `in`, checked against the model's dimensions, with the problem pointing at their
 * data. ts: (T,), one list shared by the batch, or (B, T), each trajectory its own row
 * (clnode_problem.save_ts_per_trajectory). Returns 0, or -1 with an exception (the arrays read
 * so far stay in `in`). */
static int read_solve_arrays(solve_arrays *in, const clnode_model *model, PyObject *yo,
                             PyObject *tso, PyObject *t0so, PyObject *t1so, PyObject *dt0so,
                             PyObject *ino, clnode_problem *p)
{
    const size_t N = clnode_model_dim(model);
    in->y0 = (PyArrayObject *)PyArray_FROMANY(yo, NPY_DOUBLE, 2, 2, NPY_ARRAY_IN_ARRAY);
    if (!in->y0)
        return -1;
    if ((size_t)PyArray_DIM(in->y0, 1) != N) {
        PyErr_Format(InvalidArgumentError, "y0 has %zd components but the model's state has %zu",
                     (Py_ssize_t)PyArray_DIM(in->y0, 1), N);
        return -1;
    }
    const size_t B = (size_t)PyArray_DIM(in->y0, 0);
    if (batch_array(t0so, "t0", 1, B, 0, &in->t0s) < 0 ||
        batch_array(t1so, "t1", 1, B, 0, &in->t1s) < 0 ||
        batch_array(dt0so, "dt0", 1, B, 0, &in->dt0s) < 0 ||
        batch_array(ino, "args", 2, B, clnode_model_num_inputs(model), &in->inputs) < 0)
        return -1;
    clnode_problem_default(p);
    p->batch = B;
    p->y0 = PyArray_DATA(in->y0);
    p->t0s = in->t0s ? PyArray_DATA(in->t0s) : NULL;
    p->t1s = in->t1s ? PyArray_DATA(in->t1s) : NULL;
    p->dt0s = in->dt0s ? PyArray_DATA(in->dt0s) : NULL;
    p->inputs = in->inputs ? PyArray_DATA(in->inputs) : NULL;
    if (tso != Py_None) {
        in->ts = (PyArrayObject *)PyArray_FROMANY(tso, NPY_DOUBLE, 1, 2, NPY_ARRAY_IN_ARRAY);
        if (!in->ts)
            return -1;
        const int rows = PyArray_NDIM(in->ts) == 2;
        if (rows && (size_t)PyArray_DIM(in->ts, 0) != B) {
            PyErr_Format(InvalidArgumentError,
                         "save_ts of shape (%zd, %zd): a row of save times per trajectory needs "
                         "%zu rows, one per trajectory of y0",
                         (Py_ssize_t)PyArray_DIM(in->ts, 0), (Py_ssize_t)PyArray_DIM(in->ts, 1), B);
            return -1;
        }
        p->save_ts = PyArray_DATA(in->ts);
        p->n_save_ts = (size_t)PyArray_DIM(in->ts, rows ? 1 : 0);
        p->save_ts_per_trajectory = rows;
    }
    return 0;
}

/* The solve and, when certify (a fraction) > 0, its certificate, without the GIL and under one
 * SIGINT handler: Ctrl-C cancels either. Returns the certificate's dict (None without one) with
 * *sol set, or NULL with an exception and *sol destroyed. */
static PyObject *solve_certify(ContextObject *self, const clnode_model *model,
                               clnode_solve_options *o, const clnode_problem *p, double certify,
                               unsigned long long certify_seed, PyObject *progress,
                               clnode_solution **sol)
{
    clnode_status st;
    const int sig = sigint_install();
    if (sig) {
        o->cancel = on_cancel;
        o->cancel_user = NULL;
    }
    py_progress pp = {progress, NULL, NULL, NULL};
    if (progress != Py_None) {
        o->progress = py_progress_call;
        o->progress_user = &pp;
    }
    clnode_certificate *c = NULL;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS st = clnode_solve(self->ctx, model, o, p, sol);
    if (st == CLNODE_OK && certify > 0)
        st = certify_nogil(self, model, o, p, *sol, certify, certify_seed, &c);
    Py_END_ALLOW_THREADS self->busy = 0;
    o->progress = NULL; /* pp ends here */
    o->progress_user = NULL;
    const int interrupted = sig && sigint_restore();
    const int raised = py_progress_finish(&pp) < 0; /* the callback's exception */
    const int failed = flush_log(&self->log, "solve") < 0 || raised ||
                       (interrupted && PyErr_CheckSignals() < 0); /* Python's handler raised */
    if (!failed && st != CLNODE_OK) /* CANCELLED too: a Python handler that did not raise */
        raise_status(st, clnode_context_last_error(self->ctx));
    PyObject *cert = NULL;
    if (!failed && st == CLNODE_OK) {
        cert = c ? certificate_dict(c) : Py_None;
        c = NULL;
        if (cert == Py_None)
            Py_INCREF(cert);
    }
    clnode_certificate_destroy(&c);
    if (!cert)
        clnode_solution_destroy(sol);
    return cert;
}

/* Trajectory b's stats (result, num_steps, num_accepted, num_rejected, num_rhs_evals), t_final
 * and first_step. Needs no GIL. */
static void trajectory_stats(const clnode_solution *sol, size_t b, int64_t *sp, double *tfp,
                             double *fsp)
{
    clnode_trajectory_stats s;
    clnode_solution_stats(sol, b, &s);
    sp[5 * b + 0] = s.result;
    sp[5 * b + 1] = s.num_steps;
    sp[5 * b + 2] = s.num_accepted;
    sp[5 * b + 3] = s.num_rejected;
    sp[5 * b + 4] = s.num_rhs_evals;
    tfp[b] = s.t_final;
    fsp[b] = s.first_step;
}

/* The arrays of a solution of B trajectories with T time slots (float32 ts and ys when f32).
 * Needs no GIL. Returns clnode_solution_rows's status. */
static clnode_status solution_fill(const clnode_solution *sol, size_t B, size_t T, int f32,
                                   int64_t *sp, double *tfp, double *fsp, void *tsp, void *ysp)
{
    for (size_t b = 0; b < B; ++b)
        trajectory_stats(sol, b, sp, tfp, fsp);
    return f32 ? clnode_solution_rows_f32(sol, 0, B, T, tsp, ysp)
               : clnode_solution_rows_f64(sol, 0, B, T, tsp, ysp);
}

/* The tuple (ts, ys, stats, t_final, cert, tape, first_step) of a solution of the problem's B
 * trajectories with T time slots of dimension N; tape is a Tape holding sol when tape_of (the
 * context and the model solved) is given, else None and sol is destroyed. Takes sol and cert's
 * reference, also on failure. Returns NULL with an exception. */
static PyObject *solution_tuple(clnode_solution *sol, const clnode_solve_options *o,
                                const clnode_problem *p, size_t T, size_t N, PyObject *cert,
                                PyObject *const *tape_of)
{
    const size_t B = p->batch;
    const int f32 = o->precision == CLNODE_FP32;
    npy_intp d3[3] = {(npy_intp)B, (npy_intp)T, (npy_intp)N}, d2[2] = {(npy_intp)B, 5};
    const int dt = f32 ? NPY_FLOAT : NPY_DOUBLE;
    PyObject *ts = PyArray_SimpleNew(2, d3, dt), *ys = PyArray_SimpleNew(3, d3, dt);
    PyObject *sa = PyArray_SimpleNew(2, d2, NPY_INT64), *tf = PyArray_SimpleNew(1, d3, NPY_DOUBLE);
    PyObject *fs = PyArray_SimpleNew(1, d3, NPY_DOUBLE);
    if (!ts || !ys || !sa || !tf || !fs) {
        Py_DECREF(cert);
        Py_XDECREF(ts);
        Py_XDECREF(ys);
        Py_XDECREF(sa);
        Py_XDECREF(tf);
        Py_XDECREF(fs);
        clnode_solution_destroy(&sol);
        return NULL;
    }
    int64_t *sp = PyArray_DATA((PyArrayObject *)sa);
    double *tfp = PyArray_DATA((PyArrayObject *)tf), *fsp = PyArray_DATA((PyArrayObject *)fs);
    void *tsp = PyArray_DATA((PyArrayObject *)ts), *ysp = PyArray_DATA((PyArrayObject *)ys);
    clnode_status st;
    Py_BEGIN_ALLOW_THREADS st = solution_fill(sol, B, T, f32, sp, tfp, fsp, tsp, ysp);
    Py_END_ALLOW_THREADS PyObject *tape = NULL;
    if (st != CLNODE_OK)
        raise_status(st, "the solution has more saved points than its slots");
    else
        tape = tape_of ? tape_wrap(&sol, tape_of[0], tape_of[1], T, N) : Py_NewRef(Py_None);
    clnode_solution_destroy(&sol);
    if (!tape) {
        Py_DECREF(cert);
        Py_DECREF(ts);
        Py_DECREF(ys);
        Py_DECREF(sa);
        Py_DECREF(tf);
        Py_DECREF(fs);
        return NULL;
    }
    return Py_BuildValue("(NNNNNNN)", ts, ys, sa, tf, cert, tape, fs);
}

/* Context.solve(model, y0, ...) -> (ts, ys, stats, t_final, certificate, tape, first_step)
 *   y0: (B, N) float64 C-contiguous; t0s, t1s, dt0s: None or (B,) float64 (every trajectory's
 *   own t0, t1, dt0: clnode_solve_options t0s, t1s, dt0s); inputs: None or (B, k) float64 for a
 *   model with k conditioning inputs; ts (B, T) and ys (B, T, N) in float32 for fp32 solves and
 *   float64 for fp64, padded with +inf as diffrax pads (clnode_solution_rows); stats (B, 5) int64:
 *   result, num_steps, num_accepted, num_rejected, num_rhs_evals; t_final (B,) float64;
 *   first_step (B,) float64: each trajectory's first step (clnode_trajectory_stats.first_step);
 *   certificate: a dict when certify (a fraction) > 0, else None. */

PyObject *context_solve(ContextObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"model", "y0",  "options", "save_ts", "certify",  "certify_seed",
                             "t0s",   "t1s", "dt0s",    "inputs",  "progress", NULL};
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    PyObject *mo, *yo, *opts, *tso = Py_None, *t0so = Py_None, *t1so = Py_None, *dt0so = Py_None,
                              *ino = Py_None, *progress = Py_None;
    double certify = 0.0; /* the certificate's fraction; 0: none */
    unsigned long long certify_seed = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!OO!|$OdKOOOOO", kwlist, &ModelType, &mo, &yo,
                                     &PyDict_Type, &opts, &tso, &certify, &certify_seed, &t0so,
                                     &t1so, &dt0so, &ino, &progress) ||
        check_progress(progress) < 0)
        return NULL;
    if (!context_ok(self) || apply_options(&o, opts) < 0)
        return NULL;
    const clnode_model *model = ((ModelObject *)mo)->model;
    solve_arrays in = {NULL, NULL, NULL, NULL, NULL, NULL};
    PyObject *ret = NULL;
    clnode_problem p;
    if (read_solve_arrays(&in, model, yo, tso, t0so, t1so, dt0so, ino, &p) < 0 ||
        check_max_steps(&o) < 0)
        goto done;
    const size_t N = clnode_model_dim(model);
    size_t T;
    const clnode_status st = clnode_save_slots(self->ctx, &o, &p, &T);
    if (st != CLNODE_OK) {
        raise_status(st, clnode_context_last_error(self->ctx));
        goto done;
    }
    clnode_solution *sol = NULL;
    PyObject *cert = solve_certify(self, model, &o, &p, certify, certify_seed, progress, &sol);
    PyObject *const tape_of[2] = {(PyObject *)self, mo};
    if (cert)
        ret = solution_tuple(sol, &o, &p, T, N, cert, o.keep_tape ? tape_of : NULL);
done:
    solve_arrays_release(&in);
    return ret;
}

/* save_slots(*, save_t0, save_t1, n_ts, save_steps, max_steps) -> T: the time slots of every
 * trajectory's row of Context.solve's arrays (clnode_save_slots), for shapes known before the
 * solve (clnode.jax at trace time). InvalidArgumentError as Context.solve refuses max_steps. */
PyObject *save_slots(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"save_t0", "save_t1", "n_ts", "save_steps", "max_steps", NULL};
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    Py_ssize_t n_ts = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$ppnpl", kwlist, &o.save_t0, &o.save_t1, &n_ts,
                                     &o.save_steps, &o.max_steps))
        return NULL;
    if (n_ts < 0)
        return PyErr_Format(InvalidArgumentError, "n_ts must not be negative (got %zd)", n_ts);
    if (check_max_steps(&o) < 0)
        return NULL;
    /* the count is all that is read: any non-NULL list of n_ts times */
    static const double no_times[1] = {0.0};
    clnode_problem p;
    clnode_problem_default(&p);
    p.save_ts = n_ts ? no_times : NULL;
    p.n_save_ts = (size_t)n_ts;
    size_t T;
    const clnode_status st = clnode_save_slots(NULL, &o, &p, &T);
    if (st != CLNODE_OK)
        return raise_status(st, "clnode_save_slots refused the save options");
    return PyLong_FromSize_t(T);
}
