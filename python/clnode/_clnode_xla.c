/* _clnode_xla.c - clnode.jax's forward solve and reverse pass as XLA FFI handlers (the C ABI:
 * _xla_ffi.h), called by XLA inside a jitted program with no Python.
 *
 * A call's structure (method, options, save layout, the network's shape and activations, the
 * dtypes, the device) is a plan, made once at trace time (clnode/jax/_ffi.py) and named by an
 * int64 attribute; plans are never freed, so a plan lives as long as any executable that names
 * it. The numbers are operands, with the leading (vmap) axes the primitives give them: y0, t0,
 * t1, dt0, the save times, args, the field's factor s, the flat parameters and the step size
 * controller's traced numbers (ctrl: rtol, atol, coefficients; the plan names them), so that a new
 * value does not recompile. A handler runs on whatever thread XLA calls it on, without the GIL: it
 * takes a context of the plan's device from a pool (one per concurrent call, created on demand,
 * kept for the process), so two calls never share one. A forward solved for a gradient leaves its
 * solution in the tape registry under a token (a negative int32, its output; clnode.jax's eager
 * path uses positive ones), bounded in bytes (oldest dropped first); the reverse pass takes it, or
 * re-solves on a miss (the same steps and bits). Errors return XLA's error with the library's
 * message first. Ctrl-C: while a handler runs (on any thread) a SIGINT handler of ours sets a flag
 * that the library's cancel callback polls; the call ends CANCELLED and the interrupt is handed to
 * Python (PyErr_SetInterrupt, which needs no GIL). That handler is the one eager solves use
 * (_clnode_sigint.c): installed by the first of all those running to start, put back by the last
 * to end. The handlers and their state are in the files _clnode_xla_internal.h lists; this one is
 * their Python side: plans made, the capsules, the tape registry's bound and counts. */
#include "_clnode_xla_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------------
 * Python: plans, capsules, the tape registry's bound and counts */

/* The options ((name, text), ...: each as clnode-solve's --set takes it) parsed into o. */
static int plan_options(clnode_solve_options *o, PyObject *pairs)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pairs); i++) {
        const char *name, *text;
        char msg[320];
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(pairs, i), "ss", &name, &text))
            return -1;
        if (clnode_solve_option_parse(o, name, text, msg, sizeof msg) != CLNODE_OK) {
            PyErr_SetString(PyExc_ValueError, msg);
            return -1;
        }
    }
    return 0;
}

/* plan(options ((name, text), ...), device, sizes, biases, activation, final_activation,
 * time_input, k, n_ts, T, y_f64, t_f64, has_ts, has_scale, scale_traced, throw, checkpoint_every
 * [, ctrl_names: the options the operand ctrl gives per call, in its order]) -> int */
static PyObject *xla_plan_new(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *opts, *sizes, *biases, *ctrl;
    const char *device, *act, *fin;
    int time_input, y_f64, t_f64, has_ts, has_scale, scale_traced, throw_;
    Py_ssize_t k, n_ts, T;
    ctrl = NULL;
    long ckpt;
    if (!PyArg_ParseTuple(args, "O!sO!O!sspnnnppppppl|O!", &PyTuple_Type, &opts, &device,
                          &PyTuple_Type, &sizes, &PyTuple_Type, &biases, &act, &fin, &time_input,
                          &k, &n_ts, &T, &y_f64, &t_f64, &has_ts, &has_scale, &scale_traced,
                          &throw_, &ckpt, &PyTuple_Type, &ctrl))
        return NULL;
    xla_plan *p = calloc(1, sizeof *p);
    if (!p)
        return PyErr_NoMemory();
    const Py_ssize_t L = PyTuple_GET_SIZE(biases);
    if (L < 1 || L > XLA_MAX_LAYERS || PyTuple_GET_SIZE(sizes) != L + 1 ||
        strlen(device) >= sizeof p->device) {
        free(p);
        PyErr_SetString(PyExc_ValueError, "plan: layers, sizes or device out of range");
        return NULL;
    }
    snprintf(p->device, sizeof p->device, "%s", device);
    clnode_solve_default_options(&p->opts);
    p->L = (size_t)L;
    for (Py_ssize_t i = 0; i <= L; i++)
        p->sizes[i] = PyLong_AsSize_t(PyTuple_GET_ITEM(sizes, i));
    for (Py_ssize_t i = 0; i < L; i++) {
        p->has_bias[i] = PyObject_IsTrue(PyTuple_GET_ITEM(biases, i));
        p->n_params += p->sizes[i + 1] * p->sizes[i] + (p->has_bias[i] ? p->sizes[i + 1] : 0);
    }
    p->n = p->sizes[L];
    p->k = (size_t)k;
    p->n_ts = (size_t)n_ts;
    p->T = (size_t)T;
    p->time_input = time_input;
    p->y_f64 = y_f64;
    p->t_f64 = t_f64;
    p->has_ts = has_ts;
    p->has_scale = has_scale;
    p->scale_traced = scale_traced;
    p->throw_ = throw_;
    p->checkpoint_every = ckpt;
    for (Py_ssize_t i = 0; ctrl && i < PyTuple_GET_SIZE(ctrl); i++) {
        const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(ctrl, i));
        if (!name || p->n_ctrl == XLA_MAX_CTRL || strlen(name) >= sizeof p->ctrl_names[0]) {
            free(p);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "plan: controller options out of range");
            return NULL;
        }
        snprintf(p->ctrl_names[p->n_ctrl++], sizeof p->ctrl_names[0], "%s", name);
    }
    if (PyErr_Occurred() || plan_options(&p->opts, opts) < 0 ||
        clnode_activation_from_name(act, &p->act) != CLNODE_OK ||
        clnode_activation_from_name(fin, &p->fin) != CLNODE_OK) {
        free(p);
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "plan: activation %s or %s", act, fin);
        return NULL;
    }
    pthread_mutex_lock(&g_lock);
    if (g_nplans == g_capplans) {
        const size_t cap = g_capplans ? 2 * g_capplans : 16;
        xla_plan **np = realloc(g_plans, cap * sizeof *np);
        if (!np) {
            pthread_mutex_unlock(&g_lock);
            free(p);
            return PyErr_NoMemory();
        }
        g_plans = np;
        g_capplans = cap;
    }
    g_plans[g_nplans++] = p;
    const size_t h = g_nplans;
    pthread_mutex_unlock(&g_lock);
    return PyLong_FromSize_t(h);
}

static PyObject *xla_tape_stats(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    size_t tapes = 0;
    pthread_mutex_lock(&g_lock);
    tape_limit_from_env();
    for (xla_tape *t = g_tapes_old; t; t = t->next)
        tapes++;
    PyObject *d = Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:n,s:n,s:n}",
        "solves", g_solves, "trajectories", g_trajectories, "solve_ns", g_solve_ns, "reverses",
        g_reverses, "reverse_ns", g_reverse_ns, "fwd_ns", g_fwd_ns, "vjps", g_vjps, "vjp_ns",
        g_vjp_ns, "jvps", g_jvps, "jvp_ns", g_jvp_ns, "tangents", g_tangents, "tangent_ns",
        g_tangent_ns, "tangent_dirs", g_tangent_dirs, "tangent_trajectories",
        g_tangent_trajectories, "hits", g_hits, "misses", g_misses, "kept", g_kept, "dropped",
        g_dropped, "tapes", (Py_ssize_t)tapes, "bytes", (Py_ssize_t)g_tape_bytes, "limit",
        (Py_ssize_t)g_tape_limit);
    pthread_mutex_unlock(&g_lock);
    return d;
}

static PyObject *xla_set_tape_limit(PyObject *self, PyObject *arg)
{
    (void)self;
    const size_t limit = PyLong_AsSize_t(arg);
    if (limit == (size_t)-1 && PyErr_Occurred())
        return NULL;
    pthread_mutex_lock(&g_lock);
    g_tape_limit_read = 1;
    const size_t old = g_tape_limit;
    g_tape_limit = limit;
    xla_tape *drop = tapes_trim(limit);
    pthread_mutex_unlock(&g_lock);
    tapes_free_list(drop);
    return PyLong_FromSize_t(old);
}

static PyMethodDef xla_methods[] = {
    {"plan", xla_plan_new, METH_VARARGS, "a call's plan, fixed for the process: its handle"},
    {"tape_stats", xla_tape_stats, METH_NOARGS, "the tape registry's counts"},
    {"set_tape_limit", xla_set_tape_limit, METH_O, "the registry's bound in bytes; the old one"},
    {NULL, NULL, 0, NULL}};

/* A capsule of handler h, as jax.ffi.register_ffi_target takes it. */
PyObject *xla_capsule(cxf_handler *h)
{
    union {
        cxf_handler *f;
        void *p;
    } u;
    u.f = h;
    return PyCapsule_New(u.p, NULL, NULL);
}

PyObject *clnode_xla_functions(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    PyObject *fwd = xla_capsule(clnode_xla_fwd), *vjp = xla_capsule(clnode_xla_vjp);
    PyObject *jvp = xla_capsule(clnode_xla_jvp);
    PyObject *api = Py_BuildValue("(ii)", CXF_API_MAJOR, CXF_API_MINOR);
    int bad = !fwd || !vjp || !jvp || !api || PyDict_SetItemString(d, "fwd", fwd) < 0 ||
              PyDict_SetItemString(d, "vjp", vjp) < 0 || PyDict_SetItemString(d, "jvp", jvp) < 0 ||
              PyDict_SetItemString(d, "api", api) < 0;
    Py_XDECREF(fwd);
    Py_XDECREF(vjp);
    Py_XDECREF(jvp);
    Py_XDECREF(api);
    for (PyMethodDef *m = xla_methods; !bad && m->ml_name; m++) {
        PyObject *fn = PyCFunction_New(m, self);
        bad = !fn || PyDict_SetItemString(d, m->ml_name, fn) < 0;
        Py_XDECREF(fn);
    }
    if (bad)
        Py_CLEAR(d);
    return d;
}
