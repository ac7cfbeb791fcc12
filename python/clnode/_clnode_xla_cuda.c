/* _clnode_xla_cuda.c - clnode.jax's forward solve and reverse pass as XLA FFI handlers on XLA's
 * CUDA platform: the handlers of _clnode_xla.c (the same metadata answer, attributes, operand
 * checks, plans, tapes and tokens) run on host copies of the device buffers XLA passes, except
 * a forward solve and a reverse pass that can run on XLA's buffers themselves
 * (_clnode_xla_cuda_fwd.c, _clnode_xla_cuda_vjp.c: the plan's device is CUDA, ...).
 *
 * A call: the frame's operands and results are checked to be buffers of the dtypes the handlers
 * use; XLA's stream comes from XLA_FFI_Stream_Get; every operand is copied to host memory on that
 * stream (cudaMemcpyAsync, device to host) and the stream is synchronised; the CPU handler runs
 * on a copy of the frame whose buffers are the host copies; its results are copied back to XLA's
 * device buffers on the stream (host to device, the token among them) and the stream is
 * synchronised again before the host memory is freed. The solve itself runs on the device of the
 * call's plan (device= of the solve, $CLNODE_DEVICE, or the host). XLA's metadata query and the
 * other stages go to the CPU handler unchanged, so the traits are the same: none (not
 * command-buffer compatible: a CUDA-graph replay would skip this host logic).
 *
 * The CUDA runtime (cudaMemcpyAsync, cudaStreamSynchronize and its error strings) is loaded with
 * dlopen on the first call: the one the process has loaded already (JAX's CUDA plugin's), else
 * libcudart.so.13, .12 or the unversioned name. Nothing here needs a CUDA header or library at
 * build time. Without a runtime or a driver a call fails with XLA's UNAVAILABLE and a message
 * saying why. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "_clnode_xla_internal.h"
#include "_clnode_xla_cuda.h"
#include "_xla_ffi.h"

/* ---- the CUDA runtime, loaded at run time ---- */

enum {
    CUDA_H2D = 1,
    CUDA_D2H = 2
}; /* cudaMemcpyKind */
_Static_assert(CUDA_H2D == XLA_CUDA_H2D && CUDA_D2H == XLA_CUDA_D2H, "one cudaMemcpyKind");
enum {
    CUDA_NO_MEMORY = 2,
    CUDA_NO_DRIVER = 35,
    CUDA_NO_DEVICE = 100
}; /* cudaError_t */

static struct {
    int (*memcpy_async)(void *dst, const void *src, size_t n, int kind, void *stream);
    int (*sync)(void *stream);
    const char *(*name)(int e);
    const char *(*text)(int e);
    char why[400]; /* why it did not load ("" when it did) */
} g_rt;
static pthread_once_t g_rt_once = PTHREAD_ONCE_INIT;

/* One symbol of lib into *fn (a function pointer of any type). */
static int rt_sym(void *lib, const char *name, void *fn, size_t size)
{
    void *p = dlsym(lib, name);
    if (p)
        memcpy(fn, &p, size); /* ISO C has no cast from an object pointer to a function pointer */
    return p != NULL;
}

static void rt_load(void)
{
    static const char *const names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
    void *lib = NULL;
    for (int pass = 0; pass < 2 && !lib; ++pass) /* first the one loaded already */
        for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; ++i)
            lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL | (pass == 0 ? RTLD_NOLOAD : 0));
    if (!lib) {
        const char *e = dlerror();
        snprintf(g_rt.why, sizeof g_rt.why,
                 "cannot load the CUDA runtime (libcudart.so.13, .12): %s", e ? e : "not found");
        return;
    }
    if (!rt_sym(lib, "cudaMemcpyAsync", &g_rt.memcpy_async, sizeof g_rt.memcpy_async) ||
        !rt_sym(lib, "cudaStreamSynchronize", &g_rt.sync, sizeof g_rt.sync) ||
        !rt_sym(lib, "cudaGetErrorName", &g_rt.name, sizeof g_rt.name) ||
        !rt_sym(lib, "cudaGetErrorString", &g_rt.text, sizeof g_rt.text))
        snprintf(g_rt.why, sizeof g_rt.why, "the CUDA runtime lacks an entry point: %s", dlerror());
}

/* The runtime loaded (once), or the reason it is not: NULL when it is. */
const char *xla_cuda_runtime(void)
{
    pthread_once(&g_rt_once, rt_load);
    return g_rt.why[0] ? g_rt.why : NULL;
}

int xla_cuda_copy(void *dst, const void *src, size_t n, int kind, void *stream)
{
    return n ? g_rt.memcpy_async(dst, src, n, kind, stream) : 0;
}

int xla_cuda_sync(void *stream)
{
    return g_rt.sync(stream);
}

/* ---- errors ---- */

/* A failed CUDA call: XLA's code for it and a message naming what failed. */
cxf_error *xla_cuda_error(const cxf_call_frame *f, const char *what, int e, const char *call)
{
    const cxf_error_code code = e == CUDA_NO_DRIVER || e == CUDA_NO_DEVICE ? CXF_UNAVAILABLE
                                : e == CUDA_NO_MEMORY                      ? CXF_RESOURCE_EXHAUSTED
                                                                           : CXF_INTERNAL;
    return xla_error(f, code, "%s: %s: %s (%s, %d) (clnode.DeviceError, in clnode.jax.diffeqsolve)",
                     what, call, g_rt.text(e), g_rt.name(e), e);
}

/* ---- staging ---- */

/* The bytes of one element of dtype d; 0 for a dtype the handlers do not use. */
static size_t dtype_bytes(int d)
{
    switch (d) {
    case CXF_PRED:
        return 1;
    case CXF_S32:
    case CXF_F32:
        return 4;
    case CXF_S64:
    case CXF_F64:
        return 8;
    default:
        return 0;
    }
}

/* The bytes of buffer b (a checked operand or result); (size_t)-1 when it is not one. */
size_t xla_buffer_bytes(const cxf_buffer *b)
{
    if (!b || b->struct_size < sizeof *b || b->rank < 0 || (b->rank > 0 && !b->dims))
        return (size_t)-1;
    size_t n = dtype_bytes(b->dtype);
    if (!n)
        return (size_t)-1;
    for (int64_t i = 0; i < b->rank; ++i) {
        if (b->dims[i] < 0 || (b->dims[i] > 0 && n > SIZE_MAX / (size_t)b->dims[i]))
            return (size_t)-1;
        n *= (size_t)b->dims[i];
    }
    return n;
}

/* One call's host copies: buffer descriptors, pointer arrays and the data. */
typedef struct stage {
    cxf_buffer *bufs; /* args then rets */
    void **ptrs;      /* the same, for the frame's lists */
    size_t *bytes;
    unsigned char *data;
} stage;

static void stage_free(stage *s)
{
    free(s->bufs);
    free(s->ptrs);
    free(s->bytes);
    free(s->data);
}

/* Checks the frame's lists (buffers of known dtypes) and sizes the host copies; NULL or the
 * error. */
static cxf_error *stage_plan(const cxf_call_frame *f, const char *what, stage *s, size_t *total)
{
    const int64_t na = f->args.size, nr = f->rets.size;
    if (f->args.struct_size < sizeof f->args || f->rets.struct_size < sizeof f->rets || na < 0 ||
        nr < 0 || (na && (!f->args.args || !f->args.types)) ||
        (nr && (!f->rets.rets || !f->rets.types)))
        return xla_error(f, CXF_INVALID_ARGUMENT, "%s: a malformed call frame", what);
    const size_t n = (size_t)(na + nr);
    s->bufs = calloc(n ? n : 1, sizeof *s->bufs);
    s->ptrs = calloc(n ? n : 1, sizeof *s->ptrs);
    s->bytes = calloc(n ? n : 1, sizeof *s->bytes);
    if (!s->bufs || !s->ptrs || !s->bytes)
        return xla_error(f, CXF_RESOURCE_EXHAUSTED, "%s: out of host memory", what);
    *total = 0;
    for (size_t i = 0; i < n; ++i) {
        const int ret = i >= (size_t)na;
        const size_t k = ret ? i - (size_t)na : i;
        const int type = ret ? (int)f->rets.types[k] : (int)f->args.types[k];
        const cxf_buffer *b = ret ? f->rets.rets[k] : f->args.args[k];
        const size_t bytes = type == CXF_ARG_BUFFER ? xla_buffer_bytes(b) : (size_t)-1;
        if (bytes == (size_t)-1)
            return xla_error(f, CXF_INVALID_ARGUMENT,
                             "%s: %s %zu is not a buffer of a dtype clnode takes (f32, f64, "
                             "s32, s64, pred)",
                             what, ret ? "result" : "operand", k);
        if (bytes > SIZE_MAX - *total - 64)
            return xla_error(f, CXF_RESOURCE_EXHAUSTED, "%s: the operands are too large", what);
        s->bufs[i] = *b;
        s->bytes[i] = bytes;
        *total += (bytes + 63) / 64 * 64;
    }
    return NULL;
}

int xla_cuda_executes(const cxf_call_frame *f, int64_t nargs, int64_t nrets, const char *what)
{
    for (const cxf_extension *x = f->extension_start; x; x = x->next)
        if (x->type == CXF_EXTENSION_METADATA)
            return 0;
    if (f->stage != CXF_STAGE_EXECUTE)
        return 0;
    xla_fail e = {CLNODE_OK, ""};
    if (read_frame(f, nargs, nrets, what, &e))
        return 0;
    for (int64_t i = 0; i < f->args.size; i++)
        if (xla_buffer_bytes(f->args.args[i]) == (size_t)-1)
            return 0;
    for (int64_t i = 0; i < f->rets.size; i++)
        if (xla_buffer_bytes(f->rets.rets[i]) == (size_t)-1)
            return 0;
    return 1;
}

cxf_error *xla_stream(cxf_call_frame *f, const char *what, cxf_stream_get_args *sg)
{
    memset(sg, 0, sizeof *sg);
    if (!CXF_COVERS(f->api, struct cxf_api, stream_get) || !f->api->stream_get)
        return xla_error(f, CXF_UNIMPLEMENTED, "%s: this XLA has no XLA_FFI_Stream_Get", what);
    sg->struct_size = sizeof *sg;
    sg->ctx = f->ctx;
    return f->api->stream_get(sg);
}

/* Runs `inner` on host copies of f's device buffers, staged on XLA's stream. */
static cxf_error *staged(cxf_call_frame *f, cxf_handler *inner, const char *what)
{
    /* the metadata query and the stages before execution: the CPU handler's answers */
    for (const cxf_extension *x = f->extension_start; x; x = x->next)
        if (x->type == CXF_EXTENSION_METADATA)
            return inner(f);
    if (f->stage != CXF_STAGE_EXECUTE)
        return inner(f);
    stage s = {0};
    size_t total = 0;
    cxf_error *err = stage_plan(f, what, &s, &total);
    if (err) {
        stage_free(&s);
        return err;
    }
    cxf_stream_get_args sg;
    err = xla_stream(f, what, &sg);
    if (!err) {
        pthread_once(&g_rt_once, rt_load);
        if (g_rt.why[0])
            err =
                xla_error(f, CXF_UNAVAILABLE,
                          "%s: %s (clnode.DeviceError, in clnode.jax.diffeqsolve)", what, g_rt.why);
    }
    if (!err && !(s.data = malloc(total ? total : 1)))
        err = xla_error(f, CXF_RESOURCE_EXHAUSTED, "%s: cannot allocate %zu bytes of host copies",
                        what, total);
    const size_t na = (size_t)f->args.size, n = na + (size_t)f->rets.size;
    size_t off = 0;
    for (size_t i = 0; !err && i < n; ++i) {
        void *dev = s.bufs[i].data;
        s.bufs[i].data = s.data + off;
        s.ptrs[i] = &s.bufs[i];
        off += (s.bytes[i] + 63) / 64 * 64;
        int e = i < na && s.bytes[i]
                    ? g_rt.memcpy_async(s.bufs[i].data, dev, s.bytes[i], CUDA_D2H, sg.stream)
                    : 0;
        if (e)
            err = xla_cuda_error(f, what, e, "cudaMemcpyAsync (an operand to the host)");
    }
    int e = err ? 0 : g_rt.sync(sg.stream);
    if (e)
        err = xla_cuda_error(f, what, e, "cudaStreamSynchronize (the operands' copies)");
    if (!err) {
        cxf_call_frame hf = *f; /* the same call on the host copies */
        hf.args.args = s.ptrs;
        hf.rets.rets = s.ptrs + na;
        err = inner(&hf);
    }
    for (size_t i = na; !err && i < n; ++i) {
        const cxf_buffer *dev = f->rets.rets[i - na];
        e = s.bytes[i]
                ? g_rt.memcpy_async(dev->data, s.bufs[i].data, s.bytes[i], CUDA_H2D, sg.stream)
                : 0;
        if (e)
            err = xla_cuda_error(f, what, e, "cudaMemcpyAsync (a result to the device)");
    }
    /* no copy may still read or write the host copies when they are freed below */
    if (s.data && !g_rt.why[0] && (e = g_rt.sync(sg.stream)) != 0 && !err)
        err = xla_cuda_error(f, what, e, "cudaStreamSynchronize (the results' copies)");
    stage_free(&s);
    return err;
}

/* ---- the handlers and their capsules ---- */

static cxf_handler *g_fwd, *g_vjp, *g_jvp; /* _clnode_xla.c's, set by clnode_xla_cuda_functions */

static cxf_error *clnode_xla_cuda_fwd(cxf_call_frame *f)
{
    cxf_error *err = NULL;
    if (xla_cuda_fwd_on_device(f, &err))
        return err;
    return staged(f, g_fwd, "clnode's CUDA custom call (forward)");
}

static cxf_error *clnode_xla_cuda_vjp(cxf_call_frame *f)
{
    cxf_error *err = NULL;
    if (xla_cuda_vjp_on_device(f, &err))
        return err;
    return staged(f, g_vjp, "clnode's CUDA custom call (reverse)");
}

static cxf_error *clnode_xla_cuda_jvp(cxf_call_frame *f)
{
    return staged(f, g_jvp, "clnode's CUDA custom call (tangent)");
}

typedef union {
    cxf_handler *f;
    void *p;
} handler_ptr;

/* The handler in capsule `name` of the dict d (_xla()'s), or NULL with a Python error. */
static cxf_handler *handler_of(PyObject *d, const char *name)
{
    PyObject *c = PyDict_GetItemString(d, name); /* borrowed */
    handler_ptr u;
    u.p = c ? PyCapsule_GetPointer(c, NULL) : NULL;
    if (!u.p && !PyErr_Occurred())
        PyErr_Format(PyExc_RuntimeError, "_xla() has no handler \"%s\"", name);
    return u.p ? u.f : NULL;
}

PyObject *clnode_xla_cuda_functions(PyObject *self, PyObject *noargs)
{
    (void)noargs;
    PyObject *cpu = clnode_xla_functions(self, NULL);
    if (!cpu)
        return NULL;
    cxf_handler *fwd = handler_of(cpu, "fwd"), *vjp = fwd ? handler_of(cpu, "vjp") : NULL;
    cxf_handler *jvp = vjp ? handler_of(cpu, "jvp") : NULL;
    Py_DECREF(cpu);
    if (!fwd || !vjp || !jvp)
        return NULL;
    g_fwd = fwd; /* under the GIL, before XLA can call a CUDA handler */
    g_vjp = vjp;
    g_jvp = jvp;
    PyObject *d = PyDict_New();
    PyObject *cf = xla_capsule(clnode_xla_cuda_fwd), *cv = xla_capsule(clnode_xla_cuda_vjp);
    PyObject *cj = xla_capsule(clnode_xla_cuda_jvp);
    int bad = !d || !cf || !cv || !cj || PyDict_SetItemString(d, "fwd", cf) < 0 ||
              PyDict_SetItemString(d, "vjp", cv) < 0 || PyDict_SetItemString(d, "jvp", cj) < 0;
    Py_XDECREF(cf);
    Py_XDECREF(cv);
    Py_XDECREF(cj);
    if (bad)
        Py_CLEAR(d);
    return d;
}
