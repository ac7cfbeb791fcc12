/* clnode/method.h - explicit Runge-Kutta methods as data (Butcher tableaux with capabilities).
 *
 * The tableaux are those of diffrax 0.7.2; every coefficient is stored in double and rounded to
 * the state precision when a solve starts, as JAX rounds them.
 */
#ifndef CLNODE_METHOD_H
#define CLNODE_METHOD_H

#include "clnode/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CLNODE_MAX_STAGES 16
/* Dense-output coefficients per stage (clnode_method.dense). */
#define CLNODE_DENSE_COEFFS 6

/* Dense-output forms: how y(theta), 0 <= theta <= 1, is evaluated over an accepted step from y0,
 * y1, k_i = h f_i (i < s) and the method's coefficients d = clnode_method.dense (s rows of
 * CLNODE_DENSE_COEFFS; entries a form does not read are 0). Each form keeps diffrax's order of
 * evaluation, which is why they are not all written as one polynomial form. */
typedef enum clnode_interpolation {
    CLNODE_INTERP_LINEAR = 0,     /* y0 + theta (y1 - y0); no coefficients (euler) */
    CLNODE_INTERP_HERMITE = 1,    /* cubic Hermite from (y0, k_0) and (y1, k_{s-1}); no coefficients
                                     (bosh3, heun) */
    CLNODE_INTERP_MIDPOINT = 2,   /* quartic through y0, y1, k_0, k_{s-1} and the midpoint value
                                     y0 + sum_i d_i0 k_i, Shampine (1986) (dopri5) */
    CLNODE_INTERP_TSIT5 = 3,      /* Tsitouras' factored quartics, 7 stages: d_00 th (th - d_01)
                                     (th^2 - d_02 th + d_03), d_i0 th^2 (th^2 - d_i1 th + d_i2) for
                                     i = 1, 2, d_i0 (th - d_i1) (th - d_i2) th^2 for i = 3..6 */
    CLNODE_INTERP_POLYNOMIAL = 4, /* y0 + sum_i theta P_i(theta) k_i, P_i = d_i0 th^5 + ... + d_i5
                                     by Horner (dopri8) */
    /* the same forms under the names of the methods that use them */
    CLNODE_INTERP_DOPRI5 = CLNODE_INTERP_MIDPOINT,
    CLNODE_INTERP_DOPRI8 = CLNODE_INTERP_POLYNOMIAL,
} clnode_interpolation;

/* An explicit Runge-Kutta method, everything about it in one descriptor. The solver and the
 * kernels read nothing about a method but this: a program may define its own, with struct_size =
 * sizeof(clnode_method) (fields are only ever appended, clnode/common.h; a size this library does
 * not know is refused by the solve). */
typedef struct clnode_method {
    size_t struct_size;    /* sizeof(clnode_method) where the descriptor was compiled */
    const char *name;      /* "tsit5", ... */
    int stages;            /* s, 1 to CLNODE_MAX_STAGES */
    int order;             /* p of the solution */
    int error_order;       /* exponent divisor of the controller (diffrax: = order for ODEs) */
    int fsal;              /* first-same-as-last: f(t1, y1) is the last stage */
    int ssal;              /* solution-same-as-last: y1 is the last stage's argument */
    int adaptive;          /* has an embedded error estimate */
    const double *c;       /* s nodes (c[0] == 0) */
    const double *a;       /* s x s, strictly lower triangular, row-major */
    const double *b;       /* s solution weights */
    const double *b_error; /* s weights of the error estimate, b - b_hat (NULL if !adaptive) */
    clnode_interpolation interpolation; /* the dense-output form */
    const char *citation;
    const double *dense; /* s x CLNODE_DENSE_COEFFS, row-major: the dense-output coefficients of
                            the form (NULL for forms without coefficients) */
} clnode_method;

/* Tsitouras' 5(4) pair, Tsitouras (2011); the default. */
CLNODE_API extern const clnode_method *const clnode_method_tsit5;
/* Dormand-Prince 5(4), Dormand & Prince (1980). */
CLNODE_API extern const clnode_method *const clnode_method_dopri5;
/* Bogacki-Shampine 3(2), Bogacki & Shampine (1989). */
CLNODE_API extern const clnode_method *const clnode_method_bosh3;
/* Heun 2(1). */
CLNODE_API extern const clnode_method *const clnode_method_heun;
/* Dormand-Prince 8(7), Prince & Dormand (1981): 14 stages, FSAL. */
CLNODE_API extern const clnode_method *const clnode_method_dopri8;
/* Explicit Euler (constant steps only). */
CLNODE_API extern const clnode_method *const clnode_method_euler;

/* Finds a built-in method by name ("tsit5", "dopri5", "dopri8", "bosh3", "heun", "euler"); NULL
 * if unknown. */
CLNODE_API const clnode_method *clnode_method_by_name(const char *name);

/* The built-in methods in turn, i = 0, 1, ...: NULL past the last (for listing them). */
CLNODE_API const clnode_method *clnode_method_at(size_t i);

#ifdef __cplusplus
}
#endif

#endif /* CLNODE_METHOD_H */
