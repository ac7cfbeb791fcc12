/* clnode/tangent.h - forward mode: Jacobian-vector products of a solve, as jax.jvp of diffrax
 * computes them with adjoint=diffrax.ForwardMode().
 *
 * Semantics: the same as reverse mode's (clnode/gradient.h): the solve's accepted steps are
 * held at their forward sizes (diffrax's controller stops the gradient of the step size), rejected
 * steps contribute nothing, and the times (t0, t1, dt0, the save times) are constants: they have
 * no direction. For every accepted step n of a trajectory, with t_n and h held:
 *   z_i = y_n + sum_{j<i} a_ij k_j,  f_i = s * MLP(z_i, inputs, t_i),  k_i = h f_i,
 * and its tangents, in the same combinations (the stage arguments, y_{n+1} and the dense output
 * are linear in y and the k_j for fixed h and theta):
 *   dz_i = dy_n + sum_{j<i} a_ij dk_j,  dk_i = h df_i,
 *   df_i = s * JVP(MLP)(z_i; dz_i, dinputs, dW, db) + ds * MLP(z_i)
 * with, per layer, dz_l = (W dh_{l-1} + dW h_{l-1}) + db and dh_l = act'(z_l) dz_l (the time
 * input's tangent is 0). Each saved value (t0, the step ends, the dense output at the save
 * times, t1) gets the tangent of its own combination. So <cot, J v> computed here equals
 * <J^T cot, v> from clnode_gradient_compute, up to rounding.
 *
 * Use: solve with keep_tape = 1 (as for clnode_gradient_compute), then call
 * clnode_tangent_compute with ndir directions. The tangent pass runs after the solve and reads
 * only its tape: the solve's own results are the same bits with or without it.
 *
 * Bits: every tangent is computed in the solve's precision and GEMM mode, through the ordered
 * GEMM (the products W dh of the directions and trajectories in one product, rows ndir x
 * trajectories), each element of a result from its own trajectory and direction alone, in a
 * fixed order: a trajectory's tangent along a direction has the same bits whatever the batch
 * around it, the other directions, their chunking (max_bytes), the threads, checkpoint_every and
 * the ISA of the host.
 *
 * Memory: besides the result (ndir x batch x slots x dim doubles) and the directions in the
 * state precision, the reverse pass's scratch for the recomputed steps (clnode/gradient.h: per
 * thread, a block of CLNODE_GRADIENT_BLOCK trajectories), and for a chunk of c directions, per
 * thread, c x esize x (32 x (2 dim + stages x (ldz + dim) + 3 maxw) + sum over the layers of
 * in x (out + 16)) bytes (ldz: the first layer's inputs, maxw: the widest layer, esize: 4 or 8):
 * each direction's tangent rows of a block and its packed weights. c is the most directions for
 * which that is at most max_bytes; one direction beyond it is refused, naming the bytes.
 *
 * Devices: the tangent pass runs on the host (device "host", its ordered GEMM). OpenCL and CUDA
 * contexts refuse it (CLNODE_ERR_UNSUPPORTED, naming the device and "host"); a solve of any
 * device in strict GEMM mode (whose bits are the host's) can be differentiated on a host context.
 */
#ifndef CLNODE_TANGENT_H
#define CLNODE_TANGENT_H

#include "clnode/common.h"
#include "clnode/context.h"
#include "clnode/model.h"
#include "clnode/solver.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Options of the tangent pass. Fields are only ever appended (clnode/common.h): set the defaults
 * with clnode_tangent_default_options. */
typedef struct clnode_tangent_options {
    size_t struct_size; /* set by the defaults function */
    size_t max_bytes;   /* default 0: 256 MiB. The bound of the tangents' scratch: the directions
                           are taken in chunks whose scratch fits it (the same bits whatever the
                           chunks); CLNODE_ERR_OUT_OF_MEMORY naming the bytes needed when one
                           direction does not fit */
    clnode_progress_fn progress; /* default NULL; as the forward solve's, between groups of
                                    blocks, at most once a second: `active` the trajectories
                                    not yet done in the current chunk of directions,
                                    `fraction` the fraction of the whole pass done,
                                    `steps_taken` the steps of the chunk gone through */
    void *progress_user;
    clnode_cancel_fn cancel; /* default NULL: never cancelled; polled before each group of blocks */
    void *cancel_user;
} clnode_tangent_options;

#define clnode_tangent_default_options(opts)                                                       \
    clnode_tangent_default_options_sized((opts), sizeof *(opts))
CLNODE_API void clnode_tangent_default_options_sized(clnode_tangent_options *opts,
                                                     size_t struct_size);

typedef struct clnode_tangent clnode_tangent;

/* The Jacobian-vector products of a kept solve's saved values along ndir directions. Each
 * direction, NULL for zero, row-major and direction-major:
 *   dy0      ndir x batch x dim             the initial states'
 *   dinputs  ndir x batch x n_in            the conditioning inputs' (NULL for a model with none)
 *   dparams  ndir x nparams                 the parameters', laid out as clnode_gradient_params
 *            (each layer's weight then its bias if any, then the output scale if any): one
 *            direction of the parameters per direction, shared by the batch.
 * Each direction is rounded to the state precision. slots as clnode_solution_rows_f64 and
 * clnode_gradient_compute take it (>= clnode_solution_points of every trajectory).
 * ctx: the context of the tangent pass, which recomputes the solve's steps from its tape: the host
 * on its ordered GEMM (device "host"). model: the model solved, the same object. opts: NULL for
 * the defaults. On success *out holds the result (clnode_tangent_values). Errors (nothing in
 * *out): CLNODE_ERR_INVALID_ARGUMENT (NULL ctx, model, sol or out; ndir 0; a solution that kept
 * nothing (solve with keep_tape = 1), another model, slots below a trajectory's points),
 * CLNODE_ERR_NONFINITE_INPUT (a direction's value that is NaN or infinite, or beyond the float
 * range in an fp32 solve: named by direction, trajectory and component, or direction and
 * parameter), CLNODE_ERR_UNSUPPORTED (a device without the tangent pass, named, with the remedy:
 * the device "host"; "host:openblas"; a tf32 solution from a CUDA device), CLNODE_ERR_OUT_OF_MEMORY
 * (one direction's scratch beyond max_bytes, named in bytes), CLNODE_ERR_CANCELLED. */
CLNODE_API clnode_status clnode_tangent_compute(clnode_context *ctx, const clnode_model *model,
                                                const clnode_tangent_options *opts,
                                                const clnode_solution *sol, size_t slots,
                                                size_t ndir, const double *dy0,
                                                const double *dinputs, const double *dparams,
                                                clnode_tangent **out);

/* Destroys a tangent result and sets *t to NULL. Accepts NULL and a pointer to NULL. */
CLNODE_API void clnode_tangent_destroy(clnode_tangent **t);

/* The tangents: ndir x batch x slots x dim doubles, row-major; direction d's tangent of
 * trajectory b's saved point k at [((d * batch + b) * slots + k) * dim]; the padding slots after
 * a trajectory's points are 0. NULL for NULL. */
CLNODE_API const double *clnode_tangent_values(const clnode_tangent *t);

/* The directions of a result (its ndir); 0 for NULL. */
CLNODE_API size_t clnode_tangent_directions(const clnode_tangent *t);

#ifdef __cplusplus
}
#endif

#endif /* CLNODE_TANGENT_H */
