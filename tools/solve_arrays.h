/* solve_arrays.h - clnode-solve's binary arrays: the per-trajectory inputs read from .npy files
 * and one .npz (y0, t0, t1, dt0, args), checked against the model and against each other, and the
 * saved points written as .npy or .npz through the parallel-ready writer of npz.h. */
#ifndef CLNODE_SOLVE_ARRAYS_H
#define CLNODE_SOLVE_ARRAYS_H

#include <stddef.h>

#include "clnode.h"
#include "solve_args.h"

/* The version of the .npy/.npz outputs (the npz member format_version): raised when a member
 * changes meaning or disappears, not when one is added. */
#define SOLVE_ARRAYS_FORMAT_VERSION 1

typedef struct solve_arrays {
    double *y0;                        /* --in's y0 member (batch x N), or NULL */
    double *t0s, *t1s, *dt0s, *inputs; /* NULL where not given */
    size_t batch;                      /* trajectories the arrays hold; 0: no array given */
    char batch_src[256]; /* what set it ("t1.npy", "in.npz member t1"), for messages */
} solve_arrays;

/* Reads --t0-file, --t1-file, --dt0-file, --args-file and --in for a model of state dimension N
 * and k conditioning inputs. Every array must be finite, of the documented shape, and hold the
 * same number of trajectories. Returns 0, or the exit status (2: bad input, 3: out of memory)
 * after printing an error naming the file and the problem. */
int solve_arrays_load(const solve_args *a, size_t N, size_t k, solve_arrays *s);
void solve_arrays_free(solve_arrays *s);

/* Writes the solution to the file descriptor fd (a new, empty temporary file that the caller
 * renames) as format SOLVE_OUT_NPY or SOLVE_OUT_NPZ (solve_args.h), ragged or padded, for
 * trajectories integrating in the direction of t1 - t0 (dir_t0, dir_t1). Returns 0, or 3 after
 * printing an error. */
int solve_arrays_write(int fd, const char *path, int format, int ragged, const clnode_solution *sol,
                       const clnode_solve_options *o, double dir_t0, double dir_t1);

#endif /* CLNODE_SOLVE_ARRAYS_H */
