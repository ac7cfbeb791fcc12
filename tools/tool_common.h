/* tool_common.h - what the command-line tools share: problem options, model and y0 loading,
 * output formatting. */
#ifndef CLNODE_TOOL_COMMON_H
#define CLNODE_TOOL_COMMON_H

#include <stdio.h>

#include "clnode.h"

typedef struct tool_problem {
    clnode_solve_options opts;
    const char *model_path; /* NULL: the built-in seed model */
    const char *backend;    /* NULL: default */
    const char *device;     /* NULL: default */
    char device_spec[256];
    double *y0; /* --y0 values, or NULL */
    size_t y0_len;
    const char *y0_file;
    long batch; /* 0: not given */
    double *ts; /* --save ts: times */
    size_t n_ts;
    int save_given;
} tool_problem;

/* Defaults of the seed problem. */
void tool_problem_defaults(tool_problem *pb);
/* Lists the built-in methods ("tsit5 (default), dopri5, ...") from the library. */
void tool_print_methods(FILE *f);

/* Consumes argv[*i] (and its value) if it is a problem option; sets *used. Returns 0, or 2 after
 * printing a one-line error. */
int tool_problem_arg(tool_problem *pb, int argc, char **argv, int *i, int *used);
/* Returns the value of option argv[*i] and advances, or NULL after printing an error. */
const char *tool_need(int argc, char **argv, int *i);
/* Creates the context and model and builds y0 (batch x dim). Returns 0, or 2 after printing an
 * error (everything released). */
int tool_problem_open(tool_problem *pb, const char *prog, clnode_context **ctx,
                      clnode_model **model, double **y0, size_t *batch);
void tool_problem_free(tool_problem *pb);

/* Logger printing warnings and errors to stderr with the program name as prefix. */
void tool_log(void *user, clnode_log_level level, const char *msg);

double tool_now(void);

void tool_json_solution(FILE *f, const tool_problem *pb, const clnode_context *ctx,
                        const clnode_model *model, const clnode_solution *sol, size_t batch,
                        double wall);
void tool_print_summary(FILE *f, const tool_problem *pb, const clnode_context *ctx,
                        const clnode_model *model, const clnode_solution *sol, size_t batch,
                        double wall);

/* JSON output: a string with escapes, and a number (%.17g; null when not finite). */
void tool_json_str(FILE *f, const char *s);
void tool_json_num(FILE *f, double x);

#endif /* CLNODE_TOOL_COMMON_H */
