/* args.c - clnode-compare's command line: its --help and its options (compare.h). The fuzz
 * harness (tests/fuzz/) links it as a library. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"

void compare_usage(FILE *f)
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

void compare_free_list(char **items, size_t n)
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
    compare_free_list(items, n);
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
    compare_free_list(items, n);
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
int compare_parse_args(compare *c, int argc, char **argv)
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
            compare_free_list(c->devices, c->ndev);
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
