/* _clnode_xla_cuda.h - clnode.jax's custom calls on XLA's CUDA platform (_clnode_xla_cuda.c). */
#ifndef CLNODE_PY_XLA_CUDA_H
#define CLNODE_PY_XLA_CUDA_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* _clnode._xla_cuda() -> dict: "fwd" and "vjp", PyCapsules of the CUDA platform's handlers (for
 * jax.ffi.register_ffi_target(..., platform="CUDA")), which run _xla()'s handlers of the same
 * names on host copies of XLA's device buffers, staged on XLA's stream. */
PyObject *clnode_xla_cuda_functions(PyObject *self, PyObject *noargs);

#endif /* CLNODE_PY_XLA_CUDA_H */
