/* _clnode.c - the CPython extension of the clnode package: contexts, models and solves of the C
 * library on numpy arrays. Everything numeric happens in the library; this file converts arrays,
 * lays out the saved points as diffrax does (t0, then ts and steps in time order, then t1, padded
 * with +inf), releases the GIL while solving and turns Ctrl-C into a cancelled solve.
 *
 * The Python side (python/clnode/) adds the user-facing names, argument checking, the model
 * converters and the JAX drop-in.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define PY_ARRAY_UNIQUE_SYMBOL clnode_ARRAY_API
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
#include "_clnode_xla.h"

/* ------------------------------------------------------------------------------------------------
 * Exceptions: clnode.Error and its subclasses (created here, exported by clnode/__init__.py). */

static PyObject *Error, *InvalidArgumentError, *ModelError, *FileError, *DeviceError,
    *UnsupportedError, *PrecisionError, *CancelledError, *ContextBusyError;

/* The exception class for a library status. */
static PyObject *exc_for(clnode_status st)
{
    switch (st) {
    case CLNODE_ERR_INVALID_ARGUMENT:
    case CLNODE_ERR_NONFINITE_INPUT:
        return InvalidArgumentError;
    case CLNODE_ERR_BAD_MODEL:
        return ModelError;
    case CLNODE_ERR_IO:
        return FileError;
    case CLNODE_ERR_OUT_OF_MEMORY:
        return PyExc_MemoryError;
    case CLNODE_ERR_UNSUPPORTED:
    case CLNODE_ERR_NO_FP64:
        return UnsupportedError;
    case CLNODE_ERR_NO_DEVICE:
    case CLNODE_ERR_DEVICE:
    case CLNODE_ERR_DEVICE_MEMORY:
    case CLNODE_ERR_BUILD:
    case CLNODE_ERR_BLAS:
        return DeviceError;
    case CLNODE_ERR_PRECISION:
        return PrecisionError;
    case CLNODE_ERR_CANCELLED:
        return CancelledError;
    default:
        return Error;
    }
}

/* Raises the exception of `st` with `msg` (or the status's own message) and its status name as
 * the attribute `status`. Returns NULL. */
static PyObject *raise_status(clnode_status st, const char *msg)
{
    PyObject *cls = exc_for(st);
    const char *text = msg && msg[0] ? msg : clnode_status_string(st);
    PyObject *e = PyObject_CallFunction(cls, "s", text);
    if (!e)
        return NULL;
    PyObject *name = PyUnicode_FromString(clnode_status_name(st));
    if (name && cls != PyExc_MemoryError)
        PyObject_SetAttrString(e, "status", name);
    Py_XDECREF(name);
    PyErr_SetObject(cls, e);
    Py_DECREF(e);
    return NULL;
}

/* ------------------------------------------------------------------------------------------------
 * The library's log: collected in a buffer (the logger may run while the GIL is released) and
 * handed to clnode._log_sink(messages) after the call, with the GIL. */

typedef struct log_buf {
    char *data; /* records: one level byte, one code byte, the message, a NUL */
    size_t len, cap;
} log_buf;

static PyObject *g_log_sink; /* set by clnode/__init__.py */

/* Collects a message for the sink after the call; a kernel build's goes to the sink at once (it
 * announces a wait of up to a minute). */
static void on_log(void *user, clnode_log_level level, clnode_log_code code, const char *message)
{
    if (code == CLNODE_LOG_BUILD) {
        py_log_now(g_log_sink, level, code, message, "build");
        return;
    }
    log_buf *b = user;
    size_t n = strlen(message) + 3;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 512;
        while (cap < b->len + n)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d)
            return; /* a lost log line is better than a failed solve */
        b->data = d;
        b->cap = cap;
    }
    b->data[b->len] = (char)('0' + (int)level);
    b->data[b->len + 1] = (char)('0' + (int)code);
    memcpy(b->data + b->len + 2, message, n - 2);
    b->len += n;
}

/* Passes the collected messages to the sink as a list of (level, code, message) and empties the
 * buffer. Keeps an exception already set (the sink's own failure is then dropped). */
static int flush_log(log_buf *b, const char *origin)
{
    if (!b->len)
        return 0;
    if (!g_log_sink || g_log_sink == Py_None) {
        b->len = 0;
        return 0;
    }
    PyObject *etype, *evalue, *etb;
    PyErr_Fetch(&etype, &evalue, &etb);
    PyObject *list = PyList_New(0);
    for (size_t i = 0; list && i < b->len;) {
        const int level = b->data[i] - '0', code = b->data[i + 1] - '0';
        const char *msg = b->data + i + 2;
        PyObject *item = Py_BuildValue("(iis)", level, code, msg);
        if (!item || PyList_Append(list, item) < 0) {
            Py_XDECREF(item);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(item);
        i += strlen(msg) + 3;
    }
    b->len = 0;
    int rc = 0;
    if (list) {
        PyObject *r = PyObject_CallFunction(g_log_sink, "Os", list, origin);
        Py_DECREF(list);
        if (!r)
            rc = -1;
        Py_XDECREF(r);
    } else {
        rc = -1;
    }
    if (etype) { /* the call's own exception wins */
        PyErr_Restore(etype, evalue, etb);
        return -1;
    }
    return rc;
}

static PyObject *set_log_sink(PyObject *self, PyObject *sink)
{
    (void)self;
    Py_XSETREF(g_log_sink, Py_NewRef(sink));
    Py_RETURN_NONE;
}

/* progress: None or a callable (checked before any work). Returns 0, or -1 with TypeError. */
static int check_progress(PyObject *progress)
{
    if (progress == Py_None || PyCallable_Check(progress))
        return 0;
    PyErr_Format(PyExc_TypeError, "progress must be None or callable, not %s",
                 Py_TYPE(progress)->tp_name);
    return -1;
}

/* ------------------------------------------------------------------------------------------------
 * Ctrl-C: while the main thread solves without the GIL, a SIGINT handler of ours only sets a flag
 * that the solve's cancel callback reads. Once the solve has returned and the previous handler is
 * back, the interrupt is handed to Python (PyErr_SetInterrupt), whose SIGINT handler then runs as
 * for any Ctrl-C: KeyboardInterrupt by default. The previous C handler is never called from ours:
 * drivers loaded by the device listing install one-shot handlers of their own. */

static volatile sig_atomic_t g_sigint;
static struct sigaction g_prev_sigint;

static void on_sigint(int sig)
{
    (void)sig;
    g_sigint = 1;
}

static int on_cancel(void *user)
{
    (void)user;
    return g_sigint != 0;
}

/* Installs the handler when called on the main thread and Python's handler is in place.
 * Returns 1 if installed (restore with sigint_restore). */
static int sigint_install(void)
{
    if (!PyGILState_Check() ||
        PyThreadState_GetInterpreter(PyThreadState_Get()) != PyInterpreterState_Main())
        return 0;
    PyObject *threading = PyImport_AddModule("threading"); /* borrowed; may be absent */
    if (threading) {
        PyObject *cur = PyObject_CallMethod(threading, "current_thread", NULL);
        PyObject *main = PyObject_CallMethod(threading, "main_thread", NULL);
        int is_main = cur && cur == main;
        Py_XDECREF(cur);
        Py_XDECREF(main);
        PyErr_Clear();
        if (!is_main)
            return 0;
    }
    struct sigaction prev, sa;
    if (sigaction(SIGINT, NULL, &prev) != 0)
        return 0;
    if (!(prev.sa_flags & SA_SIGINFO) && (prev.sa_handler == SIG_DFL || prev.sa_handler == SIG_IGN))
        return 0; /* Ctrl-C kills or is ignored: leave that alone */
    g_sigint = 0;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, &g_prev_sigint) != 0)
        return 0;
    return 1;
}

/* Puts the previous handler back; returns 1 if a Ctrl-C came meanwhile (then handed to Python:
 * PyErr_CheckSignals raises what its handler raises). */
static int sigint_restore(void)
{
    sigaction(SIGINT, &g_prev_sigint, NULL);
    if (!g_sigint)
        return 0;
    g_sigint = 0;
    PyErr_SetInterrupt();
    return 1;
}

/* ------------------------------------------------------------------------------------------------
 * The library's names of results, activations and methods */

/* The library's names by code, as a tuple: name_at(0), name_at(1), ... up to the first NULL. */
static PyObject *names_tuple(const char *(*name_at)(size_t))
{
    PyObject *list = PyList_New(0);
    for (size_t i = 0; list && name_at(i); ++i) {
        PyObject *s = PyUnicode_FromString(name_at(i));
        if (!s || PyList_Append(list, s) < 0)
            Py_CLEAR(list);
        Py_XDECREF(s);
    }
    PyObject *t = list ? PyList_AsTuple(list) : NULL;
    Py_XDECREF(list);
    return t;
}

/* The results are the codes 0, 1, ... before the first that clnode_result_name calls "unknown";
 * so are the activations for clnode_activation_name. */
static const char *result_at(size_t i)
{
    const char *name = clnode_result_name((clnode_result)i);
    return strcmp(name, "unknown") ? name : NULL;
}

static const char *activation_at(size_t i)
{
    const char *name = clnode_activation_name((clnode_activation)i);
    return strcmp(name, "unknown") ? name : NULL;
}

static const char *method_at(size_t i)
{
    const clnode_method *m = clnode_method_at(i);
    return m ? m->name : NULL;
}

/* The names as one string, "a, b, c", for messages. */
static PyObject *names_text(const char *(*name_at)(size_t))
{
    PyObject *t = names_tuple(name_at), *sep = PyUnicode_FromString(", ");
    PyObject *text = t && sep ? PyUnicode_Join(sep, t) : NULL;
    Py_XDECREF(t);
    Py_XDECREF(sep);
    return text;
}

/* ------------------------------------------------------------------------------------------------
 * A private host context for model creation and evaluation (used with the GIL held, so by one
 * thread at a time). */

static clnode_context *g_model_ctx;
static log_buf g_model_log;

static clnode_context *model_ctx(void)
{
    if (!g_model_ctx) {
        clnode_context_options o;
        clnode_context_default_options(&o);
        o.device = "host";
        o.log = on_log;
        o.log_user = &g_model_log;
        o.log_level = CLNODE_LOG_DEBUG;
        clnode_status st = clnode_context_create(&o, &g_model_ctx);
        if (st != CLNODE_OK) {
            flush_log(&g_model_log, "model");
            raise_status(st, "cannot create the host context");
            return NULL;
        }
    }
    return g_model_ctx;
}

/* ------------------------------------------------------------------------------------------------
 * Model */

typedef struct {
    PyObject_HEAD clnode_model *model;
} ModelObject;

static PyTypeObject ModelType;

static PyObject *model_wrap(clnode_model *m)
{
    ModelObject *o = PyObject_New(ModelObject, &ModelType);
    if (!o) {
        clnode_model_destroy(&m);
        return NULL;
    }
    o->model = m;
    return (PyObject *)o;
}

static void model_dealloc(ModelObject *self)
{
    clnode_model_destroy(&self->model);
    PyObject_Free(self);
}

/* Finishes a model constructor: the model, or the library's error. */
static PyObject *model_done(clnode_status st, clnode_model *m)
{
    flush_log(&g_model_log, "model");
    if (st != CLNODE_OK)
        return raise_status(st, clnode_context_last_error(g_model_ctx));
    return model_wrap(m);
}

static PyObject *model_load(PyObject *cls, PyObject *arg)
{
    (void)cls;
    PyObject *bytes = NULL;
    if (!PyUnicode_FSConverter(arg, &bytes))
        return NULL;
    clnode_context *ctx = model_ctx();
    if (!ctx) {
        Py_DECREF(bytes);
        return NULL;
    }
    clnode_model *m = NULL;
    clnode_status st = clnode_model_load_safetensors(ctx, PyBytes_AS_STRING(bytes), &m);
    Py_DECREF(bytes);
    return model_done(st, m);
}

static PyObject *model_from_bytes(PyObject *cls, PyObject *arg)
{
    (void)cls;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    clnode_context *ctx = model_ctx();
    clnode_model *m = NULL;
    clnode_status st = CLNODE_OK;
    if (ctx)
        st = clnode_model_load_safetensors_memory(ctx, view.buf, (size_t)view.len, &m);
    PyBuffer_Release(&view);
    if (!ctx)
        return NULL;
    return model_done(st, m);
}

static PyObject *model_seed(PyObject *cls, PyObject *noargs)
{
    (void)cls;
    (void)noargs;
    clnode_context *ctx = model_ctx();
    if (!ctx)
        return NULL;
    clnode_model *m = NULL;
    clnode_status st = clnode_model_create_seed(ctx, &m);
    return model_done(st, m);
}

static int activation_arg(PyObject *o, void *out)
{
    const char *name = PyUnicode_AsUTF8(o);
    if (!name)
        return 0;
    if (clnode_activation_from_name(name, out) != CLNODE_OK) {
        PyObject *names = names_text(activation_at);
        if (names)
            PyErr_Format(PyExc_ValueError, "unknown activation %R (clnode has %U)", o, names);
        Py_XDECREF(names);
        return 0;
    }
    return 1;
}

/* The output scale argument of Model.from_arrays: None (*out NULL) or a 1-d float64 array (a new
 * reference in *out); the library checks its length and values. */
static int out_scale_arg(PyObject *o, PyArrayObject **out)
{
    *out = NULL;
    if (o == Py_None)
        return 1;
    *out = (PyArrayObject *)PyArray_FROMANY(o, NPY_DOUBLE, 1, 1, NPY_ARRAY_IN_ARRAY);
    return *out != NULL;
}

/* Model.from_arrays(weights, biases, activation, final_activation, time_input, num_inputs=0,
 * out_scale=None): weights a list of 2-d float64 arrays (out x in), biases a list of 1-d arrays
 * or None, out_scale None or a 1-d array of 1 or out values. */
static PyObject *model_from_arrays(PyObject *cls, PyObject *args, PyObject *kw)
{
    (void)cls;
    static char *kwlist[] = {"weights",    "biases",     "activation", "final_activation",
                             "time_input", "num_inputs", "out_scale",  NULL};
    PyObject *ws, *bs, *so = Py_None;
    clnode_activation act, fact;
    int time_input;
    Py_ssize_t num_inputs = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO&O&p|nO", kwlist, &ws, &bs, activation_arg,
                                     &act, activation_arg, &fact, &time_input, &num_inputs, &so))
        return NULL;
    if (num_inputs < 0)
        return PyErr_Format(PyExc_ValueError, "num_inputs must not be negative (got %zd)",
                            num_inputs);
    PyArrayObject *scale = NULL;
    if (!out_scale_arg(so, &scale))
        return NULL;
    ws = PySequence_Fast(ws, "weights must be a sequence of arrays");
    if (!ws) {
        Py_XDECREF(scale);
        return NULL;
    }
    bs = PySequence_Fast(bs, "biases must be a sequence of arrays or None");
    if (!bs) {
        Py_DECREF(ws);
        Py_XDECREF(scale);
        return NULL;
    }
    PyObject *ret = NULL;
    const Py_ssize_t L = PySequence_Fast_GET_SIZE(ws);
    PyArrayObject **wa = calloc((size_t)(2 * L + 1), sizeof *wa);
    size_t *sizes = calloc((size_t)L + 1, sizeof *sizes);
    const double **wp = calloc((size_t)L + 1, sizeof *wp);
    const double **bp = calloc((size_t)L + 1, sizeof *bp);
    if (!wa || !sizes || !wp || !bp) {
        PyErr_NoMemory();
        goto done;
    }
    if (L < 1 || PySequence_Fast_GET_SIZE(bs) != L) {
        PyErr_Format(PyExc_ValueError, "%zd weight matrices but %zd biases", L,
                     PySequence_Fast_GET_SIZE(bs));
        goto done;
    }
    for (Py_ssize_t i = 0; i < L; ++i) {
        PyObject *w = PySequence_Fast_GET_ITEM(ws, i), *b = PySequence_Fast_GET_ITEM(bs, i);
        wa[i] = (PyArrayObject *)PyArray_FROMANY(w, NPY_DOUBLE, 2, 2, NPY_ARRAY_IN_ARRAY);
        if (!wa[i])
            goto done;
        const size_t out = (size_t)PyArray_DIM(wa[i], 0), in = (size_t)PyArray_DIM(wa[i], 1);
        if (i == 0)
            sizes[0] = in;
        else if (in != sizes[i]) {
            PyErr_Format(PyExc_ValueError,
                         "layer %zd takes %zu inputs but layer %zd gives %zu outputs", i, in, i - 1,
                         sizes[i]);
            goto done;
        }
        sizes[i + 1] = out;
        wp[i] = PyArray_DATA(wa[i]);
        if (b != Py_None) {
            wa[L + i] = (PyArrayObject *)PyArray_FROMANY(b, NPY_DOUBLE, 1, 1, NPY_ARRAY_IN_ARRAY);
            if (!wa[L + i])
                goto done;
            if ((size_t)PyArray_DIM(wa[L + i], 0) != out) {
                PyErr_Format(PyExc_ValueError, "bias %zd has %zd values, layer %zd has %zu outputs",
                             i, (Py_ssize_t)PyArray_DIM(wa[L + i], 0), i, out);
                goto done;
            }
            bp[i] = PyArray_DATA(wa[L + i]);
        }
    }
    clnode_context *ctx = model_ctx();
    if (!ctx)
        goto done;
    clnode_model_desc d = {CLNODE_MODEL_DESC_DEFAULTS,
                           .num_layers = (size_t)L,
                           .sizes = sizes,
                           .weights = wp,
                           .biases = bp,
                           .activation = act,
                           .final_activation = fact,
                           .time_input = time_input,
                           .num_inputs = (size_t)num_inputs,
                           .out_scale = scale ? PyArray_DATA(scale) : NULL,
                           .out_scale_size = scale ? (size_t)PyArray_DIM(scale, 0) : 0};
    clnode_model *m = NULL;
    clnode_status st = clnode_model_create(ctx, &d, &m);
    ret = model_done(st, m);
done:
    if (wa)
        for (Py_ssize_t i = 0; i < 2 * L; ++i)
            Py_XDECREF(wa[i]);
    free(wa);
    free(sizes);
    free(wp);
    free(bp);
    Py_DECREF(ws);
    Py_DECREF(bs);
    Py_XDECREF(scale);
    return ret;
}

static PyObject *copy_doubles(const double *p, npy_intp n0, npy_intp n1)
{
    npy_intp dims[2] = {n0, n1};
    PyObject *a = PyArray_SimpleNew(n1 ? 2 : 1, dims, NPY_DOUBLE);
    if (a)
        memcpy(PyArray_DATA((PyArrayObject *)a), p, (size_t)(n0 * (n1 ? n1 : 1)) * sizeof(double));
    return a;
}

/* Model.layer(i) -> (weight copy, bias copy or None) */
static PyObject *model_layer(ModelObject *self, PyObject *arg)
{
    Py_ssize_t i = PyLong_AsSsize_t(arg);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    if (i < 0 || (size_t)i >= clnode_model_num_layers(self->model)) {
        PyErr_SetString(PyExc_IndexError, "layer index out of range");
        return NULL;
    }
    const npy_intp out = (npy_intp)clnode_model_layer_out(self->model, (size_t)i);
    const npy_intp in = (npy_intp)clnode_model_layer_in(self->model, (size_t)i);
    PyObject *w = copy_doubles(clnode_model_weight(self->model, (size_t)i), out, in);
    if (!w)
        return NULL;
    const double *b = clnode_model_bias(self->model, (size_t)i);
    PyObject *bo = b ? copy_doubles(b, out, 0) : Py_NewRef(Py_None);
    if (!bo) {
        Py_DECREF(w);
        return NULL;
    }
    return Py_BuildValue("(NN)", w, bo);
}

/* Model.eval(y (n, dim), t (n,) or None, c (n, k) or None) -> dydt (n, dim), float64, by
 * clnode_model_eval_inputs. */
static PyObject *model_eval(ModelObject *self, PyObject *args)
{
    PyObject *yo, *to = Py_None, *co = Py_None;
    if (!PyArg_ParseTuple(args, "O|OO", &yo, &to, &co))
        return NULL;
    const npy_intp dim = (npy_intp)clnode_model_dim(self->model);
    const npy_intp k = (npy_intp)clnode_model_num_inputs(self->model);
    PyArrayObject *y = (PyArrayObject *)PyArray_FROMANY(yo, NPY_DOUBLE, 2, 2, NPY_ARRAY_IN_ARRAY);
    PyArrayObject *t = NULL, *c = NULL;
    PyObject *out = NULL;
    if (!y)
        return NULL;
    const npy_intp n = PyArray_DIM(y, 0);
    if (PyArray_DIM(y, 1) != dim) {
        PyErr_Format(PyExc_ValueError, "y has %zd components, the model %zd", PyArray_DIM(y, 1),
                     dim);
        goto done;
    }
    if (to != Py_None) {
        t = (PyArrayObject *)PyArray_FROMANY(to, NPY_DOUBLE, 1, 1, NPY_ARRAY_IN_ARRAY);
        if (!t)
            goto done;
        if (PyArray_DIM(t, 0) != n) {
            PyErr_SetString(PyExc_ValueError, "t must have one time per point");
            goto done;
        }
    }
    if (co != Py_None) {
        c = (PyArrayObject *)PyArray_FROMANY(co, NPY_DOUBLE, 2, 2, NPY_ARRAY_IN_ARRAY);
        if (!c)
            goto done;
        if (PyArray_DIM(c, 0) != n || PyArray_DIM(c, 1) != k) {
            PyErr_Format(PyExc_ValueError, "c must have shape (%zd, %zd)", n, k);
            goto done;
        }
    }
    npy_intp dims[2] = {n, dim};
    out = PyArray_SimpleNew(2, dims, NPY_DOUBLE);
    clnode_context *ctx = out ? model_ctx() : NULL;
    if (!ctx) {
        Py_CLEAR(out);
        goto done;
    }
    clnode_status st = clnode_model_eval_inputs(
        ctx, self->model, (size_t)n, PyArray_DATA(y), t ? PyArray_DATA(t) : NULL,
        c ? PyArray_DATA(c) : NULL, PyArray_DATA((PyArrayObject *)out));
    flush_log(&g_model_log, "model");
    if (st != CLNODE_OK) {
        Py_CLEAR(out);
        raise_status(st, clnode_context_last_error(ctx));
    }
done:
    Py_DECREF(y);
    Py_XDECREF(t);
    Py_XDECREF(c);
    return out;
}

static PyObject *model_get_sizes(ModelObject *self, void *c)
{
    (void)c;
    const size_t L = clnode_model_num_layers(self->model);
    PyObject *t = PyTuple_New((Py_ssize_t)L + 1);
    if (!t)
        return NULL;
    for (size_t i = 0; i <= L; ++i) {
        size_t w = i < L ? clnode_model_layer_in(self->model, i)
                         : clnode_model_layer_out(self->model, L - 1);
        PyTuple_SET_ITEM(t, (Py_ssize_t)i, PyLong_FromSize_t(w));
    }
    return t;
}

static PyObject *model_get_activation(ModelObject *self, void *c)
{
    (void)c;
    return PyUnicode_FromString(clnode_activation_name(clnode_model_activation(self->model)));
}

static PyObject *model_get_final_activation(ModelObject *self, void *c)
{
    (void)c;
    return PyUnicode_FromString(clnode_activation_name(clnode_model_final_activation(self->model)));
}

static PyObject *model_get_time_input(ModelObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(clnode_model_time_input(self->model));
}

static PyObject *model_get_num_inputs(ModelObject *self, void *c)
{
    (void)c;
    return PyLong_FromSize_t(clnode_model_num_inputs(self->model));
}

static PyObject *model_get_out_scale(ModelObject *self, void *c)
{
    (void)c;
    size_t n = 0;
    const double *s = clnode_model_out_scale(self->model, &n);
    return s ? copy_doubles(s, (npy_intp)n, 0) : Py_NewRef(Py_None);
}

static PyObject *model_get_out_scale_dtype(ModelObject *self, void *c)
{
    (void)c;
    const char *d = clnode_model_out_scale_dtype(self->model);
    return d ? PyUnicode_FromString(d) : Py_NewRef(Py_None);
}

static PyMethodDef model_methods[] = {
    {"load", model_load, METH_O | METH_CLASS, "Model.load(path): a safetensors file."},
    {"from_bytes", model_from_bytes, METH_O | METH_CLASS,
     "Model.from_bytes(data): safetensors bytes."},
    {"seed", model_seed, METH_NOARGS | METH_CLASS, "Model.seed(): the built-in seed model."},
    {"from_arrays", (PyCFunction)(void (*)(void))model_from_arrays,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "Model.from_arrays(weights, biases, activation, final_activation, time_input, "
     "num_inputs=0, out_scale=None)."},
    {"layer", (PyCFunction)model_layer, METH_O, "layer(i) -> (weight, bias or None), copies."},
    {"eval", (PyCFunction)model_eval, METH_VARARGS,
     "eval(y, t=None, c=None) -> the vector field at the rows of y, float64 "
     "(clnode_model_eval_inputs)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef model_getset[] = {
    {"sizes", (getter)model_get_sizes, NULL, "widths: input, hidden..., output", NULL},
    {"activation", (getter)model_get_activation, NULL, "activation between layers", NULL},
    {"final_activation", (getter)model_get_final_activation, NULL, "after the last layer", NULL},
    {"time_input", (getter)model_get_time_input, NULL, "the input is [y, t]", NULL},
    {"num_inputs", (getter)model_get_num_inputs, NULL,
     "conditioning inputs k: the input is [y, c] or [y, t, c]", NULL},
    {"out_scale", (getter)model_get_out_scale, NULL,
     "the output scale (a float64 copy of 1 or N values), or None", NULL},
    {"out_scale_dtype", (getter)model_get_out_scale_dtype, NULL,
     "the output scale's dtype where the model came from (\"F32\", \"F64\"), or None", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ModelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "clnode._clnode.Model",
    .tp_basicsize = sizeof(ModelObject),
    .tp_dealloc = (destructor)model_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A clnode_model (immutable). Use clnode.MLP.",
    .tp_methods = model_methods,
    .tp_getset = model_getset,
};

/* ------------------------------------------------------------------------------------------------
 * Context */

typedef struct {
    PyObject_HEAD clnode_context *ctx;
    log_buf log;
    int busy; /* a solve runs on it (read and written with the GIL held) */
} ContextObject;

static PyTypeObject ContextType;

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

static int context_ok(ContextObject *self)
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

/* ------------------------------------------------------------------------------------------------
 * Tape: a solution kept for its reverse pass (keep_tape) */

typedef struct {
    PyObject_HEAD clnode_solution *sol;
    PyObject *context; /* the Context it was solved on and its Model, kept alive */
    PyObject *model;
    size_t slots, dim; /* the solution's time slots per trajectory and state dimension */
} TapeObject;

static PyTypeObject TapeType;

/* A Tape taking *sol (NULL afterwards) of a solve on `context` of `model` with `slots` time slots
 * of dimension `dim`. Returns NULL with an exception (*sol left to the caller). */
static PyObject *tape_wrap(clnode_solution **sol, PyObject *context, PyObject *model, size_t slots,
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
    PyArrayObject *a =
        (PyArrayObject *)PyArray_FROMANY(o, NPY_DOUBLE, 3, 3, NPY_ARRAY_IN_ARRAY);
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

static PyObject *tape_get_kept_bytes(TapeObject *self, void *c)
{
    (void)c;
    return PyLong_FromSize_t(clnode_solution_kept_bytes(self->sol));
}

static PyMethodDef tape_methods[] = {
    {"gradient", (PyCFunction)tape_gradient, METH_VARARGS,
     "gradient(context, cot, progress=None) -> dict y0, inputs, weights, biases, out_scale: the "
     "reverse pass of the cotangent cot (B, T, N) of ys on a host context "
     "(clnode_gradient_compute); progress: None or fn(fraction, active, batch, steps)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef tape_getset[] = {
    {"kept_bytes", (getter)tape_get_kept_bytes, NULL,
     "the bytes the kept states take (clnode_solution_kept_bytes)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject TapeType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "clnode._clnode.Tape",
    .tp_basicsize = sizeof(TapeObject),
    .tp_dealloc = (destructor)tape_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A solution kept for its reverse pass (solve with keep_tape). Use "
              "clnode.Solution.vjp.",
    .tp_methods = tape_methods,
    .tp_getset = tape_getset,
};

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

/* The precision certificate of a finished solve (clnode_certify, clnode/precision.h) as a dict:
 * the summary's fields and "samples", a list of dicts, one per re-solved trajectory. */
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

/* The certificate as a dict (the certificate is destroyed). */
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
/* The options of a solve from a dict {name: value} of the library's option table: a str is
 * parsed (a choice or a method by name), a number set (clnode_solve_option_set). Returns 0, or
 * -1 with InvalidArgumentError carrying the library's message. */
static int apply_options(clnode_solve_options *o, PyObject *dict)
{
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        if (!name) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "option names must be strings");
            return -1;
        }
        char msg[320];
        clnode_status st;
        if (PyUnicode_Check(value)) {
            const char *text = PyUnicode_AsUTF8(value);
            if (!text)
                return -1;
            st = clnode_solve_option_parse(o, name, text, msg, sizeof msg);
        } else {
            const double v = PyFloat_AsDouble(value);
            if (v == -1.0 && PyErr_Occurred())
                return -1;
            st = clnode_solve_option_set(o, name, v, msg, sizeof msg);
        }
        if (st != CLNODE_OK) {
            PyErr_SetString(InvalidArgumentError, msg);
            return -1;
        }
    }
    return 0;
}

/* solve_options() -> the library's option table, a tuple of dicts in its order. */
static PyObject *solve_options(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    static const char *const types[] = {"real", "integer", "boolean", "choice", "method"};
    const size_t n = clnode_solve_option_count();
    PyObject *out = PyTuple_New((Py_ssize_t)n);
    for (size_t i = 0; out && i < n; ++i) {
        const clnode_option_info *in = clnode_solve_option_at(i);
        PyObject *choices = in->type == CLNODE_OPTION_METHOD ? names_tuple(method_at)
                                                             : PyTuple_New((Py_ssize_t)in->n_choices);
        for (size_t k = 0; choices && in->type == CLNODE_OPTION_CHOICE && k < in->n_choices; ++k)
            PyTuple_SET_ITEM(choices, (Py_ssize_t)k,
                             Py_BuildValue("(si)", in->choice_names[k], in->choice_values[k]));
        PyObject *d = choices ? Py_BuildValue(
                                    "{s:s,s:s,s:I,s:d,s:d,s:d,s:s,s:N}", "name", in->name, "type",
                                    types[in->type], "flags", in->flags, "default",
                                    in->default_value, "min", in->min, "max", in->max, "doc",
                                    in->doc, "choices", choices)
                              : NULL;
        if (!d) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, (Py_ssize_t)i, d);
    }
    return out;
}

static PyObject *context_solve(ContextObject *self, PyObject *args, PyObject *kw)
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

static PyTypeObject ContextType = {
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

/* ------------------------------------------------------------------------------------------------
 * Devices */

static PyObject *devices(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    clnode_device_list *l = NULL;
    log_buf lb = {0};
    clnode_status st;
    Py_BEGIN_ALLOW_THREADS st = clnode_device_list_create(on_log, &lb, &l);
    Py_END_ALLOW_THREADS flush_log(&lb, "devices");
    free(lb.data);
    if (st != CLNODE_OK)
        return raise_status(st, "cannot list the devices");
    PyObject *devs = PyList_New(0), *backs = PyList_New(0);
    for (size_t i = 0; devs && i < clnode_device_list_count(l); ++i) {
        const clnode_device_info *d = clnode_device_list_get(l, i);
        PyObject *o = Py_BuildValue(
            "{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:(ii),s:I,s:K,s:O}", "spec", d->spec, "backend",
            d->backend, "engine", d->engine, "name", d->name, "vendor", d->vendor, "platform",
            d->platform, "driver_version", d->driver_version, "opencl_c_version",
            d->opencl_c_version, "compute_capability", d->cc_major, d->cc_minor, "compute_units",
            d->compute_units, "global_mem", d->global_mem, "fp64", d->fp64 ? Py_True : Py_False);
        if (!o || PyList_Append(devs, o) < 0)
            Py_CLEAR(devs);
        Py_XDECREF(o);
    }
    for (size_t i = 0; backs && i < clnode_device_list_num_backends(l); ++i) {
        const clnode_backend_info *b = clnode_device_list_backend(l, i);
        PyObject *o =
            Py_BuildValue("{s:s,s:O,s:s,s:n,s:s}", "name", b->name, "built",
                          b->built ? Py_True : Py_False, "status", clnode_status_name(b->status),
                          "num_devices", (Py_ssize_t)b->num_devices, "note", b->note);
        if (!o || PyList_Append(backs, o) < 0)
            Py_CLEAR(backs);
        Py_XDECREF(o);
    }
    clnode_device_list_destroy(&l);
    if (!devs || !backs) {
        Py_XDECREF(devs);
        Py_XDECREF(backs);
        return NULL;
    }
    return Py_BuildValue("(NN)", devs, backs);
}

static PyObject *version(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyUnicode_FromString(clnode_version_string());
}

static PyObject *result_names(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return names_tuple(result_at);
}

static PyObject *activation_names(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return names_tuple(activation_at);
}

static PyObject *method_names(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return names_tuple(method_at);
}

/* save_slots(*, save_t0, save_t1, n_ts, save_steps, max_steps) -> T: the time slots of every
 * trajectory's row of Context.solve's arrays (clnode_save_slots), for shapes known before the
 * solve (clnode.jax at trace time). InvalidArgumentError as Context.solve refuses max_steps. */
static PyObject *save_slots(PyObject *self, PyObject *args, PyObject *kw)
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

static PyMethodDef module_methods[] = {
    {"save_slots", (PyCFunction)(void (*)(void))save_slots, METH_VARARGS | METH_KEYWORDS,
     "save_slots(*, save_t0, save_t1, n_ts, save_steps, max_steps) -> the time slots T of "
     "every trajectory of a solve (clnode_save_slots)"},
    {"devices", devices, METH_NOARGS, "devices() -> (device dicts, backend dicts)"},
    {"version", version, METH_NOARGS, "the C library's version"},
    {"result_names", result_names, METH_NOARGS,
     "result_names() -> the library's trajectory result names, indexed by result code"},
    {"activation_names", activation_names, METH_NOARGS,
     "activation_names() -> the library's activation names, indexed by activation code"},
    {"method_names", method_names, METH_NOARGS,
     "method_names() -> the library's built-in Runge-Kutta methods, in clnode_method_at order"},
    {"solve_options", solve_options, METH_NOARGS,
     "solve_options() -> the library's solve options (clnode_solve_option_at), a tuple of dicts: "
     "name, type (real, integer, boolean, choice, method), flags, default, min, max, doc, "
     "choices ((name, value) pairs; the method names)"},
    {"_xla", clnode_xla_functions, METH_NOARGS,
     "clnode.jax's XLA custom calls: their capsules and functions (_clnode_xla.h)"},
    {"_set_log_sink", set_log_sink, METH_O, "set the callable that receives the library's log"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "_clnode",
    "The C extension of clnode (use the clnode package).",
    -1,
    module_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

static int add_exc(PyObject *m, PyObject **slot, const char *name, PyObject *bases, const char *doc)
{
    char full[96];
    snprintf(full, sizeof full, "clnode.%s", name);
    *slot = PyErr_NewExceptionWithDoc(full, doc, bases, NULL);
    if (!*slot)
        return -1;
    return PyModule_AddObjectRef(m, name, *slot);
}

PyMODINIT_FUNC PyInit__clnode(void)
{
    import_array();
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    if (PyType_Ready(&ModelType) < 0 || PyType_Ready(&ContextType) < 0 ||
        PyType_Ready(&TapeType) < 0)
        goto fail;
    if (PyModule_AddObjectRef(m, "Model", (PyObject *)&ModelType) < 0 ||
        PyModule_AddObjectRef(m, "Context", (PyObject *)&ContextType) < 0 ||
        PyModule_AddObjectRef(m, "Tape", (PyObject *)&TapeType) < 0)
        goto fail;
    if (add_exc(m, &Error, "Error", NULL,
                "Base class of clnode's errors; `status` is the library's status name.") < 0)
        goto fail;

    struct {
        PyObject **slot;
        const char *name;
        PyObject *bases;
        const char *doc;
    } sub[] = {
        {&InvalidArgumentError, "InvalidArgumentError",
         Py_BuildValue("(OO)", Error, PyExc_ValueError), "Bad input (also a ValueError)."},
        {&ModelError, "ModelError", Py_BuildValue("(OO)", Error, PyExc_ValueError),
         "A malformed or unsupported model (also a ValueError)."},
        {&FileError, "FileError", Py_BuildValue("(OO)", Error, PyExc_OSError),
         "A file could not be read (also an OSError)."},
        {&DeviceError, "DeviceError", Py_BuildValue("(O)", Error),
         "No such device, or the device or its driver failed."},
        {&PrecisionError, "PrecisionError", Py_BuildValue("(O)", Error),
         "rtol below what the device's arithmetic resolves (precision_guard='refuse')."},
        {&CancelledError, "CancelledError", Py_BuildValue("(O)", Error),
         "The solve was cancelled (Ctrl-C normally raises KeyboardInterrupt instead)."},
        {&ContextBusyError, "ContextBusyError", Py_BuildValue("(OO)", Error, PyExc_RuntimeError),
         "The context is solving in another thread."},
    };

    for (size_t i = 0; i < sizeof sub / sizeof sub[0]; ++i) {
        if (!sub[i].bases || add_exc(m, sub[i].slot, sub[i].name, sub[i].bases, sub[i].doc) < 0)
            goto fail;
        Py_DECREF(sub[i].bases);
    }
    {
        PyObject *b = Py_BuildValue("(O)", DeviceError);
        if (!b || add_exc(m, &UnsupportedError, "UnsupportedError", b,
                          "The device or this build lacks the precision, mode or backend.") < 0)
            goto fail;
        Py_DECREF(b);
    }
    PyObject *status = PyDict_New();
    if (!status)
        goto fail;
        /* the library's status codes by name */
#define CLN_X_DICT(name, value, msg)                                                               \
    {                                                                                              \
        PyObject *v = PyLong_FromLong(value);                                                      \
        if (!v || PyDict_SetItemString(status, #name, v) < 0) {                                    \
            Py_XDECREF(v);                                                                         \
            Py_DECREF(status);                                                                     \
            goto fail;                                                                             \
        }                                                                                          \
        Py_DECREF(v);                                                                              \
    }
    CLNODE_STATUS_LIST(CLN_X_DICT)
#undef CLN_X_DICT
    if (PyModule_AddObject(m, "STATUS", status) < 0)
        goto fail;
    /* the log codes by name ("precision_guard": 1, ...), as the log sink receives them */
    PyObject *codes = PyDict_New();
#define CLN_X_CODE(name, value, str)                                                               \
    if (codes) {                                                                                   \
        PyObject *v = PyLong_FromLong(value);                                                      \
        if (!v || PyDict_SetItemString(codes, str, v) < 0)                                         \
            Py_CLEAR(codes);                                                                       \
        Py_XDECREF(v);                                                                             \
    }
    CLNODE_LOG_CODE_LIST(CLN_X_CODE)
#undef CLN_X_CODE
    if (!codes || PyModule_AddObject(m, "LOG_CODES", codes) < 0) {
        Py_XDECREF(codes);
        goto fail;
    }
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
