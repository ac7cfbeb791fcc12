/* _clnode_options.c - the library's solve option table (clnode_solve_option_at) as Python sees
 * it, its flags (the package tests a row's flags with these, never with numbers of its own), and
 * a solve's options from a dict {name: value} of it. */
#include "_clnode_internal.h"

/* The options of a solve from a dict {name: value} of the library's option table: a str is
 * parsed (a choice or a method by name), a number set (clnode_solve_option_set). Returns 0, or
 * -1 with InvalidArgumentError carrying the library's message. */
int apply_options(clnode_solve_options *o, PyObject *dict)
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

PyObject *solve_options(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    static const char *const types[] = {"real", "integer", "boolean", "choice", "method"};
    const size_t n = clnode_solve_option_count();
    PyObject *out = PyTuple_New((Py_ssize_t)n);
    for (size_t i = 0; out && i < n; ++i) {
        const clnode_option_info *in = clnode_solve_option_at(i);
        PyObject *choices = in->type == CLNODE_OPTION_METHOD
                                ? names_tuple(method_at)
                                : PyTuple_New((Py_ssize_t)in->n_choices);
        for (size_t k = 0; choices && in->type == CLNODE_OPTION_CHOICE && k < in->n_choices; ++k)
            PyTuple_SET_ITEM(choices, (Py_ssize_t)k,
                             Py_BuildValue("(si)", in->choice_names[k], in->choice_values[k]));
        PyObject *d = choices ? Py_BuildValue("{s:s,s:s,s:I,s:d,s:d,s:d,s:s,s:N}", "name", in->name,
                                              "type", types[in->type], "flags", in->flags,
                                              "default", in->default_value, "min", in->min, "max",
                                              in->max, "doc", in->doc, "choices", choices)
                              : NULL;
        if (!d) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, (Py_ssize_t)i, d);
    }
    return out;
}

int option_flags_add(PyObject *m)
{
#define CLN_FLAG(name)                                                                             \
    {                                                                                              \
        "OPTION_" #name, CLNODE_OPTION_##name                                                      \
    }
    static const struct {
        const char *name;
        unsigned value;
    } flags[] = {CLN_FLAG(MIN_OPEN), CLN_FLAG(MAX_OPEN), CLN_FLAG(CONTROLLER), CLN_FLAG(KERNEL),
                 CLN_FLAG(PROBLEM),  CLN_FLAG(SAVE),     CLN_FLAG(SAME_BITS)};
#undef CLN_FLAG
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; ++i)
        if (PyModule_AddIntConstant(m, flags[i].name, (long)flags[i].value) < 0)
            return -1;
    return 0;
}
