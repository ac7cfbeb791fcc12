/* compare.h - the parts of clnode-compare (main.c), one concern each:
 *   args.c    the command line (--help and the options); a library of its own, which the fuzz
 *             harness (tests/fuzz/) links too
 *   run.c     the solves: the host fp64 strict reference and its sensitivity baseline, every
 *             device's rows, the library's messages collected per row
 *   judge.c   each row's verdict, by the tolerance and by the sensitivity baseline
 *   report.c  the table or the JSON document on standard output
 *   plot.c    --plot: the plot's data file and the plot script */
#ifndef CLNODE_COMPARE_H
#define CLNODE_COMPARE_H

#include <stddef.h>
#include <stdio.h>

#include "clnode.h"
#include "clnode/probe.h"
#include "tool_problem.h"

#define COMPARE_PROG "clnode-compare"

#define MAX_BATCHES 8
#define MAX_DEVICES 64
#define MAX_WARN 4      /* distinct log messages kept per row */
#define N_DEFAULT_TS 11 /* saved times over [t0, t1] compared with the reference */
#define N_PLOT_TS 401   /* dense times of the plot's deviation curves */

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

/* args.c */
void compare_usage(FILE *f);
/* Frees the n strdup'ed items of a list (--devices). */
void compare_free_list(char **items, size_t n);
/* Returns -1 to go on, or the exit status to return (0 for --help and --version, which the
 * caller prints). */
int compare_parse_args(compare *c, int argc, char **argv);

/* run.c: each returns 0 or the exit status */
int compare_default_devices(compare *c);
/* The host fp64 strict reference (4 when a reference trajectory does not succeed). */
int compare_reference(compare *c);
/* The rows of one device: every precision x GEMM mode it has. */
int compare_run_device(compare *c, const char *spec);

/* judge.c */
void compare_judge(compare *c, row *r);
double compare_row_tolerance(const compare *c, clnode_precision p);
const char *compare_probe_class(const row *r);

/* report.c */
void compare_print_table(const compare *c);
void compare_print_json(const compare *c, int rc);

/* plot.c */
const char *compare_plot_script(void);
int compare_plot_check(void);
int compare_check_outputs(const compare *c);
int compare_make_plot(const compare *c);

#endif /* CLNODE_COMPARE_H */
