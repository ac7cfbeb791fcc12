/* _clnode_names.c - the library's names of results, activations and methods */
#include "_clnode_internal.h"

#include <string.h>

PyObject *names_tuple(const char *(*name_at)(size_t))
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
const char *result_at(size_t i)
{
    const char *name = clnode_result_name((clnode_result)i);
    return strcmp(name, "unknown") ? name : NULL;
}

const char *activation_at(size_t i)
{
    const char *name = clnode_activation_name((clnode_activation)i);
    return strcmp(name, "unknown") ? name : NULL;
}

const char *method_at(size_t i)
{
    const clnode_method *m = clnode_method_at(i);
    return m ? m->name : NULL;
}

PyObject *names_text(const char *(*name_at)(size_t))
{
    PyObject *t = names_tuple(name_at), *sep = PyUnicode_FromString(", ");
    PyObject *text = t && sep ? PyUnicode_Join(sep, t) : NULL;
    Py_XDECREF(t);
    Py_XDECREF(sep);
    return text;
}
