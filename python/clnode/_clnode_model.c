/* _clnode_model.c - clnode._clnode.Model, a clnode_model (immutable), made and evaluated on a
 * private host context. */
#include "_clnode_internal.h"

#include <stdlib.h>
#include <string.h>

/* A private host context for model creation and evaluation (used with the GIL held, so by one
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
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO&O&p|nO", kwlist, &ws, &bs, activation_arg, &act,
                                     activation_arg, &fact, &time_input, &num_inputs, &so))
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

PyObject *copy_doubles(const double *p, npy_intp n0, npy_intp n1)
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

PyTypeObject ModelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "clnode._clnode.Model",
    .tp_basicsize = sizeof(ModelObject),
    .tp_dealloc = (destructor)model_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A clnode_model (immutable). Use clnode.MLP.",
    .tp_methods = model_methods,
    .tp_getset = model_getset,
};
