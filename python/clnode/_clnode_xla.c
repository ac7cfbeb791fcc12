/* _clnode_xla.c - clnode.jax's forward solve and reverse pass as XLA FFI handlers (the C ABI:
 * _xla_ffi.h), called by XLA inside a jitted program with no Python.
 *
 * A call's structure (method, options, save layout, the network's shape and activations, the
 * dtypes, the device) is a plan, made once at trace time (clnode/jax/_ffi.py) and named by an
 * int64 attribute; plans are never freed, so a plan lives as long as any executable that names
 * it. The numbers are operands, with the leading (vmap) axes the primitives give them: y0, t0,
 * t1, dt0, the save times, args, the field's factor s and the flat parameters. A handler runs on
 * whatever thread XLA calls it on, without the GIL: it takes a context of the plan's device from
 * a pool (one per concurrent call, created on demand, kept for the process), so two calls never
 * share one. A forward solved for a gradient leaves its solution in the tape registry under a
 * token (a negative int32, its output; clnode.jax's eager path uses positive ones), bounded in
 * bytes (oldest dropped first); the reverse pass takes it, or re-solves on a miss (the same steps
 * and bits). Errors return XLA's error with the library's message first. Ctrl-C: while a handler
 * runs (on any thread) a SIGINT handler of ours sets a flag that the library's cancel callback
 * polls; the call ends CANCELLED and the interrupt is handed to Python (PyErr_SetInterrupt, which
 * needs no GIL) once the last running handler restores Python's handler. */
#include "_clnode_xla.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "_xla_ffi.h"
#include "clnode.h"

#define XLA_MAX_LAYERS 64
#define XLA_MAX_LEAD 16
#define XLA_DEFAULT_TAPE_BYTES ((size_t)256 << 20)

/* ------------------------------------------------------------------------------------------------
 * Plans */

typedef struct xla_plan {
    char device[128];
    clnode_solve_options opts; /* the structural options; t0, t1, dt0 set per call */
    size_t n, k, T, n_ts, L, n_params;
    size_t sizes[XLA_MAX_LAYERS + 1];
    int has_bias[XLA_MAX_LAYERS];
    clnode_activation act, fin;
    int time_input, y_f64, t_f64, has_ts, has_scale, scale_traced, throw_;
    long checkpoint_every;
} xla_plan;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static xla_plan **g_plans;
static size_t g_nplans, g_capplans;

static const xla_plan *plan_at(int64_t h)
{
    pthread_mutex_lock(&g_lock);
    const xla_plan *p = h >= 1 && (size_t)h <= g_nplans ? g_plans[h - 1] : NULL;
    pthread_mutex_unlock(&g_lock);
    return p;
}

/* ------------------------------------------------------------------------------------------------
 * Contexts: a pool per device, one context per concurrent call */

typedef struct xla_ctx {
    clnode_context *ctx;
    char device[128];
    int busy;
    char floor[512]; /* the last precision-floor warning of a solve on it */
    struct xla_ctx *next;
} xla_ctx;

static xla_ctx *g_pool;

static void on_log(void *user, clnode_log_level level, clnode_log_code code, const char *message)
{
    (void)level;
    xla_ctx *c = user;
    if (code == CLNODE_LOG_PRECISION_FLOOR)
        snprintf(c->floor, sizeof c->floor, "%s", message);
}

/* A free context of `device` (created when none is), or NULL with the message in msg. */
static xla_ctx *ctx_take(const char *device, char *msg, size_t cap, clnode_status *st)
{
    pthread_mutex_lock(&g_lock);
    for (xla_ctx *c = g_pool; c; c = c->next)
        if (!c->busy && !strcmp(c->device, device)) {
            c->busy = 1;
            c->floor[0] = 0;
            pthread_mutex_unlock(&g_lock);
            return c;
        }
    pthread_mutex_unlock(&g_lock);
    xla_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        *st = CLNODE_ERR_OUT_OF_MEMORY;
        snprintf(msg, cap, "out of memory for a context");
        return NULL;
    }
    snprintf(c->device, sizeof c->device, "%s", device);
    clnode_context_options o;
    clnode_context_default_options(&o);
    o.device = c->device;
    o.log = on_log;
    o.log_user = c;
    *st = clnode_context_create(&o, &c->ctx);
    if (*st != CLNODE_OK) {
        snprintf(msg, cap, "%s: no context for device \"%s\"", clnode_status_string(*st), device);
        free(c);
        return NULL;
    }
    c->busy = 1;
    pthread_mutex_lock(&g_lock);
    c->next = g_pool;
    g_pool = c;
    pthread_mutex_unlock(&g_lock);
    return c;
}

static void ctx_give(xla_ctx *c)
{
    pthread_mutex_lock(&g_lock);
    c->busy = 0;
    pthread_mutex_unlock(&g_lock);
}

/* ------------------------------------------------------------------------------------------------
 * Tapes: a registry bounded in bytes, oldest dropped first */

typedef struct xla_tape {
    int32_t token;
    clnode_solution *sol;
    clnode_model *model;
    size_t bytes;
    struct xla_tape *next; /* newer */
} xla_tape;

static xla_tape *g_tapes_old, *g_tapes_new;
static size_t g_tape_bytes, g_tape_limit = XLA_DEFAULT_TAPE_BYTES;
static int g_tape_limit_read;
static int32_t g_token_count;
static unsigned long long g_hits, g_misses, g_kept, g_dropped, g_solves, g_trajectories;
/* the library's time inside the handlers: its solves (the reverse pass's re-solves too) and
 * reverse passes */
static unsigned long long g_solve_ns, g_reverse_ns, g_reverses;

static unsigned long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

static void tape_free(xla_tape *t)
{
    clnode_solution_destroy(&t->sol);
    clnode_model_destroy(&t->model);
    free(t);
}

/* Drops the oldest tapes until the registry holds at most `limit` bytes (with g_lock held);
 * returns them, to be freed after the lock. */
static xla_tape *tapes_trim(size_t limit)
{
    xla_tape *out = NULL;
    while (g_tapes_old && g_tape_bytes > limit) {
        xla_tape *t = g_tapes_old;
        g_tapes_old = t->next;
        if (!g_tapes_old)
            g_tapes_new = NULL;
        g_tape_bytes -= t->bytes;
        g_dropped++;
        t->next = out;
        out = t;
    }
    return out;
}

static void tapes_free_list(xla_tape *t)
{
    while (t) {
        xla_tape *n = t->next;
        tape_free(t);
        t = n;
    }
}

static void tape_limit_from_env(void)
{
    if (g_tape_limit_read)
        return;
    g_tape_limit_read = 1;
    const char *e = getenv("CLNODE_JAX_TAPE_BYTES");
    if (e && *e) {
        char *end;
        const unsigned long long v = strtoull(e, &end, 10);
        if (*end == 0)
            g_tape_limit = (size_t)v;
    }
}

/* Keeps sol and model (taken) under a new token, returned; 0 when not kept (larger than the
 * bound: the reverse pass re-solves). */
static int32_t tape_keep(clnode_solution **sol, clnode_model **model)
{
    xla_tape *t = malloc(sizeof *t);
    if (!t)
        return 0;
    t->sol = *sol;
    t->model = *model;
    t->bytes = clnode_solution_kept_bytes(*sol) + sizeof *t;
    t->next = NULL;
    pthread_mutex_lock(&g_lock);
    tape_limit_from_env();
    if (t->bytes > g_tape_limit) {
        g_dropped++;
        pthread_mutex_unlock(&g_lock);
        free(t);
        return 0;
    }
    *sol = NULL;
    *model = NULL;
    g_token_count = g_token_count == INT32_MAX ? 1 : g_token_count + 1;
    t->token = -g_token_count;
    if (g_tapes_new)
        g_tapes_new->next = t;
    else
        g_tapes_old = t;
    g_tapes_new = t;
    g_tape_bytes += t->bytes;
    g_kept++;
    xla_tape *drop = tapes_trim(g_tape_limit);
    const int32_t token = t->token;
    pthread_mutex_unlock(&g_lock);
    tapes_free_list(drop);
    return token;
}

/* The tape of `token`, removed from the registry (NULL: none; counted as a miss). */
static xla_tape *tape_take(int32_t token, int count)
{
    xla_tape *found = NULL;
    pthread_mutex_lock(&g_lock);
    for (xla_tape **pp = &g_tapes_old, *prev = NULL; token < 0 && *pp;
         prev = *pp, pp = &(*pp)->next)
        if ((*pp)->token == token) {
            found = *pp;
            *pp = found->next;
            if (g_tapes_new == found)
                g_tapes_new = prev;
            g_tape_bytes -= found->bytes;
            break;
        }
    if (count) {
        if (found)
            g_hits++;
        else
            g_misses++;
    }
    pthread_mutex_unlock(&g_lock);
    return found;
}

/* ------------------------------------------------------------------------------------------------
 * Ctrl-C while handlers run */

static atomic_int g_sigint; /* lock-free: set by the signal handler, read by every call */
static int g_sig_users;
static struct sigaction g_prev_sigint;
static int g_sig_installed;

static void on_sigint(int sig)
{
    (void)sig;
    atomic_store(&g_sigint, 1);
}

static int on_cancel(void *user)
{
    (void)user;
    return atomic_load(&g_sigint) != 0;
}

static void sig_enter(void)
{
    pthread_mutex_lock(&g_lock);
    if (g_sig_users++ == 0) {
        struct sigaction prev, sa;
        g_sig_installed = 0;
        if (sigaction(SIGINT, NULL, &prev) == 0 &&
            ((prev.sa_flags & SA_SIGINFO) ||
             (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN))) {
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_sigint;
            sa.sa_flags = SA_ONSTACK;
            sigemptyset(&sa.sa_mask);
            atomic_store(&g_sigint, 0);
            g_sig_installed = sigaction(SIGINT, &sa, &g_prev_sigint) == 0;
        }
    }
    pthread_mutex_unlock(&g_lock);
}

static void sig_leave(void)
{
    pthread_mutex_lock(&g_lock);
    if (--g_sig_users == 0 && g_sig_installed) {
        sigaction(SIGINT, &g_prev_sigint, NULL);
        g_sig_installed = 0;
        if (atomic_exchange(&g_sigint, 0)) {
            PyErr_SetInterrupt(); /* Python's handler: KeyboardInterrupt by default */
        }
    }
    pthread_mutex_unlock(&g_lock);
}

/* ------------------------------------------------------------------------------------------------
 * Errors */

static cxf_error *ffi_error(const cxf_call_frame *f, cxf_error_code code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cxf_error_create_args a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.message = msg;
    a.errc = code;
    return f->api->error_create(&a);
}

/* XLA's code and the Python exception's name of a library status. */
static cxf_error_code code_of(clnode_status st, const char **cls)
{
    switch (st) {
    case CLNODE_ERR_INVALID_ARGUMENT:
    case CLNODE_ERR_NONFINITE_INPUT:
        *cls = "clnode.InvalidArgumentError";
        return CXF_INVALID_ARGUMENT;
    case CLNODE_ERR_BAD_MODEL:
        *cls = "clnode.ModelError";
        return CXF_INVALID_ARGUMENT;
    case CLNODE_ERR_OUT_OF_MEMORY:
        *cls = "MemoryError";
        return CXF_RESOURCE_EXHAUSTED;
    case CLNODE_ERR_DEVICE_MEMORY:
        *cls = "clnode.DeviceError";
        return CXF_RESOURCE_EXHAUSTED;
    case CLNODE_ERR_UNSUPPORTED:
    case CLNODE_ERR_NO_FP64:
        *cls = "clnode.UnsupportedError";
        return CXF_UNIMPLEMENTED;
    case CLNODE_ERR_NO_DEVICE:
        *cls = "clnode.DeviceError";
        return CXF_NOT_FOUND;
    case CLNODE_ERR_DEVICE:
    case CLNODE_ERR_BUILD:
    case CLNODE_ERR_BLAS:
        *cls = "clnode.DeviceError";
        return CXF_UNAVAILABLE;
    case CLNODE_ERR_PRECISION:
        *cls = "clnode.PrecisionError";
        return CXF_FAILED_PRECONDITION;
    case CLNODE_ERR_CANCELLED:
        *cls = "clnode.CancelledError";
        return CXF_CANCELLED;
    default:
        *cls = "clnode.Error";
        return CXF_INTERNAL;
    }
}

/* A call's failure: the library's message first, then the exception clnode.solve raises. */
typedef struct xla_fail {
    clnode_status st;
    char msg[900];
} xla_fail;

static int fail(xla_fail *e, clnode_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->st = st;
    return -1;
}

static cxf_error *error_of(const cxf_call_frame *f, const xla_fail *e)
{
    const char *cls;
    const cxf_error_code code = code_of(e->st, &cls);
    return ffi_error(f, code, "%s (%s, in clnode.jax.diffeqsolve)", e->msg, cls);
}

/* ------------------------------------------------------------------------------------------------
 * The call frame: metadata query, attributes, operands */

/* 1 when the frame is XLA's metadata query (answered here; *err set on a malformed one). */
static int metadata_query(cxf_call_frame *f, cxf_error **err)
{
    *err = NULL;
    for (cxf_extension *e = f->extension_start; e; e = e->next) {
        if (e->type != CXF_EXTENSION_METADATA)
            continue;
        cxf_metadata_extension *m = (cxf_metadata_extension *)e;
        if (e->struct_size < sizeof *m || !m->metadata ||
            !CXF_COVERS(m->metadata, cxf_metadata, traits)) {
            if (f->api && CXF_COVERS(f->api, cxf_api, error_create))
                *err = ffi_error(f, CXF_INVALID_ARGUMENT,
                                 "clnode: XLA's metadata query is smaller than API %d.%d's",
                                 CXF_API_MAJOR, CXF_API_MINOR);
            return 1;
        }
        m->metadata->api_version.struct_size = sizeof(cxf_api_version);
        m->metadata->api_version.extension_start = NULL;
        m->metadata->api_version.major_version = CXF_API_MAJOR;
        m->metadata->api_version.minor_version = CXF_API_MINOR;
        m->metadata->traits = 0; /* not command-buffer compatible: the host logic runs every call */
        return 1;
    }
    return 0;
}

/* The int64 attribute `name` (a scalar of an integer dtype); 0 if absent. */
static int attr_int(const cxf_call_frame *f, const char *name, int64_t *out)
{
    const size_t n = strlen(name);
    for (int64_t i = 0; i < f->attrs.size; i++) {
        const cxf_bytes *s = f->attrs.names[i];
        if (s->len != n || memcmp(s->ptr, name, n) || f->attrs.types[i] != CXF_ATTR_SCALAR)
            continue;
        const cxf_scalar *v = f->attrs.attrs[i];
        switch (v->dtype) {
        case CXF_S64:
            *out = *(const int64_t *)v->value;
            return 1;
        case CXF_S32:
            *out = *(const int32_t *)v->value;
            return 1;
        case CXF_PRED:
            *out = *(const unsigned char *)v->value != 0;
            return 1;
        default:
            return 0;
        }
    }
    return 0;
}

/* An operand: its buffer, the elements of one row (its core), its leading axes' sizes (1 or the
 * batch's). */
typedef struct xla_op {
    const cxf_buffer *b;
    size_t core, nl;
    int64_t dims[XLA_MAX_LEAD];
} xla_op;

static const char *const NAMES[8] = {"y0", "t0", "t1", "dt0", "ts", "args", "scale", "params"};
static const int CORE_RANK[8] = {1, 0, 0, 0, 1, 1, 1, 1};

static const char *dtype_name(int d)
{
    return d == CXF_F32 ? "float32" : d == CXF_F64 ? "float64" : d == CXF_S32 ? "int32" : "another";
}

/* Operand `b` named `name` with `core_rank` core axes of core sizes `core` (-1: any), read
 * against the batch's leading axes lead[nl]: float32 or float64, its leading axes none (the
 * whole batch shares it) or nl, each 1 or the batch's. */
static int op_read(xla_op *o, const cxf_buffer *b, const char *name, int core_rank,
                   const int64_t *core, const int64_t *lead, size_t nl, int want_dtype, xla_fail *e)
{
    if (!CXF_COVERS(b, cxf_buffer, dims))
        return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                    "clnode: operand %s: XLA's buffer is smaller "
                    "than API 0.1's",
                    name);
    if (want_dtype ? (int)b->dtype != want_dtype : (b->dtype != CXF_F32 && b->dtype != CXF_F64))
        return fail(e, CLNODE_ERR_INVALID_ARGUMENT, "clnode: operand %s has dtype %s, not %s", name,
                    dtype_name(b->dtype),
                    want_dtype ? dtype_name(want_dtype) : "float32 or float64");
    const int64_t lr = b->rank - core_rank;
    if (lr != 0 && lr != (int64_t)nl)
        return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                    "clnode: operand %s has rank %lld; it needs %d core axes after none or %zu "
                    "leading ones",
                    name, (long long)b->rank, core_rank, nl);
    o->b = b;
    o->nl = (size_t)lr;
    o->core = 1;
    for (int64_t i = 0; i < lr; i++) {
        if (b->dims[i] != 1 && b->dims[i] != lead[i])
            return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                        "clnode: operand %s has %lld along leading axis %lld, where the batch has "
                        "%lld",
                        name, (long long)b->dims[i], (long long)i, (long long)lead[i]);
        o->dims[i] = b->dims[i];
    }
    for (int i = 0; i < core_rank; i++) {
        const int64_t d = b->dims[lr + i];
        if (core && core[i] >= 0 && d != core[i])
            return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                        "clnode: operand %s has %lld values along its axis %d, not %lld", name,
                        (long long)d, (int)lr + i, (long long)core[i]);
        o->core *= (size_t)d;
    }
    return 0;
}

/* The row of operand o that trajectory f (a flat index into the leading axes lead) reads. */
static size_t op_row(const xla_op *o, const int64_t *lead, size_t nl, size_t f)
{
    if (o->nl == 0)
        return 0;
    size_t row = 0, stride = 1;
    for (size_t a = nl; a-- > 0;) {
        const size_t i = f % (size_t)lead[a];
        f /= (size_t)lead[a];
        if (o->dims[a] != 1)
            row += i * stride;
        stride *= (size_t)o->dims[a];
    }
    return row;
}

static double op_at(const xla_op *o, size_t row, size_t j)
{
    const size_t i = row * o->core + j;
    return o->b->dtype == CXF_F32 ? (double)((const float *)o->b->data)[i]
                                  : ((const double *)o->b->data)[i];
}

/* 1 when operand o reads more than one row among trajectories sel[0..m) */
static int op_varies(const xla_op *o, const int64_t *lead, size_t nl, const size_t *sel, size_t m)
{
    const size_t r0 = m ? op_row(o, lead, nl, sel[0]) : 0;
    for (size_t i = 1; i < m; i++) {
        const size_t r = op_row(o, lead, nl, sel[i]);
        for (size_t j = 0; j < o->core && r != r0; j++)
            if (op_at(o, r, j) != op_at(o, r0, j))
                return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------------
 * One batch: the solve of trajectories sel[0..m) of the operands */

typedef struct xla_batch {
    double *y0, *t0s, *t1s, *dt0s, *inputs, *ts, *params, *scale;
    size_t B, n_scale;
    clnode_solve_options o;
    clnode_problem p;
} xla_batch;

static void batch_free(xla_batch *x)
{
    free(x->y0);
    free(x->t0s);
    free(x->t1s);
    free(x->dt0s);
    free(x->inputs);
    free(x->ts);
    free(x->params);
    free(x->scale);
    memset(x, 0, sizeof *x);
}

/* Gathers rows of o for sel[0..m) into a new (m x core) array; NULL on no memory. */
static double *gather(const xla_op *o, const int64_t *lead, size_t nl, const size_t *sel, size_t m)
{
    double *out = malloc((m ? m : 1) * (o->core ? o->core : 1) * sizeof *out);
    for (size_t i = 0; out && i < m; i++) {
        const size_t r = op_row(o, lead, nl, sel[i]);
        for (size_t j = 0; j < o->core; j++)
            out[i * o->core + j] = op_at(o, r, j);
    }
    return out;
}

/* One value per trajectory (*arr, m values) or one for all (*arr NULL, *scalar): as
 * clnode.jax's callback passes t0, t1 and dt0. */
static int per_traj(const xla_op *o, const int64_t *lead, size_t nl, const size_t *sel, size_t m,
                    double *scalar, double **arr)
{
    *arr = NULL;
    *scalar = m ? op_at(o, op_row(o, lead, nl, sel[0]), 0) : 0.0;
    if (!op_varies(o, lead, nl, sel, m))
        return 0;
    *arr = gather(o, lead, nl, sel, m);
    return *arr ? 0 : -1;
}

/* The solve's options, problem and model of trajectories sel[0..m) (m >= 1); scale_vector: the
 * model's output scale one value per component (for the factor's gradient). Returns 0, or -1
 * with e set. */
static int batch_setup(const xla_plan *pl, const xla_op *ops, const int64_t *lead, size_t nl,
                       const size_t *sel, size_t m, const int *kept_axis, int scale_vector,
                       xla_ctx *xc, xla_batch *x, clnode_model **model, xla_fail *e)
{
    memset(x, 0, sizeof *x);
    x->B = m;
    x->o = pl->opts;
    clnode_problem_default(&x->p);
    x->p.batch = m;
    const size_t N = pl->n;
    double t0, t1, dt0;
    x->y0 = gather(&ops[0], lead, nl, sel, m);
    if (!x->y0 || per_traj(&ops[1], lead, nl, sel, m, &t0, &x->t0s) ||
        per_traj(&ops[2], lead, nl, sel, m, &t1, &x->t1s) ||
        per_traj(&ops[3], lead, nl, sel, m, &dt0, &x->dt0s))
        return fail(e, CLNODE_ERR_OUT_OF_MEMORY, "out of memory for the batch's operands");
    x->p.y0 = x->y0;
    x->p.t0s = x->t0s;
    x->p.t1s = x->t1s;
    x->p.dt0s = x->dt0s;
    if (!x->t0s)
        x->o.t0 = t0;
    if (!x->t1s)
        x->o.t1 = t1;
    if (!x->dt0s && dt0 != 0.0)
        x->o.dt0 = dt0;
    if (pl->k) {
        if (!(x->inputs = gather(&ops[5], lead, nl, sel, m)))
            return fail(e, CLNODE_ERR_OUT_OF_MEMORY, "out of memory for args");
        x->p.inputs = x->inputs;
    }
    if (pl->has_ts) {
        /* one list for the batch unless the save times vary along an axis solved together */
        int rows = 0;
        for (size_t a = 0; a < ops[4].nl; a++)
            rows |= ops[4].dims[a] != 1 && !(kept_axis && kept_axis[a]);
        const size_t one = sel[0];
        if (!(x->ts = gather(&ops[4], lead, nl, rows ? sel : &one, rows ? m : 1)))
            return fail(e, CLNODE_ERR_OUT_OF_MEMORY, "out of memory for the save times");
        x->p.save_ts = x->ts;
        x->p.n_save_ts = pl->n_ts;
        x->p.save_ts_per_trajectory = rows;
    }
    if (op_varies(&ops[7], lead, nl, sel, m))
        return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                    "clnode.jax.diffeqsolve: vmapping over the model's parameters is not "
                    "supported (clnode solves one model for every trajectory of a batch; vmap "
                    "over y0, t0, t1, dt0, args and SaveAt(ts=...))");
    if (ops[7].core != pl->n_params)
        return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                    "clnode: operand params has %zu values; the network has %zu", ops[7].core,
                    pl->n_params);
    const size_t first = sel[0];
    if (!(x->params = gather(&ops[7], lead, nl, &first, 1)))
        return fail(e, CLNODE_ERR_OUT_OF_MEMORY, "out of memory for the parameters");
    if (pl->has_scale) {
        if (op_varies(&ops[6], lead, nl, sel, m))
            return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                        "clnode.jax.diffeqsolve: the factor s of the field's network changes "
                        "from trajectory to trajectory (clnode solves one model for a batch)");
        if (!(x->scale = gather(&ops[6], lead, nl, &first, 1)))
            return fail(e, CLNODE_ERR_OUT_OF_MEMORY, "out of memory for the factor");
        int finite = 1, same = 1, ones = 1;
        for (size_t j = 0; j < N; j++) {
            finite &= isfinite(x->scale[j]) != 0;
            same &= x->scale[j] == x->scale[0];
            ones &= x->scale[j] == 1.0;
        }
        if (scale_vector)
            x->n_scale = N;
        else if (!finite)
            return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                        "clnode.jax.diffeqsolve: the factor s of the field's network is not "
                        "finite");
        else
            x->n_scale = ones ? 0 : same ? 1 : N;
    }
    const double *w[XLA_MAX_LAYERS], *bs[XLA_MAX_LAYERS];
    size_t off = 0;
    for (size_t l = 0; l < pl->L; l++) {
        w[l] = x->params + off;
        off += pl->sizes[l + 1] * pl->sizes[l];
        bs[l] = pl->has_bias[l] ? x->params + off : NULL;
        off += pl->has_bias[l] ? pl->sizes[l + 1] : 0;
    }
    clnode_model_desc d;
    clnode_model_default_desc(&d);
    d.num_layers = pl->L;
    d.sizes = pl->sizes;
    d.weights = w;
    d.biases = bs;
    d.activation = pl->act;
    d.final_activation = pl->fin;
    d.time_input = pl->time_input;
    d.num_inputs = pl->k;
    d.out_scale = x->n_scale ? x->scale : NULL;
    d.out_scale_size = x->n_scale;
    const clnode_status st = clnode_model_create(xc->ctx, &d, model);
    if (st != CLNODE_OK)
        return fail(e, st, "%s", clnode_context_last_error(xc->ctx));
    return 0;
}

/* Solves the batch on xc (cancellable by Ctrl-C). */
static int batch_solve(xla_batch *x, const clnode_model *model, xla_ctx *xc, int keep, long ckpt,
                       clnode_solution **sol, xla_fail *e)
{
    x->o.keep_tape = keep;
    if (keep)
        x->o.checkpoint_every = ckpt;
    x->o.cancel = on_cancel;
    x->o.cancel_user = NULL;
    const unsigned long long t0 = now_ns();
    const clnode_status st = clnode_solve(xc->ctx, model, &x->o, &x->p, sol);
    const unsigned long long dt = now_ns() - t0;
    pthread_mutex_lock(&g_lock);
    g_solve_ns += dt;
    pthread_mutex_unlock(&g_lock);
    if (st != CLNODE_OK)
        return fail(e, st, "%s", clnode_context_last_error(xc->ctx));
    return 0;
}

/* ------------------------------------------------------------------------------------------------
 * The forward handler: operands y0, t0, t1, dt0, ts, args, scale, params (each with none or the
 * batch's leading axes); results ts (lead, T), ys (lead, T, N), counts (lead, 4) int32 (steps,
 * accepted, rejected, diffrax's result code), token (lead) int32; attributes plan, keep. */

static const int32_t DIFFRAX_CODE[] = {0, 1, 2, 1, 2}; /* by clnode_result */

static int read_frame(const cxf_call_frame *f, int64_t nargs, int64_t nrets, const char *what,
                      xla_fail *e)
{
    if (!CXF_COVERS(f, cxf_call_frame, attrs) || !CXF_COVERS(&f->args, cxf_args, args) ||
        !CXF_COVERS(&f->rets, cxf_rets, rets) || !CXF_COVERS(&f->attrs, cxf_attrs, attrs))
        return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                    "clnode: %s: XLA's call frame is smaller than API 0.1's", what);
    if (f->args.size != nargs || (nrets >= 0 && f->rets.size != nrets))
        return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                    "clnode: %s takes %lld operands and gives %lld results, not %lld and %lld",
                    what, (long long)nargs, (long long)nrets, (long long)f->args.size,
                    (long long)f->rets.size);
    for (int64_t i = 0; i < f->args.size; i++)
        if (f->args.types[i] != CXF_ARG_BUFFER)
            return fail(e, CLNODE_ERR_INVALID_ARGUMENT, "clnode: %s: operand %lld is no buffer",
                        what, (long long)i);
    for (int64_t i = 0; i < f->rets.size; i++)
        if (f->rets.types[i] != CXF_RET_BUFFER ||
            !CXF_COVERS((const cxf_buffer *)f->rets.rets[i], cxf_buffer, dims))
            return fail(e, CLNODE_ERR_INVALID_ARGUMENT, "clnode: %s: result %lld is no buffer",
                        what, (long long)i);
    return 0;
}

static const xla_plan *frame_plan(const cxf_call_frame *f, const char *what, xla_fail *e)
{
    int64_t h = 0;
    const xla_plan *pl = attr_int(f, "plan", &h) ? plan_at(h) : NULL;
    if (!pl)
        fail(e, CLNODE_ERR_INVALID_ARGUMENT,
             "clnode: %s: no plan %lld (the int64 attribute plan names one made by "
             "clnode.jax at trace time in this process)",
             what, (long long)h);
    return pl;
}

/* The leading axes (lead, *nl) of a result of rank core_rank + nl. */
static int lead_of(const cxf_buffer *b, int core_rank, int64_t *lead, size_t *nl, size_t *B,
                   xla_fail *e)
{
    if (b->rank < core_rank || b->rank - core_rank > XLA_MAX_LEAD)
        return fail(e, CLNODE_ERR_INVALID_ARGUMENT, "clnode: a result of rank %lld",
                    (long long)b->rank);
    *nl = (size_t)(b->rank - core_rank);
    *B = 1;
    for (size_t a = 0; a < *nl; a++) {
        lead[a] = b->dims[a];
        *B *= (size_t)lead[a];
    }
    return 0;
}

static int read_operands(const cxf_call_frame *f, int64_t first, const xla_plan *pl,
                         const int64_t *lead, size_t nl, xla_op *ops, xla_fail *e)
{
    const int ydt = pl->y_f64 ? CXF_F64 : CXF_F32, tdt = pl->t_f64 ? CXF_F64 : CXF_F32;
    const int64_t n = (int64_t)pl->n;
    const int64_t cores[8] = {n,
                              -1,
                              -1,
                              -1,
                              (int64_t)pl->n_ts,
                              (int64_t)pl->k,
                              pl->has_scale ? n : 0,
                              (int64_t)pl->n_params};
    const int dts[8] = {ydt, tdt, tdt, tdt, tdt, pl->k ? ydt : 0, 0, 0};
    for (int i = 0; i < 8; i++)
        if (op_read(&ops[i], f->args.args[first + i], NAMES[i], CORE_RANK[i], &cores[i], lead, nl,
                    dts[i], e))
            return -1;
    return 0;
}

static int fwd_run(cxf_call_frame *f, xla_fail *e)
{
    if (read_frame(f, 8, 4, "the forward solve", e))
        return -1;
    const xla_plan *pl = frame_plan(f, "the forward solve", e);
    if (!pl)
        return -1;
    int64_t keep = 0, lead[XLA_MAX_LEAD];
    attr_int(f, "keep", &keep);
    cxf_buffer *const *r = (cxf_buffer *const *)f->rets.rets;
    size_t nl, B;
    if (lead_of(r[1], 2, lead, &nl, &B, e))
        return -1;
    if (r[1]->dims[nl] != (int64_t)pl->T || r[1]->dims[nl + 1] != (int64_t)pl->n ||
        r[1]->dtype != (pl->y_f64 ? CXF_F64 : CXF_F32) ||
        r[0]->dtype != (pl->t_f64 ? CXF_F64 : CXF_F32) || r[2]->dtype != CXF_S32 ||
        r[3]->dtype != CXF_S32)
        return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                    "clnode: the forward solve's results have other shapes or dtypes than its "
                    "plan's (%zu slots of %zu)",
                    pl->T, pl->n);
    xla_op ops[8];
    if (read_operands(f, 0, pl, lead, nl, ops, e))
        return -1;
    if (B == 0)
        return 0;
    size_t *sel = malloc(B * sizeof *sel);
    if (!sel)
        return fail(e, CLNODE_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < B; i++)
        sel[i] = i;
    clnode_status st;
    xla_ctx *xc = ctx_take(pl->device, e->msg, sizeof e->msg, &st);
    if (!xc) {
        free(sel);
        e->st = st;
        return -1;
    }
    xla_batch x;
    clnode_model *model = NULL;
    clnode_solution *sol = NULL;
    int rc =
        batch_setup(pl, ops, lead, nl, sel, B, NULL, keep && pl->scale_traced, xc, &x, &model, e);
    if (!rc)
        rc = batch_solve(&x, model, xc, (int)keep, pl->checkpoint_every, &sol, e);
    pthread_mutex_lock(&g_lock);
    g_solves++;
    g_trajectories += B;
    pthread_mutex_unlock(&g_lock);
    int32_t *counts = r[2]->data, token = 0;
    int floor = 0;
    for (size_t b = 0; !rc && b < B; b++) {
        clnode_trajectory_stats s;
        clnode_solution_stats(sol, b, &s);
        counts[4 * b + 0] = (int32_t)s.num_steps;
        counts[4 * b + 1] = (int32_t)s.num_accepted;
        counts[4 * b + 2] = (int32_t)s.num_rejected;
        counts[4 * b + 3] = (unsigned)s.result < 5 ? DIFFRAX_CODE[s.result] : 1;
        floor |= s.result == CLNODE_RESULT_PRECISION_FLOOR;
    }
    if (!rc && pl->throw_ && floor)
        rc = fail(e, CLNODE_ERR_PRECISION, "%s",
                  xc->floor[0] ? xc->floor
                               : "precision_floor: trajectories stopped at the rounding floor: "
                                 "the rtol is below what this arithmetic resolves");
    if (!rc) {
        if (!pl->y_f64)
            st = clnode_solution_rows_f32(sol, 0, B, pl->T, r[0]->data, r[1]->data);
        else if (pl->t_f64)
            st = clnode_solution_rows_f64(sol, 0, B, pl->T, r[0]->data, r[1]->data);
        else {
            double *ts = malloc(B * pl->T * sizeof *ts);
            st = ts ? clnode_solution_rows_f64(sol, 0, B, pl->T, ts, r[1]->data)
                    : CLNODE_ERR_OUT_OF_MEMORY;
            for (size_t i = 0; ts && st == CLNODE_OK && i < B * pl->T; i++)
                ((float *)r[0]->data)[i] = (float)ts[i];
            free(ts);
        }
        if (st != CLNODE_OK)
            rc = fail(e, st, "clnode: the solution does not fit its %zu slots", pl->T);
    }
    if (!rc && keep)
        token = tape_keep(&sol, &model);
    for (size_t b = 0; !rc && b < B; b++)
        ((int32_t *)r[3]->data)[b] = token;
    clnode_solution_destroy(&sol);
    clnode_model_destroy(&model);
    batch_free(&x);
    ctx_give(xc);
    free(sel);
    return rc;
}

/* A handler: the metadata query answered, else run under the SIGINT flag, its failure XLA's
 * error. */
static cxf_error *handle(cxf_call_frame *f, int (*run)(cxf_call_frame *f, xla_fail *e))
{
    cxf_error *err;
    if (metadata_query(f, &err))
        return err;
    xla_fail e = {CLNODE_OK, ""};
    sig_enter();
    const int rc = run(f, &e);
    sig_leave();
    return rc ? error_of(f, &e) : NULL;
}

static cxf_error *clnode_xla_fwd(cxf_call_frame *f)
{
    return handle(f, fwd_run);
}

/* ------------------------------------------------------------------------------------------------
 * The reverse handler: operands ct (lead, T, N), token (lead), the forward's 8 operands; one
 * result per wanted operand (attribute want: bits of y0 1, args 32, scale 64, params 128, in
 * the operands' order); attribute keep: bit a for leading axis a along which the batch-wide
 * cotangents are one per index (vmap of a gradient). */

typedef struct xla_grad_out {
    int which; /* the operand's index */
    cxf_buffer *b;
    xla_op shape; /* the result read as an operand of the batch */
} xla_grad_out;

static void put(cxf_buffer *b, size_t i, double v)
{
    if (b->dtype == CXF_F32)
        ((float *)b->data)[i] = (float)v;
    else
        ((double *)b->data)[i] = v;
}

/* One reverse pass of trajectories sel[0..m) (with the forward's tape when given), its
 * cotangents written into the results. */
static int reverse_one(const xla_plan *pl, const xla_op *ops, const xla_op *ct, const int64_t *lead,
                       size_t nl, const size_t *sel, size_t m, const int *kept_axis, xla_tape *tape,
                       xla_grad_out *outs, int nouts, int want_scale, xla_ctx *xc, xla_fail *e)
{
    xla_batch x;
    memset(&x, 0, sizeof x);
    clnode_model *model = NULL;
    clnode_solution *sol = NULL;
    clnode_gradient *g = NULL;
    double *cot = NULL;
    int rc = 0;
    if (tape) {
        model = tape->model;
        sol = tape->sol;
        tape->model = NULL;
        tape->sol = NULL;
    } else {
        rc = batch_setup(pl, ops, lead, nl, sel, m, kept_axis, want_scale, xc, &x, &model, e);
        if (!rc)
            rc = batch_solve(&x, model, xc, 1, pl->checkpoint_every, &sol, e);
    }
    if (!rc && !(cot = gather(ct, lead, nl, sel, m)))
        rc = fail(e, CLNODE_ERR_OUT_OF_MEMORY, "out of memory for the cotangent");
    if (!rc) {
        clnode_gradient_options go;
        clnode_gradient_default_options(&go);
        go.cancel = on_cancel;
        const unsigned long long t0 = now_ns();
        const clnode_status st = clnode_gradient_compute(xc->ctx, model, &go, sol, pl->T, cot, &g);
        const unsigned long long dt = now_ns() - t0;
        pthread_mutex_lock(&g_lock);
        g_reverse_ns += dt;
        g_reverses++;
        pthread_mutex_unlock(&g_lock);
        if (st != CLNODE_OK)
            rc = fail(e, st, "%s", clnode_context_last_error(xc->ctx));
    }
    for (int i = 0; !rc && i < nouts; i++) {
        const xla_grad_out *o = &outs[i];
        const size_t N = pl->n;
        if (o->which == 0 || o->which == 5) { /* per trajectory */
            const double *v = o->which == 0 ? clnode_gradient_y0(g) : clnode_gradient_inputs(g);
            const size_t c = o->which == 0 ? N : pl->k;
            for (size_t t = 0; t < m; t++)
                for (size_t j = 0; j < c; j++)
                    put(o->b, sel[t] * c + j, v[t * c + j]);
            continue;
        }
        const size_t row = op_row(&o->shape, lead, nl, sel[0]);
        if (o->which == 6) {
            size_t ns = 0;
            const double *s = clnode_gradient_out_scale(g, &ns);
            for (size_t j = 0; j < N; j++)
                put(o->b, row * N + j, s && ns ? s[ns == 1 ? 0 : j] : 0.0);
        } else {
            size_t np = 0;
            const double *p = clnode_gradient_params(g, &np);
            for (size_t j = 0; j < pl->n_params; j++)
                put(o->b, row * pl->n_params + j, p[j]);
        }
    }
    clnode_gradient_destroy(&g);
    clnode_solution_destroy(&sol);
    clnode_model_destroy(&model);
    batch_free(&x);
    free(cot);
    return rc;
}

static int vjp_run(cxf_call_frame *f, xla_fail *e)
{
    if (read_frame(f, 10, -1, "the reverse pass", e))
        return -1;
    const xla_plan *pl = frame_plan(f, "the reverse pass", e);
    if (!pl)
        return -1;
    int64_t want = 0, keep = 0, lead[XLA_MAX_LEAD];
    attr_int(f, "want", &want);
    attr_int(f, "keep", &keep);
    const cxf_buffer *ctb = f->args.args[0];
    size_t nl, B;
    if (!CXF_COVERS(ctb, cxf_buffer, dims) || lead_of(ctb, 2, lead, &nl, &B, e))
        return -1;
    xla_op ct, tok, ops[8];
    const int64_t ct_core[2] = {(int64_t)pl->T, (int64_t)pl->n};
    if (op_read(&ct, ctb, "the cotangent of ys", 2, ct_core, lead, nl,
                pl->y_f64 ? CXF_F64 : CXF_F32, e) ||
        op_read(&tok, f->args.args[1], "token", 0, NULL, lead, nl, CXF_S32, e) ||
        read_operands(f, 2, pl, lead, nl, ops, e))
        return -1;
    xla_grad_out outs[4];
    int nouts = 0;
    for (int i = 0; i < 8; i++)
        if (want & (1 << i)) {
            if (nouts == 4 || nouts >= f->rets.size || (i != 0 && i != 5 && i != 6 && i != 7))
                return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                            "clnode: the reverse pass: attribute want %lld, %lld results",
                            (long long)want, (long long)f->rets.size);
            outs[nouts].which = i;
            outs[nouts].b = f->rets.rets[nouts];
            const int64_t core = (int64_t)ops[i].core;
            if (op_read(&outs[nouts].shape, outs[nouts].b, NAMES[i], 1, &core, lead, nl,
                        ops[i].b->dtype, e))
                return -1;
            nouts++;
        }
    if (nouts != f->rets.size)
        return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                    "clnode: the reverse pass gives %d results, not %lld", nouts,
                    (long long)f->rets.size);
    /* the axes along which the batch-wide cotangents are one per index */
    int kept[XLA_MAX_LEAD] = {0}, any = 0;
    size_t groups = 1;
    for (size_t a = 0; a < nl; a++) {
        kept[a] = (keep >> a) & 1;
        for (int i = 6; i < 8; i++)
            kept[a] |= ops[i].nl && ops[i].dims[a] > 1;
        any |= kept[a];
        groups *= kept[a] ? (size_t)lead[a] : 1;
    }
    /* the forward's tape: one token for the whole batch */
    int32_t token = 0;
    int same = B > 0;
    for (size_t b = 0; b < B; b++) {
        const int32_t v = ((const int32_t *)tok.b->data)[op_row(&tok, lead, nl, b)];
        if (b == 0)
            token = v;
        same &= v == token;
    }
    xla_tape *tape = same && token < 0 ? tape_take(token, 1) : NULL;
    if (!same || token >= 0) {
        pthread_mutex_lock(&g_lock);
        g_misses += B > 0;
        pthread_mutex_unlock(&g_lock);
    }
    if (any && tape) {
        tape_free(tape);
        tape = NULL;
    }
    for (int i = 0; i < nouts; i++) { /* zeros where no trajectory writes (an empty batch) */
        size_t elems = 1;
        for (int64_t a = 0; a < outs[i].b->rank; a++)
            elems *= (size_t)outs[i].b->dims[a];
        memset(outs[i].b->data, 0, elems * (outs[i].b->dtype == CXF_F32 ? 4 : 8));
    }
    if (B == 0)
        return 0;
    size_t *sel = malloc(B * sizeof *sel);
    if (!sel)
        return fail(e, CLNODE_ERR_OUT_OF_MEMORY, "out of memory");
    clnode_status st;
    xla_ctx *xc = ctx_take(pl->device, e->msg, sizeof e->msg, &st);
    if (!xc) {
        free(sel);
        if (tape)
            tape_free(tape);
        e->st = st;
        return -1;
    }
    const int want_scale = (int)((want >> 6) & 1);
    int rc = 0;
    for (size_t gi = 0; !rc && gi < groups; gi++) {
        /* the trajectories of group gi: those whose kept coordinates are gi's, in C order */
        size_t m = 0;
        for (size_t b = 0; b < B; b++) {
            size_t rest = b, gidx = 0, gstride = 1;
            for (size_t a = nl; a-- > 0;) {
                const size_t i = rest % (size_t)lead[a];
                rest /= (size_t)lead[a];
                if (kept[a]) {
                    gidx += i * gstride;
                    gstride *= (size_t)lead[a];
                }
            }
            if (gidx == gi)
                sel[m++] = b;
        }
        rc = reverse_one(pl, ops, &ct, lead, nl, sel, m, any ? kept : NULL, tape, outs, nouts,
                         want_scale, xc, e);
    }
    if (tape)
        tape_free(tape);
    ctx_give(xc);
    free(sel);
    return rc;
}

static cxf_error *clnode_xla_vjp(cxf_call_frame *f)
{
    return handle(f, vjp_run);
}

/* ------------------------------------------------------------------------------------------------
 * Python: plans, capsules, the tape registry's bound and counts */

/* The options ((name, text), ...: each as clnode-solve's --set takes it) parsed into o. */
static int plan_options(clnode_solve_options *o, PyObject *pairs)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pairs); i++) {
        const char *name, *text;
        char msg[320];
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(pairs, i), "ss", &name, &text))
            return -1;
        if (clnode_solve_option_parse(o, name, text, msg, sizeof msg) != CLNODE_OK) {
            PyErr_SetString(PyExc_ValueError, msg);
            return -1;
        }
    }
    return 0;
}

/* plan(options ((name, text), ...), device, sizes, biases, activation, final_activation,
 * time_input, k, n_ts, T, y_f64, t_f64, has_ts, has_scale, scale_traced, throw, checkpoint_every)
 * -> int */
static PyObject *xla_plan_new(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *opts, *sizes, *biases;
    const char *device, *act, *fin;
    int time_input, y_f64, t_f64, has_ts, has_scale, scale_traced, throw_;
    Py_ssize_t k, n_ts, T;
    long ckpt;
    if (!PyArg_ParseTuple(args, "O!sO!O!sspnnnppppppl", &PyTuple_Type, &opts, &device,
                          &PyTuple_Type, &sizes, &PyTuple_Type, &biases, &act, &fin, &time_input,
                          &k, &n_ts, &T, &y_f64, &t_f64, &has_ts, &has_scale, &scale_traced,
                          &throw_, &ckpt))
        return NULL;
    xla_plan *p = calloc(1, sizeof *p);
    if (!p)
        return PyErr_NoMemory();
    const Py_ssize_t L = PyTuple_GET_SIZE(biases);
    if (L < 1 || L > XLA_MAX_LAYERS || PyTuple_GET_SIZE(sizes) != L + 1 ||
        strlen(device) >= sizeof p->device) {
        free(p);
        PyErr_SetString(PyExc_ValueError, "plan: layers, sizes or device out of range");
        return NULL;
    }
    snprintf(p->device, sizeof p->device, "%s", device);
    clnode_solve_default_options(&p->opts);
    p->L = (size_t)L;
    for (Py_ssize_t i = 0; i <= L; i++)
        p->sizes[i] = PyLong_AsSize_t(PyTuple_GET_ITEM(sizes, i));
    for (Py_ssize_t i = 0; i < L; i++) {
        p->has_bias[i] = PyObject_IsTrue(PyTuple_GET_ITEM(biases, i));
        p->n_params += p->sizes[i + 1] * p->sizes[i] + (p->has_bias[i] ? p->sizes[i + 1] : 0);
    }
    p->n = p->sizes[L];
    p->k = (size_t)k;
    p->n_ts = (size_t)n_ts;
    p->T = (size_t)T;
    p->time_input = time_input;
    p->y_f64 = y_f64;
    p->t_f64 = t_f64;
    p->has_ts = has_ts;
    p->has_scale = has_scale;
    p->scale_traced = scale_traced;
    p->throw_ = throw_;
    p->checkpoint_every = ckpt;
    if (PyErr_Occurred() || plan_options(&p->opts, opts) < 0 ||
        clnode_activation_from_name(act, &p->act) != CLNODE_OK ||
        clnode_activation_from_name(fin, &p->fin) != CLNODE_OK) {
        free(p);
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "plan: activation %s or %s", act, fin);
        return NULL;
    }
    pthread_mutex_lock(&g_lock);
    if (g_nplans == g_capplans) {
        const size_t cap = g_capplans ? 2 * g_capplans : 16;
        xla_plan **np = realloc(g_plans, cap * sizeof *np);
        if (!np) {
            pthread_mutex_unlock(&g_lock);
            free(p);
            return PyErr_NoMemory();
        }
        g_plans = np;
        g_capplans = cap;
    }
    g_plans[g_nplans++] = p;
    const size_t h = g_nplans;
    pthread_mutex_unlock(&g_lock);
    return PyLong_FromSize_t(h);
}

static PyObject *xla_tape_stats(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    size_t tapes = 0;
    pthread_mutex_lock(&g_lock);
    tape_limit_from_env();
    for (xla_tape *t = g_tapes_old; t; t = t->next)
        tapes++;
    PyObject *d = Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:n,s:n,s:n}", "solves", g_solves, "trajectories",
        g_trajectories, "solve_ns", g_solve_ns, "reverses", g_reverses, "reverse_ns", g_reverse_ns,
        "hits", g_hits, "misses", g_misses, "kept", g_kept, "dropped", g_dropped, "tapes",
        (Py_ssize_t)tapes, "bytes", (Py_ssize_t)g_tape_bytes, "limit", (Py_ssize_t)g_tape_limit);
    pthread_mutex_unlock(&g_lock);
    return d;
}

static PyObject *xla_set_tape_limit(PyObject *self, PyObject *arg)
{
    (void)self;
    const size_t limit = PyLong_AsSize_t(arg);
    if (limit == (size_t)-1 && PyErr_Occurred())
        return NULL;
    pthread_mutex_lock(&g_lock);
    g_tape_limit_read = 1;
    const size_t old = g_tape_limit;
    g_tape_limit = limit;
    xla_tape *drop = tapes_trim(limit);
    pthread_mutex_unlock(&g_lock);
    tapes_free_list(drop);
    return PyLong_FromSize_t(old);
}

static PyMethodDef xla_methods[] = {
    {"plan", xla_plan_new, METH_VARARGS, "a call's plan, fixed for the process: its handle"},
    {"tape_stats", xla_tape_stats, METH_NOARGS, "the tape registry's counts"},
    {"set_tape_limit", xla_set_tape_limit, METH_O, "the registry's bound in bytes; the old one"},
    {NULL, NULL, 0, NULL}};

static PyObject *capsule(cxf_handler *h)
{
    union {
        cxf_handler *f;
        void *p;
    } u;
    u.f = h;
    return PyCapsule_New(u.p, NULL, NULL);
}

PyObject *clnode_xla_functions(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    PyObject *fwd = capsule(clnode_xla_fwd), *vjp = capsule(clnode_xla_vjp);
    PyObject *api = Py_BuildValue("(ii)", CXF_API_MAJOR, CXF_API_MINOR);
    int bad = !fwd || !vjp || !api || PyDict_SetItemString(d, "fwd", fwd) < 0 ||
              PyDict_SetItemString(d, "vjp", vjp) < 0 || PyDict_SetItemString(d, "api", api) < 0;
    Py_XDECREF(fwd);
    Py_XDECREF(vjp);
    Py_XDECREF(api);
    for (PyMethodDef *m = xla_methods; !bad && m->ml_name; m++) {
        PyObject *fn = PyCFunction_New(m, self);
        bad = !fn || PyDict_SetItemString(d, m->ml_name, fn) < 0;
        Py_XDECREF(fn);
    }
    if (bad)
        Py_CLEAR(d);
    return d;
}
