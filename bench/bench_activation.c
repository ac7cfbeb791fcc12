/* bench_activation.c - ns per element of softplus over the seed MLP's hidden activations
 * (batch 4096 x 100 units): the shared arithmetic of cl/cln_activation.h in its vectorised host
 * loop (cl/activation_f32.c, activation_f64.c; AVX2 clone where the CPU has it) against the
 * libm expression max(x, 0) + log1p(exp(-|x|)), in float and double. Reports the ratio measured
 * in this run (DESIGN.md section 8), best of REPS.
 *
 * usage: bench_activation [reps]   (default 50)
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void act_array_f32(int act, const float *x, float *y, size_t n);
void act_array_f64(int act, const double *x, double *y, size_t n);

enum {
    ROWS = 4096,
    COLS = 100,
    N = ROWS * COLS,
    ACT_SOFTPLUS = 4
};

static double now_ns(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The libm baselines; noinline so that the comparison is loop against loop. */
__attribute__((noinline)) static void softplus_libm_f32(const float *restrict x, float *restrict y,
                                                        size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = fmaxf(x[i], 0.0f) + log1pf(expf(-fabsf(x[i])));
}

__attribute__((noinline)) static void softplus_libm_f64(const double *restrict x,
                                                        double *restrict y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = fmax(x[i], 0.0) + log1p(exp(-fabs(x[i])));
}

static void softplus_cln_f32(const float *x, float *y, size_t n)
{
    act_array_f32(ACT_SOFTPLUS, x, y, n);
}

static void softplus_cln_f64(const double *x, double *y, size_t n)
{
    act_array_f64(ACT_SOFTPLUS, x, y, n);
}

#define BEST_OF(reps, call, best)                                                                  \
    do {                                                                                           \
        best = INFINITY;                                                                           \
        for (int r_ = 0; r_ < (reps); r_++) {                                                      \
            double t0_ = now_ns();                                                                 \
            call;                                                                                  \
            double t_ = now_ns() - t0_;                                                            \
            if (t_ < best)                                                                         \
                best = t_;                                                                         \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 50;
    if (reps < 1)
        reps = 1;
    float *xf = malloc(sizeof *xf * N), *yf = malloc(sizeof *yf * N);
    double *xd = malloc(sizeof *xd * N), *yd = malloc(sizeof *yd * N);
    if (!xf || !yf || !xd || !yd) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    /* pre-activations of a trained hidden layer are O(1): uniform in [-8, 8] */
    unsigned long long s = 0x2545F4914F6CDD1DULL;
    for (size_t i = 0; i < N; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        xd[i] = -8.0 + 16.0 * (double)(s >> 11) * 0x1p-53;
        xf[i] = (float)xd[i];
    }
    double t_cf, t_lf, t_cd, t_ld, sum = 0;
    BEST_OF(reps, softplus_cln_f32(xf, yf, N), t_cf);
    sum += yf[N / 2];
    BEST_OF(reps, softplus_libm_f32(xf, yf, N), t_lf);
    sum += yf[N / 2];
    BEST_OF(reps, softplus_cln_f64(xd, yd, N), t_cd);
    sum += yd[N / 2];
    BEST_OF(reps, softplus_libm_f64(xd, yd, N), t_ld);
    sum += yd[N / 2];

    printf("softplus over %d x %d elements, best of %d\n", ROWS, COLS, reps);
    printf("  f32  cln_softplus %7.3f ns/elem   libm %7.3f ns/elem   speedup %5.2fx\n", t_cf / N,
           t_lf / N, t_lf / t_cf);
    printf("  f64  cln_softplus %7.3f ns/elem   libm %7.3f ns/elem   speedup %5.2fx\n", t_cd / N,
           t_ld / N, t_ld / t_cd);
    printf("  (checksum %g)\n", sum);
    free(xf);
    free(yf);
    free(xd);
    free(yd);
    return 0;
}
