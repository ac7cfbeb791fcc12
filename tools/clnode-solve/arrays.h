/* arrays.h - clnode-solve's binary arrays: the per-trajectory inputs read from .npy files
 * and one .npz (y0, t0, t1, dt0, args), checked against the model and against each other, and the
 * saved points written as .npy or .npz through the parallel-ready writer of npz.h. */
#ifndef CLNODE_SOLVE_ARRAYS_H
#define CLNODE_SOLVE_ARRAYS_H

#include <stddef.h>

#include "clnode.h"
#include "npz.h"
#include "args.h"

/* The version of the .npy/.npz outputs (the npz member format_version): raised when a member
 * changes meaning or disappears, not when one is added. */
#define SOLVE_ARRAYS_FORMAT_VERSION 2

typedef struct solve_arrays {
    double *y0;                        /* --in's y0 member (batch x N), or NULL */
    double *t0s, *t1s, *dt0s, *inputs; /* NULL where not given */
    double *ts;                        /* --ts-file (batch x n_ts) or NULL */
    size_t n_ts;
    size_t batch;                      /* trajectories the arrays hold; 0: no array given */
    char batch_src[256]; /* what set it ("t1.npy", "in.npz member t1"), for messages */
} solve_arrays;

/* Reads --t0-file, --t1-file, --dt0-file, --args-file, --ts-file and --in for a model of state dimension N
 * and k conditioning inputs. Every array must be finite, of the documented shape, and hold the
 * same number of trajectories. Returns 0, or the exit status (2: bad input, 3: out of memory)
 * after printing an error naming the file and the problem. */
int solve_arrays_load(const solve_args *a, size_t N, size_t k, solve_arrays *s);
void solve_arrays_free(solve_arrays *s);

/* Writes the solution to the file descriptor fd (a new, empty temporary file that the caller
 * renames) as format SOLVE_OUT_NPY or SOLVE_OUT_NPZ (args.h), ragged or padded. One writer
 * through the pieces below. Returns 0, or 3 after printing an error. */
int solve_arrays_write(int fd, const char *path, int format, int ragged, const clnode_solution *sol,
                       const clnode_solve_options *o, const clnode_problem *p);

/* ---- the same output written by several writers (MPI ranks), each with the solution of a
 * contiguous range of the batch ----
 *
 * The rows are the library's layout of the saved points (clnode_solution_rows): the padded
 * layout has the slots of clnode_save_slots, except with --save steps, where it keeps only the
 * most points of any trajectory (clnode_solution_points): max_steps slots, diffrax's shape, would
 * make the file grow with max_steps instead of the steps taken. The ragged layout keeps each
 * trajectory's points and no padding.
 *
 *   every writer:  clnode_solution_points for each of its trajectories; T = the largest count
 *                  (padded --save steps: MPI_Allreduce MAX) or P = the total (ragged:
 *                  MPI_Allreduce SUM, and p0 = the exclusive prefix sum, MPI_Exscan);
 *                  solve_out_plan(&w, ..., B, N, T or P, ...) (the same on every writer);
 *                  solve_out_write(&w, local_sol, g0, p0, fn, user, &part) with g0 its first
 *                  trajectory in the batch, fn e.g. MPI_File_write_at on the shared file;
 *   one writer:    gathers every part (MPI_Gather of the plain struct, any order), then
 *                  solve_out_finish(&w, parts, nparts, fn, user) once the others have written
 *                  (the gather orders it after their writes).
 * The bytes equal those of one writer with the whole batch, for any split. */
typedef struct solve_out {
    cln_npz_layout L;
    int format, ragged, f4;
    size_t B, N, T; /* T: slots per trajectory in the padded layout */
    const clnode_solve_options *o;
    const clnode_problem *p; /* the save times */
} solve_out;

/* The rows one writer wrote, per member of the layout: [r0, r1) and their CRC-32 (r0 == r1:
 * nothing). */
typedef struct solve_out_part {
    uint64_t r0[CLN_NPZ_MAX_MEMBERS], r1[CLN_NPZ_MAX_MEMBERS];
    uint32_t crc[CLN_NPZ_MAX_MEMBERS];
} solve_out_part;

/* Lays out the output of B trajectories of dimension N; `points` is T (padded with --save
 * steps; ignored otherwise) or P (ragged). o and p must outlive w. Returns 0, or -1 with a message.
 */
int solve_out_plan(solve_out *w, int format, int ragged, const clnode_solve_options *o,
                   const clnode_problem *p, size_t B, size_t N, uint64_t points, char *err,
                   size_t errlen);

/* Writes the rows of sol's trajectories as trajectories [g0, g0 + batch(sol)) of the batch, their
 * first saved point being point p0 of the batch (ragged), through fn (offsets in the file). The
 * writer with g0 = 0 also writes format_version, the one that ends the batch the last offset.
 * Memory: about 32 MiB of buffers. Returns 0, or -1 with a message. */
int solve_out_write(const solve_out *w, const clnode_solution *sol, size_t g0, uint64_t p0,
                    cln_npz_pwrite_fn fn, void *user, solve_out_part *part, char *err,
                    size_t errlen);

/* A positional reader: reads len bytes at byte `offset` of a file, whole. Returns 0, or nonzero
 * on failure (a short file included). */
typedef int (*solve_out_pread_fn)(void *user, void *buf, size_t len, uint64_t offset);

/* Whether the rows a part names still hold the bytes its CRCs were computed from, in a file laid
 * out as w (read through fn): a progress record's rows may have been lost with the page cache
 * when the machine stopped. Returns 1 when every member's rows match, 0 when one does not or
 * cannot be read, -1 when out of memory. */
int solve_out_check_part(const solve_out *w, const solve_out_part *p, solve_out_pread_fn fn,
                         void *user);

/* Combines the parts of all writers (any order, together covering every row) into each member's
 * CRC and writes the headers and the central directory (a bare .npy: its header). Returns 0, or
 * -1 with a message (parts that leave a gap). */
int solve_out_finish(solve_out *w, const solve_out_part *parts, size_t nparts, cln_npz_pwrite_fn fn,
                     void *user, char *err, size_t errlen);

#endif /* CLNODE_SOLVE_ARRAYS_H */
