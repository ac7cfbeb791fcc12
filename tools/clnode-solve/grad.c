/* grad.c - clnode-solve's reverse pass (grad.h). */
#include "grad.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npy.h"
#include "npz.h"
#include "tool_problem.h"
#include "tool_temp.h"

static void shape_text(char *buf, size_t cap, const cln_npy_header *h)
{
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (size_t d = 0; d < h->ndim && n < cap; ++d)
        n += (size_t)snprintf(buf + n, cap - n, d ? ", %zu" : "%zu", h->shape[d]);
    if (n < cap)
        snprintf(buf + n, cap - n, h->ndim == 1 ? ",)" : ")");
}

static void expected_text(char *buf, size_t cap, size_t B, size_t T, size_t N)
{
    if (T)
        snprintf(buf, cap, "(%zu, %zu, %zu)", B, T, N);
    else
        snprintf(buf, cap, "(%zu, T, %zu) with T the most points any trajectory saves", B, N);
}

/* The smallest magnitude that rounds to infinity in float (FLT_MAX and half its last place). */
#define FP32_LIMIT 0x1.ffffffp127

/* The cotangents' shape against the saved values' (B, T, N); T = 0: any. Returns 0 or 2. */
typedef struct cot_expect {
    const char *src;
    size_t B, T, N;
    int fp32; /* an fp32 solve: each value must stay finite once rounded to float */
} cot_expect;

static int check_cot_header(void *user, const cln_npy_header *h)
{
    const cot_expect *e = user;
    if (h->ndim == 3 && h->shape[0] == e->B && (!e->T || h->shape[1] == e->T) &&
        h->shape[2] == e->N)
        return 0;
    char given[128], want[128];
    shape_text(given, sizeof given, h);
    expected_text(want, sizeof want, e->B, e->T, e->N);
    tool_error("%s: cotangents of shape %s, but the saved values (--out's ys) have shape %s",
               e->src, given, want);
    return TOOL_EXIT_INPUT;
}

/* Parses and checks the .npy image `img` and decodes it into c. Returns 0, 2 or 3. */
static int take_cot(const cot_expect *e, const unsigned char *img, size_t size, solve_cot *c)
{
    cln_npy_header h;
    char err[256];
    if (cln_npy_parse(img, size, &h, err, sizeof err)) {
        tool_error("%s: %s", e->src, err);
        return TOOL_EXIT_INPUT;
    }
    int rc = check_cot_header((void *)e, &h);
    if (rc)
        return rc;
    c->v = malloc((h.count ? h.count : 1) * sizeof(double));
    if (!c->v) {
        tool_error("%s: out of memory", e->src);
        return TOOL_EXIT_RESOURCE;
    }
    cln_npy_decode(img, &h, c->v);
    c->B = h.shape[0];
    c->T = h.shape[1];
    c->N = h.shape[2];
    const size_t per = c->T * c->N;
    for (size_t i = 0; i < h.count; ++i)
        if (!isfinite(c->v[i])) {
            tool_error("%s: cotangent [%zu][%zu][%zu] is %g: every value must be finite (padding "
                       "slots too: give them 0)",
                       e->src, i / per, i % per / c->N, i % c->N, c->v[i]);
            solve_grad_free(c);
            return TOOL_EXIT_INPUT;
        } else if (e->fp32 && !(fabs(c->v[i]) < FP32_LIMIT)) {
            tool_error("%s: cotangent [%zu][%zu][%zu] is %.9g: it overflows fp32 once rounded "
                       "(from |x| >= %.9g, FLT_MAX plus half an ulp), which the fp32 solve's "
                       "reverse pass would carry",
                       e->src, i / per, i % per / c->N, i % c->N, c->v[i], FP32_LIMIT);
            solve_grad_free(c);
            return TOOL_EXIT_INPUT;
        }
    return 0;
}

/* The one member of a .npz cotangent file: ys. Returns 0, 2 or 3. */
static int load_npz(const cot_expect *e, solve_cot *c)
{
    unsigned char *img = NULL;
    size_t len = 0, n = 0;
    cln_npz_entry ent[CLN_NPZ_MAX_MEMBERS];
    char err[256];
    int rc = tool_read_npz(e->src, &img, &len);
    if (!rc && cln_npz_parse(img, len, ent, &n, err, sizeof err) != 0) {
        tool_error("%s: %s", e->src, err);
        rc = TOOL_EXIT_INPUT;
    }
    size_t ys = n;
    for (size_t i = 0; i < n && !rc; ++i) {
        if (strcmp(ent[i].name, "ys") == 0) {
            ys = i;
        } else {
            tool_error("%s: unknown member %s.npy (only ys, the cotangents of the saved values, "
                       "is read: no gradient with respect to the times is computed)",
                       e->src, ent[i].name);
            rc = TOOL_EXIT_INPUT;
        }
    }
    if (!rc && ys == n) {
        tool_error("%s: no member ys (the cotangents of the saved values)", e->src);
        rc = TOOL_EXIT_INPUT;
    }
    if (!rc && ent[ys].size > SIZE_MAX) {
        tool_error("%s: member ys too large", e->src);
        rc = TOOL_EXIT_RESOURCE;
    }
    if (!rc) {
        char src[300];
        snprintf(src, sizeof src, "%.256s member ys", e->src);
        const cot_expect m = {src, e->B, e->T, e->N, e->fp32};
        rc = take_cot(&m, ent[ys].data, (size_t)ent[ys].size, c);
    }
    free(img);
    return rc;
}

int solve_grad_load(const char *path, size_t B, size_t N, size_t T, clnode_precision prec,
                    solve_cot *c)
{
    memset(c, 0, sizeof *c);
    const cot_expect e = {path, B, T, N, prec == CLNODE_FP32};
    const size_t n = strlen(path);
    if (n > 4 && strcmp(path + n - 4, ".npz") == 0)
        return load_npz(&e, c);
    unsigned char *img = NULL;
    size_t len = 0;
    int rc = tool_read_npy(path, check_cot_header, (void *)&e, &img, &len);
    if (!rc)
        rc = take_cot(&e, img, len, c);
    free(img);
    return rc;
}

void solve_grad_free(solve_cot *c)
{
    free(c->v);
    memset(c, 0, sizeof *c);
}

size_t solve_grad_slots(const clnode_solution *sol, const clnode_solve_options *o,
                        const clnode_problem *p)
{
    size_t T = 0;
    if (!o->save_steps) { /* the requested points */
        if (clnode_save_slots(NULL, o, p, &T) != CLNODE_OK)
            T = 0;
        return T;
    }
    for (size_t b = 0; b < clnode_solution_batch(sol); ++b) { /* the most of any trajectory */
        const size_t n = clnode_solution_points(sol, b);
        T = n > T ? n : T;
    }
    return T;
}

int solve_grad_check_slots(const char *path, const solve_cot *c, size_t T)
{
    if (c->T == T)
        return 0;
    tool_error("%s: cotangents of shape (%zu, %zu, %zu), but the saved values (--out's ys) have "
               "shape (%zu, %zu, %zu)",
               path, c->B, c->T, c->N, c->B, T, c->N);
    return TOOL_EXIT_INPUT;
}

/* ---- G.npz ---- */

enum {
    GRAD_MAX_NAME = 32
};

typedef struct grad_member {
    char name[GRAD_MAX_NAME];
    const double *v;
    size_t ndim;
    uint64_t shape[2];
} grad_member;

/* G's members in their order: y0, args, then each layer's weight and bias, then out_scale.
 * Returns their count (at most CLN_NPZ_MAX_MEMBERS). */
static size_t grad_members(const clnode_model *model, const clnode_gradient *g, size_t B,
                           grad_member *m)
{
    size_t n = 0;
    m[n++] = (grad_member){"y0", clnode_gradient_y0(g), 2, {B, clnode_model_dim(model)}};
    const size_t k = clnode_model_num_inputs(model);
    if (k)
        m[n++] = (grad_member){"args", clnode_gradient_inputs(g), 2, {B, k}};
    for (size_t l = 0; l < clnode_model_num_layers(model); ++l) {
        const size_t out = clnode_model_layer_out(model, l), in = clnode_model_layer_in(model, l);
        m[n] = (grad_member){"", clnode_gradient_weight(g, l), 2, {out, in}};
        snprintf(m[n++].name, GRAD_MAX_NAME, "layers.%u.weight", (unsigned)l);
        const double *bias = clnode_gradient_bias(g, l);
        if (bias) {
            m[n] = (grad_member){"", bias, 1, {out, 0}};
            snprintf(m[n++].name, GRAD_MAX_NAME, "layers.%u.bias", (unsigned)l);
        }
    }
    size_t ns = 0;
    const double *scale = clnode_gradient_out_scale(g, &ns);
    if (scale)
        m[n++] = (grad_member){"out_scale", scale, 1, {ns, 0}};
    return n;
}

/* Writes G's members to the descriptor fd (a new, empty temporary file). Returns 0 or -1 with a
 * message in err. */
static int grad_write_fd(int fd, const grad_member *m, size_t n, char *err, size_t errlen)
{
    cln_npz_layout *L = malloc(sizeof *L);
    if (!L) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    cln_npz_init(L, CLN_NPZ_ZIP64_THRESHOLD);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; ++i)
        rc = cln_npz_add(L, m[i].name, CLN_NPZ_F8, m[i].ndim, m[i].shape, err, errlen) < 0;
    rc = rc || cln_npz_plan(L, err, errlen) != 0;
    for (size_t i = 0; i < n && !rc; ++i) {
        uint32_t crc;
        const uint64_t bounds[2] = {0, L->m[i].rows};
        rc = cln_npz_write_rows(L, i, 0, L->m[i].rows, m[i].v, cln_npz_pwrite_fd, &fd, &crc, err,
                                errlen) != 0 ||
             cln_npz_member_crc(L, i, 1, bounds, &crc, err, errlen) != 0;
    }
    rc = rc || cln_npz_finish(L, cln_npz_pwrite_fd, &fd, err, errlen) != 0;
    free(L);
    return rc ? -1 : 0;
}

int solve_grad_context(clnode_context *ctx, clnode_context **rev, clnode_context **own)
{
    *own = NULL;
    if (strcmp(clnode_context_backend(ctx), "host") != 0 ||
        !strstr(clnode_context_device(ctx), "OpenBLAS")) {
        *rev = ctx;
        return 0;
    }
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = "host";
    co.log = tool_log;
    co.log_user = (void *)tool_prog;
    const clnode_status st = clnode_context_create(&co, own);
    *rev = *own;
    return st == CLNODE_OK ? 0 : tool_exit_status(st);
}

int solve_grad_write(const char *grad_path, const clnode_model *model, const clnode_gradient *g,
                     size_t batch, tool_out *out)
{
    grad_member *m = malloc(CLN_NPZ_MAX_MEMBERS * sizeof *m);
    if (!m) {
        tool_error("cannot write %s: out of memory", grad_path);
        return TOOL_EXIT_RESOURCE;
    }
    char err[256];
    int rc;
    const size_t n = grad_members(model, g, batch, m);
    if (fflush(out->f) != 0) { /* nothing is buffered: the members go by pwrite */
        tool_error("cannot write %s: %s", grad_path, strerror(errno));
        rc = TOOL_EXIT_RESOURCE;
    } else if (grad_write_fd(fileno(out->f), m, n, err, sizeof err) != 0) {
        tool_error("cannot write %s: %s", grad_path, err);
        rc = TOOL_EXIT_RESOURCE;
    } else {
        rc = 0;
    }
    free(m);
    return rc;
}

int solve_grad_cancel(void *user)
{
    static int noted;
    if (!noted) { /* the test hook: say once that the pass is under way (a test signals it) */
        noted = 1;
        const char *e = getenv("CLNODE_SOLVE_TEST_NOTE_REVERSE");
        if (e && *e)
            fprintf(stderr, "%s: test: the reverse pass is under way\n", tool_prog);
    }
    return tool_temp_cancel(user);
}

int solve_grad_run(const char *grad_path, clnode_context *ctx, const clnode_model *model,
                   const clnode_solution *sol, const solve_cot *c, tool_out *out)
{
    clnode_context *rev = NULL, *own = NULL;
    clnode_gradient *g = NULL;
    int rc = solve_grad_context(ctx, &rev, &own);
    if (!rc) {
        clnode_gradient_options go;
        clnode_gradient_default_options(&go);
        go.cancel = solve_grad_cancel;
        tool_temp_cooperate(1);
        const clnode_status st = clnode_gradient_compute(rev, model, &go, sol, c->T, c->v, &g);
        tool_temp_cooperate(0); /* a signal received: the process ends here, with its status */
        rc = st == CLNODE_OK ? 0 : tool_exit_status(st); /* the logger printed why */
    }
    if (!rc)
        rc = solve_grad_write(grad_path, model, g, clnode_solution_batch(sol), out);
    clnode_gradient_destroy(&g);
    clnode_context_destroy(&own);
    return rc;
}
