/* test_grad_analytic.c - the reverse pass (clnode/gradient.h) on the host against oracles that
 * need no other software:
 *   - analytic: y' = W y + b (one identity layer) under constant steps, for every method. The
 *     gradient of L = c . y(t1) with respect to y0, W and b against the derivative of the discrete
 *     map clnode computes (the method's steps with the step ends of a save_steps solve, run in
 *     long double with one forward tangent per parameter entry and y0 component), to 1e-13
 *     normwise; and the y0-gradient against the continuous one, exp(W T)^T c (long double, Taylor
 *     series with scaling and squaring), whose error must fall at the method's order when the
 *     step is halved;
 *   - finite differences of the whole solve under constant steps (whose steps do not move with
 *     the parameters): MLPs with a time input, conditioning inputs and an output scale, every
 *     hidden activation but relu and five methods' dense outputs, saved at SaveAt ts and t1, for
 *     every y0 component, input and parameter;
 *   - the bits: a trajectory's y0- and inputs-gradient alone and in a batch of 1000 (adaptive,
 *     fp32 and fp64); the parameters' gradient at 1, 2 and 4 threads and with compaction on and
 *     off; checkpoint_every 1, 3 and 1000; a solution kept on opencl:pocl and reversed on the
 *     host against a host solve's;
 *   - the memory the tape holds: clnode_solution_kept_bytes against the header's formula at a
 *     batch of 4096, the same for max_steps 4096 and 100000;
 *   - the errors: a NaN cotangent, too few slots, a solution without a tape, another model, a
 *     context other than the host.
 * argv[1] is the device (meson passes "host"). */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_device.h"
#include "test_expect.h"
#include "test_problem.h"
#include "test_util.h"

static const char *g_device = "host";
static clnode_context *g_ctx;

typedef long double ld;

/* ------------------------------------------------------------------------ shared helpers */

static clnode_gradient *grad_or_fail(clnode_context *ctx, const clnode_model *m,
                                     const clnode_solution *s, size_t slots, const double *cot)
{
    clnode_gradient *g = NULL;
    clnode_status st = clnode_gradient_compute(ctx, m, NULL, s, slots, cot, &g);
    if (st != CLNODE_OK)
        fail_msg("clnode_gradient_compute: %s: %s", clnode_status_name(st),
                 clnode_context_last_error(ctx));
    assert_non_null(g);
    return g;
}

static size_t slots_of(const clnode_solve_options *o, const clnode_problem *p)
{
    size_t slots = 0;
    assert_ok(clnode_save_slots(g_ctx, o, p, &slots));
    return slots;
}

/* max |a - b| / max |b| over n values (0 / 0 = 0). */
static double normwise(const double *a, const ld *b, size_t n)
{
    ld num = 0, den = 0;
    for (size_t i = 0; i < n; ++i) {
        ld d = fabsl((ld)a[i] - b[i]);
        num = d > num ? d : num;
        den = fabsl(b[i]) > den ? fabsl(b[i]) : den;
    }
    return den > 0 ? (double)(num / den) : (double)num;
}

/* The linear field f(y) = W y + b, one identity layer of width N. */
static clnode_model *linear_model(clnode_context *ctx, size_t N, const double *W, const double *b)
{
    size_t sizes[2] = {N, N};
    const double *ws[1] = {W}, *bs[1] = {b};
    clnode_model_desc d = test_mlp_desc(1, sizes, ws, bs);
    clnode_model *m = NULL;
    assert_ok(clnode_model_create(ctx, &d, &m));
    return m;
}

static clnode_solve_options constant_opts(const clnode_method *method, double dt0, double t1)
{
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    o.method = method;
    o.precision = CLNODE_FP64;
    o.constant_step = 1;
    o.t0 = 0.0;
    o.t1 = t1;
    o.dt0 = dt0;
    o.save_t1 = 1;
    o.keep_tape = 1;
    return o;
}

/* ------------------------------------------------------------------------ the analytic oracle */

enum {
    MAXN = 3,
    MAXP = MAXN * MAXN + 2 * MAXN, /* tangents: W (row-major), b, y0 */
};

/* Tangent p's direct contribution to f(z) = W z + b, component r: dW_p z + db_p. */
static ld direct_term(size_t N, size_t p, size_t r, const ld *z)
{
    if (p < N * N)
        return p / N == r ? z[p % N] : 0.0L;
    if (p < N * N + N)
        return p - N * N == r ? 1.0L : 0.0L;
    return 0.0L;
}

/* The method's step from (y, dy) with step h, in long double: y and its P tangents move to the
 * step's end. */
static void rk_step_dual(const clnode_method *m, size_t N, size_t P, const ld *W, const ld *b, ld h,
                         ld *y, ld (*dy)[MAXN])
{
    static ld k[CLNODE_MAX_STAGES][MAXN], dk[CLNODE_MAX_STAGES][MAXP][MAXN];
    const int s = m->stages;
    for (int i = 0; i < s; ++i) {
        ld z[MAXN], dz[MAXP][MAXN];
        for (size_t r = 0; r < N; ++r) {
            z[r] = y[r];
            for (size_t p = 0; p < P; ++p)
                dz[p][r] = dy[p][r];
            for (int j = 0; j < i; ++j) {
                const ld a = (ld)m->a[i * s + j];
                z[r] += h * a * k[j][r];
                for (size_t p = 0; p < P; ++p)
                    dz[p][r] += h * a * dk[j][p][r];
            }
        }
        for (size_t r = 0; r < N; ++r) {
            k[i][r] = b[r];
            for (size_t q = 0; q < N; ++q)
                k[i][r] += W[r * N + q] * z[q];
            for (size_t p = 0; p < P; ++p) {
                ld v = direct_term(N, p, r, z);
                for (size_t q = 0; q < N; ++q)
                    v += W[r * N + q] * dz[p][q];
                dk[i][p][r] = v;
            }
        }
    }
    for (int i = 0; i < s; ++i) {
        const ld w = h * (ld)m->b[i];
        for (size_t r = 0; r < N; ++r) {
            y[r] += w * k[i][r];
            for (size_t p = 0; p < P; ++p)
                dy[p][r] += w * dk[i][p][r];
        }
    }
}

/* d(c . y_n)/d(W, b, y0) of the discrete map: the method's steps from t = 0 to the step ends
 * ends[0 .. n), accumulated into gW (N x N), gb and gy0 (so that a batch's parameters sum). */
static void discrete_oracle(const clnode_method *m, size_t N, const double *W, const double *b,
                            const double *y0, const double *ends, size_t n, const double *c, ld *gW,
                            ld *gb, ld *gy0)
{
    const size_t P = N * N + 2 * N;
    ld Wl[MAXN * MAXN], bl[MAXN], y[MAXN], dy[MAXP][MAXN];
    for (size_t i = 0; i < N * N; ++i)
        Wl[i] = W[i];
    for (size_t r = 0; r < N; ++r) {
        bl[r] = b[r];
        y[r] = y0[r];
        for (size_t p = 0; p < P; ++p)
            dy[p][r] = p == N * N + N + r ? 1.0L : 0.0L;
    }
    ld t = 0.0L;
    for (size_t i = 0; i < n; ++i) {
        rk_step_dual(m, N, P, Wl, bl, (ld)ends[i] - t, y, dy);
        t = ends[i];
    }
    for (size_t p = 0; p < P; ++p) {
        ld v = 0;
        for (size_t r = 0; r < N; ++r)
            v += (ld)c[r] * dy[p][r];
        if (p < N * N)
            gW[p] += v;
        else if (p < N * N + N)
            gb[p - N * N] += v;
        else
            gy0[p - N * N - N] = v;
    }
}

/* exp(A) for an N x N A in long double: Taylor series of A / 2^s (norm <= 1/8), squared s times. */
static void expm_l(size_t N, const ld *A, ld *E)
{
    ld X[MAXN * MAXN], T[MAXN * MAXN], U[MAXN * MAXN], norm = 0;
    for (size_t r = 0; r < N; ++r) {
        ld row = 0;
        for (size_t q = 0; q < N; ++q)
            row += fabsl(A[r * N + q]);
        norm = row > norm ? row : norm;
    }
    int s = 0;
    ld scale = 1;
    for (; norm * scale > 0.125L; ++s)
        scale *= 0.5L;
    for (size_t i = 0; i < N * N; ++i) {
        X[i] = A[i] * scale;
        E[i] = T[i] = i % (N + 1) == 0 ? 1.0L : 0.0L;
    }
    for (int k = 1; k <= 30; ++k) {
        for (size_t r = 0; r < N; ++r)
            for (size_t q = 0; q < N; ++q) {
                ld v = 0;
                for (size_t j = 0; j < N; ++j)
                    v += T[r * N + j] * X[j * N + q];
                U[r * N + q] = v / k;
            }
        for (size_t i = 0; i < N * N; ++i)
            E[i] += (T[i] = U[i]);
    }
    for (int i = 0; i < s; ++i) {
        for (size_t r = 0; r < N; ++r)
            for (size_t q = 0; q < N; ++q) {
                ld v = 0;
                for (size_t j = 0; j < N; ++j)
                    v += E[r * N + j] * E[j * N + q];
                U[r * N + q] = v;
            }
        memcpy(E, U, N * N * sizeof *E);
    }
}

/* The linear problem of the analytic tests: a decaying rotation with coupling (eigenvalues of
 * moderate size, well conditioned), two trajectories with their own y0 and cotangent. */
enum {
    LN = 3,
    LB = 2
};
static const double lin_W[LN * LN] = {-0.5, 1.0, 0.1, -1.0, -0.3, 0.2, 0.05, -0.2, -0.7};
static const double lin_b[LN] = {0.3, -0.2, 0.1};
static const double lin_y0[LB * LN] = {1.0, -0.5, 0.25, -0.75, 0.6, 1.2};
static const double lin_c[LB * LN] = {0.7, -1.1, 0.4, -0.3, 0.9, 1.5};

/* One method's solve of the linear problem with constant steps dt0 over [0, T]: its gradient in
 * *g (caller destroys) and, through save_steps, the step ends of trajectory 0 (all trajectories
 * share them). */
static size_t linear_ends(const clnode_model *m, clnode_solve_options o, double *ends, size_t cap)
{
    o.save_steps = 1;
    o.keep_tape = 0;
    clnode_solution *s = test_solve_or_fail(g_ctx, m, &o, TEST_PROBLEM(LB, lin_y0));
    size_t n;
    const double *t, *y;
    assert_ok(clnode_solution_saved(s, 0, CLNODE_SAVE_STEPS, &n, &t, &y));
    assert_true(n <= cap);
    memcpy(ends, t, n * sizeof *t);
    clnode_solution_destroy(&s);
    return n;
}

static clnode_gradient *linear_grad(const clnode_model *m, const clnode_solve_options *o)
{
    const clnode_problem *p = TEST_PROBLEM(LB, lin_y0);
    clnode_solution *s = test_solve_or_fail(g_ctx, m, o, p);
    assert_int_equal(slots_of(o, p), 1);
    clnode_gradient *g = grad_or_fail(g_ctx, m, s, 1, lin_c);
    clnode_solution_destroy(&s);
    return g;
}

/* Every method, fp64, constant steps of 0.1 over [0, 1] (ten steps, the last clipped as diffrax
 * clips it): y0, W and b gradients within 1e-13 of the discrete map's derivative. */
static void test_analytic_discrete(void **state)
{
    (void)state;
    clnode_model *m = linear_model(g_ctx, LN, lin_W, lin_b);
    for (size_t mi = 0; clnode_method_at(mi); ++mi) {
        const clnode_method *meth = clnode_method_at(mi);
        clnode_solve_options o = constant_opts(meth, 0.1, 1.0);
        double ends[64];
        const size_t n = linear_ends(m, o, ends, 64);
        assert_int_equal(n, 10);
        ld gW[LN * LN] = {0}, gb[LN] = {0}, gy0[LB * LN];
        for (size_t b = 0; b < LB; ++b)
            discrete_oracle(meth, LN, lin_W, lin_b, lin_y0 + b * LN, ends, n, lin_c + b * LN, gW,
                            gb, gy0 + b * LN);
        clnode_gradient *g = linear_grad(m, &o);
        const double ey = normwise(clnode_gradient_y0(g), gy0, LB * LN);
        const double ew = normwise(clnode_gradient_weight(g, 0), gW, LN * LN);
        const double eb = normwise(clnode_gradient_bias(g, 0), gb, LN);
        printf(
            "analytic discrete %-7s %zu steps: y0 %.2e, W %.2e, b %.2e (normwise, bound 1e-13)\n",
            meth->name, n, ey, ew, eb);
        if (!(ey <= 1e-13 && ew <= 1e-13 && eb <= 1e-13))
            fail_msg("%s: the gradient is off the discrete map's: y0 %.3g, W %.3g, b %.3g",
                     meth->name, ey, ew, eb);
        size_t np = 0;
        clnode_gradient_params(g, &np);
        assert_int_equal(np, LN * LN + LN);
        clnode_gradient_destroy(&g);
    }
    clnode_model_destroy(&m);
}

/* The order measurable on y' = W y: the largest q with R(z) = e^z + O(z^(q+1)), R the stability
 * polynomial, whose coefficient of z^k is b^T A^(k-1) 1 (in long double from the tableau's
 * doubles, equal to 1/k! within 1e-12 relative): at least the method's order. Plus one where the
 * next coefficient is within 1% of 1/(q+1)!: then the term after it dominates wherever the error
 * can be seen in double. That is dopri8's case: its z^9 coefficient is 1/9! (1 - 0.0013), its
 * z^10 one 1/10! (1 - 0.12), so the z^9 term leads only for |h W| < ~0.01, where the global
 * error, ~1e-20, lies far below the rounding; at measurable steps its error falls as h^9. */
static int linear_order(const clnode_method *m)
{
    const int s = m->stages;
    ld v[CLNODE_MAX_STAGES], u[CLNODE_MAX_STAGES], fact = 1;
    for (int i = 0; i < s; ++i)
        v[i] = 1;
    int q = 0;
    for (int k = 1; k <= s + 1; ++k) {
        ld coef = 0;
        for (int i = 0; i < s; ++i)
            coef += (ld)m->b[i] * v[i];
        fact *= k;
        if (!(fabsl(coef * fact - 1.0L) <= 1e-12L)) {
            if (fabsl(coef * fact - 1.0L) <= 1e-2L)
                q = k;
            break;
        }
        q = k;
        for (int i = 0; i < s; ++i) {
            u[i] = 0;
            for (int j = 0; j < i; ++j)
                u[i] += (ld)m->a[i * s + j] * v[j];
        }
        memcpy(v, u, sizeof v);
    }
    return q;
}

/* Trajectory 0's y0-gradient against exp(W T)^T c, T = 1, at steps 1/n and 1/(2n): the error
 * ratio within [0.7, 1.5] 2^q, q the method's order on this linear problem (linear_order, at
 * least its order), n chosen per method so that both errors lie in the asymptotic range and a
 * hundred times above the rounding. */
static void test_analytic_order(void **state)
{
    (void)state;
    clnode_model *m = linear_model(g_ctx, LN, lin_W, lin_b);
    ld A[LN * LN], E[LN * LN], ref[LN];
    for (size_t r = 0; r < LN; ++r)
        for (size_t q = 0; q < LN; ++q)
            A[r * LN + q] = lin_W[r * LN + q];
    expm_l(LN, A, E);
    for (size_t q = 0; q < LN; ++q) { /* (exp(W)^T c)_q */
        ref[q] = 0;
        for (size_t r = 0; r < LN; ++r)
            ref[q] += E[r * LN + q] * (ld)lin_c[r];
    }
    static const struct {
        const char *name;
        double n;
    } runs[] = {{"euler", 64}, {"heun", 32},  {"bosh3", 16},
                {"tsit5", 8},  {"dopri5", 8}, {"dopri8", 2}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; ++i) {
        const clnode_method *meth = clnode_method_by_name(runs[i].name);
        assert_non_null(meth);
        double err[2];
        for (int k = 0; k < 2; ++k) {
            clnode_solve_options o = constant_opts(meth, 1.0 / (runs[i].n * (1 << k)), 1.0);
            clnode_gradient *g = linear_grad(m, &o);
            err[k] = normwise(clnode_gradient_y0(g), ref, LN);
            clnode_gradient_destroy(&g);
        }
        const int q = linear_order(meth);
        if (q < meth->order)
            fail_msg("%s: the stability polynomial matches e^z to order %d only, below %d",
                     meth->name, q, meth->order);
        const double ratio = err[0] / err[1], want = ldexp(1.0, q);
        printf("analytic order %-7s (order %d, on linear problems %d) h = 1/%g: error %.3e, h/2: "
               "%.3e, ratio %.2f (2^%d = %g)\n",
               meth->name, meth->order, q, runs[i].n, err[0], err[1], ratio, q, want);
        if (!(err[1] > 2e-14)) /* a hundred times the rounding (~2e-16, the discrete test's) */
            fail_msg("%s: the error %.3g at h/2 is too close to the rounding to measure an order",
                     meth->name, err[1]);
        if (!(ratio >= 0.7 * want && ratio <= 1.5 * want))
            fail_msg("%s: error ratio %.3f outside [%.1f, %.1f]", meth->name, ratio, 0.7 * want,
                     1.5 * want);
    }
    clnode_model_destroy(&m);
}

/* ------------------------------------------------------------------------ finite differences */

/* An MLP [y, t, c] -> H -> N with biases, a per-component output scale, all parameters in one
 * array in clnode_gradient_params' order (W0, b0, W1, b1, scale), so that a parameter of the
 * finite differences is an index into it. */
enum {
    FN = 2,
    FK = 2,
    FH = 6,
    FIN = FN + 1 + FK,
    FB = 2,
    FW0 = FH * FIN,
    FW1 = FN * FH,
    FP = FW0 + FH + FW1 + FN + FN,
    FTS = 2
};

typedef struct {
    clnode_activation act;
    const char *method;
    double dt0;
    double theta[FP], y0[FB * FN], inputs[FB * FK];
} fd_case;

static clnode_model *fd_model(const fd_case *c, const double *theta)
{
    size_t sizes[3] = {FIN, FH, FN};
    const double *ws[2] = {theta, theta + FW0 + FH}, *bs[2] = {theta + FW0, theta + FW0 + FH + FW1};
    clnode_model_desc d = test_mlp_desc(2, sizes, ws, bs);
    d.activation = c->act;
    d.time_input = 1;
    d.num_inputs = FK;
    d.out_scale = theta + FP - FN;
    d.out_scale_size = FN;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create(g_ctx, &d, &m));
    return m;
}

static const double fd_ts[FTS] = {0.33, 0.71};

static clnode_solve_options fd_opts(const fd_case *c, int keep)
{
    clnode_solve_options o = constant_opts(clnode_method_by_name(c->method), c->dt0, 1.0);
    o.keep_tape = keep;
    return o;
}

static clnode_problem fd_problem(const double *y0, const double *inputs)
{
    clnode_problem p = test_problem(FB, y0);
    p.inputs = inputs;
    p.save_ts = fd_ts;
    p.n_save_ts = FTS;
    return p;
}

/* L = cot . (the saved values: SaveAt ts, then t1), solved afresh. */
static double fd_loss(const fd_case *c, const double *theta, const double *y0, const double *inputs,
                      const double *cot)
{
    clnode_model *m = fd_model(c, theta);
    clnode_solve_options o = fd_opts(c, 0);
    clnode_problem p = fd_problem(y0, inputs);
    clnode_solution *s = test_solve_or_fail(g_ctx, m, &o, &p);
    double ys[FB * (FTS + 1) * FN];
    assert_ok(clnode_solution_rows_f64(s, 0, FB, FTS + 1, NULL, ys));
    double L = 0;
    for (size_t i = 0; i < FB * (FTS + 1) * FN; ++i)
        L += cot[i] * ys[i];
    clnode_solution_destroy(&s);
    clnode_model_destroy(&m);
    return L;
}

/* The central difference of L in value v (a copy's entry, restored after), step 1e-6 max(1, |v|):
 * truncation ~1e-12 and rounding ~1e-10 relative, far below the bound. */
static double fd_central(const fd_case *c, double *v, double *theta, double *y0, double *inputs,
                         const double *cot)
{
    const double v0 = *v, h = 1e-6 * fmax(1.0, fabs(v0));
    *v = v0 + h;
    const double up = fd_loss(c, theta, y0, inputs, cot);
    *v = v0 - h;
    const double down = fd_loss(c, theta, y0, inputs, cot);
    *v = v0;
    return (up - down) / (2 * h);
}

/* Each entry of g (n values; `what` names the array) against the central difference in
 * base[i] (theta, y0 or inputs of the copy in *w): relative error below 1e-6 of
 * max(|g_i|, 1e-3 max |g|). Returns the worst. */
static double fd_compare(const fd_case *c, const char *what, const double *g, size_t n,
                         double *base, fd_case *w, const double *cot)
{
    double gmax = 0, worst = 0;
    for (size_t i = 0; i < n; ++i)
        gmax = fmax(gmax, fabs(g[i]));
    assert_true(gmax > 0);
    for (size_t i = 0; i < n; ++i) {
        const double fd = fd_central(c, &base[i], w->theta, w->y0, w->inputs, cot);
        const double err = fabs(fd - g[i]) / fmax(fabs(g[i]), 1e-3 * gmax);
        worst = fmax(worst, err);
        if (!(err <= 1e-6))
            fail_msg("%s %s: d L / d %s[%zu] = %.15g, central difference %.15g (relative %.3g)",
                     c->method, clnode_activation_name(c->act), what, i, g[i], fd, err);
    }
    return worst;
}

static void fd_run(const fd_case *c)
{
    fd_case w = *c; /* the copy whose values are moved */
    double cot[FB * (FTS + 1) * FN];
    uint32_t x = 77u;
    for (size_t i = 0; i < sizeof cot / sizeof cot[0]; ++i)
        cot[i] = test_lcg(&x);
    clnode_model *m = fd_model(c, c->theta);
    clnode_solve_options o = fd_opts(c, 1);
    clnode_problem p = fd_problem(c->y0, c->inputs);
    assert_int_equal(slots_of(&o, &p), FTS + 1);
    clnode_solution *s = test_solve_or_fail(g_ctx, m, &o, &p);
    clnode_gradient *g = grad_or_fail(g_ctx, m, s, FTS + 1, cot);
    size_t np = 0;
    const double *gp = clnode_gradient_params(g, &np);
    assert_int_equal(np, FP);
    const double ey = fd_compare(c, "y0", clnode_gradient_y0(g), FB * FN, w.y0, &w, cot);
    const double ec =
        fd_compare(c, "inputs", clnode_gradient_inputs(g), FB * FK, w.inputs, &w, cot);
    const double ep = fd_compare(c, "params", gp, FP, w.theta, &w, cot);
    size_t ns = 0;
    const double *gs = clnode_gradient_out_scale(g, &ns);
    assert_int_equal(ns, FN);
    assert_memory_equal(gs, gp + FP - FN, FN * sizeof *gs); /* the scale is the params' tail */
    printf("finite differences %-6s %-8s: worst relative y0 %.2e, inputs %.2e, params %.2e (bound "
           "1e-6)\n",
           c->method, clnode_activation_name(c->act), ey, ec, ep);
    clnode_gradient_destroy(&g);
    clnode_solution_destroy(&s);
    clnode_model_destroy(&m);
}

/* Constant steps (which no parameter moves): tanh with tsit5's dense output, softplus with
 * dopri5's and bosh3's (Hermite), sigmoid with heun's, silu with dopri8's, gelu with euler's
 * (linear), each with a time input, two conditioning inputs and a scale. */
static void test_finite_differences(void **state)
{
    (void)state;
    static const struct {
        clnode_activation act;
        const char *method;
        double dt0;
    } cases[] = {{CLNODE_ACT_TANH, "tsit5", 0.1},      {CLNODE_ACT_SOFTPLUS, "dopri5", 0.125},
                 {CLNODE_ACT_SOFTPLUS, "bosh3", 0.05}, {CLNODE_ACT_SIGMOID, "heun", 0.05},
                 {CLNODE_ACT_SILU, "dopri8", 0.25},    {CLNODE_ACT_GELU, "euler", 0.02}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
        fd_case c = {.act = cases[k].act, .method = cases[k].method, .dt0 = cases[k].dt0};
        uint32_t x = 11u + (uint32_t)k;
        for (size_t i = 0; i < FP; ++i)
            c.theta[i] = (i < FW0 ? 0.8 : 0.6) * test_lcg(&x);
        c.theta[FP - 2] = 0.9; /* the scale */
        c.theta[FP - 1] = -1.3;
        for (size_t i = 0; i < FB * FN; ++i)
            c.y0[i] = test_lcg(&x);
        for (size_t i = 0; i < FB * FK; ++i)
            c.inputs[i] = 0.5 * test_lcg(&x);
        fd_run(&c);
    }
}

/* ------------------------------------------------------------------------ the bits */

/* A seed-like MLP with conditioning inputs: [y, c] -> 32 -> 32 -> N, tanh, biases, a scalar
 * output scale; a batch of 1000 adaptive tsit5 trajectories saved at t = 0.5 and t1 = 5. */
enum {
    BN = 4,
    BK = 2,
    BH = 32,
    BB = 1000,
    BSLOTS = 2
};

typedef struct {
    double w0[BH * (BN + BK)], b0[BH], w1[BH * BH], b1[BH], w2[BN * BH], b2[BN];
    double y0[BB * BN], inputs[BB * BK], cot[BB * BSLOTS * BN];
} bits_data;

static bits_data g_bits;
static const double bits_ts[1] = {0.5};

static void bits_init(void)
{
    uint32_t x = 2024u;
    double *arrays[] = {g_bits.w0, g_bits.b0, g_bits.w1, g_bits.b1, g_bits.w2, g_bits.b2};
    const size_t sizes[] = {BH * (BN + BK), BH, BH * BH, BH, BN * BH, BN};
    const double scales[] = {0.6, 0.2, 0.25, 0.2, 0.25, 0.1};
    for (size_t a = 0; a < 6; ++a)
        for (size_t i = 0; i < sizes[a]; ++i)
            arrays[a][i] = scales[a] * test_lcg(&x);
    for (size_t i = 0; i < BB * BN; ++i)
        g_bits.y0[i] = test_lcg(&x);
    for (size_t i = 0; i < BB * BK; ++i)
        g_bits.inputs[i] = 0.5 * test_lcg(&x);
    for (size_t i = 0; i < BB * BSLOTS * BN; ++i)
        g_bits.cot[i] = test_lcg(&x);
}

static clnode_model *bits_model(clnode_context *ctx)
{
    size_t sizes[4] = {BN + BK, BH, BH, BN};
    const double *ws[3] = {g_bits.w0, g_bits.w1, g_bits.w2},
                 *bs[3] = {g_bits.b0, g_bits.b1, g_bits.b2};
    static const double scale = 0.8;
    clnode_model_desc d = test_mlp_desc(3, sizes, ws, bs);
    d.activation = CLNODE_ACT_TANH;
    d.num_inputs = BK;
    d.out_scale = &scale;
    d.out_scale_size = 1;
    clnode_model *m = NULL;
    if (clnode_model_create(ctx, &d, &m) != CLNODE_OK)
        fail_msg("bits model: %s", clnode_context_last_error(ctx));
    return m;
}

static clnode_solve_options bits_opts(clnode_precision prec)
{
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    o.precision = prec;
    o.t1 = 5.0;
    o.rtol = prec == CLNODE_FP64 ? 1e-7 : 1e-4;
    o.atol = prec == CLNODE_FP64 ? 1e-9 : 1e-6;
    o.keep_tape = 1;
    return o;
}

/* The gradient of trajectories [first, first + count) of the batch, solved with o on ctx. */
static clnode_gradient *bits_grad(clnode_context *ctx, const clnode_model *m,
                                  const clnode_solve_options *o, size_t first, size_t count,
                                  size_t *kept)
{
    clnode_problem p = test_problem(count, g_bits.y0 + first * BN);
    p.inputs = g_bits.inputs + first * BK;
    p.save_ts = bits_ts;
    p.n_save_ts = 1;
    assert_int_equal(slots_of(o, &p), BSLOTS);
    clnode_solution *s = test_solve_or_fail(ctx, m, o, &p);
    if (kept)
        *kept = clnode_solution_kept_bytes(s);
    clnode_gradient *g = grad_or_fail(ctx, m, s, BSLOTS, g_bits.cot + first * BSLOTS * BN);
    clnode_solution_destroy(&s);
    return g;
}

/* Whether a and b hold the same bits: y0 and inputs of `count` trajectories (a's from a_first,
 * b's from 0) and, when params, the parameters. Fails naming `what`. */
static void bits_same(const clnode_gradient *a, size_t a_first, const clnode_gradient *b,
                      size_t count, int params, const char *what)
{
    if (memcmp(clnode_gradient_y0(a) + a_first * BN, clnode_gradient_y0(b),
               count * BN * sizeof(double)) != 0)
        fail_msg("%s: the y0-gradients differ", what);
    if (memcmp(clnode_gradient_inputs(a) + a_first * BK, clnode_gradient_inputs(b),
               count * BK * sizeof(double)) != 0)
        fail_msg("%s: the inputs-gradients differ", what);
    if (params) {
        size_t na = 0, nb = 0;
        const double *pa = clnode_gradient_params(a, &na), *pb = clnode_gradient_params(b, &nb);
        assert_int_equal(na, nb);
        for (size_t i = 0; i < na; ++i)
            if (memcmp(&pa[i], &pb[i], sizeof pa[i]) != 0)
                fail_msg("%s: parameter %zu's gradient %.17g against %.17g", what, i, pa[i], pb[i]);
    }
}

/* A trajectory's y0- and inputs-gradient alone and inside the batch of 1000: the same bits, fp32
 * and fp64 (adaptive tsit5: the trajectories take their own numbers of steps). */
static void test_bits_alone_in_batch(void **state)
{
    (void)state;
    clnode_model *m = bits_model(g_ctx);
    for (int k = 0; k < 2; ++k) {
        const clnode_precision prec = k ? CLNODE_FP64 : CLNODE_FP32;
        clnode_solve_options o = bits_opts(prec);
        clnode_gradient *all = bits_grad(g_ctx, m, &o, 0, BB, NULL);
        static const size_t picks[] = {0, 31, 32, 517, 999};
        for (size_t i = 0; i < sizeof picks / sizeof picks[0]; ++i) {
            clnode_gradient *one = bits_grad(g_ctx, m, &o, picks[i], 1, NULL);
            char what[96];
            snprintf(what, sizeof what, "fp%d trajectory %zu alone and in the batch", (int)prec,
                     picks[i]);
            bits_same(all, picks[i], one, 1, 0, what);
            clnode_gradient_destroy(&one);
        }
        printf("fp%d: y0- and inputs-gradients alone = in a batch of %d (5 trajectories)\n",
               (int)prec, BB);
        clnode_gradient_destroy(&all);
    }
    clnode_model_destroy(&m);
}

/* The whole gradient (parameters summed over the batch included) at 1, 2 and 4 threads, with
 * compaction on and off: the same bits, fp32 and fp64. */
static void test_bits_threads_compaction(void **state)
{
    (void)state;
    for (int k = 0; k < 2; ++k) {
        const clnode_precision prec = k ? CLNODE_FP64 : CLNODE_FP32;
        clnode_gradient *ref = NULL;
        static const int threads[] = {1, 2, 4};
        for (size_t t = 0; t < 3; ++t) {
            clnode_context_options co;
            clnode_context_default_options(&co);
            co.device = "host";
            co.num_threads = threads[t];
            clnode_context *ctx = NULL;
            assert_int_equal(clnode_context_create(&co, &ctx), CLNODE_OK);
            char want[32];
            snprintf(want, sizeof want, " %d threads", threads[t]);
            assert_non_null(strstr(clnode_context_device(ctx), want));
            clnode_model *m = bits_model(ctx);
            for (int compact = 1; compact >= 0; --compact) {
                clnode_solve_options o = bits_opts(prec);
                o.compact = compact;
                clnode_gradient *g = bits_grad(ctx, m, &o, 0, BB, NULL);
                char what[96];
                snprintf(what, sizeof what, "fp%d, %d threads, compaction %s", (int)prec,
                         threads[t], compact ? "on" : "off");
                if (ref)
                    bits_same(ref, 0, g, BB, 1, what);
                else
                    ref = g, g = NULL;
                clnode_gradient_destroy(&g);
            }
            clnode_model_destroy(&m);
            clnode_context_destroy(&ctx);
        }
        printf("fp%d: the gradient at 1, 2, 4 threads, compaction on and off: the same bits\n",
               (int)prec);
        clnode_gradient_destroy(&ref);
    }
}

/* checkpoint_every 1, 3 and 1000: the same bits, and fewer bytes kept with every checkpoint
 * interval above 1. */
static void test_bits_checkpoints(void **state)
{
    (void)state;
    clnode_model *m = bits_model(g_ctx);
    for (int k = 0; k < 2; ++k) {
        const clnode_precision prec = k ? CLNODE_FP64 : CLNODE_FP32;
        clnode_gradient *ref = NULL;
        size_t kept_ref = 0;
        static const long every[] = {1, 3, 1000};
        for (size_t i = 0; i < 3; ++i) {
            clnode_solve_options o = bits_opts(prec);
            o.checkpoint_every = every[i];
            size_t kept = 0;
            clnode_gradient *g = bits_grad(g_ctx, m, &o, 0, BB, &kept);
            char what[96];
            snprintf(what, sizeof what, "fp%d, checkpoint_every %ld", (int)prec, every[i]);
            printf("%s: %zu bytes kept\n", what, kept);
            if (ref) {
                bits_same(ref, 0, g, BB, 1, what);
                if (!(kept < kept_ref))
                    fail_msg("%s: %zu bytes kept, not fewer than the %zu of every step", what, kept,
                             kept_ref);
                clnode_gradient_destroy(&g);
            } else {
                ref = g;
                kept_ref = kept;
            }
        }
        clnode_gradient_destroy(&ref);
    }
    clnode_model_destroy(&m);
}

/* A solution kept on opencl:pocl (strict GEMM, fp32 and fp64) and reversed on the host: the
 * gradient of a host solve, bit for bit (every device computes the host's bits in strict mode).
 * Skipped where PoCL is absent. */
static void test_pocl_solution(void **state)
{
    (void)state;
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = "opencl:pocl";
    clnode_context *ocl = NULL;
    if (clnode_context_create(&co, &ocl) != CLNODE_OK) {
        printf("opencl:pocl is not available here: skipped\n");
        skip();
    }
    clnode_model *mh = bits_model(g_ctx), *mo = bits_model(ocl);
    for (int k = 0; k < 2; ++k) {
        const clnode_precision prec = k ? CLNODE_FP64 : CLNODE_FP32;
        if (prec == CLNODE_FP64 && !clnode_context_supports(ocl, CLNODE_FP64))
            continue;
        clnode_solve_options o = bits_opts(prec);
        clnode_gradient *gh = bits_grad(g_ctx, mh, &o, 0, 100, NULL);
        clnode_problem p = test_problem(100, g_bits.y0);
        p.inputs = g_bits.inputs;
        p.save_ts = bits_ts;
        p.n_save_ts = 1;
        clnode_solution *s = test_solve_or_fail(ocl, mo, &o, &p);
        clnode_gradient *go = grad_or_fail(g_ctx, mo, s, BSLOTS, g_bits.cot);
        char what[64];
        snprintf(what, sizeof what, "fp%d, kept on opencl:pocl", (int)prec);
        bits_same(gh, 0, go, 100, 1, what);
        printf("%s, reversed on the host: the host solve's gradient, bit for bit\n", what);
        clnode_gradient_destroy(&go);
        clnode_gradient_destroy(&gh);
        clnode_solution_destroy(&s);
    }
    clnode_model_destroy(&mo);
    clnode_model_destroy(&mh);
    clnode_context_destroy(&ocl);
}

/* ------------------------------------------------------------------------ memory */

/* The header's formula of clnode_solution_kept_bytes: esize times the sum over trajectories b of
 * (M_b + 1 + ceil(M_b / k) N), plus 2 (B + 1) sizeof(size_t), esize B n_in and esize n_ts (n_ts
 * the save times: B times the row's with per-trajectory save times). */
static size_t kept_formula(const clnode_solution *s, size_t esize, size_t k, size_t n_in,
                           size_t n_ts, size_t *steps_min, size_t *steps_max)
{
    const size_t B = clnode_solution_batch(s), N = clnode_solution_dim(s);
    size_t bytes = 0;
    *steps_min = SIZE_MAX;
    *steps_max = 0;
    for (size_t b = 0; b < B; ++b) {
        clnode_trajectory_stats st;
        assert_ok(clnode_solution_stats(s, b, &st));
        const size_t M = (size_t)st.num_accepted;
        *steps_min = M < *steps_min ? M : *steps_min;
        *steps_max = M > *steps_max ? M : *steps_max;
        bytes += esize * (M + 1 + (M + k - 1) / k * N);
    }
    return bytes + 2 * (B + 1) * sizeof(size_t) + esize * B * n_in + esize * n_ts;
}

/* B = 4096 trajectories of the seed model over [0, 20] from spread initial states, two save times
 * (shared, or each trajectory's own): the bytes kept equal the formula for fp32 and fp64,
 * checkpoint_every 1 and 3, and are the same for max_steps 4096 and 100000. */
static void test_kept_bytes(void **state)
{
    (void)state;
    enum {
        MB = 4096
    };
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    const size_t N = clnode_model_dim(m), n_in = clnode_model_num_inputs(m);
    double *y0 = malloc(MB * N * sizeof *y0);
    assert_non_null(y0);
    uint32_t x = 99u;
    for (size_t i = 0; i < MB * N; ++i)
        y0[i] = 2.0 * test_lcg(&x);
    static const double ts[2] = {1.0, 2.5};
    double *row_ts = malloc(MB * 2 * sizeof *row_ts);
    assert_non_null(row_ts);
    for (size_t b = 0; b < MB; ++b) {
        row_ts[2 * b] = 0.5 + 0.001 * (double)b;
        row_ts[2 * b + 1] = 15.0;
    }
    int bad = 0; /* every configuration is measured and printed before the test fails */
    for (int c = 0; c < 6; ++c) { /* c & 1: fp64; c & 2: k = 3; c & 4: per-trajectory times */
        clnode_problem p = test_problem(MB, y0);
        p.save_ts = c & 4 ? row_ts : ts;
        p.n_save_ts = 2;
        p.save_ts_per_trajectory = c & 4 ? 1 : 0;
        clnode_solve_options o;
        clnode_solve_seed_options(&o);
        o.t1 = 20.0;
        o.precision = c & 1 ? CLNODE_FP64 : CLNODE_FP32;
        o.keep_tape = 1;
        o.checkpoint_every = c & 2 ? 3 : 1;
        size_t kept[2];
        static const long max_steps[2] = {4096, 100000};
        for (int i = 0; i < 2; ++i) {
            o.max_steps = max_steps[i];
            clnode_solution *s = test_solve_or_fail(g_ctx, m, &o, &p);
            kept[i] = clnode_solution_kept_bytes(s);
            size_t lo, hi;
            const size_t want = kept_formula(s, c & 1 ? 8 : 4, (size_t)o.checkpoint_every, n_in,
                                             c & 4 ? 2 * MB : 2, &lo, &hi);
            printf("kept bytes, fp%d, checkpoint_every %ld, %s save times, max_steps %ld: %zu, "
                   "the header's formula %zu (difference %lld; %zu to %zu steps)\n",
                   (int)o.precision, o.checkpoint_every, c & 4 ? "per-trajectory" : "shared",
                   o.max_steps, kept[i], want, (long long)kept[i] - (long long)want, lo, hi);
            bad |= kept[i] != want;
            clnode_solution_destroy(&s);
        }
        if (kept[0] != kept[1]) {
            printf("fp%d, checkpoint_every %ld: %zu bytes kept with max_steps 4096, %zu with "
                   "100000\n",
                   (int)o.precision, o.checkpoint_every, kept[0], kept[1]);
            bad = 1;
        }
    }
    free(row_ts);
    free(y0);
    clnode_model_destroy(&m);
    if (bad)
        fail_msg("clnode_solution_kept_bytes differs from the header's formula or with max_steps "
                 "(above)");
}

/* ------------------------------------------------------------------------ errors */

/* Fails unless the last call's status is `want` and the context's message holds `text`. */
static void test_errors(void **state)
{
    (void)state;
    clnode_model *m = linear_model(g_ctx, LN, lin_W, lin_b);
    clnode_solve_options o = constant_opts(clnode_method_tsit5, 0.1, 1.0);
    const clnode_problem *p = TEST_PROBLEM(LB, lin_y0);
    clnode_solution *s = test_solve_or_fail(g_ctx, m, &o, p);
    clnode_gradient *g = NULL;
    double cot[LB * LN];
    memcpy(cot, lin_c, sizeof cot);
    cot[LN + 2] = NAN;
    test_expect_error(g_ctx, clnode_gradient_compute(g_ctx, m, NULL, s, 1, cot, &g),
                      CLNODE_ERR_NONFINITE_INPUT, "trajectory 1, slot 0, component 2",
                      "NaN cotangent");
    assert_null(g);
    cot[LN + 2] = INFINITY;
    test_expect_error(g_ctx, clnode_gradient_compute(g_ctx, m, NULL, s, 1, cot, &g),
                      CLNODE_ERR_NONFINITE_INPUT, "trajectory 1, slot 0, component 2",
                      "inf cotangent");
    test_expect_error(g_ctx, clnode_gradient_compute(g_ctx, m, NULL, s, 0, lin_c, &g),
                      CLNODE_ERR_INVALID_ARGUMENT, "slots", "slots too small");
    clnode_model *other = linear_model(g_ctx, LN, lin_W, lin_b); /* equal, but another object */
    test_expect_error(g_ctx, clnode_gradient_compute(g_ctx, other, NULL, s, 1, lin_c, &g),
                      CLNODE_ERR_INVALID_ARGUMENT, "model", "another model");
    clnode_model_destroy(&other);
    clnode_solve_options plain = o;
    plain.keep_tape = 0;
    clnode_solution *bare = test_solve_or_fail(g_ctx, m, &plain, p);
    assert_int_equal(clnode_solution_kept_bytes(bare), 0);
    test_expect_error(g_ctx, clnode_gradient_compute(g_ctx, m, NULL, bare, 1, lin_c, &g),
                      CLNODE_ERR_INVALID_ARGUMENT, "keep_tape", "no tape");
    clnode_solution_destroy(&bare);
    assert_null(g);
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = "host:openblas"; /* OpenBLAS's GEMMs are not the ordered ones */
    clnode_context *ob = NULL;
    assert_int_equal(clnode_context_create(&co, &ob), CLNODE_OK);
    test_expect_error(ob, clnode_gradient_compute(ob, m, NULL, s, 1, lin_c, &g),
                      CLNODE_ERR_UNSUPPORTED, "ordered GEMM", "a host:openblas context");
    assert_null(g);
    clnode_context_destroy(&ob);
    clnode_solution_destroy(&s);
    clnode_model_destroy(&m);
}

int main(int argc, char **argv)
{
    const int dev_rc = test_device_open(argc, argv, &g_device, NULL, "grad-analytic", &g_ctx);
    if (dev_rc != 0)
        return dev_rc;
    bits_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_analytic_discrete),
        cmocka_unit_test(test_analytic_order),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_bits_alone_in_batch),
        cmocka_unit_test(test_bits_threads_compaction),
        cmocka_unit_test(test_bits_checkpoints),
        cmocka_unit_test(test_pocl_solution),
        cmocka_unit_test(test_kept_bytes),
        cmocka_unit_test(test_errors),
    };
    const int rc = cmocka_run_group_tests_name("grad-analytic", tests, NULL, NULL);
    clnode_context_destroy(&g_ctx);
    return rc;
}
