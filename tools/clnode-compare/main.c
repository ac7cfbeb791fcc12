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
 * state is near zero. Exit statuses (tool_exit_help): 0 when every strict row agrees, 4 when a
 * strict row disagrees or the reference cannot be computed (tf32 rows never fail the run: they
 * exist to show the failure), 2 for bad input (a missing matplotlib with --plot included), 3 for
 * resources and devices. The JSON document and the plot's data file are described in
 * tools/clnode-compare/schema.md. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <errno.h>
#include <limits.h>
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
#include "tool_precision.h"
#include "tool_table.h"

extern char **environ;

#define MAX_BATCHES 8
#define MAX_DEVICES 64
#define MAX_WARN 4      /* distinct log messages kept per row */
#define N_DEFAULT_TS 11 /* saved times over [t0, t1] compared with the reference */
#define N_PLOT_TS 401   /* dense times of the plot's deviation curves */

static const char *prog = "clnode-compare";

/* A distinct message the library logged while a row ran, and how often. */
typedef struct logged {
    clnode_log_level level;
    char text[512];
    long count;
} logged;

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
    clnode_solution *plot_sol; /* --plot: trajectory 0 at the dense times, with its steps */
    logged log[MAX_WARN];
    size_t nlog;
    long log_dropped;
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
    int judged; /* sj holds the verdict against the sensitivity baseline */
    clnode_judgement sj;
    double base_dev; /* deviation from the baseline's reference (the same measure as max_dev) */
    int certified;   /* every trajectory within 3x the spread or within rtol, and complete */
} row;

typedef struct compare {
    tool_problem pb;
    size_t batches[MAX_BATCHES], nb;
    char *devices[MAX_DEVICES];
    size_t ndev;
    int want_prec[2]; /* fp32, fp64 */
    int want_mode[2]; /* strict, tf32 */
    double tolerance; /* 0: scaled from rtol */
    int json, progress, help, version;
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
    long cur_row; /* the row whose solves are running (its messages are collected), or -1 */
    char skipped[4096];
    /* the sensitivity baseline per precision ([0] fp32, [1] fp64), on by default */
    int sensitivity;
    clnode_sensitivity_options sopts;
    clnode_sensitivity *base[2];
} compare;

static void usage(FILE *f)
{
    fputs("usage: clnode-compare [problem options] [options]\n"
          "  Solves one problem on every device x GEMM mode x precision present and compares\n"
          "  each with the host float64 strict reference (default problem: the seed, as\n"
          "  clnode-solve with no arguments, at batch sizes 1 and 2). Options take their value\n"
          "  as --opt VALUE or --opt=VALUE.\n"
          "  --devices LIST          comma-separated device strings (default: every device of\n"
          "                          clnode-devices: host, host:openblas, host:ISA for each\n"
          "                          ISA of the host this machine runs, opencl:N, cuda:N, ...)\n"
          "  --batches LIST          batch sizes (default 1,2); each trajectory is a copy of y0\n"
          "                          (or of the --y0-file rows)\n"
          "  --precisions LIST       fp32,fp64 (default both, fp64 where the device has it)\n"
          "  --gemm-modes LIST       strict,tf32 (default both, tf32 where available)\n"
          "  --tolerance X           largest relative deviation a strict row may show (default\n"
          "                          100 x max(rtol, 16 u), u the unit roundoff of the precision)\n"
          "  --sensitivity           (default) measure the problem's own sensitivity to rounding\n"
          "                          on the host (K solves per precision with y0 perturbed by\n"
          "                          4 u max(|y0|, atol/rtol), seeded) and judge each row against\n"
          "                          it: a strict row within it is not failed\n"
          "                          (unless --tolerance is given)\n"
          "  --no-sensitivity        judge by the tolerance alone\n"
          "  --perturbations K       perturbed solves per precision (default 8)\n"
          "  --json                  one JSON object on stdout instead of the table\n"
          "  --plot FILE.png         draw per row the relative deviation from the reference over\n"
          "                          time, the step sizes, and the steps per batch size\n"
          "                          (matplotlib); its data go to FILE.png.json\n"
          "  --help, -h              this text      --version   the version and the plot script\n"
          "  problem options, as clnode-solve: --model --y0 --y0-file --y0-header; --save\n"
          "    ts:T1,... sets the comparison times; --device, --batch, --precision and\n"
          "    --gemm-precision are read as one-element --devices, --batches, --precisions and\n"
          "    --gemm-modes; and the solve options:\n",
          f);
    clnode_solve_options defaults;
    clnode_solve_seed_options(&defaults);
    tool_print_solve_options(f, &defaults);
    fputs("\n"
          "  Messages the library logs while a row runs (the precision guard's warning, ...) are\n"
          "  printed once per row with their count, after the row.\n"
          "  JSON (--json) and the plot's data file: format_version 1, described field by field\n"
          "  in clnode-compare-schema.md (installed next to the plot script, share/clnode/).\n",
          f);
    fputs(tool_y0_help, f);
    tool_print_device_help(f);
    fputs(tool_exit_help, f);
}

/* Splits a comma-separated list into strdup'ed items; empty items are refused. Returns 0, or 2
 * (an empty item or too many), 3 (out of memory). */
static int split_list(const char *s, char **items, size_t cap, size_t *n)
{
    *n = 0;
    const char *p = s;
    for (;;) {
        const size_t len = strcspn(p, ",");
        if (!len || *n == cap)
            return TOOL_EXIT_INPUT;
        items[*n] = strndup(p, len);
        if (!items[*n])
            return TOOL_EXIT_RESOURCE;
        ++*n;
        p += len;
        if (!*p)
            return 0;
        ++p;
    }
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
            rc = TOOL_EXIT_INPUT;
        c->batches[i] = (size_t)v;
    }
    if (rc)
        tool_error("--batches expects up to %d integers in 1..1000000, not \"%s\"", MAX_BATCHES, s);
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
            rc = TOOL_EXIT_INPUT;
    }
    if (rc)
        tool_error("%s expects a list of %s and %s, not \"%s\"", opt, a, b, s);
    free_list(items, n);
    return rc;
}

enum {
    OPT_DEVICES = TOOL_OPT_FIRST_TOOL,
    OPT_BATCHES,
    OPT_PRECISIONS,
    OPT_GEMM_MODES,
    OPT_TOLERANCE,
    OPT_JSON,
    OPT_PLOT,
    OPT_SENSITIVITY,
    OPT_NO_SENSITIVITY,
    OPT_PERTURBATIONS,
};

/* Returns -1 to go on, or the exit status to return (0 for --help and --version, which the
 * caller prints). */
static int parse_args(compare *c, int argc, char **argv)
{
    static const struct option own[] = {
        {"devices", required_argument, NULL, OPT_DEVICES},
        {"batches", required_argument, NULL, OPT_BATCHES},
        {"precisions", required_argument, NULL, OPT_PRECISIONS},
        {"gemm-modes", required_argument, NULL, OPT_GEMM_MODES},
        {"tolerance", required_argument, NULL, OPT_TOLERANCE},
        {"json", no_argument, NULL, OPT_JSON},
        {"plot", required_argument, NULL, OPT_PLOT},
        {"sensitivity", no_argument, NULL, OPT_SENSITIVITY},
        {"no-sensitivity", no_argument, NULL, OPT_NO_SENSITIVITY},
        {"perturbations", required_argument, NULL, OPT_PERTURBATIONS},
        {NULL, 0, NULL, 0},
    };
    struct option longopts[TOOL_LONGOPTS_MAX];
    if (tool_longopts(longopts, own) != 0) {
        tool_error("too many options");
        return TOOL_EXIT_INPUT;
    }
    int started = 0, opt;
    while ((opt = tool_getopt(argc, argv, longopts, &started)) != -1) {
        const char *v = optarg;
        int rc = 0;
        /* --precision and --gemm-precision are one-element --precisions and --gemm-modes */
        if (opt == tool_option_code("precision"))
            opt = OPT_PRECISIONS;
        else if (opt == tool_option_code("gemm_precision"))
            opt = OPT_GEMM_MODES;
        switch (opt) {
        case '?':
            return TOOL_EXIT_INPUT;
        case TOOL_OPT_HELP:
            c->help = 1;
            return TOOL_EXIT_OK;
        case TOOL_OPT_VERSION:
            c->version = 1;
            return TOOL_EXIT_OK;
        case OPT_DEVICES:
        case TOOL_OPT_DEVICE:
            free_list(c->devices, c->ndev);
            c->ndev = 0;
            if ((rc = split_list(v, c->devices, MAX_DEVICES, &c->ndev)) != 0)
                tool_error("--devices expects up to %d device strings separated by commas, not "
                           "\"%s\"",
                           MAX_DEVICES, v);
            break;
        case OPT_BATCHES:
        case TOOL_OPT_BATCH:
            rc = parse_batches(c, v);
            break;
        case OPT_PRECISIONS:
            rc = parse_names("--precisions", v, "fp32", "fp64", c->want_prec);
            break;
        case OPT_GEMM_MODES:
            rc = parse_names("--gemm-modes", v, "strict", "tf32", c->want_mode);
            break;
        case OPT_TOLERANCE: {
            char err[160];
            if ((rc = tool_parse_double(v, "--tolerance", &c->tolerance, err, sizeof err)) != 0)
                tool_error("%s", err);
            else if (!(c->tolerance > 0)) {
                tool_error("--tolerance expects a positive number, not \"%s\"", v);
                rc = TOOL_EXIT_INPUT;
            }
            break;
        }
        case OPT_JSON:
            c->json = 1;
            break;
        case OPT_PLOT:
            c->plot = v;
            break;
        case OPT_SENSITIVITY:
            c->sensitivity = 1;
            break;
        case OPT_NO_SENSITIVITY:
            c->sensitivity = 0;
            break;
        case OPT_PERTURBATIONS: {
            char *end;
            errno = 0;
            const long k = strtol(v, &end, 10);
            if (!*v || *end || errno || k < 1 || k > 1000) {
                tool_error("--perturbations expects an integer in [1, 1000], not \"%s\"", v);
                rc = TOOL_EXIT_INPUT;
            } else {
                c->sopts.num_perturbations = (int)k;
            }
            break;
        }
        case TOOL_OPT_BACKEND:
            tool_error("--backend is not an option of clnode-compare: name devices with "
                       "--devices (see --help)");
            return TOOL_EXIT_INPUT;
        case TOOL_OPT_SAVE:
            /* every row compares the values at the save times and at t1; only the times are
             * the user's to choose */
            if (strncmp(v, "ts:", 3) != 0) {
                tool_error("--save %s is not an option of clnode-compare: it takes only --save "
                           "ts:T1,... (the times it compares at, besides t1)",
                           v);
                return TOOL_EXIT_INPUT;
            }
            rc = tool_problem_opt(&c->pb, opt, v);
            break;
        default:
            rc = tool_problem_opt(&c->pb, opt, v);
            if (rc < 0)
                rc = TOOL_EXIT_INPUT;
        }
        if (rc)
            return rc;
    }
    if (tool_refuse_tape_options(&c->pb, "clnode-compare does not take (it compares forward "
                                         "solves; clnode-solve --grad-out takes it)"))
        return TOOL_EXIT_INPUT;
    return -1;
}

static int default_devices(compare *c)
{
    clnode_device_list *l = NULL;
    if (clnode_device_list_create(tool_log, (void *)prog, &l) != CLNODE_OK) {
        tool_error("cannot list the devices");
        return TOOL_EXIT_RESOURCE;
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
        if (!c->devices[i]) {
            tool_error("out of memory");
            return TOOL_EXIT_RESOURCE;
        }
    return 0;
}

/* Do two messages differ at most in their numbers ("1 of 1 trajectories", "2 of 2 ...")? */
static int same_but_numbers(const char *a, const char *b)
{
    for (;;) {
        const int da = *a >= '0' && *a <= '9', db = *b >= '0' && *b <= '9';
        if (da && db) {
            while ((*a >= '0' && *a <= '9') || *a == '.')
                ++a;
            while ((*b >= '0' && *b <= '9') || *b == '.')
                ++b;
            continue;
        }
        if (*a != *b)
            return 0;
        if (!*a)
            return 1;
        ++a;
        ++b;
    }
}

/* The library's logger: messages of a running row are collected (and printed once each, with
 * their count, when the row is done); others are printed at once. */
static void collect_log(void *user, clnode_log_level level, clnode_log_code code, const char *msg)
{
    compare *c = user;
    if (code == CLNODE_LOG_BUILD) /* a kernel build: as it happens, not in a row's notes */
        tool_log(NULL, level, code, msg);
    if (level != CLNODE_LOG_ERROR && level != CLNODE_LOG_WARN)
        return;
    if (c->cur_row < 0) {
        tool_log(NULL, level, code, msg);
        return;
    }
    row *r = &c->rows[c->cur_row];
    for (size_t i = 0; i < r->nlog; ++i)
        if (r->log[i].level == level && same_but_numbers(r->log[i].text, msg)) {
            ++r->log[i].count;
            return;
        }
    if (r->nlog == MAX_WARN) {
        ++r->log_dropped;
        return;
    }
    logged *l = &r->log[r->nlog++];
    l->level = level;
    snprintf(l->text, sizeof l->text, "%s", msg);
    l->count = 1;
}

/* One line per row: its first message in full, the others by their first clause. */
static void print_row_log(const row *r)
{
    if (!r->nlog)
        return;
    int error = 0;
    for (size_t i = 0; i < r->nlog; ++i)
        error |= r->log[i].level == CLNODE_LOG_ERROR;
    fprintf(stderr, "%s: %s%s %s %s: %s (%ld time%s)", prog, error ? "" : "warning: ", r->spec,
            clnode_precision_name(r->prec), clnode_gemm_mode_name(r->mode), r->log[0].text,
            r->log[0].count, r->log[0].count == 1 ? "" : "s");
    for (size_t i = 1; i < r->nlog; ++i) {
        const char *t = r->log[i].text;
        size_t n = strcspn(t, ":");
        fprintf(stderr, "; %.*s%s (%ld time%s)", n < 60 ? (int)n : 60, t, n < 60 ? "" : "...",
                r->log[i].count, r->log[i].count == 1 ? "" : "s");
    }
    if (r->log_dropped)
        fprintf(stderr, "; %ld more", r->log_dropped);
    fputc('\n', stderr);
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
    c->pb.log = collect_log;
    c->pb.log_user = c;
    double *y0 = NULL;
    size_t batch = 0;
    const long saved_batch = c->pb.batch;
    c->pb.batch = 0;
    int rc = tool_problem_open(&c->pb, ctx, model, &y0, &batch);
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

/* Solves `copies` copies of the base states, saving the steps, t1 and the times ts. */
static clnode_status solve_batch(compare *c, clnode_context *ctx, const clnode_model *model,
                                 clnode_precision prec, clnode_gemm_mode mode, size_t copies,
                                 const double *ts, size_t n_ts, clnode_solution **out)
{
    clnode_solve_options o = c->pb.opts;
    o.precision = prec;
    o.gemm_precision = mode;
    o.save_t0 = 0;
    o.save_t1 = 1;
    o.save_steps = 1;
    o.progress = NULL;
    clnode_problem p = c->pb.prob;
    p.save_ts = ts;
    p.n_save_ts = n_ts;
    size_t B, elems;
    double *y0 = NULL;
    if (!tool_mul_size(copies, c->R, &B) || !tool_mul_size(B, c->N, &elems) ||
        !tool_mul_size(elems, sizeof(double), &elems) || !(y0 = malloc(elems)))
        return CLNODE_ERR_OUT_OF_MEMORY;
    for (size_t k = 0; k < copies; ++k)
        memcpy(y0 + k * c->R * c->N, c->y0base, c->R * c->N * sizeof(double));
    p.batch = B;
    p.y0 = y0;
    clnode_status st = clnode_solve(ctx, model, &o, &p, out);
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
    const int orc = open_problem(c, spec, &ctx, &model);
    if (orc) {
        tool_error("cannot open device %s", spec);
        return orc;
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
            row *r = new_row(c);
            if (!r) {
                tool_error("out of memory");
                clnode_model_destroy(&model);
                clnode_context_destroy(&ctx);
                return TOOL_EXIT_RESOURCE;
            }
            c->cur_row = (long)(r - c->rows);
            snprintf(r->spec, sizeof r->spec, "%s", spec);
            snprintf(r->device_name, sizeof r->device_name, "%s", clnode_context_device(ctx));
            r->prec = prec;
            r->mode = mode;
            progress_msg(c, spec, prec, mode, "probing the GEMM");
            r->probe_status = clnode_probe_gemm(ctx, prec, mode, &r->probe);
            if (r->probe_status == CLNODE_ERR_UNSUPPORTED) {
                add_skipped(c, "  %s tf32: %s (%s)\n", spec, "not available",
                            clnode_context_last_error(ctx));
                --c->nrows;
                c->cur_row = -1;
                continue;
            }
            for (size_t b = 0; b < c->nb; ++b) {
                char what[64];
                snprintf(what, sizeof what, "solving batch %zu", c->batches[b] * c->R);
                progress_msg(c, spec, prec, mode, what);
                r->status[b] = solve_batch(c, ctx, model, prec, mode, c->batches[b], c->ts, c->n_ts,
                                           &r->sol[b]);
                if (r->status[b] != CLNODE_OK)
                    snprintf(r->error[b], sizeof r->error[b], "%s: %.200s",
                             clnode_status_name(r->status[b]), clnode_context_last_error(ctx));
            }
            if (r->status[0] == CLNODE_ERR_UNSUPPORTED && mode == CLNODE_GEMM_TF32) {
                add_skipped(c, "  %s tf32: %s (%s)\n", spec, "not available", r->error[0]);
                for (size_t b = 0; b < c->nb; ++b)
                    clnode_solution_destroy(&r->sol[b]);
                --c->nrows;
                c->cur_row = -1;
                continue;
            }
            if (c->plot && r->status[0] == CLNODE_OK) {
                progress_msg(c, spec, prec, mode, "solving for the plot");
                if (solve_batch(c, ctx, model, prec, mode, 1, c->dense_ts, N_PLOT_TS,
                                &r->plot_sol) != CLNODE_OK)
                    clnode_solution_destroy(&r->plot_sol);
            }
            c->cur_row = -1;
            if (c->progress && r->nlog)
                fprintf(stderr, "\r\033[K");
            print_row_log(r);
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

static const char *probe_class(const row *r);

/* The row against the problem's own sensitivity to rounding: the largest deviation of any of its
 * trajectories from the baseline's reference, its step range and success. A strict row that
 * disagrees by the tolerance rule but lies within the baseline is not failed: the problem, not the
 * device, moves that much under rounding. */
static void judge_sensitivity(compare *c, row *r)
{
    const clnode_sensitivity *b = c->base[r->prec == CLNODE_FP64];
    if (!b)
        return;
    double dev = 0;
    long lo = -1, hi = -1;
    int success = 1, all_complete = 1;
    for (size_t k = 0; k < c->nb; ++k) {
        if (r->status[k] != CLNODE_OK)
            return;
        const clnode_solution *s = r->sol[k];
        for (size_t i = 0; i < clnode_solution_batch(s); ++i) {
            double d = INFINITY;
            int complete; /* a trajectory that ended early: the deviation as far as it ran */
            clnode_sensitivity_deviation(b, s, i, i % c->R, &d, &complete);
            all_complete &= complete;
            if (!(d <= dev))
                dev = d;
            clnode_trajectory_stats st;
            clnode_solution_stats(s, i, &st);
            if (lo < 0 || st.num_steps < lo)
                lo = st.num_steps;
            if (st.num_steps > hi)
                hi = st.num_steps;
            success &= st.result == CLNODE_RESULT_SUCCESS;
        }
    }
    r->base_dev = dev;
    if (clnode_sensitivity_judge(b, CLNODE_SENSITIVITY_ALL, dev, lo, hi, success, &r->sj) !=
        CLNODE_OK)
        return;
    r->judged = 1;
    /* the certificate's rule (clnode-solve --certify) applied to every trajectory of the row */
    r->certified =
        all_complete && (r->sj.verdict != CLNODE_VERDICT_BEYOND || dev <= c->pb.opts.rtol);
    /* an explicit --tolerance stays the rule: the verdict is reported but exempts nothing */
    if (r->fails && r->sj.verdict != CLNODE_VERDICT_BEYOND && !(c->tolerance > 0)) {
        r->fails = 0;
        snprintf(r->verdict, sizeof r->verdict, "%s",
                 r->sj.verdict == CLNODE_VERDICT_ILL_CONDITIONED
                     ? "not blamed: the problem is ill-conditioned"
                     : "differs, within the problem's own sensitivity");
    }
}

static void judge_tolerance(compare *c, row *r);

static void judge(compare *c, row *r)
{
    judge_tolerance(c, r);
    judge_sensitivity(c, r);
}

static void judge_tolerance(compare *c, row *r)
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
    if (c->base[0] || c->base[1]) {
        printf("sensitivity baseline: host, %d solves per precision with y0 perturbed by %g u "
               "max(|y0|, atol/rtol)\n  (random signs, seed %llu), and the unperturbed one; "
               "spread = their largest deviation from the reference\n",
               c->sopts.num_perturbations, c->sopts.perturbation_ulps,
               (unsigned long long)c->sopts.seed);
        for (int pi = 0; pi < 2; ++pi) {
            clnode_sensitivity_stats s;
            if (!c->base[pi] ||
                clnode_sensitivity_get(c->base[pi], CLNODE_SENSITIVITY_ALL, &s) != CLNODE_OK)
                continue;
            s.has_fp64 = 0; /* each precision on its own line */
            tool_print_baseline(stdout, "  ", &s);
            if (s.ill_conditioned) {
                clnode_judgement j;
                clnode_sensitivity_judge(c->base[pi], CLNODE_SENSITIVITY_ALL, 0, s.steps_min,
                                         s.steps_max, 1, &j);
                printf("  => %s\n", j.text);
            }
        }
    }
}

static void print_table(const compare *c)
{
    print_header(c);
    tool_table t;
    const size_t fixed = 4, ncols = fixed + c->nb + 5;
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
    tool_table_set(&t, r0, fixed + c->nb + 3, "vs rounding baseline");
    tool_table_set(&t, r0, fixed + c->nb + 4, "verdict");
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
        char cell[160] = "-";
        if (r->judged) {
            const clnode_gemm_class gc =
                r->probe_status == CLNODE_OK ? r->probe.gemm_class : CLNODE_GEMM_CLASS_UNKNOWN;
            const int reduced = gc != CLNODE_GEMM_CLASS_FP32 && gc != CLNODE_GEMM_CLASS_FP64 &&
                                gc != CLNODE_GEMM_CLASS_UNKNOWN;
            tool_verdict_cell(cell, sizeof cell, &r->sj, reduced ? probe_class(r) : NULL);
        }
        tool_table_set(&t, k, fixed + c->nb + 3, "%s", cell);
        tool_table_set(&t, k, fixed + c->nb + 4, "%s", r->verdict);
    }
    printf("\n");
    tool_table_print(stdout, &t, "");
    tool_table_free(&t);
    if (c->skipped[0])
        printf("\nnot run:\n%s", c->skipped);
    printf("\nverdicts: a row DISAGREES (strict: exit status 4) when a solve fails, a trajectory "
           "does not succeed,\n  it takes more than twice the reference's steps (inflated), or "
           "its deviation exceeds the tolerance;\n  tf32 rows are expected to differ and never "
           "fail the run. Otherwise: \"bit-identical to host\" when\n  steps and saved values "
           "equal the host row of the same precision and mode bit for bit, \"agrees\" when\n  "
           "the deviation is within a tenth of the tolerance, \"differs within tolerance\" up to "
           "the tolerance.\n");
    if (c->base[0] || c->base[1])
        printf("vs rounding baseline: the row's deviation in units of the problem's own spread "
               "under rounding-size\n  perturbations of y0 (agrees up to %gx; BEYOND: the "
               "device's arithmetic changes the solution,\n  naming the GEMM probe's class when it "
               "is reduced precision); a strict row within the baseline is not\n  failed (unless "
               "--tolerance is given): "
               "\"problem ill-conditioned\" when the problem's own spread exceeds the "
               "tolerance.\n",
               c->sopts.slack);
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
    printf(", \"sensitivity\": ");
    if (r->judged) {
        printf("{\"deviation\": ");
        tool_json_num(stdout, r->base_dev);
        printf(", \"certified\": %s, \"judgement\": ", r->certified ? "true" : "false");
        tool_json_judgement(stdout, &r->sj);
        printf("}");
    } else {
        printf("null");
    }
    printf(", \"fails\": %s, \"messages\": [", r->fails ? "true" : "false");
    for (size_t i = 0; i < r->nlog; ++i) {
        printf("%s{\"level\": \"%s\", \"text\": ", i ? ", " : "",
               r->log[i].level == CLNODE_LOG_ERROR ? "error" : "warning");
        tool_json_str(stdout, r->log[i].text);
        printf(", \"count\": %ld}", r->log[i].count);
    }
    printf("]}");
}

static void print_json(const compare *c, int rc)
{
    const clnode_solve_options *o = &c->pb.opts;
    printf("{\"format_version\": %d, \"clnode_version\": ", TOOL_JSON_FORMAT_VERSION);
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
    printf(", \"rule\": \"%s\"}, \"sensitivity\": ",
           c->tolerance > 0 ? "--tolerance" : "100 * max(rtol, 16 u)");
    if (c->base[0] || c->base[1]) {
        printf("{\"perturbations\": %d, \"perturbation_ulps\": ", c->sopts.num_perturbations);
        tool_json_num(stdout, c->sopts.perturbation_ulps);
        printf(", \"seed\": %llu, \"slack\": ", (unsigned long long)c->sopts.seed);
        tool_json_num(stdout, c->sopts.slack);
        for (int pi = 0; pi < 2; ++pi) {
            clnode_sensitivity_stats s;
            if (!c->base[pi] ||
                clnode_sensitivity_get(c->base[pi], CLNODE_SENSITIVITY_ALL, &s) != CLNODE_OK)
                continue;
            printf(", \"%s\": ", pi ? "fp64" : "fp32");
            tool_json_baseline(stdout, &s);
        }
        printf("}");
    } else {
        printf("null");
    }
    printf(", \"rows\": [");
    for (size_t i = 0; i < c->nrows; ++i)
        json_row(c, &c->rows[i], i == 0);
    printf("\n], \"not_run\": ");
    tool_json_str(stdout, c->skipped);
    printf(", \"exit_status\": %d}\n", rc);
}

/* ---- the plot ---- */

/* The relative deviation of one state from the reference's, as in kind_dev. */
static double point_dev(const compare *c, const double *y, const double *ref)
{
    double num = 0, den = 0;
    for (size_t j = 0; j < c->N; ++j) {
        const double d = fabs(y[j] - ref[j]);
        if (!(d <= num))
            num = isnan(d) ? INFINITY : d;
        den = fmax(den, fabs(ref[j]));
    }
    return num / (den + c->pb.opts.atol / c->pb.opts.rtol);
}

static void json_array(FILE *f, const double *v, size_t n, size_t stride, clnode_precision p)
{
    fputc('[', f);
    for (size_t k = 0; k < n; ++k) {
        fputs(k ? ", " : "", f);
        tool_json_num_p(f, v[k * stride], p);
    }
    fputc(']', f);
}

/* The plot's data file (tools/clnode-compare/schema.md, "The plot's data file"). */
static void write_plot_json(const compare *c, FILE *f)
{
    const clnode_solve_options *o = &c->pb.opts;
    char title[768];
    snprintf(title, sizeof title, "%s, %s, rtol %g, atol %g, trajectory 0", c->model_desc,
             o->method->name, o->rtol, o->atol);
    fprintf(f, "{\"format_version\": %d, \"title\": ", TOOL_JSON_FORMAT_VERSION);
    tool_json_str(f, title);
    fprintf(f, ", \"dim\": %zu, \"t0\": ", c->N);
    tool_json_num(f, o->t0);
    fprintf(f, ", \"t1\": ");
    tool_json_num(f, o->t1);
    fprintf(f, ", \"batches\": [");
    for (size_t b = 0; b < c->nb; ++b)
        fprintf(f, "%s%zu", b ? ", " : "", c->batches[b] * c->R);
    clnode_trajectory_stats rs;
    clnode_solution_stats(c->ref, 0, &rs);
    fprintf(f, "], \"reference\": {\"label\": \"host fp64 strict\", \"num_steps\": %ld}",
            rs.num_steps);
    fprintf(f, ", \"rows\": [");
    size_t nref = 0;
    const double *tref, *yref;
    clnode_solution_saved(c->ref_dense, 0, CLNODE_SAVE_TS, &nref, &tref, &yref);
    for (size_t i = 0; i < c->nrows; ++i) {
        const row *r = &c->rows[i];
        char label[192];
        snprintf(label, sizeof label, "%s %s %s", r->spec, clnode_precision_name(r->prec),
                 clnode_gemm_mode_name(r->mode));
        fprintf(f, "%s\n {\"label\": ", i ? "," : "");
        tool_json_str(f, label);
        fprintf(f, ", \"device\": ");
        tool_json_str(f, r->spec);
        fprintf(f, ", \"precision\": \"%s\", \"gemm_precision\": \"%s\", \"probe_class\": ",
                clnode_precision_name(r->prec), clnode_gemm_mode_name(r->mode));
        tool_json_str(f, probe_class(r));
        fprintf(f, ", \"verdict\": ");
        tool_json_str(f, r->verdict);
        fprintf(f, ", \"fails\": %s, \"is_reference\": %s, \"tolerance\": ",
                r->fails ? "true" : "false", r->is_reference ? "true" : "false");
        tool_json_num(f, row_tolerance(c, r->prec));
        fprintf(f, ", \"spread\": "); /* the problem's own, at the row's precision */
        clnode_sensitivity_stats bs;
        if (c->base[r->prec == CLNODE_FP64] &&
            clnode_sensitivity_get(c->base[r->prec == CLNODE_FP64], CLNODE_SENSITIVITY_ALL, &bs) ==
                CLNODE_OK)
            tool_json_num(f, fmax(bs.spread, bs.floor));
        else
            fputs("null", f);
        fprintf(f, ", \"max_rel_dev\": ");
        tool_json_num(f, r->max_dev);
        fprintf(f, ", \"steps_per_batch\": [");
        for (size_t b = 0; b < c->nb; ++b) {
            if (r->status[b] == CLNODE_OK)
                fprintf(f, "%s%ld", b ? ", " : "", r->steps_max[b]);
            else
                fprintf(f, "%snull", b ? ", " : "");
        }
        fputc(']', f);
        if (r->plot_sol) {
            size_t n = 0;
            const double *ts, *ys;
            clnode_solution_saved(r->plot_sol, 0, CLNODE_SAVE_TS, &n, &ts, &ys);
            if (n > nref)
                n = nref;
            fprintf(f, ", \"dev_t\": ");
            json_array(f, tref, n, 1, CLNODE_FP64);
            fprintf(f, ", \"rel_dev\": [");
            for (size_t k = 0; k < n; ++k) {
                fputs(k ? ", " : "", f);
                tool_json_num(f, point_dev(c, ys + k * c->N, yref + k * c->N));
            }
            clnode_solution_saved(r->plot_sol, 0, CLNODE_SAVE_STEPS, &n, &ts, &ys);
            fprintf(f, "], \"step_t\": ");
            json_array(f, ts, n, 1, r->prec);
            fprintf(f, ", \"step_dt\": [");
            for (size_t k = 0; k < n; ++k) {
                fputs(k ? ", " : "", f);
                tool_json_num_p(f, fabs(ts[k] - (k ? ts[k - 1] : o->t0)), r->prec);
            }
            fputc(']', f);
        }
        fputc('}', f);
    }
    fprintf(f, "\n]}\n");
}

/* Runs python3 with the arguments; returns its exit status (127: not run). */
static int run_python(char *const args[])
{
    pid_t pid;
    const int err = posix_spawnp(&pid, "python3", NULL, NULL, args, environ);
    if (err != 0) {
        tool_error("cannot run python3: %s", strerror(err));
        return 127;
    }
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0)
        if (errno != EINTR)
            return 127;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 127;
}

/* The plot script: $CLNODE_PLOT_SCRIPT if set; the source tree's when this executable runs from
 * its build directory; else the installed one, found from the executable's prefix
 * (PREFIX/BINDIR/clnode-compare -> PREFIX/DATADIR/clnode/plot_compare.py, or PREFIX/clnode/
 * plot_compare.py where a wheel put it: meson-python installs DATADIR at the environment's root),
 * else the configured install path. */
static const char *plot_script(void)
{
    static char path[PATH_MAX + 64];
    const char *env = getenv("CLNODE_PLOT_SCRIPT");
    if (env && env[0])
        return env;
    char exe[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0'; /* exe: the executable's directory */
            char build[PATH_MAX];
            if (realpath(CLN_BUILD_DIR, build) && strcmp(build, exe) == 0)
                return CLN_SOURCE_PLOT_SCRIPT;
            const size_t el = strlen(exe), bl = strlen(CLN_BINDIR);
            if (CLN_DATADIR[0] != '/' && CLN_BINDIR[0] != '/' && el > bl &&
                exe[el - bl - 1] == '/' && strcmp(exe + el - bl, CLN_BINDIR) == 0) {
                snprintf(path, sizeof path, "%.*s%s/clnode/plot_compare.py", (int)(el - bl), exe,
                         CLN_DATADIR);
                if (access(path, F_OK) != 0)
                    snprintf(path, sizeof path, "%.*sclnode/plot_compare.py", (int)(el - bl), exe);
                return path;
            }
        }
    }
    return CLN_INSTALLED_PLOT_SCRIPT;
}

static int plot_check(void)
{
    char *args[] = {"python3", (char *)plot_script(), "--check", NULL};
    const int rc = run_python(args);
    if (rc == 0)
        return 0;
    if (rc != 2)
        tool_error("cannot run %s (status %d); --plot needs python3 with matplotlib: "
                   "python3 -m pip install matplotlib",
                   plot_script(), rc);
    return TOOL_EXIT_INPUT;
}

/* Refuses a --plot FILE (or its data file FILE.json) that is the same file as an input.
 * Returns 0, 2 or 3. */
static int check_outputs(const compare *c)
{
    if (!c->plot)
        return 0;
    const tool_input in[] = {{"--model", c->pb.model_path}, {"--y0-file", c->pb.y0_file}};
    const size_t len = strlen(c->plot) + 6;
    char *json_path = malloc(len);
    if (!json_path) {
        tool_error("out of memory");
        return TOOL_EXIT_RESOURCE;
    }
    snprintf(json_path, len, "%s.json", c->plot);
    int rc = tool_out_check_inputs("--plot", c->plot, in, 2);
    if (!rc)
        rc = tool_out_check_inputs("--plot (its data file)", json_path, in, 2);
    free(json_path);
    return rc;
}

static int make_plot(const compare *c)
{
    const size_t len = strlen(c->plot) + 6;
    char *json_path = malloc(len);
    if (!json_path) {
        tool_error("out of memory");
        return TOOL_EXIT_RESOURCE;
    }
    snprintf(json_path, len, "%s.json", c->plot);
    tool_out out;
    int rc = tool_out_open(&out, json_path);
    if (!rc) {
        write_plot_json(c, out.f);
        rc = tool_out_commit(&out);
    }
    if (!rc) {
        char *args[] = {"python3", (char *)plot_script(), json_path, (char *)c->plot, NULL};
        const int prc = run_python(args);
        if (prc != 0) {
            tool_error("plotting failed (status %d)", prc);
            rc = TOOL_EXIT_RESOURCE;
        } else {
            fprintf(stderr, "%s: plot written to %s (data: %s)\n", prog, c->plot, json_path);
        }
    }
    free(json_path);
    return rc;
}

/* ---- main ---- */

static double *even_times(double t0, double t1, size_t n)
{
    double *v = malloc(n * sizeof(double));
    for (size_t k = 0; v && k < n; ++k)
        v[k] = k + 1 == n ? t1 : t0 + (t1 - t0) * (double)k / (double)(n - 1);
    return v;
}

/* The host fp64 strict reference. Returns 0, or the exit status: 4 when a reference trajectory
 * does not succeed (nothing can be certified against it). */
static int reference(compare *c)
{
    clnode_context *ctx = NULL;
    clnode_model *model = NULL;
    int rc = open_problem(c, "host", &ctx, &model);
    if (rc)
        return rc;
    snprintf(c->ref_device, sizeof c->ref_device, "%s", clnode_context_device(ctx));
    snprintf(c->model_desc, sizeof c->model_desc, "%s (%zu layers, dim %zu, %s)",
             c->pb.model_path ? c->pb.model_path : "seed model", clnode_model_num_layers(model),
             c->N, clnode_activation_name(clnode_model_activation(model)));
    if (!c->ts) {
        c->n_ts = N_DEFAULT_TS;
        if (!(c->ts = even_times(c->pb.opts.t0, c->pb.opts.t1, c->n_ts)))
            goto oom;
    }
    if (c->plot && !(c->dense_ts = even_times(c->pb.opts.t0, c->pb.opts.t1, N_PLOT_TS)))
        goto oom;
    progress_msg(c, "host", CLNODE_FP64, CLNODE_GEMM_STRICT, "reference");
    clnode_status st =
        solve_batch(c, ctx, model, CLNODE_FP64, CLNODE_GEMM_STRICT, 1, c->ts, c->n_ts, &c->ref);
    if (st == CLNODE_OK && c->plot)
        st = solve_batch(c, ctx, model, CLNODE_FP64, CLNODE_GEMM_STRICT, 1, c->dense_ts, N_PLOT_TS,
                         &c->ref_dense);
    if (st != CLNODE_OK) {
        tool_error("the host fp64 reference failed: %s", clnode_context_last_error(ctx));
        rc = tool_exit_status(st);
    } else {
        for (size_t i = 0; i < c->R; ++i) {
            clnode_trajectory_stats s;
            clnode_solution_stats(c->ref, i, &s);
            if (s.result != CLNODE_RESULT_SUCCESS) {
                tool_error("the host fp64 reference of trajectory %zu ended with %s: nothing "
                           "can be compared with it",
                           i, clnode_result_name(s.result));
                rc = TOOL_EXIT_VERIFY;
            }
        }
    }
    for (int pi = 0; st == CLNODE_OK && !rc && c->sensitivity && pi < 2; ++pi) {
        if (!c->want_prec[pi])
            continue;
        clnode_solve_options o = c->pb.opts;
        o.precision = pi ? CLNODE_FP64 : CLNODE_FP32;
        clnode_problem p = c->pb.prob;
        p.batch = c->R;
        p.y0 = c->y0base;
        p.save_ts = c->ts;
        p.n_save_ts = c->n_ts;
        clnode_sensitivity_options so = c->sopts;
        so.fp64_spread = !pi; /* fp32's baseline also says whether fp64 is well-conditioned */
        progress_msg(c, "host", o.precision, CLNODE_GEMM_STRICT, "sensitivity baseline");
        st = clnode_sensitivity_baseline(ctx, model, &o, &p, &so, &c->base[pi]);
        if (st != CLNODE_OK) {
            tool_error("the sensitivity baseline failed: %s", clnode_context_last_error(ctx));
            rc = tool_exit_status(st);
        }
    }
    clnode_model_destroy(&model);
    clnode_context_destroy(&ctx);
    return rc;
oom:
    tool_error("out of memory");
    clnode_model_destroy(&model);
    clnode_context_destroy(&ctx);
    return TOOL_EXIT_RESOURCE;
}

int main(int argc, char **argv)
{
    tool_prog = prog;
    static compare c;
    tool_problem_defaults(&c.pb);
    c.batches[0] = 1;
    c.batches[1] = 2;
    c.nb = 2;
    c.want_prec[0] = c.want_prec[1] = 1;
    c.want_mode[0] = c.want_mode[1] = 1;
    c.sensitivity = 1;
    clnode_sensitivity_default_options(&c.sopts);
    c.cur_row = -1;
    int rc = parse_args(&c, argc, argv);
    if (rc >= 0) {
        if (c.help)
            usage(stdout);
        if (c.version) {
            tool_print_version();
            printf("plot script: %s\n", plot_script());
        }
        goto done;
    }
    rc = 0;
    c.sopts.tolerance = c.tolerance; /* 0: the same default rule as the rows' tolerance */
    if (c.pb.n_ts) {
        c.ts = c.pb.ts; /* --save ts:... chooses the comparison times */
        c.n_ts = c.pb.n_ts;
        c.pb.ts = NULL;
    }
    c.progress = isatty(STDERR_FILENO);
    if ((rc = check_outputs(&c)) != 0)
        goto done;
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
    size_t warned = 0;
    for (size_t i = 0; i < c.nrows; ++i) {
        judge(&c, &c.rows[i]);
        fails += c.rows[i].fails;
        warned += c.rows[i].nlog > 0;
    }
    rc = fails ? TOOL_EXIT_VERIFY : TOOL_EXIT_OK;
    if (warned)
        fprintf(stderr, "%s: the library logged messages on %zu of %zu rows (above)\n", prog,
                warned, c.nrows);
    if (c.json) {
        print_json(&c, rc);
    } else {
        print_table(&c);
        printf("\n%s: %d strict row%s disagree%s with the reference\n", fails ? "FAIL" : "OK",
               fails, fails == 1 ? "" : "s", fails == 1 ? "s" : "");
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        tool_error("cannot write standard output");
        rc = TOOL_EXIT_RESOURCE;
    }
    if (c.plot) {
        const int prc = make_plot(&c);
        if (prc && !rc)
            rc = prc;
    }
done:
    for (size_t i = 0; i < c.nrows; ++i) {
        for (size_t b = 0; b < MAX_BATCHES; ++b)
            clnode_solution_destroy(&c.rows[i].sol[b]);
        clnode_solution_destroy(&c.rows[i].plot_sol);
    }
    free(c.rows);
    clnode_solution_destroy(&c.ref);
    clnode_solution_destroy(&c.ref_dense);
    clnode_sensitivity_destroy(&c.base[0]);
    clnode_sensitivity_destroy(&c.base[1]);
    free(c.ts);
    free(c.dense_ts);
    free(c.y0base);
    free_list(c.devices, c.ndev);
    tool_problem_free(&c.pb);
    return rc;
}
