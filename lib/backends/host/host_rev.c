/* host_rev.c - the host backend's reverse ops (backend.h) over the reverse pass of
 * host_reverse.inc. */
#include "backends/host/host_internal.h"
#include "backends/host/host_tangent.h"
#include "clnode/gradient.h"

/* ---- the reverse pass (host_reverse.inc's per-step operations, lib/solver's schedule): blocks
 * claimed one at a time by the pool's threads, each run into its own slot of theta, so that no
 * block's sums depend on the threads ---- */

typedef struct host_rev_state {
    cln_host_rev *h;
    cln_host_tan *tan; /* the tangent pass's chunk (host_tan_begin), else NULL */
    double none;       /* the tangent pass's theta: it has no sums */
    int f64;
    size_t threads, ntheta;
    size_t bytes; /* of the packed weights and scratch */
    size_t block0, nblocks;
    void *theta;
    cln_rev_run_fn fn;
    const void *arg;
    atomic_size_t next;
    atomic_int status; /* the first failure of a run, else CLNODE_OK */
} host_rev_state;

/* Blocks handed to the host at a time: cancel and progress are looked at between groups, and a
 * group's sums wait there for the tree (as many copies of the parameters). */
#define HOST_REV_GROUP 16

clnode_status host_rev_begin(cln_backend *be, const cln_rev_job *job, void **state, size_t *group,
                             const cln_rev_ops **rev)
{
    host_backend *hb = (host_backend *)be;
    *state = NULL;
    *group = HOST_REV_GROUP;
    CLN_CHECK(be->ctx, !hb->openblas, CLNODE_ERR_UNSUPPORTED,
              "the reverse and tangent passes recompute the forward steps on the ordered GEMM, "
              "which %s does not use: use the device \"host\"",
              be->device_name);
    host_rev_state *st = calloc(1, sizeof *st);
    CLN_CHECK(be->ctx, st, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the reverse pass");
    st->f64 = job->prec == CLNODE_FP64;
    st->threads = (size_t)cln_pool_threads(hb->pool);
    st->ntheta = job->ntheta;
    size_t bytes = 0;
    cln_host_rev *kept = hb->rev_kept; /* the last reverse pass's, taken over where it fits */
    const int kept_f64 = hb->rev_kept_f64;
    hb->rev_kept = NULL;
    if (kept && kept_f64 != st->f64) {
        host_rev_free(kept, kept_f64);
        kept = NULL;
    }
    st->h = st->f64 ? cln_host_rev_begin_f64(job, hb->isa, st->threads, &bytes, kept)
                    : cln_host_rev_begin_f32(job, hb->isa, st->threads, &bytes, kept);
    st->bytes = bytes;
    if (!st->h) {
        free(st);
        return cln_fail(be->ctx, CLNODE_ERR_OUT_OF_MEMORY,
                        "cannot allocate the reverse pass's %zu bytes", bytes);
    }
    *rev = st->f64 ? &cln_host_rev_ops_f64 : &cln_host_rev_ops_f32;
    *state = st;
    return CLNODE_OK;
}

static void host_rev_part(void *arg, size_t part, size_t parts)
{
    (void)parts;
    host_rev_state *st = arg;
    const size_t es = st->f64 ? sizeof(double) : sizeof(float);
    for (;;) {
        const size_t k = atomic_fetch_add(&st->next, 1);
        if (k >= st->nblocks)
            return;
        cln_host_rev_run run = {st->h, part, (unsigned char *)st->theta + k * st->ntheta * es,
                                st->tan};
        const clnode_status s = st->fn(st->arg, &run, st->block0 + k, 1);
        int ok = CLNODE_OK;
        if (s != CLNODE_OK)
            atomic_compare_exchange_strong(&st->status, &ok, (int)s);
    }
}

clnode_status host_rev_each(cln_backend *be, void *state, size_t block0, size_t nblocks,
                            void *theta, cln_rev_run_fn fn, const void *arg)
{
    host_backend *hb = (host_backend *)be;
    host_rev_state *st = state;
    st->block0 = block0;
    st->nblocks = nblocks;
    st->theta = theta;
    st->fn = fn;
    st->arg = arg;
    atomic_store(&st->next, 0);
    atomic_store(&st->status, CLNODE_OK);
    const size_t parts = nblocks < st->threads ? nblocks : st->threads;
    if (parts)
        cln_pool_run(hb->pool, parts, host_rev_part, st);
    return (clnode_status)atomic_load(&st->status);
}

void host_rev_free(cln_host_rev *h, int f64)
{
    if (f64)
        cln_host_rev_end_f64(h);
    else
        cln_host_rev_end_f32(h);
}

/* The pass's packed weights and scratch are kept for the next reverse pass (host_rev_begin), up
 * to CLN_HOST_KEEP_BYTES: a series of small passes of one model allocates and packs once. */
void host_rev_end(cln_backend *be, void *state)
{
    host_backend *hb = (host_backend *)be;
    host_rev_state *st = state;
    if (!st)
        return;
    if (st->f64)
        cln_host_tan_end_f64(st->tan);
    else
        cln_host_tan_end_f32(st->tan);
    host_rev_free(hb->rev_kept, hb->rev_kept_f64);
    hb->rev_kept = NULL;
    if (st->bytes <= CLN_HOST_KEEP_BYTES) {
        hb->rev_kept = st->h;
        hb->rev_kept_f64 = st->f64;
    } else {
        host_rev_free(st->h, st->f64);
    }
    free(st);
}

/* ---- the tangent pass (host_tangent.inc's per-step operations, lib/solver's schedule): the
 * reverse pass's recomputation of the steps and its threads, a block at a time ---- */

clnode_status host_tan_begin(cln_backend *be, const cln_tan_job *job, void **state, size_t *group,
                             const cln_tan_ops **tan)
{
    const cln_rev_ops *rev = NULL;
    clnode_status st = host_rev_begin(be, job->rev, state, group, &rev);
    if (st != CLNODE_OK)
        return st;
    host_rev_state *s = *state;
    size_t bytes = 0;
    s->tan = s->f64 ? cln_host_tan_begin_f64(job, s->h, s->threads, &bytes)
                    : cln_host_tan_begin_f32(job, s->h, s->threads, &bytes);
    if (!s->tan) {
        host_rev_end(be, s);
        *state = NULL;
        return cln_fail(be->ctx, CLNODE_ERR_OUT_OF_MEMORY,
                        "cannot allocate the tangent pass's %zu bytes", bytes);
    }
    *tan = s->f64 ? &cln_host_tan_ops_f64 : &cln_host_tan_ops_f32;
    return CLNODE_OK;
}

clnode_status host_tan_each(cln_backend *be, void *state, size_t block0, size_t nblocks,
                            cln_rev_run_fn fn, const void *arg)
{
    host_rev_state *st = state;
    st->ntheta = 0;
    return host_rev_each(be, state, block0, nblocks, &st->none, fn, arg);
}
