/* clnode-bench - throughput of the seed problem against the bare GEMMs it contains.
 *
 * For each batch size B: one full seed solve (tsit5, fp32, rtol 1e-4, atol 1e-6, t in [0, 50],
 * distinct y0 per trajectory) timed on the chosen device, then in the same run a bare loop of
 * exactly the GEMMs that solve performs (the same shapes, the same count, one cblas_sgemm per
 * layer over all B rows, no solver work), and their ratio. It also prints microseconds per step,
 * the peak resident memory, and the host-device synchronisations of the solve. Ratios, not
 * absolute times, are the result: both are measured in one process on one machine.
 *
 *   clnode-bench [--device SPEC] [--batches 1,64,4096] [--repeat N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cblas.h>

#include "clnode.h"
#include "tool_common.h"

static long peak_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* The bare GEMM loop: `evals` right-hand sides of B rows through the model's layers. */
static double bare_gemm_seconds(const clnode_model *m, size_t B, long evals)
{
    const size_t L = clnode_model_num_layers(m);
    size_t maxw = 1;
    for (size_t l = 0; l < L; ++l) {
        if (clnode_model_layer_in(m, l) > maxw)
            maxw = clnode_model_layer_in(m, l);
        if (clnode_model_layer_out(m, l) > maxw)
            maxw = clnode_model_layer_out(m, l);
    }
    float *H0 = calloc(B * maxw, sizeof(float)), *H1 = calloc(B * maxw, sizeof(float));
    float *W[64] = {0};
    for (size_t l = 0; l < L; ++l) {
        const size_t n = clnode_model_layer_in(m, l) * clnode_model_layer_out(m, l);
        W[l] = malloc(n * sizeof(float));
        for (size_t i = 0; W[l] && i < n; ++i)
            W[l][i] = (float)clnode_model_weight(m, l)[i];
    }
    for (size_t i = 0; H0 && i < B * maxw; ++i)
        H0[i] = 0.01f * (float)(i % 97);
    const double t0 = tool_now();
    for (long e = 0; e < evals; ++e) {
        float *in = H0, *out = H1;
        for (size_t l = 0; l < L; ++l) {
            const int k = (int)clnode_model_layer_in(m, l), n = (int)clnode_model_layer_out(m, l);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)B, n, k, 1.0f, in, k, W[l], k,
                        0.0f, out, n);
            float *t = in;
            in = out;
            out = t;
        }
    }
    const double dt = tool_now() - t0;
    for (size_t l = 0; l < L; ++l)
        free(W[l]);
    free(H0);
    free(H1);
    return dt;
}

int main(int argc, char **argv)
{
    const char *device = NULL;
    size_t batches[16] = {1, 64, 4096};
    size_t nb = 3;
    int repeat = 3;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            device = argv[++i];
        } else if (strcmp(argv[i], "--batches") == 0 && i + 1 < argc) {
            nb = 0;
            char *save = NULL, *copy = strdup(argv[++i]);
            for (char *t = strtok_r(copy, ",", &save); t && nb < 16; t = strtok_r(NULL, ",", &save))
                batches[nb++] = (size_t)strtoul(t, NULL, 10);
            free(copy);
        } else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
            repeat = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: clnode-bench [--device SPEC] [--batches 1,64,4096] "
                            "[--repeat N]\n");
            return 2;
        }
    }
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = device;
    co.log = tool_log;
    co.log_user = (void *)"clnode-bench";
    clnode_context *ctx = NULL;
    clnode_model *m = NULL;
    if (clnode_context_create(&co, &ctx) != CLNODE_OK)
        return 2;
    if (clnode_model_create_seed(ctx, &m) != CLNODE_OK) {
        fprintf(stderr, "clnode-bench: %s\n", clnode_context_last_error(ctx));
        clnode_context_destroy(&ctx);
        return 2;
    }
    const size_t N = clnode_model_dim(m);
    double flops_per_eval_row = 0;
    for (size_t l = 0; l < clnode_model_num_layers(m); ++l)
        flops_per_eval_row +=
            2.0 * (double)clnode_model_layer_in(m, l) * (double)clnode_model_layer_out(m, l);
    printf("clnode-bench: seed model, tsit5, fp32, rtol 1e-4, atol 1e-6, t in [0, 50] on %s: %s\n",
           clnode_context_backend(ctx), clnode_context_device(ctx));
    printf("%6s %8s %8s %12s %12s %12s %10s %10s %9s\n", "batch", "steps", "rhs", "solve ms",
           "us/step", "GEMM GF/s", "bare GF/s", "ratio", "peak MiB");
    int rc = 0;
    for (size_t k = 0; k < nb; ++k) {
        const size_t B = batches[k];
        double *y0 = malloc(B * N * sizeof(double));
        if (!y0) {
            rc = 2;
            break;
        }
        for (size_t i = 0; i < B * N; ++i)
            y0[i] = 0.05 * (double)((i * 7919) % 41) / 41.0; /* small, distinct */
        clnode_solve_options o;
        clnode_solve_default_options(&o);
        o.t0 = 0;
        o.t1 = 50;
        o.dt0 = 0.02;
        o.rtol = 1e-4;
        o.atol = 1e-6;
        double best = 1e30;
        long max_steps = 0, max_rhs = 0;
        for (int r = 0; r < repeat; ++r) {
            clnode_solution *s = NULL;
            const double t0 = tool_now();
            if (clnode_solve(ctx, m, &o, B, y0, &s) != CLNODE_OK) {
                fprintf(stderr, "clnode-bench: %s\n", clnode_context_last_error(ctx));
                rc = 1;
                break;
            }
            const double dt = tool_now() - t0;
            if (dt < best)
                best = dt;
            max_steps = max_rhs = 0;
            for (size_t b = 0; b < B; ++b) {
                clnode_trajectory_stats st;
                clnode_solution_stats(s, b, &st);
                if (st.num_steps > max_steps)
                    max_steps = st.num_steps;
                if (st.num_rhs_evals > max_rhs)
                    max_rhs = st.num_rhs_evals;
            }
            clnode_solution_destroy(&s);
        }
        if (rc)
            break;
        /* the solve evaluates the whole batch max_rhs times (finished rows ride along) */
        double bare = 1e30;
        for (int r = 0; r < repeat; ++r) {
            const double t = bare_gemm_seconds(m, B, max_rhs);
            if (t < bare)
                bare = t;
        }
        const double flops = flops_per_eval_row * (double)B * (double)max_rhs;
        printf("%6zu %8ld %8ld %12.2f %12.1f %12.2f %10.2f %9.0f%% %9.1f\n", B, max_steps, max_rhs,
               1e3 * best, 1e6 * best / (double)max_steps, flops / best / 1e9,
               flops / bare / 1e9, 100.0 * bare / best, (double)peak_rss_kib() / 1024.0);
        free(y0);
    }
    clnode_model_destroy(&m);
    clnode_context_destroy(&ctx);
    return rc;
}
