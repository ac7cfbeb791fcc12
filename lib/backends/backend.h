/* lib/backends/: the devices: the ops table every backend implements (this file), the registry
 * of backends and device strings, the device list, and one folder per backend. */
/* backend.h - the interface every compute backend implements (content + ops, as SUNDIALS'
 * N_Vector): buffers, the vector field's two building blocks (GEMM, bias + activation) and the
 * three solver passes of cl/cln_step.h. The driver (solver.c) is written once against it and never
 * asks which backend it runs on.
 *
 * All operations are enqueued in order on the backend's single stream; only buf_read and
 * count_active wait for the device. Element offsets and leading dimensions count elements of the
 * solve's precision.
 */
#ifndef CLN_BACKEND_H
#define CLN_BACKEND_H

#include <stdint.h>

#include "backends/model_view.h"
#include "cln_layout.h"
#include "core/internal.h"

typedef struct cln_buf cln_buf; /* backend-defined */

/* How a backend's GEMM computes in CLNODE_GEMM_TF32 mode: the TF32 emulation with the ordered
 * sums (the host and OpenCL, the same bits), or the tensor cores (CUDA). A tf32 solve is reversed
 * only on a backend of its own kind, since the reverse pass recomputes its steps. */
typedef enum cln_tf32_kind {
    CLN_TF32_EMULATED = 0,
    CLN_TF32_TENSOR_CORES = 1
} cln_tf32_kind;

/* Everything a solve keeps on the device, allocated once per solve by the driver (the saved
 * steps' STT and STY excepted: they grow, see below). */
typedef struct cln_solve_dev {
    clnode_precision prec;
    clnode_gemm_mode gemm_mode;
    size_t esize; /* sizeof(real) */
    size_t B;     /* rows of every batch buffer: the batch padded to the backend's row_align */
    size_t Breal; /* trajectories actually solved (the padding rows start frozen) */
    /* Rows the passes and products of a step run over: [0, live), a multiple of row_align
     * (<= B). B until the driver compacts the batch (cln_compact in solver_compact.c): it then
     * moves the running trajectories' rows to the front with swap_rows and lowers live; every row
     * from live on is frozen. */
    size_t live;
    size_t N, ldz, stages;
    /* The first stage a step evaluates: 1 for FSAL methods (f(t, y) is kept from the last
     * accepted step), else 0. */
    size_t first_stage;
    size_t num_layers;
    const size_t *sizes; /* num_layers + 1 */
    size_t max_in;       /* the widest layer input, max sizes[l] for l < num_layers */
    size_t max_weights;  /* the largest weight matrix, max sizes[l] * sizes[l + 1] */
    int act[CLN_MAX_LAYERS];
    cln_buf *W[CLN_MAX_LAYERS], *bias[CLN_MAX_LAYERS]; /* bias[i] may be NULL */
    /* The model's output scale: scale_n values (1, or N: one per component) in the state
     * precision, which the last layer's activated output is multiplied by (out_scale op);
     * scale_n 0 and scale NULL: no scale, and nothing multiplied. Written by the driver at every
     * solve (never part of what a backend keeps of a model between solves). */
    cln_buf *scale;
    size_t scale_n;
    cln_buf *Y, *F, *Z, *H[2];
    cln_buf *CR, *CI, *RS, *IS;
    /* STT and STY hold KI.steps_cap points per row. That capacity grows with the steps the solve
     * takes (cln_grow_steps in solver_save.c): between two groups of steps the driver may replace
     * both buffers by larger ones (the old rows copied with copy_rows), write the new capacity
     * into CI and call solve_rebind. */
    cln_buf *TS, *TSOUT, *STT, *STY; /* may be 1-element placeholders when unused */
    cln_buf *PAIRS; /* compaction: the row pairs swap_rows swaps, int32 (i, j) each */
    void *be_data;  /* the backend's own per-solve state */
    unsigned long long model_serial; /* the model's (clnode_model.serial); 0: not known */
} cln_solve_dev;

/* ---- the reverse pass (clnode/gradient.h), driven by lib/solver/gradient.c ---- */

/* Where the cotangent of each saved point enters: cln_rev_event (cln_layout.h). */

/* One reverse pass over a kept solve: everything in host memory, reals in the state precision
 * (the solve's constants and parameters as its kernels saw them). */
typedef struct cln_rev_job {
    clnode_precision prec;
    clnode_gemm_mode gemm_mode;
    const void *K;         /* cln_consts */
    const cln_iconsts *KI; /* N, ldz, stages, ssal, dense_form, time_input, n_ts, ts_stride */
    size_t num_layers;
    const size_t *sizes; /* num_layers + 1 */
    int act[CLN_MAX_LAYERS];
    const void *W[CLN_MAX_LAYERS];    /* sizes[l + 1] x sizes[l] */
    const void *bias[CLN_MAX_LAYERS]; /* NULL: none */
    const void *scale;                /* scale_n values; NULL (scale_n 0): none */
    size_t scale_n;
    size_t n_in; /* conditioning inputs (the last n_in columns of a stage's argument) */
    /* the tape (cln_tape of lib/solver/solution.h) */
    size_t B, every;
    const size_t *off_t, *off_y;
    const void *tau, *ys, *inputs, *ts;
    /* the cotangents: trajectory b's row at cot + b * slots * N, its events ev[off_ev[b] ..
     * off_ev[b + 1]) in the row's order */
    size_t slots;
    const double *cot;
    const size_t *off_ev;
    const cln_rev_event *ev;
    /* the results: each trajectory's rows of ybar (B x N) and cbar (B x n_in), and each block's
     * parameter cotangent, ntheta values laid out as clnode_gradient_params */
    double *ybar, *cbar;
    /* From the caller's device arrays (clnode/device_gradient.h; a device backend's pass only):
     * with cot NULL, the cotangents in the state precision in the buffer cot_dev from element
     * cot_off (cot's layout); with ybar and cbar NULL, trajectory b's rows of them into ybar_dev
     * at element ybar_off + b N and cbar_dev at cbar_off + b n_in, in the state precision (a
     * NULL buffer: not wanted). */
    cln_buf *cot_dev, *ybar_dev, *cbar_dev;
    size_t cot_off, ybar_off, cbar_off;
    size_t ntheta;
    size_t w_off[CLN_MAX_LAYERS], b_off[CLN_MAX_LAYERS], s_off;
} cln_rev_job;

/* The steps of a checkpoint group of a job: checkpoint_every, or its longest trajectory's steps
 * when fewer (at least 1). */
static inline size_t cln_rev_seg_len(const cln_rev_job *job)
{
    size_t longest = 0;
    for (size_t b = 0; b < job->B; ++b) {
        const size_t m = job->off_t[b + 1] - job->off_t[b] - 1;
        longest = m > longest ? m : longest;
    }
    return job->every < longest ? job->every : (longest ? longest : 1);
}

/* A run of the reverse schedule over blocks [k0, k0 + nk) of a job (rev_each). */
typedef clnode_status (*cln_rev_run_fn)(const void *arg, void *run, size_t k0, size_t nk);

/* The per-step operations of the reverse pass, on a run of consecutive blocks (rev_each). The
 * schedule (lib/solver/reverse_schedule.c) is the one place that orders the rows, aligns them at
 * their last step, shrinks the active rows, recomputes the checkpoint groups and goes back
 * through the steps and their stages; each operation does what its name says for the run's rows
 * [0, A) in that order (rows: the positions after the order, most steps first):
 *   rows      the run's Bg trajectories: arrays of Bg for their trajectory (from the run's
 *             first) and steps, which the schedule fills in the order of the positions;
 *   setup     the run's tape, events, cotangents and inputs in place; zero cotangents and sums;
 *   group     group q's kept states into the segment (checkpoint_every > 1);
 *   begin     each row's times and state at the step's start: CLN_REV_KEPT or CLN_REV_SEG
 *             for reverse step s, CLN_REV_SUB for sub-step j of group q (cln_layout.h);
 *   stage     stage i's argument and, where anything reads its f, its MLP, kept for the VJP;
 *   y1        y1 of sub-step j of group q into the segment;
 *   events    the step's saved points and dense outputs, and y1's transpose;
 *   stage_vjp stage i's vector-Jacobian product (its MLP's and its argument's);
 *   sums      the weight sums of reverse step s (the rows with more than s steps);
 *   next      the cotangent of y_n becomes that of y_{n+1} for the next step;
 *   finish    rows [from, to) are back at their start: their points at y0, their results;
 *   results   the run's block sums (and rows) where rev_each's caller reads them.
 * A backend may do part of an operation in the launches of the one before or after it in the
 * schedule's order where nothing between reads or writes what it touches (a device: stage 0's
 * argument in begin's, stage i + 1's in stage i's last activation, stage i's argument transpose
 * in stage i - 1's first delta, the rows still going back in begin's: lib/backends/device/). */
typedef struct cln_rev_ops {
    clnode_status (*rows)(void *run, size_t k0, size_t nk, size_t Bg, size_t **traj,
                          size_t **steps);
    clnode_status (*setup)(void *run, size_t Bg);
    clnode_status (*group)(void *run, size_t A, size_t q);
    clnode_status (*begin)(void *run, size_t A, int mode, size_t s, size_t q, size_t j);
    clnode_status (*stage)(void *run, size_t i, size_t A);
    clnode_status (*y1)(void *run, size_t A, size_t q, size_t j);
    clnode_status (*events)(void *run, size_t A, size_t s);
    clnode_status (*stage_vjp)(void *run, size_t i, size_t A);
    clnode_status (*sums)(void *run, size_t A, size_t s);
    clnode_status (*next)(void *run, size_t A);
    clnode_status (*finish)(void *run, size_t from, size_t to);
    clnode_status (*results)(void *run);
} cln_rev_ops;

/* ---- the tangent pass (clnode/tangent.h), driven by lib/solver/tangent.c ---- */

/* One chunk of directions of a tangent pass over a kept solve: the reverse pass's job for the
 * model, the tape and the saved points' events (its cotangents and results unused), and the
 * chunk's directions in the state precision. */
typedef struct cln_tan_job {
    const cln_rev_job *rev;
    size_t ndir;         /* directions of the chunk */
    const void *dy0;     /* ndir x B x N; NULL: zero */
    const void *dinputs; /* ndir x B x n_in; NULL: zero */
    const void *dparams; /* ndir x rev->ntheta (clnode_gradient_params' layout); NULL: zero */
    double *out;         /* ndir x B x slots x N: the chunk's tangents of the saved points */
} cln_tan_job;

/* The per-step operations of the tangent pass, on a run of consecutive blocks (tan_each). The
 * schedule (lib/solver/tangent_schedule.c) orders the rows (most steps first, as the reverse
 * pass's), walks the steps forwards from y0 and shrinks the active rows [0, A); each operation
 * does what its name says for those rows, every direction of the chunk at once:
 *   rows      the run's Bg trajectories: arrays for their trajectory (from the run's first) and
 *             steps, which the schedule fills in the order of the positions;
 *   setup     the rows' state at step 0 (their tape's first kept state) and its tangents (dy0),
 *             the inputs' columns of the stage arguments and of their tangents, the events;
 *   points    the saved points of the state after p steps (the tangents of y_p);
 *   begin     each row's times of its step n;
 *   stage     stage i's argument and MLP (the reverse pass's op: what the JVP reads is kept);
 *   stage_jvp stage i's tangents: its argument's, then the MLP's Jacobian-vector product;
 *   y1        y_{n+1} and its tangents;
 *   dense     the dense outputs inside step n (their tangents, from y_n's, y_{n+1}'s and k's);
 *   next      y_{n+1} and its tangents become the state of the next step;
 *   results   the run's tangents where tan_each's caller reads them. */
typedef struct cln_tan_ops {
    clnode_status (*rows)(void *run, size_t k0, size_t nk, size_t Bg, size_t **traj,
                          size_t **steps);
    clnode_status (*setup)(void *run, size_t Bg);
    clnode_status (*points)(void *run, size_t A, size_t p);
    clnode_status (*begin)(void *run, size_t A, size_t n);
    clnode_status (*stage)(void *run, size_t i, size_t A);
    clnode_status (*stage_jvp)(void *run, size_t i, size_t A);
    clnode_status (*y1)(void *run, size_t A);
    clnode_status (*dense)(void *run, size_t A, size_t n);
    clnode_status (*next)(void *run, size_t A);
    clnode_status (*results)(void *run);
} cln_tan_ops;

typedef struct cln_backend_ops {
    const char *name;   /* "host", "opencl", "cuda": for messages and logs, never asked */
    cln_tf32_kind tf32; /* what its gemm computes in CLNODE_GEMM_TF32 mode */
    void (*destroy)(cln_backend *be);
    int (*supports)(const cln_backend *be, clnode_precision prec);

    clnode_status (*buf_alloc)(cln_backend *be, size_t bytes, cln_buf **out);
    void (*buf_free)(cln_backend *be, cln_buf *buf); /* accepts NULL */
    clnode_status (*buf_write)(cln_backend *be, cln_buf *buf, size_t offset_bytes, size_t bytes,
                               const void *src);
    clnode_status (*buf_read)(cln_backend *be, cln_buf *buf, size_t offset_bytes, size_t bytes,
                              void *dst);

    /* C[m x n] = A[m x k] . B[n x k]^T in precision `prec` and GEMM mode `mode` (row-major,
     * offsets and leading dimensions in elements). m, n or k may be 0. */
    clnode_status (*gemm)(cln_backend *be, clnode_precision prec, clnode_gemm_mode mode, size_t m,
                          size_t n, size_t k, cln_buf *A, size_t a_off, size_t lda, cln_buf *Bm,
                          size_t b_off, size_t ldb, cln_buf *C, size_t c_off, size_t ldc);
    /* C[i][j] = act(C[i][j] + bias[j]) for an m x n block (bias may be NULL). */
    clnode_status (*bias_act)(cln_backend *be, cln_solve_dev *sd, cln_buf *C, size_t c_off,
                              size_t ldc, size_t m, size_t n, cln_buf *bias, int act);

    /* C[i][j] = cln_out_scale(C[i][j], CLN_OUT_SCALE_AT(sd->scale, sd->scale_n, j)) for an m x n
     * block (cl/cln_activation.h): the output scale after the last layer's bias + activation.
     * Called only when sd->scale_n != 0. */
    clnode_status (*out_scale)(cln_backend *be, cln_solve_dev *sd, cln_buf *C, size_t c_off,
                               size_t ldc, size_t m, size_t n);

    /* Per-solve set-up (kernels, arguments) after the driver allocated and filled sd; and its
     * release (accepts a half-built sd). */
    clnode_status (*solve_begin)(cln_backend *be, cln_solve_dev *sd);
    void (*solve_end)(cln_backend *be, cln_solve_dev *sd);
    /* cln_init_traj for every row (all B). */
    clnode_status (*init)(cln_backend *be, cln_solve_dev *sd);
    /* The automatic first step (cl/cln_dt0.h) for every row < live not frozen: phase 0,
     * cln_dt0_probe (Z from Y and f0 in F block 0, which it copies to block 1); phase 1,
     * cln_dt0_pick (RS.dt0 from Y, f0 in block 1 and f1 in block 0; f0 back into block 0). */
    clnode_status (*dt0)(cln_backend *be, cln_solve_dev *sd, int phase);
    /* cln_stage_elem of stage i for every (row < live, column < ldz). The GEMMs the driver
     * issues, stage_rhs, finish and count_active cover rows [0, live) too. */
    clnode_status (*stage)(cln_backend *be, cln_solve_dev *sd, int i);
    /* Optional (may be NULL): stage i and then F block i = MLP(Z) in one call, with the same
     * bits as `stage` followed by `gemm` and `bias_act` per layer (what the driver does when it
     * is NULL). */
    clnode_status (*stage_rhs)(cln_backend *be, cln_solve_dev *sd, int i);
    /* Optional (may be NULL): after the last layer's GEMM of stage i (i + 1 < stages) into F
     * block i, its bias + activation (where the layer has either) and the output scale, with the
     * same bits as bias_act and out_scale, and also stage i + 1's argument into Z, in one pass.
     * The layer loop (cln_mlp_layers) calls it when asked to fuse; else bias_act and out_scale. */
    clnode_status (*last_layer_fused)(cln_backend *be, cln_solve_dev *sd, int i);
    /* cln_finish_traj for every trajectory. */
    clnode_status (*finish)(cln_backend *be, cln_solve_dev *sd);
    /* Optional (may be NULL): n attempted steps (n <= group_steps), with the same bits as n times
     * stage_rhs (or stage and the MLP) for stages first_stage .. stages - 1 followed by finish,
     * which is what the driver does when it is NULL. A backend may take the rows in any order
     * and interleave the steps of different rows (every row's steps are its own). */
    clnode_status (*steps)(cln_backend *be, cln_solve_dev *sd, long n);
    /* Waits for the queue and counts the trajectories not yet frozen (rows < live); the only
     * read-back made while a solve runs, besides the compaction's (cln_compact). */
    clnode_status (*count_active)(cln_backend *be, cln_solve_dev *sd, size_t *active);
    /* Compaction: for each of the first npairs pairs (i, j) of sd->PAIRS, swaps the len_bytes
     * bytes at off_bytes + i * stride_bytes of buf with those at off_bytes + j * stride_bytes
     * (len_bytes <= stride_bytes, all multiples of 4). Enqueued like a kernel; allocates
     * nothing. */
    clnode_status (*swap_rows)(cln_backend *be, cln_solve_dev *sd, cln_buf *buf, size_t off_bytes,
                               size_t stride_bytes, size_t len_bytes, size_t npairs);

    /* Copies `rows` rows of len_bytes bytes from src (row r at src_off + r * src_stride) to dst
     * (row r at dst_off + r * dst_stride); dst and src are different buffers, len_bytes <= both
     * strides. Enqueued in order like a kernel (no host round trip of the data); allocates
     * nothing. The driver grows the saved steps with it (and packs them before reading back). */
    clnode_status (*copy_rows)(cln_backend *be, cln_buf *dst, size_t dst_off, size_t dst_stride,
                               cln_buf *src, size_t src_off, size_t src_stride, size_t len_bytes,
                               size_t rows);
    /* Optional (NULL: the backend reads sd's buffers at every enqueue, as the host does): the
     * driver replaced sd->STT and sd->STY during the solve (their capacity grew, between two
     * groups of steps); the kernels enqueued from now on must use the new buffers. Called at
     * most a few times per solve (the capacity doubles); allocates nothing. */
    clnode_status (*solve_rebind)(cln_backend *be, cln_solve_dev *sd);

    /* Optional (NULL: the backend solves from no caller's arrays, clnode/device_solve.h): a
     * buffer handle for a caller's array of the backend's kind (OpenCL: a cl_mem of the
     * context's cl_context; CUDA: a device pointer; the host: a host pointer) that holds at least
     * `bytes` bytes from byte `offset`, refused (CLNODE_ERR_INVALID_ARGUMENT, naming `what`)
     * where the backend can tell it does not. The handle covers the array from its start (the
     * caller passes `offset` to copy_rows and buf_read); buf_free releases the handle and never
     * the caller's memory. */
    clnode_status (*buf_adopt)(cln_backend *be, void *handle, size_t offset, size_t bytes,
                               const char *what, cln_buf **out);
    /* Optional (NULL with buf_adopt): cln_nonfinite_row (cl/cln_step.h) in precision prec for
     * rows [0, rows) of X (values at element off + row * ld, cols of them) into the int64 array
     * FLAG, enqueued like a kernel. */
    clnode_status (*nonfinite_rows)(cln_backend *be, clnode_precision prec, cln_buf *X, size_t off,
                                    size_t ld, size_t cols, size_t rows, cln_buf *FLAG);
    /* Optional (NULL with buf_adopt): cln_bad_save_row (cl/cln_step.h) in precision prec for
     * rows [0, rows) of the save times TS (cols of them from element row * ld) against the
     * intervals of the rows of RS (cln_rstate's tau0 and tau1; only with `within`) into the
     * int64 array FLAG, enqueued like a kernel. */
    clnode_status (*bad_save_ts)(cln_backend *be, clnode_precision prec, cln_buf *TS, size_t ld,
                                 size_t cols, size_t rows, cln_buf *RS, int within, cln_buf *FLAG);

    /* Optional (may be NULL): the device's floating-point facts as its driver reports them;
     * fields it cannot tell are left at -1. */
    void (*facts)(const cln_backend *be, clnode_device_facts *out);
    /* Optional (may be NULL): whether the backend still holds this solve's model from an earlier
     * solve of it (sd->model_serial, in sd's precision and GEMM mode and for sd's layers), which
     * solve_begin will then take over. The driver asks before it uploads the model, and when the
     * answer is yes it leaves the W and bias buffers unwritten. */
    int (*model_kept)(cln_backend *be, const cln_solve_dev *sd);
    /* Optional (may be NULL: the driver's layer loop, cln_mlp_layers, instead): F block 0 =
     * MLP(Z) for every row through the kernels stage_rhs uses, without the stage, after
     * solve_begin (the benchmarks' bare field; dt0_auto's probe). Reads W, bias, Z and CI (B,
     * N, ldz) of sd and writes F and H; Y, CR, RS and IS must exist but are not read. */
    clnode_status (*rhs)(cln_backend *be, cln_solve_dev *sd);

    /* Optional (NULL: the backend has no reverse pass): the reverse pass of a job, whose
     * schedule (lib/solver/reverse_schedule.c) runs over the backend's per-step operations.
     * rev_begin prepares what every block reads (the packed weights, the threads' scratch) into
     * *state, says in *group how many blocks rev_each takes at a time (at least 1) and in *rev
     * the per-step operations for the job's precision;
     * rev_each hands blocks [block0, block0 + nblocks), nblocks <= *group, of
     * CLNODE_GRADIENT_BLOCK trajectories each, to fn in runs of consecutive blocks (the host:
     * a block per run on its threads; a device: one run): fn(arg, run, k0, nk) goes through
     * them with rev's operations on `run`, which write their trajectories' rows of job->ybar and
     * cbar and block k's parameter cotangent at theta + (k - block0) * ntheta (state precision),
     * each block summed in the order clnode/gradient.h states, whatever the threads or the
     * device; rev_end releases *state (accepts NULL). */
    clnode_status (*rev_begin)(cln_backend *be, const cln_rev_job *job, void **state, size_t *group,
                               const cln_rev_ops **rev);
    clnode_status (*rev_each)(cln_backend *be, void *state, size_t block0, size_t nblocks,
                              void *theta, cln_rev_run_fn fn, const void *arg);
    void (*rev_end)(cln_backend *be, void *state);
    /* Whether the reverse pass reads the cotangents from and writes the rows of ybar and cbar
     * into buffers of the device (cln_rev_job's cot_dev, ybar_dev, cbar_dev) when the job's host
     * arrays are NULL (0: it reads and writes the host arrays alone). */
    int rev_device_arrays;

    /* Optional (NULL: the backend has no tangent pass): a chunk of directions of the tangent
     * pass, whose schedule (lib/solver/tangent_schedule.c) runs over the backend's per-step
     * operations: as rev_begin, rev_each and rev_end, tan_each handing blocks [block0, block0 +
     * nblocks) to fn in runs, which write their trajectories' rows of job->out. */
    clnode_status (*tan_begin)(cln_backend *be, const cln_tan_job *job, void **state, size_t *group,
                               const cln_tan_ops **tan);
    clnode_status (*tan_each)(cln_backend *be, void *state, size_t block0, size_t nblocks,
                              cln_rev_run_fn fn, const void *arg);
    void (*tan_end)(cln_backend *be, void *state);
} cln_backend_ops;

struct cln_backend {
    const cln_backend_ops *ops;
    clnode_context *ctx; /* for errors and logging */
    char device_name[256];
    /* What the device's arithmetic depends on besides the library: the device, its driver and
     * their versions. The probe results are cached across processes under it; "" (the default):
     * never cached. */
    char cache_id[512];
    long group_steps; /* steps enqueued between two active-count read-backs */
    size_t row_align; /* the driver pads the batch to a multiple of this many rows */
    long syncs;       /* host-device synchronisations so far (statistics) */
    /* Commands enqueued so far on a device (statistics, clnode_context_launches): kernels, device
     * copies and GEMMs (each GEMM one, whatever its library enqueues for it), and the GEMMs among
     * them. The device protocol (lib/backends/device/) counts them; the host launches none. */
    long launches, gemms;
};

/* Whether `rows` rows of len bytes, `stride` bytes apart from byte `off`, lie inside a buffer of
 * `size` bytes (copy_rows' bounds, without overflow). */
static inline int cln_rows_fit(size_t size, size_t off, size_t stride, size_t len, size_t rows)
{
    if (rows == 0 || len == 0)
        return 1;
    return len <= stride && off <= size && len <= size - off &&
           rows - 1 <= (size - off - len) / stride;
}

/* The vector field on Z for the live rows into F block i, layer by layer through the backend's
 * gemm and bias_act ops (bias + activation only where a layer has either), then the output
 * scale (out_scale op) where the solve has one: the driver's own loop, and the backends'
 * stage_rhs after their stage. With fuse_next non-zero, where the backend has a last_layer_fused
 * op and stage i + 1 exists, the last layer's bias + activation and output scale are that op
 * instead (a pass that also writes stage i + 1's argument). Written once, in
 * lib/backends/mlp.c; it calls nothing but the ops table. */
clnode_status cln_mlp_layers(cln_backend *be, cln_solve_dev *sd, int i, int fuse_next);

/* ---- contexts (lib/backends/context.c) ---- */

/* Creates a context whose backend `make` builds (the device-string constructor and the adopting
 * constructors of backends share it); it reads no stored probe result (the public constructors in
 * backends/context_open.c do). On failure everything is released and *out is NULL. */
typedef clnode_status (*cln_backend_factory)(clnode_context *ctx, void *user, cln_backend **out);
clnode_status cln_context_create_with(const clnode_context_options *opts, cln_backend_factory make,
                                      void *user, clnode_context **out);

/* cln_check_gemm_mode, then whether the context's device computes in `prec`
 * (CLNODE_ERR_NO_FP64 for fp64, else CLNODE_ERR_UNSUPPORTED): what a solve, a probe and a
 * benchmark loop check before they touch the device (backends/context.c). */
clnode_status cln_check_device_precision(clnode_context *ctx, clnode_precision prec,
                                         clnode_gemm_mode mode, const char *what);

/* Backends register their device strings, capabilities, enumeration and constructor in the
 * registry (backends/registry.h); nothing else names them. */

/* Compiles the embedded CUDA kernels (cl/clnode_cuda.cu) through NVRTC as the CUDA backend does
 * for a device of compute capability cc_major.cc_minor: a CUBIN when NVRTC knows that
 * architecture (*is_cubin = 1), else PTX for the newest one below it (NUL-terminated text). Needs
 * no GPU and no driver. *image is malloc'ed (the caller frees it). Errors: CLNODE_ERR_BUILD (with
 * the NVRTC log in the message), CLNODE_ERR_OUT_OF_MEMORY, CLNODE_ERR_NO_DEVICE when NVRTC cannot
 * be loaded ("cuda not available: ..."). Only in builds with the CUDA backend (CLNODE_HAVE_CUDA).
 */
clnode_status cln_cuda_compile(clnode_context *ctx, const char *device, int cc_major, int cc_minor,
                               clnode_precision prec, char **image, size_t *size, int *is_cubin);

#endif /* CLN_BACKEND_H */
