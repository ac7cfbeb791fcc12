/* _clnode_devices.c - devices(): the library's device listing (clnode/devices.h) as dicts. */
#include "_clnode_internal.h"

#include <stdlib.h>

PyObject *devices(PyObject *self, PyObject *noargs)
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
