/* clnode/bench.h - benchmarking entry points: a solve's GEMMs alone, and its vector-field
 * evaluations alone, on the context's device, so that a program (clnode-bench) can put the
 * solver's throughput beside the bare GEMM rate and the bare vector-field rate.
 *
 * Thread-safety: as every call with a context (one thread at a time per context).
 */
#ifndef CLNODE_BENCH_H
#define CLNODE_BENCH_H

#include "clnode/common.h"
#include "clnode/context.h"
#include "clnode/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs the bare GEMM loop of `evals` vector-field evaluations of `model` on `batch` rows: per
 * evaluation one GEMM per layer (input times the layer's weights transposed), through the same
 * GEMM a solve uses on this device (the ordered GEMM on "host", OpenBLAS on "host:openblas",
 * CLBlast on OpenCL, the ordered kernel or cuBLAS on CUDA) in `precision` and `mode`, on the rows a
 * solve of that batch computes (the batch padded to the device's row alignment). No bias, no
 * activation, no solver work; every evaluation starts from the same input, so no value drifts
 * into the subnormal range. Buffers are allocated and filled before the clock starts; the loop
 * ends with one wait for the device.
 * Stores the loop's wall time in *seconds and the host-device synchronisations it made in
 * *syncs (either may be NULL). Errors: CLNODE_ERR_INVALID_ARGUMENT (NULL context or model,
 * batch 0, evals < 1, tf32 with fp64), CLNODE_ERR_NO_FP64 / CLNODE_ERR_UNSUPPORTED, device and
 * memory errors as clnode_solve. Blocking. */
CLNODE_API clnode_status clnode_bench_gemm_loop(clnode_context *ctx, const clnode_model *model,
                                                size_t batch, long evals,
                                                clnode_precision precision, clnode_gemm_mode mode,
                                                double *seconds, long *syncs);

/* Runs the bare loop of `evals` vector-field evaluations of `model` on `batch` rows in
 * `precision` (strict GEMM mode): per evaluation the whole MLP (the products, biases and
 * activations) through the kernels a solve on this device evaluates it with (on "host": the fused
 * pass on weights packed once, the ordered GEMM and its row-at-a-time kernels, the activation
 * loops, and the thread hand-off a solve of that batch makes; on OpenCL: CLBlast's GEMMs and the
 * bias + activation kernels), with no stage and no step of the solver: the floor a solve's
 * vector-field work cannot go below. Every evaluation starts from the same input. Set-up (buffers,
 * packing) and one warm-up evaluation come before the clock starts. Stores the loop's wall time in
 * *seconds (may be NULL). Errors: CLNODE_ERR_INVALID_ARGUMENT (NULL context or model, batch 0,
 * evals < 1), CLNODE_ERR_NO_FP64 / CLNODE_ERR_UNSUPPORTED (a device without this loop: today "host"
 * with the ordered GEMM and OpenCL have it; a model with a time or conditioning input), memory
 * errors. Blocking. */
CLNODE_API clnode_status clnode_bench_mlp_loop(clnode_context *ctx, const clnode_model *model,
                                               size_t batch, long evals, clnode_precision precision,
                                               double *seconds);

/* Runs the bare loop of `steps` steps of a reverse pass (clnode/gradient.h) through `stages`
 * stages each, of `model` on `batch` rows in `precision` (strict GEMM mode), on the context's
 * device: the reverse pass's own schedule and per-step operations, on a job of one step per row
 * (fixed states, a zero tableau) without a tape to walk. Per step, as the reverse pass takes a
 * step: each row's state, every stage's argument and MLP recomputed, then from the last stage
 * back each stage's vector-Jacobian product (its MLP's and its argument's), then the step's
 * weight and bias sums; the rows in blocks of CLNODE_GRADIENT_BLOCK, as many at a time and on as
 * many threads as the reverse pass takes them. No saved point, no row finished, no shrinking of
 * the active rows: the reverse pass's per-step work alone. Set-up (the packed weights, the
 * buffers) and one warm-up step come before the clock starts; the blocks' set-up and read-back are
 * timed (once per run, not per step). Stores the loop's wall time in *seconds (may be NULL).
 * Errors: CLNODE_ERR_INVALID_ARGUMENT (NULL context or model, batch 0, steps < 1, stages outside
 * [1, CLNODE_MAX_STAGES]), CLNODE_ERR_NO_FP64, CLNODE_ERR_UNSUPPORTED (a context without a
 * reverse pass, as host:openblas; a model with a time or conditioning input or an output scale),
 * CLNODE_ERR_OUT_OF_MEMORY. Blocking. */
CLNODE_API clnode_status clnode_bench_vjp_loop(clnode_context *ctx, const clnode_model *model,
                                               size_t batch, long steps, int stages,
                                               clnode_precision precision, double *seconds);

#ifdef __cplusplus
}
#endif

#endif /* CLNODE_BENCH_H */
