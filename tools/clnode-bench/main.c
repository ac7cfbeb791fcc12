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
 * --grad times the gradient instead (clnode/gradient.h): per batch size (default 1, 64, 1024,
 * 4096) the seed solve with keep_tape, then clnode_gradient_compute on the same device with
 * cotangents of the saved y(t1), best of N each in the same run; rev/fwd is the reverse pass's
 * time over the kept solve's. Then the bare loop of the same steps without a tape
 * (clnode_bench_vjp_loop on that device: the reverse pass's own schedule and per-step operations
 * repeating one reverse step per accepted step: the state, every stage recomputed, their VJPs
 * from the last, the step's weight and bias sums per block of CLNODE_GRADIENT_BLOCK rows);
 * rev/bare is the reverse pass's time over it. The
 * tape's size is clnode_solution_kept_bytes. On an OpenCL or CUDA device, launches and GEMMs are
 * the reverse pass's enqueued commands and products (clnode_context_launches) over its reverse
 * steps (the longest trajectory's accepted steps): per reverse step. host:openblas goes back on
 * "host" (its GEMMs are not the ordered ones the reverse pass recomputes the steps with).
 *
 * --markdown FILE also writes the tables as Markdown into FILE (doc/benchmarks.md), as the
 * section between the lines "<!-- begin NAME -->" and "<!-- end NAME -->", NAME being
 * "clnode-bench", "clnode-bench-fp64", "clnode-bench-compaction", "clnode-bench-grad" or their
 * "-fp64" forms as run: a section of that name is replaced, else the section is
 * appended; every other byte of FILE is kept. FILE is replaced only when the run succeeded
 * (tool_out.h). The section is stamped with the machine (the CPU model of /proc/cpuinfo and the
 * CPUs online), the host backend's device description (which names the ISA of its kernels:
 * AVX-512, AVX2+FMA or portable fma()), the commit the tool was built from (git describe at
 * build time, "-dirty" when the tree had changes) and the date.
 *
 *   clnode-bench [--devices host,opencl:0,...] [--batches 1,64,4096] [--repeat N]
 *                [--precision fp32|fp64] [--compaction | --grad] [--markdown FILE] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>

#include "clnode-bench-commit.h"
#include "clnode.h"
#include "clnode/gradient.h"
#include "tool_problem.h"
#include "tool_out.h"

/* The Markdown copy of the tables (--markdown), or NULL. */
static FILE *md;

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
    o.dtmax = 0.1;
    clnode_problem p;
    clnode_problem_default(&p);
    p.batch = B;
    p.y0 = y0;
    p.t1s = t1s;
    double best[2] = {1e30, 1e30};
    long work = 0, longest = 0, syncs[2] = {0, 0};
    int rc = 0;
    for (int r = 0; r < repeat + 1 && rc == 0; ++r) { /* the first round warms up */
        for (int on = 1; on >= 0 && rc == 0; --on) {
            o.compact = on;
            clnode_solution *s = NULL;
            const double t0 = tool_now();
            const clnode_status sst = clnode_solve(ctx, m, &o, &p, &s);
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
    if (rc == 0) {
        const double ideal = (double)work / ((double)B * (double)longest);
        printf("%7zu %8.2f %8.2f %7.3f %7.3f %7ld %7ld %7ld\n", B, 1e3 * best[1], 1e3 * best[0],
               best[1] / best[0], ideal, longest, syncs[1], syncs[0]);
        if (md)
            fprintf(md, "| %zu | %.2f | %.2f | %.3f | %.3f | %ld | %ld | %ld |\n", B, 1e3 * best[1],
                    1e3 * best[0], best[1] / best[0], ideal, longest, syncs[1], syncs[0]);
    }
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

/* The --grad measurement for one batch size: the kept solve (keep_tape) on ctx, the reverse pass
 * and the bare VJP loop of the same stages on hctx (ctx itself but for host:openblas), best of
 * `repeat` each, in one run; prints one line. Returns 0 or a tool exit status. */
static int bench_grad(clnode_context *ctx, clnode_context *hctx, const clnode_model *m, size_t B,
                      int repeat, clnode_precision prec)
{
    const size_t N = clnode_model_dim(m);
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.precision = prec;
    o.compact = 0;
    o.keep_tape = 1;
    clnode_problem p;
    clnode_problem_default(&p);
    size_t slots = 0;
    clnode_save_slots(NULL, &o, &p, &slots);
    double *y0 = malloc(B * N * sizeof *y0), *cot = malloc(B * slots * N * sizeof *cot);
    if (!y0 || !cot) {
        free(y0);
        free(cot);
        tool_error("out of memory: cannot allocate %zu initial states", B);
        return TOOL_EXIT_RESOURCE;
    }
    for (size_t i = 0; i < B * N; ++i)
        y0[i] = 0.05 * (double)((i * 7919) % 41) / 41.0; /* small, distinct */
    for (size_t i = 0; i < B * slots * N; ++i)
        cot[i] = 1.0 - (double)(i % 7) / 3.0;
    p.batch = B;
    p.y0 = y0;
    double best[2] = {1e30, 1e30}, bare = 1e30;
    long steps = 0, launches = 0, gemms = 0; /* of the last reverse pass */
    size_t kept = 0;
    clnode_status st = CLNODE_OK;
    for (int r = 0; r < repeat + 1 && st == CLNODE_OK; ++r) { /* the first run warms up */
        clnode_solution *s = NULL;
        clnode_gradient *g = NULL;
        const double t0 = tool_now();
        st = clnode_solve(ctx, m, &o, &p, &s);
        long g0 = 0, l0 = clnode_context_launches(hctx, &g0);
        const double t1 = tool_now();
        if (st == CLNODE_OK)
            st = clnode_gradient_compute(hctx, m, NULL, s, slots, cot, &g);
        const double t2 = tool_now();
        launches = clnode_context_launches(hctx, &gemms) - l0;
        gemms -= g0;
        if (st == CLNODE_OK && r > 0) {
            best[0] = t1 - t0 < best[0] ? t1 - t0 : best[0];
            best[1] = t2 - t1 < best[1] ? t2 - t1 : best[1];
        }
        for (size_t b = 0; st == CLNODE_OK && b < B; ++b) {
            clnode_trajectory_stats ts;
            clnode_solution_stats(s, b, &ts);
            steps = ts.num_accepted > steps ? ts.num_accepted : steps;
        }
        kept = st == CLNODE_OK ? clnode_solution_kept_bytes(s) : 0;
        clnode_gradient_destroy(&g);
        clnode_solution_destroy(&s);
    }
    free(y0);
    free(cot);
    if (st != CLNODE_OK) /* the logger printed why */
        return tool_exit_status(st);
    /* the stages a reverse step goes back through: all but an FSAL last one, which is the next
     * step's first */
    const int stages = o.method->stages - (o.method->fsal ? 1 : 0);
    settle();
    for (int r = 0; r < repeat; ++r) {
        double t = -1;
        if (clnode_bench_vjp_loop(hctx, m, B, steps, stages, prec, &t) != CLNODE_OK)
            return TOOL_EXIT_RESOURCE; /* the logger printed why */
        bare = t >= 0 && t < bare ? t : bare;
    }
    settle();
    char per[2][32] = {"-", "-"}; /* launches and GEMMs per reverse step, on a device */
    if (launches > 0 && steps > 0) {
        snprintf(per[0], sizeof per[0], "%.1f", (double)launches / (double)steps);
        snprintf(per[1], sizeof per[1], "%.1f", (double)gemms / (double)steps);
    }
    printf("%7zu %7ld %10.3f %10.3f %8.2f %10.3f %8.2f %10.1f %10s %8s\n", B, steps, 1e3 * best[0],
           1e3 * best[1], best[1] / best[0], 1e3 * bare, best[1] / bare, (double)kept / 1024.0,
           per[0], per[1]);
    if (md)
        fprintf(md, "| %zu | %ld | %.3f | %.3f | %.2f | %.3f | %.2f | %.1f | %s | %s |\n", B, steps,
                1e3 * best[0], 1e3 * best[1], best[1] / best[0], 1e3 * bare, best[1] / bare,
                (double)kept / 1024.0, per[0], per[1]);
    return 0;
}

/* --grad's table for one device: the reverse pass and its bare loop on the device itself (on
 * "host", a context of its own, for host:openblas, whose GEMMs are not the ordered ones the
 * reverse pass recomputes the steps with). */
static int bench_grad_table(const char *device, clnode_context *ctx, const clnode_model *m,
                            char batch_s[][64], size_t nb, int repeat, clnode_precision prec)
{
    clnode_context *own = NULL, *hctx = ctx;
    if (strncmp(device, "host:openblas", 13) == 0) {
        printf("(the reverse pass and its bare loop on \"host\": %s's GEMMs are not the ordered "
               "ones)\n",
               device);
        clnode_context_options co;
        clnode_context_default_options(&co);
        co.device = "host";
        co.log = tool_log;
        co.log_user = (void *)"clnode-bench";
        const clnode_status cst = clnode_context_create(&co, &own);
        if (cst != CLNODE_OK)
            return tool_exit_status(cst);
        hctx = own;
    }
    printf("%7s %7s %10s %10s %8s %10s %8s %10s %10s %8s\n", "batch", "steps", "fwd ms", "rev ms",
           "rev/fwd", "bare ms", "rev/bare", "tape KiB", "launches", "GEMMs");
    if (md)
        fputs("| batch | steps | fwd ms | rev ms | rev/fwd | bare ms | rev/bare | tape KiB | "
              "launches | GEMMs |\n"
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
              md);
    int rc = 0;
    for (size_t k = 0; k < nb && rc == 0; ++k)
        rc = bench_grad(ctx, hctx, m, (size_t)strtoul(batch_s[k], NULL, 10), repeat, prec);
    clnode_context_destroy(&own);
    return rc;
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
          "  --grad           time the gradient instead (keep_tape, clnode_gradient_compute on\n"
          "                   the same device, cotangents of the saved t1): per batch size\n"
          "                   (default 1,64,1024,4096) the kept forward solve, the reverse pass,\n"
          "                   rev/fwd their ratio, bare: the reverse pass's own schedule and\n"
          "                   per-step operations on that device repeating one reverse step\n"
          "                   (state, stages, their VJPs, weight sums) per accepted step without\n"
          "                   a tape (clnode_bench_vjp_loop), rev/bare their ratio (the tape's\n"
          "                   walk, the saved points, the shrinking active rows), the\n"
          "                   tape's size, and on an OpenCL or CUDA device the reverse pass's\n"
          "                   launches (kernels, copies and GEMMs) and GEMMs per reverse step\n"
          "                   (clnode_context_launches over the longest trajectory's steps)\n"
          "                   (host:openblas goes back on host)\n"
          "  --precision P    fp32 (default) or fp64: the solve's and the loops' precision\n"
          "  --markdown FILE  also write the tables as Markdown into FILE (doc/benchmarks.md):\n"
          "                   its section \"clnode-bench\" (-compaction, -fp64 as run),\n"
          "                   stamped with the machine, the host ISA, the commit and the date;\n"
          "                   the rest of FILE is kept\n"
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

/* One batch size of the throughput table: the solve, then each bare loop in its own phase.
 * host_us: the first device's time per step (k < 16), set when d == 0, compared with after. */
static int bench_batch(clnode_context *ctx, const clnode_model *m, size_t B, int repeat,
                       clnode_precision prec, double flops_row, size_t d, size_t k,
                       double host_us[16])
{
    const size_t N = clnode_model_dim(m);
    size_t bytes;
    double *y0 = NULL;
    if (!tool_mul_size(B, N * sizeof(double), &bytes) || !(y0 = malloc(bytes))) {
        tool_error("out of memory: cannot allocate %zu initial states", B);
        return TOOL_EXIT_RESOURCE;
    }
    for (size_t i = 0; i < B * N; ++i)
        y0[i] = 0.05 * (double)((i * 7919) % 41) / 41.0; /* small, distinct */
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.precision = prec;
    o.compact = 0; /* the bare loops below evaluate the whole batch every time */
    clnode_problem p;
    clnode_problem_default(&p);
    p.batch = B;
    p.y0 = y0;
    double best = 1e30;
    long steps = 0, rhs = 0, syncs = 0;
    for (int r = 0; r < repeat + 1; ++r) { /* the first run warms kernels and caches */
        clnode_solution *s = NULL;
        const double t0 = tool_now();
        const clnode_status sst = clnode_solve(ctx, m, &o, &p, &s);
        if (sst != CLNODE_OK) { /* the logger printed why */
            free(y0);
            return tool_exit_status(sst);
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
    free(y0);
    /* the solve evaluates the whole batch `rhs` times (finished rows ride along). Each kind of
     * loop runs in its own phase, after a pause: OpenMP's and OpenBLAS's worker threads spin
     * for a while after their last call, and would slow the other's. */
    double bare = 1e30, cb = 1e30, mlp = 1e30;
    settle();
    for (int r = 0; r < repeat; ++r) {
        double t = -1;
        if (clnode_bench_gemm_loop(ctx, m, B, rhs, prec, CLNODE_GEMM_STRICT, &t, NULL) != CLNODE_OK)
            fprintf(stderr, "clnode-bench: %s\n", clnode_context_last_error(ctx));
        bare = t >= 0 && t < bare ? t : bare;
    }
    settle();
    /* the solve's own vector-field evaluations, alone: a device without this loop prints "-" */
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
    printf("%6zu %6ld %6ld %10.3f %10.2f %10s %7s %9.2f %9.2f %7.0f%% %9s %7ld %9s\n", B, steps,
           rhs, 1e3 * best, us, mlp_us, vs_mlp, flops / best / 1e9, flops / bare / 1e9,
           100.0 * bare / best, cblas, syncs, vs_host);
    if (md)
        fprintf(md,
                "| %zu | %ld | %ld | %.3f | %.2f | %s | %s | %.2f | %.2f | %.0f%% | %s | %ld | "
                "%s |\n",
                B, steps, rhs, 1e3 * best, us, mlp_us, vs_mlp, flops / best / 1e9,
                flops / bare / 1e9, 100.0 * bare / best, cblas, syncs, vs_host);
    return 0;
}

/* One device: its heading and its table (throughput, or --compaction's). */
static int bench_device(const char *device, char batch_s[][64], size_t nb, int repeat,
                        clnode_precision prec, int compaction, int grad, size_t d,
                        double host_us[16])
{
    clnode_context_options co;
    tool_log_options(&co, device, tool_log, (void *)"clnode-bench");
    clnode_context *ctx = NULL;
    clnode_model *m = NULL;
    const clnode_status cst = clnode_context_create(&co, &ctx);
    if (cst != CLNODE_OK)
        return tool_exit_status(cst);
    const clnode_status mst = clnode_model_create_seed(ctx, &m);
    if (mst != CLNODE_OK) {
        clnode_context_destroy(&ctx);
        return tool_exit_status(mst);
    }
    double flops_row = 0;
    for (size_t l = 0; l < clnode_model_num_layers(m); ++l)
        flops_row +=
            2.0 * (double)clnode_model_layer_in(m, l) * (double)clnode_model_layer_out(m, l);
    printf("\n%s: %s\n", device, clnode_context_device(ctx));
    if (md)
        fprintf(md, "\n`%s`: %s\n\n", device, clnode_context_device(ctx));
    int rc = 0;
    if (grad) {
        rc = bench_grad_table(device, ctx, m, batch_s, nb, repeat, prec);
    } else if (compaction) {
        printf("%7s %8s %8s %7s %7s %7s %7s %7s\n", "batch", "on ms", "off ms", "on/off", "ideal",
               "steps", "syncs", "(off)");
        if (md)
            fputs("| batch | on ms | off ms | on/off | ideal | steps | syncs | (off) |\n"
                  "|---:|---:|---:|---:|---:|---:|---:|---:|\n",
                  md);
        for (size_t k = 0; k < nb && rc == 0; ++k)
            rc = bench_compaction(ctx, m, (size_t)strtoul(batch_s[k], NULL, 10), repeat, prec);
    } else {
        printf("%6s %6s %6s %10s %10s %10s %7s %9s %9s %8s %9s %7s %9s\n", "batch", "steps", "rhs",
               "solve ms", "us/step", "MLP us/st", "vs MLP", "GEMM GF/s", "bare GF/s", "vs bare",
               "cblas GF/s", "syncs", "vs host");
        if (md)
            fputs("| batch | steps | rhs | solve ms | us/step | MLP us/st | vs MLP | GEMM GF/s | "
                  "bare GF/s | vs bare | cblas GF/s | syncs | vs host |\n"
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
                  md);
        for (size_t k = 0; k < nb && rc == 0; ++k)
            rc = bench_batch(ctx, m, (size_t)strtoul(batch_s[k], NULL, 10), repeat, prec, flops_row,
                             d, k, host_us);
    }
    clnode_model_destroy(&m);
    clnode_context_destroy(&ctx);
    return rc;
}

/* The stamp of a Markdown section: machine, host ISA, commit, date (see the top). */
static void md_stamp(FILE *f)
{
    char model[256] = "unknown CPU", line[512];
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    FILE *ci = fopen("/proc/cpuinfo", "r");
    while (ci && fgets(line, sizeof line, ci)) {
        const char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            snprintf(model, sizeof model, "%s", colon + 1 + strspn(colon + 1, " \t"));
            model[strcspn(model, "\n")] = '\0';
            break;
        }
    }
    if (ci)
        fclose(ci);
    char host[512] = "host device unavailable";
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = "host";
    clnode_context *ctx = NULL;
    if (clnode_context_create(&co, &ctx) == CLNODE_OK)
        snprintf(host, sizeof host, "%s", clnode_context_device(ctx));
    clnode_context_destroy(&ctx);
    char date[64] = "unknown date";
    const time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", &tm);
    fprintf(f,
            "Machine: %s, %ld CPUs online. Host backend (its ISA): %s. Commit %s (clnode %s). "
            "Date: %s.\n",
            model, cpus, host, CLN_BENCH_COMMIT, clnode_version_string(), date);
}

/* Replaces (or appends) the section `name` of `path` with `body` (see the top). */
static int md_write(const char *path, const char *name, const char *body)
{
    char begin[128], end[128];
    snprintf(begin, sizeof begin, "<!-- begin %s -->\n", name);
    snprintf(end, sizeof end, "<!-- end %s -->\n", name);
    char *old = NULL;
    size_t len = 0;
    FILE *in = fopen(path, "r");
    if (in) {
        FILE *buf = open_memstream(&old, &len);
        int ch;
        while (buf && (ch = fgetc(in)) != EOF)
            fputc(ch, buf);
        const int bad = ferror(in) || !buf;
        fclose(in);
        if (buf)
            fclose(buf);
        if (bad) {
            free(old);
            tool_error("--markdown: cannot read %s", path);
            return TOOL_EXIT_RESOURCE;
        }
    }
    const char *b = old ? strstr(old, begin) : NULL;
    const char *e = b ? strstr(b, end) : NULL;
    if (old && b && !e) {
        free(old);
        tool_error("--markdown: %s has the line \"<!-- begin %s -->\" but no \"<!-- end %s -->\" "
                   "after it",
                   path, name, name);
        return TOOL_EXIT_INPUT;
    }
    tool_out o;
    int rc = tool_out_open(&o, path);
    if (rc) {
        free(old);
        return rc;
    }
    if (b) {
        fwrite(old, 1, (size_t)(b - old), o.f);
    } else if (old && len) {
        fwrite(old, 1, len, o.f);
        if (old[len - 1] != '\n')
            fputc('\n', o.f);
        fputc('\n', o.f);
    }
    fprintf(o.f, "%s%s%s", begin, body, end);
    if (e)
        fputs(e + strlen(end), o.f);
    free(old);
    return tool_out_commit(&o);
}

/* The options; returns -1 to go on, else the exit status. */
static int parse_options(int argc, char **argv, char devices[][64], size_t *nd, char batch_s[][64],
                         size_t *nb, int *repeat, int *compaction, int *grad,
                         clnode_precision *prec, const char **markdown, int *batches_given)
{
    static const struct option longopts[] = {
        {"devices", required_argument, NULL, 'd'},
        {"device", required_argument, NULL, 'd'},
        {"batches", required_argument, NULL, 'b'},
        {"repeat", required_argument, NULL, 'r'},
        {"compaction", no_argument, NULL, 'c'},
        {"grad", no_argument, NULL, 'g'},
        {"precision", required_argument, NULL, 'p'},
        {"markdown", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, TOOL_OPT_HELP},
        {"version", no_argument, NULL, TOOL_OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    int started = 0, c;
    while ((c = tool_getopt(argc, argv, longopts, &started)) != -1) {
        char *end;
        switch (c) {
        case 'd':
            if (parse_arg_list("--devices", optarg, devices, nd, 0))
                return TOOL_EXIT_INPUT;
            break;
        case 'b':
            if (parse_arg_list("--batches", optarg, batch_s, nb, 1))
                return TOOL_EXIT_INPUT;
            *batches_given = 1;
            break;
        case 'r':
            *repeat = (int)strtol(optarg, &end, 10);
            if (*end || *repeat < 1 || *repeat > 1000) {
                tool_error("--repeat expects an integer in 1..1000, not \"%s\"", optarg);
                return TOOL_EXIT_INPUT;
            }
            break;
        case 'p':
            if (strcmp(optarg, "fp32") == 0)
                *prec = CLNODE_FP32;
            else if (strcmp(optarg, "fp64") == 0)
                *prec = CLNODE_FP64;
            else {
                tool_error("--precision expects fp32 or fp64, not \"%s\"", optarg);
                return TOOL_EXIT_INPUT;
            }
            break;
        case 'c':
            *compaction = 1;
            break;
        case 'g':
            *grad = 1;
            break;
        case 'm':
            if (!*optarg || strcmp(optarg, "-") == 0) {
                tool_error("--markdown expects the file whose section it replaces, not \"%s\"",
                           optarg);
                return TOOL_EXIT_INPUT;
            }
            *markdown = optarg;
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
    return -1;
}

int main(int argc, char **argv)
{
    tool_prog = "clnode-bench";
    char devices[16][64] = {"host"};
    size_t nd = 1;
    char batch_s[16][64];
    size_t nb = parse_list("1,64,4096", batch_s, 16);
    int repeat = 3, compaction = 0, grad = 0, batches_given = 0;
    clnode_precision prec = CLNODE_FP32;
    const char *markdown = NULL;
    const int prc = parse_options(argc, argv, devices, &nd, batch_s, &nb, &repeat, &compaction,
                                  &grad, &prec, &markdown, &batches_given);
    if (prc >= 0)
        return prc;
    if (grad && compaction) {
        tool_error("give either --grad or --compaction, not both");
        return TOOL_EXIT_INPUT;
    }
    if (grad && !batches_given)
        nb = parse_list("1,64,1024,4096", batch_s, 16);
    char *md_body = NULL;
    size_t md_len = 0;
    if (markdown && !(md = open_memstream(&md_body, &md_len))) {
        tool_error("out of memory: cannot hold the Markdown tables");
        return TOOL_EXIT_RESOURCE;
    }
    char title[256];
    if (grad)
        snprintf(title, sizeof title,
                 "clnode-bench --grad: seed model (10 -> 100 -> 100 -> 10, softplus), tsit5, %s, "
                 "rtol 1e-4, atol 1e-6, t in [0, 50], cotangents of y(t1); best of %d",
                 clnode_precision_name(prec), repeat);
    else if (compaction)
        snprintf(title, sizeof title,
                 "clnode-bench --compaction: seed model, tsit5, %s, rtol 1e-4, atol 1e-6, dtmax "
                 "0.1; t1 = 5 for 90%% of the trajectories, 50 for every tenth; best of %d",
                 clnode_precision_name(prec), repeat);
    else
        snprintf(title, sizeof title,
                 "clnode-bench: seed model (10 -> 100 -> 100 -> 10, softplus), tsit5, %s, rtol "
                 "1e-4, atol 1e-6, t in [0, 50]; best of %d",
                 clnode_precision_name(prec), repeat);
    printf("%s\n", title);
    if (md) {
        fprintf(md, "### %s\n\n", title);
        md_stamp(md);
    }
    double host_us[16] = {0};
    int rc = 0;
    for (size_t d = 0; d < nd && rc == 0; ++d)
        rc = bench_device(devices[d], batch_s, nb, repeat, prec, compaction, grad, d, host_us);
    if (nd > 1 && !compaction && !grad) {
        printf("\n\"vs host\": the device's time per step over the first device's (%s).\n",
               devices[0]);
        if (md)
            fprintf(md, "\n\"vs host\": the device's time per step over the first device's (%s).\n",
                    devices[0]);
    }
    if (md) {
        fclose(md);
        md = NULL;
        char name[64];
        snprintf(name, sizeof name, "clnode-bench%s%s",
                 grad         ? "-grad"
                 : compaction ? "-compaction"
                              : "",
                 prec == CLNODE_FP64 ? "-fp64" : "");
        if (rc == 0)
            rc = md_write(markdown, name, md_body);
        free(md_body);
    }
    return rc;
}
