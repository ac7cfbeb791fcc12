/* test_controller.c - the layers of the step in cl/cln_step.h, each called on its own, in float64
 * (diffrax 0.7.2: PIDController.adapt_step_size and _integrate._clip_to_end): the error norm, the
 * PID factor, the dtmin/dtmax limits, clipping to the end of the interval, accept/FSAL, the saves,
 * freezing; then a few whole steps of cln_finish_traj, their composition. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#define CLN_PRECISION 64
#include "clnode/solver.h"
#include "cln_step.h"
#include "test_util.h"

/* A controller as diffrax's default PIDController (icoeff 1) for a method of error order 2,
 * atol 1, rtol 0, on the interval [0, 100], one component. The step arithmetic's constants
 * start from the option table's defaults (its KERNEL rows, as the driver fills them). */
static void consts_init(cln_consts *K, cln_iconsts *KI)
{
    memset(K, 0, sizeof *K);
    memset(KI, 0, sizeof *KI);
#define KERNEL_DEFAULT_KERNEL(name, def) K->name = (def);
#define KERNEL_DEFAULT_HOST(name, def)
#define KERNEL_DEFAULT(ctype, name, type, where, def, min, max, flags, doc)                        \
    KERNEL_DEFAULT_##where(name, def)
    CLNODE_SOLVE_OPTION_LIST(KERNEL_DEFAULT)
#undef KERNEL_DEFAULT
#undef KERNEL_DEFAULT_HOST
#undef KERNEL_DEFAULT_KERNEL
    K->rtol = 0.0;
    K->dir = 1.0;
    K->sqrt_n = 1.0;
    K->atol = 1.0;
    K->safety = 0.9;
    K->factormin = 0.2;
    K->factormax = 10.0;
    K->coeff1 = 1.0 / 2;
    KI->coeff2_zero = 1;
    KI->coeff3_zero = 1;
    KI->B = KI->Breal = 1;
    KI->N = KI->ldz = 1;
    KI->max_steps = 4096;
}

/* Heun's tableau with Euler embedded: with h = 1, f_0 = 0 and f_1 = -2 e, y_err = e exactly and
 * y1 = y - e. */
static void heun_tableau(cln_consts *K, cln_iconsts *KI)
{
    K->a[1][0] = 1.0;
    K->b[0] = K->b[1] = 0.5;
    K->e[0] = 0.5;
    K->e[1] = -0.5;
    K->c[1] = 1.0;
    KI->stages = 2;
    KI->adaptive = 1;
    KI->dense_form = CLN_DENSE_HERMITE;
}

static int close_to(double x, double ref, double tol)
{
    if (fabs(x - ref) <= tol)
        return 1;
    print_message("  %.17g, expected %.17g (tolerance %g)\n", x, ref, tol);
    return 0;
}

/* ---- the error norm ---- */

static void test_scaled_error(void **state)
{
    (void)state;
    assert_true(cln_scaled_error(3.0, 1.0, -4.0, 1.0, 0.5) == 1.0); /* 3 / (1 + 4 * 0.5) */
    assert_true(cln_scaled_error(-3.0, 2.0, 0.0, 1.0, 0.5) == -1.5);
    assert_true(isinf(cln_scaled_error(NAN, 1.0, 1.0, 1.0, 0.5))); /* NaN counts as +inf */
    assert_true(cln_scaled_error(NAN, 1.0, 1.0, 1.0, 0.5) > 0);
}

static void test_rms(void **state)
{
    (void)state;
    assert_true(cln_rms(25.0, -3.0, 2, sqrt(2.0)) == 5.0 / sqrt(2.0));
    assert_true(cln_rms(9.0, -3.0, 1, 1.0) == 3.0); /* one component: |s|, not sqrt(s^2) */
    assert_true(cln_rms(INFINITY, 1.0, 3, sqrt(3.0)) == INFINITY);
}

/* E over two components of a heun step from y = (1, -2) with h = 1: y_err_n = (f0 - f1) / 2,
 * the scale atol + rtol max(|y0|, |y1|). */
static void test_error_norm(void **state)
{
    (void)state;
    cln_consts K;
    cln_iconsts KI;
    consts_init(&K, &KI);
    heun_tableau(&K, &KI);
    KI.N = KI.ldz = 2;
    K.sqrt_n = sqrt(2.0);
    K.rtol = 0.5;
    const double y[2] = {1.0, -2.0};
    const double F[4] = {0.0, 2.0, -4.0, 6.0}; /* f_0 = (0, 2), f_1 = (-4, 6) */
    const double z[2] = {0, 0};
    /* y_err = (2, -2), y1 = (-1, 2): scales 1 + 0.5 * 1 = 1.5 and 1 + 0.5 * 2 = 2 */
    const double s0 = 2.0 / 1.5, s1 = -2.0 / 2.0;
    const double E = cln_error_norm(&K, &KI, 0, y, F, z, 1.0);
    assert_true(E == sqrt(s0 * s0 + s1 * s1) / sqrt(2.0));
    /* one component: |s| */
    KI.N = KI.ldz = 1;
    assert_true(cln_error_norm(&K, &KI, 0, y, F, z, 1.0) == fabs(0.5 * 0.0 - 0.5 * 2.0) / 2.0);
}

/* A NaN anywhere in y1 makes y0 alone set every component's scale (diffrax). */
static void test_error_norm_nan_y1(void **state)
{
    (void)state;
    cln_consts K;
    cln_iconsts KI;
    consts_init(&K, &KI);
    heun_tableau(&K, &KI);
    KI.N = KI.ldz = 2;
    K.sqrt_n = sqrt(2.0);
    K.rtol = 1.0;
    K.atol = 1e-300;
    K.b[0] = NAN; /* y1 = NaN, y_err finite */
    const double y[2] = {100.0, 50.0};
    const double F[4] = {0.0, 0.0, -100.0, -50.0}; /* y_err = (50, 25) */
    const double z[2] = {0, 0};
    const double E = cln_error_norm(&K, &KI, 0, y, F, z, 1.0);
    assert_true(close_to(E, 0.5, 1e-15)); /* 50 / 100 and 25 / 50 */
}

/* E over N = 1 .. 40 components (the host computes the scaled errors CLN_NORM_CHUNK at a time,
 * the last chunk overlapping the one before): the RMS of cln_scaled_error of every component,
 * squared and summed in component order, exactly. The components' errors span 30 orders of
 * magnitude, so that another order of the sum would round differently. Then the same with an
 * SSAL tableau (y1 is the last stage argument, z), and with a NaN in one component of z. */
static void test_error_norm_components(void **state)
{
    (void)state;
    enum {
        NMAX = 40
    };
    cln_consts K;
    cln_iconsts KI;
    consts_init(&K, &KI);
    heun_tableau(&K, &KI);
    K.rtol = 0.25;
    K.atol = 1e-3;
    double y[NMAX], F[2 * NMAX], z[NMAX];
    for (int ssal = 0; ssal <= 1; ++ssal)
        for (int nan_at = -1; nan_at < NMAX; nan_at += 13)
            for (int N = 1; N <= NMAX; ++N) {
                KI.N = KI.ldz = N;
                KI.ssal = ssal;
                K.sqrt_n = sqrt((double)N);
                const double hd = 0.75;
                for (int n = 0; n < N; ++n) {
                    y[n] = (n % 3 - 1) * (1.0 + n);
                    F[n] = pow(10.0, (double)((n * 7) % 31 - 15)) * (n % 2 ? 1.0 : -1.0);
                    F[N + n] = 0.5 * F[n] + 0.125 * n;
                    z[n] = n == nan_at && ssal ? NAN : 3.0 - n;
                }
                int y1_nan = 0;
                for (int n = 0; n < N; ++n)
                    y1_nan |= ssal ? isnan(z[n]) : 0;
                double sum = 0.0, last = 0.0;
                for (int n = 0; n < N; ++n) {
                    const double k0 = hd * F[n], k1 = hd * F[N + n];
                    double err = 0.0, acc = 0.0;
                    err += K.e[0] * k0;
                    err += K.e[1] * k1;
                    acc += K.b[0] * k0;
                    acc += K.b[1] * k1;
                    const double y1 = y1_nan ? y[n] : ssal ? z[n] : y[n] + acc;
                    last = cln_scaled_error(err, y[n], y1, K.atol, K.rtol);
                    sum += last * last;
                }
                const double ref = N == 1 ? fabs(last) : sqrt(sum) / sqrt((double)N);
                const double E = cln_error_norm(&K, &KI, 0, y, F, z, hd);
                if (memcmp(&E, &ref, sizeof E) != 0)
                    print_message("  N %d ssal %d NaN at %d: %.17g, expected %.17g\n", N, ssal,
                                  nan_at, E, ref);
                assert_memory_equal(&E, &ref, sizeof E);
            }
}

/* ---- the PID controller ---- */

static void test_pid_factor_accept(void **state)
{
    (void)state;
    cln_consts K;
    cln_iconsts KI;
    consts_init(&K, &KI);
    /* E = 0.25: 0.9 * 4^(1/2) = 1.8 */
    assert_true(close_to(cln_pid_factor(&K, &KI, 4.0, 1.0, 1.0, 1), 1.8, 1e-15));
    /* E = 0.9 < 1: 0.9 / sqrt(0.9) < 1 is clipped up to 1, an accepted step never shrinks */
    assert_true(cln_pid_factor(&K, &KI, 1.0 / 0.9, 1.0, 1.0, 1) == 1.0);
    /* tiny or zero E: factormax */
    assert_true(cln_pid_factor(&K, &KI, 1e8, 1.0, 1.0, 1) == 10.0);
    assert_true(cln_pid_factor(&K, &KI, INFINITY, 1.0, 1.0, 1) == 10.0);
}

static void test_pid_factor_reject(void **state)
{
    (void)state;
    cln_consts K;
    cln_iconsts KI;
    consts_init(&K, &KI);
    assert_true(close_to(cln_pid_factor(&K, &KI, 0.25, 1.0, 1.0, 0), 0.45, 1e-15)); /* E = 4 */
    assert_true(cln_pid_factor(&K, &KI, 1e-6, 1.0, 1.0, 0) == 0.2);                 /* factormin */
    assert_true(cln_pid_factor(&K, &KI, 0.0, 1.0, 1.0, 0) == 0.2);                  /* E = inf */
    /* E = 1 is rejected (E < 1 is strict) and capped at safety, not 1 */
    assert_true(cln_pid_factor(&K, &KI, 1.0, 1.0, 1.0, 0) == 0.9);
}

/* pcoeff 0.2, icoeff 0.4, dcoeff 0.1 with error order 2: the history enters with its exponents. */
static void test_pid_history(void **state)
{
    (void)state;
    cln_consts K;
    cln_iconsts KI;
    consts_init(&K, &KI);
    K.coeff1 = (0.4 + 0.2 + 0.1) / 2;
    K.coeff2 = -(0.2 + 2 * 0.1) / 2;
    K.coeff3 = 0.1 / 2;
    KI.coeff2_zero = KI.coeff3_zero = 0;
    const double factor = 0.9 * pow(4.0, 0.35) * pow(2.0, -0.2) * pow(0.5, 0.05);
    assert_true(close_to(cln_pid_factor(&K, &KI, 4.0, 2.0, 0.5, 1), factor, 1e-15));
    /* a zero coefficient skips its power: an infinite history is then harmless */
    KI.coeff3_zero = 1;
    const double f2 = 0.9 * pow(4.0, 0.35) * pow(2.0, -0.2);
    assert_true(close_to(cln_pid_factor(&K, &KI, 4.0, 2.0, INFINITY, 1), f2, 1e-15));

    cln_rstate rs = {.inv1 = 2.0, .inv2 = 0.5};
    cln_shift_history(&rs, 4.0);
    assert_true(rs.inv1 == 4.0 && rs.inv2 == 2.0);
    cln_shift_history(&rs, INFINITY); /* E = 0: the history stores 1, not inf */
    assert_true(rs.inv1 == 1.0 && rs.inv2 == 4.0);
    cln_shift_history(&rs, 0.0); /* E = inf */
    assert_true(rs.inv1 == 1.0 && rs.inv2 == 1.0);
}

static void test_limit_dt(void **state)
{
    (void)state;
    cln_consts K;
    cln_iconsts KI;
    consts_init(&K, &KI);
    cln_istate is = {0};
    assert_true(cln_limit_dt(&K, &KI, &is, 2.0, 10.0) == 20.0); /* no limits */
    KI.has_dtmax = 1;
    K.dtmax = 3.0;
    assert_true(cln_limit_dt(&K, &KI, &is, 2.0, 10.0) == 3.0);
    /* dtmin, forced: never below dtmin, and held there */
    KI.has_dtmin = 1;
    KI.force_dtmin = 1;
    K.dtmin = 0.5;
    assert_true(cln_limit_dt(&K, &KI, &is, 1.0, 0.2) == 0.5);
    assert_int_equal(is.at_dtmin, 1);
    assert_int_equal(is.result, CLN_RESULT_SUCCESS);
    /* held at dtmin and accepted with factor 1: stays at dtmin */
    assert_true(cln_limit_dt(&K, &KI, &is, 0.5, 1.0) == 0.5);
    assert_int_equal(is.at_dtmin, 1);
    /* growing again: released */
    assert_true(cln_limit_dt(&K, &KI, &is, 0.5, 2.0) == 1.0);
    assert_int_equal(is.at_dtmin, 0);
    /* dtmin, not forced: dt_min_reached */
    KI.force_dtmin = 0;
    cln_limit_dt(&K, &KI, &is, 1.0, 0.2);
    assert_int_equal(is.result, CLN_RESULT_DT_MIN);
}

/* cln_control: E from the stages, acceptance, the next step, the history. */
static void test_control(void **state)
{
    (void)state;
    cln_consts K;
    cln_iconsts KI;
    consts_init(&K, &KI);
    heun_tableau(&K, &KI);
    cln_rstate rs = {.t = 0.0, .tn = 1.0, .inv1 = 3.0, .inv2 = 1.0};
    cln_istate is = {0};
    const double y[1] = {0.0}, z[1] = {0.0};
    double F[2] = {0.0, -2.0 * 4.0}; /* y_err = 4: rejected, factor 0.45 */
    double dt = 0;
    assert_int_equal(cln_control(&K, &KI, 0, &rs, &is, y, F, z, 1.0, 1.0, &dt), 0);
    assert_true(close_to(dt, 0.45, 1e-15));
    assert_true(rs.inv1 == 3.0); /* history unchanged on rejection */
    F[1] = -2.0 * 0.25;          /* y_err = 0.25: accepted, factor 1.8 */
    assert_int_equal(cln_control(&K, &KI, 0, &rs, &is, y, F, z, 1.0, 1.0, &dt), 1);
    assert_true(close_to(dt, 1.8, 1e-15));
    assert_true(rs.inv1 == 4.0 && rs.inv2 == 3.0);
    /* held at dtmin: accepted whatever its error */
    KI.has_dtmin = KI.force_dtmin = 1;
    K.dtmin = 1.0;
    is.at_dtmin = 1;
    F[1] = -2.0 * 1e3;
    assert_int_equal(cln_control(&K, &KI, 0, &rs, &is, y, F, z, 1.0, 1.0, &dt), 1);
    assert_true(dt == 1.0);
}

/* ---- the end of a step ---- */

static void test_clip_to_end(void **state)
{
    (void)state;
    const double tau1 = 100.0;
    double floor = 100.0 - 1e-9;
    double tp, tx;
    cln_clip_to_end(tau1, floor, 1, 10.0, 12.0, 3.0, &tp, &tx); /* accepted: from tn */
    assert_true(tp == 12.0 && tx == 15.0);
    cln_clip_to_end(tau1, floor, 0, 10.0, 12.0, 1.5, &tp, &tx); /* rejected: again from t */
    assert_true(tp == 10.0 && tx == 11.5);
    /* accepted, the proposal passes t1 - 100 ulp: snapped to t1 */
    cln_clip_to_end(tau1, floor, 1, 90.0, 95.0, 9.0, &tp, &tx);
    assert_true(tp == 95.0 && tx == 100.0);
    /* rejected, the proposal passes the floor: the midpoint of what remains */
    floor = 99.5;
    cln_clip_to_end(tau1, floor, 0, 96.0, 100.0, 3.6, &tp, &tx);
    assert_true(tp == 96.0 && tx == 98.0);
    cln_clip_to_end(tau1, floor, 0, 96.0, 99.5, 3.15, &tp, &tx); /* 99.15 is below the floor */
    assert_true(close_to(tx, 99.15, 1e-12));
    /* the step that reached t1 */
    cln_clip_to_end(tau1, floor, 1, 95.0, 100.0, 9.0, &tp, &tx);
    assert_true(tp == 100.0 && tx == 100.0);
}

static void test_accept_fsal(void **state)
{
    (void)state;
    cln_consts K;
    cln_iconsts KI;
    consts_init(&K, &KI);
    heun_tableau(&K, &KI);
    KI.N = KI.ldz = 2;
    double y[2] = {1.0, 2.0};
    double F[4] = {1.0, 2.0, 3.0, 4.0};
    const double z[2] = {7.0, 8.0};
    cln_accept(&K, &KI, 0, y, F, z, 2.0); /* y1 = y + 2 (f0 + f1) / 2 */
    assert_true(y[0] == 5.0 && y[1] == 8.0);
    assert_true(F[0] == 1.0 && F[1] == 2.0); /* not FSAL: f_0 is recomputed */
    KI.fsal = 1;
    KI.ssal = 1; /* y1 is the last stage argument */
    cln_accept(&K, &KI, 0, y, F, z, 2.0);
    assert_true(y[0] == 7.0 && y[1] == 8.0);
    assert_true(F[0] == 3.0 && F[1] == 4.0); /* f_0 <- f_last */
}

static void test_save_dense_and_step(void **state)
{
    (void)state;
    cln_consts K;
    cln_iconsts KI;
    consts_init(&K, &KI);
    heun_tableau(&K, &KI);
    KI.dense_form = CLN_DENSE_LINEAR;
    KI.n_ts = 3;
    KI.max_steps = 4;
    cln_istate is = {0};
    const double y[1] = {1.0}, z[1] = {0.0}, F[2] = {2.0, 2.0}; /* y1 = 1 + 2 h */
    const double TS[3] = {0.5, 1.0, 3.0};
    double TSOUT[3] = {-1, -1, -1};
    cln_save_dense(&K, &KI, 0, &is, y, F, z, TS, TSOUT, 0.0, 0.0, 2.0, 2.0); /* step [0, 2] */
    assert_int_equal(is.nts, 2);                     /* 3.0 lies beyond the step */
    assert_true(TSOUT[0] == 2.0 && TSOUT[1] == 3.0); /* y1 = 5: 1 + 4 theta */
    assert_true(TSOUT[2] == -1);
    /* a trajectory starting at tau0 = 0.75 passes over the times before it, unwritten */
    cln_istate is2 = {0};
    double TSOUT2[3] = {-1, -1, -1};
    cln_save_dense(&K, &KI, 0, &is2, y, F, z, TS, TSOUT2, 0.75, 0.75, 2.75, 2.0);
    assert_int_equal(is2.nts, 2);
    assert_true(TSOUT2[0] == -1 && TSOUT2[1] == 1.5 && TSOUT2[2] == -1); /* 1 + 4 (0.25 / 2) */
    double STT[4] = {0}, STY[4] = {0};
    K.dir = -1.0;
    KI.steps_cap = 2; /* rows of 2 points: row 1 starts at element 2 */
    cln_save_step(&K, &KI, 0, &is, 2.0, y, STT, STY);
    cln_save_step(&K, &KI, 0, &is, 3.0, y, STT, STY);
    assert_int_equal(is.nsteps_saved, 2);
    assert_true(STT[0] == -2.0 && STT[1] == -3.0 && STY[1] == 1.0); /* t = dir * tau */
    cln_istate is1 = {0};
    cln_save_step(&K, &KI, 1, &is1, 4.0, y, STT, STY);
    assert_true(STT[2] == -4.0 && STY[2] == 1.0 && STT[3] == 0.0);
    /* past the row's capacity: counted (the driver checks the counts) but never written */
    cln_save_step(&K, &KI, 0, &is, 5.0, y, STT, STY);
    assert_int_equal(is.nsteps_saved, 3);
    assert_true(STT[2] == -4.0 && STT[3] == 0.0 && STY[2] == 1.0 && STY[3] == 0.0);
}

static void test_freeze(void **state)
{
    (void)state;
    cln_iconsts KI = {.max_steps = 3};
    cln_istate is = {.nsteps = 1};
    cln_freeze(&KI, &is, 50.0, 100.0);
    assert_int_equal(is.done, 0);
    cln_freeze(&KI, &is, 100.0, 100.0); /* reached t1 */
    assert_int_equal(is.done, 1);
    assert_int_equal(is.result, CLN_RESULT_SUCCESS);
    is = (cln_istate){.nsteps = 1, .result = CLN_RESULT_DT_MIN}; /* failed */
    cln_freeze(&KI, &is, 50.0, 100.0);
    assert_int_equal(is.done, 1);
    assert_int_equal(is.result, CLN_RESULT_DT_MIN);
    is = (cln_istate){.nsteps = 3}; /* out of steps */
    cln_freeze(&KI, &is, 50.0, 100.0);
    assert_int_equal(is.done, 1);
    assert_int_equal(is.result, CLN_RESULT_MAX_STEPS);
}

/* ---- whole steps: cln_finish_traj composes the layers ---- */

typedef struct traj {
    cln_consts K;
    cln_iconsts KI;
    cln_rstate RS;
    cln_istate IS;
    double Y[1], F[2], Z[1], TS[1], TSOUT[1], STT[1], STY[1];
} traj;

/* A heun step [t, t + h] from y = 0 whose error estimate is err. */
static void traj_init(traj *r, double t, double h, double err)
{
    memset(r, 0, sizeof *r);
    consts_init(&r->K, &r->KI);
    heun_tableau(&r->K, &r->KI);
    r->RS = (cln_rstate){
        .tau1 = 100.0, .clip_floor = 100.0 - 1e-9, .t = t, .tn = t + h, .inv1 = 1.0, .inv2 = 1.0};
    r->F[1] = -2.0 * err / h;
}

static void traj_step(traj *r)
{
    cln_finish_traj(0, &r->K, &r->KI, &r->RS, &r->IS, r->Y, r->F, r->Z, r->TS, r->TSOUT, r->STT,
                    r->STY);
}

static void test_steps_to_the_end(void **state)
{
    (void)state;
    traj r;
    traj_init(&r, 90.0, 5.0, 0.25);
    traj_step(&r);
    assert_int_equal(r.IS.nacc, 1);
    assert_true(r.RS.t == 95.0 && r.RS.tn == 100.0);
    assert_true(close_to(r.Y[0], -0.25, 1e-16)); /* y1 = y + h (f0 + f1) / 2 */
    traj_step(&r);                               /* the last step ends exactly at t1: frozen */
    assert_true(r.RS.t == 100.0);
    assert_int_equal(r.IS.done, 1);
    assert_int_equal(r.IS.result, CLN_RESULT_SUCCESS);
    const int nsteps = r.IS.nsteps;
    traj_step(&r); /* a frozen trajectory does not move or count */
    assert_int_equal(r.IS.nsteps, nsteps);
    /* rejected: retried from the same point, y and the counters of acceptance unchanged */
    traj_init(&r, 2.0, 1.0, 4.0);
    r.Y[0] = 7.0;
    traj_step(&r);
    assert_int_equal(r.IS.nrej, 1);
    assert_int_equal(r.IS.nacc, 0);
    assert_true(r.RS.t == 2.0 && close_to(r.RS.tn, 2.45, 1e-15));
    assert_true(r.Y[0] == 7.0);
}

static void test_steps_nonfinite_and_max_steps(void **state)
{
    (void)state;
    traj r;
    /* a NaN error estimate rejects (E = inf: factormin), the trajectory goes on */
    traj_init(&r, 0.0, 1.0, 0.5);
    r.F[1] = NAN;
    traj_step(&r);
    assert_int_equal(r.IS.nrej, 1);
    assert_true(close_to(r.RS.tn, 0.2, 1e-15));
    assert_int_equal(r.IS.done, 0);
    /* a non-finite f(t, y) ends it */
    r.F[0] = INFINITY;
    traj_step(&r);
    assert_int_equal(r.IS.result, CLN_RESULT_NONFINITE);
    assert_int_equal(r.IS.done, 1);
    /* max_steps attempts, then max_steps_reached */
    traj_init(&r, 0.0, 1.0, 4.0);
    r.KI.max_steps = 3;
    for (int i = 0; i < 5; ++i)
        traj_step(&r);
    assert_int_equal(r.IS.nsteps, 3);
    assert_int_equal(r.IS.result, CLN_RESULT_MAX_STEPS);
    assert_int_equal(r.IS.done, 1);
    /* constant steps (diffrax 0.7.2's ConstantStepSize), whatever the error: the first step of
     * dt0 = 0.4 from tau0 = 0.25, then fractions of [0.25, 3]: n = ceil(2.75 / nextafter(0.4)) = 7
     * steps, step k ending at fma(2.75, k / 7, 0.25) (diffrax's 1.0357142857142856 for k = 2, not
     * 0.65 + 0.4), the last one at tau1 itself */
    traj_init(&r, 0.25, 0.4, 1e6);
    r.KI.adaptive = 0;
    r.RS.tau0 = 0.25;
    r.RS.tau1 = 3.0;
    r.RS.clip_floor = 3.0 - 1e-12;
    r.RS.dt0 = 0.4;
    traj_step(&r);
    assert_int_equal(r.IS.nacc, 1);
    assert_true(r.RS.t == 0.25 + 0.4 && r.RS.tn == 1.0357142857142856);
    for (int k = 3; k <= 7; ++k) {
        traj_step(&r);
        assert_int_equal(r.IS.nacc, k - 1);
        assert_true(r.RS.tn == (k == 7 ? 3.0 : fma(2.75, k / 7.0, 0.25)));
    }
    traj_step(&r);
    assert_int_equal(r.IS.nacc, 7);
    assert_true(r.RS.t == 3.0);
    assert_int_equal(r.IS.done, 1);
}

/* The controller's own power function: a few ulp of libm's pow where the factor is not clipped,
 * and the edge values the controller relies on (1/E = 0 or inf). */
static void test_pow(void **state)
{
    (void)state;
    uint32_t x32 = 7u;
    double worst = 0;
    for (int i = 0; i < 200000; ++i) {
        const double x = exp(test_lcg(&x32) * 15.0); /* |0.2 log x| < 3 */
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
    assert_close_lt(cln_pow_pos(4e-320, 0.2) / pow(4e-320, 0.2), 1, 1e-14); /* subnormal */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scaled_error),
        cmocka_unit_test(test_rms),
        cmocka_unit_test(test_error_norm),
        cmocka_unit_test(test_error_norm_nan_y1),
        cmocka_unit_test(test_error_norm_components),
        cmocka_unit_test(test_pid_factor_accept),
        cmocka_unit_test(test_pid_factor_reject),
        cmocka_unit_test(test_pid_history),
        cmocka_unit_test(test_limit_dt),
        cmocka_unit_test(test_control),
        cmocka_unit_test(test_clip_to_end),
        cmocka_unit_test(test_accept_fsal),
        cmocka_unit_test(test_save_dense_and_step),
        cmocka_unit_test(test_freeze),
        cmocka_unit_test(test_steps_to_the_end),
        cmocka_unit_test(test_steps_nonfinite_and_max_steps),
        cmocka_unit_test(test_pow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
