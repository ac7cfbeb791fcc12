/* _clnode_tape.c - clnode._clnode.Tape: a solution kept for its reverse pass (keep_tape), and
 * that pass and the tangent pass (forward mode) on a context. */
#include "_clnode_internal.h"

#include <string.h>

#include "clnode/tangent.h"

typedef struct {
    PyObject_HEAD clnode_solution *sol;
    PyObject *context; /* the Context it was solved on and its Model, kept alive */
    PyObject *model;
    size_t slots, dim; /* the solution's time slots per trajectory and state dimension */
} TapeObject;

PyObject *tape_wrap(clnode_solution **sol, PyObject *context, PyObject *model, size_t slots,
                    size_t dim)
{
    TapeObject *t = PyObject_New(TapeObject, &TapeType);
    if (!t)
        return NULL;
    t->sol = *sol;
    *sol = NULL;
    t->context = Py_NewRef(context);
    t->model = Py_NewRef(model);
    t->slots = slots;
    t->dim = dim;
    return (PyObject *)t;
}

static void tape_dealloc(TapeObject *self)
{
    clnode_solution_destroy(&self->sol);
    Py_XDECREF(self->context);
    Py_XDECREF(self->model);
    PyObject_Free(self);
}

/* The cotangent argument: float64 (B, slots, N), C-contiguous. Returns NULL with an exception. */
static PyArrayObject *cotangent_array(PyObject *o, size_t B, size_t slots, size_t N)
{
    PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(o, NPY_DOUBLE, 3, 3, NPY_ARRAY_IN_ARRAY);
    if (!a)
        return NULL;
    if ((size_t)PyArray_DIM(a, 0) != B || (size_t)PyArray_DIM(a, 1) != slots ||
        (size_t)PyArray_DIM(a, 2) != N) {
        PyErr_Format(InvalidArgumentError,
                     "the cotangent of ys must have the shape of ys, (%zu, %zu, %zu), not (%zd, "
                     "%zd, %zd)",
                     B, slots, N, (Py_ssize_t)PyArray_DIM(a, 0), (Py_ssize_t)PyArray_DIM(a, 1),
                     (Py_ssize_t)PyArray_DIM(a, 2));
        Py_DECREF(a);
        return NULL;
    }
    return a;
}

/* The dict {"y0", "inputs", "weights", "biases", "out_scale"} of a gradient of B trajectories
 * (copies; None where the model has no such part). Returns NULL with an exception. */
static PyObject *gradient_dict(const clnode_gradient *g, const clnode_model *m, size_t B)
{
    const size_t L = clnode_model_num_layers(m), k = clnode_model_num_inputs(m);
    PyObject *ws = PyList_New((Py_ssize_t)L), *bs = PyList_New((Py_ssize_t)L);
    for (size_t l = 0; ws && bs && l < L; ++l) {
        const npy_intp out = (npy_intp)clnode_model_layer_out(m, l);
        const npy_intp in = (npy_intp)clnode_model_layer_in(m, l);
        const double *b = clnode_gradient_bias(g, l);
        PyObject *wo = copy_doubles(clnode_gradient_weight(g, l), out, in);
        PyObject *bo = b ? copy_doubles(b, out, 0) : Py_NewRef(Py_None);
        if (!wo || !bo) {
            Py_XDECREF(wo);
            Py_XDECREF(bo);
            Py_CLEAR(ws);
            break;
        }
        PyList_SET_ITEM(ws, (Py_ssize_t)l, wo);
        PyList_SET_ITEM(bs, (Py_ssize_t)l, bo);
    }
    size_t ns = 0;
    const double *s = clnode_gradient_out_scale(g, &ns);
    const double *c = clnode_gradient_inputs(g);
    PyObject *y0 = copy_doubles(clnode_gradient_y0(g), (npy_intp)B, (npy_intp)clnode_model_dim(m));
    PyObject *ci = c && k ? copy_doubles(c, (npy_intp)B, (npy_intp)k) : Py_NewRef(Py_None);
    PyObject *so = s ? copy_doubles(s, (npy_intp)ns, 0) : Py_NewRef(Py_None);
    if (!ws || !bs || !y0 || !ci || !so) {
        Py_XDECREF(ws);
        Py_XDECREF(bs);
        Py_XDECREF(y0);
        Py_XDECREF(ci);
        Py_XDECREF(so);
        return NULL;
    }
    return Py_BuildValue("{s:N,s:N,s:N,s:N,s:N}", "y0", y0, "inputs", ci, "weights", ws, "biases",
                         bs, "out_scale", so);
}

/* Tape.gradient(context, cot) -> dict: the reverse pass (clnode_gradient_compute) on `context` (a
 * host Context) of the cotangent cot (B, slots, N) of the solution's ys, without the GIL and
 * under the SIGINT handler. */
static PyObject *tape_gradient(TapeObject *self, PyObject *args)
{
    PyObject *co, *cot_o, *progress = Py_None;
    if (!PyArg_ParseTuple(args, "O!O|O", &ContextType, &co, &cot_o, &progress) ||
        check_progress(progress) < 0)
        return NULL;
    ContextObject *ctx = (ContextObject *)co;
    if (!context_ok(ctx))
        return NULL;
    const clnode_model *model = ((ModelObject *)self->model)->model;
    const size_t B = clnode_solution_batch(self->sol);
    PyArrayObject *cot = cotangent_array(cot_o, B, self->slots, self->dim);
    if (!cot)
        return NULL;
    clnode_gradient_options go;
    clnode_gradient_default_options(&go);
    if (sigint_install())
        go.cancel = on_cancel;
    py_progress pp = {progress, NULL, NULL, NULL};
    if (progress != Py_None) {
        go.progress = py_progress_call;
        go.progress_user = &pp;
    }
    clnode_gradient *g = NULL;
    clnode_status st;
    const double *cp = PyArray_DATA(cot);
    ctx->busy = 1;
    Py_BEGIN_ALLOW_THREADS st =
        clnode_gradient_compute(ctx->ctx, model, &go, self->sol, self->slots, cp, &g);
    Py_END_ALLOW_THREADS ctx->busy = 0;
    Py_DECREF(cot);
    const int interrupted = go.cancel && sigint_restore();
    const int raised = py_progress_finish(&pp) < 0; /* the callback's exception */
    const int failed =
        flush_log(&ctx->log, "gradient") < 0 || raised || (interrupted && PyErr_CheckSignals() < 0);
    PyObject *ret = NULL;
    if (!failed && st != CLNODE_OK)
        raise_status(st, clnode_context_last_error(ctx->ctx));
    else if (!failed)
        ret = gradient_dict(g, model, B);
    clnode_gradient_destroy(&g);
    return ret;
}

/* A direction argument: None (NULL, *a NULL) or float64 (ndir, n1[, n2]) C-contiguous. Returns -1
 * with an exception. */
static int direction_array(PyObject *o, const char *name, size_t ndir, size_t n1, size_t n2,
                           PyArrayObject **a)
{
    *a = NULL;
    if (o == Py_None)
        return 0;
    const int nd = n2 ? 3 : 2;
    *a = (PyArrayObject *)PyArray_FROMANY(o, NPY_DOUBLE, nd, nd, NPY_ARRAY_IN_ARRAY);
    if (!*a)
        return -1;
    if ((size_t)PyArray_DIM(*a, 0) != ndir || (size_t)PyArray_DIM(*a, 1) != n1 ||
        (n2 && (size_t)PyArray_DIM(*a, 2) != n2)) {
        PyErr_Format(InvalidArgumentError,
                     "the directions of %s must have the shape (%zu, %zu%s%zu)", name, ndir, n1,
                     n2 ? ", " : ")", n2);
        Py_CLEAR(*a);
        return -1;
    }
    return 0;
}

/* Tape.tangent(context, ndir, dy0, dinputs, dparams, progress=None) -> ndarray (ndir, B, slots,
 * N): the tangent pass (clnode_tangent_compute) on `context` of ndir directions (each None or
 * float64: dy0 (ndir, B, N), dinputs (ndir, B, k), dparams (ndir, P) laid out as
 * clnode_gradient_params), without the GIL and under the SIGINT handler. */
static PyObject *tape_tangent(TapeObject *self, PyObject *args)
{
    PyObject *co, *dy0_o, *din_o, *dp_o, *progress = Py_None;
    Py_ssize_t nd;
    if (!PyArg_ParseTuple(args, "O!nOOO|O", &ContextType, &co, &nd, &dy0_o, &din_o, &dp_o,
                          &progress) ||
        check_progress(progress) < 0)
        return NULL;
    ContextObject *ctx = (ContextObject *)co;
    if (!context_ok(ctx))
        return NULL;
    if (nd < 0) {
        PyErr_SetString(InvalidArgumentError, "the number of directions must be >= 0");
        return NULL;
    }
    const size_t ndir = (size_t)nd;
    const clnode_model *model = ((ModelObject *)self->model)->model;
    const size_t B = clnode_solution_batch(self->sol), k = clnode_model_num_inputs(model);
    size_t np = 0, ns = 0;
    for (size_t l = 0; l < clnode_model_num_layers(model); ++l)
        np += clnode_model_layer_out(model, l) *
              (clnode_model_layer_in(model, l) + (clnode_model_bias(model, l) != NULL));
    clnode_model_out_scale(model, &ns);
    PyArrayObject *dy0 = NULL, *din = NULL, *dp = NULL;
    if (direction_array(dy0_o, "y0", ndir, B, self->dim, &dy0) < 0 ||
        direction_array(din_o, "the inputs", ndir, B, k, &din) < 0 ||
        direction_array(dp_o, "the parameters", ndir, np + ns, 0, &dp) < 0) {
        Py_XDECREF(dy0);
        Py_XDECREF(din);
        return NULL;
    }
    clnode_tangent_options to;
    clnode_tangent_default_options(&to);
    if (sigint_install())
        to.cancel = on_cancel;
    py_progress pp = {progress, NULL, NULL, NULL};
    if (progress != Py_None) {
        to.progress = py_progress_call;
        to.progress_user = &pp;
    }
    clnode_tangent *t = NULL;
    clnode_status st;
    const double *y0p = dy0 ? PyArray_DATA(dy0) : NULL, *inp = din ? PyArray_DATA(din) : NULL;
    const double *pp_ = dp ? PyArray_DATA(dp) : NULL;
    ctx->busy = 1;
    Py_BEGIN_ALLOW_THREADS st = clnode_tangent_compute(ctx->ctx, model, &to, self->sol, self->slots,
                                                       ndir, y0p, inp, pp_, &t);
    Py_END_ALLOW_THREADS ctx->busy = 0;
    Py_XDECREF(dy0);
    Py_XDECREF(din);
    Py_XDECREF(dp);
    const int interrupted = to.cancel && sigint_restore();
    const int raised = py_progress_finish(&pp) < 0;
    const int failed =
        flush_log(&ctx->log, "tangent") < 0 || raised || (interrupted && PyErr_CheckSignals() < 0);
    PyObject *ret = NULL;
    if (!failed && st != CLNODE_OK) {
        raise_status(st, clnode_context_last_error(ctx->ctx));
    } else if (!failed) {
        npy_intp dims[4] = {(npy_intp)ndir, (npy_intp)B, (npy_intp)self->slots,
                            (npy_intp)self->dim};
        ret = PyArray_SimpleNew(4, dims, NPY_DOUBLE);
        if (ret)
            memcpy(PyArray_DATA((PyArrayObject *)ret), clnode_tangent_values(t),
                   ndir * B * self->slots * self->dim * sizeof(double));
    }
    clnode_tangent_destroy(&t);
    return ret;
}

static PyObject *tape_get_kept_bytes(TapeObject *self, void *c)
{
    (void)c;
    return PyLong_FromSize_t(clnode_solution_kept_bytes(self->sol));
}

/* The bytes of the solution's tape (clnode_solution_tape_export), or (size_t)-1 with an
 * exception. */
static size_t tape_export_size(TapeObject *self)
{
    const clnode_model *model = ((ModelObject *)self->model)->model;
    size_t n = 0;
    const clnode_status st = clnode_solution_tape_export(NULL, model, self->sol, NULL, 0, &n);
    if (st != CLNODE_OK) {
        raise_status(st, "the solution's tape cannot be exported (clnode_solution_tape_export)");
        return (size_t)-1;
    }
    return n;
}

static PyObject *tape_get_nbytes(TapeObject *self, void *c)
{
    (void)c;
    const size_t n = tape_export_size(self);
    return n == (size_t)-1 ? NULL : PyLong_FromSize_t(n);
}

/* Tape.export_into(buffer) -> int: the solution as the library's tape bytes into a writable,
 * C-contiguous buffer of exactly nbytes bytes (without the GIL: nothing else is allocated). */
static PyObject *tape_export_into(TapeObject *self, PyObject *arg)
{
    const size_t n = tape_export_size(self);
    if (n == (size_t)-1)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if ((size_t)view.len != n) {
        PyErr_Format(InvalidArgumentError, "the tape takes %zu bytes, the buffer has %zd", n,
                     view.len);
        PyBuffer_Release(&view);
        return NULL;
    }
    const clnode_model *model = ((ModelObject *)self->model)->model;
    clnode_status st;
    size_t got = 0;
    Py_BEGIN_ALLOW_THREADS st =
        clnode_solution_tape_export(NULL, model, self->sol, view.buf, n, &got);
    Py_END_ALLOW_THREADS PyBuffer_Release(&view);
    if (st != CLNODE_OK)
        return raise_status(st, "the solution's tape cannot be exported");
    return PyLong_FromSize_t(got);
}

/* tape_import(context, model, buffer, slots) -> Tape: the solution of the library's tape bytes
 * (clnode_solution_tape_import, every part checked; a refusal raises the library's message)
 * with `slots` time slots per trajectory, for Tape.gradient with `model`. */
PyObject *tape_import(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *co, *mo, *bo;
    Py_ssize_t slots;
    if (!PyArg_ParseTuple(args, "O!O!On", &ContextType, &co, &ModelType, &mo, &bo, &slots))
        return NULL;
    ContextObject *ctx = (ContextObject *)co;
    if (!context_ok(ctx))
        return NULL;
    if (slots < 0) {
        PyErr_SetString(InvalidArgumentError, "slots must not be negative");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(bo, &view, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    const clnode_model *model = ((ModelObject *)mo)->model;
    clnode_solution *sol = NULL;
    clnode_status st;
    ctx->busy = 1;
    Py_BEGIN_ALLOW_THREADS st =
        clnode_solution_tape_import(ctx->ctx, model, view.buf, (size_t)view.len, &sol);
    Py_END_ALLOW_THREADS ctx->busy = 0;
    PyBuffer_Release(&view);
    if (flush_log(&ctx->log, "tape import") < 0) {
        clnode_solution_destroy(&sol);
        return NULL;
    }
    if (st != CLNODE_OK)
        return raise_status(st, clnode_context_last_error(ctx->ctx));
    PyObject *t = tape_wrap(&sol, Py_None, mo, (size_t)slots, clnode_model_dim(model));
    clnode_solution_destroy(&sol); /* NULL unless tape_wrap failed */
    return t;
}

static PyMethodDef tape_methods[] = {
    {"export_into", (PyCFunction)tape_export_into, METH_O,
     "export_into(buffer) -> int: the solution as the library's tape bytes "
     "(clnode_solution_tape_export) into a writable buffer of exactly nbytes bytes."},
    {"gradient", (PyCFunction)tape_gradient, METH_VARARGS,
     "gradient(context, cot, progress=None) -> dict y0, inputs, weights, biases, out_scale: the "
     "reverse pass of the cotangent cot (B, T, N) of ys on a host context "
     "(clnode_gradient_compute); progress: None or fn(fraction, active, batch, steps)."},
    {"tangent", (PyCFunction)tape_tangent, METH_VARARGS,
     "tangent(context, ndir, dy0, dinputs, dparams, progress=None) -> ndarray (ndir, B, T, N): "
     "the tangent pass (forward mode, clnode_tangent_compute) of ndir directions, each None or "
     "float64: dy0 (ndir, B, N), dinputs (ndir, B, k), dparams (ndir, P) laid out as "
     "clnode_gradient_params."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef tape_getset[] = {
    {"nbytes", (getter)tape_get_nbytes, NULL,
     "the bytes of the solution as the library's tape bytes (clnode_solution_tape_export)", NULL},
    {"kept_bytes", (getter)tape_get_kept_bytes, NULL,
     "the bytes the kept states take (clnode_solution_kept_bytes)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject TapeType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "clnode._clnode.Tape",
    .tp_basicsize = sizeof(TapeObject),
    .tp_dealloc = (destructor)tape_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A solution kept for its reverse pass (solve with keep_tape). Use "
              "clnode.Solution.vjp and clnode.Solution.jvp.",
    .tp_methods = tape_methods,
    .tp_getset = tape_getset,
};
