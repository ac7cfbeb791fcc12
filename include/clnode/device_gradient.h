/* clnode/device_gradient.h - the reverse pass (clnode/gradient.h) of a kept solve whose cotangents
 * and gradients are the caller's arrays in the memory of the context's device: no copy of them
 * through the host.
 *
 * What it is for: a framework that holds its arrays on the device (JAX's buffers on XLA's CUDA
 * stream, PyTorch's CUDA tensors), beside clnode_solve_device (clnode/device_solve.h). The pass
 * reads the cotangents of the saved values from the caller's array and writes the gradients of
 * y0, of the conditioning inputs and of the parameters into the caller's arrays, in order on the
 * context's queue (with the caller's work there). Arrays are clnode_device_array's: the
 * backend's native handle plus a byte offset (a cl_mem of the context's cl_context, a CUDA device
 * pointer, a host pointer for "host" contexts), in the solve's precision (float for fp32, double
 * for fp64), row-major, without padding; each offset a multiple of that precision's size.
 *
 * What the host still sends or reads: the tape (in host memory, uploaded as clnode_gradient_compute
 * uploads it), one read of the flags of the cotangents' check made on the device, and each group
 * of blocks' parameter sums (read back as clnode_gradient_compute reads them: the blocks' fixed
 * tree is summed on the host), whose total is written into the parameters' and the scale's arrays
 * at the end.
 * On an OpenCL device or a CUDA GPU the cotangents are copied on the device and the rows of the
 * gradients of y0 and of the inputs are written there by a kernel (cl/cln_reverse_kernels.h:
 * cln_rev_scatter_body); on the host ("host" contexts, host pointers) the pass runs as
 * clnode_gradient_compute on the values converted to and from double (exactly).
 *
 * Bits: those of clnode_gradient_compute of the same solve with the same cotangents given as
 * host doubles holding the same values (in the solve's precision), on the same context, each
 * gradient rounded to the solve's precision (where the reverse pass computes them: no bit is
 * lost).
 */
#ifndef CLNODE_DEVICE_GRADIENT_H
#define CLNODE_DEVICE_GRADIENT_H

#include "clnode/common.h"
#include "clnode/context.h"
#include "clnode/device_solve.h"
#include "clnode/gradient.h"
#include "clnode/model.h"
#include "clnode/solver.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The cotangents and where the gradients go. Fields are only ever appended: set the defaults
 * with clnode_device_gradient_default. */
typedef struct clnode_device_gradient {
    size_t struct_size; /* set by clnode_device_gradient_default */
    /* the cotangents of the saved values: batch x slots x dim in the saved-points layout
     * (clnode_gradient_compute's cot; slots >= clnode_solution_points of every trajectory; the
     * padding slots after a trajectory's points are not read) (required) */
    size_t slots;
    clnode_device_array cot;
    /* the results (handle NULL: not written): dL/dy0, batch x dim; dL/d(conditioning inputs),
     * batch x clnode_model_num_inputs (refused for a model without inputs); the layers' weights'
     * and biases' gradient, laid out as clnode_gradient_params without the output scale (its
     * values before the scale's: all of them for a model without one); the output scale's
     * gradient, clnode_gradient_out_scale's n values (refused for a model without a scale) */
    clnode_device_array y0, inputs, params, scale;
} clnode_device_gradient;

#define clnode_device_gradient_default(g) clnode_device_gradient_default_sized((g), sizeof *(g))
CLNODE_API void clnode_device_gradient_default_sized(clnode_device_gradient *g, size_t struct_size);

/* The gradient of a scalar loss L of the saved values of `sol` (solved with keep_tape = 1, from
 * host arrays or by clnode_solve_device), as clnode_gradient_compute computes it (same model,
 * options, contexts and devices), from the cotangents in the caller's array g->cot, into the
 * caller's arrays g->y0, g->inputs, g->params and g->scale. Blocking: returns when the results are
 * in the caller's arrays.
 *
 * The cotangents of the saved points are checked on the device, as clnode_gradient_compute
 * checks them: a NaN or infinity is refused with CLNODE_ERR_NONFINITE_INPUT and its message
 * (trajectory, slot, component and value).
 *
 * Errors (nothing written on an error found before the pass starts; the result arrays may hold
 * partial values after a device's failure or a cancel): those of clnode_gradient_compute, and
 * CLNODE_ERR_INVALID_ARGUMENT: NULL context, model, solution or g, a struct_size this library
 * does not know, a NULL cotangents' array, an inputs' array for a model without inputs, a
 * scale's array for a model without an output scale, an
 * offset that is not a multiple of the precision's size, an array that is not the backend's kind
 * or is too small (OpenCL); CLNODE_ERR_UNSUPPORTED: a context whose backend takes no device
 * arrays. */
CLNODE_API clnode_status clnode_gradient_compute_device(clnode_context *ctx,
                                                        const clnode_model *model,
                                                        const clnode_gradient_options *opts,
                                                        const clnode_solution *sol,
                                                        const clnode_device_gradient *g);

#ifdef __cplusplus
}
#endif

#endif /* CLNODE_DEVICE_GRADIENT_H */
