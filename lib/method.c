/* method.c - Butcher tableaux of the explicit Runge-Kutta methods, as diffrax 0.7.2 defines them.
 *
 * a is stored as a full s x s row-major matrix (zero on and above the diagonal). b_error is the
 * difference b - b_hat computed in double, which diffrax then rounds to the state precision; its
 * sign does not matter for the error norm.
 */
#include <string.h>

#include "internal.h"

/* ---- Tsit5: Ch. Tsitouras, "Runge-Kutta pairs of order 5(4) satisfying only the first column
 * simplifying assumption", Computers & Mathematics with Applications 62 (2011) 770-775. ---- */
static const double tsit5_c[7] = {0.0, 0.161, 0.327, 0.9, 0.9800255409045097, 1.0, 1.0};
static const double tsit5_a[49] = {
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0.161,
    0,
    0,
    0,
    0,
    0,
    0,
    -0.008480655492356989,
    0.335480655492357,
    0,
    0,
    0,
    0,
    0,
    2.8971530571054935,
    -6.359448489975075,
    4.3622954328695815,
    0,
    0,
    0,
    0,
    5.325864828439257,
    -11.748883564062828,
    7.4955393428898365,
    -0.09249506636175525,
    0,
    0,
    0,
    5.86145544294642,
    -12.92096931784711,
    8.159367898576159,
    -0.071584973281401,
    -0.028269050394068383,
    0,
    0,
    0.09646076681806523,
    0.01,
    0.4798896504144996,
    1.379008574103742,
    -3.290069515436081,
    2.324710524099774,
    0,
};
static const double tsit5_b[7] = {
    0.09646076681806523, 0.01, 0.4798896504144996, 1.379008574103742, -3.290069515436081,
    2.324710524099774,   0.0};
static const double tsit5_e[7] = {
    0.0017800110522257773, 0.0008164344596567463, -0.007880878010261994, 0.1447110071732629,
    -0.5823571654525552,   0.45808210592918686,   -0.015151515151515152};

/* ---- Dopri5: J. R. Dormand and P. J. Prince, "A family of embedded Runge-Kutta formulae",
 * J. Comput. Appl. Math. 6 (1980) 19-26. ---- */
static const double dopri5_c[7] = {0.0, 1.0 / 5, 3.0 / 10, 4.0 / 5, 8.0 / 9, 1.0, 1.0};
static const double dopri5_a[49] = {
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    1.0 / 5,
    0,
    0,
    0,
    0,
    0,
    0,
    3.0 / 40,
    9.0 / 40,
    0,
    0,
    0,
    0,
    0,
    44.0 / 45,
    -56.0 / 15,
    32.0 / 9,
    0,
    0,
    0,
    0,
    19372.0 / 6561,
    -25360.0 / 2187,
    64448.0 / 6561,
    -212.0 / 729,
    0,
    0,
    0,
    9017.0 / 3168,
    -355.0 / 33,
    46732.0 / 5247,
    49.0 / 176,
    -5103.0 / 18656,
    0,
    0,
    35.0 / 384,
    0,
    500.0 / 1113,
    125.0 / 192,
    -2187.0 / 6784,
    11.0 / 84,
    0,
};
static const double dopri5_b[7] = {35.0 / 384, 0, 500.0 / 1113, 125.0 / 192, -2187.0 / 6784,
                                   11.0 / 84,  0};
static const double dopri5_e[7] = {35.0 / 384 - 1951.0 / 21600,
                                   0,
                                   500.0 / 1113 - 22642.0 / 50085,
                                   125.0 / 192 - 451.0 / 720,
                                   -2187.0 / 6784 + 12231.0 / 42400,
                                   11.0 / 84 - 649.0 / 6300,
                                   -1.0 / 60};

/* ---- Bosh3: P. Bogacki and L. F. Shampine, "A 3(2) pair of Runge-Kutta formulas",
 * Appl. Math. Lett. 2 (1989) 321-325. ---- */
static const double bosh3_c[4] = {0.0, 1.0 / 2, 3.0 / 4, 1.0};
static const double bosh3_a[16] = {
    0, 0, 0, 0, 1.0 / 2, 0, 0, 0, 0, 3.0 / 4, 0, 0, 2.0 / 9, 1.0 / 3, 4.0 / 9, 0,
};
static const double bosh3_b[4] = {2.0 / 9, 1.0 / 3, 4.0 / 9, 0};
static const double bosh3_e[4] = {2.0 / 9 - 7.0 / 24, 1.0 / 3 - 1.0 / 4, 4.0 / 9 - 1.0 / 3,
                                  -1.0 / 8};

/* ---- Heun's method (explicit trapezoidal rule) with Euler as the embedded first-order
 * method; Hairer, Norsett & Wanner, Solving ODEs I, II.1. ---- */
static const double heun_c[2] = {0.0, 1.0};
static const double heun_a[4] = {0, 0, 1.0, 0};
static const double heun_b[2] = {0.5, 0.5};
static const double heun_e[2] = {0.5, -0.5};

/* ---- Explicit Euler. ---- */
static const double euler_c[1] = {0.0};
static const double euler_a[1] = {0.0};
static const double euler_b[1] = {1.0};

static const clnode_method tsit5 = {
    "tsit5",           7, 5, 5, 1, 1, 1, tsit5_c, tsit5_a, tsit5_b, tsit5_e, CLNODE_INTERP_TSIT5,
    "Tsitouras (2011)"};
static const clnode_method dopri5 = {"dopri5",
                                     7,
                                     5,
                                     5,
                                     1,
                                     1,
                                     1,
                                     dopri5_c,
                                     dopri5_a,
                                     dopri5_b,
                                     dopri5_e,
                                     CLNODE_INTERP_DOPRI5,
                                     "Dormand & Prince (1980)"};
static const clnode_method bosh3 = {"bosh3",
                                    4,
                                    3,
                                    3,
                                    1,
                                    1,
                                    1,
                                    bosh3_c,
                                    bosh3_a,
                                    bosh3_b,
                                    bosh3_e,
                                    CLNODE_INTERP_HERMITE,
                                    "Bogacki & Shampine (1989)"};
static const clnode_method heun = {
    "heun", 2, 2, 2, 0, 0, 1, heun_c, heun_a, heun_b, heun_e, CLNODE_INTERP_HERMITE, "Heun (1900)"};
static const clnode_method euler = {
    "euler",       1, 1, 1, 0, 0, 0, euler_c, euler_a, euler_b, NULL, CLNODE_INTERP_LINEAR,
    "Euler (1768)"};

const clnode_method *const clnode_method_tsit5 = &tsit5;
const clnode_method *const clnode_method_dopri5 = &dopri5;
const clnode_method *const clnode_method_bosh3 = &bosh3;
const clnode_method *const clnode_method_heun = &heun;
const clnode_method *const clnode_method_euler = &euler;

/* Dopri5 dense output: the midpoint weights of Shampine (1986), halved as diffrax stores them. */
const double cln_dopri5_cmid[7] = {
    6025192743.0 / 30085553152 / 2,     0,
    51252292925.0 / 65400821598 / 2,    -2691868925.0 / 45128329728 / 2,
    187940372067.0 / 1594534317056 / 2, -1776094331.0 / 19743644256 / 2,
    11237099.0 / 235043384 / 2,
};

const clnode_method *clnode_method_by_name(const char *name)
{
    static const clnode_method *const all[] = {&tsit5, &dopri5, &bosh3, &heun, &euler};
    if (!name)
        return NULL;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        if (strcmp(all[i]->name, name) == 0)
            return all[i];
    return NULL;
}
