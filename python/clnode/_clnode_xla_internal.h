/* _clnode_xla_internal.h - what the files of clnode.jax's XLA custom calls share (their design:
 * _clnode_xla.c). One concern per file:
 *   _clnode_xla.c        Python: plans made, the handlers' capsules, the tape registry's bound and
 *                        counts (_clnode_xla.h)
 *   _clnode_xla_state.c  plans, the context pool, the tape registry and its counts, Ctrl-C
 *   _clnode_xla_frame.c  the call frame: errors, the metadata query, attributes, operands
 *   _clnode_xla_batch.c  one batch: the solve of some trajectories of a call's operands
 *   _clnode_xla_fwd.c    the forward handler
 *   _clnode_xla_vjp.c    the reverse handler
 *   _clnode_xla_jvp.c    the tangent handler (forward mode)
 *   _clnode_xla_cuda.c   the handlers on XLA's CUDA platform: host copies of XLA's buffers
 *   _clnode_xla_cuda_fwd.c  the CUDA forward on XLA's buffers themselves (clnode_solve_device)
 *   _clnode_xla_cuda_vjp.c  the CUDA reverse pass on XLA's buffers themselves
 *                        (clnode_gradient_compute_device)
 * Every name here is the extension's own (the version script keeps them private). */
#ifndef CLNODE_PY_XLA_INTERNAL_H
#define CLNODE_PY_XLA_INTERNAL_H

#include "_clnode_xla.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "_xla_ffi.h"
#include "clnode.h"

#define XLA_MAX_LAYERS 64
#define XLA_MAX_LEAD 16
#define XLA_MAX_CTRL 16
/* the operands of a solve: y0, t0, t1, dt0, ts, args, scale, params, ctrl */
#define XLA_NOPS 9
#define XLA_DEFAULT_TAPE_BYTES ((size_t)256 << 20)

/* A call's structure, made once at trace time and named by the int64 attribute plan */
typedef struct xla_plan {
    char device[128];
    clnode_solve_options opts; /* the structural options; t0, t1, dt0 set per call */
    size_t n, k, T, n_ts, L, n_params;
    size_t sizes[XLA_MAX_LAYERS + 1];
    int has_bias[XLA_MAX_LAYERS];
    clnode_activation act, fin;
    int time_input, y_f64, t_f64, has_ts, has_scale, scale_traced, throw_;
    long checkpoint_every;
    /* the options the operand ctrl gives per call, in its order (traced at trace time) */
    size_t n_ctrl;
    char ctrl_names[XLA_MAX_CTRL][32];
} xla_plan;

/* A context of the pool: one per concurrent call */
typedef struct xla_ctx {
    clnode_context *ctx;
    char device[128];
    int busy;
    char floor[512]; /* the last precision-floor warning of a solve on it */
    struct xla_ctx *next;
} xla_ctx;

/* A forward's solution kept for its reverse pass under a token */
typedef struct xla_tape {
    int32_t token;
    clnode_solution *sol;
    clnode_model *model;
    size_t bytes;
    struct xla_tape *next; /* newer */
} xla_tape;

/* A call's failure: the library's message first, then the exception clnode.solve raises. */
typedef struct xla_fail {
    clnode_status st;
    char msg[900];
} xla_fail;

/* An operand: its buffer, the elements of one row (its core), its leading axes' sizes (1 or the
 * batch's). */
typedef struct xla_op {
    const cxf_buffer *b;
    size_t core, nl;
    int64_t dims[XLA_MAX_LEAD];
} xla_op;

/* One batch: the solve of trajectories sel[0..m) of the operands */
typedef struct xla_batch {
    double *y0, *t0s, *t1s, *dt0s, *inputs, *ts, *params, *scale;
    size_t B, n_scale;
    clnode_solve_options o;
    clnode_problem p;
} xla_batch;

/* _clnode_xla_state.c (g_lock guards every g_ but g_sigint) */
extern pthread_mutex_t g_lock;
extern xla_plan **g_plans;
extern size_t g_nplans, g_capplans;
const xla_plan *plan_at(int64_t h);
extern xla_ctx *g_pool;
xla_ctx *ctx_take(const char *device, char *msg, size_t cap, clnode_status *st);
void ctx_give(xla_ctx *c);
extern xla_tape *g_tapes_old, *g_tapes_new;
extern size_t g_tape_bytes, g_tape_limit;
extern int g_tape_limit_read;
extern int32_t g_token_count;
extern unsigned long long g_hits, g_misses, g_kept, g_dropped, g_solves, g_trajectories;
extern unsigned long long g_solve_ns, g_reverse_ns, g_reverses;
/* the handlers' whole time (the library's in it too) and the reverse handler's calls */
extern unsigned long long g_fwd_ns, g_vjp_ns, g_vjps;
/* the tangent handler's whole time and calls, the library's tangent passes and their time */
extern unsigned long long g_jvp_ns, g_jvps, g_tangent_ns, g_tangents, g_tangent_dirs,
    g_tangent_trajectories;
unsigned long long now_ns(void);
void tape_free(xla_tape *t);
xla_tape *tapes_trim(size_t limit);
void tapes_free_list(xla_tape *t);
void tape_limit_from_env(void);
int32_t tape_keep(clnode_solution **sol, clnode_model **model);
xla_tape *tape_take(int32_t token, int count);
int xla_on_cancel(void *user);
void sig_enter(void);
void sig_leave(void);

/* _clnode_xla_frame.c */
int fail(xla_fail *e, clnode_status st, const char *fmt, ...);
cxf_error *error_of(const cxf_call_frame *f, const xla_fail *e);
int metadata_query(cxf_call_frame *f, cxf_error **err);
int attr_int(const cxf_call_frame *f, const char *name, int64_t *out);
extern const char *const NAMES[XLA_NOPS];
extern const int CORE_RANK[XLA_NOPS];
const char *dtype_name(int d);
int op_read(xla_op *o, const cxf_buffer *b, const char *name, int core_rank, const int64_t *core,
            const int64_t *lead, size_t nl, int want_dtype, xla_fail *e);
size_t op_row(const xla_op *o, const int64_t *lead, size_t nl, size_t f);
/* Element j of row `row` of operand o, as a double (inline: the gathers call it per element) */
static inline double op_at(const xla_op *o, size_t row, size_t j)
{
    const size_t i = row * o->core + j;
    return o->b->dtype == CXF_F32 ? (double)((const float *)o->b->data)[i]
                                  : ((const double *)o->b->data)[i];
}
int op_varies(const xla_op *o, const int64_t *lead, size_t nl, const size_t *sel, size_t m);
int read_frame(const cxf_call_frame *f, int64_t nargs, int64_t nrets, const char *what,
               xla_fail *e);
const xla_plan *frame_plan(const cxf_call_frame *f, const char *what, xla_fail *e);
/* An XLA error of `code` whose message is printf's of fmt (XLA owns and frees it). */
cxf_error *xla_error(const cxf_call_frame *f, cxf_error_code code, const char *fmt, ...);
int lead_of(const cxf_buffer *b, int core_rank, int64_t *lead, size_t *nl, size_t *B, xla_fail *e);
int read_operands(const cxf_call_frame *f, int64_t first, const xla_plan *pl, const int64_t *lead,
                  size_t nl, xla_op *ops, xla_fail *e);
cxf_error *handle(cxf_call_frame *f, int (*run)(cxf_call_frame *f, xla_fail *e));
cxf_error *handle_timed(cxf_call_frame *f, int (*run)(cxf_call_frame *f, xla_fail *e),
                        unsigned long long *ns, unsigned long long *calls);

/* _clnode_xla_batch.c */
void batch_free(xla_batch *x);
double *gather(const xla_op *o, const int64_t *lead, size_t nl, const size_t *sel, size_t m);
int per_traj(const xla_op *o, const int64_t *lead, size_t nl, const size_t *sel, size_t m,
             double *scalar, double **arr);
int batch_setup(const xla_plan *pl, const xla_op *ops, const int64_t *lead, size_t nl,
                const size_t *sel, size_t m, const int *kept_axis, int scale_vector, xla_ctx *xc,
                xla_batch *x, clnode_model **model, xla_fail *e);
/* batch_setup's options, per-trajectory times and model of a whole call's m trajectories, without
 * y0, args and the save times (not read: they may be device memory), the model made on ctx */
int batch_setup_scalars(const xla_plan *pl, const xla_op *ops, const int64_t *lead, size_t nl,
                        size_t m, int scale_vector, clnode_context *ctx, xla_batch *x,
                        clnode_model **model, xla_fail *e);
int batch_solve(xla_batch *x, const clnode_model *model, xla_ctx *xc, int keep, long ckpt,
                clnode_solution **sol, xla_fail *e);
xla_tape *batch_tape(const xla_op *tok, const int64_t *lead, size_t nl, size_t B);
size_t group_members(const int64_t *lead, size_t nl, size_t B, const int *kept, size_t gi,
                     size_t *sel);
int batch_kept(const xla_plan *pl, const xla_op *ops, const int64_t *lead, size_t nl,
               const size_t *sel, size_t m, const int *kept_axis, int scale_vector, xla_tape *tape,
               xla_ctx *xc, xla_batch *x, clnode_model **model, clnode_solution **sol, xla_fail *e);
/* One pass (reverse or tangent) of trajectories sel[0..m), with the forward's tape when given */
typedef int (*xla_group_fn)(void *user, const size_t *sel, size_t m, const int *kept_axis,
                            xla_tape *tape, xla_ctx *xc, xla_fail *e);
int batch_groups(const xla_plan *pl, const xla_op *tok, const int64_t *lead, size_t nl, size_t B,
                 const int *kept, xla_group_fn fn, void *user, xla_fail *e);

/* _clnode_xla.c */
PyObject *xla_capsule(cxf_handler *h);

/* _clnode_xla_fwd.c, _clnode_xla_vjp.c, _clnode_xla_jvp.c */
int fwd_run(cxf_call_frame *f, xla_fail *e);
cxf_error *clnode_xla_fwd(cxf_call_frame *f);
int vjp_run(cxf_call_frame *f, xla_fail *e);
cxf_error *clnode_xla_vjp(cxf_call_frame *f);
int jvp_run(cxf_call_frame *f, xla_fail *e);
cxf_error *clnode_xla_jvp(cxf_call_frame *f);

/* _clnode_xla_cuda.c: the CUDA runtime, loaded on first use (cudaMemcpyKind's values) */
#define XLA_CUDA_H2D 1
#define XLA_CUDA_D2H 2
/* NULL once the runtime is loaded, else why it is not */
const char *xla_cuda_runtime(void);
int xla_cuda_copy(void *dst, const void *src, size_t n, int kind, void *stream);
int xla_cuda_sync(void *stream);
/* A failed CUDA call e of `call`: XLA's error, its code mapped, the message naming what failed */
cxf_error *xla_cuda_error(const cxf_call_frame *f, const char *what, int e, const char *call);
/* The bytes of a buffer of a dtype the handlers take; (size_t)-1 otherwise */
size_t xla_buffer_bytes(const cxf_buffer *b);
/* Whether f is a call to execute (not the metadata query nor another stage) whose frame holds
 * nargs operands and nrets results (-1: any) that are buffers of dtypes the handlers take: what
 * the paths on XLA's buffers check before they look at the plan (any doubt: the staged path,
 * which checks and reports everything) */
int xla_cuda_executes(const cxf_call_frame *f, int64_t nargs, int64_t nrets, const char *what);
/* XLA's stream of the call into sg->stream, or XLA's error */
cxf_error *xla_stream(cxf_call_frame *f, const char *what, cxf_stream_get_args *sg);

/* _clnode_xla_cuda_fwd.c: 1 when the CUDA forward call f ran on XLA's buffers (*err: NULL or its
 * error), 0 when it is to be staged through the host (nothing done) */
int xla_cuda_fwd_on_device(cxf_call_frame *f, cxf_error **err);
/* Whether operand o has a row per trajectory (every leading axis the batch's), or one row for
 * all (no leading axis of more than 1); whether it has one row for all (no leading axis of more
 * than 1); the CUDA ordinal of a plan's device string ("cuda": 0, "cuda:N": N), or -1. */
int xla_op_full(const xla_op *o, const int64_t *lead, size_t nl);
int xla_op_shared(const xla_op *o);
int xla_cuda_ordinal(const char *device);
/* _clnode_xla_cuda_vjp.c: 1 when the CUDA reverse call f ran on XLA's buffers (*err: NULL or
 * its error), 0 when it is to be staged through the host (nothing written) */
int xla_cuda_vjp_on_device(cxf_call_frame *f, cxf_error **err);
/* A context adopting `stream` of CUDA device `device` (clnode_context_create_cuda), free for this
 * call (created when none is; NULL with e set, its message after `what`); given back after the
 * call. Only in builds with the CUDA backend (CLNODE_HAVE_CUDA). */
typedef struct cuda_adopted cuda_adopted;
cuda_adopted *cuda_adopt_take(int device, void *stream, const char *what, xla_fail *e);
clnode_context *cuda_adopt_context(const cuda_adopted *a);
void cuda_adopt_give(cuda_adopted *a);

#endif /* CLNODE_PY_XLA_INTERNAL_H */
