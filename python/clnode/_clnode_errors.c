/* _clnode_errors.c - clnode.Error and its subclasses (created here, exported by
 * clnode/__init__.py), and a library status raised as one of them. */
#include "_clnode_internal.h"

PyObject *Error, *InvalidArgumentError, *ModelError, *FileError, *DeviceError, *UnsupportedError,
    *PrecisionError, *CancelledError, *ContextBusyError;

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

PyObject *raise_status(clnode_status st, const char *msg)
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

static int add_exc(PyObject *m, PyObject **slot, const char *name, PyObject *bases, const char *doc)
{
    char full[96];
    snprintf(full, sizeof full, "clnode.%s", name);
    *slot = PyErr_NewExceptionWithDoc(full, doc, bases, NULL);
    if (!*slot)
        return -1;
    return PyModule_AddObjectRef(m, name, *slot);
}

int errors_add(PyObject *m)
{
    if (add_exc(m, &Error, "Error", NULL,
                "Base class of clnode's errors; `status` is the library's status name.") < 0)
        return -1;

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
            return -1;
        Py_DECREF(sub[i].bases);
    }
    {
        PyObject *b = Py_BuildValue("(O)", DeviceError);
        if (!b || add_exc(m, &UnsupportedError, "UnsupportedError", b,
                          "The device or this build lacks the precision, mode or backend.") < 0)
            return -1;
        Py_DECREF(b);
    }
    PyObject *status = PyDict_New();
    if (!status)
        return -1;
        /* the library's status codes by name */
#define CLN_X_DICT(name, value, msg)                                                               \
    {                                                                                              \
        PyObject *v = PyLong_FromLong(value);                                                      \
        if (!v || PyDict_SetItemString(status, #name, v) < 0) {                                    \
            Py_XDECREF(v);                                                                         \
            Py_DECREF(status);                                                                     \
            return -1;                                                                             \
        }                                                                                          \
        Py_DECREF(v);                                                                              \
    }
    CLNODE_STATUS_LIST(CLN_X_DICT)
#undef CLN_X_DICT
    if (PyModule_AddObject(m, "STATUS", status) < 0)
        return -1;
    return 0;
}
