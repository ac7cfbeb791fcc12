/* tool_problem.h - the problem options every tool takes (getopt_long over the library's table of
 * solve options), their --help, and opening the problem: context, model and y0. It includes the
 * rest of common/ below it (tool_common.h, tool_parse.h, tool_input.h) and tool_out.h. */
#ifndef CLNODE_TOOL_PROBLEM_H
#define CLNODE_TOOL_PROBLEM_H

#include <getopt.h>
#include <stdio.h>

#include "clnode.h"
#include "tool_common.h"
#include "tool_input.h"
#include "tool_out.h"
#include "tool_parse.h"

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
#endif /* CLNODE_TOOL_PROBLEM_H */
