/* ranks_run.h - the parts of clnode-solve's MPI driver (ranks.h), one concern each, around one
 * run of this process:
 *   ranks.c         the driver: MPI, the ranks' devices, the collective solve, the outputs
 *                   gathered, committed together and reported
 *   ranks_chunks.c  the chunks' bytes: made by the rank that solves them, gathered by rank 0
 *   ranks_record.c  --resume's progress record: its manifest, the chunks it holds, its removal
 *   ranks_arrays.c  the shared file of the array outputs, written by every rank (MPI-IO)
 *   ranks_grad.c    --grad-out: the cotangents on every rank, the chunks' shares of the gradient
 * Functions marked "Collective" are called by every rank; each returns 0 or the exit status,
 * the same on every rank. */
#ifndef CLNODE_SOLVE_RANKS_RUN_H
#define CLNODE_SOLVE_RANKS_RUN_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "args.h"
#include "arrays.h"
#include "grad.h"
#include "tool_problem.h"

typedef struct run {
    solve_args *a;
    int rank, R, local, started, entered;
    char *dev, *backend; /* the device strings with %l replaced */
    int fmt;             /* SOLVE_OUT_CSV, _NPY, _NPZ */
    /* array outputs: the layout, the shared file and its temporary name */
    solve_out *w;
    MPI_File fh;
    int fh_open;
    char *tmp;              /* the shared file's name */
    tool_target target;     /* rank 0: the file the arrays replace */
    cln_atomic_file file;   /* rank 0: the shared file as a temporary file (tmp NULL: none, or
                               with --resume the record's data file) */
    solve_out_part *parts;  /* rank 0: every chunk's CRCs, in order */
    int deferred;           /* --save steps or --ragged: the arrays are laid out after the solve */
    clnode_solution **sols; /* deferred: the solutions of this rank's chunks until then */
    size_t batch, chunk_size, nc;
    char **buf; /* per chunk on the rank that solved it (NULL elsewhere) */
    size_t *len;
    char *dir; /* the progress record, or NULL */
    long exit_after, solved;
    int exit_rank, fail_rank;
    /* rank 0's writing */
    const clnode_context *ctx;
    const clnode_model *model;
    FILE *csv;
    double wall;
    size_t ok, delivered;
    long min_steps, max_steps;
    FILE *sum;
    char *sum_text;
    size_t sum_len;
    char *rbuf; /* a chunk read back from the progress record */
    /* --grad-out: the cotangents (every rank), the most points of a trajectory of this rank's
       chunks (--save steps), the gradient (clnode_gradient_mpi) */
    solve_cot cot;
    uint64_t grad_tmax;
    uint64_t *ctmax; /* per chunk solved here: the most points of one of its trajectories */
    clnode_gradient *g;
    char *gbuf; /* a chunk's share read back from the progress record */
} run;

/* ranks.c: the same exit status on every rank, the largest (collective) */
int ranks_agree(int rc);

/* ranks_chunks.c */
char *ranks_chunk_path(const run *r, size_t c);
void ranks_test_exit_hook(run *r);
/* clnode_solve_mpi's callbacks (clnode_mpi_options, clnode_mpi_gather) */
int ranks_on_chunk(void *user, size_t chunk, size_t first, size_t count, clnode_solution **solp,
                   char *msg, size_t msgcap);
int ranks_get_chunk(void *user, size_t c, const void **data, size_t *len);
int ranks_deliver_chunk(void *user, size_t c, const void *data, size_t len);
int ranks_read_chunk(const run *r, size_t c, char **data, size_t *len);
int ranks_append_part(run *r, size_t c, const solve_out_part *part);

/* ranks_record.c */
int ranks_write_atomic(const char *path, const void *data, size_t len);
char *ranks_record_path(const run *r, const char *name);
int ranks_record_start(run *r, const double *y0, unsigned char *skip, int rc);
void ranks_progress_remove(run *r);

/* ranks_arrays.c */
int ranks_pwrite(void *user, const void *buf, size_t len, uint64_t offset);
int ranks_arrays_plan(run *r, uint64_t points);
int ranks_arrays_open(run *r);
int ranks_arrays_commit(run *r);
void ranks_arrays_abort(run *r);
int ranks_arrays_deferred(run *r);

/* ranks_grad.c */
char *ranks_grad_path(const run *r, size_t c);
int ranks_on_gradient(void *user, size_t chunk, const void *data, size_t len, char *msg,
                      size_t msgcap);
int ranks_get_gradient(void *user, size_t c, const void **data, size_t *len);
int ranks_read_grad(run *r, size_t c, size_t *len, int use);
int ranks_grad_open(run *r, tool_out *gout);
int ranks_grad_write(run *r, tool_out *gout);

#endif /* CLNODE_SOLVE_RANKS_RUN_H */
