/* ranks.h - clnode-solve across MPI ranks (built when the library is built with MPI). */
#ifndef CLNODE_SOLVE_MPI_H
#define CLNODE_SOLVE_MPI_H

#include "args.h"

/* Whether this process runs under an MPI launcher (mpirun, srun with PMI/PMIx), or the run asks
 * for the MPI driver anyway (--resume; CLNODE_MPI=1). CLNODE_MPI=0 turns it off. */
int solve_mpi_wanted(const solve_args *a);

/* clnode-solve across the ranks of MPI_COMM_WORLD, in three calls around main.c's opening
 * of the problem (the same on every rank):
 *   solve_mpi_init   MPI_Init; "%l" in the device string (and $CLNODE_DEVICE) becomes the
 *                    node-local rank; the logger speaks for rank 0 (other ranks: warnings, and
 *                    errors before the solve, with their rank).
 *   solve_mpi_run    the batch in chunks handed out as ranks finish (clnode_solve_mpi); every
 *                    output in trajectory order, the same bytes as one process: text outputs
 *                    gathered to and written by rank 0, .npy/.npz written by every rank at its
 *                    chunks' offsets (MPI-IO). Returns the exit status, the same on every rank.
 *   solve_mpi_finish MPI_Finalize, after answering the others when this rank could not open the
 *                    problem (solve_mpi_run not entered). Returns rc. */
int solve_mpi_init(solve_args *a, int *argc, char ***argv);
int solve_mpi_run(solve_args *a, clnode_context *ctx, const clnode_model *model, const double *y0,
                  size_t batch);
int solve_mpi_finish(int rc);

#endif /* CLNODE_SOLVE_MPI_H */
