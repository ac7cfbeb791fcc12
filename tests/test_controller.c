/* test_controller.c - the PID controller and step rules of cl/cln_step.h, one by one, in float64
 * (diffrax 0.7.2: PIDController.adapt_step_size and _integrate._clip_to_end).
 *
 * A two-stage tableau with error weights (1/2, -1/2) and one component lets each test choose the
 * error estimate exactly: with h = 1, f_0 = 0 and f_1 = -2 e, y_err = e. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#define CLN_PRECISION 64
#include "cln_step.h"

typedef struct rig {
    double CR[CLN_CR_COUNT];
    int32_t CI[CLN_CI_COUNT];
    double RS[CLN_RS_COUNT];
    int32_t IS[CLN_IS_COUNT];
    double Y[1], F[2], Z[1], TS[4], TSOUT[4], STT[8], STY[8];
} rig;

/* t in [0, 100], one trajectory at tau_prev = t, tau_next = t + h, atol 1, rtol 0, y = 0. */
static void rig_init(rig *r, double t, double h, double err)
{
    memset(r, 0, sizeof *r);
    r->CR[CLN_CR_TAU1] = 100.0;
    r->CR[CLN_CR_CLIP_FLOOR] = 100.0 - 1e-9;
    r->CR[CLN_CR_RTOL] = 0.0;
    r->CR[CLN_CR_ATOL] = 1.0;
    r->CR[CLN_CR_SAFETY] = 0.9;
    r->CR[CLN_CR_FACTORMIN] = 0.2;
    r->CR[CLN_CR_FACTORMAX] = 10.0;
    r->CR[CLN_CR_COEFF1] = 1.0 / 2; /* icoeff 1, error order 2 */
    r->CR[CLN_CR_DIR] = 1.0;
    r->CR[CLN_CR_SQRT_N] = 1.0;
    r->CR[CLN_CR_B + 0] = 0.5;
    r->CR[CLN_CR_B + 1] = 0.5;
    r->CR[CLN_CR_E + 0] = 0.5;
    r->CR[CLN_CR_E + 1] = -0.5;
    r->CR[CLN_CR_C + 1] = 1.0;
    r->CI[CLN_CI_B] = 1;
    r->CI[CLN_CI_BREAL] = 1;
    r->CI[CLN_CI_N] = 1;
    r->CI[CLN_CI_LDZ] = 1;
    r->CI[CLN_CI_STAGES] = 2;
    r->CI[CLN_CI_ADAPTIVE] = 1;
    r->CI[CLN_CI_INTERP] = CLN_INTERP_HERMITE;
    r->CI[CLN_CI_MAX_STEPS] = 4096;
    r->CI[CLN_CI_COEFF2_ZERO] = 1;
    r->CI[CLN_CI_COEFF3_ZERO] = 1;
    r->RS[CLN_RS_T] = t;
    r->RS[CLN_RS_TN] = t + h;
    r->RS[CLN_RS_INV1] = 1.0;
    r->RS[CLN_RS_INV2] = 1.0;
    r->F[0] = 0.0;
    r->F[1] = -2.0 * err / h;
}

static void rig_step(rig *r)
{
    cln_finish_traj(0, r->CR, r->CI, r->RS, r->IS, r->Y, r->F, r->Z, r->TS, r->TSOUT, r->STT,
                    r->STY);
}

static void test_accept_factor(void **state)
{
    (void)state;
    rig r;
    rig_init(&r, 0.0, 1.0, 0.25); /* E = 0.25: factor 0.9 * 4^(1/2) = 1.8 */
    rig_step(&r);
    assert_int_equal(r.IS[CLN_IS_NACC], 1);
    assert_int_equal(r.IS[CLN_IS_NSTEPS], 1);
    assert_true(r.RS[CLN_RS_T] == 1.0);
    assert_true(fabs(r.RS[CLN_RS_TN] - (1.0 + 0.9 * 2.0)) < 1e-15);
    assert_true(r.RS[CLN_RS_INV1] == 4.0); /* history shifts on acceptance */
    assert_true(r.RS[CLN_RS_INV2] == 1.0);
    assert_true(r.Y[0] == 1.0 * 0.5 * r.F[1]); /* y1 = y + h (f0 + f1) / 2 */
}

static void test_accept_never_shrinks(void **state)
{
    (void)state;
    rig r;
    rig_init(&r, 0.0, 1.0, 0.9); /* 0.9 / sqrt(0.9) < 1: clipped up to 1 */
    rig_step(&r);
    assert_int_equal(r.IS[CLN_IS_NACC], 1);
    assert_true(r.RS[CLN_RS_TN] - r.RS[CLN_RS_T] == 1.0);
}

static void test_factormax(void **state)
{
    (void)state;
    rig r;
    rig_init(&r, 0.0, 1.0, 1e-8);
    rig_step(&r);
    assert_true(r.RS[CLN_RS_TN] - r.RS[CLN_RS_T] == 10.0);
    /* E = 0: 1/E = inf, the factor is factormax and the history stores 1, not inf */
    rig_init(&r, 0.0, 1.0, 0.0);
    rig_step(&r);
    assert_true(r.RS[CLN_RS_TN] - r.RS[CLN_RS_T] == 10.0);
    assert_true(r.RS[CLN_RS_INV1] == 1.0);
}

static void test_reject(void **state)
{
    (void)state;
    rig r;
    rig_init(&r, 2.0, 1.0, 4.0); /* E = 4: 0.9 * 0.5 = 0.45 */
    r.RS[CLN_RS_INV1] = 3.0;
    r.Y[0] = 7.0;
    rig_step(&r);
    assert_int_equal(r.IS[CLN_IS_NREJ], 1);
    assert_int_equal(r.IS[CLN_IS_NACC], 0);
    assert_true(r.RS[CLN_RS_T] == 2.0); /* retry from the same point */
    assert_true(fabs(r.RS[CLN_RS_TN] - (2.0 + 0.45)) < 1e-15);
    assert_true(r.RS[CLN_RS_INV1] == 3.0); /* history unchanged */
    assert_true(r.Y[0] == 7.0);            /* state unchanged */
    /* a huge error: factormin */
    rig_init(&r, 2.0, 1.0, 1e6);
    rig_step(&r);
    assert_true(fabs(r.RS[CLN_RS_TN] - 2.2) < 1e-15);
    /* E just above 1: capped at safety, not 1 */
    rig_init(&r, 2.0, 1.0, 1.0);
    rig_step(&r);
    assert_int_equal(r.IS[CLN_IS_NREJ], 1); /* E < 1 is strict */
    assert_true(fabs(r.RS[CLN_RS_TN] - 2.9) < 1e-15);
}

static void test_nan_error_rejects(void **state)
{
    (void)state;
    rig r;
    rig_init(&r, 0.0, 1.0, 0.5);
    r.F[1] = NAN;
    rig_step(&r);
    assert_int_equal(r.IS[CLN_IS_NREJ], 1);
    assert_true(fabs(r.RS[CLN_RS_TN] - 0.2) < 1e-15); /* E = inf: factormin */
    assert_int_equal(r.IS[CLN_IS_DONE], 0);
}

static void test_pid_history(void **state)
{
    (void)state;
    rig r;
    rig_init(&r, 0.0, 1.0, 0.25);
    /* pcoeff 0.2, icoeff 0.4, dcoeff 0.1 with error order 2 */
    r.CR[CLN_CR_COEFF1] = (0.4 + 0.2 + 0.1) / 2;
    r.CR[CLN_CR_COEFF2] = -(0.2 + 2 * 0.1) / 2;
    r.CR[CLN_CR_COEFF3] = 0.1 / 2;
    r.CI[CLN_CI_COEFF2_ZERO] = 0;
    r.CI[CLN_CI_COEFF3_ZERO] = 0;
    r.RS[CLN_RS_INV1] = 2.0;
    r.RS[CLN_RS_INV2] = 0.5;
    rig_step(&r);
    const double factor = 0.9 * pow(4.0, 0.35) * pow(2.0, -0.2) * pow(0.5, 0.05);
    assert_true(fabs((r.RS[CLN_RS_TN] - r.RS[CLN_RS_T]) - factor) < 1e-15);
    assert_true(r.RS[CLN_RS_INV1] == 4.0 && r.RS[CLN_RS_INV2] == 2.0);
}

static void test_end_of_interval(void **state)
{
    (void)state;
    rig r;
    /* accepted step whose proposal passes t1 - 100 ulp: snapped to t1 */
    rig_init(&r, 90.0, 5.0, 0.25);
    rig_step(&r);
    assert_true(r.RS[CLN_RS_T] == 95.0);
    assert_true(r.RS[CLN_RS_TN] == 100.0);
    rig_step(&r); /* the last step (same error estimate) ends exactly at t1: frozen */
    assert_true(r.RS[CLN_RS_T] == 100.0);
    assert_int_equal(r.IS[CLN_IS_DONE], 1);
    assert_int_equal(r.IS[CLN_IS_RESULT], CLN_RESULT_SUCCESS);
    const int32_t steps = r.IS[CLN_IS_NSTEPS];
    rig_step(&r); /* a frozen trajectory does not move or count */
    assert_int_equal(r.IS[CLN_IS_NSTEPS], steps);
    /* rejected step whose proposal passes t1: the midpoint of what remains */
    rig_init(&r, 96.0, 3.5, 1.0); /* reject, factor 0.9: 96 + 3.15 = 99.15 < floor */
    rig_step(&r);
    assert_true(fabs(r.RS[CLN_RS_TN] - 99.15) < 1e-12);
    rig_init(&r, 96.0, 4.0, 1.0);   /* reject: 96 + 3.6 = 99.6 ... */
    r.CR[CLN_CR_CLIP_FLOOR] = 99.5; /* ... beyond the floor: midpoint 98 */
    rig_step(&r);
    assert_true(r.RS[CLN_RS_TN] == 98.0);
}

static void test_dtmax_dtmin(void **state)
{
    (void)state;
    rig r;
    rig_init(&r, 0.0, 1.0, 1e-8);
    r.CI[CLN_CI_HAS_DTMAX] = 1;
    r.CR[CLN_CR_DTMAX] = 3.0;
    rig_step(&r);
    assert_true(r.RS[CLN_RS_TN] - r.RS[CLN_RS_T] == 3.0);
    /* dtmin, forced: a rejected step is not shrunk below dtmin, and at dtmin the next attempt is
     * accepted whatever its error */
    rig_init(&r, 0.0, 1.0, 1e3);
    r.CI[CLN_CI_HAS_DTMIN] = 1;
    r.CI[CLN_CI_FORCE_DTMIN] = 1;
    r.CR[CLN_CR_DTMIN] = 0.5;
    rig_step(&r);
    assert_int_equal(r.IS[CLN_IS_NREJ], 1);
    assert_true(r.RS[CLN_RS_TN] - r.RS[CLN_RS_T] == 0.5);
    assert_int_equal(r.IS[CLN_IS_AT_DTMIN], 1);
    r.F[1] = -2.0 * 1e3 / 0.5;
    rig_step(&r);
    assert_int_equal(r.IS[CLN_IS_NACC], 1);
    /* dtmin, not forced: dt_min_reached ends the trajectory */
    rig_init(&r, 0.0, 1.0, 1e3);
    r.CI[CLN_CI_HAS_DTMIN] = 1;
    r.CI[CLN_CI_FORCE_DTMIN] = 0;
    r.CR[CLN_CR_DTMIN] = 0.5;
    rig_step(&r);
    assert_int_equal(r.IS[CLN_IS_RESULT], CLN_RESULT_DT_MIN);
    assert_int_equal(r.IS[CLN_IS_DONE], 1);
}

static void test_max_steps(void **state)
{
    (void)state;
    rig r;
    rig_init(&r, 0.0, 1.0, 4.0);
    r.CI[CLN_CI_MAX_STEPS] = 3;
    for (int i = 0; i < 5; ++i)
        rig_step(&r);
    assert_int_equal(r.IS[CLN_IS_NSTEPS], 3);
    assert_int_equal(r.IS[CLN_IS_RESULT], CLN_RESULT_MAX_STEPS);
    assert_int_equal(r.IS[CLN_IS_DONE], 1);
}

static void test_scale_uses_y0_when_y1_is_nan(void **state)
{
    (void)state;
    rig r;
    /* rtol 1, atol tiny, y0 = 100: scale 100 when y1 is NaN (y0 replaces it), so E = err/100 */
    rig_init(&r, 0.0, 1.0, 50.0);
    r.CR[CLN_CR_RTOL] = 1.0;
    r.CR[CLN_CR_ATOL] = 1e-300;
    r.Y[0] = 100.0;
    r.CR[CLN_CR_B + 0] = NAN; /* y1 = NaN, y_err finite */
    rig_step(&r);
    assert_int_equal(r.IS[CLN_IS_NACC], 1); /* E = 0.5 */
}

/* The controller's own power function: a few ulp of libm's pow where the factor is not clipped,
 * and the edge values the controller relies on (1/E = 0 or inf). */
static void test_pow(void **state)
{
    (void)state;
    uint32_t x32 = 7u;
    double worst = 0;
    for (int i = 0; i < 200000; ++i) {
        x32 = x32 * 1664525u + 1013904223u;
        const double u = (double)(x32 >> 8) / 16777216.0;
        const double x = exp((u - 0.5) * 30.0); /* |0.2 log x| < 3 */
        const double y = (i % 2) ? 0.2 : -1.0 / 15;
        const double r = cln_pow_pos(x, y), ref = pow(x, y);
        worst = fmax(worst, fabs(r - ref) / (ref * 0x1p-52));
    }
    print_message("  cln_pow_pos: max %.2f ulp against libm pow (fp64)\n", worst);
    assert_true(worst <= 4.0);
    assert_true(cln_pow_pos(0.0, 0.2) == 0.0);
    assert_true(isinf(cln_pow_pos(INFINITY, 0.2)));
    assert_true(cln_pow_pos(INFINITY, -0.2) == 0.0);
    assert_true(isinf(cln_pow_pos(0.0, -0.2)));
    assert_true(isnan(cln_pow_pos(NAN, 0.2)));
    assert_true(cln_pow_pos(1.0, 0.2) == 1.0);
    assert_true(fabs(cln_pow_pos(4e-320, 0.2) / pow(4e-320, 0.2) - 1) < 1e-14); /* subnormal */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accept_factor),
        cmocka_unit_test(test_accept_never_shrinks),
        cmocka_unit_test(test_factormax),
        cmocka_unit_test(test_reject),
        cmocka_unit_test(test_nan_error_rejects),
        cmocka_unit_test(test_pid_history),
        cmocka_unit_test(test_end_of_interval),
        cmocka_unit_test(test_dtmax_dtmin),
        cmocka_unit_test(test_max_steps),
        cmocka_unit_test(test_scale_uses_y0_when_y1_is_nan),
        cmocka_unit_test(test_pow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
