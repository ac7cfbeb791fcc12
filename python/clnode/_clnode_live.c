/* _clnode_live.c - Python called from inside the library's work (see _clnode_live.h). */
#include "_clnode_live.h"

int check_progress(PyObject *progress)
{
    if (progress == Py_None || PyCallable_Check(progress))
        return 0;
    PyErr_Format(PyExc_TypeError, "progress must be None or callable, not %s",
                 Py_TYPE(progress)->tp_name);
    return -1;
}

int py_progress_call(void *user, size_t active, size_t batch, double fraction, long steps)
{
    py_progress *p = user;
    PyGILState_STATE g = PyGILState_Ensure();
    int stop = p->etype != NULL;
    if (!stop) {
        PyObject *r = PyObject_CallFunction(p->fn, "dnnl", fraction, (Py_ssize_t)active,
                                            (Py_ssize_t)batch, steps);
        if (r) {
            Py_DECREF(r);
        } else {
            PyErr_Fetch(&p->etype, &p->evalue, &p->etb);
            stop = 1;
        }
    }
    PyGILState_Release(g);
    return stop;
}

int py_progress_finish(py_progress *p)
{
    if (!p->etype)
        return 0;
    PyErr_Restore(p->etype, p->evalue, p->etb);
    p->etype = p->evalue = p->etb = NULL;
    return -1;
}

void py_log_now(PyObject *sink, clnode_log_level level, clnode_log_code code, const char *message,
                const char *origin)
{
    PyGILState_STATE g = PyGILState_Ensure();
    if (sink && sink != Py_None) {
        PyObject *et, *ev, *tb; /* the caller's own exception, untouched */
        PyErr_Fetch(&et, &ev, &tb);
        PyObject *r =
            PyObject_CallFunction(sink, "[(iis)]s", (int)level, (int)code, message, origin);
        if (r)
            Py_DECREF(r);
        else
            PyErr_WriteUnraisable(sink);
        PyErr_Restore(et, ev, tb);
    }
    PyGILState_Release(g);
}
