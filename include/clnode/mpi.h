/* clnode/mpi.h - one batch solved by the ranks of an MPI communicator, for programs that already
 * use MPI (built and installed when the library is built with MPI: meson option `mpi`).
 *
 * The batch is cut into chunks of consecutive trajectories whose boundaries depend on the batch
 * and the chunk size only, never on the number of ranks. Chunks are handed out as ranks finish
 * (an MPI-3 atomic counter, MPI_Fetch_and_op on rank 0's window), so trajectories of different
 * costs balance; rank 0 solves too, so one rank works. A trajectory's bits do not depend on the
 * batch it is solved in (clnode/solver.h), so every chunk's results, and anything written from
 * them in trajectory order, are the same bytes at any number of ranks.
 *
 * Memory: the input arrays (y0 and the per-trajectory arrays of the problem) are read only at
 * the rows of the chunks a rank solves, so they may be memory-mapped files; results are handed
 * to a callback chunk by chunk on the rank that solved them and are not kept. */
#ifndef CLNODE_MPI_H
#define CLNODE_MPI_H

#include <mpi.h>

#include "clnode/gradient.h"
#include "clnode/solver.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Called on the rank that solved chunk `chunk` (trajectories first .. first + count - 1), with
 * their solution *sol (trajectory first + i is index i). The library destroys *sol after the
 * call; to keep it, take the pointer and set *sol to NULL (then destroy it yourself with
 * clnode_solution_destroy). Chunks of one rank come in increasing order. Return 0 to go on;
 * non-zero fails the call (on every rank, as a failed solve does), with `msg` (msgcap bytes,
 * NUL-terminated) saying why. */
typedef int (*clnode_mpi_chunk_fn)(void *user, size_t chunk, size_t first, size_t count,
                                   clnode_solution **sol, char *msg, size_t msgcap);

/* Gathering per-chunk bytes to one rank in chunk order (clnode_mpi_gather; clnode_gradient_mpi's
 * skipped chunks): sets *data and *len (the bytes stay valid until the next call); non-zero: the
 * bytes cannot be had. */
typedef int (*clnode_mpi_get_fn)(void *user, size_t chunk, const void **data, size_t *len);

/* clnode_gradient_mpi: called on the rank that went back through chunk `chunk`, after on_chunk,
 * with the chunk's share of the gradient as `len` bytes (valid during the call; bytes that the same
 * library version reads back through get_gradient). Return 0 to go on; non-zero fails the call as
 * a failed chunk callback does, with `msg` saying why. */
typedef int (*clnode_mpi_gradient_fn)(void *user, size_t chunk, const void *data, size_t len,
                                      char *msg, size_t msgcap);

/* Fields are only ever appended (clnode/common.h): set the defaults with
 * clnode_mpi_default_options, then change what you need. Every rank passes the same values. */
typedef struct clnode_mpi_options {
    size_t struct_size; /* set by clnode_mpi_default_options */
    size_t chunk_size;  /* trajectories per chunk; 0 (default): clnode_mpi_default_chunk_size */
    int static_split;   /* 0 (default): chunks handed out as ranks finish; 1: a fixed split, rank
                           r solving the r-th of R contiguous runs of the chunks to solve (for
                           comparison: it balances only trajectories of equal cost) */
    const unsigned char *skip;    /* NULL (default), or one flag per chunk: non-zero chunks are not
                                     solved (already done: a resumed run) and have owner -1 */
    clnode_mpi_chunk_fn on_chunk; /* default NULL: results are not looked at */
    void *chunk_user;
    /* clnode_gradient_mpi only: */
    clnode_mpi_gradient_fn on_gradient; /* default NULL: each chunk's share is not handed out */
    void *gradient_user;                /* for on_gradient and get_gradient */
    clnode_mpi_get_fn get_gradient;     /* default NULL; with skip: called on rank 0 for each
                                           skipped chunk, in chunk order, to give back the bytes
                                           on_gradient was handed for it (a resumed run) */
} clnode_mpi_options;

#define clnode_mpi_default_options(opts) clnode_mpi_default_options_sized((opts), sizeof *(opts))
CLNODE_API void clnode_mpi_default_options_sized(clnode_mpi_options *opts, size_t struct_size);

/* The default chunk size of a batch: about 64 chunks, at most 4096 and at least 1 trajectory
 * per chunk (a function of the batch only, so a resumed run at another rank count cuts the batch
 * the same way). */
CLNODE_API size_t clnode_mpi_default_chunk_size(size_t batch);

/* The number of chunks: ceil(batch / chunk_size) (chunk_size 0: the default). */
CLNODE_API size_t clnode_mpi_num_chunks(size_t batch, size_t chunk_size);

/* Solves the problem->batch trajectories of `problem` (y0 and the per-trajectory t0s, t1s, dt0s
 * and inputs indexed by trajectory over the whole batch) with `opts` across the ranks of `comm`,
 * each on its own context. Collective: every rank calls it with the same problem. Each chunk is
 * solved by clnode_solve on the rows of its trajectories and handed to mopts->on_chunk on its rank.
 *
 * On return every rank has the same status. When `owner` is not NULL (clnode_mpi_num_chunks
 * entries) it holds on every rank which rank solved each chunk (-1: skipped), the order for
 * clnode_mpi_gather. A rank whose solve or callback fails (device error, out of memory, ...)
 * stops the others at their next chunk, and the call fails on every rank with that status and a
 * message naming the rank, the trajectories it lost and how many chunks were left unsolved (the
 * context's last error; the chunks solved before were handed to the callbacks). Other errors:
 * CLNODE_ERR_INVALID_ARGUMENT (bad options or problem, on every rank alike), CLNODE_ERR_DEVICE for
 * a failed MPI call. The user's progress and cancel callbacks of opts apply to each chunk's solve;
 * between the steps of a solve the call also lets MPI progress (MPI_Iprobe), so that rank 0
 * serves the counter while it solves. */
CLNODE_API clnode_status clnode_solve_mpi(clnode_context *ctx, const clnode_model *model,
                                          const clnode_solve_options *opts,
                                          const clnode_problem *problem, MPI_Comm comm,
                                          const clnode_mpi_options *mopts, int *owner);

/* Gathering per-chunk bytes to one rank in chunk order. `get` (clnode_mpi_get_fn) is called on
 * the rank that owns a chunk (on `root` for chunks of owner -1); `deliver` is called on root for
 * every chunk in increasing order. Either returning non-zero fails the gather on every rank (its
 * message then names the chunk). */
typedef int (*clnode_mpi_deliver_fn)(void *user, size_t chunk, const void *data, size_t len);

/* Collective over comm. Every rank holds at most the chunks it owns (root: one chunk of another
 * rank at a time). Returns CLNODE_OK on every rank, or the same error on every rank. */
CLNODE_API clnode_status clnode_mpi_gather(clnode_context *ctx, MPI_Comm comm, int root,
                                           size_t num_chunks, const int *owner,
                                           clnode_mpi_get_fn get, clnode_mpi_deliver_fn deliver,
                                           void *user);

/* ---- the reverse pass across the ranks ----
 *
 * The gradient's chunks are whole blocks of the parameters' sum (CLNODE_GRADIENT_BLOCK
 * trajectories, clnode/gradient.h). Each rank solves its chunks with keep_tape and goes back
 * through each (clnode_gradient_compute's pass on the chunk's trajectories); a chunk of blocks
 * [a, b) leaves the sums of the aligned power-of-two runs of blocks [k 2^j, (k + 1) 2^j) that
 * make it up, each a node of the library's fixed tree over the block indices. Rank 0 pushes the
 * runs in block order into that tree and folds it, so the parameters' gradient has the bits of
 * one clnode_gradient_compute of the whole batch at any rank count and chunk size; the y0 and
 * input cotangents are each trajectory's own and are gathered in trajectory order. */

/* The default chunk size of a gradient: clnode_mpi_default_chunk_size(batch) rounded up to a
 * multiple of CLNODE_GRADIENT_BLOCK (a function of the batch only). */
CLNODE_API size_t clnode_mpi_gradient_chunk_size(size_t batch);

/* The gradient of the solve of `problem` across the ranks of comm. Collective: every rank passes
 * the same problem, options, slots and cotangents. ctx: this rank's context of the solves (any
 * device; strict GEMM mode unless it is the host); rev_ctx: its context of the reverse pass (any
 * device clnode_gradient_compute takes: the host on its ordered GEMM, OpenCL, CUDA; NULL: ctx),
 * with the same bits on every device. opts: the solve's options (keep_tape
 * is set by the call); gopts: the reverse pass's (NULL: the defaults; their cancel and progress
 * apply to each chunk's pass). cot: batch x slots x dim cotangents over the whole batch, as
 * clnode_gradient_compute reads them (each rank reads the rows of its chunks only). mopts: as
 * clnode_solve_mpi's, with chunk_size 0 meaning clnode_mpi_gradient_chunk_size(batch); on_chunk
 * gets each chunk's solution after its reverse pass, then on_gradient its share of the gradient;
 * skip (a resumed run) needs get_gradient, which gives back on rank 0 the skipped chunks' shares.
 * owner: as clnode_solve_mpi's (NULL: not returned). On success, on rank 0 *out holds the whole
 * gradient (clnode_gradient_y0 ...); on the other ranks it holds the parameters' gradient (the same
 * bits) and clnode_gradient_y0 and clnode_gradient_inputs return NULL. Every rank has the same
 * status. Errors (nothing in *out): CLNODE_ERR_INVALID_ARGUMENT (a chunk size that is not a
 * multiple of CLNODE_GRADIENT_BLOCK, skip without get_gradient, NULL arguments, as
 * clnode_solve_mpi's), and a rank's failure (its solve, its reverse pass, the callback, out of
 * memory) on every rank with a message naming the rank and the trajectories it lost
 * (clnode_solve_mpi's), CLNODE_ERR_DEVICE for a failed MPI call. Memory: each rank keeps, per chunk
 * it went back through, its runs' sums (at most 2 log2(blocks per chunk) + 2 copies of the
 * parameters in the state precision) and its rows of the y0 and input cotangents until rank 0
 * gathers them, one chunk of another rank at a time; rank 0 holds the whole gradient. */
CLNODE_API clnode_status
clnode_gradient_mpi(clnode_context *ctx, clnode_context *rev_ctx, const clnode_model *model,
                    const clnode_solve_options *opts, const clnode_gradient_options *gopts,
                    const clnode_problem *problem, size_t slots, const double *cot, MPI_Comm comm,
                    const clnode_mpi_options *mopts, int *owner, clnode_gradient **out);

#ifdef __cplusplus
}
#endif

#endif /* CLNODE_MPI_H */
