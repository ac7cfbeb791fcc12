/* clnode-compare - the vendor cross-comparison: one problem on every device x GEMM mode x
 * precision present, against the host float64 strict reference.
 *
 * Default problem: the seed (clnode-solve's defaults) at batch sizes 1 and 2. For each row (device,
 * precision, GEMM mode) it probes the GEMM (clnode/probe.h), solves at every batch size, and
 * compares: step counts (per batch size, and whether every copy of a trajectory took the same
 * steps), the trajectories' results, and the largest relative deviation of the saved values from
 * the reference at the same times (11 equally spaced times over [t0, t1], and t1):
 *
 *     dev = max over times and trajectories of  max_j |y_j - ref_j| / (max_j |ref_j| + atol/rtol)
 *
 * i.e. relative to the state's magnitude, with the solver's own absolute floor atol/rtol where the
 * state is near zero. Exit status: 0 when every strict row agrees, 1 when a strict row disagrees
 * (tf32 rows never fail the run: they exist to show the failure), 2 for bad arguments, a failed
 * reference or a missing matplotlib with --plot. */
#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clnode.h"
#include "clnode/probe.h"
#include "tool_common.h"
#include "tool_table.h"

#ifndef CLN_PLOT_SCRIPT
#define CLN_PLOT_SCRIPT "plot_compare.py"
#endif

extern char **environ;

#define MAX_BATCHES 8
#define MAX_DEVICES 64
#define N_DEFAULT_TS 11 /* saved times over [t0, t1] compared with the reference */
#define N_PLOT_TS 401   /* dense reference curve for the plot */

static const char *prog = "clnode-compare";

typedef struct row {
    char spec[64];
    char device_name[256];
    clnode_precision prec;
    clnode_gemm_mode mode;
    clnode_status probe_status;
    clnode_probe_result probe;
    clnode_status status[MAX_BATCHES];
    char error[MAX_BATCHES][256];
    clnode_solution *sol[MAX_BATCHES];
    /* derived */
    long steps_min[MAX_BATCHES], steps_max[MAX_BATCHES];
    int batch_invariant; /* every copy of each trajectory took the same steps */
    int all_success;
    int inflated; /* more than twice the reference's steps */
    char results[160];
    double max_dev;
    int bit_identical; /* to the "host" row of the same precision and mode: 1, 0, -1 n/a */
    int is_reference;
    int fails; /* a strict row that disagrees */
    char verdict[160];
} row;

typedef struct compare {
    tool_problem pb;
    size_t batches[MAX_BATCHES], nb;
    char *devices[MAX_DEVICES];
    size_t ndev;
    int want_prec[2]; /* fp32, fp64 */
    int want_mode[2]; /* strict, tf32 */
    double tolerance; /* 0: scaled from rtol */
    int json, progress;
    const char *plot;
    /* problem */
    double *y0base; /* R x N */
    size_t R, N;
    double *ts;
    size_t n_ts;
    char model_desc[512];
    /* reference: host fp64 strict on the R base states */
    clnode_solution *ref, *ref_dense;
    char ref_device[256];
    double *dense_ts;
    row *rows;
    size_t nrows, caprows;
    char skipped[4096];
} compare;

static void usage(FILE *f)
{
    fputs("usage: clnode-compare [problem options] [options]\n"
          "  Solves one problem on every device x GEMM mode x precision present and compares\n"
          "  each with the host float64 strict reference (default problem: the seed, as\n"
          "  clnode-solve with no arguments, at batch sizes 1 and 2).\n"
          "  --devices LIST          comma-separated device strings (default: every device of\n"
          "                          clnode-devices: host, host:openblas, opencl:N, cuda:N, ...)\n"
          "  --batches LIST          batch sizes (default 1,2); each trajectory is a copy of y0\n"
          "                          (or of the --y0-file rows)\n"
          "  --precisions LIST       fp32,fp64 (default both, fp64 where the device has it)\n"
          "  --gemm-modes LIST       strict,tf32 (default both, tf32 where available)\n"
          "  --tolerance X           largest relative deviation a strict row may show (default\n"
          "                          100 x max(rtol, 16 u), u the unit roundoff of the precision)\n"
          "  --json                  one JSON object on stdout instead of the table\n"
          "  --plot FILE.png         plot the trajectories, steps and step sizes (matplotlib)\n"
          "  problem options: --model --method --rtol --atol --t0 --t1 --dt0 --max-steps\n"
          "    --pcoeff --icoeff --dcoeff --dtmin --dtmax --factormin --factormax --safety\n"
          "    --constant-step --no-force-dtmin --y0 --y0-file, as clnode-solve; --save ts:T1,...\n"
          "    sets the comparison times; --device/--batch/--precision/--gemm-precision are\n"
          "    read as one-element --devices/--batches/--precisions/--gemm-modes\n"
          "  exit status: 0 all strict rows agree, 1 a strict row disagrees, 2 usage/reference\n",
          f);
}

/* Splits a comma-separated list into strdup'ed items. */
static int split_list(const char *s, char **items, size_t cap, size_t *n)
{
    *n = 0;
    const char *p = s;
    while (*p) {
        const size_t len = strcspn(p, ",");
        if (len) {
            if (*n == cap)
                return 2;
            items[*n] = strndup(p, len);
            if (!items[*n])
                return 2;
            ++*n;
        }
        p += len;
        if (*p == ',')
            ++p;
    }
    return *n ? 0 : 2;
}

static void free_list(char **items, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        free(items[i]);
}

static int parse_batches(compare *c, const char *s)
{
    char *items[MAX_BATCHES];
    size_t n = 0;
    int rc = split_list(s, items, MAX_BATCHES, &n);
    for (size_t i = 0; !rc && i < n; ++i) {
        char *end;
        errno = 0;
        long v = strtol(items[i], &end, 10);
        if (*end || errno || v < 1 || v > 1000000)
            rc = 2;
        c->batches[i] = (size_t)v;
    }
    if (rc)
        fprintf(stderr, "%s: --batches expects up to %d positive integers, not \"%s\"\n", prog,
                MAX_BATCHES, s);
    else
        c->nb = n;
    free_list(items, n);
    return rc;
}

static int parse_names(const char *opt, const char *s, const char *a, const char *b, int *want)
{
    char *items[8];
    size_t n = 0;
    int rc = split_list(s, items, 8, &n);
    want[0] = want[1] = 0;
    for (size_t i = 0; !rc && i < n; ++i) {
        if (strcmp(items[i], a) == 0)
            want[0] = 1;
        else if (strcmp(items[i], b) == 0)
            want[1] = 1;
        else
            rc = 2;
    }
    if (rc)
        fprintf(stderr, "%s: %s expects a list of %s and %s, not \"%s\"\n", prog, opt, a, b, s);
    free_list(items, n);
    return rc;
}

static int parse_args(compare *c, int argc, char **argv)
{
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const char *v = NULL;
        int rc = 0;
        if (strcmp(a, "--devices") == 0 || strcmp(a, "--device") == 0) {
            if (!(v = tool_need(argc, argv, &i)))
                return 2;
            free_list(c->devices, c->ndev);
            if (split_list(v, c->devices, MAX_DEVICES, &c->ndev)) {
                fprintf(stderr, "%s: %s expects a list of device strings\n", prog, a);
                return 2;
            }
        } else if (strcmp(a, "--batches") == 0 || strcmp(a, "--batch") == 0) {
            if (!(v = tool_need(argc, argv, &i)))
                return 2;
            rc = parse_batches(c, v);
        } else if (strcmp(a, "--precisions") == 0 || strcmp(a, "--precision") == 0) {
            if (!(v = tool_need(argc, argv, &i)))
                return 2;
            rc = parse_names(a, v, "fp32", "fp64", c->want_prec);
        } else if (strcmp(a, "--gemm-modes") == 0 || strcmp(a, "--gemm-precision") == 0) {
            if (!(v = tool_need(argc, argv, &i)))
                return 2;
            rc = parse_names(a, v, "strict", "tf32", c->want_mode);
        } else if (strcmp(a, "--tolerance") == 0) {
            if (!(v = tool_need(argc, argv, &i)))
                return 2;
            char *end;
            c->tolerance = strtod(v, &end);
            if (*end || !(c->tolerance > 0) || !isfinite(c->tolerance)) {
                fprintf(stderr, "%s: --tolerance expects a positive number, not \"%s\"\n", prog, v);
                return 2;
            }
        } else if (strcmp(a, "--json") == 0) {
            c->json = 1;
        } else if (strcmp(a, "--plot") == 0) {
            if (!(c->plot = tool_need(argc, argv, &i)))
                return 2;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--backend") == 0 || strcmp(a, "--out") == 0) {
            fprintf(stderr, "%s: %s is not an option of clnode-compare (see --help)\n", prog, a);
            return 2;
        } else {
            int used = 0;
            rc = tool_problem_arg(&c->pb, argc, argv, &i, &used);
            if (!rc && !used) {
                fprintf(stderr, "%s: unknown option %s (see --help)\n", prog, a);
                return 2;
            }
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* Every device of this build and machine, engines included. */
static int default_devices(compare *c)
{
    clnode_device_list *l = NULL;
    if (clnode_device_list_create(tool_log, (void *)prog, &l) != CLNODE_OK) {
        fprintf(stderr, "%s: cannot list the devices\n", prog);
        return 2;
    }
    for (size_t i = 0; i < clnode_device_list_count(l) && c->ndev < MAX_DEVICES; ++i)
        c->devices[c->ndev++] = strdup(clnode_device_list_get(l, i)->spec);
    for (size_t i = 0; i < clnode_device_list_num_backends(l); ++i) {
        const clnode_backend_info *b = clnode_device_list_backend(l, i);
        if (b->note[0] && !c->json)
            printf("%s: %s\n", b->name, b->note);
    }
    clnode_device_list_destroy(&l);
    for (size_t i = 0; i < c->ndev; ++i)
        if (!c->devices[i])
            return 2;
    return 0;
}

static void add_skipped(compare *c, const char *fmt, const char *spec, const char *what,
                        const char *why)
{
    const size_t used = strlen(c->skipped);
    if (used < sizeof c->skipped - 1)
        snprintf(c->skipped + used, sizeof c->skipped - used, fmt, spec, what, why);
}

/* Opens a context on `spec` with the problem's model and base states (R x N). */
static int open_problem(compare *c, const char *spec, clnode_context **ctx, clnode_model **model)
{
    c->pb.device = spec;
    c->pb.backend = NULL;
    double *y0 = NULL;
    size_t batch = 0;
    const long saved_batch = c->pb.batch;
    c->pb.batch = 0;
    int rc = tool_problem_open(&c->pb, prog, ctx, model, &y0, &batch);
    c->pb.batch = saved_batch;
    if (rc)
        return rc;
    if (!c->y0base) {
        c->y0base = y0;
        c->R = batch;
        c->N = clnode_model_dim(*model);
    } else {
        free(y0);
    }
    return 0;
}

static clnode_status solve_batch(compare *c, clnode_context *ctx, const clnode_model *model,
                                 clnode_precision prec, clnode_gemm_mode mode, size_t copies,
                                 clnode_solution **out)
{
    clnode_solve_options o = c->pb.opts;
    o.precision = prec;
    o.gemm_mode = mode;
    o.save_t0 = 0;
    o.save_t1 = 1;
    o.save_steps = 1;
    o.save_ts = c->ts;
    o.n_save_ts = c->n_ts;
    o.progress = NULL;
    const size_t B = copies * c->R;
    double *y0 = malloc(B * c->N * sizeof(double));
    if (!y0)
        return CLNODE_ERR_OUT_OF_MEMORY;
    for (size_t k = 0; k < copies; ++k)
        memcpy(y0 + k * c->R * c->N, c->y0base, c->R * c->N * sizeof(double));
    clnode_status st = clnode_solve(ctx, model, &o, B, y0, out);
    free(y0);
    return st;
}

static row *new_row(compare *c)
{
    if (c->nrows == c->caprows) {
        const size_t cap = c->caprows ? 2 * c->caprows : 16;
        row *r = realloc(c->rows, cap * sizeof *r);
        if (!r)
            return NULL;
        c->rows = r;
        c->caprows = cap;
    }
    row *r = &c->rows[c->nrows++];
    memset(r, 0, sizeof *r);
    return r;
}

static void progress_msg(const compare *c, const char *spec, clnode_precision p, clnode_gemm_mode m,
                         const char *what)
{
    if (!c->progress)
        return;
    fprintf(stderr, "\r\033[K%s: %s %s %s: %s (a first OpenCL build takes ~30 s)", prog, spec,
            clnode_precision_name(p), clnode_gemm_mode_name(m), what);
    fflush(stderr);
}

static int run_device(compare *c, const char *spec)
{
    clnode_context *ctx = NULL;
    clnode_model *model = NULL;
    if (open_problem(c, spec, &ctx, &model)) {
        fprintf(stderr, "%s: cannot open device %s\n", prog, spec);
        return 2;
    }
    for (int pi = 0; pi < 2; ++pi) {
        const clnode_precision prec = pi ? CLNODE_FP64 : CLNODE_FP32;
        if (!c->want_prec[pi])
            continue;
        if (!clnode_context_supports(ctx, prec)) {
            add_skipped(c, "  %s %s: %s\n", spec, clnode_precision_name(prec),
                        "the device has no fp64");
            continue;
        }
        for (int mi = 0; mi < 2; ++mi) {
            const clnode_gemm_mode mode = mi ? CLNODE_GEMM_TF32 : CLNODE_GEMM_STRICT;
            if (!c->want_mode[mi] || (mode == CLNODE_GEMM_TF32 && prec == CLNODE_FP64))
                continue;
            progress_msg(c, spec, prec, mode, "probing the GEMM");
            clnode_probe_result pr;
            memset(&pr, 0, sizeof pr);
            clnode_status pst = clnode_probe_gemm(ctx, prec, mode, &pr);
            if (pst == CLNODE_ERR_UNSUPPORTED) {
                add_skipped(c, "  %s tf32: %s (%s)\n", spec, "not available",
                            clnode_context_last_error(ctx));
                continue;
            }
            row *r = new_row(c);
            if (!r) {
                fprintf(stderr, "%s: out of memory\n", prog);
                clnode_model_destroy(&model);
                clnode_context_destroy(&ctx);
                return 2;
            }
            snprintf(r->spec, sizeof r->spec, "%s", spec);
            snprintf(r->device_name, sizeof r->device_name, "%s", clnode_context_device(ctx));
            r->prec = prec;
            r->mode = mode;
            r->probe_status = pst;
            r->probe = pr;
            for (size_t b = 0; b < c->nb; ++b) {
                char what[64];
                snprintf(what, sizeof what, "solving batch %zu", c->batches[b] * c->R);
                progress_msg(c, spec, prec, mode, what);
                r->status[b] = solve_batch(c, ctx, model, prec, mode, c->batches[b], &r->sol[b]);
                if (r->status[b] != CLNODE_OK)
                    snprintf(r->error[b], sizeof r->error[b], "%s: %.200s",
                             clnode_status_name(r->status[b]), clnode_context_last_error(ctx));
            }
            if (r->status[0] == CLNODE_ERR_UNSUPPORTED && mode == CLNODE_GEMM_TF32) {
                add_skipped(c, "  %s tf32: %s (%s)\n", spec, "not available", r->error[0]);
                for (size_t b = 0; b < c->nb; ++b)
                    clnode_solution_destroy(&r->sol[b]);
                --c->nrows;
            }
        }
    }
    clnode_model_destroy(&model);
    clnode_context_destroy(&ctx);
    return 0;
}

/* Largest relative deviation of one saved kind of trajectory i from the reference's trajectory
 * i mod R; +inf when points are missing or not finite. */
static double kind_dev(const compare *c, const clnode_solution *s, size_t i, clnode_save_kind k)
{
    size_t n = 0, nr = 0;
    const double *ts, *ys, *tr, *yr;
    clnode_solution_saved(s, i, k, &n, &ts, &ys);
    clnode_solution_saved(c->ref, i % c->R, k, &nr, &tr, &yr);
    if (n != nr)
        return INFINITY;
    const double floor_abs = c->pb.opts.atol / c->pb.opts.rtol;
    double dev = 0;
    for (size_t p = 0; p < n; ++p) {
        double num = 0, den = 0;
        for (size_t j = 0; j < c->N; ++j) {
            const double d = fabs(ys[p * c->N + j] - yr[p * c->N + j]);
            if (!(d <= num))
                num = isnan(d) ? INFINITY : d;
            den = fmax(den, fabs(yr[p * c->N + j]));
        }
        const double rel = num / (den + floor_abs);
        if (!(rel <= dev))
            dev = rel;
    }
    return dev;
}

static int same_saved(const clnode_solution *a, const clnode_solution *b, size_t i, size_t N)
{
    for (int k = CLNODE_SAVE_T0; k <= CLNODE_SAVE_T1; ++k) {
        size_t na = 0, nb = 0;
        const double *ta, *ya, *tb, *yb;
        clnode_solution_saved(a, i, (clnode_save_kind)k, &na, &ta, &ya);
        clnode_solution_saved(b, i, (clnode_save_kind)k, &nb, &tb, &yb);
        if (na != nb || (na && (memcmp(ta, tb, na * sizeof *ta) != 0 ||
                                memcmp(ya, yb, na * N * sizeof *ya) != 0)))
            return 0;
    }
    return 1;
}

static double row_tolerance(const compare *c, clnode_precision p)
{
    if (c->tolerance > 0)
        return c->tolerance;
    const double u = p == CLNODE_FP64 ? ldexp(1.0, -53) : ldexp(1.0, -24);
    return 100.0 * fmax(c->pb.opts.rtol, 16.0 * u);
}

static void judge(compare *c, row *r)
{
    const row *host = NULL;
    for (size_t i = 0; i < c->nrows; ++i)
        if (strcmp(c->rows[i].spec, "host") == 0 && c->rows[i].prec == r->prec &&
            c->rows[i].mode == r->mode)
            host = &c->rows[i];
    r->is_reference =
        strcmp(r->spec, "host") == 0 && r->prec == CLNODE_FP64 && r->mode == CLNODE_GEMM_STRICT;
    r->batch_invariant = 1;
    r->all_success = 1;
    r->bit_identical = host && host != r ? 1 : -1;
    r->max_dev = 0;
    const char *err = NULL;
    long first_steps[64] = {0};
    size_t nres[5] = {0};
    for (size_t b = 0; b < c->nb; ++b) {
        r->steps_min[b] = -1;
        r->steps_max[b] = -1;
        if (r->status[b] != CLNODE_OK) {
            err = r->error[b];
            r->bit_identical = 0;
            continue;
        }
        const clnode_solution *s = r->sol[b];
        const size_t B = clnode_solution_batch(s);
        for (size_t i = 0; i < B; ++i) {
            clnode_trajectory_stats st, rs;
            clnode_solution_stats(s, i, &st);
            clnode_solution_stats(c->ref, i % c->R, &rs);
            if ((unsigned)st.result < 5)
                nres[st.result]++;
            r->all_success &= st.result == CLNODE_RESULT_SUCCESS;
            if (r->steps_min[b] < 0 || st.num_steps < r->steps_min[b])
                r->steps_min[b] = st.num_steps;
            if (st.num_steps > r->steps_max[b])
                r->steps_max[b] = st.num_steps;
            const size_t base = i % c->R;
            if (base < 64) {
                if (b == 0 && i < c->R)
                    first_steps[base] = st.num_steps;
                else if (first_steps[base] != st.num_steps)
                    r->batch_invariant = 0;
            }
            if (st.num_steps > 2 * rs.num_steps && st.num_steps > rs.num_steps + 5)
                r->inflated = 1;
            const double d =
                fmax(kind_dev(c, s, i, CLNODE_SAVE_TS), kind_dev(c, s, i, CLNODE_SAVE_T1));
            if (!(d <= r->max_dev))
                r->max_dev = d;
            if (r->bit_identical == 1) {
                clnode_trajectory_stats hs;
                if (!host->sol[b] || clnode_solution_stats(host->sol[b], i, &hs) != CLNODE_OK ||
                    hs.num_steps != st.num_steps || hs.num_accepted != st.num_accepted ||
                    !same_saved(s, host->sol[b], i, c->N))
                    r->bit_identical = 0;
            }
        }
    }
    r->results[0] = '\0';
    for (int k = 0; k < 5; ++k) {
        if (!nres[k])
            continue;
        const size_t used = strlen(r->results);
        snprintf(r->results + used, sizeof r->results - used, "%s%s x%zu", used ? ", " : "",
                 clnode_result_name((clnode_result)k), nres[k]);
    }
    const double tol = row_tolerance(c, r->prec);
    const int strict = r->mode == CLNODE_GEMM_STRICT;
    const char *tag = strict ? "" : ": tf32 (expected)";
    if (err) {
        snprintf(r->verdict, sizeof r->verdict, "ERROR%s (%.100s)", tag, err);
        r->fails = strict;
        return;
    }
    if (!r->all_success) {
        snprintf(r->verdict, sizeof r->verdict, "%s%s", strict ? "FAILED: " : "",
                 nres[CLNODE_RESULT_PRECISION_FLOOR] ? "precision_floor"
                                                     : "not every trajectory "
                                                       "succeeded");
        if (!strict)
            snprintf(r->verdict + strlen(r->verdict), sizeof r->verdict - strlen(r->verdict), "%s",
                     tag);
        r->fails = strict;
        return;
    }
    if (r->inflated) {
        snprintf(r->verdict, sizeof r->verdict, "%sinflated steps%s", strict ? "DISAGREES: " : "",
                 tag);
        r->fails = strict;
        return;
    }
    if (!(r->max_dev <= tol)) {
        snprintf(r->verdict, sizeof r->verdict, "%s%s", strict ? "DISAGREES" : "DIFFERS", tag);
        r->fails = strict;
        return;
    }
    const char *suffix = r->batch_invariant ? "" : "; steps vary with the batch";
    if (r->is_reference)
        snprintf(r->verdict, sizeof r->verdict, "reference%s", suffix);
    else if (r->bit_identical == 1)
        snprintf(r->verdict, sizeof r->verdict, "agrees (same steps, bit-identical to host)%s",
                 suffix);
    else if (r->max_dev <= 0.1 * tol)
        snprintf(r->verdict, sizeof r->verdict, "agrees%s", suffix);
    else
        snprintf(r->verdict, sizeof r->verdict, "differs within tolerance%s", suffix);
}

static void fmt_steps(char *out, size_t cap, const row *r, size_t b)
{
    if (r->status[b] != CLNODE_OK)
        snprintf(out, cap, "error");
    else if (r->steps_min[b] == r->steps_max[b])
        snprintf(out, cap, "%ld", r->steps_min[b]);
    else
        snprintf(out, cap, "%ld-%ld", r->steps_min[b], r->steps_max[b]);
}

static const char *probe_class(const row *r)
{
    return r->probe_status == CLNODE_OK ? clnode_gemm_class_name(r->probe.gemm_class) : "?";
}

static void print_header(const compare *c)
{
    const clnode_solve_options *o = &c->pb.opts;
    printf("problem: %s, %s, rtol %g, atol %g, t in [%g, %g], dt0 %g; batch sizes", c->model_desc,
           o->method->name, o->rtol, o->atol, o->t0, o->t1, o->dt0);
    for (size_t b = 0; b < c->nb; ++b)
        printf("%s %zu", b ? "," : "", c->batches[b] * c->R);
    clnode_trajectory_stats rs;
    clnode_solution_stats(c->ref, 0, &rs);
    printf("\nreference: host fp64 strict, %s: %ld steps (%ld accepted)\n", c->ref_device,
           rs.num_steps, rs.num_accepted);
    printf("compared: the saved values at %zu times in [%g, %g] and at t1; deviation = max_j "
           "|y_j - ref_j| / (max_j |ref_j| + atol/rtol),\n  the largest over times and "
           "trajectories\n",
           c->n_ts, o->t0, o->t1);
    if (c->tolerance > 0)
        printf("tolerance: %.3g (--tolerance)\n", c->tolerance);
    else
        printf("tolerance: %.3g for fp32, %.3g for fp64 (100 x max(rtol, 16 u): two correct "
               "solves differ by their\n  global errors, O(rtol) per unit of growth; 100 leaves "
               "room for different step sequences, not for wrong arithmetic)\n",
               row_tolerance(c, CLNODE_FP32), row_tolerance(c, CLNODE_FP64));
}

static void print_table(const compare *c)
{
    print_header(c);
    tool_table t;
    const size_t fixed = 4, ncols = fixed + c->nb + 4;
    tool_table_init(&t, ncols);
    size_t r0 = tool_table_row(&t);
    const char *h[] = {"device", "precision", "GEMM", "probe class"};
    for (size_t k = 0; k < fixed; ++k)
        tool_table_set(&t, r0, k, "%s", h[k]);
    for (size_t b = 0; b < c->nb; ++b)
        tool_table_set(&t, r0, fixed + b, "steps B=%zu", c->batches[b] * c->R);
    tool_table_set(&t, r0, fixed + c->nb, "batch-inv");
    tool_table_set(&t, r0, fixed + c->nb + 1, "results");
    tool_table_set(&t, r0, fixed + c->nb + 2, "max rel dev");
    tool_table_set(&t, r0, fixed + c->nb + 3, "verdict");
    for (size_t i = 0; i < c->nrows; ++i) {
        const row *r = &c->rows[i];
        size_t k = tool_table_row(&t);
        tool_table_set(&t, k, 0, "%s", r->spec);
        tool_table_set(&t, k, 1, "%s", clnode_precision_name(r->prec));
        tool_table_set(&t, k, 2, "%s", clnode_gemm_mode_name(r->mode));
        tool_table_set(&t, k, 3, "%s", probe_class(r));
        for (size_t b = 0; b < c->nb; ++b) {
            char s[64];
            fmt_steps(s, sizeof s, r, b);
            tool_table_set(&t, k, fixed + b, "%s", s);
        }
        tool_table_set(&t, k, fixed + c->nb, "%s", r->batch_invariant ? "yes" : "no");
        tool_table_set(&t, k, fixed + c->nb + 1, "%s", r->results[0] ? r->results : "-");
        if (r->status[0] == CLNODE_OK && isinf(r->max_dev) && !r->all_success)
            tool_table_set(&t, k, fixed + c->nb + 2, "ended early");
        else if (r->status[0] == CLNODE_OK)
            tool_table_set(&t, k, fixed + c->nb + 2, "%.2e", r->max_dev);
        else
            tool_table_set(&t, k, fixed + c->nb + 2, "-");
        tool_table_set(&t, k, fixed + c->nb + 3, "%s", r->verdict);
    }
    printf("\n");
    tool_table_print(stdout, &t, "");
    tool_table_free(&t);
    if (c->skipped[0])
        printf("\nnot run:\n%s", c->skipped);
    printf("\nverdicts: a row DISAGREES (strict: exit status 1) when a solve fails, a trajectory "
           "does not succeed,\n  it takes more than twice the reference's steps (inflated), or "
           "its deviation exceeds the tolerance;\n  tf32 rows are expected to differ and never "
           "fail the run. Otherwise: \"bit-identical to host\" when\n  steps and saved values "
           "equal the host row of the same precision and mode bit for bit, \"agrees\" when\n  "
           "the deviation is within a tenth of the tolerance, \"differs within tolerance\" up to "
           "the tolerance.\n");
}

static void json_row(const compare *c, const row *r, int first)
{
    printf("%s\n  {\"device\": ", first ? "" : ",");
    tool_json_str(stdout, r->spec);
    printf(", \"device_name\": ");
    tool_json_str(stdout, r->device_name);
    printf(", \"precision\": \"%s\", \"gemm_precision\": \"%s\", \"probe_class\": \"%s\"",
           clnode_precision_name(r->prec), clnode_gemm_mode_name(r->mode), probe_class(r));
    if (r->probe_status == CLNODE_OK) {
        printf(", \"probe\": {\"identity_exact\": %s, \"outer_exact\": %s, \"random_bits\": ",
               r->probe.identity_exact ? "true" : "false", r->probe.outer_exact ? "true" : "false");
        tool_json_num(stdout, r->probe.random_bits);
        printf(", \"unit_roundoff\": ");
        tool_json_num(stdout, r->probe.unit_roundoff);
        printf("}");
    }
    printf(", \"runs\": [");
    for (size_t b = 0; b < c->nb; ++b) {
        printf("%s{\"batch\": %zu", b ? ", " : "", c->batches[b] * c->R);
        if (r->status[b] != CLNODE_OK) {
            printf(", \"error\": ");
            tool_json_str(stdout, r->error[b]);
            printf("}");
            continue;
        }
        printf(", \"num_steps\": [");
        const size_t B = clnode_solution_batch(r->sol[b]);
        for (size_t i = 0; i < B; ++i) {
            clnode_trajectory_stats st;
            clnode_solution_stats(r->sol[b], i, &st);
            printf("%s%ld", i ? ", " : "", st.num_steps);
        }
        printf("], \"results\": [");
        for (size_t i = 0; i < B; ++i) {
            clnode_trajectory_stats st;
            clnode_solution_stats(r->sol[b], i, &st);
            printf("%s\"%s\"", i ? ", " : "", clnode_result_name(st.result));
        }
        printf("]}");
    }
    printf("], \"batch_invariant\": %s, \"max_rel_dev\": ", r->batch_invariant ? "true" : "false");
    tool_json_num(stdout, r->max_dev);
    printf(", \"tolerance\": ");
    tool_json_num(stdout, row_tolerance(c, r->prec));
    printf(", \"bit_identical_to_host\": %s, \"verdict\": ", r->bit_identical < 0 ? "null"
                                                             : r->bit_identical   ? "true"
                                                                                  : "false");
    tool_json_str(stdout, r->verdict);
    printf(", \"fails\": %s}", r->fails ? "true" : "false");
}

static void print_json(const compare *c, int rc)
{
    const clnode_solve_options *o = &c->pb.opts;
    printf("{\"clnode_version\": ");
    tool_json_str(stdout, clnode_version_string());
    printf(", \"model\": ");
    tool_json_str(stdout, c->model_desc);
    printf(", \"method\": \"%s\", \"rtol\": ", o->method->name);
    tool_json_num(stdout, o->rtol);
    printf(", \"atol\": ");
    tool_json_num(stdout, o->atol);
    printf(", \"t0\": ");
    tool_json_num(stdout, o->t0);
    printf(", \"t1\": ");
    tool_json_num(stdout, o->t1);
    printf(", \"batches\": [");
    for (size_t b = 0; b < c->nb; ++b)
        printf("%s%zu", b ? ", " : "", c->batches[b] * c->R);
    printf("], \"saved_times\": [");
    for (size_t k = 0; k < c->n_ts; ++k) {
        printf("%s", k ? ", " : "");
        tool_json_num(stdout, c->ts[k]);
    }
    printf("], \"reference\": {\"device\": \"host\", \"device_name\": ");
    tool_json_str(stdout, c->ref_device);
    printf(", \"precision\": \"fp64\", \"gemm_precision\": \"strict\", \"num_steps\": [");
    for (size_t i = 0; i < c->R; ++i) {
        clnode_trajectory_stats st;
        clnode_solution_stats(c->ref, i, &st);
        printf("%s%ld", i ? ", " : "", st.num_steps);
    }
    printf("]}, \"tolerance\": {\"fp32\": ");
    tool_json_num(stdout, row_tolerance(c, CLNODE_FP32));
    printf(", \"fp64\": ");
    tool_json_num(stdout, row_tolerance(c, CLNODE_FP64));
    printf(", \"rule\": \"%s\"}, \"rows\": [",
           c->tolerance > 0 ? "--tolerance" : "100 * max(rtol, 16 u)");
    for (size_t i = 0; i < c->nrows; ++i)
        json_row(c, &c->rows[i], i == 0);
    printf("\n], \"not_run\": ");
    tool_json_str(stdout, c->skipped);
    printf(", \"exit_status\": %d}\n", rc);
}

/* ---- the plot ---- */

static void json_points(FILE *f, const double *t0, const double *y0, const double *ts,
                        const double *ys, size_t n, size_t N)
{
    fprintf(f, "\"t\": [");
    size_t k = 0;
    if (t0) {
        tool_json_num(f, *t0);
        ++k;
    }
    for (size_t p = 0; p < n; ++p, ++k) {
        fputs(k ? ", " : "", f);
        tool_json_num(f, ts[p]);
    }
    fprintf(f, "], \"y\": [");
    k = 0;
    if (t0) {
        fputc('[', f);
        for (size_t j = 0; j < N; ++j) {
            fputs(j ? ", " : "", f);
            tool_json_num(f, y0[j]);
        }
        fputc(']', f);
        ++k;
    }
    for (size_t p = 0; p < n; ++p, ++k) {
        fputs(k ? ", [" : "[", f);
        for (size_t j = 0; j < N; ++j) {
            fputs(j ? ", " : "", f);
            tool_json_num(f, ys[p * N + j]);
        }
        fputc(']', f);
    }
    fputc(']', f);
}

static int write_plot_json(const compare *c, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "%s: cannot write %s: %s\n", prog, path, strerror(errno));
        return 2;
    }
    const clnode_solve_options *o = &c->pb.opts;
    fprintf(f, "{\"title\": ");
    char title[768];
    snprintf(title, sizeof title, "%s, %s, rtol %g, atol %g, batch %zu, trajectory 0",
             c->model_desc, o->method->name, o->rtol, o->atol, c->batches[0] * c->R);
    tool_json_str(f, title);
    fprintf(f, ", \"dim\": %zu, \"t0\": ", c->N);
    tool_json_num(f, o->t0);
    fprintf(f, ", \"t1\": ");
    tool_json_num(f, o->t1);
    fprintf(f, ", \"reference\": {\"label\": \"host fp64 strict (reference)\", ");
    size_t n = 0;
    const double *ts, *ys;
    clnode_solution_saved(c->ref_dense, 0, CLNODE_SAVE_TS, &n, &ts, &ys);
    json_points(f, NULL, NULL, ts, ys, n, c->N);
    fprintf(f, "}, \"rows\": [");
    int first = 1;
    for (size_t i = 0; i < c->nrows; ++i) {
        const row *r = &c->rows[i];
        if (r->status[0] != CLNODE_OK)
            continue;
        char label[192];
        snprintf(label, sizeof label, "%s %s %s (%s)", r->spec, clnode_precision_name(r->prec),
                 clnode_gemm_mode_name(r->mode), probe_class(r));
        fprintf(f, "%s\n {\"label\": ", first ? "" : ",");
        first = 0;
        tool_json_str(f, label);
        fprintf(f, ", \"gemm_precision\": \"%s\", \"precision\": \"%s\", \"verdict\": ",
                clnode_gemm_mode_name(r->mode), clnode_precision_name(r->prec));
        tool_json_str(f, r->verdict);
        clnode_trajectory_stats st;
        clnode_solution_stats(r->sol[0], 0, &st);
        fprintf(f, ", \"num_steps\": %ld, \"num_accepted\": %ld, ", st.num_steps, st.num_accepted);
        clnode_solution_saved(r->sol[0], 0, CLNODE_SAVE_STEPS, &n, &ts, &ys);
        json_points(f, &o->t0, c->y0base, ts, ys, n, c->N);
        fputc('}', f);
    }
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0) {
        fprintf(stderr, "%s: error writing %s: %s\n", prog, path, strerror(errno));
        return 2;
    }
    return 0;
}

/* Runs python3 plot_compare.py with the arguments; returns its exit status (127: not run). */
static int run_python(char *const args[])
{
    pid_t pid;
    if (posix_spawnp(&pid, "python3", NULL, NULL, args, environ) != 0) {
        fprintf(stderr, "%s: cannot run python3: %s\n", prog, strerror(errno));
        return 127;
    }
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0)
        if (errno != EINTR)
            return 127;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 127;
}

static int plot_check(void)
{
    char *args[] = {"python3", CLN_PLOT_SCRIPT, "--check", NULL};
    const int rc = run_python(args);
    if (rc == 0)
        return 0;
    if (rc != 2)
        fprintf(stderr,
                "%s: cannot run %s (status %d); --plot needs python3 with matplotlib: "
                "python3 -m pip install matplotlib\n",
                prog, CLN_PLOT_SCRIPT, rc);
    return 2;
}

static int make_plot(const compare *c)
{
    char json_path[4096];
    snprintf(json_path, sizeof json_path, "%s.json", c->plot);
    int rc = write_plot_json(c, json_path);
    if (rc)
        return rc;
    char *args[] = {"python3", CLN_PLOT_SCRIPT, json_path, (char *)c->plot, NULL};
    rc = run_python(args);
    if (rc != 0) {
        fprintf(stderr, "%s: plotting failed (status %d)\n", prog, rc);
        return 2;
    }
    fprintf(stderr, "%s: plot written to %s (data: %s)\n", prog, c->plot, json_path);
    return 0;
}

/* ---- main ---- */

static int reference(compare *c)
{
    clnode_context *ctx = NULL;
    clnode_model *model = NULL;
    if (open_problem(c, "host", &ctx, &model))
        return 2;
    snprintf(c->ref_device, sizeof c->ref_device, "%s", clnode_context_device(ctx));
    snprintf(c->model_desc, sizeof c->model_desc, "%s (%zu layers, dim %zu, %s)",
             c->pb.model_path ? c->pb.model_path : "seed model", clnode_model_num_layers(model),
             c->N, clnode_activation_name(clnode_model_activation(model)));
    if (!c->ts) {
        c->n_ts = N_DEFAULT_TS;
        c->ts = malloc(c->n_ts * sizeof(double));
        if (!c->ts)
            goto oom;
        for (size_t k = 0; k < c->n_ts; ++k)
            c->ts[k] = k + 1 == c->n_ts ? c->pb.opts.t1
                                        : c->pb.opts.t0 + (c->pb.opts.t1 - c->pb.opts.t0) *
                                                              (double)k / (double)(c->n_ts - 1);
    }
    progress_msg(c, "host", CLNODE_FP64, CLNODE_GEMM_STRICT, "reference");
    clnode_status st = solve_batch(c, ctx, model, CLNODE_FP64, CLNODE_GEMM_STRICT, 1, &c->ref);
    if (st == CLNODE_OK && c->plot) {
        c->dense_ts = malloc(N_PLOT_TS * sizeof(double));
        if (!c->dense_ts)
            goto oom;
        for (size_t k = 0; k < N_PLOT_TS; ++k)
            c->dense_ts[k] = k + 1 == N_PLOT_TS
                                 ? c->pb.opts.t1
                                 : c->pb.opts.t0 + (c->pb.opts.t1 - c->pb.opts.t0) * (double)k /
                                                       (double)(N_PLOT_TS - 1);
        clnode_solve_options o = c->pb.opts;
        o.precision = CLNODE_FP64;
        o.gemm_mode = CLNODE_GEMM_STRICT;
        o.save_t0 = o.save_steps = 0;
        o.save_t1 = 1;
        o.save_ts = c->dense_ts;
        o.n_save_ts = N_PLOT_TS;
        o.progress = NULL;
        st = clnode_solve(ctx, model, &o, 1, c->y0base, &c->ref_dense);
    }
    if (st != CLNODE_OK) {
        fprintf(stderr, "%s: the host fp64 reference failed: %s\n", prog,
                clnode_context_last_error(ctx));
    } else {
        for (size_t i = 0; i < c->R; ++i) {
            clnode_trajectory_stats s;
            clnode_solution_stats(c->ref, i, &s);
            if (s.result != CLNODE_RESULT_SUCCESS) {
                fprintf(stderr, "%s: the host fp64 reference of trajectory %zu ended with %s\n",
                        prog, i, clnode_result_name(s.result));
                st = CLNODE_ERR_INVALID_ARGUMENT;
            }
        }
    }
    clnode_model_destroy(&model);
    clnode_context_destroy(&ctx);
    return st == CLNODE_OK ? 0 : 2;
oom:
    fprintf(stderr, "%s: out of memory\n", prog);
    clnode_model_destroy(&model);
    clnode_context_destroy(&ctx);
    return 2;
}

int main(int argc, char **argv)
{
    static compare c;
    tool_problem_defaults(&c.pb);
    c.batches[0] = 1;
    c.batches[1] = 2;
    c.nb = 2;
    c.want_prec[0] = c.want_prec[1] = 1;
    c.want_mode[0] = c.want_mode[1] = 1;
    int rc = parse_args(&c, argc, argv);
    if (rc)
        goto done;
    if (c.pb.n_ts) {
        c.ts = c.pb.ts; /* --save ts:... chooses the comparison times */
        c.n_ts = c.pb.n_ts;
        c.pb.ts = NULL;
    }
    c.progress = isatty(STDERR_FILENO);
    if (c.plot && (rc = plot_check()) != 0)
        goto done;
    if (!c.ndev && (rc = default_devices(&c)) != 0)
        goto done;
    if ((rc = reference(&c)) != 0)
        goto done;
    for (size_t d = 0; d < c.ndev; ++d)
        if ((rc = run_device(&c, c.devices[d])) != 0)
            goto done;
    if (c.progress)
        fprintf(stderr, "\r\033[K");
    int fails = 0;
    for (size_t i = 0; i < c.nrows; ++i) {
        judge(&c, &c.rows[i]);
        fails += c.rows[i].fails;
    }
    rc = fails ? 1 : 0;
    if (c.json) {
        print_json(&c, rc);
    } else {
        print_table(&c);
        printf("\n%s: %d strict row%s disagree%s with the reference\n", fails ? "FAIL" : "OK",
               fails, fails == 1 ? "" : "s", fails == 1 ? "s" : "");
    }
    if (c.plot) {
        const int prc = make_plot(&c);
        if (prc && !rc)
            rc = prc;
    }
done:
    for (size_t i = 0; i < c.nrows; ++i)
        for (size_t b = 0; b < MAX_BATCHES; ++b)
            clnode_solution_destroy(&c.rows[i].sol[b]);
    free(c.rows);
    clnode_solution_destroy(&c.ref);
    clnode_solution_destroy(&c.ref_dense);
    free(c.ts);
    free(c.dense_ts);
    free(c.y0base);
    free_list(c.devices, c.ndev);
    tool_problem_free(&c.pb);
    return rc;
}
