/* mpi.c - one batch across the ranks of an MPI communicator (clnode/mpi.h): fixed chunks handed
 * out by an atomic counter on rank 0's window, failures made collective, and the per-chunk bytes
 * gathered to one rank in chunk order. Built into the library when MPI is found (meson option
 * `mpi`). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clnode/gradient.h"
#include "clnode/mpi.h"
#include "core/internal.h"
#include "solver/gradient_tree.h"
#include "solver/options.h"

/* Added to the counter by a rank that failed: every later fetch reads at least this, which ends
 * the other ranks' loops at their next chunk (chunk counts stay far below it). */
#define CLN_MPI_FAIL_MARK ((int64_t)1 << 50)
#define CLN_MPI_MSG 512
#define CLN_MPI_TAG_LEN 7301
#define CLN_MPI_TAG_DATA 7302
#define CLN_MPI_PIECE 65536 /* bytes per data message (root can drop a chunk piece by piece) */
#define CLN_MPI_OWNERS ((size_t)1 << 28) /* owners per MPI_Allreduce: counts are ints */

/* The defaults: every field 0 (the default chunk size, no progress, never cancelled). */
static void mpi_defaults(clnode_mpi_options *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
}

CLN_DEFAULTS_SIZED(clnode_mpi_default_options_sized, clnode_mpi_options, mpi_defaults)

size_t clnode_mpi_default_chunk_size(size_t batch)
{
    size_t c = (batch + 63) / 64;
    if (c > 4096)
        c = 4096;
    return c ? c : 1;
}

size_t clnode_mpi_num_chunks(size_t batch, size_t chunk_size)
{
    if (!chunk_size)
        chunk_size = clnode_mpi_default_chunk_size(batch);
    return batch / chunk_size + (batch % chunk_size != 0);
}

/* What a rank tells the others after its loop. */
typedef struct rank_report {
    int32_t status; /* clnode_status of its failure, or CLNODE_OK */
    int32_t pad;
    uint64_t first; /* trajectories lost: first .. first + count - 1 */
    uint64_t count;
} rank_report;

typedef struct cancel_wrap {
    MPI_Comm comm;
    clnode_cancel_fn user;
    void *user_data;
} cancel_wrap;

/* Polled between the steps of every chunk's solve: lets MPI progress (rank 0 serves the counter of
 * passive-target fetches while it solves, on transports without hardware atomics), then asks the
 * user's own cancel callback. */
static int cancel_and_progress(void *user)
{
    cancel_wrap *w = user;
    int flag = 0;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, w->comm, &flag, MPI_STATUS_IGNORE);
    return w->user ? w->user(w->user_data) : 0;
}

static clnode_status mpi_fail(clnode_context *ctx, int rc, const char *what)
{
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS)
        snprintf(s, sizeof s, "error %d", rc);
    return cln_fail(ctx, CLNODE_ERR_DEVICE, "%s failed: %s", what, s);
}

/* What a rank does with a chunk (solve_chunk, grad_chunk): job is the call's, c the chunk.
 * Returns the status, with the message in msg (CLN_MPI_MSG bytes). */
typedef clnode_status (*chunk_fn)(void *job, size_t c, char *msg);

/* A call's problem and options, as the chunk functions read them. */
typedef struct chunk_job {
    clnode_context *ctx;
    const clnode_model *model;
    const clnode_solve_options *full;
    const clnode_problem *pb;
    const clnode_mpi_options *m;
    size_t chunk_size;
} chunk_job;

/* The chunk's rows of every per-trajectory array of pb. */
static clnode_problem chunk_problem(const clnode_problem *pb, const clnode_model *model,
                                    size_t first, size_t count)
{
    const size_t N = clnode_model_dim(model), K = clnode_model_num_inputs(model);
    clnode_problem p = *pb;
    p.batch = count;
    p.y0 += first * N;
    if (p.t0s)
        p.t0s += first;
    if (p.t1s)
        p.t1s += first;
    if (p.dt0s)
        p.dt0s += first;
    if (p.inputs)
        p.inputs += first * K;
    if (p.save_ts_per_trajectory && p.save_ts)
        p.save_ts += first * p.n_save_ts;
    return p;
}

/* Hands chunk c's solution to the caller's callback, then destroys it (unless taken). */
static clnode_status chunk_callback(const clnode_mpi_options *m, size_t c, size_t first,
                                    size_t count, clnode_solution *sol, char *msg)
{
    clnode_status st = CLNODE_OK;
    if (m->on_chunk) {
        char umsg[CLN_MPI_MSG - 64] = "";
        if (m->on_chunk(m->chunk_user, c, first, count, &sol, umsg, sizeof umsg) != 0) {
            snprintf(msg, CLN_MPI_MSG, "the chunk callback failed: %s",
                     umsg[0] ? umsg : "(no message)");
            st = CLNODE_ERR_IO;
        }
    }
    clnode_solution_destroy(&sol);
    return st;
}

/* Solves chunk `c` into the callback. Returns the status, with the message in msg. */
static clnode_status solve_chunk(void *job, size_t c, char *msg)
{
    const chunk_job *j = job;
    const size_t first = c * j->chunk_size;
    const size_t count =
        j->pb->batch - first < j->chunk_size ? j->pb->batch - first : j->chunk_size;
    const clnode_problem p = chunk_problem(j->pb, j->model, first, count);
    clnode_solution *sol = NULL;
    clnode_status st = clnode_solve(j->ctx, j->model, j->full, &p, &sol);
    if (st != CLNODE_OK) {
        snprintf(msg, CLN_MPI_MSG, "%s", clnode_context_last_error(j->ctx));
        return st;
    }
    return chunk_callback(j->m, c, first, count, sol, msg);
}

/* The todo list: the chunks not skipped, in order. */
static size_t *todo_list(const clnode_mpi_options *m, size_t nc, size_t *ntodo)
{
    size_t *t = malloc((nc ? nc : 1) * sizeof *t);
    if (!t)
        return NULL;
    size_t n = 0;
    for (size_t c = 0; c < nc; ++c)
        if (!m->skip || !m->skip[c])
            t[n++] = c;
    *ntodo = n;
    return t;
}

/* The rank loop: solves chunks until the counter (or the static range) runs out, or a failure.
 * Marks solved chunks in `mine`. Returns 0, or the MPI error code of a failed MPI call. */
static int rank_loop(chunk_fn fn, void *job, const clnode_mpi_options *m, size_t batch,
                     size_t chunk_size, const size_t *todo, size_t ntodo, MPI_Win win, int rank,
                     int R, unsigned char *mine, rank_report *rep, char *msg)
{
    int rc = MPI_Win_lock_all(0, win);
    if (rc != MPI_SUCCESS)
        return rc;
    const int64_t one = 1, fail = CLN_MPI_FAIL_MARK;
    size_t next = m->static_split ? ntodo * (size_t)rank / (size_t)R : 0;
    const size_t end = m->static_split ? ntodo * ((size_t)rank + 1) / (size_t)R : ntodo;
    for (;;) {
        int64_t got = 0;
        size_t k;
        if (m->static_split) { /* still read the counter: a failure elsewhere ends the loop */
            if (next >= end)
                break;
            rc = MPI_Fetch_and_op(NULL, &got, MPI_INT64_T, 0, 0, MPI_NO_OP, win);
            if (rc == MPI_SUCCESS)
                rc = MPI_Win_flush(0, win);
            if (rc != MPI_SUCCESS || got >= CLN_MPI_FAIL_MARK)
                break;
            k = next++;
        } else {
            rc = MPI_Fetch_and_op(&one, &got, MPI_INT64_T, 0, 0, MPI_SUM, win);
            if (rc == MPI_SUCCESS)
                rc = MPI_Win_flush(0, win);
            if (rc != MPI_SUCCESS || got < 0 || (uint64_t)got >= ntodo)
                break;
            k = (size_t)got;
        }
        const size_t c = todo[k];
        clnode_status st = fn(job, c, msg);
        if (st != CLNODE_OK) {
            rep->status = (int32_t)st;
            rep->first = c * chunk_size;
            rep->count = batch - rep->first < chunk_size ? batch - rep->first : chunk_size;
            rc = MPI_Fetch_and_op(&fail, &got, MPI_INT64_T, 0, 0, MPI_SUM, win);
            if (rc == MPI_SUCCESS)
                rc = MPI_Win_flush(0, win);
            break;
        }
        mine[c] = 1;
    }
    const int rc2 = MPI_Win_unlock_all(win);
    return rc != MPI_SUCCESS ? rc : rc2;
}

/* Waits for every rank to end its loop without spinning (a rank that ran out of chunks sleeps,
 * leaving its core to ranks still solving when ranks share cores), then lets MPI progress. */
static int wait_for_all(MPI_Comm comm)
{
    MPI_Request req;
    int rc = MPI_Ibarrier(comm, &req), done = 0;
    long ns = 20000;
    while (rc == MPI_SUCCESS && !done) {
        rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && !done) {
            const struct timespec ts = {0, ns};
            nanosleep(&ts, NULL);
            ns = ns < 1000000 ? ns * 2 : ns;
        }
    }
    return rc;
}

/* The owners of every chunk, on every rank (MAX over ranks of rank-or-minus-one), in pieces that
 * fit an int count. */
static int reduce_owners(const unsigned char *mine, size_t nc, int rank, int *owner, MPI_Comm comm)
{
    for (size_t c = 0; c < nc; ++c)
        owner[c] = mine[c] ? rank : -1;
    for (size_t at = 0; at < nc; at += CLN_MPI_OWNERS) {
        size_t n = nc - at < CLN_MPI_OWNERS ? nc - at : CLN_MPI_OWNERS;
        int rc = MPI_Allreduce(MPI_IN_PLACE, owner + at, (int)n, MPI_INT, MPI_MAX, comm);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    return MPI_SUCCESS;
}

/* After the loops: every rank learns every failure. Returns the status of the call on this rank
 * (the same on all), with the message recorded on ctx. */
static clnode_status settle(clnode_context *ctx, MPI_Comm comm, int R, const rank_report *rep,
                            const char *msg, const int *owner, size_t nc, const size_t *todo,
                            size_t ntodo, size_t chunk_size, size_t batch)
{
    rank_report *all = calloc((size_t)R, sizeof *all);
    char *msgs = calloc((size_t)R, CLN_MPI_MSG);
    if (!all || !msgs) {
        free(all);
        free(msgs);
        return cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY,
                        "out of memory gathering the ranks' reports");
    }
    int rc = MPI_Allgather(rep, (int)sizeof *rep, MPI_BYTE, all, (int)sizeof *rep, MPI_BYTE, comm);
    if (rc == MPI_SUCCESS)
        rc = MPI_Allgather(msg, CLN_MPI_MSG, MPI_CHAR, msgs, CLN_MPI_MSG, MPI_CHAR, comm);
    if (rc != MPI_SUCCESS) {
        free(all);
        free(msgs);
        return mpi_fail(ctx, rc, "MPI_Allgather of the ranks' reports");
    }
    int bad = -1, nbad = 0;
    for (int r = 0; r < R; ++r)
        if (all[r].status != CLNODE_OK) {
            nbad++;
            if (bad < 0)
                bad = r;
        }
    clnode_status st = CLNODE_OK;
    if (bad >= 0) {
        size_t left = 0, left_traj = 0;
        for (size_t k = 0; k < ntodo; ++k) {
            const size_t c = todo[k];
            if (owner[c] < 0) {
                left++;
                left_traj +=
                    batch - c * chunk_size < chunk_size ? batch - c * chunk_size : chunk_size;
            }
        }
        char *m = msgs + (size_t)bad * CLN_MPI_MSG;
        m[CLN_MPI_MSG - 1] = '\0';
        st = cln_fail(ctx, (clnode_status)all[bad].status,
                      "rank %d of %d failed on trajectories %llu..%llu (lost): %s; %zu chunk(s) "
                      "(%zu trajectories, the lost ones included) left unsolved%s",
                      bad, R, (unsigned long long)all[bad].first,
                      (unsigned long long)(all[bad].first + all[bad].count - 1), m, left, left_traj,
                      nbad > 1 ? "; other ranks failed too" : "");
    }
    (void)nc;
    free(all);
    free(msgs);
    return st;
}

/* The program's clnode_mpi_options (NULL: the defaults) into *m and its solve options into *full,
 * as this library's structs. */
static clnode_status mpi_import_options(clnode_context *ctx, const clnode_solve_options *opts,
                                        const clnode_mpi_options *mopts, clnode_mpi_options *m,
                                        clnode_solve_options *full)
{
    mpi_defaults(m);
    const clnode_status st = cln_struct_import(
        ctx, "clnode_mpi_options", mopts, CLN_END_OF(clnode_mpi_options, chunk_user), m, sizeof *m);
    return st != CLNODE_OK ? st : cln_solve_options_import(ctx, opts, full);
}

/* The chunk counter every rank takes chunks from: one int64 on rank 0 (a window in *win), set to
 * 0 before any rank reads it (a barrier). An MPI error code. */
static int counter_create(MPI_Comm comm, int rank, MPI_Win *win)
{
    int64_t *base = NULL;
    int rc = MPI_Win_allocate(rank == 0 ? (MPI_Aint)sizeof(int64_t) : 0, (int)sizeof(int64_t),
                              MPI_INFO_NULL, comm, &base, win);
    if (rc == MPI_SUCCESS && rank == 0) {
        rc = MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, *win);
        if (rc == MPI_SUCCESS) {
            *base = 0;
            rc = MPI_Win_unlock(0, *win);
        }
    }
    if (rc == MPI_SUCCESS)
        rc = MPI_Barrier(comm);
    return rc;
}

/* The chunks of a batch across the ranks of comm (clnode_solve_mpi's contract): each handed to
 * fn(job, c, msg) on the rank that takes it, failures made collective, owner filled (NULL: not
 * kept). Collective; the same status on every rank. */
static clnode_status run_chunks(clnode_context *ctx, MPI_Comm comm, const clnode_mpi_options *m,
                                size_t batch, size_t chunk_size, chunk_fn fn, void *job, int *owner)
{
    clnode_status st = CLNODE_OK;
    int rank = 0, R = 1, rc = MPI_Comm_rank(comm, &rank);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_size(comm, &R);
    if (rc != MPI_SUCCESS)
        return mpi_fail(ctx, rc, "MPI_Comm_rank/size");
    const size_t nc = clnode_mpi_num_chunks(batch, chunk_size);

    size_t ntodo = 0;
    size_t *todo = todo_list(m, nc, &ntodo);
    unsigned char *mine = calloc(nc ? nc : 1, 1);
    int *own = owner ? owner : malloc((nc ? nc : 1) * sizeof *own);
    /* every rank must reach the collectives below, even one that is out of memory */
    int ok = todo && mine && own, all_ok = 0;
    rc = MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (rc != MPI_SUCCESS || !all_ok) {
        free(todo);
        free(mine);
        if (own != owner)
            free(own);
        if (rc != MPI_SUCCESS)
            return mpi_fail(ctx, rc, "MPI_Allreduce");
        return cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY,
                        "out of memory for the chunk lists of %zu chunks (on some rank)", nc);
    }

    MPI_Win win = MPI_WIN_NULL;
    rc = counter_create(comm, rank, &win);
    rank_report rep;
    memset(&rep, 0, sizeof rep);
    char msg[CLN_MPI_MSG] = "";
    if (rc == MPI_SUCCESS)
        rc = rank_loop(fn, job, m, batch, chunk_size, todo, ntodo, win, rank, R, mine, &rep, msg);
    if (rc == MPI_SUCCESS)
        rc = wait_for_all(comm);
    if (rc == MPI_SUCCESS)
        rc = reduce_owners(mine, nc, rank, own, comm);
    if (rc == MPI_SUCCESS)
        st = settle(ctx, comm, R, &rep, msg, own, nc, todo, ntodo, chunk_size, batch);
    else
        st = mpi_fail(ctx, rc, "the chunk counter (MPI one-sided)");
    if (win != MPI_WIN_NULL)
        MPI_Win_free(&win);
    free(todo);
    free(mine);
    if (own != owner)
        free(own);
    return st;
}

clnode_status clnode_solve_mpi(clnode_context *ctx, const clnode_model *model,
                               const clnode_solve_options *opts, const clnode_problem *problem,
                               MPI_Comm comm, const clnode_mpi_options *mopts, int *owner)
{
    cln_clear_error(ctx);
    CLN_CHECK(ctx, ctx && model, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_solve_mpi: context and model are required");
    clnode_mpi_options m;
    clnode_solve_options full;
    clnode_problem pb;
    clnode_status st = cln_problem_import(ctx, problem, &pb);
    if (st != CLNODE_OK)
        return st;
    CLN_CHECK(ctx, pb.y0 || pb.batch == 0, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_solve_mpi: clnode_problem.y0 is NULL: no initial states for %zu "
              "trajectories",
              pb.batch);
    const size_t batch = pb.batch;
    st = mpi_import_options(ctx, opts, mopts, &m, &full);
    if (st != CLNODE_OK)
        return st;
    CLN_CHECK(ctx, !full.keep_tape, CLNODE_ERR_UNSUPPORTED,
              "clnode_solve_mpi: keep_tape (the reverse pass): the gradient across MPI ranks is "
              "clnode_gradient_mpi");
    cancel_wrap cw = {comm, full.cancel, full.cancel_user};
    full.cancel = cancel_and_progress;
    full.cancel_user = &cw;
    const size_t chunk_size = m.chunk_size ? m.chunk_size : clnode_mpi_default_chunk_size(batch);
    chunk_job job = {ctx, model, &full, &pb, &m, chunk_size};
    return run_chunks(ctx, comm, &m, batch, chunk_size, solve_chunk, &job, owner);
}

/* ---- gathering ---- */

static int send_bytes(const void *data, size_t len, int dest, MPI_Comm comm)
{
    const char *p = data;
    int rc = MPI_SUCCESS;
    for (size_t at = 0; at < len && rc == MPI_SUCCESS; at += CLN_MPI_PIECE) {
        const size_t n = len - at < CLN_MPI_PIECE ? len - at : CLN_MPI_PIECE;
        rc = MPI_Send(p + at, (int)n, MPI_BYTE, dest, CLN_MPI_TAG_DATA, comm);
    }
    return rc;
}

static int recv_bytes(void *data, size_t len, int src, MPI_Comm comm)
{
    char *p = data;
    int rc = MPI_SUCCESS;
    for (size_t at = 0; at < len && rc == MPI_SUCCESS; at += CLN_MPI_PIECE) {
        const size_t n = len - at < CLN_MPI_PIECE ? len - at : CLN_MPI_PIECE;
        rc = MPI_Recv(p + at, (int)n, MPI_BYTE, src, CLN_MPI_TAG_DATA, comm, MPI_STATUS_IGNORE);
    }
    return rc;
}

/* Root's side: every chunk in order, received or local. Returns 0 or an MPI error code; a failed
 * callback sets *failed and a message, and the remaining chunks are still received (and
 * dropped), so that no sender waits forever. */
static int gather_root(MPI_Comm comm, int root, size_t nc, const int *owner, clnode_mpi_get_fn get,
                       clnode_mpi_deliver_fn deliver, void *user, int *failed, char *msg)
{
    void *buf = NULL;
    size_t cap = 0;
    int rc = MPI_SUCCESS;
    for (size_t c = 0; c < nc && rc == MPI_SUCCESS; ++c) {
        const void *data = NULL;
        size_t len = 0;
        if (owner[c] == root || owner[c] < 0) {
            if (*failed)
                continue;
            if (get(user, c, &data, &len) != 0) {
                *failed = 1;
                snprintf(msg, CLN_MPI_MSG, "the bytes of chunk %zu could not be read on rank %d", c,
                         root);
                continue;
            }
        } else {
            int64_t n = 0;
            rc = MPI_Recv(&n, 1, MPI_INT64_T, owner[c], CLN_MPI_TAG_LEN, comm, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS)
                break;
            if (n < 0) {
                if (!*failed)
                    snprintf(msg, CLN_MPI_MSG,
                             "the bytes of chunk %zu could not be read on rank %d", c, owner[c]);
                *failed = 1;
                continue;
            }
            if ((size_t)n > cap) {
                void *nb = realloc(buf, (size_t)n);
                if (!nb) { /* still receive it, piece by piece, and drop it */
                    if (!*failed)
                        snprintf(msg, CLN_MPI_MSG, "out of memory receiving chunk %zu", c);
                    *failed = 1;
                    char tmp[CLN_MPI_PIECE];
                    for (size_t at = 0; at < (size_t)n && rc == MPI_SUCCESS; at += sizeof tmp) {
                        const size_t k = (size_t)n - at < sizeof tmp ? (size_t)n - at : sizeof tmp;
                        rc = MPI_Recv(tmp, (int)k, MPI_BYTE, owner[c], CLN_MPI_TAG_DATA, comm,
                                      MPI_STATUS_IGNORE);
                    }
                    continue;
                }
                buf = nb;
                cap = (size_t)n;
            }
            rc = recv_bytes(buf, (size_t)n, owner[c], comm);
            data = buf;
            len = (size_t)n;
            if (rc != MPI_SUCCESS || *failed)
                continue;
        }
        if (deliver(user, c, data, len) != 0) {
            *failed = 1;
            snprintf(msg, CLN_MPI_MSG, "writing chunk %zu failed", c);
        }
    }
    free(buf);
    return rc;
}

clnode_status clnode_mpi_gather(clnode_context *ctx, MPI_Comm comm, int root, size_t num_chunks,
                                const int *owner, clnode_mpi_get_fn get,
                                clnode_mpi_deliver_fn deliver, void *user)
{
    cln_clear_error(ctx);
    int rank = 0, rc = MPI_Comm_rank(comm, &rank);
    if (rc != MPI_SUCCESS)
        return mpi_fail(ctx, rc, "MPI_Comm_rank");
    int failed = 0;
    char msg[CLN_MPI_MSG] = "";
    if (rank == root) {
        rc = gather_root(comm, root, num_chunks, owner, get, deliver, user, &failed, msg);
    } else {
        for (size_t c = 0; c < num_chunks && rc == MPI_SUCCESS; ++c) {
            if (owner[c] != rank)
                continue;
            const void *data = NULL;
            size_t len = 0;
            int64_t n = get(user, c, &data, &len) != 0 ? -1 : (int64_t)len;
            rc = MPI_Send(&n, 1, MPI_INT64_T, root, CLN_MPI_TAG_LEN, comm);
            if (rc == MPI_SUCCESS && n > 0)
                rc = send_bytes(data, len, root, comm);
        }
    }
    if (rc != MPI_SUCCESS)
        return mpi_fail(ctx, rc, "gathering the chunks");
    int32_t verdict[2] = {failed, 0};
    rc = MPI_Bcast(verdict, 2, MPI_INT32_T, root, comm);
    if (rc == MPI_SUCCESS && verdict[0])
        rc = MPI_Bcast(msg, CLN_MPI_MSG, MPI_CHAR, root, comm);
    if (rc != MPI_SUCCESS)
        return mpi_fail(ctx, rc, "MPI_Bcast of the gather's outcome");
    if (verdict[0]) {
        msg[CLN_MPI_MSG - 1] = '\0';
        return cln_fail(ctx, CLNODE_ERR_IO, "gathering the chunks to rank %d: %s", root, msg);
    }
    return CLNODE_OK;
}

/* ---- the reverse pass across the ranks ----
 *
 * Each chunk of whole blocks is solved with keep_tape and gone back through on its rank
 * (cln_gradient_chunk); its share of the gradient becomes bytes: the header, the maximal aligned
 * runs of its blocks (start and size, then their sums in the state precision) and its
 * trajectories' y0 and input cotangents. Rank 0 gathers them in chunk order, pushes the runs into
 * the tree from block 0 and folds it: the bits of the one-process pass. */

#define CLN_GRAD_MAGIC "clngrd1"

typedef struct grad_head {
    char magic[8];
    uint64_t first, count, N, n_in, ntheta, esize, nruns;
} grad_head;

typedef struct grad_job {
    chunk_job base;
    clnode_context *rev;
    const clnode_gradient_options *gopts;
    size_t slots;
    const double *cot;
    unsigned char **bytes; /* per chunk, on the rank that went back through it */
    size_t *len;
    /* rank 0's gathering */
    clnode_context *ctx;
    cln_rev_tree tree;
    int tree_ready;
    clnode_gradient *g;
} grad_job;

/* The bytes of a chunk's share (see above). NULL when out of memory. */
static unsigned char *grad_bytes(const cln_rev_tree *tr, const clnode_gradient *g, size_t first,
                                 size_t *len)
{
    grad_head h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CLN_GRAD_MAGIC, sizeof h.magic);
    h.first = first;
    h.count = g->B;
    h.N = g->N;
    h.n_in = g->n_in;
    h.ntheta = tr->n;
    h.esize = tr->esize;
    h.nruns = tr->top;
    const size_t nsum = tr->top * tr->n * tr->esize, ny = g->B * g->N * sizeof(double),
                 nc = g->B * g->n_in * sizeof(double);
    *len = sizeof h + tr->top * 2 * sizeof(uint64_t) + nsum + ny + nc;
    unsigned char *b = malloc(*len), *p = b;
    if (!b)
        return NULL;
    memcpy(p, &h, sizeof h);
    p += sizeof h;
    for (size_t k = 0; k < tr->top; ++k) {
        const uint64_t run[2] = {tr->start[k], tr->size[k]};
        memcpy(p, run, sizeof run);
        p += sizeof run;
    }
    memcpy(p, tr->level, nsum);
    memcpy(p + nsum, g->y0, ny);
    if (nc)
        memcpy(p + nsum + ny, g->inputs, nc);
    return b;
}

/* Solves chunk c with keep_tape, goes back through it, keeps its bytes, then hands the solution
 * to the caller's callback. Returns the status, with the message in msg. */
static clnode_status grad_chunk(void *job, size_t c, char *msg)
{
    grad_job *j = job;
    const chunk_job *b = &j->base;
    const size_t first = c * b->chunk_size, N = clnode_model_dim(b->model);
    const size_t count =
        b->pb->batch - first < b->chunk_size ? b->pb->batch - first : b->chunk_size;
    const clnode_problem p = chunk_problem(b->pb, b->model, first, count);
    clnode_solution *sol = NULL;
    clnode_status st = clnode_solve(b->ctx, b->model, b->full, &p, &sol);
    if (st != CLNODE_OK) {
        snprintf(msg, CLN_MPI_MSG, "%s", clnode_context_last_error(b->ctx));
        return st;
    }
    cln_rev_tree tr;
    clnode_gradient *g = NULL;
    st = cln_gradient_chunk(j->rev, b->model, j->gopts, sol, j->slots,
                            j->cot + first * j->slots * N, first, &tr, &g);
    if (st != CLNODE_OK) {
        snprintf(msg, CLN_MPI_MSG, "%s", clnode_context_last_error(j->rev));
        clnode_solution_destroy(&sol);
        return st;
    }
    j->bytes[c] = grad_bytes(&tr, g, first, &j->len[c]);
    cln_rev_tree_free(&tr);
    clnode_gradient_destroy(&g);
    if (!j->bytes[c]) {
        snprintf(msg, CLN_MPI_MSG, "out of memory for the gradient of trajectories %zu..%zu", first,
                 first + count - 1);
        clnode_solution_destroy(&sol);
        return CLNODE_ERR_OUT_OF_MEMORY;
    }
    st = chunk_callback(b->m, c, first, count, sol, msg);
    if (st == CLNODE_OK && b->m->on_gradient) {
        char umsg[CLN_MPI_MSG - 64] = "";
        if (b->m->on_gradient(b->m->gradient_user, c, j->bytes[c], j->len[c], umsg, sizeof umsg) !=
            0) {
            snprintf(msg, CLN_MPI_MSG, "the gradient callback failed: %s",
                     umsg[0] ? umsg : "(no message)");
            st = CLNODE_ERR_IO;
        }
    }
    return st;
}

/* A chunk's bytes: kept by this rank, or (rank 0, a skipped chunk) the caller's get_gradient. */
static int grad_get(void *user, size_t c, const void **data, size_t *len)
{
    const grad_job *j = user;
    if (!j->bytes[c] && j->base.m->get_gradient)
        return j->base.m->get_gradient(j->base.m->gradient_user, c, data, len);
    *data = j->bytes[c];
    *len = j->len[c];
    return j->bytes[c] ? 0 : -1;
}

/* Whether chunk c's bytes are whole and of chunk c: their header, and runs that continue the
 * tree. */
static int grad_check(const grad_job *j, size_t c, const grad_head *h, const unsigned char *runs,
                      size_t len)
{
    const size_t batch = j->base.pb->batch, cs = j->base.chunk_size;
    const size_t count = batch - c * cs < cs ? batch - c * cs : cs;
    const clnode_gradient *g = j->g;
    const size_t ntheta = g->nparams ? g->nparams : 1;
    if (memcmp(h->magic, CLN_GRAD_MAGIC, sizeof h->magic) != 0 || h->first != c * cs ||
        h->count != count || h->N != g->N || h->n_in != g->n_in || h->ntheta != ntheta ||
        (h->esize != sizeof(float) && h->esize != sizeof(double)) ||
        (j->tree_ready && h->esize != j->tree.esize) || h->nruns > 256 ||
        len != sizeof *h + h->nruns * (2 * sizeof(uint64_t) + h->ntheta * h->esize) +
                   h->count * (h->N + h->n_in) * sizeof(double))
        return -1;
    uint64_t at = h->first / CLNODE_GRADIENT_BLOCK;
    for (size_t k = 0; k < h->nruns; ++k) {
        uint64_t run[2];
        memcpy(run, runs + k * sizeof run, sizeof run);
        if (run[0] != at || !run[1] || (run[1] & (run[1] - 1)) != 0 || run[0] % run[1] != 0)
            return -1;
        at += run[1];
    }
    return at == (h->first + h->count + CLNODE_GRADIENT_BLOCK - 1) / CLNODE_GRADIENT_BLOCK ? 0 : -1;
}

/* Rank 0: chunk c's share, in chunk order: its runs into the tree, its rows into the gradient. */
static int grad_deliver(void *user, size_t c, const void *data, size_t len)
{
    grad_job *j = user;
    grad_head h;
    if (len < sizeof h)
        return -1;
    memcpy(&h, data, sizeof h);
    const unsigned char *runs = (const unsigned char *)data + sizeof h;
    if (grad_check(j, c, &h, runs, len) != 0)
        return -1;
    const size_t batch = j->base.pb->batch;
    if (!j->tree_ready) {
        const size_t nb = (batch + CLNODE_GRADIENT_BLOCK - 1) / CLNODE_GRADIENT_BLOCK;
        if (cln_rev_tree_init(j->ctx, &j->tree, h.esize, h.ntheta, 0, nb) != CLNODE_OK)
            return -1;
        j->tree_ready = 1;
    }
    const unsigned char *sums = runs + h.nruns * 2 * sizeof(uint64_t);
    for (size_t k = 0; k < h.nruns; ++k) {
        uint64_t run[2];
        memcpy(run, runs + k * sizeof run, sizeof run);
        if (!cln_rev_tree_fits(&j->tree, run[0], run[1]))
            return -1;
        cln_rev_tree_push(&j->tree, sums + k * h.ntheta * h.esize, run[1]);
    }
    const unsigned char *rows = sums + h.nruns * h.ntheta * h.esize;
    clnode_gradient *g = j->g;
    memcpy(g->y0 + h.first * g->N, rows, h.count * g->N * sizeof(double));
    if (g->n_in)
        memcpy(g->inputs + h.first * g->n_in, rows + h.count * g->N * sizeof(double),
               h.count * g->n_in * sizeof(double));
    return 0;
}

size_t clnode_mpi_gradient_chunk_size(size_t batch)
{
    const size_t c = clnode_mpi_default_chunk_size(batch), k = CLNODE_GRADIENT_BLOCK;
    return (c + k - 1) / k * k;
}

/* After the gather: rank 0 folds the tree into the parameters' gradient, which every rank then
 * gets (MPI_Bcast); the other ranks hold no rows. Collective. */
static clnode_status grad_finish(grad_job *j, MPI_Comm comm, int rank)
{
    clnode_gradient *g = j->g;
    if (rank == 0 && j->tree_ready && j->tree.top) {
        cln_rev_tree_fold(&j->tree);
        const void *sum = j->tree.level;
        for (size_t i = 0; i < g->nparams; ++i)
            g->params[i] = j->tree.esize == sizeof(float) ? (double)((const float *)sum)[i]
                                                          : ((const double *)sum)[i];
    }
    int rc = MPI_SUCCESS;
    for (size_t at = 0; at < g->nparams && rc == MPI_SUCCESS; at += CLN_MPI_OWNERS) {
        const size_t n = g->nparams - at < CLN_MPI_OWNERS ? g->nparams - at : CLN_MPI_OWNERS;
        rc = MPI_Bcast(g->params + at, (int)n, MPI_DOUBLE, 0, comm);
    }
    if (rank != 0) {
        free(g->y0);
        free(g->inputs);
        g->y0 = g->inputs = NULL;
    }
    return rc == MPI_SUCCESS ? CLNODE_OK : mpi_fail(j->ctx, rc, "MPI_Bcast of the gradient");
}

/* The arguments of clnode_gradient_mpi, alike on every rank. */
static clnode_status grad_check_args(clnode_context *ctx, const clnode_problem *pb,
                                     const clnode_mpi_options *m, const double *cot,
                                     size_t chunk_size)
{
    CLN_CHECK(ctx, pb->y0 || pb->batch == 0, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_gradient_mpi: clnode_problem.y0 is NULL: no initial states for %zu "
              "trajectories",
              pb->batch);
    CLN_CHECK(ctx, cot || pb->batch == 0, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_gradient_mpi: NULL cotangents");
    CLN_CHECK(ctx, chunk_size % CLNODE_GRADIENT_BLOCK == 0, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_gradient_mpi: chunk_size %zu is not a multiple of CLNODE_GRADIENT_BLOCK "
              "(%d): a chunk is whole blocks of the parameters' sum",
              chunk_size, CLNODE_GRADIENT_BLOCK);
    const size_t nc = clnode_mpi_num_chunks(pb->batch, chunk_size);
    for (size_t c = 0; m->skip && !m->get_gradient && c < nc; ++c)
        CLN_CHECK(ctx, !m->skip[c], CLNODE_ERR_INVALID_ARGUMENT,
                  "clnode_gradient_mpi: clnode_mpi_options.skip marks chunk %zu, but get_gradient "
                  "is NULL: a skipped chunk's share of the gradient comes from get_gradient",
                  c);
    return CLNODE_OK;
}

/* Every chunk through grad_chunk, then gathered, folded and shared (grad_finish). */
static clnode_status grad_run(grad_job *j, MPI_Comm comm, int *owner)
{
    const size_t batch = j->base.pb->batch, cs = j->base.chunk_size;
    const size_t nc = clnode_mpi_num_chunks(batch, cs);
    int rank = 0, rc = MPI_Comm_rank(comm, &rank);
    if (rc != MPI_SUCCESS)
        return mpi_fail(j->ctx, rc, "MPI_Comm_rank");
    j->bytes = calloc(nc ? nc : 1, sizeof *j->bytes);
    j->len = calloc(nc ? nc : 1, sizeof *j->len);
    int *own = owner ? owner : malloc((nc ? nc : 1) * sizeof *own);
    clnode_status st = j->bytes && j->len && own
                           ? cln_gradient_alloc(j->ctx, j->base.model, rank == 0 ? batch : 0, &j->g)
                           : CLNODE_ERR_OUT_OF_MEMORY;
    int ok = st == CLNODE_OK, all_ok = 0;
    rc = MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (rc != MPI_SUCCESS)
        st = mpi_fail(j->ctx, rc, "MPI_Allreduce");
    else if (!all_ok)
        st = cln_fail(j->ctx, CLNODE_ERR_OUT_OF_MEMORY,
                      "out of memory for the gradient of %zu trajectories (on some rank)", batch);
    if (st == CLNODE_OK)
        st = run_chunks(j->ctx, comm, j->base.m, batch, cs, grad_chunk, j, own);
    if (st == CLNODE_OK)
        st = clnode_mpi_gather(j->ctx, comm, 0, nc, own, grad_get, grad_deliver, j);
    if (st == CLNODE_OK)
        st = grad_finish(j, comm, rank);
    for (size_t c = 0; j->bytes && c < nc; ++c)
        free(j->bytes[c]);
    free(j->bytes);
    free(j->len);
    if (own != owner)
        free(own);
    if (j->tree_ready)
        cln_rev_tree_free(&j->tree);
    return st;
}

clnode_status clnode_gradient_mpi(clnode_context *ctx, clnode_context *rev_ctx,
                                  const clnode_model *model, const clnode_solve_options *opts,
                                  const clnode_gradient_options *gopts,
                                  const clnode_problem *problem, size_t slots, const double *cot,
                                  MPI_Comm comm, const clnode_mpi_options *mopts, int *owner,
                                  clnode_gradient **out)
{
    cln_clear_error(ctx);
    CLN_CHECK(ctx, ctx && model && out, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_gradient_mpi: context, model and out are required");
    *out = NULL;
    clnode_mpi_options m;
    clnode_solve_options full;
    clnode_gradient_options go;
    clnode_problem pb;
    clnode_status st = cln_problem_import(ctx, problem, &pb);
    if (st == CLNODE_OK)
        st = mpi_import_options(ctx, opts, mopts, &m, &full);
    if (st == CLNODE_OK)
        st = cln_gradient_options_import(ctx, gopts, &go);
    const size_t cs = m.chunk_size ? m.chunk_size : clnode_mpi_gradient_chunk_size(pb.batch);
    if (st == CLNODE_OK)
        st = grad_check_args(ctx, &pb, &m, cot, cs);
    if (st != CLNODE_OK)
        return st;
    full.keep_tape = 1;
    cancel_wrap cw = {comm, full.cancel, full.cancel_user};
    full.cancel = cancel_and_progress;
    full.cancel_user = &cw;
    cancel_wrap gw = {comm, go.cancel, go.cancel_user};
    go.cancel = cancel_and_progress;
    go.cancel_user = &gw;
    grad_job j;
    memset(&j, 0, sizeof j);
    j.base = (chunk_job){ctx, model, &full, &pb, &m, cs};
    j.rev = rev_ctx ? rev_ctx : ctx;
    j.gopts = &go;
    j.slots = slots;
    j.cot = cot;
    j.ctx = ctx;
    st = grad_run(&j, comm, owner);
    if (st == CLNODE_OK)
        *out = j.g;
    else
        clnode_gradient_destroy(&j.g);
    return st;
}
