/* tool_common.c - messages, exit statuses, the logger, reading a small file whole and number
 * formatting, shared by the command-line tools (tool_common.h). */
#include "tool_common.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
