/* _clnode.c - the CPython extension of the clnode package: contexts, models and solves of the C
 * library on numpy arrays. Everything numeric happens in the library; the extension converts
 * arrays, lays out the saved points as diffrax does (t0, then ts and steps in time order, then t1,
 * padded with +inf), releases the GIL while solving and turns Ctrl-C into a cancelled solve.
 * This file is the module: its functions' table and its init; the other files of the extension,
 * one concern each, are listed in _clnode_internal.h.
 *
 * The Python side (python/clnode/) adds the user-facing names, argument checking, the model
 * converters and the JAX drop-in.
 */
#define CLN_PY_IMPORT_ARRAY /* import_array fills numpy's API table here */
#include "_clnode_internal.h"
#include "_clnode_xla.h"
#include "_clnode_xla_cuda.h"
#include "core/fpenv.h"

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

/* IEEE's default environment on the calling thread (core/fpenv.h) while a front end converts
 * and solves, whatever the caller set (torch.set_flush_denormal): the saved control word to give
 * to ieee_end. */
static PyObject *ieee_begin(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    const cln_fpenv e = cln_fpenv_ieee();
    return Py_BuildValue("(KO)", e.saved, e.changed ? Py_True : Py_False);
}

static PyObject *ieee_end(PyObject *self, PyObject *arg)
{
    (void)self;
    cln_fpenv e = {0, 0};
    int changed = 0;
    if (!PyArg_ParseTuple(arg, "Kp", &e.saved, &changed))
        return NULL;
    e.changed = changed;
    cln_fpenv_restore(&e);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"save_slots", (PyCFunction)(void (*)(void))save_slots, METH_VARARGS | METH_KEYWORDS,
     "save_slots(*, save_t0, save_t1, n_ts, save_steps, max_steps) -> the time slots T of "
     "every trajectory of a solve (clnode_save_slots)"},
    {"tape_import", tape_import, METH_VARARGS,
     "tape_import(context, model, buffer, slots) -> Tape: a solution from the library's tape "
     "bytes (clnode_solution_tape_import)"},
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
    {"_xla_cuda", clnode_xla_cuda_functions, METH_NOARGS,
     "clnode.jax's XLA custom calls on the CUDA platform: their capsules (_clnode_xla_cuda.h)"},
    {"solve_cuda", (PyCFunction)(void (*)(void))solve_cuda, METH_VARARGS | METH_KEYWORDS,
     "solve_cuda(model, options, *, device, stream, batch, y0, ys, save_ts, n_ts, ts_rows, "
     "inputs, t0s=None, t1s=None, dt0s=None) -> (stats, tinfo, saved): a solve of CUDA device "
     "arrays (pointers) on the caller's stream (clnode_solve_device)"},
    {"_set_log_sink", set_log_sink, METH_O, "set the callable that receives the library's log"},
    {"_ieee_begin", ieee_begin, METH_NOARGS,
     "IEEE's default floating-point environment on this thread: the caller's, for _ieee_end"},
    {"_ieee_end", ieee_end, METH_O, "gives back the environment _ieee_begin returned"},
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
    if (errors_add(m) < 0 || log_codes_add(m) < 0 || option_flags_add(m) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
