/* host_internal.h - what the files of the host backend share (not installed): its structs, its
 * tuning constants and the functions one file defines for another. The backend by concern:
 *   host.c          the ops table, creation and destruction, the description, the facts
 *   host_buffers.c  buffers and the GEMM scratch
 *   host_blas.c     the GEMM op: the ordered GEMM (host_gemm.c) or OpenBLAS
 *   host_fused.c    the fused pass's packed model, kept between solves
 *   host_passes.c   the passes over the batch (bias and activation, the solver's passes, steps)
 *   host_rows.c     the active count, compaction's swaps, the saved steps' copies
 *   host_rev.c      the reverse ops over host_reverse.inc
 *   host_devices.c  the device-string forms and the device list
 * The arithmetic itself is in the -O3 libraries of lib/meson.build (host_math and
 * host_act): host_math.inc, host_mlp.inc, host_reverse.inc, host_gemm.c, host_gemv.c.
 *
 * With the ordered GEMM in strict mode a stage and the vector field on it run as one fused pass
 * (host_mlp.inc) on weights packed once per model (kept between solves of the same model), the
 * rows the GEMM's tiles leave (a batch of one, say) on the row kernels of host_gemv.c. Rows are
 * shared between the threads of the backend's pool (host_pool.c) when a pass has enough work to
 * pay for the hand-off; a small batch runs inline on the caller's thread. No element's arithmetic
 * depends on the split. */
#ifndef CLN_HOST_INTERNAL_H
#define CLN_HOST_INTERNAL_H

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include <unistd.h>

#include "backends/host/host_gemm.h"
#include "backends/host/host_gemv.h"
#include "backends/host/host_math.h"
#include "backends/host/host_mlp.h"
#include "backends/host/host_pool.h"
#include "backends/host/host_reverse.h"
#include "backends/registry.h"
#include "cln_layout.h"

_Static_assert(CLN_HOST_MLP_MAX_LAYERS == CLN_MAX_LAYERS, "host_mlp.h sizes its arrays so");

/* Work (multiply-adds, or elements for the element-wise passes) below which a part of a pass is
 * not handed to another thread: a condition-variable hand-off costs some microseconds, and on a
 * busy machine a woken thread may wait much longer for a core. */
#define CLN_HOST_PART_FMAS ((size_t)1 << 20)
#define CLN_HOST_PART_ELEMS ((size_t)1 << 16)
#define CLN_HOST_PART_ROWS 64
/* The fused pass and whole steps hand another thread at least one row block: at the seed
 * model's ~72k multiply-adds a row a step, 24 rows are ~100 us of work, against a hand-off of a
 * few microseconds now that the pool's threads watch for the next job (host_pool.c). Two threads
 * took a batch of 48 in 1.5 ms where one took 2.4. */
#define CLN_HOST_FUSED_PART_ROWS CLN_HOST_MLP_ROWS
/* Parts split the rows at multiples of the GEMM's row tile. */
#define CLN_HOST_PART_ALIGN 6

/* Models whose weights and biases take up to this many bytes are kept packed between solves. */
#define CLN_HOST_KEEP_BYTES ((size_t)64 << 20)

struct cln_buf {
    size_t size;
    unsigned char *p;
    int borrowed; /* a caller's array (buf_adopt): never freed here */
};

/* Rows of every OpenBLAS call (see host_gemm). */
#define CLN_HOST_ROWS 16
/* Multiply-adds up to which OpenBLAS runs a GEMM on the calling thread (its SMP_THRESHOLD_MIN
 * 65536 times its default GEMM_MULTITHREAD_THRESHOLD 4). */
#define CLN_HOST_BLAS_SERIAL ((size_t)65536 * 4)

typedef struct host_backend {
    cln_backend base;
    int openblas;     /* 1: OpenBLAS in blocks of CLN_HOST_ROWS rows; 0: ordered GEMM */
    cln_gemm_isa isa; /* kernel of the ordered GEMM */
    void *scratch;    /* the transposed B of the ordered GEMM (TF32-rounded in tf32 mode) */
    size_t scratch_cap;
    void *scratch_a; /* tf32 mode: A rounded to TF32 */
    size_t scratch_a_cap;
    void *scratch_c; /* OpenBLAS: one block of C, column-major */
    size_t scratch_c_cap;
    cln_pool *pool;            /* the threads of every pass (1: all inline) */
    struct host_claim *claims; /* whole steps: one counter of claimed blocks per part */
    struct host_solve *kept;   /* the last solve's packed model, for the next solve of that model */
    cln_host_rev *rev_kept;    /* the last reverse pass's packed weights and scratch, for the next
                                  (host_rev_end keeps them up to CLN_HOST_KEEP_BYTES) */
    int rev_kept_f64;          /* and its precision */
} host_backend;

/* The next unclaimed row block of one part's rows (host_steps), on a cache line of its own. */
typedef struct host_claim {
    _Alignas(64) atomic_size_t next;
} host_claim;

/* Per-solve state (sd->be_data): the fused pass's packed model and activation scratch. At the end
 * of a solve it is kept by the backend, and the next solve takes it over when its model is the
 * same (precision, shapes, activations, and the same model object by its serial, whose upload the
 * driver then skips, or the weights and biases byte for byte, compared with the copy in src): a
 * series of small solves of one model packs it once. */
typedef struct host_solve {
    cln_host_mlp mlp;
    void *packed;           /* every layer's packed weights */
    cln_gemv_panel *panels; /* every layer's row-kernel panels */
    void *H;                /* per thread: 2 x CLN_HOST_MLP_ROWS x mlp.ldh elements */
    size_t h_elems;         /* from one thread's scratch to the next (CLN_HOST_SCRATCH) */
    size_t fmas_per_row;    /* multiply-adds of one row through the MLP */
    clnode_precision prec;
    unsigned long evals; /* fused passes so far: their parity orders the row kernels' panels */
    unsigned long long serial; /* the model's serial (cln_solve_dev.model_serial), 0: unknown */
    void *src; /* every layer's weights, then its bias if any, as the solve uploaded them; NULL:
                  not kept (larger than CLN_HOST_KEEP_BYTES) */
    int complete;
} host_solve;

/* The packed model's blocks (each layer's GEMM weights, row-kernel panels and bias) start on a
 * cache line: a 32- or 64-byte vector load from them never straddles two lines (malloc aligns to
 * 16 bytes: half the AVX2 loads of a panel did, and a pass over weights held in L1 took ~40%
 * longer so in isolation; no difference was measurable in a whole solve). */
#define CLN_HOST_LINE 64
/* Each thread's activation scratch starts on a page, in a region of its own rounded up to
 * CLN_HOST_SCRATCH bytes with CLN_HOST_SCRATCH more between it and the next thread's. With the
 * scratch of two threads back to back, or 4.5 KiB apart, the second thread's fused pass took
 * 12-30% more CPU time than the first's on the same rows (B = 4096, two threads, an AMD EPYC
 * whose cores have their own L1 and L2; most likely the first core's prefetchers running past
 * the end of its scratch into lines the second core is writing), and every step waited for it:
 * 117-122 ms a solve, against 105-106 ms with 12 KiB or more between them. */
#define CLN_HOST_PAGE 4096
#define CLN_HOST_SCRATCH 32768
#define HOST_F32(buf, off) ((float *)(void *)(buf)->p + (off))
#define HOST_F64(buf, off) ((double *)(void *)(buf)->p + (off))
#define HOST_I32(buf) ((int32_t *)(void *)(buf)->p)
/* The forms of "host" device strings (lib/backends/registry.h): the ordered GEMM on the widest
 * kernels the CPU runs (the default), OpenBLAS, or the ordered GEMM on the kernels of one ISA.
 * The ISA forms choose every kernel of the ordered engine that is dispatched by its ISA (the
 * GEMM, the row kernels, the activation rows, the reverse pass's products); OpenBLAS chooses its
 * own kernels, so "openblas" takes no ISA. */
enum {
    HOST_ORDERED,
    HOST_OPENBLAS,
    HOST_AVX512,
    HOST_AVX2,
    HOST_PORTABLE,
    HOST_NUM_FORMS
};

/* ---- host_buffers.c: buffers, and the GEMM scratch (grow-only; host_zalloc: bytes of zeros
 * aligned to `align`, NULL when out of memory) ---- */
void *host_zalloc(size_t bytes, size_t align);
clnode_status host_grow(host_backend *hb, void **buf, size_t *cap, size_t bytes);
clnode_status host_scratch(host_backend *hb, size_t bytes);
clnode_status host_scratch_a(host_backend *hb, size_t bytes);
clnode_status host_buf_alloc(cln_backend *be, size_t bytes, cln_buf **out);
void host_buf_free(cln_backend *be, cln_buf *b);
clnode_status host_buf_adopt(cln_backend *be, void *handle, size_t offset, size_t bytes,
                             const char *what, cln_buf **out);
clnode_status host_buf_write(cln_backend *be, cln_buf *b, size_t off, size_t bytes,
                             const void *src);
clnode_status host_buf_read(cln_backend *be, cln_buf *b, size_t off, size_t bytes, void *dst);

/* ---- host_blas.c: the GEMM op; host_part_rows: the rows [*r0, *r1) of part `part` of `parts`,
 * split at multiples of CLN_HOST_PART_ALIGN ---- */
void host_part_rows(size_t rows, size_t part, size_t parts, size_t *r0, size_t *r1);
clnode_status host_gemm(cln_backend *be, clnode_precision prec, clnode_gemm_mode mode, size_t m,
                        size_t n, size_t k, cln_buf *A, size_t a_off, size_t lda, cln_buf *Bm,
                        size_t b_off, size_t ldb, cln_buf *C, size_t c_off, size_t ldc);

/* ---- host_fused.c: the fused pass's packed model per solve, kept between solves ---- */
void host_solve_free(host_solve *hs);
void host_solve_end(cln_backend *be, cln_solve_dev *sd);
int host_model_kept(cln_backend *be, const cln_solve_dev *sd);
clnode_status host_solve_begin(cln_backend *be, cln_solve_dev *sd);

/* ---- host_passes.c: the passes of the ops table ---- */
clnode_status host_bias_act(cln_backend *be, cln_solve_dev *sd, cln_buf *C, size_t c_off,
                            size_t ldc, size_t m, size_t n, cln_buf *bias, int act);
clnode_status host_out_scale(cln_backend *be, cln_solve_dev *sd, cln_buf *C, size_t c_off,
                             size_t ldc, size_t m, size_t n);
clnode_status host_init(cln_backend *be, cln_solve_dev *sd);
clnode_status host_nonfinite_rows(cln_backend *be, clnode_precision prec, cln_buf *X, size_t off,
                                  size_t ld, size_t cols, size_t rows, cln_buf *FLAG);
clnode_status host_bad_save_ts(cln_backend *be, clnode_precision prec, cln_buf *TS, size_t ld,
                               size_t cols, size_t rows, cln_buf *RS, int within, cln_buf *FLAG);
clnode_status host_dt0(cln_backend *be, cln_solve_dev *sd, int phase);
clnode_status host_stage(cln_backend *be, cln_solve_dev *sd, int i);
clnode_status host_stage_rhs(cln_backend *be, cln_solve_dev *sd, int i);
clnode_status host_rhs(cln_backend *be, cln_solve_dev *sd);
clnode_status host_finish(cln_backend *be, cln_solve_dev *sd);
clnode_status host_steps(cln_backend *be, cln_solve_dev *sd, long n);

/* ---- host_rows.c: the row operations of the ops table ---- */
clnode_status host_count_active(cln_backend *be, cln_solve_dev *sd, size_t *active);
clnode_status host_swap_rows(cln_backend *be, cln_solve_dev *sd, cln_buf *buf, size_t off,
                             size_t stride, size_t len, size_t npairs);
clnode_status host_copy_rows(cln_backend *be, cln_buf *dst, size_t dst_off, size_t dst_stride,
                             cln_buf *src, size_t src_off, size_t src_stride, size_t len,
                             size_t rows);

/* ---- host_rev.c: the reverse ops ---- */
clnode_status host_rev_begin(cln_backend *be, const cln_rev_job *job, void **state, size_t *group,
                             const cln_rev_ops **rev);
clnode_status host_rev_each(cln_backend *be, void *state, size_t block0, size_t nblocks,
                            void *theta, cln_rev_run_fn fn, const void *arg);
void host_rev_end(cln_backend *be, void *state);
/* The tangent pass on the reverse pass's state (host_rev_end ends it too). */
clnode_status host_tan_begin(cln_backend *be, const cln_tan_job *job, void **state, size_t *group,
                             const cln_tan_ops **tan);
clnode_status host_tan_each(cln_backend *be, void *state, size_t block0, size_t nblocks,
                            cln_rev_run_fn fn, const void *arg);
/* Frees a reverse pass's state of that precision (accepts NULL). */
void host_rev_free(cln_host_rev *h, int f64);

/* ---- host_devices.c: the ISA of a device-string form; host_cpuinfo_value: the value of the first
 * line of /proc/cpuinfo with that key, or "" ---- */
cln_gemm_isa host_form_isa(int variant);
/* The forms of "host" device strings, by variant (host_devices.c), and the device list. */
extern const cln_device_form host_forms[HOST_NUM_FORMS];
clnode_status host_list(clnode_context *ctx, cln_device_sink *sink);
void host_cpuinfo_value(const char *key, char *out, size_t cap);

#endif /* CLN_HOST_INTERNAL_H */
