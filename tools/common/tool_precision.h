/* tool_precision.h - the tools' side of clnode/precision.h: the sensitivity baseline, the verdicts
 * against it and the precision certificate as table text and JSON. */
#ifndef CLNODE_TOOL_PRECISION_H
#define CLNODE_TOOL_PRECISION_H

#include <stdio.h>

#include "clnode.h"

/* {"precision": "fp32", "reference_steps": [lo, hi], "steps": [lo, hi], "spread": x, "floor": x,
 *  "tolerance": x, "ill_conditioned": b, "fp64": {"steps": [lo, hi], "spread": x, "tolerance": x,
 *  "ill_conditioned": b} (when measured)} */
void tool_json_baseline(FILE *f, const clnode_sensitivity_stats *s);

/* {"verdict": "agrees"|"beyond"|"ill_conditioned", "ratio": x, "steps_beyond": b, "text": s} */
void tool_json_judgement(FILE *f, const clnode_judgement *j);

/* A short table cell: "agrees (0.87x)", "BEYOND: 11x spread (tf32-like GEMM)", "ill-conditioned
 * problem"; `gemm_class` names the GEMM probe's class when it is reduced precision (NULL: none).
 */
void tool_verdict_cell(char *out, size_t cap, const clnode_judgement *j, const char *gemm_class);

/* One line per precision: "fp32: 12-15 steps, spread 1.30e-04 (tolerance 1.00e-02)" ... */
void tool_print_baseline(FILE *f, const char *indent, const clnode_sensitivity_stats *s);

/* The certificate as a JSON object (samples included) and as summary lines. `solve_seconds`
 * is the wall time of the certified solve (the cost is reported relative to it). */
void tool_json_certificate(FILE *f, const clnode_certificate *c, const clnode_certify_options *o,
                           double solve_seconds);
void tool_print_certificate(FILE *f, const clnode_certificate *c, const clnode_certify_options *o,
                            double solve_seconds);

#endif /* CLNODE_TOOL_PRECISION_H */
