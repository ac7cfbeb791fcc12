/* tool_common.h - what every part of the command-line tools shares, below the rest of common/:
 * exit statuses and messages, the logger, reading a small file whole, and number and JSON
 * formatting. Above it, one concern each: tool_parse.h (the y0 and list parsers), tool_input.h
 * (the bounded readers of input files), tool_problem.h (the problem options and opening the
 * problem), tool_out.h (output files written atomically). */
#ifndef CLNODE_TOOL_COMMON_H
#define CLNODE_TOOL_COMMON_H

#include <stddef.h>
#include <stdio.h>

#include "clnode.h"

/* ---- exit statuses and messages: the same for every tool ---- */

enum {
    TOOL_EXIT_OK = 0,           /* success */
    TOOL_EXIT_UNSUCCESSFUL = 1, /* the run completed, but some trajectory did not succeed */
    TOOL_EXIT_INPUT = 2,        /* bad input: arguments, files, a device string naming nothing */
    TOOL_EXIT_RESOURCE = 3,     /* out of memory, a device or driver failure, a failed write */
    TOOL_EXIT_VERIFY = 4,       /* a verification failed (clnode-compare) */
};

/* The exit-status paragraph every --help ends with. */
extern const char tool_exit_help[];

/* The program name of every message ("clnode-solve"); set by each tool first. */
extern const char *tool_prog;

/* Prints "PROG: MESSAGE\n" on stderr. */
void tool_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The exit status for a library status: 2 for what the input asked (bad options, model, device
 * string, precision or GEMM mode the device lacks, the precision guard's refusal), 3 for
 * resources and devices. */
int tool_exit_status(clnode_status st);

/* Prints "PROG VERSION (library VERSION)" on stdout (for --version). */
void tool_print_version(void);

/* The batch limit: the most trajectories one solve takes (the library's limit, 2^31 - 1). The
 * readers of y0 and of the per-trajectory arrays stop at it. */
#define TOOL_BATCH_MAX 2147483647L

/* Overflow-checked size arithmetic: 1 on success, 0 when a * b (a + b) does not fit. */
static inline int tool_mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > (size_t)-1 / a)
        return 0;
    *out = a * b;
    return 1;
}
/* ---- other files ---- */

/* Reads a whole file ("-": stdin) into a new NUL-terminated buffer, without bound: for the tools'
 * own small files (a progress record's manifest), not for inputs. Returns 0, 2 or 3 after
 * printing an error. */
int tool_read_file(const char *path, char **out, size_t *len);

/* Logger printing warnings and errors to stderr with the program name (user, or tool_prog when
 * NULL) as prefix, and the kernel builds (CLNODE_LOG_BUILD: what a device compiles, then how
 * long it took) unless tool_quiet. A context whose logger it is (or forwards to it) is created
 * with log_level CLNODE_LOG_INFO (tool_log_options), so that the builds reach it. */
void tool_log(void *user, clnode_log_level level, clnode_log_code code, const char *msg);

/* Set by --quiet: tool_log prints no kernel builds. */
extern int tool_quiet;

/* Context options for tool_log (or a logger that forwards the builds to it): the defaults with
 * `device`, the logger, its user and log_level CLNODE_LOG_INFO. */
void tool_log_options(clnode_context_options *co, const char *device, clnode_log_fn log,
                      void *user);

double tool_now(void);

/* ---- numbers and JSON ---- */

/* The shortest decimal form of x that reads back as the same value in precision p (a value of
 * an fp32 solve, exactly a float, prints as a float: 0.02, not 0.019999999552965164). Non-finite
 * values print as nan, inf, -inf. buf holds at least 32 characters; returns buf. */
const char *tool_fmt_num(char *buf, double x, clnode_precision p);

/* JSON: a string with escapes, and a number (shortest round trip; null when not finite). */
void tool_json_str(FILE *f, const char *s);
void tool_json_num(FILE *f, double x);
void tool_json_num_p(FILE *f, double x, clnode_precision p);

/* Version of the JSON documents the tools write (every document carries it as
 * "format_version"); raised when a field changes meaning or disappears, not when one is added. */
#define TOOL_JSON_FORMAT_VERSION 1

/* The CSV and JSON name of a kind of saved point: "t0", "ts", "step", "t1". */
const char *tool_kind_name(clnode_save_kind k);

#endif /* CLNODE_TOOL_COMMON_H */
