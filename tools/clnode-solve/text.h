/* text.h - clnode-solve's outputs trajectory by trajectory: the CSV of saved points, the JSON
 * document and the summary, written in pieces so that one process (main.c) and the ranks
 * of an MPI run (ranks.c) print the same bytes. `index` is the trajectory's index in the
 * whole batch, `b` its index in `sol`; saved points come in the library's layout
 * (clnode_solution_rows). */
#ifndef CLNODE_SOLVE_TEXT_H
#define CLNODE_SOLVE_TEXT_H

#include <stdio.h>

#include "clnode.h"
#include "tool_problem.h"

/* CSV: the header line traj,kind,t,y0,...,y{N-1},result, then each trajectory's rows (result:
 * the trajectory's result name, the same on each of its rows). Rows return 0 or 3 (out of
 * memory). */
void solve_csv_header(FILE *f, size_t dim);
int solve_csv_rows(FILE *f, const clnode_solution *sol, size_t b, size_t index,
                   const clnode_solve_options *o);

/* JSON: everything before the first trajectory, one trajectory (returns 0 or 3), and the end. */
void solve_json_head(FILE *f, const tool_problem *pb, const clnode_context *ctx,
                     const clnode_model *model, size_t batch, double wall);
int solve_json_trajectory(FILE *f, const clnode_solution *sol, size_t b, size_t index,
                          const clnode_solve_options *o, const clnode_problem *pr, int points);
void solve_json_tail(FILE *f, const clnode_certificate *cert, const clnode_certify_options *copts,
                     double wall);

/* Summary: the head lines, one trajectory's line (only for indices 0..3 and the last; "..." at
 * 4), and the totals. */
void solve_summary_head(FILE *f, const tool_problem *pb, const clnode_context *ctx,
                        const clnode_model *model, size_t batch);
void solve_summary_trajectory(FILE *f, const clnode_solution *sol, size_t b, size_t index,
                              size_t batch, clnode_precision p);
void solve_summary_tail(FILE *f, size_t ok, size_t batch, long min_steps, long max_steps,
                        double wall);

#endif /* CLNODE_SOLVE_TEXT_H */
