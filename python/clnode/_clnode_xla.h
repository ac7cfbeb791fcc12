/* _clnode_xla.h - clnode.jax's XLA custom calls (_clnode_xla.c): the forward solve and the reverse
 * pass as XLA FFI handlers, their plans, contexts and tapes. The extension's one entry point. */
#ifndef CLNODE_PY_XLA_H
#define CLNODE_PY_XLA_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* _clnode._xla() -> dict: "fwd" and "vjp" (PyCapsules of the handlers, for
 * jax.ffi.register_ffi_target), "api" ((major, minor): the FFI API version they need), and the
 * functions "plan", "tape_stats", "set_tape_limit" (doc/python.md, clnode/jax/_ffi.py). */
PyObject *clnode_xla_functions(PyObject *self, PyObject *noargs);

#endif /* CLNODE_PY_XLA_H */
