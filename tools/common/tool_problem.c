/* tool_problem.c - the problem options of the tools, their --help, and opening the problem
 * (tool_problem.h). */
#include "tool_problem.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char tool_y0_help[] =
    "y0 file (--y0-file FILE, \"-\" for stdin): a CSV of initial states, one per line, N\n"
    "  numbers separated by commas (N: the model's dimension), as numpy.savetxt(f, y0,\n"
    "  delimiter=\",\") and pandas.DataFrame(y0).to_csv(f, index=False) write them. Lines end\n"
    "  in \\n, \\r\\n or \\r, hold no NUL and at most 1 MiB + 1 KiB per value; blank lines and\n"
    "  lines starting with '#' are skipped; empty fields and non-finite values are refused.\n"
    "  The first line may be a header (--y0-header auto|yes|no, default auto: a header when\n"
    "  none of its tokens is a number - nan and inf are numbers - or when it is exactly\n"
    "  0,1,...,N-1, the column labels pandas writes, which is said on stderr; a first line\n"
    "  mixing numbers with other tokens is refused). The batch is the number of states, at\n"
    "  most 2147483647 (the batch limit). Files are read as they arrive (a pipe works).\n"
    "  A file that starts with the .npy magic (\\x93NUMPY) or whose name ends in .npy is read\n"
    "  as a NumPy array instead: little-endian float32 or float64, C order, of shape (B, N),\n"
    "  or (N,) for one trajectory (numpy.save(f, y0)); a malformed header is refused.\n";

void tool_print_device_help(FILE *f)
{
    /* the forms and their meanings come from the library's registry of backends, the one place
     * that knows them (and that decides what a string means) */
    fputs("Device strings (default $CLNODE_DEVICE, else host; the library refuses a string that\n"
          "  names no device):\n",
          f);
    const size_t n = clnode_device_help(NULL, 0);
    char *text = malloc(n + 1);
    if (text) {
        clnode_device_help(text, n + 1);
        fputs(text, f);
        free(text);
    }
    fputs("  --backend B is a shorthand: --backend B alone is --device B, --backend B --device X\n"
          "  is --device B:X unless X already starts with B (--backend opencl --device\n"
          "  opencl:pocl is opencl:pocl).\n",
          f);
}

/* ---- problem options ---- */

void tool_problem_defaults(tool_problem *pb)
{
    memset(pb, 0, sizeof *pb);
    clnode_solve_seed_options(&pb->opts);
    clnode_problem_default(&pb->prob);
}

void tool_print_methods(FILE *f)
{
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    for (size_t i = 0; clnode_method_at(i); ++i)
        fprintf(f, "%s%s%s", i ? ", " : "", clnode_method_at(i)->name,
                clnode_method_at(i) == o.method ? " (default)" : "");
}

void tool_problem_free(tool_problem *pb)
{
    free(pb->y0);
    free(pb->ts);
    pb->y0 = NULL;
    pb->ts = NULL;
}

static int opt_double(const char *opt, const char *arg, double *out)
{
    char err[160];
    const int rc = tool_parse_double(arg, opt, out, err, sizeof err);
    if (rc)
        tool_error("%s", err);
    return rc;
}

/* An integer in [lo, hi]; the refusal names the range, and `what` what sets it ("" or e.g.
 * " (the batch limit)"). */
static int opt_long_in(const char *opt, const char *s, long lo, long hi, const char *what,
                       long *out)
{
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE || v < lo || v > hi || tool_is_blank(*s)) {
        tool_error("%s expects an integer in [%ld, %ld]%s, not \"%s\"", opt, lo, hi, what, s);
        return TOOL_EXIT_INPUT;
    }
    *out = v;
    return 0;
}

static int opt_list(const char *opt, const char *arg, double **out, size_t *n)
{
    char err[256];
    const int rc = tool_parse_list(arg, opt, out, n, err, sizeof err);
    if (rc)
        tool_error("%s", err);
    return rc;
}

/* --save ts:LIST appends LIST to the times of the --save ts given before it: --save ts:1
 * --save ts:2 is --save ts:1,2. */
static int opt_save_ts(tool_problem *pb, const char *arg)
{
    double *more = NULL;
    size_t n = 0, bytes;
    if (opt_list("--save ts", arg, &more, &n))
        return TOOL_EXIT_INPUT;
    double *all = tool_mul_size(pb->n_ts + n, sizeof(double), &bytes) && pb->n_ts + n >= n
                      ? realloc(pb->ts, bytes)
                      : NULL;
    if (!all) {
        free(more);
        tool_error("out of memory");
        return TOOL_EXIT_RESOURCE;
    }
    memcpy(all + pb->n_ts, more, n * sizeof(double));
    free(more);
    pb->ts = all;
    pb->n_ts += n;
    return 0;
}

/* Picks one of names[] (NULL-terminated); returns its index or -1 after an error. */
static int opt_choice(const char *opt, const char *arg, const char *const *names)
{
    char all[160] = "";
    for (int k = 0; names[k]; ++k) {
        if (strcmp(arg, names[k]) == 0)
            return k;
        const size_t used = strlen(all);
        snprintf(all + used, sizeof all - used, "%s%s", k ? ", " : "", names[k]);
    }
    tool_error("%s expects one of %s, not \"%s\"", opt, all, arg);
    return -1;
}

/* ---- the solve options of the library's table ---- */

/* Table option i's long name, its name with '-' for '_' ("max-steps"), or with `no` that name
 * after "no-"; NULL past the table. */
static const char *table_long_name_of(size_t i, int no)
{
    static char names[TOOL_LONGOPTS_MAX][2][48];
    const clnode_option_info *in = clnode_solve_option_at(i);
    if (!in || i >= TOOL_LONGOPTS_MAX)
        return NULL;
    char *n = names[i][0];
    snprintf(n, sizeof names[i][0], "%s", in->name);
    for (char *c = n; *c; ++c)
        if (*c == '_')
            *c = '-';
    memcpy(names[i][1], "no-", 3);
    memcpy(names[i][1] + 3, n, strlen(n) + 1 < 45 ? strlen(n) + 1 : 45);
    names[i][1][47] = '\0';
    return names[i][no != 0];
}

static const char *table_long_name(size_t i)
{
    return table_long_name_of(i, 0);
}

int tool_longopts(struct option *out, const struct option *own)
{
    static const struct option problem[] = {
        {"model", required_argument, NULL, TOOL_OPT_MODEL},
        {"batch", required_argument, NULL, TOOL_OPT_BATCH},
        {"y0", required_argument, NULL, TOOL_OPT_Y0},
        {"y0-file", required_argument, NULL, TOOL_OPT_Y0_FILE},
        {"y0-header", required_argument, NULL, TOOL_OPT_Y0_HEADER},
        {"save", required_argument, NULL, TOOL_OPT_SAVE},
        {"backend", required_argument, NULL, TOOL_OPT_BACKEND},
        {"device", required_argument, NULL, TOOL_OPT_DEVICE},
        {"help", no_argument, NULL, TOOL_OPT_HELP},
        {"version", no_argument, NULL, TOOL_OPT_VERSION},
    };
    size_t n = 0;
    for (size_t k = 0; k < sizeof problem / sizeof problem[0]; ++k)
        out[n++] = problem[k];
    for (size_t i = 0; i < clnode_solve_option_count(); ++i) {
        const clnode_option_info *in = clnode_solve_option_at(i);
        const char *name = table_long_name(i);
        if (!name || n + 3 > TOOL_LONGOPTS_MAX)
            return -1;
        if (in->flags & CLNODE_OPTION_SAVE)
            continue;
        const int code = TOOL_OPT_TABLE + 2 * (int)i;
        if (in->type == CLNODE_OPTION_BOOLEAN) {
            out[n++] = (struct option){name, no_argument, NULL, code};
            out[n++] = (struct option){table_long_name_of(i, 1), no_argument, NULL, code + 1};
        } else {
            out[n++] = (struct option){name, required_argument, NULL, code};
        }
    }
    for (size_t k = 0; own && own[k].name; ++k) {
        if (n + 1 >= TOOL_LONGOPTS_MAX)
            return -1;
        out[n++] = own[k];
    }
    out[n] = (struct option){NULL, 0, NULL, 0};
    return 0;
}

int tool_option_code(const char *name)
{
    const clnode_option_info *in = clnode_solve_option_find(name);
    return in ? TOOL_OPT_TABLE + 2 * (int)(in - clnode_solve_option_at(0)) : -1;
}

/* The metavariable of a table option's --help line ("X", "N", "fp32|fp64", "NAME"). */
static void table_metavar(const clnode_option_info *in, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    switch (in->type) {
    case CLNODE_OPTION_REAL:
        snprintf(buf, n, "X");
        break;
    case CLNODE_OPTION_INTEGER:
        snprintf(buf, n, "N");
        break;
    case CLNODE_OPTION_BOOLEAN:
        break;
    case CLNODE_OPTION_CHOICE:
        for (size_t k = 0; k < in->n_choices && used < n; ++k)
            used +=
                (size_t)snprintf(buf + used, n - used, "%s%s", k ? "|" : "", in->choice_names[k]);
        break;
    case CLNODE_OPTION_METHOD:
        for (size_t k = 0; clnode_method_at(k) && used < n; ++k)
            used += (size_t)snprintf(buf + used, n - used, "%s%s", k ? "|" : "",
                                     clnode_method_at(k)->name);
        break;
    }
}

/* ", in [lo, hi]" for a bounded REAL or INTEGER option ("" when it takes any finite number). */
static void table_range(const clnode_option_info *in, char *buf, size_t n)
{
    char lo[40] = "-inf", hi[40] = "inf";
    buf[0] = '\0';
    if (in->min <= -DBL_MAX && in->max >= DBL_MAX)
        return;
    if (in->min > -DBL_MAX)
        tool_fmt_num(lo, in->min, CLNODE_FP64);
    if (in->max < DBL_MAX)
        tool_fmt_num(hi, in->max, CLNODE_FP64);
    snprintf(buf, n, ", in %c%s, %s%c",
             (in->flags & CLNODE_OPTION_MIN_OPEN) || in->min <= -DBL_MAX ? '(' : '[', lo, hi,
             (in->flags & CLNODE_OPTION_MAX_OPEN) || in->max >= DBL_MAX ? ')' : ']');
}

/* Prints `text` from column `col` wrapped at 79 columns, continuation lines indented by 26. */
static void print_wrapped(FILE *f, size_t col, const char *text)
{
    const char *p = text;
    while (*p) {
        const char *e = p;
        const char *last = NULL;
        while (*e && (size_t)(e - p) + col <= 79) {
            if (*e == ' ')
                last = e;
            ++e;
        }
        if (*e && last)
            e = last;
        fprintf(f, "%.*s\n", (int)(e - p), p);
        p = *e == ' ' ? e + 1 : e;
        if (*p) {
            fprintf(f, "%26s", "");
            col = 26;
        }
    }
}

void tool_print_solve_options(FILE *f, const clnode_solve_options *defaults)
{
    for (size_t i = 0; i < clnode_solve_option_count(); ++i) {
        const clnode_option_info *in = clnode_solve_option_at(i);
        const char *name = table_long_name(i);
        if (!name || (in->flags & CLNODE_OPTION_SAVE))
            continue;
        char head[160], meta[96], def[64], line[512];
        table_metavar(in, meta, sizeof meta);
        if (in->type == CLNODE_OPTION_BOOLEAN)
            snprintf(head, sizeof head, "  --%s, --no-%s", name, name);
        else
            snprintf(head, sizeof head, "  --%s %s", name, meta);
        double dv = 0.0;
        if (clnode_solve_option_format(defaults, in->name, def, sizeof def) != CLNODE_OK ||
            clnode_solve_option_get(defaults, in->name, &dv) != CLNODE_OK)
            snprintf(def, sizeof def, "?");
        else if (in->type == CLNODE_OPTION_BOOLEAN)
            snprintf(def, sizeof def, "%s", dv == 0.0 ? "no" : "yes");
        else if (in->type == CLNODE_OPTION_REAL) /* the shortest text of the value */
            tool_fmt_num(def, dv, CLNODE_FP64);
        char range[96] = "";
        if (in->type == CLNODE_OPTION_REAL || in->type == CLNODE_OPTION_INTEGER)
            table_range(in, range, sizeof range);
        snprintf(line, sizeof line, "%s%s (default %s)", in->doc, range, def);
        const size_t w = strlen(head);
        fputs(head, f);
        if (w >= 25) {
            fprintf(f, "\n%26s", "");
            print_wrapped(f, 26, line);
        } else {
            fprintf(f, "%*s", (int)(26 - w), "");
            print_wrapped(f, 26, line);
        }
    }
}

/* Table option `code` (TOOL_OPT_TABLE + ...) with value arg: 0, or 2 after an error. */
static int table_opt(tool_problem *pb, int code, const char *arg)
{
    const size_t i = (size_t)(code - TOOL_OPT_TABLE) / 2;
    const clnode_option_info *in = clnode_solve_option_at(i);
    const char *name = table_long_name(i);
    char msg[320];
    double v = 0.0;
    clnode_status st;
    if (!in || !name)
        return -1;
    if (in->type == CLNODE_OPTION_BOOLEAN) {
        st = clnode_solve_option_set(&pb->opts, in->name, (code - TOOL_OPT_TABLE) % 2 ? 0.0 : 1.0,
                                     msg, sizeof msg);
    } else if (in->type == CLNODE_OPTION_REAL && strcmp(arg, "auto") != 0) {
        /* "auto" goes to the library's parser, which knows the options that take it (dt0) */
        char opt[64];
        snprintf(opt, sizeof opt, "--%s", name);
        if (opt_double(opt, arg, &v))
            return TOOL_EXIT_INPUT;
        st = clnode_solve_option_set(&pb->opts, in->name, v, msg, sizeof msg);
    } else if (in->type == CLNODE_OPTION_INTEGER) {
        char opt[64];
        long x = 0;
        snprintf(opt, sizeof opt, "--%s", name);
        if (opt_long_in(opt, arg, (long)in->min, (long)in->max, "", &x))
            return TOOL_EXIT_INPUT;
        st = clnode_solve_option_set(&pb->opts, in->name, (double)x, msg, sizeof msg);
    } else {
        st = clnode_solve_option_parse(&pb->opts, in->name, arg, msg, sizeof msg);
    }
    if (st != CLNODE_OK) {
        tool_error("--%s: %s", name, msg);
        return TOOL_EXIT_INPUT;
    }
    if (i < TOOL_OPTIONS_MAX)
        pb->given[i] = 1;
    /* dt0 and dt0_auto say the first step together (--dt0 0.05, --dt0 auto, --dt0-auto): the
     * one given, the other is given too, so that a model file's does not join it
     * (tool_settings_apply) */
    const char *pair = strcmp(in->name, "dt0") == 0        ? "dt0_auto"
                       : strcmp(in->name, "dt0_auto") == 0 ? "dt0"
                                                           : NULL;
    for (size_t j = 0; pair && j < clnode_solve_option_count() && j < TOOL_OPTIONS_MAX; ++j)
        if (strcmp(clnode_solve_option_at(j)->name, pair) == 0)
            pb->given[j] = 1;
    return 0;
}

int tool_problem_given(const tool_problem *pb, const char *name)
{
    const clnode_option_info *in = clnode_solve_option_find(name);
    const ptrdiff_t i = in ? in - clnode_solve_option_at(0) : -1;
    return i >= 0 && i < TOOL_OPTIONS_MAX && pb->given[i];
}

int tool_refuse_tape_options(const tool_problem *pb, const char *why)
{
    const char *name = tool_problem_given(pb, "checkpoint_every") ? "--checkpoint-every"
                       : tool_problem_given(pb, "keep_tape") && pb->opts.keep_tape ? "--keep-tape"
                                                                                   : NULL;
    if (!name)
        return 0;
    tool_error("%s keeps a tape for a gradient, which %s", name, why);
    return TOOL_EXIT_INPUT;
}

int tool_problem_opt(tool_problem *pb, int code, const char *arg)
{
    clnode_solve_options *o = &pb->opts;
    int k;
    if (code >= TOOL_OPT_TABLE)
        return table_opt(pb, code, arg);
    switch (code) {
    case TOOL_OPT_MODEL:
        pb->model_path = arg;
        return 0;
    case TOOL_OPT_BATCH:
        return opt_long_in("--batch", arg, 1, TOOL_BATCH_MAX, " (the batch limit)", &pb->batch);
    case TOOL_OPT_Y0:
        return opt_list("--y0", arg, &pb->y0, &pb->y0_len);
    case TOOL_OPT_Y0_FILE:
        pb->y0_file = arg;
        return 0;
    case TOOL_OPT_Y0_HEADER: {
        static const char *const names[] = {"auto", "yes", "no", NULL};
        static const tool_header_mode m[] = {TOOL_HEADER_AUTO, TOOL_HEADER_YES, TOOL_HEADER_NO};
        if ((k = opt_choice("--y0-header", arg, names)) < 0)
            return TOOL_EXIT_INPUT;
        pb->y0_header = m[k];
        return 0;
    }
    case TOOL_OPT_SAVE:
        if (!pb->save_given) {
            pb->save_given = 1;
            o->save_t0 = o->save_t1 = o->save_steps = 0;
        }
        if (strcmp(arg, "steps") == 0)
            o->save_steps = 1;
        else if (strcmp(arg, "t0") == 0)
            o->save_t0 = 1;
        else if (strcmp(arg, "t1") == 0)
            o->save_t1 = 1;
        else if (strncmp(arg, "ts:", 3) == 0) {
            const int rc = opt_save_ts(pb, arg + 3);
            if (rc)
                return rc;
            pb->prob.save_ts = pb->ts;
            pb->prob.n_save_ts = pb->n_ts;
        } else {
            tool_error("--save expects steps, t0, t1 or ts:T1,T2,..., not \"%s\"", arg);
            return TOOL_EXIT_INPUT;
        }
        return 0;
    case TOOL_OPT_BACKEND:
        pb->backend = arg;
        return 0;
    case TOOL_OPT_DEVICE:
        pb->device = arg;
        return 0;
    default:
        return -1;
    }
}

int tool_getopt(int argc, char **argv, const struct option *longopts, int *started)
{
    if (!*started) {
        optind = 0; /* glibc: 0 reinitialises the scan completely */
        opterr = 0;
        *started = 1;
    }
    const int c = getopt_long(argc, argv, ":h", longopts, NULL);
    if (c == -1) {
        if (optind < argc) {
            tool_error("unexpected argument \"%s\" (see --help)", argv[optind]);
            return '?';
        }
        return -1;
    }
    if (c == 'h')
        return TOOL_OPT_HELP;
    const char *a = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
    if (c == ':') {
        tool_error("option %s needs a value", a);
        return '?';
    }
    if (c == '?') {
        if (optopt >= 256 || (optopt && strncmp(a, "--", 2) == 0))
            tool_error("option %s takes no value", a);
        else if (optopt)
            tool_error("unknown option -%c (see --help)", optopt);
        else
            tool_error("unknown or ambiguous option %s (see --help)", a);
        return '?';
    }
    return c;
}

const char *tool_device_string(tool_problem *pb)
{
    if (!pb->backend)
        return pb->device;
    if (!pb->device)
        return pb->backend;
    const size_t n = strlen(pb->backend);
    if (strncmp(pb->device, pb->backend, n) == 0 && (pb->device[n] == ':' || pb->device[n] == '\0'))
        return pb->device;
    snprintf(pb->device_spec, sizeof pb->device_spec, "%s:%s", pb->backend, pb->device);
    return pb->device_spec;
}

int tool_problem_open(tool_problem *pb, clnode_context **ctx, clnode_model **model, double **y0,
                      size_t *batch)
{
    *ctx = NULL;
    *model = NULL;
    *y0 = NULL;
    if (pb->y0_file && pb->y0) {
        tool_error("give either --y0 or --y0-file, not both");
        return TOOL_EXIT_INPUT;
    }
    clnode_context_options co;
    tool_log_options(&co, tool_device_string(pb), pb->log ? pb->log : tool_log,
                     pb->log ? pb->log_user : (void *)tool_prog);
    clnode_status st = clnode_context_create(&co, ctx);
    if (st != CLNODE_OK)
        return tool_exit_status(st); /* the logger printed why */
    st = pb->model_path ? clnode_model_load_safetensors(*ctx, pb->model_path, model)
                        : clnode_model_create_seed(*ctx, model);
    int rc = tool_exit_status(st);
    if (st != CLNODE_OK)
        goto fail;
    const size_t N = clnode_model_dim(*model);
    if (pb->y0_file) {
        size_t rows = 0;
        int note = 0;
        if ((rc = tool_read_y0(pb->y0_file, N, pb->y0_header, y0, &rows, &note)) != 0)
            goto fail;
        if (note && !pb->header_noted++)
            fprintf(stderr,
                    "%s: %s: the first line, 0,1,...,%zu, is taken for pandas' column labels "
                    "(--y0-header no reads it as a state)\n",
                    tool_prog, pb->y0_file, N - 1);
        if (pb->batch && (size_t)pb->batch != rows) {
            tool_error("--batch %ld disagrees with the %zu states of %s", pb->batch, rows,
                       pb->y0_file);
            rc = TOOL_EXIT_INPUT;
            goto fail;
        }
        *batch = rows;
        return 0;
    }
    if (pb->y0 && pb->y0_len != N) {
        tool_error("--y0 has %zu values, but the model's state has %zu", pb->y0_len, N);
        rc = TOOL_EXIT_INPUT;
        goto fail;
    }
    *batch = pb->batch ? (size_t)pb->batch : 1;
    size_t elems;
    if (!tool_mul_size(*batch, N, &elems) || !tool_mul_size(elems, sizeof(double), &elems) ||
        !(*y0 = calloc(*batch * N, sizeof(double)))) {
        tool_error("out of memory: cannot allocate %zu initial states of dimension %zu", *batch, N);
        rc = TOOL_EXIT_RESOURCE;
        goto fail;
    }
    if (pb->y0)
        for (size_t b = 0; b < *batch; ++b)
            memcpy(*y0 + b * N, pb->y0, N * sizeof(double));
    return 0;
fail:
    free(*y0);
    *y0 = NULL;
    clnode_model_destroy(model);
    clnode_context_destroy(ctx);
    return rc ? rc : TOOL_EXIT_INPUT;
}
