/* test_method.c - the method descriptors: consistency of every built-in tableau, order conditions
 * of the solution and of the embedded method (Hairer, Norsett & Wanner, Solving ODEs I, II.2),
 * FSAL/SSAL flags, and the dense output each descriptor carries, evaluated by the kernels' own
 * forms (cl/cln_step.h). Every method clnode_method_at lists is checked: a new one is tested
 * without touching this file. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "clnode.h"

#define CLN_PRECISION 64
#include "cln_step.h"
#include "test_util.h"

#define A(m, i, j) ((m)->a[(i) * (m)->stages + (j)])

/* sum_i w_i phi_i for the rooted trees up to order 5 that the conditions below use. */
static double sum_b(const double *w, const double *phi, int s)
{
    double acc = 0;
    for (int i = 0; i < s; ++i)
        acc += w[i] * phi[i];
    return acc;
}

/* The order conditions of order q = 1..5 for the weights w (the 17 trees up to order 5 would be
 * complete; these 9 are the ones every explicit pair must meet and detect a wrong coefficient). */
static int order_reached(const clnode_method *m, const double *w, double tol)
{
    const int s = m->stages;
    double c[16], ac[16], ac2[16], aac[16], one[16];
    for (int i = 0; i < s; ++i) {
        c[i] = m->c[i];
        one[i] = 1.0;
    }
    for (int i = 0; i < s; ++i) {
        ac[i] = ac2[i] = 0;
        for (int j = 0; j < s; ++j) {
            ac[i] += A(m, i, j) * c[j];
            ac2[i] += A(m, i, j) * c[j] * c[j];
        }
    }
    for (int i = 0; i < s; ++i) {
        aac[i] = 0;
        for (int j = 0; j < s; ++j)
            aac[i] += A(m, i, j) * ac[j];
    }
    double c2[16], c3[16], c4[16], cac[16];
    for (int i = 0; i < s; ++i) {
        c2[i] = c[i] * c[i];
        c3[i] = c2[i] * c[i];
        c4[i] = c3[i] * c[i];
        cac[i] = c[i] * ac[i];
    }
    int p = 0;
    if (fabs(sum_b(w, one, s) - 1.0) < tol)
        p = 1;
    else
        return p;
    if (fabs(sum_b(w, c, s) - 0.5) < tol)
        p = 2;
    else
        return p;
    if (fabs(sum_b(w, c2, s) - 1.0 / 3) < tol && fabs(sum_b(w, ac, s) - 1.0 / 6) < tol)
        p = 3;
    else
        return p;
    if (fabs(sum_b(w, c3, s) - 0.25) < tol && fabs(sum_b(w, cac, s) - 1.0 / 8) < tol &&
        fabs(sum_b(w, ac2, s) - 1.0 / 12) < tol && fabs(sum_b(w, aac, s) - 1.0 / 24) < tol)
        p = 4;
    else
        return p;
    if (fabs(sum_b(w, c4, s) - 0.2) < tol)
        p = 5;
    return p;
}

static void test_tableaux(void **state)
{
    (void)state;
    size_t count = 0;
    for (const clnode_method *m; (m = clnode_method_at(count)) != NULL; ++count) {
        assert_ptr_equal(clnode_method_by_name(m->name), m);
        const int s = m->stages;
        assert_true(s >= 1 && s <= CLNODE_MAX_STAGES);
        assert_true(m->c[0] == 0.0);
        for (int i = 0; i < s; ++i) {
            double row = 0;
            for (int j = 0; j < s; ++j) {
                if (j >= i)
                    assert_true(A(m, i, j) == 0.0); /* explicit */
                row += A(m, i, j);
            }
            assert_close_lt(row, m->c[i], 1e-14); /* row sums are the nodes */
        }
        /* the solution weights reach the method's order (Tsit5 only to 1e-12: its
         * coefficients are given to 16 digits, and it satisfies the conditions that way) */
        const int p = order_reached(m, m->b, 1e-12);
        assert_true(p >= (m->order < 5 ? m->order : 5)); /* conditions checked up to order 5 */
        if (m->adaptive) {
            assert_non_null(m->b_error);
            double se = 0, bh[16];
            for (int i = 0; i < s; ++i) {
                se += m->b_error[i];
                bh[i] = m->b[i] - m->b_error[i];
            }
            assert_close_lt(se, 0, 1e-14);
            /* the embedded method has order p - 1 exactly (not p) */
            const int ph = order_reached(m, bh, 1e-12);
            assert_int_equal(ph, m->order - 1 < 5 ? m->order - 1 : 5);
        } else {
            assert_null(m->b_error);
        }
        /* FSAL: the last row of a equals b and b_s = 0 */
        if (m->fsal) {
            assert_true(m->b[s - 1] == 0.0);
            for (int j = 0; j < s; ++j)
                assert_true(A(m, s - 1, j) == m->b[j]);
            assert_true(m->c[s - 1] == 1.0);
        }
        print_message("  %-6s %d stages, order %d (conditions met to order %d)\n", m->name, s,
                      m->order, p);
    }
    assert_true(count >= 6); /* at least the six of diffrax this library started with */
    assert_null(clnode_method_by_name("rk4"));
    assert_null(clnode_method_by_name(NULL));
    assert_ptr_equal(clnode_method_by_name("tsit5"), clnode_method_tsit5);
}

/* The reference's float32 error weights of Tsit5 are the double values rounded once. */
static void test_tsit5_error_weights(void **state)
{
    (void)state;
    const float ref[7] = {0.0017800111090764403f, 0.0008164344471879303f, -0.007880877703428268f,
                          0.14471100270748138f,   -0.5823571681976318f,   0.4580821096897125f,
                          -0.01515151560306549f};
    for (int i = 0; i < 7; ++i)
        assert_true((float)clnode_method_tsit5->b_error[i] == ref[i]);
}

/* The descriptor's tableau and dense output as the driver lays them out for the kernels. */
static void consts_from(const clnode_method *m, cln_consts *K, cln_iconsts *KI)
{
    memset(K, 0, sizeof *K);
    memset(KI, 0, sizeof *KI);
    const int s = m->stages;
    for (int i = 0; i < s; ++i) {
        for (int j = 0; j < s; ++j)
            K->a[i][j] = m->a[i * s + j];
        K->b[i] = m->b[i];
        K->c[i] = m->c[i];
        for (int d = 0; m->dense && d < CLN_DENSE_COEFFS; ++d)
            K->dense[i][d] = m->dense[i * CLN_DENSE_COEFFS + d];
    }
    KI->stages = s;
    KI->dense_form = (int)m->interpolation;
}

/* The dense output of every method on y' = 1 + 2 t from y(t0) = y0 over [t0, t0 + h], whose
 * stages the tableau gives exactly (k_i = h (1 + 2 (t0 + c_i h))): every form of order >= 2
 * reproduces the quadratic y0 + (t - t0) + (t^2 - t0^2) at every theta, the linear one the chord.
 * A wrong dense coefficient in a descriptor, or a form that reads the wrong entry, shows here. */
static void test_dense_output(void **state)
{
    (void)state;
    const double t0 = 0.75, h = 0.5, y0 = 2.0;
    for (size_t q = 0; clnode_method_at(q); ++q) {
        const clnode_method *m = clnode_method_at(q);
        cln_consts K;
        cln_iconsts KI;
        consts_from(m, &K, &KI);
        assert_true(m->interpolation == CLNODE_INTERP_LINEAR ||
                    m->interpolation == CLNODE_INTERP_HERMITE || m->dense != NULL);
        double k[CLNODE_MAX_STAGES], y1 = y0;
        for (int i = 0; i < m->stages; ++i) {
            k[i] = h * (1.0 + 2.0 * (t0 + m->c[i] * h));
            y1 += m->b[i] * k[i];
        }
        const double exact1 = y0 + h + ((t0 + h) * (t0 + h) - t0 * t0);
        if (m->order >= 2)
            assert_close_lt(y1, exact1, 1e-14);
        double worst = 0;
        for (int j = 0; j <= 8; ++j) {
            const double th = j / 8.0, t = t0 + th * h;
            const double exact = m->interpolation == CLNODE_INTERP_LINEAR
                                     ? y0 + th * (y1 - y0)
                                     : y0 + (t - t0) + (t * t - t0 * t0);
            const double y = cln_interpolate(&K, KI.dense_form, KI.stages, th, y0, y1, k);
            worst = fmax(worst, fabs(y - exact));
        }
        print_message("  %-6s dense output: max error %.2g on a quadratic\n", m->name, worst);
        assert_true(worst < 1e-13); /* dopri8's coefficients reach 116: 2.3e-14 of rounding */
    }
}

/* The dense output of the higher-order forms on y' = y (k_i from the tableau's own stages):
 * tsit5's and dopri5's are of order 4 (local error O(h^5)), dopri8's of order 7 (Bogacki &
 * Shampine 1990); the error at theta = 1/2 against e^(h/2) must fall at least like h^4.5 and
 * h^6.5 (measured: 4.8, 4.9 and 7.0 at these step sizes) - a wrong coefficient leaves a low-order
 * error term and a rate of 1 or 2. */
static void test_dense_output_order(void **state)
{
    (void)state;
    const clnode_method *ms[] = {clnode_method_tsit5, clnode_method_dopri5, clnode_method_dopri8};
    const double hs[] = {0.05, 0.05, 0.4}, min_rate[] = {4.5, 4.5, 6.5};
    for (int q = 0; q < 3; ++q) {
        const clnode_method *m = ms[q];
        cln_consts K;
        cln_iconsts KI;
        consts_from(m, &K, &KI);
        double err[2];
        for (int r = 0; r < 2; ++r) {
            const double h = r ? hs[q] / 2 : hs[q];
            double k[CLNODE_MAX_STAGES], y1 = 1.0;
            for (int i = 0; i < m->stages; ++i) {
                double z = 1.0;
                for (int j = 0; j < i; ++j)
                    z += m->a[i * m->stages + j] * k[j];
                k[i] = h * z;
                y1 += m->b[i] * k[i];
            }
            const double y = cln_interpolate(&K, KI.dense_form, KI.stages, 0.5, 1.0, y1, k);
            err[r] = fabs(y - exp(0.5 * h));
        }
        const double rate = log2(err[0] / err[1]);
        print_message("  %-6s dense output at theta 1/2: errors %.3g, %.3g (rate %.2f)\n", m->name,
                      err[0], err[1], rate);
        assert_true(rate > min_rate[q]);
    }
}

static void test_status_strings(void **state)
{
    (void)state;
    assert_string_equal(clnode_status_name(CLNODE_OK), "CLNODE_OK");
    assert_string_equal(clnode_status_string(CLNODE_ERR_IO), "file input/output error");
    assert_string_equal(clnode_status_name((clnode_status)-999), "CLNODE_UNKNOWN_STATUS");
    assert_string_equal(clnode_version_string(), CLNODE_VERSION_STRING);
    assert_int_equal(clnode_version_number(), CLNODE_VERSION_NUMBER);
    assert_string_equal(clnode_result_name(CLNODE_RESULT_MAX_STEPS_REACHED), "max_steps_reached");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tableaux),       cmocka_unit_test(test_tsit5_error_weights),
        cmocka_unit_test(test_dense_output),   cmocka_unit_test(test_dense_output_order),
        cmocka_unit_test(test_status_strings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
