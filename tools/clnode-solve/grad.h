/* grad.h - clnode-solve's reverse pass: --cotangents COT.npy|COT.npz --grad-out G.npz.
 *
 * The cotangents are dL/d(saved values) in the layout of the padded ys that --out FILE.npy or
 * FILE.npz writes: (B, T, N), T the slots of --save (the requested points for t0/ts/t1, the most
 * points of any trajectory for --save steps), float32 or float64, every value finite (padding
 * slots included; theirs are not read). G.npz holds float64 arrays: y0 (B, N), args (B, k) for a
 * model with k conditioning inputs, and each parameter under the names of an equinox model file:
 * layers.<l>.weight (out, in), layers.<l>.bias (out,) for a layer with a bias, out_scale (n,)
 * for a model with an output scale, l the layer's position from 0. */
#ifndef CLNODE_SOLVE_GRAD_H
#define CLNODE_SOLVE_GRAD_H

#include <stddef.h>

#include "clnode.h"
#include "clnode/gradient.h"
#include "args.h"
#include "tool_out.h"

typedef struct solve_cot {
    double *v; /* B x T x N values */
    size_t B, T, N;
} solve_cot;

/* Reads --cotangents PATH (a .npy, or a .npz whose one member is ys) for a batch of B
 * trajectories of dimension N; T the slots expected (0: not known before the solve, checked by
 * solve_grad_check_slots); prec the solve's precision (fp32: every value must stay finite once
 * rounded to float, as the library's reverse pass checks). Returns 0, or 2 (bad input) or 3 (out
 * of memory, unreadable) after an error naming the file, the expected and the given shapes, or
 * the value and its index. */
int solve_grad_load(const char *path, size_t B, size_t N, size_t T, clnode_precision prec,
                    solve_cot *c);
void solve_grad_free(solve_cot *c);

/* The slots of the padded layout of sol's saved points (as --out writes them). */
size_t solve_grad_slots(const clnode_solution *sol, const clnode_solve_options *o,
                        const clnode_problem *p);

/* Checks the cotangents' slots against T. Returns 0, or 2 after an error naming both shapes. */
int solve_grad_check_slots(const char *path, const solve_cot *c, size_t T);

/* The reverse pass of sol (solved with keep_tape on ctx) on the same device (solve_grad_context)
 * and G written to out (opened by tool_out_open; the caller renames it over its target with the
 * other outputs: tool_out_commit_all). SIGINT and SIGTERM stop the pass after its current group
 * of blocks and end the process with the signal's status (tool_temp.h). Returns 0, or the exit
 * status after an error. */
int solve_grad_run(const char *grad_path, clnode_context *ctx, const clnode_model *model,
                   const clnode_solution *sol, const solve_cot *c, tool_out *out);

/* The context of the reverse pass: ctx itself, on whatever device it is (*own NULL), but for
 * "host:openblas", whose GEMMs are not the ordered ones the reverse pass recomputes the steps
 * with: then a new context on "host" in *rev and *own (destroy *own). Returns 0, or the exit
 * status after the logger said why. */
int solve_grad_context(clnode_context *ctx, clnode_context **rev, clnode_context **own);

/* G of a batch of `batch` trajectories written to out (opened by tool_out_open; the caller
 * renames it: tool_out_commit_all). Returns 0, or the exit status after an error naming
 * grad_path. */
int solve_grad_write(const char *grad_path, const clnode_model *model, const clnode_gradient *g,
                     size_t batch, tool_out *out);

/* The reverse pass's cancel callback (clnode_gradient_options.cancel): a signal received
 * (tool_temp_cancel). With CLNODE_SOLVE_TEST_NOTE_REVERSE set, its first call says so on standard
 * error (a test hook: the pass has gone through one group of blocks). */
int solve_grad_cancel(void *user);

#endif /* CLNODE_SOLVE_GRAD_H */
