/* clnode-solve - solve a batch of neural ODEs from the command line.
 *
 * With no arguments it solves the seed problem: the built-in seed model (eqx.nn.MLP 10 -> 100 ->
 * 100 -> 10, softplus, PRNGKey(42)), y0 = 0, t in [0, 50], dt0 = 0.02, tsit5, rtol 1e-4,
 * atol 1e-6, fp32, batch 1. Exit statuses: tool_exit_help (tool_common.c). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clnode.h"
#include "args.h"
#include "arrays.h"
#include "grad.h"
#include "text.h"
#ifdef CLNODE_SOLVE_MPI
#include "ranks.h"
#endif
#include "tool_problem.h"
#include "tool_precision.h"
#include "tool_settings.h"
#include "tool_temp.h"

/* The gradient's options, in --help */
static const char grad_help[] =
    "  --cotangents COT        with --grad-out: the gradient of the solve (jax.grad of\n"
    "                          diffrax's, step sizes held): COT.npy, or COT.npz with one\n"
    "                          member ys (\"-\": a .npy on standard input), float32 or\n"
    "                          float64, dL/d(saved values) of the shape of --out's padded\n"
    "                          ys (B, T, N) (--ragged too), every value finite (padding\n"
    "                          slots: 0); solved with keep_tape (--checkpoint-every K: keep\n"
    "                          every K-th state, recompute the rest, same bits; without\n"
    "                          --cotangents, --keep-tape and --checkpoint-every are refused,\n"
    "                          as is --no-keep-tape with it), the reverse pass on --device\n"
    "                          (host:openblas: on host); G follows the forward's bits: the\n"
    "                          host's bytes on every device whose forward has them (not\n"
    "                          host:openblas nor cuda:N:cublas, whose GEMMs differ)\n"
    "  --grad-out G.npz        the gradient, float64: y0 (B, N), args (B, k) for a model\n"
    "                          with inputs, layers.<l>.weight (out, in), layers.<l>.bias\n"
    "                          (out,), out_scale (n,): the parameters summed over the batch\n"
    "                          in a fixed tree over blocks of 32 trajectories: the same\n"
    "                          bytes under mpirun at any rank count and with --resume\n"
    "                          (--chunk-size: a multiple of 32)\n";

static void usage(FILE *f)
{
    fputs("usage: clnode-solve [options]\n"
          "Solves a batch of neural ODEs dy/dt = MLP(y) (default: the seed problem). Options\n"
          "take their value as --opt VALUE or --opt=VALUE.\n",
          f);
    fputs(tool_settings_model_help, f);
    clnode_solve_options defaults;
    clnode_solve_seed_options(&defaults);
    tool_print_solve_options(f, &defaults);
    fputs(
        "  --batch B               number of trajectories, all starting at y0 (default 1)\n"
        "  --y0 v1,v2,...          initial state (default zeros)\n"
        "  --y0-file FILE          initial states: FILE.npy (B, N) or (N,), or a CSV with one\n"
        "                          per line (below); the batch is the number of states\n"
        "  --y0-header auto|yes|no whether a CSV y0 file's first line is a header (default auto)\n"
        "  --t0-file, --t1-file, --dt0-file FILE.npy   each trajectory's t0, t1, dt0: shape (B,)\n"
        "                          (instead of --t0, --t1, --dt0; giving both is an error)\n"
        "  --args-file FILE.npy    conditioning inputs (B, k) of a model with k inputs\n"
        "  --ts-file FILE.npy      each trajectory's own save times: shape (B, T), row b\n"
        "                          monotone in the direction of integration and inside\n"
        "                          trajectory b's [t0, t1]; saved as --save ts: saves (not with\n"
        "                          --save ts:, the one list shared by the batch)\n"
        "  --in FILE.npz           any of the members y0, t0, t1, dt0, args, ts in one archive\n"
        "  --save steps|t0|t1|ts:T1,T2,...   what to save; repeatable, ts lists accumulate\n"
        "                          (default t1)\n"
        "  --out FILE              write the saved points: FILE.npy, FILE.npz (below), else CSV\n"
        "                          (\"-\": CSV on standard output, the summary then goes to\n"
        "                          stderr)\n"
        "  --ragged                with --out FILE.npz: ts (P,), ys (P, N) and offsets (B+1,)\n"
        "                          instead of the padded (B, T) and (B, T, N)\n"
        "  --device SPEC           where to solve (below); --backend B: see below\n"
        "  --json                  print one JSON object on stdout instead of the summary\n"
        "  --json-points           with --json: each trajectory's saved points too\n"
        "  --quiet                 no summary\n"
        "  Under mpirun (built with MPI): the batch in chunks across the ranks, each rank on its\n"
        "  own device (%l in --device: the node-local rank, e.g. cuda:%l), every output written\n"
        "  by rank 0 with the same bytes as one process\n"
        "  --chunk-size N          trajectories per chunk (default: about 64 chunks, <= 4096)\n"
        "  --resume                keep a progress record FILE.progress/ beside --out FILE; a\n"
        "                          rerun solves only the chunks it lacks (same bytes); one\n"
        "                          whose model, inputs or options changed is refused, naming\n"
        "                          what changed\n",
        f);
    fputs(grad_help, f);
    fputs(
        "  --certify               after the solve, re-solve a seeded random sample of the\n"
        "                          trajectories on the host in fp64 with their sensitivity\n"
        "                          baseline (8 solves with y0 perturbed by 4 u max(|y0|,\n"
        "                          atol/rtol)); the run is certified when every sampled\n"
        "                          trajectory lies within 3x its own spread or within rtol of\n"
        "                          its fp64 solve; not certified: exit status 4. Cost: about\n"
        "                          fraction x (9 + 2) of the run's work, on the host\n"
        "  --certify-fraction X    share of the trajectories sampled (default 0.01, at least 1)\n"
        "  --certify-seed N        which trajectories (default 1)\n"
        "  --help, -h              this text      --version   the version\n"
        "\n"
        "Output CSV (--out): a header line traj,kind,t,y0,...,y{N-1},result, then one line per\n"
        "  saved point: trajectory index, kind (t0, ts, step: the end of an accepted step, t1),\n"
        "  time, state and the trajectory's result (success, max_steps_reached, dt_min_reached,\n"
        "  nonfinite, precision_floor), sorted by trajectory, then time (at equal times t0, ts,\n"
        "  step, t1); a point the trajectory did not reach has no line.\n"
        "  Numbers are printed in the shortest form that reads back as the same value in the\n"
        "  solve's precision; pandas.read_csv and numpy.loadtxt(skiprows=1, usecols=...) read it.\n"
        "JSON (--json): {\"format_version\": 1, \"clnode_version\", \"backend\", \"device\",\n"
        "  \"model\", \"settings_from_model\" (the options --model's file set, or null),\n"
        "  \"precision\", \"gemm_precision\", \"method\", \"controller\", \"rtol\",\n"
        "  \"atol\", \"t0\", \"t1\", \"dt0\", \"dt0_auto\" (--dt0 auto), \"max_steps\",\n"
        "  \"batch\", \"dim\", \"wall_seconds\",\n"
        "  \"trajectories\": [{\"result\", \"num_steps\", \"num_accepted\", \"num_rejected\",\n"
        "  \"num_rhs_evals\", \"first_step\" (the step first attempted: --dt0's, or with\n"
        "  --dt0 auto the one chosen, after --dtmax/--dtmin, negative backwards: it reads back\n"
        "  as --dt0), \"t_final\", \"y_final\": [...],\n"
        "  with --json-points \"points\": {\"kind\": [...], \"t\": [...], \"y\": [[...], ...]} in\n"
        "  the CSV's order}],\n"
        "  with --certify \"certificate\": {\"certified\", \"fraction\", \"seed\", \"batch\",\n"
        "  \"num_sampled\", \"num_failed\", \"num_ill_conditioned\", \"perturbations\",\n"
        "  \"perturbation_ulps\", \"slack\", \"rtol\", \"max_deviation_rtol\",\n"
        "  \"worst_trajectory\", \"max_spread_rtol\", \"tolerance_rtol\", \"seconds\",\n"
        "  \"added_fraction_of_solve\", \"samples\": [{\"trajectory\", \"deviation_rtol\",\n"
        "  \"spread_rtol\", \"num_steps\", \"baseline_steps\": [lo, hi], \"complete\",\n"
        "  \"within\"}]}}; non-finite numbers are null. With --t0-file, --t1-file or\n"
        "  --dt0-file the top-level \"t0\", \"t1\", \"dt0\" are null and each trajectory has its "
        "own.\n"
        "Arrays in (.npy, numpy.save; little-endian float32/float64, C order; a malformed header\n"
        "  is refused): every array finite, all with the same number of trajectories B (a --y0\n"
        "  vector is repeated for them); --in FILE.npz (numpy.savez, stored) may hold y0 (B, N),\n"
        "  t0, t1, dt0 (B,), args (B, k) and ts (B, T), no other member, none also given by an\n"
        "  option.\n"
        "Arrays out: --out FILE.npy: ys (B, T, N) in the solve's precision (float32 for fp32).\n"
        "  --out FILE.npz: ts (B, T), ys (B, T, N), num_steps, num_accepted, num_rejected (B,)\n"
        "  int64, result (B,) int32 (0 success, 1 max_steps_reached, 2 dt_min_reached,\n"
        "  3 nonfinite, 4 precision_floor), format_version (int64 scalar, 2). Each row is\n"
        "  diffrax's layout, as the Python package's: t0, the save times reached and the steps\n"
        "  in time order, where the trajectory stopped (t1, not with steps), then +inf (a\n"
        "  trajectory that failed or saves fewer times is packed from slot 0). T: the requested\n"
        "  points for t0/ts/t1; for --save steps the most points of any trajectory (not\n"
        "  max_steps: the file grows with the steps taken).\n"
        "  --ragged: ts (P,), ys (P, N), offsets (B+1,) int64: trajectory b is rows\n"
        "  offsets[b]..offsets[b+1]. Members stored, CRC-32, ZIP64 past 4 GiB, no time stamps.\n",
        f);
    fputs(tool_y0_help, f);
    tool_print_device_help(f);
    fputs(tool_exit_help, f);
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

/* The saved points of every trajectory as CSV. Returns 0 or 3 (out of memory). */
static int write_csv(FILE *f, const clnode_solution *sol, const clnode_solve_options *o)
{
    const size_t B = clnode_solution_batch(sol);
    solve_csv_header(f, clnode_solution_dim(sol));
    for (size_t i = 0; i < B; ++i) {
        const int rc = solve_csv_rows(f, sol, i, i, o);
        if (rc)
            return rc;
    }
    return 0;
}

static int write_json(FILE *f, const tool_problem *pb, const clnode_context *ctx,
                      const clnode_model *model, const clnode_solution *sol, size_t batch,
                      double wall, int points, const clnode_certificate *cert,
                      const clnode_certify_options *copts)
{
    solve_json_head(f, pb, ctx, model, batch, wall);
    for (size_t b = 0; b < batch; ++b) {
        const int rc = solve_json_trajectory(f, sol, b, b, &pb->opts, &pb->prob, points);
        if (rc)
            return rc;
    }
    solve_json_tail(f, cert, copts, wall);
    return 0;
}

static void print_summary(FILE *f, const tool_problem *pb, const clnode_context *ctx,
                          const clnode_model *model, const clnode_solution *sol, size_t batch,
                          double wall)
{
    solve_summary_head(f, pb, ctx, model, batch);
    long min_steps = -1, max_steps = -1;
    size_t ok = 0;
    for (size_t b = 0; b < batch; ++b) {
        clnode_trajectory_stats s;
        clnode_solution_stats(sol, b, &s);
        ok += s.result == CLNODE_RESULT_SUCCESS;
        if (min_steps < 0 || s.num_steps < min_steps)
            min_steps = s.num_steps;
        if (s.num_steps > max_steps)
            max_steps = s.num_steps;
        solve_summary_trajectory(f, sol, b, b, batch, pb->opts.precision);
    }
    solve_summary_tail(f, ok, batch, min_steps, max_steps, wall);
}

/* The batch the arrays give against the one of y0: y0 from a file (--y0-file, or --in's y0)
 * and --batch fix it, and every array must agree; y0 from --y0 or zeros, without --batch, is
 * repeated for the arrays' trajectories. Returns 0, or 2 or 3 after an error. */
static int reconcile_batch(const solve_args *a, solve_arrays *arr, size_t N, double **y0,
                           size_t *batch)
{
    if (arr->y0) { /* --in's y0 replaces the zeros; its rows fixed arr->batch or agree with it */
        if (a->pb.batch && (size_t)a->pb.batch != arr->batch) {
            tool_error("--batch %ld disagrees with the %zu trajectories of %s", a->pb.batch,
                       arr->batch, arr->batch_src);
            return TOOL_EXIT_INPUT;
        }
        free(*y0);
        *y0 = arr->y0;
        arr->y0 = NULL;
        *batch = arr->batch;
        return 0;
    }
    if (!arr->batch || arr->batch == *batch)
        return 0;
    if (a->pb.y0_file || a->pb.batch) {
        tool_error("%s holds %zu trajectories, but %s %zu", arr->batch_src, arr->batch,
                   a->pb.y0_file ? a->pb.y0_file : "--batch is", *batch);
        return TOOL_EXIT_INPUT;
    }
    size_t n;
    double *y =
        tool_mul_size(arr->batch, N, &n) && tool_mul_size(n, sizeof(double), &n) ? malloc(n) : NULL;
    if (!y) {
        tool_error("out of memory: cannot allocate %zu initial states of dimension %zu", arr->batch,
                   N);
        return TOOL_EXIT_RESOURCE;
    }
    for (size_t b = 0; b < arr->batch; ++b)
        memcpy(y + b * N, *y0, N * sizeof(double));
    free(*y0);
    *y0 = y;
    *batch = arr->batch;
    return 0;
}

/* The saved points to --out (opened before the solve): CSV, or .npy/.npz written by position on
 * the temporary file's descriptor (renamed over the target with the other outputs). Returns 0 or
 * 3. */
static int write_points(tool_out *out, const solve_args *a, const clnode_solution *sol)
{
    const int fmt = solve_out_format(a->out_path);
    if (fmt == SOLVE_OUT_CSV)
        return write_csv(out->f, sol, &a->pb.opts);
    if (fflush(out->f) != 0) { /* nothing is buffered: the arrays go by pwrite */
        tool_error("cannot write %s: %s", a->out_path, strerror(errno));
        return TOOL_EXIT_RESOURCE;
    }
    return solve_arrays_write(fileno(out->f), a->out_path, fmt, a->ragged, sol, &a->pb.opts,
                              &a->pb.prob);
}

/* Reads the per-trajectory arrays, reconciles the batch and points the options at them. */
static int open_arrays(solve_args *a, const clnode_model *model, solve_arrays *arr, double **y0,
                       size_t *batch)
{
    const size_t N = clnode_model_dim(model);
    int rc = solve_arrays_load(a, N, clnode_model_num_inputs(model), arr);
    if (rc || (rc = reconcile_batch(a, arr, N, y0, batch)) != 0)
        return rc;
    a->pb.prob.t0s = arr->t0s;
    a->pb.prob.t1s = arr->t1s;
    a->pb.prob.dt0s = arr->dt0s;
    a->pb.prob.inputs = arr->inputs;
    if (arr->ts) { /* --ts-file: every trajectory its own row (exclusive with --save ts:) */
        if (!a->pb.save_given) { /* --in's member ts: saved in place of the default t1 */
            a->pb.save_given = 1;
            a->pb.opts.save_t0 = a->pb.opts.save_t1 = a->pb.opts.save_steps = 0;
        }
        a->pb.prob.save_ts = arr->ts;
        a->pb.prob.n_save_ts = arr->n_ts;
        a->pb.prob.save_ts_per_trajectory = 1;
    }
    return 0;
}

/* What the run refuses before it opens anything: --resume and --chunk-size without MPI, an --out
 * that is the same file as one of the inputs. Returns 0 or 2 after printing an error. */
static int refuse_early(const solve_args *a)
{
#ifndef CLNODE_SOLVE_MPI
    if (a->resume || a->chunk_size) {
        tool_error("--resume and --chunk-size need clnode-solve built with MPI (meson option mpi)");
        return TOOL_EXIT_INPUT;
    }
#endif
    const tool_input in[] = {
        {"--model", a->pb.model_path}, {"--y0-file", a->pb.y0_file}, {"--t0-file", a->t0_file},
        {"--t1-file", a->t1_file},     {"--dt0-file", a->dt0_file},  {"--args-file", a->args_file},
        {"--in", a->in_path},          {"--ts-file", a->ts_file},    {"--cotangents", a->cot_path},
    };
    const size_t n = sizeof in / sizeof in[0];
    if (tool_out_check_inputs("--out", a->out_path, in, n) != 0 ||
        tool_out_check_inputs("--grad-out", a->grad_path, in, n) != 0)
        return TOOL_EXIT_INPUT;
    struct stat so, sg;
    if (a->out_path && a->grad_path && stat(a->out_path, &so) == 0 &&
        stat(a->grad_path, &sg) == 0 && so.st_dev == sg.st_dev && so.st_ino == sg.st_ino) {
        tool_error("--out %s and --grad-out %s are the same file", a->out_path, a->grad_path);
        return TOOL_EXIT_INPUT;
    }
    return 0;
}

/* With --cotangents: the solve keeps its tape, the cotangents are read (their slots checked
 * here unless --save steps makes them depend on the solve) and --grad-out is opened, all before
 * the solve. Returns 0 or the exit status after an error. */
static int open_gradient(solve_args *a, const clnode_model *model, size_t batch, solve_cot *cot,
                         tool_out *gout)
{
    if (!a->cot_path)
        return 0;
    a->pb.opts.keep_tape = 1;
    size_t T = 0;
    if (!a->pb.opts.save_steps && clnode_save_slots(NULL, &a->pb.opts, &a->pb.prob, &T) != 0) {
        tool_error("the save options have no layout");
        return TOOL_EXIT_INPUT;
    }
    const int rc =
        solve_grad_load(a->cot_path, batch, clnode_model_dim(model), T, a->pb.opts.precision, cot);
    return rc ? rc : tool_out_open(gout, a->grad_path);
}

/* The solve, with the progress line on a terminal (not with --json), then with --certify the
 * certificate, whose re-solves report progress as the solve did. Returns 0 with *sol (and *cert)
 * set, or the exit status of a failure the context's logger has printed. */
static int solve_and_certify(solve_args *a, clnode_context *ctx, const clnode_model *model,
                             const double *y0, size_t batch, clnode_solution **sol,
                             clnode_certificate **cert, double *wall)
{
    tool_problem *pb = &a->pb;
    progress_state ps = {tool_now(), 0};
    if (isatty(STDERR_FILENO) && !a->json) {
        pb->opts.progress = on_progress;
        pb->opts.progress_user = &ps;
    }
    pb->opts.cancel = tool_temp_cancel; /* SIGINT, SIGTERM: the solve stops at its next step */
    const double t_start = tool_now();
    pb->prob.batch = batch;
    pb->prob.y0 = y0;
    tool_temp_cooperate(1);
    clnode_status st = clnode_solve(ctx, model, &pb->opts, &pb->prob, sol);
    *wall = tool_now() - t_start;
    if (ps.shown)
        fputs("\n", stderr);
    if (st == CLNODE_OK && a->certify) {
        ps.shown = 0;
        st = clnode_certify(ctx, model, &pb->opts, &pb->prob, *sol, &a->certify_opts, cert);
        if (ps.shown)
            fputs("\n", stderr);
    }
    tool_temp_cooperate(0);   /* a signal received: the process ends here, with its status */
    pb->opts.progress = NULL; /* ps ends here */
    pb->opts.progress_user = NULL;
    return st == CLNODE_OK ? 0 : tool_exit_status(st);
}

/* How many trajectories did not end in success. */
static size_t count_failed(const clnode_solution *sol, size_t batch)
{
    size_t failed = 0;
    for (size_t b = 0; b < batch; ++b) {
        clnode_trajectory_stats s;
        clnode_solution_stats(sol, b, &s);
        failed += s.result != CLNODE_RESULT_SUCCESS;
    }
    return failed;
}

/* The report on standard output: --json's, or the summary and the certificate (on standard
 * error when --out - has standard output) unless --quiet; with --quiet the certificate on
 * standard error. Returns 0 or an exit status after an error. */
static int write_report(const solve_args *a, const clnode_context *ctx, const clnode_model *model,
                        const clnode_solution *sol, const clnode_certificate *cert, size_t batch,
                        double wall)
{
    const tool_problem *pb = &a->pb;
    if (a->json) {
        tool_out js;
        tool_out_open(&js, "-");
        const int rc = write_json(js.f, pb, ctx, model, sol, batch, wall, a->json_points, cert,
                                  &a->certify_opts);
        return rc ? rc : tool_out_commit(&js);
    }
    if (!a->quiet) {
        const int to_stderr = a->out_path && strcmp(a->out_path, "-") == 0;
        print_summary(to_stderr ? stderr : stdout, pb, ctx, model, sol, batch, wall);
        if (cert)
            tool_print_certificate(to_stderr ? stderr : stdout, cert, &a->certify_opts, wall);
        if (!to_stderr && fflush(stdout) != 0) {
            tool_error("cannot write standard output");
            return TOOL_EXIT_RESOURCE;
        }
    }
    if (cert && a->quiet)
        tool_print_certificate(stderr, cert, &a->certify_opts, wall);
    return 0;
}

int main(int argc, char **argv)
{
    tool_prog = "clnode-solve";
    solve_args a;
    int rc = solve_args_parse(&a, argc, argv);
    rc = rc < 0 && refuse_early(&a) ? TOOL_EXIT_INPUT : rc;
    if (rc >= 0) {
        if (a.help)
            usage(stdout);
        else if (a.version)
            tool_print_version();
        solve_args_free(&a);
        return rc;
    }
#ifdef CLNODE_SOLVE_MPI
    const int mpi = solve_mpi_wanted(&a); /* under mpirun: the batch across the ranks */
    rc = mpi ? solve_mpi_init(&a, &argc, &argv) : 0;
    if (rc) {
        rc = solve_mpi_finish(rc);
        solve_args_free(&a);
        return rc;
    }
#endif
    clnode_context *ctx = NULL;
    clnode_model *model = NULL;
    clnode_solution *sol = NULL;
    clnode_certificate *cert = NULL;
    double *y0 = NULL;
    size_t batch = 0;
    tool_out out, gout;
    memset(&out, 0, sizeof out);
    memset(&gout, 0, sizeof gout);
    solve_cot cot;
    memset(&cot, 0, sizeof cot);
    solve_arrays arr;
    memset(&arr, 0, sizeof arr);
    rc = tool_problem_open(&a.pb, &ctx, &model, &y0, &batch);
    if (rc)
        goto done;
    rc = open_arrays(&a, model, &arr, &y0, &batch);
    if (rc || (rc = tool_settings_load(&a.pb, model)) != 0) /* --model's settings */
        goto done;
#ifdef CLNODE_SOLVE_MPI
    if (mpi) {
        rc = solve_mpi_run(&a, ctx, model, y0, batch);
        goto done;
    }
#endif
    /* opened before the solve: a path that cannot be written fails before the work */
    rc = a.out_path ? tool_out_open(&out, a.out_path) : 0;
    if (rc || (rc = open_gradient(&a, model, batch, &cot, &gout)) != 0)
        goto done;
    double wall;
    rc = solve_and_certify(&a, ctx, model, y0, batch, &sol, &cert, &wall);
    if (rc)
        goto done;
    const size_t failed = count_failed(sol, batch);
    rc = a.out_path ? write_points(&out, &a, sol) : 0;
    if (!rc && a.cot_path && a.pb.opts.save_steps)
        rc =
            solve_grad_check_slots(a.cot_path, &cot, solve_grad_slots(sol, &a.pb.opts, &a.pb.prob));
    if (!rc && a.cot_path)
        rc = solve_grad_run(a.grad_path, ctx, model, sol, &cot, &gout);
    tool_out *const outs[] = {&out, &gout}; /* the outputs appear together or not at all */
    if (!rc)
        rc = tool_out_commit_all(outs, 2);
    if (rc)
        goto done;
    rc = write_report(&a, ctx, model, sol, cert, batch, wall);
    if (rc)
        goto done;
    clnode_certificate_summary cs;
    clnode_certificate_get(cert, &cs);
    rc = cert && !cs.certified ? TOOL_EXIT_VERIFY : failed ? TOOL_EXIT_UNSUCCESSFUL : TOOL_EXIT_OK;
done:
    clnode_certificate_destroy(&cert);
    tool_out_abort(&out);
    tool_out_abort(&gout);
    solve_grad_free(&cot);
    clnode_solution_destroy(&sol);
    clnode_model_destroy(&model);
    clnode_context_destroy(&ctx);
    free(y0);
    solve_arrays_free(&arr);
#ifdef CLNODE_SOLVE_MPI
    if (mpi)
        rc = solve_mpi_finish(rc);
#endif
    solve_args_free(&a);
    return rc;
}
