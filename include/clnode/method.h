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

/* Dense-output interpolants, one per family. */
typedef enum clnode_interpolation {
    CLNODE_INTERP_LINEAR = 0,  /* y0 + theta (y1 - y0) (euler) */
    CLNODE_INTERP_HERMITE = 1, /* cubic Hermite from k_first and k_last (bosh3, heun) */
    CLNODE_INTERP_DOPRI5 = 2,  /* fourth-order polynomial through a midpoint (dopri5) */
    CLNODE_INTERP_TSIT5 = 3,   /* Tsitouras' fourth-order polynomial (tsit5) */
    CLNODE_INTERP_DOPRI8 = 4,  /* degree-6 polynomials, Bogacki & Shampine (1990) (dopri8) */
} clnode_interpolation;

typedef struct clnode_method {
    const char *name;      /* "tsit5", ... */
    int stages;            /* s */
    int order;             /* p of the solution */
    int error_order;       /* exponent divisor of the controller (diffrax: = order for ODEs) */
    int fsal;              /* first-same-as-last: f(t1, y1) is the last stage */
    int ssal;              /* solution-same-as-last: y1 is the last stage's argument */
    int adaptive;          /* has an embedded error estimate */
    const double *c;       /* s nodes (c[0] == 0) */
    const double *a;       /* s x s, strictly lower triangular, row-major */
    const double *b;       /* s solution weights */
    const double *b_error; /* s weights of the error estimate, b - b_hat (NULL if !adaptive) */
    clnode_interpolation interpolation;
    const char *citation;
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

/* Finds a method by name ("tsit5", "dopri5", "dopri8", "bosh3", "heun", "euler"); NULL if
 * unknown. */
CLNODE_API const clnode_method *clnode_method_by_name(const char *name);

#ifdef __cplusplus
}
#endif

#endif /* CLNODE_METHOD_H */
