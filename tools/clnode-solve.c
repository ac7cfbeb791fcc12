/* clnode-solve - solve a batch of neural ODEs from the command line.
 *
 * With no arguments it solves the seed problem: the built-in seed model (eqx.nn.MLP 10 -> 100 ->
 * 100 -> 10, softplus, PRNGKey(42)), y0 = 0, t in [0, 50], dt0 = 0.02, tsit5, rtol 1e-4,
 * atol 1e-6, fp32, batch 1. Exit status: 0 when every trajectory succeeded, 1 when some did not,
 * 2 for bad arguments or files. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clnode.h"
#include "tool_common.h"

static void usage(FILE *f)
{
    fputs("usage: clnode-solve [options]\n"
          "  --model FILE            safetensors MLP (default: the built-in seed model)\n"
          "  --method NAME           ",
          f);
    tool_print_methods(f);
    fputs(
        "\n"
        "  --rtol X --atol X       tolerances (default 1e-4, 1e-6)\n"
        "  --pcoeff X --icoeff X --dcoeff X   PID coefficients (default 0, 1, 0)\n"
        "  --dtmin X --dtmax X     step size bounds (default none)\n"
        "  --no-force-dtmin        end a trajectory with dt_min_reached instead of forcing dtmin\n"
        "  --factormin X --factormax X --safety X   (default 0.2, 10, 0.9)\n"
        "  --constant-step         constant steps of dt0 instead of the PID controller\n"
        "  --t0 X --t1 X --dt0 X   interval and first step (default 0, 50, 0.02)\n"
        "  --max-steps N           attempts per trajectory (default 4096)\n"
        "  --precision fp32|fp64   state precision (default fp32)\n"
        "  --gemm-precision strict|tf32   precision of the MLP's matrix products (default\n"
        "                          strict: IEEE in the state precision; tf32: 10-bit mantissa\n"
        "                          inputs, fp32 accumulation; native on CUDA, emulated elsewhere)\n"
        "  --precision-guard warn|refuse|off  rtol below 16 unit roundoffs of the measured\n"
        "                          GEMM: warn (default) or refuse; warn and refuse also end\n"
        "                          trajectories stuck at the rounding floor (precision_floor);\n"
        "                          off keeps diffrax's steps whatever the arithmetic does\n"
        "  --batch B               number of trajectories, all starting at y0 (default 1)\n"
        "  --y0 v1,v2,...          initial state (default zeros)\n"
        "  --y0-file FILE.csv      one initial state per line (the batch is the line count)\n"
        "  --save steps|t0|t1|ts:T1,T2,...   what to save; repeatable (default t1)\n"
        "  --out FILE.csv          write saved points as traj,t,y0,y1,...\n"
        "  --backend host|opencl|cuda  --device SPEC   where to solve (default host, or\n"
        "                          $CLNODE_DEVICE); e.g. --backend opencl --device pocl\n"
        "  --json                  print one JSON object on stdout instead of the summary\n"
        "  --quiet                 no summary\n"
        "  --help                  this text\n",
        f);
}

typedef struct progress_state {
    double start;
    int shown;
} progress_state;

static int on_progress(void *user, size_t active, size_t batch, double fraction, long steps)
{
    progress_state *p = user;
    p->shown = 1;
    fprintf(stderr, "\r  %5.1f%% of [t0, t1]  %zu/%zu trajectories active  %ld steps  %.1f s ",
            100.0 * fraction, active, batch, steps, tool_now() - p->start);
    fflush(stderr);
    return 0;
}

static void write_csv_rows(FILE *f, const clnode_solution *sol, size_t traj, clnode_save_kind k)
{
    size_t n = 0;
    const double *ts = NULL, *ys = NULL;
    const size_t N = clnode_solution_dim(sol);
    clnode_solution_saved(sol, traj, k, &n, &ts, &ys);
    for (size_t i = 0; i < n; ++i) {
        fprintf(f, "%zu,%.17g", traj, ts[i]);
        for (size_t j = 0; j < N; ++j)
            fprintf(f, ",%.17g", ys[i * N + j]);
        fputc('\n', f);
    }
}

int main(int argc, char **argv)
{
    tool_problem pb;
    tool_problem_defaults(&pb);
    const char *out_path = NULL;
    int json = 0, quiet = 0;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        int used = 0;
        int rc = tool_problem_arg(&pb, argc, argv, &i, &used);
        if (rc)
            return rc;
        if (used)
            continue;
        if (strcmp(a, "--out") == 0) {
            out_path = tool_need(argc, argv, &i);
            if (!out_path)
                return 2;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--quiet") == 0) {
            quiet = 1;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "clnode-solve: unknown option %s (see --help)\n", a);
            return 2;
        }
    }

    clnode_context *ctx = NULL;
    clnode_model *model = NULL;
    clnode_solution *sol = NULL;
    double *y0 = NULL;
    size_t batch = 0;
    int rc = tool_problem_open(&pb, "clnode-solve", &ctx, &model, &y0, &batch);
    if (rc)
        return rc;

    progress_state ps = {tool_now(), 0};
    if (isatty(STDERR_FILENO) && !json) {
        pb.opts.progress = on_progress;
        pb.opts.progress_user = &ps;
    }
    const double t_start = tool_now();
    clnode_status st = clnode_solve(ctx, model, &pb.opts, batch, y0, &sol);
    const double wall = tool_now() - t_start;
    if (ps.shown)
        fputs("\n", stderr);
    if (st != CLNODE_OK) { /* the context's logger has printed why, on one line */
        rc = st == CLNODE_ERR_INVALID_ARGUMENT || st == CLNODE_ERR_NONFINITE_INPUT ? 2 : 1;
        goto done;
    }

    const size_t N = clnode_model_dim(model);
    size_t failed = 0;
    for (size_t b = 0; b < batch; ++b) {
        clnode_trajectory_stats s;
        clnode_solution_stats(sol, b, &s);
        failed += s.result != CLNODE_RESULT_SUCCESS;
    }

    if (out_path) {
        FILE *f = fopen(out_path, "w");
        if (!f) {
            fprintf(stderr, "clnode-solve: cannot write %s: %s\n", out_path, strerror(errno));
            rc = 2;
            goto done;
        }
        fputs("traj,t", f);
        for (size_t j = 0; j < N; ++j)
            fprintf(f, ",y%zu", j);
        fputc('\n', f);
        for (size_t b = 0; b < batch; ++b)
            for (int k = CLNODE_SAVE_T0; k <= CLNODE_SAVE_T1; ++k)
                write_csv_rows(f, sol, b, (clnode_save_kind)k);
        if (fclose(f) != 0) {
            fprintf(stderr, "clnode-solve: error writing %s: %s\n", out_path, strerror(errno));
            rc = 2;
            goto done;
        }
    }

    if (json) {
        tool_json_solution(stdout, &pb, ctx, model, sol, batch, wall);
    } else if (!quiet) {
        tool_print_summary(stdout, &pb, ctx, model, sol, batch, wall);
    }
    rc = failed ? 1 : 0;
done:
    clnode_solution_destroy(&sol);
    clnode_model_destroy(&model);
    clnode_context_destroy(&ctx);
    free(y0);
    tool_problem_free(&pb);
    return rc;
}
