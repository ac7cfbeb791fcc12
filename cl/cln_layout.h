/* cln_layout.h - the layout of the solver's constant and state buffers, shared by cl/cln_step.h,
 * the kernels and the driver: documented structs instead of index lists, valid in C, OpenCL C 1.2
 * and CUDA C++.
 *
 * Layout rule: every struct holds members of ONE scalar type only (all real, or all int), so no
 * padding can arise and a struct has the layout of an array of that scalar in every dialect. The
 * real structs are written once as a macro of their scalar type R: the kernels read them with
 * R = real (the state precision); the driver fills them with R = double and rounds them member
 * by member to the state precision when it uploads them (as an array of doubles, which they are
 * laid out as). The int structs use int, 32 bits in all three dialects.
 *
 * Buffers (B trajectories):
 *   K   one cln_consts         per-solve real constants (times, controller, method)
 *   KI  one cln_iconsts        per-solve integer constants (sizes, switches)
 *   RS  B cln_rstate           per-trajectory real state (interval, first step, the next attempt,
 *                              controller history)
 *   IS  B cln_istate           per-trajectory integer state (flags and counters)
 */
#ifndef CLN_LAYOUT_H
#define CLN_LAYOUT_H

#define CLN_MAX_STAGES 16
/* Dense-output coefficients per stage (cln_consts.dense; clnode_method.dense). */
#define CLN_DENSE_COEFFS 6

/* Per-solve real constants. Times are in the direction-normalised variable tau = dir * t; the
 * interval and the first step are per trajectory (cln_rstate), the direction is shared. */
#define CLN_CONSTS_STRUCT(R)                                                                       \
    struct {                                                                                       \
        R dir;    /* direction of integration, +1 or -1, the same for every trajectory */          \
        R sqrt_n; /* sqrt(N) rounded to real, as lineax's rms_norm divides by it */                \
        /* the PID controller (diffrax's PIDController) */                                         \
        R rtol, atol;                                                                              \
        R safety, factormin, factormax;                                                            \
        R coeff1; /* (icoeff + pcoeff + dcoeff) / error_order: exponent of 1/E */                  \
        R coeff2; /* -(pcoeff + 2 dcoeff) / error_order: exponent of the previous 1/E */           \
        R coeff3; /* dcoeff / error_order: exponent of the one before */                           \
        R dtmin, dtmax;                                                                            \
        /* the method, from its descriptor (clnode_method), stage rows of CLN_MAX_STAGES */        \
        R a[CLN_MAX_STAGES][CLN_MAX_STAGES];       /* a[i][j], j < i */                            \
        R b[CLN_MAX_STAGES];                       /* solution weights */                          \
        R e[CLN_MAX_STAGES];                       /* error weights b - b_hat */                   \
        R c[CLN_MAX_STAGES];                       /* nodes */                                     \
        R dense[CLN_MAX_STAGES][CLN_DENSE_COEFFS]; /* dense output, as KI.dense_form reads it */   \
    }

/* Per-solve integer constants. */
typedef struct cln_iconsts {
    int B;          /* rows of the batch buffers (>= the trajectories solved) */
    int Breal;      /* trajectories solved; rows from here on are padding */
    int N;          /* components of the state */
    int ldz;        /* row length of Z: N, + 1 when the model takes t, + its conditioning inputs */
    int stages;     /* s */
    int fsal;       /* the method's first stage is the last one of the previous step */
    int ssal;       /* the method's solution is its last stage argument */
    int adaptive;   /* 0: constant steps of dt0 */
    int dense_form; /* clnode_interpolation: how the dense coefficients are evaluated */
    int max_steps;
    int has_dtmin, has_dtmax, force_dtmin;
    int save_steps;   /* save every accepted step */
    int steps_cap;    /* row stride of STT and STY: the points each trajectory has room for, set
                         (and raised as the solve takes steps) by the driver, <= max_steps */
    int n_ts;         /* requested save times (of each trajectory) */
    int ts_stride;    /* trajectory b's save times start at TS[b * ts_stride]: 0 for one list
                         shared by the batch, n_ts for a list per trajectory */
    int coeff1_zero;  /* coeff1 == 0: the controller skips that power */
    int coeff2_zero;  /* coeff2 == 0 */
    int coeff3_zero;  /* coeff3 == 0 */
    int time_input;   /* the model takes t as an extra input column */
    int floor_detect; /* 1: end trajectories stuck at the rounding floor (the guard is on and
                         rtol < CLNODE_GUARD_FACTOR u of the solve's arithmetic) */
    int dt0_order; /* the method's order p: the automatic first step's exponent 1/p (cln_dt0.h) */
} cln_iconsts;

/* Per-trajectory real state. The first four members are the trajectory's problem, written by
 * the driver before cln_init_traj (every trajectory may have its own interval and first step);
 * the others are its state, written by the kernels. */
#define CLN_RSTATE_STRUCT(R)                                                                       \
    struct {                                                                                       \
        R tau0;       /* start of the interval */                                                  \
        R tau1;       /* end of the interval */                                                    \
        R clip_floor; /* tau1 stepped down by 100 ulp (diffrax's t1_clip_floor) */                 \
        R dt0;        /* |dt0| after dtmin/dtmax clipping (also the constant step) */              \
        R t;          /* tau_prev: start of the next attempt */                                    \
        R tn;         /* tau_next: end of the next attempt */                                      \
        R inv1;       /* controller history: 1/E of the last accepted step */                      \
        R inv2;       /* ... and of the one before */                                              \
        R erej;       /* floor detector: E of the last attempt when it was rejected */             \
        R hrej;       /* ... and its step size; 0 when the last attempt was accepted */            \
    }

/* Per-trajectory integer state. */
typedef struct cln_istate {
    int done;   /* frozen: finished or failed */
    int result; /* CLN_RESULT_* */
    int nsteps, nacc, nrej;
    int at_dtmin;     /* the last step was held at dtmin */
    int nts;          /* save times written so far */
    int nsteps_saved; /* accepted steps saved so far */
    int floor;        /* floor detector: evidence that E is rounding noise (cln_floor_detect) */
} cln_istate;

/* results, as clnode_result */
#define CLN_RESULT_SUCCESS 0
#define CLN_RESULT_MAX_STEPS 1
#define CLN_RESULT_DT_MIN 2
#define CLN_RESULT_NONFINITE 3
#define CLN_RESULT_PRECISION_FLOOR 4

/* Why a save time is refused (lib/solver/solver_check.c; on the device, cln_step.h's
 * cln_bad_save_row: its flag % 4), in the order clnode_solve checks each time: not finite,
 * outside the interval, before the time before it. */
#define CLN_TS_NONFINITE 1
#define CLN_TS_OUTSIDE 2
#define CLN_TS_DECREASING 3

/* the rounding-floor detector (cln_floor_detect): each rejection whose E did not fall although
 * dt shrank adds CLN_FLOOR_EVENT, each accepted step takes 1 away; the trajectory ends at
 * CLN_FLOOR_LIMIT (three such rejections close together) */
#define CLN_FLOOR_EVENT 8
#define CLN_FLOOR_LIMIT 24

/* dense-output forms, as clnode_interpolation */
#define CLN_DENSE_LINEAR 0
#define CLN_DENSE_HERMITE 1
#define CLN_DENSE_MIDPOINT 2
#define CLN_DENSE_TSIT5 3
#define CLN_DENSE_POLYNOMIAL 4

/* The step a save time belongs to, compared in tau and in the state precision: a save time ts
 * before its trajectory's start tau0 belongs to no step (it lies outside the trajectory's
 * interval); any other belongs to the first accepted step whose end tn is not before it (a time
 * on a step's end belongs to that step, not to the next one). CLN_TS_STEP_LOOP is the rule's one
 * statement, a loop header: it runs its body for each save time j, j + 1 ... below nts that
 * belongs to a step ending at tn (or before it), TS_J being save time j (an expression of j), and
 * leaves j at the first that does not. The forward's dense output (cln_save_dense) runs it over
 * each accepted step; a kept solve's tape records the step of each saved time with it
 * (lib/solver/tape.c), which the reverse pass reads; a trajectory of no step counts with it the
 * times that receive y0 (lib/solver/solver_save.c). */
#define CLN_TS_BEFORE_START(ts, tau0) ((ts) < (tau0))
#define CLN_TS_STEP_LOOP(j, nts, TS_J, tn) for (; (j) < (nts) && (TS_J) <= (tn); ++(j))

/* ---- the reverse pass on a device (cl/cln_reverse_kernels.h, lib/backends/device/) ---- */

/* Where the cotangent of one saved point of a trajectory's row enters the reverse pass
 * (cln_rev_event.kind). */
#define CLN_REV_POINT 0 /* the state after `step` accepted steps (0: y0; the last: the stop) */
#define CLN_REV_DENSE                                                                              \
    1 /* the dense output at save time `j` of the trajectory's list, inside                        \
         accepted step `step` (0-based) */
typedef struct cln_rev_event {
    int kind, step, j, slot; /* slot: of the trajectory's row of cotangents */
} cln_rev_event;

/* Trajectories per block of the parameters' sum (CLNODE_GRADIENT_BLOCK, clnode/gradient.h). */
#define CLN_REV_BLOCK 32

/* Whether the reverse pass skips the last stage's MLP: it goes back only when something reads that
 * stage's f, so not for SSAL tableaux (their solution is the last stage's argument) without dense
 * output. */
#define CLN_REV_SKIP_LAST(ssal, n_ts) ((ssal) && (n_ts) == 0)

/* The entries of a reverse group's JOB (its sizes and switches, cln_long each). */
#define CLN_RJ_BG 0        /* rows of the group's row buffers */
#define CLN_RJ_N 1         /* components of the state */
#define CLN_RJ_LDZ 2       /* row length of Z: the first layer's inputs */
#define CLN_RJ_S 3         /* stages */
#define CLN_RJ_S1 4        /* stages whose MLP goes back (S, or S - 1: CLN_REV_SKIP_LAST) */
#define CLN_RJ_NIN 5       /* conditioning inputs: the last n_in columns of Z */
#define CLN_RJ_SSAL 6      /* the method's solution is its last stage argument */
#define CLN_RJ_DENSE 7     /* the dense-output form (CLN_DENSE_*) */
#define CLN_RJ_TS_STRIDE 8 /* a trajectory's save times start at TS[b TS_STRIDE] */
#define CLN_RJ_SLOTS 9     /* a trajectory's row of cotangents holds SLOTS points */
#define CLN_RJ_EVERY 10    /* checkpoint_every */
#define CLN_RJ_SEG 11      /* E: the states of SEG's rows */
#define CLN_RJ_NS 12       /* values of the output scale (0: none) */
#define CLN_RJ_SUMW 13     /* the layers' outputs together (P and O per stage and row) */
#define CLN_RJ_NTHETA 14   /* parameters: a block's row of TH */
#define CLN_RJ_TF32 15     /* the weight sums round their factors to TF32 (fp32 tf32 mode) */
#define CLN_RJ_TIME 16     /* column N of Z is the stage time (cln_iconsts.time_input) */
#define CLN_RJ_SIZE 17

/* The entries of each row of RL (cln_long each). */
#define CLN_RL_B 0   /* its trajectory, counted from the group's first */
#define CLN_RL_M 1   /* its accepted steps */
#define CLN_RL_TAU 2 /* its first time in TAU (its start; step m ends at TAU[.. + m + 1]) */
#define CLN_RL_YS 3  /* its first kept state in YS, counted in states */
#define CLN_RL_EV 4  /* its first event in EV */
#define CLN_RL_NEV 5 /* its events not yet gone back through: EV[.. + 0 .. NEV - 1] */
#define CLN_RL_NLO 6 /* the first step of its group of recomputed steps */
#define CLN_RL_W 8

/* The entries of each row of RT (real each). */
#define CLN_RT_T 0
#define CLN_RT_TN 1
#define CLN_RT_HD 2
#define CLN_RT_W 3

/* Where cln_rev_begin_body takes the state at the step's start from (its mode). */
#define CLN_REV_KEPT 0 /* step M - 1 - s, kept on the tape (checkpoint_every 1) */
#define CLN_REV_SEG 1  /* step M - 1 - s, recomputed into SEG */
#define CLN_REV_SUB 2  /* step nlo + j of group q (capped at the group's last), from SEG */

#endif /* CLN_LAYOUT_H */
