/* lib/backends/device/: what the device backends (OpenCL, CUDA) share above their launches. */
/* device_proto.h - the kernel protocol of the device backends, written once over a launch table.
 *
 * A device backend enqueues the kernels of cl/ (cln_init, cln_stage, cln_bias_act,
 * cln_out_scale_pass, cln_bias_act_stage, cln_finish, cln_count_active, cln_swap_rows) on one
 * in-order queue. What is the same on every device lives here: the guards of every op (the
 * INT32 bounds of the kernels' arguments, the blocks inside their buffers, the activation codes),
 * the per-solve state and its z_ready protocol (below), the active count's read-back check and
 * the rebinding of the saved steps. What differs, the launch of one kernel with its arguments,
 * is the backend's launch table (cln_dev_launch), which the protocol calls with its arguments
 * already checked.
 *
 * The z_ready protocol. A step enqueues, per stage i: the GEMM of each layer, the bias +
 * activation of each hidden layer, and one cln_bias_act_stage launch that does the last layer's
 * bias + activation, its output scale and the argument of stage i + 1 in one pass (the
 * last_layer_fused op, which the driver's layer loop calls); after the last stage, its bias +
 * activation, then cln_finish, which also writes the argument of the next step's first stage. So
 * the argument of a stage is normally in Z before the stage is asked for: z_ready names the stage
 * whose argument Z holds (-1: none; cln_stage then runs). It stays valid across the compaction's
 * row swaps (they move the rows of Y, F, Z, RS and IS together).
 *
 * A backend using it begins its backend struct with a cln_dev_backend (its `launch` set at
 * creation) and puts the cln_dev_* functions in its ops table.
 */
#ifndef CLN_DEVICE_PROTO_H
#define CLN_DEVICE_PROTO_H

#include "backends/backend.h"

/* The reverse pass's kernels (cl/cln_reverse_kernels.h, driven by device_reverse.c), by index. */
typedef enum cln_rev_kernel {
    CLN_RK_ZERO,
    CLN_RK_INPUTS,
    CLN_RK_GROUP,
    CLN_RK_BEGIN,
    CLN_RK_ACT, /* one kernel per activation in OpenCL */
    CLN_RK_Y1,
    CLN_RK_EVENTS,
    CLN_RK_DELTA, /* one kernel per activation in OpenCL */
    CLN_RK_ARG,
    CLN_RK_WSUM,
    CLN_RK_FINISH,
    CLN_RK_GATHER,
    CLN_RK_WADD,
    CLN_RK_BSUM,
    CLN_RK_SSUM,
    CLN_RK_ACT_NEXT,   /* the last layer's activation and the next stage's argument */
    CLN_RK_DELTA_ARG,  /* a stage argument's transpose and the last layer's delta below it */
    CLN_RK_GEMM_ACT,   /* a recomputed layer's product with its bias and activation */
    CLN_RK_GEMM_DELTA, /* a layer's transposed product with the delta of the layer below */
    /* the tangent pass's (cl/cln_tangent_kernels.h) */
    CLN_RK_TAN_BEGIN,
    CLN_RK_TAN_STAGE,
    CLN_RK_TAN_TERMS,
    CLN_RK_TAN_LAYER,
    CLN_RK_TAN_OUT,
    CLN_RK_TAN_Y1,
    CLN_RK_TAN_POINTS,
    CLN_RK_TAN_DENSE,
    /* a solve from device arrays: y0's and the inputs' finiteness (cl/cln_step.h) */
    CLN_RK_NONFINITE,
    CLN_RK_BAD_SAVE_TS, /* and its save times' (cl/cln_step.h) */
    CLN_RK_SCATTER,     /* the reverse pass's rows into the caller's arrays */
    CLN_RK_COUNT
} cln_rev_kernel;

/* Their names in cl/clnode.cl and cl/clnode_cuda.cu ("cln_rev_act" and "cln_rev_delta": OpenCL's
 * kernels add "_<activation>", as cln_bias_act's). */
extern const char *const cln_rev_kernel_names[CLN_RK_COUNT];

/* One argument of a reverse kernel, in the kernel's order: a buffer (NULL: none, never read), an
 * int or a 64-bit integer (cln_long). */
typedef enum cln_dev_arg_kind {
    CLN_ARG_BUF,
    CLN_ARG_I32,
    CLN_ARG_I64
} cln_dev_arg_kind;
typedef struct cln_dev_arg {
    cln_dev_arg_kind kind;
    cln_buf *buf;
    long long v;
} cln_dev_arg;

/* The launches of one device backend. `state` is the backend's own per-solve state (what its
 * solve_begin made: the program, the work sizes, the arguments that stay for the solve). Every
 * launch is called with its arguments checked (cln_dev_* below); it enqueues and returns. */
typedef struct cln_dev_launch {
    const char *api; /* "OpenCL", "CUDA": for messages */
    /* How the reverse pass takes a step's weight sums (device_reverse.h), with the same bits
     * wherever the backend's strict GEMM is the ordered one: 1, through the backend's GEMM (a
     * gather of each block's factors, one product per block: a tuned GEMM, CLBlast's); 0, one
     * kernel (cln_rev_wsum: a thread per weight and block, as the ordered GEMM kernel of CUDA
     * computes its elements). */
    int rev_sums_by_gemm;
    /* The most rows (trajectories still going back) for which the reverse pass takes a step's
     * products of strict GEMM mode itself, each with the element-wise work beside it inside it
     * (CLN_RK_GEMM_ACT, CLN_RK_GEMM_DELTA: cl/cln_gemm.h's ordered sum, the bits of the backend's
     * strict GEMM), instead of the backend's GEMM and an element-wise launch: fewer launches
     * where a launch costs more than the product, a library's tuned GEMM above. 0: never. */
    size_t rev_fused_rows;
    /* The size in bytes of a buffer of the backend. */
    size_t (*buf_size)(const cln_buf *b);
    /* Per-solve set-up after the B x ldz guard: the program of sd's precision, the launch sizes,
     * the arguments that stay; *state is released by state_free (also on failure). */
    clnode_status (*solve_begin)(cln_backend *be, cln_solve_dev *sd, void **state);
    void (*state_free)(void *state);
    /* cln_init over every row. */
    clnode_status (*init)(cln_backend *be, cln_solve_dev *sd, void *state);
    /* cln_dt0 of phase 0 (the probe's argument into Z) or 1 (the first step into RS) over the
     * live rows (cl/cln_dt0.h). */
    clnode_status (*dt0)(cln_backend *be, cln_solve_dev *sd, void *state, int phase);
    /* cln_stage of stage i over (live row, column of Z). */
    clnode_status (*stage)(cln_backend *be, cln_solve_dev *sd, void *state, int i);
    /* cln_finish over the live rows. */
    clnode_status (*finish)(cln_backend *be, cln_solve_dev *sd, void *state);
    /* cln_bias_act of activation act over an m x n block of C (bias NULL: none). */
    clnode_status (*bias_act)(cln_backend *be, void *state, cln_buf *C, size_t c_off, size_t ldc,
                              size_t m, size_t n, cln_buf *bias, int act);
    /* cln_out_scale_pass over an m x n block of C with sd's scale. */
    clnode_status (*out_scale)(cln_backend *be, cln_solve_dev *sd, void *state, cln_buf *C,
                               size_t c_off, size_t ldc, size_t m, size_t n);
    /* cln_bias_act_stage of stage i over (column of Z, live row): the last layer's bias (NULL:
     * none) and activation act where `apply`, sd's output scale, stage i + 1's argument. */
    clnode_status (*bias_act_stage)(cln_backend *be, cln_solve_dev *sd, void *state, int i,
                                    cln_buf *bias, int act, int apply);
    /* cln_count_active over the live rows, then waits for the queue and reads the count. */
    clnode_status (*count)(cln_backend *be, cln_solve_dev *sd, void *state, long *count);
    /* cln_swap_rows: npairs pairs of sd->PAIRS, len_words 4-byte words at off_words +
     * row * stride_words of buf. */
    clnode_status (*swap)(cln_backend *be, cln_solve_dev *sd, void *state, cln_buf *buf,
                          size_t off_words, size_t stride_words, size_t len_words, size_t npairs);
    /* One rectangular device copy (copy_rows, arguments checked). */
    clnode_status (*copy)(cln_backend *be, cln_buf *dst, size_t dst_off, size_t dst_stride,
                          cln_buf *src, size_t src_off, size_t src_stride, size_t len, size_t rows);
    /* sd->STT and sd->STY were replaced: cln_finish's arguments again. */
    clnode_status (*rebind)(cln_backend *be, cln_solve_dev *sd, void *state);
    /* The reverse pass (device_reverse.h): reverse kernel `kernel` of precision prec (its program
     * built on first use; act: the activation of CLN_RK_ACT and CLN_RK_DELTA) over an n[0]
     * (fastest) by n[1] by n[2] range, each at least 1, with `nargs` arguments in the kernel's
     * order. */
    clnode_status (*rev_launch)(cln_backend *be, clnode_precision prec, cln_rev_kernel kernel,
                                int act, const cln_dev_arg *args, size_t nargs, const size_t n[3]);
    /* The device's global memory and the largest buffer it allocates, in bytes (0: unknown). */
    void (*memory)(cln_backend *be, size_t *total, size_t *max_buffer);
} cln_dev_launch;

/* The first member of a device backend's struct. */
typedef struct cln_dev_backend {
    cln_backend base;
    const cln_dev_launch *launch;
} cln_dev_backend;

/* The ops of cln_backend_ops (backend.h) that the protocol implements. */
clnode_status cln_dev_solve_begin(cln_backend *be, cln_solve_dev *sd);
void cln_dev_solve_end(cln_backend *be, cln_solve_dev *sd);
clnode_status cln_dev_init(cln_backend *be, cln_solve_dev *sd);
clnode_status cln_dev_dt0(cln_backend *be, cln_solve_dev *sd, int phase);
clnode_status cln_dev_stage(cln_backend *be, cln_solve_dev *sd, int i);
clnode_status cln_dev_stage_rhs(cln_backend *be, cln_solve_dev *sd, int i);
clnode_status cln_dev_finish(cln_backend *be, cln_solve_dev *sd);
clnode_status cln_dev_bias_act(cln_backend *be, cln_solve_dev *sd, cln_buf *C, size_t c_off,
                               size_t ldc, size_t m, size_t n, cln_buf *bias, int act);
clnode_status cln_dev_out_scale(cln_backend *be, cln_solve_dev *sd, cln_buf *C, size_t c_off,
                                size_t ldc, size_t m, size_t n);
clnode_status cln_dev_last_layer_fused(cln_backend *be, cln_solve_dev *sd, int i);
clnode_status cln_dev_count_active(cln_backend *be, cln_solve_dev *sd, size_t *active);
clnode_status cln_dev_swap_rows(cln_backend *be, cln_solve_dev *sd, cln_buf *buf, size_t off,
                                size_t stride, size_t len, size_t npairs);
clnode_status cln_dev_copy_rows(cln_backend *be, cln_buf *dst, size_t dst_off, size_t dst_stride,
                                cln_buf *src, size_t src_off, size_t src_stride, size_t len,
                                size_t rows);
clnode_status cln_dev_solve_rebind(cln_backend *be, cln_solve_dev *sd);
clnode_status cln_dev_nonfinite_rows(cln_backend *be, clnode_precision prec, cln_buf *X, size_t off,
                                     size_t ld, size_t cols, size_t rows, cln_buf *FLAG);
clnode_status cln_dev_bad_save_ts(cln_backend *be, clnode_precision prec, cln_buf *TS, size_t ld,
                                  size_t cols, size_t rows, cln_buf *RS, int within, cln_buf *FLAG);
clnode_status cln_dev_rhs(cln_backend *be, cln_solve_dev *sd);

/* The designated initializers of the ops above, for a device backend's cln_backend_ops. */
#define CLN_DEV_PROTO_OPS                                                                          \
    .bias_act = cln_dev_bias_act, .out_scale = cln_dev_out_scale,                                  \
    .solve_begin = cln_dev_solve_begin, .solve_end = cln_dev_solve_end, .init = cln_dev_init,      \
    .dt0 = cln_dev_dt0, .stage = cln_dev_stage, .stage_rhs = cln_dev_stage_rhs,                    \
    .last_layer_fused = cln_dev_last_layer_fused, .finish = cln_dev_finish,                        \
    .count_active = cln_dev_count_active, .swap_rows = cln_dev_swap_rows,                          \
    .copy_rows = cln_dev_copy_rows, .solve_rebind = cln_dev_solve_rebind,                          \
    .nonfinite_rows = cln_dev_nonfinite_rows, .bad_save_ts = cln_dev_bad_save_ts

/* Whether elements [off, off + (rows - 1) ld + cols) of esize bytes each lie inside a buffer of
 * `size` bytes (without overflow). */
int cln_dev_block_fits(size_t size, size_t esize, size_t off, size_t rows, size_t cols, size_t ld);

/* What every device GEMM (the gemm op of backend.h) checks before it enqueues: the GEMM mode,
 * the precision on this device (CLNODE_ERR_NO_FP64 for fp64), leading dimensions that hold their
 * rows (lda, ldb >= k, ldc >= n) and the three blocks inside their buffers. *nothing is set when
 * m or n is 0: nothing to enqueue (and nothing else is checked). */
clnode_status cln_dev_gemm_check(cln_backend *be, clnode_precision prec, clnode_gemm_mode mode,
                                 size_t m, size_t n, size_t k, const cln_buf *A, size_t a_off,
                                 size_t lda, const cln_buf *Bm, size_t b_off, size_t ldb,
                                 const cln_buf *C, size_t c_off, size_t ldc, int *nothing);

/* The backend's own per-solve state (the launch table's `state`), NULL outside a solve. */
void *cln_dev_state(const cln_solve_dev *sd);

#endif /* CLN_DEVICE_PROTO_H */
