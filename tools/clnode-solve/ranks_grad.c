/* ranks_grad.c - --grad-out across the ranks (ranks_run.h): the cotangents handed to every rank,
 * each chunk's share of the gradient in the progress record, and G written by rank 0.
 *
 * OUT.progress/grad-C: a header (the most points of one of the chunk's trajectories, for the
 * slots of the cotangents with --save steps, and the share's length), then chunk C's share of
 * the gradient as clnode_gradient_mpi handed it. A chunk counts as solved when both its record
 * and its share are whole. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ranks_run.h"

#define GRAD_MAGIC "clngch1"

typedef struct grad_rec {
    char magic[8];
    uint64_t chunk, tmax, len;
} grad_rec;

int ranks_on_gradient(void *user, size_t chunk, const void *data, size_t len, char *msg,
                      size_t msgcap)
{
    run *r = user;
    if (r->dir) {
        grad_rec h = {GRAD_MAGIC, chunk, r->ctmax[chunk], len};
        char *b = malloc(sizeof h + len), *p = ranks_grad_path(r, chunk);
        if (b) {
            memcpy(b, &h, sizeof h);
            memcpy(b + sizeof h, data, len);
        }
        if (!b || !p || ranks_write_atomic(p, b, sizeof h + len) != 0) {
            snprintf(msg, msgcap, "cannot write the progress record %s: %s", p ? p : r->dir,
                     strerror(errno));
            free(b);
            free(p);
            return 1;
        }
        free(b);
        free(p);
    }
    ranks_test_exit_hook(r);
    return 0;
}

/* Reads chunk c's share from the progress record into r->gbuf; 0 when it is whole. With `use`,
 * its most points count towards r->grad_tmax. */
int ranks_read_grad(run *r, size_t c, size_t *len, int use)
{
    free(r->gbuf);
    r->gbuf = NULL;
    char *p = ranks_grad_path(r, c);
    size_t n = 0;
    /* a share not recorded is no error here: the chunk is solved again */
    const int rc = p && access(p, R_OK) == 0 ? tool_read_file(p, &r->gbuf, &n) : -1;
    free(p);
    grad_rec h;
    if (rc != 0 || n < sizeof h)
        return -1;
    memcpy(&h, r->gbuf, sizeof h);
    if (memcmp(h.magic, GRAD_MAGIC, sizeof h.magic) != 0 || h.chunk != c || h.len != n - sizeof h)
        return -1;
    if (use)
        r->grad_tmax = h.tmax > r->grad_tmax ? h.tmax : r->grad_tmax;
    *len = (size_t)h.len;
    return 0;
}

/* Rank 0, resuming: a skipped chunk's share. */
int ranks_get_gradient(void *user, size_t c, const void **data, size_t *len)
{
    run *r = user;
    if (!r->dir || ranks_read_grad(r, c, len, 1) != 0)
        return -1;
    *data = r->gbuf + sizeof(grad_rec);
    return 0;
}

/* --grad-out before the solve: rank 0 reads the cotangents (standard input reaches rank 0 only;
 * their slots checked unless --save steps makes them depend on the solve) and opens G, then every
 * rank gets them (MPI_Bcast). Collective. Returns 0 or the exit status. */
int ranks_grad_open(run *r, tool_out *gout)
{
    solve_args *a = r->a;
    r->ctmax = calloc(r->nc ? r->nc : 1, sizeof *r->ctmax);
    int rc = r->ctmax ? 0 : TOOL_EXIT_RESOURCE;
    if (rc)
        tool_error("rank %d: out of memory for %zu chunks", r->rank, r->nc);
    if (!rc && r->rank == 0) {
        size_t T = 0;
        if (!a->pb.opts.save_steps && clnode_save_slots(NULL, &a->pb.opts, &a->pb.prob, &T) != 0) {
            tool_error("the save options have no layout");
            rc = TOOL_EXIT_INPUT;
        }
        if (!rc)
            rc = solve_grad_load(a->cot_path, r->batch, clnode_model_dim(r->model), T,
                                 a->pb.opts.precision, &r->cot);
        if (!rc)
            rc = tool_out_open(gout, a->grad_path);
    }
    if ((rc = ranks_agree(rc)) != 0)
        return rc;
    uint64_t shape[3] = {r->cot.B, r->cot.T, r->cot.N};
    MPI_Bcast(shape, 3, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    const size_t n = (size_t)(shape[0] * shape[1] * shape[2]);
    if (r->rank != 0) {
        r->cot.B = (size_t)shape[0];
        r->cot.T = (size_t)shape[1];
        r->cot.N = (size_t)shape[2];
        r->cot.v = malloc((n ? n : 1) * sizeof(double));
        rc = r->cot.v ? 0 : TOOL_EXIT_RESOURCE;
        if (rc)
            tool_error("rank %d: out of memory for the cotangents", r->rank);
    }
    if ((rc = ranks_agree(rc)) != 0)
        return rc;
    const size_t piece = (size_t)1 << 27;
    for (size_t at = 0; at < n; at += piece)
        MPI_Bcast(r->cot.v + at, (int)(n - at < piece ? n - at : piece), MPI_DOUBLE, 0,
                  MPI_COMM_WORLD);
    return 0;
}

/* --grad-out after the outputs: with --save steps the cotangents' slots against the most points
 * of any trajectory (MPI_Allreduce), then rank 0 writes G. Collective. Returns 0 or the exit
 * status. */
int ranks_grad_write(run *r, tool_out *gout)
{
    int rc = 0;
    if (r->a->pb.opts.save_steps) {
        uint64_t tmax = 0;
        MPI_Allreduce(&r->grad_tmax, &tmax, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
        if (r->rank == 0)
            rc = solve_grad_check_slots(r->a->cot_path, &r->cot, (size_t)tmax);
    }
    if (!rc && r->rank == 0)
        rc = solve_grad_write(r->a->grad_path, r->model, r->g, r->batch, gout);
    return ranks_agree(rc);
}
