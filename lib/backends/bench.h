/* bench.h - the bare loops of a device (bench.c) on a model's view: the public entry points of
 * clnode/bench.h (lib/solver/bench.c) take the library's model and hand its view here. The
 * checks, errors and messages are those of the public functions. Not installed. */
#ifndef CLN_BENCH_H
#define CLN_BENCH_H

#include "backends/model_view.h"
#include "clnode/bench.h"

/* clnode_bench_gemm_loop and clnode_bench_mlp_loop on `m` (NULL: no
 * model, refused as the public functions refuse it). */
clnode_status cln_bench_gemm_loop(clnode_context *ctx, const cln_model_view *m, size_t batch,
                                  long evals, clnode_precision prec, clnode_gemm_mode mode,
                                  double *seconds, long *syncs);
clnode_status cln_bench_mlp_loop(clnode_context *ctx, const cln_model_view *m, size_t batch,
                                 long evals, clnode_precision prec, double *seconds);

#endif /* CLN_BENCH_H */
