/* clnode-bench - throughput of the seed problem against the bare GEMMs it contains.
 *
 * For each device and batch size B: one full seed solve (tsit5, fp32 or fp64, rtol 1e-4, atol
 * 1e-6, t in [0, 50], distinct y0 per trajectory), then, in the same run, a bare loop of exactly
 * the GEMMs that solve performs (the same shapes and count, no solver work) through the same
 * backend's GEMM (clnode_bench_gemm_loop of clnode/bench.h: the ordered GEMM on "host", CLBlast
 * on OpenCL, ...), a bare loop of the same vector-field evaluations (the whole MLP, biases and
 * activations included) through the kernels the solve evaluates them with
 * (clnode_bench_mlp_loop; where the device has it), and for reference the GEMM loop through
 * OpenBLAS's cblas_sgemm (fp32 only). It prints microseconds per step of the solve and of the bare
 * vector-field loop and their ratio (the solver's own cost on top of its vector field), the
 * achieved GEMM rate of the solve as a ratio to the bare loop, the host-device synchronisations of
 * the solve, and the ratio of each device's time to the host's. Ratios, not absolute times, are
 * the result: all are measured in one process on one machine. These solves run without
 * active-set compaction (clnode_solve_options.compact = 0): every trajectory takes about the same
 * steps, and the bare loops evaluate the whole batch every time.
 *
 * --compaction times active-set compaction instead: a batch in which 90% of the trajectories
 * end at t = 5 and every tenth at t = 50 (the seed problem with dtmax = 0.1, so that a
 * trajectory's steps follow its interval: 50 and 500), solved with compaction on and off in the
 * same run (alternating, best of N each), and the ratio of the two times next to the ratio of
 * the live work (trajectory-steps over batch x longest) that an ideal compaction would reach.
 *
 *   clnode-bench [--devices host,opencl:0,...] [--batches 1,64,4096] [--repeat N]
 *                [--precision fp32|fp64] [--compaction] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "clnode.h"
#include "tool_common.h"

/* The same loop through OpenBLAS, one cblas_sgemm per layer over all B rows. */
static double bare_cblas_seconds(const clnode_model *m, size_t B, long evals)
{
    const size_t L = clnode_model_num_layers(m);
    size_t maxw = 1;
    for (size_t l = 0; l < L; ++l) {
        maxw = clnode_model_layer_in(m, l) > maxw ? clnode_model_layer_in(m, l) : maxw;
        maxw = clnode_model_layer_out(m, l) > maxw ? clnode_model_layer_out(m, l) : maxw;
    }
    float *H0 = calloc(B * maxw, sizeof(float)), *H1 = calloc(B * maxw, sizeof(float));
    float *H2 = calloc(B * maxw, sizeof(float));
    float **W = calloc(L, sizeof *W);
    double dt = -1;
    if (!H0 || !H1 || !H2 || !W)
        goto done;
    for (size_t l = 0; l < L; ++l) {
        const size_t n = clnode_model_layer_in(m, l) * clnode_model_layer_out(m, l);
        if (!(W[l] = malloc(n * sizeof(float))))
            goto done;
        for (size_t i = 0; i < n; ++i)
            W[l][i] = (float)clnode_model_weight(m, l)[i];
    }
    for (size_t i = 0; i < B * maxw; ++i)
        H0[i] = 0.01f * (float)(i % 97);
    const double t0 = tool_now();
    for (long e = 0; e < evals; ++e) { /* from the same input each time, as the library's loop */
        for (size_t l = 0; l < L; ++l) {
            const int k = (int)clnode_model_layer_in(m, l), n = (int)clnode_model_layer_out(m, l);
            const float *in = l == 0 ? H0 : (l % 2 ? H1 : H2);
            float *out = l % 2 ? H2 : H1;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)B, n, k, 1.0f, in, k, W[l], k,
                        0.0f, out, n);
        }
    }
    dt = tool_now() - t0;
done:
    for (size_t l = 0; W && l < L; ++l)
        free(W[l]);
    free(W);
    free(H0);
    free(H1);
    free(H2);
    return dt;
}

/* The --compaction measurement for one device and batch size: prints one line; returns 0 or a
 * tool exit status. */
static int bench_compaction(clnode_context *ctx, const clnode_model *m, size_t B, int repeat,
                            clnode_precision prec)
{
    const size_t N = clnode_model_dim(m);
    double *y0 = malloc(B * N * sizeof *y0), *t1s = malloc(B * sizeof *t1s);
    if (!y0 || !t1s) {
        free(y0);
        free(t1s);
        tool_error("out of memory: cannot allocate %zu initial states", B);
        return TOOL_EXIT_RESOURCE;
    }
    for (size_t i = 0; i < B * N; ++i)
        y0[i] = 0.05 * (double)((i * 7919) % 41) / 41.0;
    for (size_t b = 0; b < B; ++b)
        t1s[b] = b % 10 == 9 ? 50.0 : 5.0; /* the long ones spread over the batch */
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.precision = prec;
    o.t1s = t1s;
    o.dtmax = 0.1;
    double best[2] = {1e30, 1e30};
    long work = 0, longest = 0, syncs[2] = {0, 0};
    int rc = 0;
    for (int r = 0; r < repeat + 1 && rc == 0; ++r) { /* the first round warms up */
        for (int on = 1; on >= 0 && rc == 0; --on) {
            o.compact = on;
            clnode_solution *s = NULL;
            const double t0 = tool_now();
            const clnode_status sst = clnode_solve(ctx, m, &o, B, y0, &s);
            const double dt = tool_now() - t0;
            if (sst != CLNODE_OK) {
                rc = tool_exit_status(sst);
                break;
            }
            if (r > 0 && dt < best[on])
                best[on] = dt;
            work = longest = 0;
            for (size_t b = 0; b < B; ++b) {
                clnode_trajectory_stats st;
                clnode_solution_stats(s, b, &st);
                work += st.num_steps;
                longest = st.num_steps > longest ? st.num_steps : longest;
            }
            syncs[on] = clnode_solution_syncs(s);
            clnode_solution_destroy(&s);
        }
    }
    if (rc == 0)
        printf("%7zu %8.2f %8.2f %7.3f %7.3f %7ld %7ld %7ld\n", B, 1e3 * best[1], 1e3 * best[0],
               best[1] / best[0], (double)work / ((double)B * (double)longest), longest, syncs[1],
               syncs[0]);
    free(y0);
    free(t1s);
    return rc;
}

/* Lets the worker threads of the last phase go to sleep. */
static void settle(void)
{
    const struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static size_t parse_list(const char *s, char out[][64], size_t max)
{
    size_t n = 0;
    while (*s && n < max) {
        size_t len = strcspn(s, ",");
        if (len >= 64)
            len = 63;
        memcpy(out[n], s, len);
        out[n][len] = '\0';
        if (len)
            ++n;
        s += strcspn(s, ",");
        if (*s == ',')
            ++s;
    }
    return n;
}

static void usage(FILE *f)
{
    fputs("usage: clnode-bench [--devices host,opencl:0,...] [--batches 1,64,4096] [--repeat N]\n"
          "  Times the seed problem per device and batch size against the bare GEMMs it\n"
          "  contains (see the comment at the top of tools/clnode-bench/main.c). Options take\n"
          "  their value as --opt VALUE or --opt=VALUE.\n"
          "  --devices LIST   device strings, at most 16 (default host); the first is the\n"
          "                   baseline of the \"vs host\" column\n"
          "  --batches LIST   batch sizes, at most 16 (default 1,64,4096)\n"
          "  --repeat N       timed runs per measurement, the best kept (default 3)\n"
          "  --compaction     time active-set compaction instead: 90% of the trajectories end\n"
          "                   at a tenth of the others' steps; compaction on against off\n"
          "  --precision P    fp32 (default) or fp64: the solve's and the loops' precision\n"
          "  --help, -h       this text      --version   the version\n",
          f);
    tool_print_device_help(f);
    fputs(tool_exit_help, f);
}

/* A list of at most 16 items of < 64 characters, none empty; batches: positive integers. */
static int parse_arg_list(const char *opt, const char *s, char out[][64], size_t *n, int numbers)
{
    size_t k = 0;
    for (const char *p = s;; ++k) {
        const size_t len = strcspn(p, ",");
        char *end = NULL;
        if (k == 16 || len == 0 || len >= 64)
            break;
        memcpy(out[k], p, len);
        out[k][len] = '\0';
        if (numbers && (strtoul(out[k], &end, 10) == 0 || *end || out[k][0] == '-'))
            break;
        p += len;
        if (!*p) {
            *n = k + 1;
            return 0;
        }
        ++p;
    }
    tool_error("%s expects up to 16 %s separated by commas, not \"%s\"", opt,
               numbers ? "positive integers" : "device strings", s);
    return TOOL_EXIT_INPUT;
}

int main(int argc, char **argv)
{
    tool_prog = "clnode-bench";
    char devices[16][64] = {"host"};
    size_t nd = 1;
    char batch_s[16][64];
    size_t nb = parse_list("1,64,4096", batch_s, 16);
    int repeat = 3, compaction = 0;
    clnode_precision prec = CLNODE_FP32;
    static const struct option longopts[] = {
        {"devices", required_argument, NULL, 'd'},
        {"device", required_argument, NULL, 'd'},
        {"batches", required_argument, NULL, 'b'},
        {"repeat", required_argument, NULL, 'r'},
        {"compaction", no_argument, NULL, 'c'},
        {"precision", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, TOOL_OPT_HELP},
        {"version", no_argument, NULL, TOOL_OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    int started = 0, c;
    while ((c = tool_getopt(argc, argv, longopts, &started)) != -1) {
        char *end;
        switch (c) {
        case 'd':
            if (parse_arg_list("--devices", optarg, devices, &nd, 0))
                return TOOL_EXIT_INPUT;
            break;
        case 'b':
            if (parse_arg_list("--batches", optarg, batch_s, &nb, 1))
                return TOOL_EXIT_INPUT;
            break;
        case 'r':
            repeat = (int)strtol(optarg, &end, 10);
            if (*end || repeat < 1 || repeat > 1000) {
                tool_error("--repeat expects an integer in 1..1000, not \"%s\"", optarg);
                return TOOL_EXIT_INPUT;
            }
            break;
        case 'p':
            if (strcmp(optarg, "fp32") == 0)
                prec = CLNODE_FP32;
            else if (strcmp(optarg, "fp64") == 0)
                prec = CLNODE_FP64;
            else {
                tool_error("--precision expects fp32 or fp64, not \"%s\"", optarg);
                return TOOL_EXIT_INPUT;
            }
            break;
        case 'c':
            compaction = 1;
            break;
        case TOOL_OPT_HELP:
            usage(stdout);
            return TOOL_EXIT_OK;
        case TOOL_OPT_VERSION:
            tool_print_version();
            return TOOL_EXIT_OK;
        default:
            return TOOL_EXIT_INPUT;
        }
    }
    double host_us[16] = {0};
    int rc = 0;
    if (compaction)
        printf("clnode-bench --compaction: seed model, tsit5, %s, rtol 1e-4, atol 1e-6, dtmax 0.1; "
               "t1 = 5 for 90%% of the trajectories, 50 for every tenth; best of %d\n",
               clnode_precision_name(prec), repeat);
    else
        printf("clnode-bench: seed model (10 -> 100 -> 100 -> 10, softplus), tsit5, %s, rtol "
               "1e-4, atol 1e-6, t in [0, 50]; best of %d\n",
               clnode_precision_name(prec), repeat);
    for (size_t d = 0; d < nd && rc == 0; ++d) {
        clnode_context_options co;
        clnode_context_default_options(&co);
        co.device = devices[d];
        co.log = tool_log;
        co.log_user = (void *)"clnode-bench";
        clnode_context *ctx = NULL;
        clnode_model *m = NULL;
        const clnode_status cst = clnode_context_create(&co, &ctx);
        if (cst != CLNODE_OK) {
            rc = tool_exit_status(cst);
            break;
        }
        const clnode_status mst = clnode_model_create_seed(ctx, &m);
        if (mst != CLNODE_OK) {
            clnode_context_destroy(&ctx);
            rc = tool_exit_status(mst);
            break;
        }
        const size_t N = clnode_model_dim(m);
        double flops_row = 0;
        for (size_t l = 0; l < clnode_model_num_layers(m); ++l)
            flops_row +=
                2.0 * (double)clnode_model_layer_in(m, l) * (double)clnode_model_layer_out(m, l);
        printf("\n%s: %s\n", devices[d], clnode_context_device(ctx));
        if (compaction) {
            printf("%7s %8s %8s %7s %7s %7s %7s %7s\n", "batch", "on ms", "off ms", "on/off",
                   "ideal", "steps", "syncs", "(off)");
            for (size_t k = 0; k < nb && rc == 0; ++k)
                rc = bench_compaction(ctx, m, (size_t)strtoul(batch_s[k], NULL, 10), repeat, prec);
            clnode_model_destroy(&m);
            clnode_context_destroy(&ctx);
            continue;
        }
        printf("%6s %6s %6s %10s %10s %10s %7s %9s %9s %8s %9s %7s %9s\n", "batch", "steps", "rhs",
               "solve ms", "us/step", "MLP us/st", "vs MLP", "GEMM GF/s", "bare GF/s", "vs bare",
               "cblas GF/s", "syncs", "vs host");
        for (size_t k = 0; k < nb; ++k) {
            const size_t B = (size_t)strtoul(batch_s[k], NULL, 10);
            size_t bytes;
            double *y0 = NULL;
            if (!tool_mul_size(B, N * sizeof(double), &bytes) || !(y0 = malloc(bytes))) {
                tool_error("out of memory: cannot allocate %zu initial states", B);
                rc = TOOL_EXIT_RESOURCE;
                break;
            }
            for (size_t i = 0; i < B * N; ++i)
                y0[i] = 0.05 * (double)((i * 7919) % 41) / 41.0; /* small, distinct */
            clnode_solve_options o;
            clnode_solve_seed_options(&o);
            o.precision = prec;
            o.compact = 0; /* the bare loops below evaluate the whole batch every time */
            double best = 1e30;
            long steps = 0, rhs = 0, syncs = 0;
            for (int r = 0; r < repeat + 1; ++r) { /* the first run warms kernels and caches */
                clnode_solution *s = NULL;
                const double t0 = tool_now();
                const clnode_status sst = clnode_solve(ctx, m, &o, B, y0, &s);
                if (sst != CLNODE_OK) { /* the logger printed why */
                    rc = tool_exit_status(sst);
                    break;
                }
                const double dt = tool_now() - t0;
                if (r > 0 && dt < best)
                    best = dt;
                steps = rhs = 0;
                for (size_t b = 0; b < B; ++b) {
                    clnode_trajectory_stats st;
                    clnode_solution_stats(s, b, &st);
                    steps = st.num_steps > steps ? st.num_steps : steps;
                    rhs = st.num_rhs_evals > rhs ? st.num_rhs_evals : rhs;
                }
                syncs = clnode_solution_syncs(s);
                clnode_solution_destroy(&s);
            }
            if (rc) {
                free(y0);
                break;
            }
            /* the solve evaluates the whole batch `rhs` times (finished rows ride along). Each
             * kind of loop runs in its own phase, after a pause: OpenMP's and OpenBLAS's worker
             * threads spin for a while after their last call, and would slow the other's. */
            double bare = 1e30, cb = 1e30, mlp = 1e30;
            settle();
            for (int r = 0; r < repeat; ++r) {
                double t = -1;
                if (clnode_bench_gemm_loop(ctx, m, B, rhs, prec, CLNODE_GEMM_STRICT, &t, NULL) !=
                    CLNODE_OK)
                    fprintf(stderr, "clnode-bench: %s\n", clnode_context_last_error(ctx));
                bare = t >= 0 && t < bare ? t : bare;
            }
            settle();
            /* the solve's own vector-field evaluations, alone: a device without this loop
             * prints "-" */
            for (int r = 0; r < repeat; ++r) {
                double t = -1;
                if (clnode_bench_mlp_loop(ctx, m, B, rhs, prec, &t) != CLNODE_OK)
                    break;
                mlp = t >= 0 && t < mlp ? t : mlp;
            }
            settle();
            for (int r = 0; r < repeat && prec == CLNODE_FP32; ++r) {
                const double c = bare_cblas_seconds(m, B, rhs);
                cb = c >= 0 && c < cb ? c : cb;
            }
            settle();
            const double flops = flops_row * (double)B * (double)rhs;
            const double us = 1e6 * best / (double)steps;
            if (d == 0 && k < 16)
                host_us[k] = us;
            char vs_host[32] = "-";
            if (d > 0 && k < 16 && host_us[k] > 0)
                snprintf(vs_host, sizeof vs_host, "%.2fx", us / host_us[k]);
            char mlp_us[32] = "-", vs_mlp[32] = "-", cblas[32] = "-";
            if (mlp < 1e30) {
                snprintf(mlp_us, sizeof mlp_us, "%.2f", 1e6 * mlp / (double)steps);
                snprintf(vs_mlp, sizeof vs_mlp, "%.2fx", best / mlp);
            }
            if (cb < 1e30)
                snprintf(cblas, sizeof cblas, "%.2f", flops / cb / 1e9);
            printf("%6zu %6ld %6ld %10.3f %10.2f %10s %7s %9.2f %9.2f %7.0f%% %9s %7ld %9s\n", B,
                   steps, rhs, 1e3 * best, us, mlp_us, vs_mlp, flops / best / 1e9,
                   flops / bare / 1e9, 100.0 * bare / best, cblas, syncs, vs_host);
            free(y0);
        }
        clnode_model_destroy(&m);
        clnode_context_destroy(&ctx);
    }
    if (nd > 1 && !compaction)
        printf("\n\"vs host\": the device's time per step over the first device's (%s).\n",
               devices[0]);
    return rc;
}
