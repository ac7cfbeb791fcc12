/* args.c - clnode-solve's command line (args.h). */
#include "args.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "clnode/gradient.h"

enum {
    OPT_OUT = TOOL_OPT_FIRST_TOOL,
    OPT_JSON,
    OPT_JSON_POINTS,
    OPT_QUIET,
    OPT_CERTIFY,
    OPT_CERTIFY_FRACTION,
    OPT_CERTIFY_SEED,
    OPT_T0_FILE,
    OPT_T1_FILE,
    OPT_DT0_FILE,
    OPT_ARGS_FILE,
    OPT_IN,
    OPT_RAGGED,
    OPT_RESUME,
    OPT_CHUNK_SIZE,
    OPT_TS_FILE,
    OPT_COTANGENTS,
    OPT_GRAD_OUT
};

/* Standard input is one stream: one input option may read it. Returns 0, or -1 after an error
 * naming the two options. */
static int stdin_once(const solve_args *a)
{
    const struct {
        const char *opt, *path;
    } in[] = {{"--y0-file", a->pb.y0_file},  {"--t0-file", a->t0_file},
              {"--t1-file", a->t1_file},     {"--dt0-file", a->dt0_file},
              {"--args-file", a->args_file}, {"--in", a->in_path},
              {"--ts-file", a->ts_file},     {"--cotangents", a->cot_path}};
    const char *first_stdin = NULL;
    for (size_t k = 0; k < sizeof in / sizeof in[0]; ++k) {
        if (!in[k].path || strcmp(in[k].path, "-") != 0)
            continue;
        if (first_stdin) {
            tool_error("%s - and %s - both name standard input, which only one option can read",
                       first_stdin, in[k].opt);
            return -1;
        }
        first_stdin = in[k].opt;
    }
    return 0;
}

/* --certify-fraction X: X in (0, 1]. Returns -1 (go on), or 2 after an error naming it. */
static int certify_fraction_opt(solve_args *a, const char *arg)
{
    char err[256];
    double x;
    if (tool_parse_double(arg, "--certify-fraction", &x, err, sizeof err) != 0 ||
        !(x > 0 && x <= 1)) {
        tool_error("--certify-fraction expects a number in (0, 1], not \"%s\"", arg);
        return TOOL_EXIT_INPUT;
    }
    a->certify_opts.fraction = x;
    a->certify = 1;
    return -1;
}

/* --certify-seed N: a non-negative decimal integer. Returns -1 (go on), or 2 after an error. */
static int certify_seed_opt(solve_args *a, const char *arg)
{
    char *end;
    errno = 0;
    const unsigned long long v = strtoull(arg, &end, 10);
    if (!*arg || *end || errno || arg[0] == '-') {
        tool_error("--certify-seed expects a non-negative integer, not \"%s\"", arg);
        return TOOL_EXIT_INPUT;
    }
    a->certify_opts.seed = v;
    a->certify = 1;
    return -1;
}

/* --chunk-size N: a positive decimal integer. Returns -1 (go on), or 2 after an error. */
static int chunk_size_opt(solve_args *a, const char *arg)
{
    char *end;
    errno = 0;
    const long v = strtol(arg, &end, 10);
    if (!*arg || *end || errno || v < 1) {
        tool_error("--chunk-size expects a positive integer, not \"%s\"", arg);
        return TOOL_EXIT_INPUT;
    }
    a->chunk_size = v;
    return -1;
}

/* One option `c` with its argument `arg` (getopt's optarg). Returns -1 to go on, or the exit
 * status to stop with (0 after --help and --version, which set their flag). */
static int solve_option(solve_args *a, int c, const char *arg)
{
    switch (c) {
    case '?':
        return TOOL_EXIT_INPUT;
    case TOOL_OPT_HELP:
        a->help = 1;
        return TOOL_EXIT_OK;
    case TOOL_OPT_VERSION:
        a->version = 1;
        return TOOL_EXIT_OK;
    case OPT_OUT:
        a->out_path = arg;
        return -1;
    case OPT_JSON:
        a->json = 1;
        return -1;
    case OPT_T0_FILE:
        a->t0_file = arg;
        return -1;
    case OPT_T1_FILE:
        a->t1_file = arg;
        return -1;
    case OPT_DT0_FILE:
        a->dt0_file = arg;
        return -1;
    case OPT_ARGS_FILE:
        a->args_file = arg;
        return -1;
    case OPT_TS_FILE: /* saves the times as --save ts: does, in place of the default t1 */
        a->ts_file = arg;
        if (!a->pb.save_given) {
            a->pb.save_given = 1;
            a->pb.opts.save_t0 = a->pb.opts.save_t1 = a->pb.opts.save_steps = 0;
        }
        return -1;
    case OPT_IN:
        a->in_path = arg;
        return -1;
    case OPT_RAGGED:
        a->ragged = 1;
        return -1;
    case OPT_JSON_POINTS:
        a->json_points = 1;
        return -1;
    case OPT_QUIET:
        a->quiet = tool_quiet = 1;
        return -1;
    case OPT_CERTIFY:
        a->certify = 1;
        return -1;
    case OPT_CERTIFY_FRACTION:
        return certify_fraction_opt(a, arg);
    case OPT_CERTIFY_SEED:
        return certify_seed_opt(a, arg);
    case OPT_RESUME:
        a->resume = 1;
        return -1;
    case OPT_CHUNK_SIZE:
        return chunk_size_opt(a, arg);
    case OPT_COTANGENTS:
        a->cot_path = arg;
        return -1;
    case OPT_GRAD_OUT:
        a->grad_path = arg;
        return -1;
    default: {
        a->t0_given |= c == tool_option_code("t0");
        a->t1_given |= c == tool_option_code("t1");
        a->dt0_given |= c == tool_option_code("dt0");
        const int rc = tool_problem_opt(&a->pb, c, arg);
        if (rc)
            return rc < 0 ? TOOL_EXIT_INPUT : rc;
        return -1;
    }
    }
}

/* --cotangents and --grad-out: both or neither, G a .npz file, COT a .npy or .npz, not with
 * --chunk-size whole blocks; --keep-tape and --checkpoint-every only with them, --no-keep-tape
 * never. Returns -1 (they agree), or 2 after an error naming them. */
static int check_gradient(const solve_args *a)
{
    const int keep = tool_problem_given(&a->pb, "keep_tape"),
              every = tool_problem_given(&a->pb, "checkpoint_every");
    if (!a->cot_path && !a->grad_path && ((keep && a->pb.opts.keep_tape) || every)) {
        tool_error("%s needs --cotangents and --grad-out: clnode-solve keeps the solve's tape "
                   "only for the gradient",
                   every ? "--checkpoint-every" : "--keep-tape");
        return TOOL_EXIT_INPUT;
    }
    if ((a->cot_path || a->grad_path) && keep && !a->pb.opts.keep_tape) {
        tool_error("--no-keep-tape contradicts --cotangents and --grad-out: the reverse pass goes "
                   "back through the tape the solve keeps");
        return TOOL_EXIT_INPUT;
    }
    if (!a->cot_path != !a->grad_path) {
        tool_error("%s needs %s", a->cot_path ? "--cotangents" : "--grad-out",
                   a->cot_path
                       ? "--grad-out G.npz (where the gradient goes)"
                       : "--cotangents COT.npy|COT.npz (the cotangents of the saved values)");
        return TOOL_EXIT_INPUT;
    }
    if (!a->grad_path)
        return -1;
    if (solve_out_format(a->grad_path) != SOLVE_OUT_NPZ) {
        tool_error("--grad-out %s: the gradient is written as FILE.npz", a->grad_path);
        return TOOL_EXIT_INPUT;
    }
    if (strcmp(a->cot_path, "-") != 0 && solve_out_format(a->cot_path) == SOLVE_OUT_CSV) {
        tool_error("--cotangents %s: give FILE.npy or FILE.npz", a->cot_path);
        return TOOL_EXIT_INPUT;
    }
    if (a->chunk_size % CLNODE_GRADIENT_BLOCK != 0) {
        tool_error("--chunk-size %ld: with --grad-out a chunk is whole blocks of %d trajectories "
                   "(the parameters' sum is taken block by block): give a multiple of %d",
                   a->chunk_size, CLNODE_GRADIENT_BLOCK, CLNODE_GRADIENT_BLOCK);
        return TOOL_EXIT_INPUT;
    }
    if (a->out_path && strcmp(a->out_path, a->grad_path) == 0) {
        tool_error("--out and --grad-out both name %s", a->grad_path);
        return TOOL_EXIT_INPUT;
    }
    return -1;
}

/* The options that need or exclude one another, once all are read. Returns -1 (they agree), or
 * 2 after an error naming them. */
static int check_combinations(const solve_args *a)
{
    if (a->json_points && !a->json) {
        tool_error("--json-points needs --json");
        return TOOL_EXIT_INPUT;
    }
    if (a->json && a->out_path && strcmp(a->out_path, "-") == 0) {
        tool_error("--json and --out - would both write to standard output");
        return TOOL_EXIT_INPUT;
    }
    static const struct {
        const char *scalar, *file;
    } both[] = {{"--t0", "--t0-file"}, {"--t1", "--t1-file"}, {"--dt0", "--dt0-file"}};
    const int given[3][2] = {{a->t0_given, a->t0_file != NULL},
                             {a->t1_given, a->t1_file != NULL},
                             {a->dt0_given, a->dt0_file != NULL}};
    for (int k = 0; k < 3; ++k)
        if (given[k][0] && given[k][1]) {
            tool_error("give either %s or %s, not both", both[k].scalar, both[k].file);
            return TOOL_EXIT_INPUT;
        }
    if (a->ts_file && a->pb.n_ts) {
        tool_error("give either --save ts:LIST (one list of save times shared by the batch) or "
                   "--ts-file %s (a list per trajectory), not both",
                   a->ts_file);
        return TOOL_EXIT_INPUT;
    }
    if (stdin_once(a) != 0)
        return TOOL_EXIT_INPUT;
    const int fmt = solve_out_format(a->out_path);
    if (a->ragged && fmt != SOLVE_OUT_NPZ) {
        tool_error("--ragged needs --out FILE.npz (the offsets of each trajectory's points)");
        return TOOL_EXIT_INPUT;
    }
    if (a->resume && (!a->out_path || strcmp(a->out_path, "-") == 0)) {
        tool_error("--resume needs --out FILE (its progress record is kept beside FILE)");
        return TOOL_EXIT_INPUT;
    }
    return check_gradient(a);
}

int solve_args_parse(solve_args *a, int argc, char **argv)
{
    static const struct option own[] = {
        {"out", required_argument, NULL, OPT_OUT},
        {"json", no_argument, NULL, OPT_JSON},
        {"json-points", no_argument, NULL, OPT_JSON_POINTS},
        {"quiet", no_argument, NULL, OPT_QUIET},
        {"certify", no_argument, NULL, OPT_CERTIFY},
        {"certify-fraction", required_argument, NULL, OPT_CERTIFY_FRACTION},
        {"certify-seed", required_argument, NULL, OPT_CERTIFY_SEED},
        {"t0-file", required_argument, NULL, OPT_T0_FILE},
        {"t1-file", required_argument, NULL, OPT_T1_FILE},
        {"dt0-file", required_argument, NULL, OPT_DT0_FILE},
        {"args-file", required_argument, NULL, OPT_ARGS_FILE},
        {"ts-file", required_argument, NULL, OPT_TS_FILE},
        {"in", required_argument, NULL, OPT_IN},
        {"ragged", no_argument, NULL, OPT_RAGGED},
        {"resume", no_argument, NULL, OPT_RESUME},
        {"chunk-size", required_argument, NULL, OPT_CHUNK_SIZE},
        {"cotangents", required_argument, NULL, OPT_COTANGENTS},
        {"grad-out", required_argument, NULL, OPT_GRAD_OUT},
        {NULL, 0, NULL, 0},
    };
    struct option longopts[TOOL_LONGOPTS_MAX];
    if (tool_longopts(longopts, own) != 0) {
        tool_error("too many options");
        return TOOL_EXIT_INPUT;
    }
    memset(a, 0, sizeof *a);
    tool_problem_defaults(&a->pb);
    clnode_certify_default_options(&a->certify_opts);
    int started = 0;
    for (;;) {
        const int c = tool_getopt(argc, argv, longopts, &started);
        if (c == -1)
            return check_combinations(a);
        const int rc = solve_option(a, c, optarg);
        if (rc != -1)
            return rc;
    }
}

int solve_out_format(const char *path)
{
    const size_t n = path ? strlen(path) : 0;
    if (n > 4 && strcmp(path + n - 4, ".npz") == 0)
        return SOLVE_OUT_NPZ;
    if (n > 4 && strcmp(path + n - 4, ".npy") == 0)
        return SOLVE_OUT_NPY;
    return SOLVE_OUT_CSV;
}

void solve_args_free(solve_args *a)
{
    tool_problem_free(&a->pb);
}
