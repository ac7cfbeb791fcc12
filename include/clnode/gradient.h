/* clnode/gradient.h - reverse mode: the gradient of a solve, as jax.grad of diffrax computes it.
 *
 * Semantics: jax.grad through diffrax 0.7.2's diffeqsolve with its default adjoint
 * (RecursiveCheckpointAdjoint), which differentiates the accepted steps that were run with every
 * step size held at its forward value (the PID controller's factor, its error norm and an
 * automatic dt0 carry no gradient: lax.stop_gradient in diffrax's pid.py). Rejected steps
 * contribute nothing. The gradient flows through every accepted step's stages (the first stage of
 * a step is f at that step's start, FSAL or not), through the dense output of SaveAt(ts=...) into
 * all of its step's stages, and through the values saved at t0, at the step ends and at t1, into
 * the initial states y0, the conditioning inputs and the model's parameters (each layer's weight
 * and bias, and the output scale). Checkpointing changes no bit of it.
 *
 * Use: solve with the option keep_tape = 1 (clnode_solve_options: the solution then keeps each
 * accepted step's times and, every checkpoint_every steps, its state), then call
 * clnode_gradient_compute with the cotangents of the saved values in the saved-points layout
 * (clnode_solution_rows_f64 with the same `slots`).
 *
 * What is not differentiated: the times. t0, t1, dt0 and the save times are constants of the
 * reverse pass: no gradient with respect to them is computed, and none is reported (there is no
 * output for one to be read from). Under the PID controller the gradient diffrax returns for dt0 is
 * an artefact of the frozen factors; under constant steps it is real but not computed here.
 *
 * The first step chosen by the solver (clnode_solve_options.dt0_auto) is a function of y0, the
 * inputs and the parameters (two field evaluations, cl/cln_dt0.h). It is held, not
 * differentiated, as every step size of the reverse pass: the gradient of a dt0_auto solve is
 * bit for bit that of the same solve given its chosen first steps as dt0 (the tape keeps the
 * steps taken, not how they were chosen), and the selection's two evaluations add nothing to
 * it. torchode's default adjoint (AutoDiffAdjoint with backprop_through_step_size_control)
 * differentiates its step-size control, its first step included; torchdiffeq's backprop through
 * odeint does too; diffrax stops the gradient of its automatic dt0, as clnode does.
 *
 * Trajectories that did not succeed (max_steps_reached, dt_min_reached, nonfinite,
 * precision_floor) get the gradient of what was computed, as diffrax's with throw=False: their
 * accepted steps up to where they stopped, and the points they saved (clnode_solution_stats says
 * which ones stopped early).
 *
 * The parameters' gradient is summed over the batch in a fixed order, stated here alone (the
 * backends and the manual refer to it): the trajectories are taken in blocks of
 * CLNODE_GRADIENT_BLOCK consecutive indices. A block goes back through its trajectories' steps
 * together, aligned at each one's last step (reverse step s is step M_b - 1 - s of every
 * trajectory with M_b > s accepted steps), its trajectories ordered by M_b (most first, equal M_b
 * by index). Inside a block, each weight's sum adds, reverse step by reverse step, that
 * step's terms summed from zero (its stages in order, then its trajectories in that order: one
 * fma each); each bias and output-scale term is added one by one (stages from the last, then the
 * trajectories). The blocks' sums are combined in a fixed tree over the block indices (the sum of
 * blocks [lo, hi) is that of [lo, mid) plus that of [mid, hi), mid - lo the largest power of two
 * below hi - lo). So it depends on the batch alone: never on threads, compaction, checkpointing,
 * the host's ISA, the device the forward solve ran on or the device the reverse pass runs on. The
 * gradient of y0 and of the inputs is each trajectory's own: bit-identical whatever trajectories
 * share its batch.
 *
 * Devices: the reverse pass runs on the host (its ordered GEMM), on OpenCL devices and on CUDA
 * GPUs (lib/backends/device/device_reverse.h), every element computed by the same functions of cl/
 * and every sum in the order above, so every device gives the host's bits in strict GEMM mode. A
 * device takes the batch in groups of blocks sized for its memory: a group's kept states, its
 * cotangents and its scratch are uploaded when it begins (the tape stays on the host between
 * groups). In tf32 mode the host and OpenCL emulate TF32 with the same bits; CUDA computes the
 * reverse pass's products on its tensor cores, as its forward's (their bits follow cuBLAS's choice
 * of kernel, which the shapes move: a CUDA tf32 gradient is not reproducible bit for bit), and its
 * weight sums round their factors to TF32 as the emulation does.
 */
#ifndef CLNODE_GRADIENT_H
#define CLNODE_GRADIENT_H

#include "clnode/common.h"
#include "clnode/context.h"
#include "clnode/model.h"
#include "clnode/solver.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Trajectories per block of the parameters' sum (see above): a constant of the library, so that
 * a batch split into chunks of whole blocks (MPI ranks) sums in the same order. */
#define CLNODE_GRADIENT_BLOCK 32

/* Options of the reverse pass. Fields are only ever appended (clnode/common.h): set the defaults
 * with clnode_gradient_default_options. */
typedef struct clnode_gradient_options {
    size_t struct_size;          /* set by the defaults function */
    clnode_progress_fn progress; /* default NULL; as the forward solve's, between groups of blocks:
                                    `active` the trajectories not yet done, `fraction` the
                                    fraction of the batch done, `steps_taken` the steps gone back
                                    through */
    void *progress_user;
    clnode_cancel_fn cancel; /* default NULL: never cancelled; polled between groups of blocks */
    void *cancel_user;
} clnode_gradient_options;

#define clnode_gradient_default_options(opts)                                                      \
    clnode_gradient_default_options_sized((opts), sizeof *(opts))
CLNODE_API void clnode_gradient_default_options_sized(clnode_gradient_options *opts,
                                                      size_t struct_size);

typedef struct clnode_gradient clnode_gradient;

/* The bytes a solution keeps for the reverse pass (0 when it was solved without keep_tape):
 *   esize sum over trajectories b of (M_b + 1 + ceil(M_b / k) N)  + 2 (B + 1) sizeof(size_t)
 *   + esize B n_in  + esize n_ts (B n_ts with per-trajectory save times)  + 4 B n_ts
 * M_b the accepted steps of trajectory b, k = checkpoint_every, N the state dimension, n_in the
 * model's conditioning inputs, n_ts the save times, esize the bytes of the state precision (4 for
 * fp32, 8 for fp64): each step's end time, the state at every k-th step's start (counted from
 * the last step), the inputs and save times in the state precision, and for each trajectory and
 * save time the step whose dense output saved it (a 32-bit index, recorded with the tape: the
 * reverse pass reads it). It follows the steps taken, never max_steps. While a kept solve runs,
 * the steps' states are held on its device as with save_steps (clnode_solve). */
CLNODE_API size_t clnode_solution_kept_bytes(const clnode_solution *sol);

/* The version of the layout clnode_solution_tape_export writes and clnode_solution_tape_import
 * reads (doc/gradient.md, "The tape as bytes"): raised whenever the layout changes. */
#define CLNODE_TAPE_VERSION 2

/* A kept solution (solved with keep_tape = 1) as bytes: a header (magic "CLNTAPE", the layout's
 * version, the total size, a checksum, the precision, the sizes, a fingerprint of the model) and
 * what the reverse and tangent passes read: the solution's statistics, the counts of its saved
 * points and their times, and its tape (the steps' times, the kept states, the conditioning
 * inputs and save times), in the byte order of the machine, each array at a multiple of 8 bytes.
 * Not the saved values nor the final states (the caller has them from the solve): about
 * clnode_solution_kept_bytes plus the statistics and the saved points' times. *needed receives
 * the bytes it takes. buf NULL: only *needed is set; else buf must hold size >= *needed bytes,
 * of which the first *needed are written. model: the model solved, the same object. Nothing is
 * allocated. Errors: CLNODE_ERR_INVALID_ARGUMENT (NULL model, sol or needed, a solution that
 * kept nothing, another model, a buffer smaller than *needed: nothing written),
 * CLNODE_ERR_OUT_OF_MEMORY (a size beyond size_t). ctx may be NULL (no message then). */
CLNODE_API clnode_status clnode_solution_tape_export(clnode_context *ctx, const clnode_model *model,
                                                     const clnode_solution *sol, void *buf,
                                                     size_t size, size_t *needed);

/* The solution that clnode_solution_tape_export wrote into buf, for clnode_gradient_compute and
 * clnode_tangent_compute with `model` (whose form and parameters must be the exported
 * solution's, bit for bit: the model's fingerprint is checked): its gradient and tangents are
 * the exported solution's, bit for bit. The accessors of clnode/solver.h answer as the exported
 * solution's did (statistics, counts, times, kinds, layout), but for the saved values and final
 * states, which the tape does not hold: clnode_solution_y_final gives NULL,
 * clnode_solution_saved sets *ys to NULL, and clnode_solution_rows_f64/_f32 with ys not NULL
 * return CLNODE_ERR_INVALID_ARGUMENT (their times alone, ys NULL, are given). buf needs no
 * alignment; size may exceed the tape's (the bytes after it are not read). Every part is
 * checked before it is used, and a buffer that is not such a tape is refused with
 * CLNODE_ERR_INVALID_ARGUMENT and a message naming what is wrong: shorter than its header or
 * than the size its header states (truncated), no magic, the other byte order, another version
 * of the layout (named: "version 1, this library reads version 2"), a checksum that does not
 * match its bytes (changed after the export), sizes or offsets that contradict each other,
 * solver constants of another build, another model (form or parameters).
 * CLNODE_ERR_OUT_OF_MEMORY. On success *out holds a solution to destroy with
 * clnode_solution_destroy; on failure NULL. ctx may be NULL (no message then). */
CLNODE_API clnode_status clnode_solution_tape_import(clnode_context *ctx, const clnode_model *model,
                                                     const void *buf, size_t size,
                                                     clnode_solution **out);

/* The gradient of a scalar loss L of the saved values: cot holds dL/d(saved values) in the
 * saved-points layout, batch x slots x dim doubles, row-major, trajectory b's row as
 * clnode_solution_rows_f64 lays out its saved points (slots >= clnode_solution_points of every
 * trajectory; the padding slots after a trajectory's points are not read). Each cotangent is
 * rounded to the state precision, and the reverse pass computes in the solve's precision and GEMM
 * mode (tf32: the reverse products are rounded as the forward's are).
 * ctx: the context of the reverse pass, which recomputes the forward steps from the kept states:
 * the host on its ordered GEMM (device "host", not "host:openblas"), an OpenCL device or a CUDA
 * GPU, each with the same bits; the solution may come from any device in strict GEMM mode (every
 * device computes the host's bits), a tf32 solution from the kind of device that goes back
 * through it (the host and OpenCL share their TF32 emulation; CUDA its tensor cores). model: the
 * model solved, the same object (its weights are read again). opts: NULL for the defaults.
 * On success *out holds the gradient (clnode_gradient_y0 ...). Errors (nothing in *out):
 * CLNODE_ERR_INVALID_ARGUMENT (NULL arguments, a solution that kept nothing (solve with
 * keep_tape = 1), another model, slots below a trajectory's points), CLNODE_ERR_NONFINITE_INPUT
 * (a cotangent of a saved point that is NaN or infinite, or in an fp32 solve beyond the float
 * range, which rounding would make infinite: named by trajectory, slot and component),
 * CLNODE_ERR_UNSUPPORTED ("host:openblas", a tf32 solution from the other kind of
 * device), CLNODE_ERR_NO_FP64 (an fp64 solution on a device without it), CLNODE_ERR_DEVICE_MEMORY
 * (a device too small for one block of the batch: its kept states, cotangents and scratch, named
 * in bytes with the remedy, a larger checkpoint_every), CLNODE_ERR_OUT_OF_MEMORY,
 * CLNODE_ERR_CANCELLED, a device's own failures (CLNODE_ERR_DEVICE, CLNODE_ERR_BUILD).
 * Memory besides the result: on the host per thread O(CLNODE_GRADIENT_BLOCK x (stages x (dim + the
 * layers' widths) + checkpoint_every x dim)), and O(log2(blocks) + threads) copies of the
 * parameters; on a device per trajectory of a group about stages x (2 x the layers' widths + 3 x
 * dim + the first layer's inputs) values and its part of the tape and the cotangents, per block of
 * a group a copy of the parameters, the groups sized for half the device's memory. The host keeps
 * a pass's packed weights and per-thread scratch (up to 64 MiB) in its context for the next pass,
 * which takes them over when its weights, GEMM mode and sizes are the same (a series of small
 * passes of one model packs it once); the context frees them. */
CLNODE_API clnode_status clnode_gradient_compute(clnode_context *ctx, const clnode_model *model,
                                                 const clnode_gradient_options *opts,
                                                 const clnode_solution *sol, size_t slots,
                                                 const double *cot, clnode_gradient **out);

/* Destroys a gradient and sets *g to NULL. Accepts NULL and a pointer to NULL. */
CLNODE_API void clnode_gradient_destroy(clnode_gradient **g);

/* dL/dy0: batch x dim, row-major. */
CLNODE_API const double *clnode_gradient_y0(const clnode_gradient *g);
/* dL/d(conditioning inputs): batch x clnode_model_num_inputs, row-major; NULL for a model
 * without inputs. */
CLNODE_API const double *clnode_gradient_inputs(const clnode_gradient *g);
/* dL/d(weight of layer `layer`), sizes[layer + 1] x sizes[layer] row-major as the model's weight
 * (clnode_model_desc); NULL for a layer out of range. */
CLNODE_API const double *clnode_gradient_weight(const clnode_gradient *g, size_t layer);
/* dL/d(bias of layer `layer`), sizes[layer + 1] values; NULL for a layer without a bias or out of
 * range. */
CLNODE_API const double *clnode_gradient_bias(const clnode_gradient *g, size_t layer);
/* dL/d(output scale), *n values (1 or dim, as the model's); NULL and *n = 0 without a scale. n
 * may be NULL. */
CLNODE_API const double *clnode_gradient_out_scale(const clnode_gradient *g, size_t *n);
/* Every parameter's gradient in one array of *n values: layer 0's weight then its bias (if any),
 * layer 1's ..., then the output scale (if any). n may be NULL. */
CLNODE_API const double *clnode_gradient_params(const clnode_gradient *g, size_t *n);

#ifdef __cplusplus
}
#endif

#endif /* CLNODE_GRADIENT_H */
