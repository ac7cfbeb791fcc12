/* method.c - the explicit Runge-Kutta methods as data, as diffrax 0.7.2 defines them: one
 * descriptor per method holds its tableau, error weights, capabilities and dense-output
 * coefficients (clnode/method.h). Adding a method is adding its descriptor here and its line in
 * cln_methods[]; nothing else in the library knows a method by name.
 *
 * a is stored as a full s x s row-major matrix (zero on and above the diagonal). b_error is the
 * difference b - b_hat computed in double, which diffrax then rounds to the state precision; its
 * sign does not matter for the error norm. Every coefficient is written as the double nearest the
 * method's value (or as the double expression diffrax evaluates).
 */
#include <string.h>

#include "core/internal.h"

/* The tableaux are laid out by hand: a row of a (or of the dense coefficients) per stage. */
/* clang-format off */

/* Ch. Tsitouras, "Runge-Kutta pairs of order 5(4) satisfying only the first column simplifying
 * assumption", Computers & Mathematics with Applications 62 (2011) 770-775; dense output: the
 * paper's polynomials in diffrax's factored form. */
static const clnode_method tsit5 = {
    .struct_size = sizeof(clnode_method),
    .name = "tsit5",
    .citation = "Tsitouras (2011)",
    .stages = 7,
    .order = 5,
    .error_order = 5,
    .fsal = 1,
    .ssal = 1,
    .adaptive = 1,
    .c = (const double[7]){0.0, 0.161, 0.327, 0.9, 0.9800255409045097, 1.0, 1.0},
    .a = (const double[7 * 7]){ /* a row per stage */
        0, 0, 0, 0, 0, 0, 0,
        0.161, 0, 0, 0, 0, 0, 0,
        -0.008480655492356989, 0.335480655492357, 0, 0, 0, 0, 0,
        2.8971530571054935, -6.359448489975075, 4.3622954328695815, 0, 0, 0, 0,
        5.325864828439257, -11.748883564062828, 7.4955393428898365, -0.09249506636175525, 0, 0, 0,
        5.86145544294642, -12.92096931784711, 8.159367898576159, -0.071584973281401,
            -0.028269050394068383, 0, 0,
        0.09646076681806523, 0.01, 0.4798896504144996, 1.379008574103742, -3.290069515436081,
            2.324710524099774, 0,
    },
    .b = (const double[7]){
        0.09646076681806523, 0.01, 0.4798896504144996, 1.379008574103742, -3.290069515436081,
        2.324710524099774, 0.0,
    },
    .b_error = (const double[7]){
        0.0017800110522257773, 0.0008164344596567463, -0.007880878010261994, 0.1447110071732629,
        -0.5823571654525552, 0.45808210592918686, -0.015151515151515152,
    },
    .interpolation = CLNODE_INTERP_TSIT5,
    .dense = (const double[7 * CLNODE_DENSE_COEFFS]){
        -1.0530884977290216, 1.3299890189751412, 1.4364028541716351, 0.7139816917074209, 0, 0,
        0.1017, 2.1966568338249754, 1.2949852507374631, 0, 0, 0,
        2.490627285651252793, 2.38535645472061657, 1.57803468208092486, 0, 0, 0,
        -16.54810288924490272, 1.21712927295533244, 0.61620406037800089, 0, 0, 0,
        47.37952196281928122, 1.203071208372362603, 0.658047292653547382, 0, 0, 0,
        -34.87065786149660974, 1.2, 0.666666666666666667, 0, 0, 0,
        2.5, 1.0, 0.6, 0, 0, 0,
    },
};

/* J. R. Dormand and P. J. Prince, "A family of embedded Runge-Kutta formulae", J. Comput. Appl.
 * Math. 6 (1980) 19-26; dense output: the midpoint weights of Shampine (1986), halved as diffrax
 * stores them. */
static const clnode_method dopri5 = {
    .struct_size = sizeof(clnode_method),
    .name = "dopri5",
    .citation = "Dormand & Prince (1980)",
    .stages = 7,
    .order = 5,
    .error_order = 5,
    .fsal = 1,
    .ssal = 1,
    .adaptive = 1,
    .c = (const double[7]){0.0, 1.0 / 5, 3.0 / 10, 4.0 / 5, 8.0 / 9, 1.0, 1.0},
    .a = (const double[7 * 7]){ /* a row per stage */
        0, 0, 0, 0, 0, 0, 0,
        1.0 / 5, 0, 0, 0, 0, 0, 0,
        3.0 / 40, 9.0 / 40, 0, 0, 0, 0, 0,
        44.0 / 45, -56.0 / 15, 32.0 / 9, 0, 0, 0, 0,
        19372.0 / 6561, -25360.0 / 2187, 64448.0 / 6561, -212.0 / 729, 0, 0, 0,
        9017.0 / 3168, -355.0 / 33, 46732.0 / 5247, 49.0 / 176, -5103.0 / 18656, 0, 0,
        35.0 / 384, 0, 500.0 / 1113, 125.0 / 192, -2187.0 / 6784, 11.0 / 84, 0,
    },
    .b = (const double[7]){35.0 / 384, 0, 500.0 / 1113, 125.0 / 192, -2187.0 / 6784, 11.0 / 84, 0},
    .b_error = (const double[7]){
        35.0 / 384 - 1951.0 / 21600, 0, 500.0 / 1113 - 22642.0 / 50085, 125.0 / 192 - 451.0 / 720,
        -2187.0 / 6784 + 12231.0 / 42400, 11.0 / 84 - 649.0 / 6300, -1.0 / 60,
    },
    .interpolation = CLNODE_INTERP_MIDPOINT,
    .dense = (const double[7 * CLNODE_DENSE_COEFFS]){
        6025192743.0 / 30085553152 / 2, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0,
        51252292925.0 / 65400821598 / 2, 0, 0, 0, 0, 0,
        -2691868925.0 / 45128329728 / 2, 0, 0, 0, 0, 0,
        187940372067.0 / 1594534317056 / 2, 0, 0, 0, 0, 0,
        -1776094331.0 / 19743644256 / 2, 0, 0, 0, 0, 0,
        11237099.0 / 235043384 / 2, 0, 0, 0, 0, 0,
    },
};

/* Prince & Dormand, "High order embedded Runge-Kutta formulae", J. Comp. Appl. Math. 7(1)
 * (1981) 67-75, the values of diffrax's dopri8.py (each the double nearest the rational
 * coefficient, written in the shortest form that reads back exactly); b_hat's entry 13 is 0, so
 * b_error's entry 13 is b's 1/4. Dense output: Bogacki & Shampine (1990), as diffrax's
 * _Dopri8Interpolation, P_i highest degree first. */
static const clnode_method dopri8 = {
    .struct_size = sizeof(clnode_method),
    .name = "dopri8",
    .citation = "Prince & Dormand (1981)",
    .stages = 14,
    .order = 8,
    .error_order = 8,
    .fsal = 1,
    .ssal = 1,
    .adaptive = 1,
    .c = (const double[14]){
        0, 0.05555555555555555, 0.08333333333333333, 0.125, 0.3125, 0.375, 0.1475, 0.465,
        0.5648654513822595, 0.65, 0.9246562776405044, 1.0, 1.0, 1.0,
    },
    .a = (const double[14 * 14]){ /* a row per stage */
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0.05555555555555555, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0.020833333333333332, 0.0625, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0.03125, 0, 0.09375, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0.3125, 0, -1.171875, 1.171875, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0.0375, 0, 0, 0.1875, 0.15, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0.04791013711111111, 0, 0, 0.11224871277777777, -0.02550567377777778, 0.012846823888888888,
            0, 0, 0, 0, 0, 0, 0, 0,
        0.01691798978729228, 0, 0, 0.3878482784860432, 0.03597736985150033, 0.19697021421566607,
            -0.17271385234050185, 0, 0, 0, 0, 0, 0, 0,
        0.0690957533591923, 0, 0, -0.6342479767288541, -0.16119757522460407, 0.13865030945882525,
            0.9409286140357562, 0.21163632648194397, 0, 0, 0, 0, 0, 0,
        0.1835569968390454, 0, 0, -2.4687680843155926, -0.29128688781630047, -0.026473020233117376,
            2.8478387641928005, 0.2813873314698498, 0.12374489986331466, 0, 0, 0, 0, 0,
        -1.2154248173958881, 0, 0, 16.672608665945774, 0.915741828416818, -6.056605804357471,
            -16.00357359415618, 14.849303086297663, -13.371575735289849, 5.134182648179638, 0, 0, 0,
            0,
        0.25886091643826425, 0, 0, -4.774485785489205, -0.4350930137770325, -3.0494833320722416,
            5.5779200399360995, 6.15583158986104, -5.062104586736939, 2.193926173180679,
            0.13462799865933495, 0, 0, 0,
        0.8224275996265075, 0, 0, -11.658673257277664, -0.7576221166909362, 0.7139735881595816,
            12.075774986890057, -2.127659113920403, 1.9901662070489554, -0.23428647154404028,
            0.17589857770794226, 0, 0, 0,
        0.041747491141530244, 0, 0, 0, 0, -0.05545232861123931, 0.2393128072011801,
            0.703510669403443, -0.7597596138144609, 0.6605630309222863, 0.15818748251012332,
            -0.2381095387528628, 0.25, 0,
    },
    .b = (const double[14]){
        0.041747491141530244, 0, 0, 0, 0, -0.05545232861123931, 0.2393128072011801,
        0.703510669403443, -0.7597596138144609, 0.6605630309222863, 0.15818748251012332,
        -0.2381095387528628, 0.25, 0,
    },
    .b_error = (const double[14]){
        0.012194277465176744, 0, 0, 0, 0, 0.7731539478765578, -0.07192809284993823,
        -1.763834521196444, 1.787182038027448, -0.7829855527544889, 0.07877188662899604,
        -0.28255398319730723, 0.25, 0,
    },
    .interpolation = CLNODE_INTERP_POLYNOMIAL,
    .dense = (const double[14 * CLNODE_DENSE_COEFFS]){
        -6.34483493928604, 22.139650499809406, -30.061056828966645, 19.999006933368396, -6.6910181737837595, 1.0,
        0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0,
        -39.61079198522025, 116.44221495503422, -121.49996277313346, 52.227353279294555, -7.6142658045872675, 0,
        20.376121380879145, -67.14513188259572, 83.17210046398478, -46.89191641810936, 10.728139263042886, 0,
        7.334709882679536, -16.56722435274965, 9.572450755599366, -0.18908932250105956, 0.5526637063753649, 0,
        32.88017743524592, -89.9916014847245, 87.84060576772056, -35.70759759462221, 4.218656262566515, 0,
        -10.158899052642676, 22.623748964853284, -17.415210777076297, 6.273644808324035, -0.6627209125361597, 0,
        -12.540126809878256, 32.23623401673554, -28.590328951479098, 10.316088127245076, -1.2636789001135462, 0,
        29.555300148451604, -82.10203154883598, 81.66309505843414, -34.76507698666118, 5.410603789859042, 0,
        -41.79234864243906, 116.26621857911195, -114.93752913770093, 47.745797107822554, -7.032137906794574, 0,
        20.300692582210083, -53.90207774663854, 50.255836422617605, -19.008209934160803, 2.3537586759714983, 0,
    },
};

/* P. Bogacki and L. F. Shampine, "A 3(2) pair of Runge-Kutta formulas", Appl. Math. Lett. 2
 * (1989) 321-325. */
static const clnode_method bosh3 = {
    .struct_size = sizeof(clnode_method),
    .name = "bosh3",
    .citation = "Bogacki & Shampine (1989)",
    .stages = 4,
    .order = 3,
    .error_order = 3,
    .fsal = 1,
    .ssal = 1,
    .adaptive = 1,
    .c = (const double[4]){0.0, 1.0 / 2, 3.0 / 4, 1.0},
    .a = (const double[4 * 4]){ /* a row per stage */
        0, 0, 0, 0,
        1.0 / 2, 0, 0, 0,
        0, 3.0 / 4, 0, 0,
        2.0 / 9, 1.0 / 3, 4.0 / 9, 0,
    },
    .b = (const double[4]){2.0 / 9, 1.0 / 3, 4.0 / 9, 0},
    .b_error = (const double[4]){
        2.0 / 9 - 7.0 / 24, 1.0 / 3 - 1.0 / 4, 4.0 / 9 - 1.0 / 3, -1.0 / 8,
    },
    .interpolation = CLNODE_INTERP_HERMITE,
};

/* Heun's method (explicit trapezoidal rule) with Euler as the embedded first-order method;
 * Hairer, Norsett & Wanner, Solving ODEs I, II.1. */
static const clnode_method heun = {
    .struct_size = sizeof(clnode_method),
    .name = "heun",
    .citation = "Heun (1900)",
    .stages = 2,
    .order = 2,
    .error_order = 2,
    .fsal = 0,
    .ssal = 0,
    .adaptive = 1,
    .c = (const double[2]){0.0, 1.0},
    .a = (const double[2 * 2]){ /* a row per stage */
        0, 0,
        1.0, 0,
    },
    .b = (const double[2]){0.5, 0.5},
    .b_error = (const double[2]){0.5, -0.5},
    .interpolation = CLNODE_INTERP_HERMITE,
};

/* Explicit Euler (constant steps only). */
static const clnode_method euler = {
    .struct_size = sizeof(clnode_method),
    .name = "euler",
    .citation = "Euler (1768)",
    .stages = 1,
    .order = 1,
    .error_order = 1,
    .fsal = 0,
    .ssal = 0,
    .adaptive = 0,
    .c = (const double[1]){0.0},
    .a = (const double[1 * 1]){ /* a row per stage */
        0.0,
    },
    .b = (const double[1]){1.0},
    .interpolation = CLNODE_INTERP_LINEAR,
};

/* clang-format on */

/* Every built-in method, in the order clnode_method_at lists them. */
static const clnode_method *const cln_methods[] = {&tsit5, &dopri5, &dopri8, &bosh3, &heun, &euler};

const clnode_method *const clnode_method_tsit5 = &tsit5;
const clnode_method *const clnode_method_dopri5 = &dopri5;
const clnode_method *const clnode_method_bosh3 = &bosh3;
const clnode_method *const clnode_method_heun = &heun;
const clnode_method *const clnode_method_dopri8 = &dopri8;
const clnode_method *const clnode_method_euler = &euler;

const clnode_method *clnode_method_at(size_t i)
{
    return i < sizeof cln_methods / sizeof cln_methods[0] ? cln_methods[i] : NULL;
}

const clnode_method *clnode_method_by_name(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; clnode_method_at(i); ++i)
        if (strcmp(clnode_method_at(i)->name, name) == 0)
            return clnode_method_at(i);
    return NULL;
}
