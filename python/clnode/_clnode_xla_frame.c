/* _clnode_xla_frame.c - clnode.jax's XLA custom calls: the call frame: errors, the metadata query,
 * attributes, operands, a handler's frame
 * (_clnode_xla_internal.h). */
#include "_clnode_xla_internal.h"
#include "core/fpenv.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------------
 * Errors */

cxf_error *xla_error(const cxf_call_frame *f, cxf_error_code code, const char *fmt, ...)
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

int fail(xla_fail *e, clnode_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->st = st;
    return -1;
}

cxf_error *error_of(const cxf_call_frame *f, const xla_fail *e)
{
    const char *cls;
    const cxf_error_code code = code_of(e->st, &cls);
    return xla_error(f, code, "%s (%s, in clnode.jax.diffeqsolve)", e->msg, cls);
}

/* ------------------------------------------------------------------------------------------------
 * The call frame: metadata query, attributes, operands */

/* 1 when the frame is XLA's metadata query (answered here; *err set on a malformed one). */
int metadata_query(cxf_call_frame *f, cxf_error **err)
{
    *err = NULL;
    for (cxf_extension *e = f->extension_start; e; e = e->next) {
        if (e->type != CXF_EXTENSION_METADATA)
            continue;
        cxf_metadata_extension *m = (cxf_metadata_extension *)e;
        if (e->struct_size < sizeof *m || !m->metadata ||
            !CXF_COVERS(m->metadata, cxf_metadata, traits)) {
            if (f->api && CXF_COVERS(f->api, cxf_api, error_create))
                *err = xla_error(f, CXF_INVALID_ARGUMENT,
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
int attr_int(const cxf_call_frame *f, const char *name, int64_t *out)
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

const char *const NAMES[XLA_NOPS] = {"y0",   "t0",    "t1",     "dt0", "ts",
                                     "args", "scale", "params", "ctrl"};
const int CORE_RANK[XLA_NOPS] = {1, 0, 0, 0, 1, 1, 1, 1, 1};

const char *dtype_name(int d)
{
    return d == CXF_F32 ? "float32" : d == CXF_F64 ? "float64" : d == CXF_S32 ? "int32" : "another";
}

/* Operand `b` named `name` with `core_rank` core axes of core sizes `core` (-1: any), read
 * against the batch's leading axes lead[nl]: float32 or float64, its leading axes none (the
 * whole batch shares it) or nl, each 1 or the batch's. */
int op_read(xla_op *o, const cxf_buffer *b, const char *name, int core_rank, const int64_t *core,
            const int64_t *lead, size_t nl, int want_dtype, xla_fail *e)
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
size_t op_row(const xla_op *o, const int64_t *lead, size_t nl, size_t f)
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

/* 1 when operand o reads more than one row among trajectories sel[0..m) */
int op_varies(const xla_op *o, const int64_t *lead, size_t nl, const size_t *sel, size_t m)
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

int read_frame(const cxf_call_frame *f, int64_t nargs, int64_t nrets, const char *what, xla_fail *e)
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

const xla_plan *frame_plan(const cxf_call_frame *f, const char *what, xla_fail *e)
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
int lead_of(const cxf_buffer *b, int core_rank, int64_t *lead, size_t *nl, size_t *B, xla_fail *e)
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

int read_operands(const cxf_call_frame *f, int64_t first, const xla_plan *pl, const int64_t *lead,
                  size_t nl, xla_op *ops, xla_fail *e)
{
    const int ydt = pl->y_f64 ? CXF_F64 : CXF_F32, tdt = pl->t_f64 ? CXF_F64 : CXF_F32;
    const int64_t n = (int64_t)pl->n;
    const int64_t cores[XLA_NOPS] = {n,
                                     -1,
                                     -1,
                                     -1,
                                     (int64_t)pl->n_ts,
                                     (int64_t)pl->k,
                                     pl->has_scale ? n : 0,
                                     (int64_t)pl->n_params,
                                     (int64_t)pl->n_ctrl};
    const int dts[XLA_NOPS] = {ydt, tdt, tdt, tdt, tdt, pl->k ? ydt : 0, 0, 0, 0};
    for (int i = 0; i < XLA_NOPS; i++)
        if (op_read(&ops[i], f->args.args[first + i], NAMES[i], CORE_RANK[i], &cores[i], lead, nl,
                    dts[i], e))
            return -1;
    return 0;
}

/* A handler: the metadata query answered, else run under the SIGINT flag, its failure XLA's
 * error. */
cxf_error *handle(cxf_call_frame *f, int (*run)(cxf_call_frame *f, xla_fail *e))
{
    cxf_error *err;
    if (metadata_query(f, &err))
        return err;
    xla_fail e = {CLNODE_OK, ""};
    /* XLA runs a jitted program with subnormals flushed (FTZ and DAZ): the handler's own
     * conversions of operands and results compute in IEEE's default, as the library does
     * (lib/core/fpenv.h), so that a jitted call gives the bits of an eager one */
    CLN_FPENV_SCOPE;
    sig_enter();
    const int rc = run(f, &e);
    sig_leave();
    return rc ? error_of(f, &e) : NULL;
}

/* handle(), its whole time added to *ns (and 1 to *calls when given) */
cxf_error *handle_timed(cxf_call_frame *f, int (*run)(cxf_call_frame *f, xla_fail *e),
                        unsigned long long *ns, unsigned long long *calls)
{
    const unsigned long long t0 = now_ns();
    cxf_error *err = handle(f, run);
    const unsigned long long dt = now_ns() - t0;
    pthread_mutex_lock(&g_lock);
    *ns += dt;
    if (calls)
        (*calls)++;
    pthread_mutex_unlock(&g_lock);
    return err;
}
