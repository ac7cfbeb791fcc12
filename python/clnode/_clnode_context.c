/* _clnode_context.c - clnode._clnode.Context, a clnode_context bound to one device: its
 * creation, its device's facts and probes (its solve: _clnode_solve.c). */
#include "_clnode_internal.h"

#include <stdlib.h>
#include <string.h>

static void context_dealloc(ContextObject *self)
{
    clnode_context_destroy(&self->ctx);
    free(self->log.data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int context_init(ContextObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"device", NULL};
    const char *device = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|z", kwlist, &device))
        return -1;
    if (self->ctx) {
        PyErr_SetString(PyExc_RuntimeError, "the context is already initialised");
        return -1;
    }
    clnode_context_options o;
    clnode_context_default_options(&o);
    o.device = device;
    o.log = on_log;
    o.log_user = &self->log;
    o.log_level = CLNODE_LOG_DEBUG;
    clnode_status st;
    Py_BEGIN_ALLOW_THREADS st = clnode_context_create(&o, &self->ctx);
    Py_END_ALLOW_THREADS
        /* without a context the message is only in the log: the last ERROR line */
        char msg[1024] = "";
    for (size_t i = 0; i < self->log.len;) { /* a record: level byte, code byte, message */
        const char *m = self->log.data + i + 2;
        if (self->log.data[i] == '0' + CLNODE_LOG_ERROR)
            snprintf(msg, sizeof msg, "%s", m);
        i += strlen(m) + 3;
    }
    if (flush_log(&self->log, "context") < 0 && st == CLNODE_OK)
        return -1;
    if (st != CLNODE_OK) {
        raise_status(st, msg);
        return -1;
    }
    return 0;
}

int context_ok(ContextObject *self)
{
    if (!self->ctx) {
        PyErr_SetString(PyExc_RuntimeError, "the context is not initialised");
        return 0;
    }
    if (self->busy) {
        PyErr_SetString(ContextBusyError, "this context is solving in another thread; a context "
                                          "is used by one thread at a time (make one per thread)");
        return 0;
    }
    return 1;
}

static PyObject *context_get_backend(ContextObject *self, void *c)
{
    (void)c;
    if (!context_ok(self))
        return NULL;
    return PyUnicode_FromString(clnode_context_backend(self->ctx));
}

static PyObject *context_get_device_name(ContextObject *self, void *c)
{
    (void)c;
    if (!context_ok(self))
        return NULL;
    return PyUnicode_FromString(clnode_context_device(self->ctx));
}

static PyObject *context_supports(ContextObject *self, PyObject *arg)
{
    long p = PyLong_AsLong(arg);
    if (p == -1 && PyErr_Occurred())
        return NULL;
    if (!context_ok(self))
        return NULL;
    return PyBool_FromLong(clnode_context_supports(self->ctx, (clnode_precision)p));
}

/* probe(precision, gemm_mode) -> dict of clnode_probe_result */
static PyObject *context_probe(ContextObject *self, PyObject *args)
{
    int prec, mode;
    if (!PyArg_ParseTuple(args, "ii", &prec, &mode))
        return NULL;
    if (!context_ok(self))
        return NULL;
    clnode_probe_result r;
    clnode_status st;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS st =
        clnode_probe_gemm(self->ctx, (clnode_precision)prec, (clnode_gemm_mode)mode, &r);
    Py_END_ALLOW_THREADS self->busy = 0;
    flush_log(&self->log, "probe");
    if (st != CLNODE_OK)
        return raise_status(st, clnode_context_last_error(self->ctx));
    return Py_BuildValue("{s:s,s:s,s:O,s:d,s:l,s:O,s:l,s:d,s:O,s:O,s:s,s:d}", "precision",
                         clnode_precision_name(r.precision), "gemm_precision",
                         clnode_gemm_mode_name(r.gemm_mode), "identity_exact",
                         r.identity_exact ? Py_True : Py_False, "identity_bits", r.identity_bits,
                         "identity_mismatches", r.identity_mismatches, "outer_exact",
                         r.outer_exact ? Py_True : Py_False, "outer_mismatches", r.outer_mismatches,
                         "random_bits", r.random_bits, "range_ok", r.range_ok ? Py_True : Py_False,
                         "denormals", r.denormals ? Py_True : Py_False, "gemm_class",
                         clnode_gemm_class_name(r.gemm_class), "unit_roundoff", r.unit_roundoff);
}

static PyObject *fact_value(int v)
{
    return v < 0 ? Py_NewRef(Py_None) : PyBool_FromLong(v);
}

static PyObject *context_facts(ContextObject *self, PyObject *noargs)
{
    (void)noargs;
    if (!context_ok(self))
        return NULL;
    clnode_device_facts f;
    clnode_status st = clnode_device_facts_get(self->ctx, &f);
    flush_log(&self->log, "facts");
    if (st != CLNODE_OK)
        return raise_status(st, clnode_context_last_error(self->ctx));
    return Py_BuildValue("{s:N,s:N,s:N,s:N}", "fp64", fact_value(f.fp64), "fma", fact_value(f.fma),
                         "denormals", fact_value(f.denormals), "correctly_rounded_div_sqrt",
                         fact_value(f.correctly_rounded_div_sqrt));
}

static PyMethodDef context_methods[] = {
    {"solve", (PyCFunction)(void (*)(void))context_solve, METH_VARARGS | METH_KEYWORDS,
     "solve(model, y0, options, *, save_ts, certify, certify_seed, t0s, t1s, dt0s, inputs, "
     "progress) -> (ts, ys, stats, t_final, certificate, tape, first_step): options a dict of the "
     "library's option table (solve_options()); save_ts (T,) shared by the batch or (B, T), a row "
     "per trajectory; progress None or fn(fraction, active, batch, steps); see clnode.solve."},
    {"supports", (PyCFunction)context_supports, METH_O, "supports(32 or 64) -> bool"},
    {"probe", (PyCFunction)context_probe, METH_VARARGS,
     "probe(precision, gemm_mode) -> dict: what the device's GEMM computes (clnode_probe_gemm)."},
    {"facts", (PyCFunction)context_facts, METH_NOARGS,
     "facts() -> dict: the driver's floating-point facts (clnode_device_facts_get)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef context_getset[] = {
    {"backend", (getter)context_get_backend, NULL, "\"host\", \"opencl\" or \"cuda\"", NULL},
    {"device_name", (getter)context_get_device_name, NULL, "human-readable device name", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject ContextType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "clnode._clnode.Context",
    .tp_basicsize = sizeof(ContextObject),
    .tp_dealloc = (destructor)context_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A clnode_context bound to one device. Use clnode.Context.",
    .tp_methods = context_methods,
    .tp_getset = context_getset,
    .tp_init = (initproc)context_init,
    .tp_new = PyType_GenericNew,
};
