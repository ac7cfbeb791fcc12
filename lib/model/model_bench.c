/* model_bench.c - the bare loops of clnode/bench.h take the library's model: each hands the
 * model's view (backends/model_view.h) to the backends' loop (backends/bench.c), which checks
 * its arguments and runs it. */
#include "backends/bench.h"
#include "model/model.h"

clnode_status clnode_bench_gemm_loop(clnode_context *ctx, const clnode_model *m, size_t batch,
                                     long evals, clnode_precision prec, clnode_gemm_mode mode,
                                     double *seconds, long *syncs)
{
    cln_model_view v;
    return cln_bench_gemm_loop(ctx, m ? cln_model_view_of(m, &v) : NULL, batch, evals, prec, mode,
                               seconds, syncs);
}

clnode_status clnode_bench_mlp_loop(clnode_context *ctx, const clnode_model *m, size_t batch,
                                    long evals, clnode_precision prec, double *seconds)
{
    cln_model_view v;
    return cln_bench_mlp_loop(ctx, m ? cln_model_view_of(m, &v) : NULL, batch, evals, prec,
                              seconds);
}

clnode_status clnode_bench_vjp_loop(clnode_context *ctx, const clnode_model *m, size_t batch,
                                    long steps, int stages, clnode_precision prec, double *seconds)
{
    cln_model_view v;
    return cln_bench_vjp_loop(ctx, m ? cln_model_view_of(m, &v) : NULL, batch, steps, stages, prec,
                              seconds);
}
