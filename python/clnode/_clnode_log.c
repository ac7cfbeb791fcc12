/* _clnode_log.c - the library's log: collected in a buffer (the logger may run while the GIL is
 * released) and handed to clnode._log_sink(messages) after the call, with the GIL. */
#include "_clnode_internal.h"

#include <stdlib.h>
#include <string.h>

static PyObject *g_log_sink; /* set by clnode/__init__.py */

void on_log(void *user, clnode_log_level level, clnode_log_code code, const char *message)
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

int flush_log(log_buf *b, const char *origin)
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

PyObject *set_log_sink(PyObject *self, PyObject *sink)
{
    (void)self;
    Py_XSETREF(g_log_sink, Py_NewRef(sink));
    Py_RETURN_NONE;
}

int log_codes_add(PyObject *m)
{
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
        return -1;
    }
    return 0;
}
