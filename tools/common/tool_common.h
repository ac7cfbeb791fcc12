/* tool_common.h - what the command-line tools share: messages and exit statuses, the problem
 * options (getopt_long), the y0 and list parsers, model and y0 loading, output files written
 * atomically, and number and JSON formatting. */
#ifndef CLNODE_TOOL_COMMON_H
#define CLNODE_TOOL_COMMON_H

#include <getopt.h>
#include <stdio.h>

#include "clnode.h"
#include "tool_out.h"

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

/* ---- parsers (pure: no I/O but error messages in err) ---- */

/* A finite number filling all of s (surrounding blanks allowed). Returns 0, or 2 with a message
 * naming `what` in err. */
int tool_parse_double(const char *s, const char *what, double *out, char *err, size_t errcap);

/* "v1,v2,..." into a new array of finite numbers: empty fields are refused. Returns 0, 2 (bad
 * input) or 3 (out of memory), with a message in err. */
int tool_parse_list(const char *s, const char *what, double **out, size_t *n, char *err,
                    size_t errcap);

/* How the first content line of a y0 file is read. */
typedef enum tool_header_mode {
    TOOL_HEADER_AUTO = 0, /* a header if every token is not a number (nan and inf are numbers;
                             a line that mixes numbers with text is refused), or if it is exactly
                             0,1,...,N-1 (pandas' column labels) */
    TOOL_HEADER_YES,      /* the first content line is a header, whatever it holds */
    TOOL_HEADER_NO,       /* every content line is a state */
} tool_header_mode;

/* Parses a y0 CSV text of len bytes (not NUL-terminated): one state of N finite numbers per line,
 * separated by commas; lines end in \n, \r\n or \r, any length; blank lines and lines starting
 * with '#' are skipped; a UTF-8 byte order mark is skipped; empty fields are refused; the first
 * content line may be a header (mode). On success *out holds rows x N values (malloc'ed) and
 * *header_note says whether a numeric line (pandas' labels) was taken for a header. Returns 0, 2
 * or 3 with a message ("line L: ...") in err. */
int tool_parse_y0_text(const char *text, size_t len, size_t N, tool_header_mode mode, double **out,
                       size_t *rows, int *header_note, char *err, size_t errcap);

/* The same parser line by line, for a stream: init, then each line without its ending (the byte
 * order mark already skipped), then end. max_rows: the most states kept (more is an error naming
 * the batch limit); memory grows with the states kept. tool_y0_csv_line returns 0, 2 or 3 with
 * a message in err; tool_y0_csv_end hands over the states (or refuses a file without one). Call
 * tool_y0_csv_free in every case. */
typedef struct tool_y0_csv {
    size_t N, max_rows, line_no, rows, cap;
    tool_header_mode mode;
    double *v;
    int first, header_note;
} tool_y0_csv;
void tool_y0_csv_init(tool_y0_csv *c, size_t N, tool_header_mode mode, size_t max_rows);
int tool_y0_csv_line(tool_y0_csv *c, const char *line, const char *eol, char *err, size_t errcap);
int tool_y0_csv_end(tool_y0_csv *c, double **out, size_t *rows, int *header_note, char *err,
                    size_t errcap);
void tool_y0_csv_free(tool_y0_csv *c);

/* ---- the problem options ---- */

/* Room for the library's table of solve options (flags by table index). */
#define TOOL_OPTIONS_MAX 64

typedef struct tool_problem {
    clnode_solve_options opts;
    clnode_problem prob;    /* the per-trajectory arrays and the save times (batch and y0 are set
                               where the problem is solved) */
    const char *model_path; /* NULL: the built-in seed model */
    const char *backend;    /* NULL: not given */
    const char *device;     /* NULL: not given ($CLNODE_DEVICE, else host) */
    char device_spec[512];
    double *y0; /* --y0 values, or NULL */
    size_t y0_len;
    const char *y0_file;
    tool_header_mode y0_header;
    long batch; /* 0: not given */
    double *ts; /* --save ts: times */
    size_t n_ts;
    int save_given;
    int header_noted;  /* the note on pandas' labels was printed (once per run) */
    clnode_log_fn log; /* NULL: tool_log */
    void *log_user;
    unsigned char given[TOOL_OPTIONS_MAX]; /* by table index: the command line set the option */
    const char *settings_from; /* the model file whose settings apply (tool_settings.h), or NULL */
    char settings_keys[512];   /* the options taken from it, blank-separated ("t1 rtol") */
} tool_problem;

/* getopt_long codes of the problem options (above every character). The solve options of the
 * library's table (clnode_solve_option_at) have codes of their own: TOOL_OPT_TABLE + 2 i for
 * --NAME (a boolean: set it) and TOOL_OPT_TABLE + 2 i + 1 for --no-NAME (a boolean: clear it),
 * NAME the option's name with '-' for '_'. */
enum {
    TOOL_OPT_MODEL = 256,
    TOOL_OPT_BATCH,
    TOOL_OPT_Y0,
    TOOL_OPT_Y0_FILE,
    TOOL_OPT_Y0_HEADER,
    TOOL_OPT_SAVE,
    TOOL_OPT_BACKEND,
    TOOL_OPT_DEVICE,
    TOOL_OPT_HELP,
    TOOL_OPT_VERSION,
    TOOL_OPT_FIRST_TOOL, /* each tool numbers its own options from here */
    TOOL_OPT_TABLE = 4096
};

/* Room for a tool's long options (tool_longopts): the problem's, the table's and its own. */
#define TOOL_LONGOPTS_MAX 192

/* Fills out[TOOL_LONGOPTS_MAX] with the problem options (--model, --batch, --y0, --y0-file,
 * --y0-header, --save, --backend, --device, --help, --version), the solve options of the
 * library's table (but the CLNODE_OPTION_SAVE ones, which --save sets) and then `own` (up to its
 * entry with a NULL name), and the terminating entry. Returns 0, or -1 when they do not fit. */
int tool_longopts(struct option *out, const struct option *own);

/* The getopt code of --NAME for the table's option `name` ("t0"), or -1. */
int tool_option_code(const char *name);

/* Prints the --help lines of the table's solve options (but the CLNODE_OPTION_SAVE ones), each
 * with its value in `defaults` as the default. */
void tool_print_solve_options(FILE *f, const clnode_solve_options *defaults);

/* The y0 file format paragraph of --help. */
extern const char tool_y0_help[];
/* The device string paragraph of --help: the library's list of the forms this build accepts
 * (clnode_device_help) and the --backend shorthand. */
void tool_print_device_help(FILE *f);

/* Defaults of the seed problem. */
void tool_problem_defaults(tool_problem *pb);
/* Lists the built-in methods ("tsit5 (default), dopri5, ...") from the library. */
void tool_print_methods(FILE *f);
/* Applies problem option `code` with value arg. Returns 0, 2 after printing an error, or -1 when
 * code is not a problem option. */
int tool_problem_opt(tool_problem *pb, int code, const char *arg);
/* Whether the command line gave the table option `name` (pb->given). */
int tool_problem_given(const tool_problem *pb, const char *name);
/* For a tool that solves forward only: 2 after an error naming the tape's options
 * (--keep-tape, --checkpoint-every) when the command line gave them (--no-keep-tape is
 * what such a tool does), else 0. */
int tool_refuse_tape_options(const tool_problem *pb, const char *why);
void tool_problem_free(tool_problem *pb);

/* Runs getopt_long over argv with `longopts` (short option: -h). Returns the next option's code,
 * -1 at the end, or '?' after printing an error for an unknown option, a missing value or a
 * positional argument. Resets getopt's state when *started is 0. */
int tool_getopt(int argc, char **argv, const struct option *longopts, int *started);

/* The one device string the options name (NULL: $CLNODE_DEVICE, else host): --device SPEC as
 * given; --backend B alone is "B"; --backend B --device X is X when X starts with "B" (followed
 * by ':' or nothing), else "B:X". The library decides what the string means. */
const char *tool_device_string(tool_problem *pb);

/* Creates the context and model and builds y0 (batch x dim). Returns 0, or the exit status after
 * printing an error (everything released). */
int tool_problem_open(tool_problem *pb, clnode_context **ctx, clnode_model **model, double **y0,
                      size_t *batch);

/* ---- bounded readers: a file or "-" (standard input, a pipe works), never read whole before
 * knowing what it declares; each prints "PATH: what is wrong" and returns 0, 2 (bad input) or
 * 3 (out of memory) ---- */

/* The longest line of a y0 CSV of N values: 1 MiB, plus 1 KiB per value. */
#define TOOL_CSV_LINE_MAX(N) (((size_t)1 << 20) + (size_t)1024 * (N))

/* y0 of a model of dimension N from a .npy (the file starts with the .npy magic or its name ends
 * in ".npy"; read header first, then exactly its data) or else a CSV (read line by line, lines
 * of at most TOOL_CSV_LINE_MAX(N) bytes without NUL, memory in proportion to the states kept).
 * At most TOOL_BATCH_MAX states. *y0 (malloc'ed) holds *rows x N finite values; *note says the
 * first line was taken for pandas' column labels. */
int tool_read_y0(const char *path, size_t N, tool_header_mode mode, double **y0, size_t *rows,
                 int *note);

/* A check of a .npy header before its data are read: 0, or the exit status after printing an
 * error. */
struct cln_npy_header;
typedef int (*tool_npy_check_fn)(void *user, const struct cln_npy_header *h);

/* A .npy image, header first (a first dimension of at most TOOL_BATCH_MAX, then `check` when not
 * NULL), then exactly the data it declares (cln_npy_read_stream): *img (malloc'ed, *size bytes)
 * passes cln_npy_parse. */
int tool_read_npy(const char *path, tool_npy_check_fn check, void *check_user, unsigned char **img,
                  size_t *size);

/* A .npz archive: refused at its first bytes when they are no ZIP local header; then a regular
 * file by its size, anything else (a pipe) record by record (cln_npz_read_stream). *img
 * (malloc'ed, *size bytes) is for cln_npz_parse. */
int tool_read_npz(const char *path, unsigned char **img, size_t *size);

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

/* ---- output files: tool_out.h ---- */

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
