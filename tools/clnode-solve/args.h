/* args.h - clnode-solve's command line, parsed apart from the solve (the fuzzer drives it
 * too). */
#ifndef CLNODE_SOLVE_ARGS_H
#define CLNODE_SOLVE_ARGS_H

#include "tool_problem.h"

typedef struct solve_args {
    tool_problem pb;
    const char *out_path;
    /* per-trajectory arrays (arrays.h): .npy files and one .npz */
    const char *t0_file, *t1_file, *dt0_file, *args_file, *in_path;
    const char *ts_file;               /* --ts-file: each trajectory's own save times, (B, T) */
    int t0_given, t1_given, dt0_given; /* the scalar --t0, --t1, --dt0 */
    int ragged;                        /* --ragged: .npz output with ts (P,), ys (P, N), offsets */
    int json, json_points, quiet, help, version;
    int certify; /* --certify, --certify-fraction X, --certify-seed N */
    clnode_certify_options certify_opts;
    int resume;      /* --resume: keep a progress record beside --out, solve what it lacks */
    long chunk_size; /* --chunk-size N under MPI (0: the library's default) */
    /* --cotangents COT.npy|COT.npz --grad-out G.npz: the reverse pass (grad.h); both or neither */
    const char *cot_path, *grad_path;
} solve_args;

/* Parses argv. Returns -1 to go on with the solve, or the exit status to return now: 0 for
 * --help and --version (a->help, a->version say which; nothing printed), 2 after printing an
 * error. Call solve_args_free in every case. */
int solve_args_parse(solve_args *a, int argc, char **argv);
void solve_args_free(solve_args *a);

/* The format of --out PATH, from its name: FILE.npz, FILE.npy, else CSV ("-" included). */
enum {
    SOLVE_OUT_CSV,
    SOLVE_OUT_NPY,
    SOLVE_OUT_NPZ
};
int solve_out_format(const char *path);

#endif /* CLNODE_SOLVE_ARGS_H */
