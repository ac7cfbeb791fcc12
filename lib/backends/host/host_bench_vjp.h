/* host_bench_vjp.h - the bare loop of a reverse pass's vector-Jacobian products on the host
 * (host_bench_vjp.inc), for clnode_bench_vjp_loop (clnode/bench.h). */
#ifndef CLN_HOST_BENCH_VJP_H
#define CLN_HOST_BENCH_VJP_H

#include <stddef.h>

#include "backends/model_view.h"

/* Runs `steps` reverse steps of `stages` stages each, on `batch` rows taken in blocks of `block`
 * rows spread over `threads` threads: per step, every stage's recompute (the MLP forward from a
 * fixed input, keeping each layer's pre-activation and output), then from the last stage back
 * its vector-Jacobian product from a fixed cotangent of its output (per layer from the last the
 * activation's derivative of cl/cln_activation.h, the bias sums over the rows in order, the input
 * cotangent through the ordered GEMM on the transposed weights), then the step's weight
 * cotangents, per layer one ordered GEMM over its stages and rows. Each thread accumulates its
 * own parameter cotangents. The model's weights and biases (float64) are converted to the loop's
 * precision once, before the clock starts. Returns the wall time of the loop (set-up and a warm-up
 * step excluded), or -1 when out of memory. */
#define CLN_BENCH_VJP_DECLARE(sfx)                                                                 \
    double cln_host_bench_vjp_##sfx(const cln_model_view *m, size_t batch, size_t block,           \
                                    long steps, size_t stages, int threads);
CLN_BENCH_VJP_DECLARE(f32)
CLN_BENCH_VJP_DECLARE(f64)

#endif /* CLN_HOST_BENCH_VJP_H */
