/* cln_layout.h - indices of the solver's constant and state arrays, shared by cl/cln_step.h, the
 * kernels and the driver. Plain preprocessor constants, valid in C and OpenCL C. */
#ifndef CLN_LAYOUT_H
#define CLN_LAYOUT_H

#define CLN_MAX_STAGES 16

/* ---- per-solve real constants CR[] ---- */
#define CLN_CR_TAU1 0       /* direction * t1 */
#define CLN_CR_CLIP_FLOOR 1 /* tau1 stepped down by 100 ulp */
#define CLN_CR_RTOL 2
#define CLN_CR_ATOL 3
#define CLN_CR_SAFETY 4
#define CLN_CR_FACTORMIN 5
#define CLN_CR_FACTORMAX 6
#define CLN_CR_COEFF1 7 /* (icoeff + pcoeff + dcoeff) / error_order */
#define CLN_CR_COEFF2 8 /* -(pcoeff + 2 dcoeff) / error_order */
#define CLN_CR_COEFF3 9 /* dcoeff / error_order */
#define CLN_CR_DTMIN 10
#define CLN_CR_DTMAX 11
#define CLN_CR_DIR 12    /* +1 or -1 */
#define CLN_CR_SQRT_N 13 /* sqrt(N) rounded to real, as lineax's rms_norm divides by it */
#define CLN_CR_TAU0 14
#define CLN_CR_DT0 15 /* |dt0| after dtmin/dtmax clipping */
#define CLN_CR_A 16   /* s x s, row-major, stride CLN_MAX_STAGES */
#define CLN_CR_B (CLN_CR_A + CLN_MAX_STAGES * CLN_MAX_STAGES) /* solution weights */
#define CLN_CR_E (CLN_CR_B + CLN_MAX_STAGES)                  /* error weights b - b_hat */
#define CLN_CR_C (CLN_CR_E + CLN_MAX_STAGES)                  /* nodes */
#define CLN_CR_CMID (CLN_CR_C + CLN_MAX_STAGES)               /* dopri5 midpoint weights */
/* dopri8 dense output: per stage the 6 coefficients of P_i, highest degree first */
#define CLN_CR_DENSE (CLN_CR_CMID + CLN_MAX_STAGES)
#define CLN_DENSE_COEFFS 6
#define CLN_CR_COUNT (CLN_CR_DENSE + CLN_MAX_STAGES * CLN_DENSE_COEFFS)

/* ---- per-solve integer constants CI[] ---- */
#define CLN_CI_B 0 /* rows of the batch buffers (>= the trajectories solved) */
#define CLN_CI_N 1
#define CLN_CI_LDZ 2
#define CLN_CI_STAGES 3
#define CLN_CI_FSAL 4
#define CLN_CI_SSAL 5
#define CLN_CI_ADAPTIVE 6 /* 0: constant steps of dt0 */
#define CLN_CI_INTERP 7   /* clnode_interpolation */
#define CLN_CI_MAX_STEPS 8
#define CLN_CI_HAS_DTMIN 9
#define CLN_CI_HAS_DTMAX 10
#define CLN_CI_FORCE_DTMIN 11
#define CLN_CI_SAVE_STEPS 12
#define CLN_CI_N_TS 13
#define CLN_CI_COEFF1_ZERO 14
#define CLN_CI_COEFF2_ZERO 15
#define CLN_CI_COEFF3_ZERO 16
#define CLN_CI_TIME_INPUT 17
#define CLN_CI_BREAL 18        /* trajectories solved; rows from here on are padding */
#define CLN_CI_FLOOR_DETECT 19 /* 1: end trajectories stuck at the rounding floor */
#define CLN_CI_COUNT 20

/* ---- per-trajectory state ---- */
#define CLN_RS_T 0    /* tau_prev: start of the next attempt */
#define CLN_RS_TN 1   /* tau_next: end of the next attempt */
#define CLN_RS_INV1 2 /* controller history: 1/E of the last accepted step */
#define CLN_RS_INV2 3 /* ... and of the one before */
#define CLN_RS_EREJ 4 /* floor detector: E of the last attempt when it was rejected */
#define CLN_RS_HREJ 5 /* ... and its step size; 0 when the last attempt was accepted */
#define CLN_RS_COUNT 6

#define CLN_IS_DONE 0 /* frozen: finished or failed */
#define CLN_IS_RESULT 1
#define CLN_IS_NSTEPS 2
#define CLN_IS_NACC 3
#define CLN_IS_NREJ 4
#define CLN_IS_AT_DTMIN 5
#define CLN_IS_NTS 6 /* save times written so far */
#define CLN_IS_NSTEPS_SAVED 7
#define CLN_IS_FLOOR 8 /* floor detector: evidence that E is rounding noise (see cln_step.h) */
#define CLN_IS_COUNT 9

/* results, as clnode_result */
#define CLN_RESULT_SUCCESS 0
#define CLN_RESULT_MAX_STEPS 1
#define CLN_RESULT_DT_MIN 2
#define CLN_RESULT_NONFINITE 3
#define CLN_RESULT_PRECISION_FLOOR 4

/* the rounding-floor detector (cln_finish_traj): each rejection whose E did not fall although
 * dt shrank adds CLN_FLOOR_EVENT, each accepted step takes 1 away; the trajectory ends at
 * CLN_FLOOR_LIMIT (three such rejections close together) */
#define CLN_FLOOR_EVENT 8
#define CLN_FLOOR_LIMIT 24

/* interpolants, as clnode_interpolation */
#define CLN_INTERP_LINEAR 0
#define CLN_INTERP_HERMITE 1
#define CLN_INTERP_DOPRI5 2
#define CLN_INTERP_TSIT5 3
#define CLN_INTERP_DOPRI8 4

#endif /* CLN_LAYOUT_H */
