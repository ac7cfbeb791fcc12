/* device_reverse_internal.h - what the files of the device backends' reverse pass share (not
 * installed): the pass's state, its scratch buffers and kernel arguments. device_reverse.c holds
 * the reverse pass's per-step operations (cln_dev_rev_begin, cln_dev_rev_each, cln_dev_rev_end).
 */
#ifndef CLN_DEVICE_REVERSE_INTERNAL_H
#define CLN_DEVICE_REVERSE_INTERNAL_H

#include <stdint.h>

#include "backends/device/device_reverse.h"
#include "clnode/gradient.h"

/* The most blocks a group takes (also the granularity of cancel and progress). */
#define DR_MAX_GROUP 1024

/* The fewest blocks in a group for which the weight sums go through the GEMM where the backend
 * prefers it (cln_dev_launch.rev_sums_by_gemm). */
#define DR_GEMM_BLOCKS 4

/* The scratch of a group (rows: the most trajectories a group has) and the group's slices of the
 * job, uploaded when it begins (grown as a group needs). */
enum {
    DR_JOB,
    DR_RL,
    DR_RT,
    DR_BR,
    DR_Y,
    DR_SEG,
    DR_Z,
    DR_F,
    DR_KB,
    DR_P,
    DR_O,
    DR_G,
    DR_YB0,
    DR_YB1,
    DR_YBAR,
    DR_CB,
    DR_INP,
    DR_TH,
    DR_NR, /* per block of the group, its rows still going back at the step */
    DR_DT, /* the weight sums by GEMM: the gathered deltas, inputs and their products */
    DR_XT,
    DR_GS,
    DR_NBUF
};
enum {
    DS_TAU,
    DS_YS,
    DS_EV,
    DS_COT,
    DS_TS,
    DS_N
};

typedef struct dev_rev {
    cln_backend *be;
    const cln_dev_launch *L;
    const cln_rev_job *job;
    clnode_precision prec;
    clnode_gemm_mode mode;
    size_t es;
    /* the pass's sizes (cl/cln_reverse_kernels.h) */
    size_t N, ldz, S, S1, nl, n_in, ns, every, E, sumw, maxw, ntheta, slots, n_ts, ts_stride;
    int time_input;
    size_t in[CLN_MAX_LAYERS], out[CLN_MAX_LAYERS], woff[CLN_MAX_LAYERS];
    size_t gb, rows; /* blocks per group; rows of the scratch */
    int by_gemm;     /* the weight sums through the GEMM (cln_dev_launch.rev_sums_by_gemm) */
    size_t kmax;     /* the most terms of a block's step: S1 x CLNODE_GRADIENT_BLOCK */
    size_t *nr;      /* per block of the group, its rows still going back at the step (the host's
                        copy of DR_NR: the sizes of the GEMMs) */
    cln_buf *K, *W[CLN_MAX_LAYERS], *WT[CLN_MAX_LAYERS], *bias[CLN_MAX_LAYERS], *scale;
    cln_buf *buf[DR_NBUF];
    cln_buf *slice[DS_N];
    size_t slice_cap[DS_N];
    /* a group's rows on the host: their trajectories (from the group's first) and steps in the
     * order of the positions, RL and BR as uploaded, and room to convert values to real */
    size_t *traj, *M;
    int64_t *hRL, *hBR;
    unsigned char *host;
    size_t host_cap;
    int yb1; /* DR_YB0 or DR_YB1: the buffer holding the cotangent of y_{n+1} */
    /* the stage whose argument's transpose is pending (-1: none), made by the launch of the next
     * stage down's last delta (dr_stage_vjp), and whether that stage's MLP went back (skip) */
    int arg, arg_skip;
    size_t k0, nk, Bg; /* the run: its first block, its blocks and trajectories */
    void *theta;       /* where the run's block sums go (rev_each's) */
} dev_rev;

#define DR_BUF(b)                                                                                  \
    {                                                                                              \
        CLN_ARG_BUF, (b), 0                                                                        \
    }
#define DR_I32(v)                                                                                  \
    {                                                                                              \
        CLN_ARG_I32, NULL, (long long)(v)                                                          \
    }
#define DR_I64(v)                                                                                  \
    {                                                                                              \
        CLN_ARG_I64, NULL, (long long)(v)                                                          \
    }
/* One reverse kernel over nx by ny (by nz) items (nothing when one is 0), with the arguments
 * listed. */
#define DR_RUN(d, k, act, nx, ny, ...) DR_RUN3(d, k, act, nx, ny, 1, __VA_ARGS__)
#define DR_RUN3(d, k, act, nx, ny, nz, ...)                                                        \
    dr_run((d), (k), (act), (nx), (ny), (nz), (const cln_dev_arg[]){__VA_ARGS__},                  \
           sizeof((const cln_dev_arg[]){__VA_ARGS__}) / sizeof(cln_dev_arg))

static inline clnode_status dr_run(dev_rev *d, cln_rev_kernel k, int act, size_t nx, size_t ny,
                                   size_t nz, const cln_dev_arg *args, size_t nargs)
{
    if (nx == 0 || ny == 0 || nz == 0)
        return CLNODE_OK;
    const size_t n[3] = {nx, ny, nz};
    d->be->launches++;
    return d->L->rev_launch(d->be, d->prec, k, act, args, nargs, n);
}

static inline cln_buf *B_(const dev_rev *d, int which)
{
    return d->buf[which];
}

/* ---- device_reverse.c: the steps of a reverse pass that the bare loop runs too ---- */

/* bytes from src into the device buffer b. */
clnode_status dr_write(dev_rev *d, cln_buf *b, size_t bytes, const void *src);
/* Host room for `bytes` in d->host (grow-only). */
clnode_status dr_host(dev_rev *d, size_t bytes);
/* buf[0 .. n) = 0. */
clnode_status dr_zero(dev_rev *d, cln_buf *buf, size_t n);
/* Where stage i's layer l's P and O block starts. */
size_t dr_poff(const dev_rev *d, size_t i, size_t l);
/* Stage i's MLP on rows [0, A) (the forward recomputation, keeping each layer's P and O). */
clnode_status dr_mlp(dev_rev *d, size_t i, size_t A);
/* The step's parameter sums of the group's nk blocks (weights, biases, scale). */
clnode_status dr_sums(dev_rev *d, size_t s, size_t nk);

#endif /* CLN_DEVICE_REVERSE_INTERNAL_H */
