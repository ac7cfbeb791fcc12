/* tool_common.c - messages, exit statuses, option parsing, the y0 and list parsers, loading and
 * number formatting shared by the command-line tools (output files: tool_out.c). */
#include "tool_common.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "npy.h"

const char *tool_prog = "clnode";

const char tool_exit_help[] =
    "Exit status (the same for every clnode tool):\n"
    "  0  success\n"
    "  1  the run completed, but some trajectory did not succeed (max_steps_reached,\n"
    "     dt_min_reached, nonfinite, precision_floor)\n"
    "  2  bad input: options, files, a device string that names no device here, a precision or\n"
    "     GEMM mode the device lacks, --precision-guard refuse refusing the tolerance\n"
    "  3  resource or device failure: out of memory (sizes that overflow included), a device or\n"
    "     driver error, an output that could not be written\n"
    "  4  a verification failed (clnode-compare: a strict row disagrees with the reference, or\n"
    "     the reference itself could not be computed)\n";

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

void tool_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", tool_prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int tool_exit_status(clnode_status st)
{
    switch (st) {
    case CLNODE_OK:
        return TOOL_EXIT_OK;
    case CLNODE_ERR_INVALID_ARGUMENT:
    case CLNODE_ERR_IO:
    case CLNODE_ERR_BAD_MODEL:
    case CLNODE_ERR_NONFINITE_INPUT:
    case CLNODE_ERR_UNSUPPORTED:
    case CLNODE_ERR_NO_DEVICE:
    case CLNODE_ERR_NO_FP64:
    case CLNODE_ERR_PRECISION:
        return TOOL_EXIT_INPUT;
    default:
        return TOOL_EXIT_RESOURCE;
    }
}

void tool_print_version(void)
{
    printf("%s %s (library %s)\n", tool_prog, CLNODE_VERSION_STRING, clnode_version_string());
}

double tool_now(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int tool_quiet;

void tool_log(void *user, clnode_log_level level, clnode_log_code code, const char *msg)
{
    const char *prog = user ? (const char *)user : tool_prog;
    if (level == CLNODE_LOG_ERROR || level == CLNODE_LOG_WARN)
        fprintf(stderr, "%s: %s%s\n", prog, level == CLNODE_LOG_ERROR ? "" : "warning: ", msg);
    else if (code == CLNODE_LOG_BUILD && !tool_quiet) {
        fprintf(stderr, "%s: %s\n", prog, msg);
        fflush(stderr);
    }
}

void tool_log_options(clnode_context_options *co, const char *device, clnode_log_fn log, void *user)
{
    clnode_context_default_options(co);
    co->device = device;
    co->log = log;
    co->log_user = user;
    co->log_level = CLNODE_LOG_INFO;
}

/* ---- parsers ---- */

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Copies token [p, e) for a message: at most 40 characters, non-printable ones as '?'. */
static const char *show(char *buf, const char *p, const char *e)
{
    size_t n = (size_t)(e - p), k = 0;
    for (; k < n && k < 40; ++k)
        buf[k] = p[k] >= 0x20 && p[k] < 0x7f ? p[k] : '?';
    if (n > 40) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k] = '\0';
    return buf;
}

enum {
    TOK_EMPTY,
    TOK_NUMBER,
    TOK_TEXT,
    TOK_NOMEM
};

/* Classifies token [*p, *e) (blanks around it trimmed in place): empty, a number (strtod takes
 * all of it: nan and inf included, value in *v) or text. */
static int token(const char **p, const char **e, double *v)
{
    const char *a = *p, *b = *e;
    while (a < b && is_blank(*a))
        ++a;
    while (b > a && is_blank(b[-1]))
        --b;
    *p = a;
    *e = b;
    if (a == b)
        return TOK_EMPTY;
    const size_t len = (size_t)(b - a);
    char small[128], *buf = small;
    if (len >= sizeof small && !(buf = malloc(len + 1)))
        return TOK_NOMEM;
    memcpy(buf, a, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    *v = strtod(buf, &end);
    const int r = end == buf + len ? TOK_NUMBER : TOK_TEXT;
    if (buf != small)
        free(buf);
    return r;
}

int tool_parse_double(const char *s, const char *what, double *out, char *err, size_t errcap)
{
    const char *p = s, *e = s + strlen(s);
    char b[48];
    double v = 0;
    const int k = token(&p, &e, &v);
    if (k == TOK_NOMEM) {
        snprintf(err, errcap, "out of memory");
        return TOOL_EXIT_RESOURCE;
    }
    if (k != TOK_NUMBER || !isfinite(v)) {
        snprintf(err, errcap, "%s expects a finite number, not \"%s\"", what, show(b, p, e));
        return TOOL_EXIT_INPUT;
    }
    *out = v;
    return 0;
}

/* Field k (1-based) of a list or line: a finite number, or a message. */
static int field(const char *p, const char *e, const char *where, size_t k, double *out, char *err,
                 size_t errcap)
{
    char b[48];
    double v = 0;
    switch (token(&p, &e, &v)) {
    case TOK_NOMEM:
        snprintf(err, errcap, "out of memory");
        return TOOL_EXIT_RESOURCE;
    case TOK_EMPTY:
        snprintf(err, errcap, "%s: field %zu is empty", where, k);
        return TOOL_EXIT_INPUT;
    case TOK_TEXT:
        snprintf(err, errcap, "%s: field %zu, \"%s\", is not a number", where, k, show(b, p, e));
        return TOOL_EXIT_INPUT;
    default:
        if (!isfinite(v)) {
            snprintf(err, errcap, "%s: field %zu, \"%s\", is not finite", where, k, show(b, p, e));
            return TOOL_EXIT_INPUT;
        }
        *out = v;
        return 0;
    }
}

int tool_parse_list(const char *s, const char *what, double **out, size_t *n, char *err,
                    size_t errcap)
{
    size_t count = 1;
    for (const char *p = s; *p; ++p)
        count += *p == ',';
    size_t bytes;
    double *v = tool_mul_size(count, sizeof(double), &bytes) ? malloc(bytes) : NULL;
    if (!v) {
        snprintf(err, errcap, "out of memory");
        return TOOL_EXIT_RESOURCE;
    }
    const char *p = s;
    for (size_t k = 0; k < count; ++k) {
        const char *e = p + strcspn(p, ",");
        const int rc = field(p, e, what, k + 1, &v[k], err, errcap);
        if (rc) {
            free(v);
            return rc;
        }
        p = *e ? e + 1 : e;
    }
    free(*out);
    *out = v;
    *n = count;
    return 0;
}

/* Is [p, e) exactly "0,1,...,N-1" (bare integers, blanks allowed around them)? */
static int pandas_labels(const char *p, const char *e, size_t N)
{
    for (size_t k = 0; k < N; ++k) {
        const char *f = p;
        while (f < e && *f != ',')
            ++f;
        const char *a = p, *b = f;
        while (a < b && is_blank(*a))
            ++a;
        while (b > a && is_blank(b[-1]))
            --b;
        char want[24];
        const int len = snprintf(want, sizeof want, "%zu", k);
        if ((size_t)(b - a) != (size_t)len || memcmp(a, want, (size_t)len) != 0)
            return 0;
        if (k + 1 < N && f == e)
            return 0;
        p = f + 1;
        if (k + 1 == N)
            return f == e;
    }
    return 0;
}

void tool_y0_csv_init(tool_y0_csv *c, size_t N, tool_header_mode mode, size_t max_rows)
{
    memset(c, 0, sizeof *c);
    c->N = N;
    c->mode = mode;
    c->max_rows = max_rows;
    c->first = 1;
}

void tool_y0_csv_free(tool_y0_csv *c)
{
    free(c->v);
    c->v = NULL;
}

/* Whether the first content line [a, eol) is a header in auto mode: 1 when its tokens are all
 * text (or empty), 0 when none is, or -1 (message in err) when it mixes numbers with text - a
 * state with a typo, never silently dropped - or out of memory (rc 3 in *rc). */
static int auto_header(const char *a, const char *eol, size_t line_no, char *err, size_t errcap,
                       int *rc)
{
    size_t text_k = 0, numbers = 0, k = 0;
    const char *tp0 = NULL, *te0 = NULL;
    for (const char *f = a; f <= eol; ++k) {
        const char *fe = f;
        while (fe < eol && *fe != ',')
            ++fe;
        const char *tp = f, *te = fe;
        double x;
        const int t = token(&tp, &te, &x);
        if (t == TOK_NOMEM) {
            snprintf(err, errcap, "out of memory");
            *rc = TOOL_EXIT_RESOURCE;
            return -1;
        }
        numbers += t == TOK_NUMBER;
        if (t == TOK_TEXT && !text_k) {
            text_k = k + 1;
            tp0 = tp;
            te0 = te;
        }
        f = fe + 1;
    }
    if (text_k && numbers) {
        char b[48];
        snprintf(err, errcap,
                 "line %zu: field %zu, \"%s\", is not a number, though the line holds numbers "
                 "(a header holds none; --y0-header yes takes the line for one)",
                 line_no, text_k, show(b, tp0, te0));
        *rc = TOOL_EXIT_INPUT;
        return -1;
    }
    return text_k != 0;
}

int tool_y0_csv_line(tool_y0_csv *c, const char *a, const char *eol, char *err, size_t errcap)
{
    const size_t N = c->N;
    ++c->line_no;
    if (N == 0) {
        snprintf(err, errcap, "the model's dimension is 0");
        return TOOL_EXIT_INPUT;
    }
    while (a < eol && is_blank(*a))
        ++a;
    if (a == eol || *a == '#')
        return 0;
    if (c->first) {
        c->first = 0;
        if (c->mode == TOOL_HEADER_YES)
            return 0;
        if (c->mode == TOOL_HEADER_AUTO) {
            int rc = 0;
            const int h = auto_header(a, eol, c->line_no, err, errcap, &rc);
            if (h)
                return h < 0 ? rc : 0;
            if (pandas_labels(a, eol, N)) {
                c->header_note = 1;
                return 0;
            }
        }
    }
    size_t count = 1;
    for (const char *f = a; f < eol; ++f)
        count += *f == ',';
    char where[64];
    snprintf(where, sizeof where, "line %zu", c->line_no);
    if (count != N) {
        snprintf(err, errcap, "%s: %zu values, but the model's state has %zu", where, count, N);
        return TOOL_EXIT_INPUT;
    }
    if (c->rows == c->max_rows) {
        snprintf(err, errcap, "%s: more than %zu states (the batch limit)", where, c->max_rows);
        return TOOL_EXIT_INPUT;
    }
    if (c->rows == c->cap) {
        size_t ncap = c->cap ? 2 * c->cap : 16, bytes, elems;
        double *nv = NULL;
        if (ncap > c->max_rows)
            ncap = c->max_rows;
        if (ncap > c->cap && tool_mul_size(ncap, N, &elems) &&
            tool_mul_size(elems, sizeof(double), &bytes))
            nv = realloc(c->v, bytes);
        if (!nv) {
            snprintf(err, errcap, "out of memory for %zu states of dimension %zu", ncap, N);
            return TOOL_EXIT_RESOURCE;
        }
        c->v = nv;
        c->cap = ncap;
    }
    const char *f = a;
    for (size_t k = 0; k < N; ++k) {
        const char *fe = f;
        while (fe < eol && *fe != ',')
            ++fe;
        const int rc = field(f, fe, where, k + 1, &c->v[c->rows * N + k], err, errcap);
        if (rc)
            return rc;
        f = fe + 1;
    }
    ++c->rows;
    return 0;
}

int tool_y0_csv_end(tool_y0_csv *c, double **out, size_t *rows, int *header_note, char *err,
                    size_t errcap)
{
    if (c->rows == 0) {
        snprintf(err, errcap, "no initial state (%zu line%s)", c->line_no,
                 c->line_no == 1 ? "" : "s");
        return TOOL_EXIT_INPUT;
    }
    *out = c->v;
    *rows = c->rows;
    *header_note = c->header_note;
    c->v = NULL;
    return 0;
}

int tool_parse_y0_text(const char *text, size_t len, size_t N, tool_header_mode mode, double **out,
                       size_t *rows, int *header_note, char *err, size_t errcap)
{
    *header_note = 0;
    if (N == 0) {
        snprintf(err, errcap, "the model's dimension is 0");
        return TOOL_EXIT_INPUT;
    }
    const char *p = text, *end = text + len;
    if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0)
        p += 3;
    tool_y0_csv c;
    tool_y0_csv_init(&c, N, mode, (size_t)TOOL_BATCH_MAX);
    int rc = 0;
    while (p < end && !rc) {
        const char *eol = p;
        while (eol < end && *eol != '\n' && *eol != '\r')
            ++eol;
        const char *next = eol;
        if (next < end)
            next += *next == '\r' && next + 1 < end && next[1] == '\n' ? 2 : 1;
        rc = tool_y0_csv_line(&c, p, eol, err, errcap);
        p = next;
    }
    if (!rc)
        rc = tool_y0_csv_end(&c, out, rows, header_note, err, errcap);
    tool_y0_csv_free(&c);
    return rc;
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
    if (end == s || *end != '\0' || errno == ERANGE || v < lo || v > hi || is_blank(*s)) {
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

int tool_read_file(const char *path, char **out, size_t *len)
{
    const int is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        tool_error("cannot open %s: %s", path, strerror(errno));
        return TOOL_EXIT_INPUT;
    }
    size_t cap = 0, n = 0;
    char *buf = NULL;
    int rc = 0;
    for (;;) {
        if (cap - n < 2) {
            const size_t ncap = cap ? 2 * cap : 65536;
            char *nb = ncap > cap ? realloc(buf, ncap) : NULL;
            if (!nb) {
                tool_error("out of memory reading %s", path);
                rc = TOOL_EXIT_RESOURCE;
                break;
            }
            buf = nb;
            cap = ncap;
        }
        const size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) {
                tool_error("cannot read %s: %s", path, strerror(errno));
                rc = TOOL_EXIT_INPUT;
            }
            break;
        }
    }
    if (!is_stdin)
        fclose(f);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
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

/* ---- numbers and JSON ---- */

/* %g switches to an exponent when the exponent reaches the precision: 10 at one digit is
 * "1e+01". Integral parts below 1e16 are printed in full instead ("10"), which still reads back
 * as the same value (more digits, correctly rounded). */
static const char *plain(char *buf, double x, int d)
{
    if (strchr(buf, 'e') && fabs(x) >= 1.0 && fabs(x) < 1e16) {
        const int p = (int)floor(log10(fabs(x))) + 1;
        if (p > d)
            snprintf(buf, 32, "%.*g", p, x);
    }
    return buf;
}

/* Does x printed with d significant digits read back as x (as a float when single)? */
static int round_trips(char *buf, double x, int d, int single)
{
    const int n = snprintf(buf, 32, "%.*g", d, x); /* at most 24 characters for d <= 17 */
    if (n < 0 || n >= 32)
        return 0;
    return single ? strtof(buf, NULL) == (float)x : strtod(buf, NULL) == x;
}

const char *tool_fmt_num(char *buf, double x, clnode_precision p)
{
    if (isnan(x))
        return strcpy(buf, "nan");
    if (isinf(x))
        return strcpy(buf, x > 0 ? "inf" : "-inf");
    /* 9 digits always round-trip a float, 17 a double; fewer digits round-trip from some count
     * on (the nearest shorter decimal is never closer), so the shortest is found by bisection */
    const int single = p == CLNODE_FP32 && (double)(float)x == x;
    int lo = 1, hi = single ? 9 : 17;
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (round_trips(buf, x, mid, single))
            hi = mid;
        else
            lo = mid + 1;
    }
    snprintf(buf, 32, "%.*g", hi, x);
    return plain(buf, x, hi);
}

void tool_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; ++s) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

void tool_json_num_p(FILE *f, double x, clnode_precision p)
{
    char b[32];
    fputs(isfinite(x) ? tool_fmt_num(b, x, p) : "null", f);
}

void tool_json_num(FILE *f, double x)
{
    tool_json_num_p(f, x, CLNODE_FP64);
}

/* ---- saved points ---- */

const char *tool_kind_name(clnode_save_kind k)
{
    static const char *const names[] = {"t0", "ts", "step", "t1"};
    return (unsigned)k < 4 ? names[k] : "?";
}
