/* clnode/device_solve.h - a solve whose batch-sized inputs and outputs are the caller's arrays in
 * the memory of the context's device: no copy of them through the host.
 *
 * What it is for: a framework that holds its arrays on the device (JAX's buffers on XLA's CUDA
 * stream, PyTorch's CUDA tensors) and a context adopting its stream (clnode_context_create_cuda)
 * or its OpenCL queue (clnode_context_create_opencl). The solve reads y0, the conditioning inputs
 * and the save times from the caller's arrays and writes the values at the save times and at t1
 * into the caller's arrays, through copies on the context's queue (in order with the caller's
 * work there). What the host still sends or reads: the model and the constants (as every solve),
 * the per-trajectory intervals and first steps (host arrays, as clnode_problem's), one read of a
 * read of the flags of the checks made on the device (y0's and the inputs' finiteness, the save
 * times' values), the active count between groups of steps, and the per-trajectory statistics
 * at the end.
 *
 * An array is the backend's native handle plus a byte offset:
 *   - OpenCL: a cl_mem of the context's cl_context (checked, as is that offset + the array's
 *     bytes fit the buffer);
 *   - CUDA: a device pointer (CUdeviceptr or what cudaMalloc gives, cast to void *) on the
 *     context's device; the runtime cannot tell its size: it must hold the bytes stated below;
 *   - the host ("host" contexts): a host pointer.
 * Every array is in the solve's precision (clnode_solve_options.precision: float for fp32,
 * double for fp64), row-major, without padding: nothing is converted.
 *
 * Bits: the same steps and bits as clnode_solve of the same problem given as host arrays holding
 * the same values (in the solve's precision), on the same device: the same kernels in the same
 * order. The active-set compaction (clnode_solve_options.compact) is not made (it changes no
 * bit, only the speed of batches whose trajectories take very different numbers of steps).
 */
#ifndef CLNODE_DEVICE_SOLVE_H
#define CLNODE_DEVICE_SOLVE_H

#include "clnode/common.h"
#include "clnode/context.h"
#include "clnode/model.h"
#include "clnode/solver.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One of the caller's arrays on the context's device: handle NULL: none. */
typedef struct clnode_device_array {
    void *handle;  /* cl_mem (OpenCL), a device pointer (CUDA), a host pointer (host) */
    size_t offset; /* bytes from the start of handle's memory to the array's first element */
} clnode_device_array;

/* A problem whose arrays are on the device, and where its results go. Fields are only ever
 * appended: set the defaults with clnode_device_problem_default. */
typedef struct clnode_device_problem {
    size_t struct_size;     /* set by clnode_device_problem_default */
    size_t batch;           /* trajectories, in [1, 2147483647] */
    clnode_device_array y0; /* batch x dim initial states (required) */
    /* host arrays, as clnode_problem's (NULL: the options' t0, t1, dt0 for every trajectory) */
    const double *t0s, *t1s, *dt0s;
    clnode_device_array inputs;  /* batch x clnode_model_num_inputs(model): required when the
                                    model has conditioning inputs, refused when it has none */
    clnode_device_array save_ts; /* n_save_ts times shared by the batch, or batch x n_save_ts
                                    with save_ts_per_trajectory (as clnode_problem's) */
    size_t n_save_ts;
    int save_ts_per_trajectory;
    /* the results: ys (batch x n_save_ts x dim) the values at the save times, required when
     * n_save_ts > 0; y1 (batch x dim) the state where each trajectory stopped (t1 on success),
     * required with clnode_solve_options.save_t1 */
    clnode_device_array ys, y1;
    /* with keep_tape (clnode_solve_options.keep_tape): receives
     * the solve's solution in host memory with its tape, for clnode_gradient_compute and
     * clnode_tangent_compute (required then; NULL otherwise, and untouched) */
    clnode_solution **kept;
    /* optional (handle NULL: none): the saved points' times, batch x n_save_ts: trajectory b's
     * row holds the save times it reached (save_ts[j], j < saved[b] of clnode_solve_device),
     * then +inf; without save times but with save_t1, batch x 1: the time where each
     * trajectory stopped (clnode_trajectory_stats.t_final, t1 on success). The times
     * clnode_solution_rows gives for the same slots, in the solve's precision. */
    clnode_device_array ts;
} clnode_device_problem;

#define clnode_device_problem_default(p) clnode_device_problem_default_sized((p), sizeof *(p))
CLNODE_API void clnode_device_problem_default_sized(clnode_device_problem *p, size_t struct_size);

/* Solves problem->batch trajectories of `model` from the device arrays of `problem` with the
 * options `opts` (NULL: the defaults) on the context's device, as clnode_solve does (same
 * options, same checks of the options, the intervals and the first steps), and writes the
 * results into the device arrays of `problem`. stats: NULL, or `problem->batch` host structs
 * that receive each trajectory's statistics (clnode_solution_stats' fields); saved: NULL, or
 * `problem->batch` host counts: saved[b] is the index of the first save time trajectory b did
 * not reach (every value ys[b][j], j < saved[b], at a time inside its interval is written; the
 * rest of its row of ys is +inf, as clnode_solution_rows pads a row: the values at save times
 * a trajectory did not reach, because it stopped before them, are infinities). Blocking: returns
 * when the results are in the caller's arrays.
 *
 * Saved points: the save times (ys) and t1 (y1); save_t0 (y0 is the caller's array already) and
 * save_steps (they live in host memory) are refused (CLNODE_ERR_UNSUPPORTED).
 *
 * keep_tape: the reverse and tangent passes run from a tape in host memory. With keep_tape the
 * solve also gives *problem->kept, the solution clnode_solve would give with its tape: the kept
 * states are thinned on the device and read back as clnode_solve's are, and so are y0, the
 * inputs and the save times (the tape holds them), which is a read of those arrays to the host
 * that a solve without keep_tape does not make. Its tape and saved points are clnode_solve's,
 * byte for byte (clnode_solution_tape_export; only clnode_solution_syncs, the waits for the
 * device, differs); the caller destroys it.
 *
 * The save times are checked on the device as clnode_solve checks a host list: each finite, not
 * smaller than the one before it, and inside [t0, t1] (the options' interval for a shared list
 * without per-trajectory intervals, trajectory b's for row b of a list per trajectory; a shared
 * list with per-trajectory intervals is clipped to each), the interval compared in the solve's
 * precision (t0 and t1 rounded to it, as the solve steps). Refused besides: save times with a
 * backward integration (t1 < t0) and with a trajectory of t0 == t1.
 *
 * Errors (nothing is written to stats and saved; the result arrays may hold partial values):
 * every error of clnode_solve about the options, the batch, the intervals, the first steps and
 * the device, and CLNODE_ERR_INVALID_ARGUMENT: NULL problem or model, a struct_size this library
 * does not know, a NULL y0, inputs missing or not expected, save times counted without an
 * array or an array without a count, a missing result array (ys, y1), a times array (ts) with
 * neither save times nor save_t1, an array that is not the
 * backend's kind or is too small (OpenCL: a cl_mem of another context, an offset + size past its
 * end); CLNODE_ERR_UNSUPPORTED: a context whose backend takes no device arrays, the refusals
 * above; CLNODE_ERR_INVALID_ARGUMENT also: a save time that is not finite, out of order or
 * outside its interval, detected on the device and refused with clnode_solve's message (its
 * index, its trajectory for a list per trajectory, its value), before any check of y0 as in
 * clnode_solve; CLNODE_ERR_NONFINITE_INPUT: a NaN or infinity in y0 or the inputs, detected on the
 * device and named by trajectory and component as clnode_solve names them. */
#define clnode_solve_device(ctx, model, opts, problem, stats, saved)                               \
    clnode_solve_device_sized((ctx), (model), (opts), (problem), (stats), (saved),                 \
                              sizeof(clnode_trajectory_stats))
CLNODE_API clnode_status clnode_solve_device_sized(clnode_context *ctx, const clnode_model *model,
                                                   const clnode_solve_options *opts,
                                                   const clnode_device_problem *problem,
                                                   clnode_trajectory_stats *stats, size_t *saved,
                                                   size_t stats_size);

#ifdef __cplusplus
}
#endif

#endif /* CLNODE_DEVICE_SOLVE_H */
