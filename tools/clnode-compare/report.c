/* report.c - clnode-compare's report on standard output: the table, or the JSON document
 * (tools/clnode-compare/schema.md) (compare.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compare.h"
#include "tool_precision.h"
#include "tool_table.h"

static void fmt_steps(char *out, size_t cap, const row *r, size_t b)
{
    if (r->status[b] != CLNODE_OK)
        snprintf(out, cap, "error");
    else if (r->steps_min[b] == r->steps_max[b])
        snprintf(out, cap, "%ld", r->steps_min[b]);
    else
        snprintf(out, cap, "%ld-%ld", r->steps_min[b], r->steps_max[b]);
}
static void print_header(const compare *c)
{
    const clnode_solve_options *o = &c->pb.opts;
    printf("problem: %s, %s, rtol %g, atol %g, t in [%g, %g], dt0 %g; batch sizes", c->model_desc,
           o->method->name, o->rtol, o->atol, o->t0, o->t1, o->dt0);
    for (size_t b = 0; b < c->nb; ++b)
        printf("%s %zu", b ? "," : "", c->batches[b] * c->R);
    clnode_trajectory_stats rs;
    clnode_solution_stats(c->ref, 0, &rs);
    printf("\nreference: host fp64 strict, %s: %ld steps (%ld accepted)\n", c->ref_device,
           rs.num_steps, rs.num_accepted);
    printf("compared: the saved values at %zu times in [%g, %g] and at t1; deviation = max_j "
           "|y_j - ref_j| / (max_j |ref_j| + atol/rtol),\n  the largest over times and "
           "trajectories\n",
           c->n_ts, o->t0, o->t1);
    if (c->tolerance > 0)
        printf("tolerance: %.3g (--tolerance)\n", c->tolerance);
    else
        printf("tolerance: %.3g for fp32, %.3g for fp64 (100 x max(rtol, 16 u): two correct "
               "solves differ by their\n  global errors, O(rtol) per unit of growth; 100 leaves "
               "room for different step sequences, not for wrong arithmetic)\n",
               compare_row_tolerance(c, CLNODE_FP32), compare_row_tolerance(c, CLNODE_FP64));
    if (c->base[0] || c->base[1]) {
        printf("sensitivity baseline: host, %d solves per precision with y0 perturbed by %g u "
               "max(|y0|, atol/rtol)\n  (random signs, seed %llu), and the unperturbed one; "
               "spread = their largest deviation from the reference\n",
               c->sopts.num_perturbations, c->sopts.perturbation_ulps,
               (unsigned long long)c->sopts.seed);
        for (int pi = 0; pi < 2; ++pi) {
            clnode_sensitivity_stats s;
            if (!c->base[pi] ||
                clnode_sensitivity_get(c->base[pi], CLNODE_SENSITIVITY_ALL, &s) != CLNODE_OK)
                continue;
            s.has_fp64 = 0; /* each precision on its own line */
            tool_print_baseline(stdout, "  ", &s);
            if (s.ill_conditioned) {
                clnode_judgement j;
                clnode_sensitivity_judge(c->base[pi], CLNODE_SENSITIVITY_ALL, 0, s.steps_min,
                                         s.steps_max, 1, &j);
                printf("  => %s\n", j.text);
            }
        }
    }
}

void compare_print_table(const compare *c)
{
    print_header(c);
    tool_table t;
    const size_t fixed = 4, ncols = fixed + c->nb + 5;
    tool_table_init(&t, ncols);
    size_t r0 = tool_table_row(&t);
    const char *h[] = {"device", "precision", "GEMM", "probe class"};
    for (size_t k = 0; k < fixed; ++k)
        tool_table_set(&t, r0, k, "%s", h[k]);
    for (size_t b = 0; b < c->nb; ++b)
        tool_table_set(&t, r0, fixed + b, "steps B=%zu", c->batches[b] * c->R);
    tool_table_set(&t, r0, fixed + c->nb, "batch-inv");
    tool_table_set(&t, r0, fixed + c->nb + 1, "results");
    tool_table_set(&t, r0, fixed + c->nb + 2, "max rel dev");
    tool_table_set(&t, r0, fixed + c->nb + 3, "vs rounding baseline");
    tool_table_set(&t, r0, fixed + c->nb + 4, "verdict");
    for (size_t i = 0; i < c->nrows; ++i) {
        const row *r = &c->rows[i];
        size_t k = tool_table_row(&t);
        tool_table_set(&t, k, 0, "%s", r->spec);
        tool_table_set(&t, k, 1, "%s", clnode_precision_name(r->prec));
        tool_table_set(&t, k, 2, "%s", clnode_gemm_mode_name(r->mode));
        tool_table_set(&t, k, 3, "%s", compare_probe_class(r));
        for (size_t b = 0; b < c->nb; ++b) {
            char s[64];
            fmt_steps(s, sizeof s, r, b);
            tool_table_set(&t, k, fixed + b, "%s", s);
        }
        tool_table_set(&t, k, fixed + c->nb, "%s", r->batch_invariant ? "yes" : "no");
        tool_table_set(&t, k, fixed + c->nb + 1, "%s", r->results[0] ? r->results : "-");
        if (r->status[0] == CLNODE_OK && isinf(r->max_dev) && !r->all_success)
            tool_table_set(&t, k, fixed + c->nb + 2, "ended early");
        else if (r->status[0] == CLNODE_OK)
            tool_table_set(&t, k, fixed + c->nb + 2, "%.2e", r->max_dev);
        else
            tool_table_set(&t, k, fixed + c->nb + 2, "-");
        char cell[160] = "-";
        if (r->judged) {
            const clnode_gemm_class gc =
                r->probe_status == CLNODE_OK ? r->probe.gemm_class : CLNODE_GEMM_CLASS_UNKNOWN;
            const int reduced = gc != CLNODE_GEMM_CLASS_FP32 && gc != CLNODE_GEMM_CLASS_FP64 &&
                                gc != CLNODE_GEMM_CLASS_UNKNOWN;
            tool_verdict_cell(cell, sizeof cell, &r->sj, reduced ? compare_probe_class(r) : NULL);
        }
        tool_table_set(&t, k, fixed + c->nb + 3, "%s", cell);
        tool_table_set(&t, k, fixed + c->nb + 4, "%s", r->verdict);
    }
    printf("\n");
    tool_table_print(stdout, &t, "");
    tool_table_free(&t);
    if (c->skipped[0])
        printf("\nnot run:\n%s", c->skipped);
    printf("\nverdicts: a row DISAGREES (strict: exit status 4) when a solve fails, a trajectory "
           "does not succeed,\n  it takes more than twice the reference's steps (inflated), or "
           "its deviation exceeds the tolerance;\n  tf32 rows are expected to differ and never "
           "fail the run. Otherwise: \"bit-identical to host\" when\n  steps and saved values "
           "equal the host row of the same precision and mode bit for bit, \"agrees\" when\n  "
           "the deviation is within a tenth of the tolerance, \"differs within tolerance\" up to "
           "the tolerance.\n");
    if (c->base[0] || c->base[1])
        printf("vs rounding baseline: the row's deviation in units of the problem's own spread "
               "under rounding-size\n  perturbations of y0 (agrees up to %gx; BEYOND: the "
               "device's arithmetic changes the solution,\n  naming the GEMM probe's class when it "
               "is reduced precision); a strict row within the baseline is not\n  failed (unless "
               "--tolerance is given): "
               "\"problem ill-conditioned\" when the problem's own spread exceeds the "
               "tolerance.\n",
               c->sopts.slack);
}

static void json_row(const compare *c, const row *r, int first)
{
    printf("%s\n  {\"device\": ", first ? "" : ",");
    tool_json_str(stdout, r->spec);
    printf(", \"device_name\": ");
    tool_json_str(stdout, r->device_name);
    printf(", \"precision\": \"%s\", \"gemm_precision\": \"%s\", \"probe_class\": \"%s\"",
           clnode_precision_name(r->prec), clnode_gemm_mode_name(r->mode), compare_probe_class(r));
    if (r->probe_status == CLNODE_OK) {
        printf(", \"probe\": {\"identity_exact\": %s, \"outer_exact\": %s, \"random_bits\": ",
               r->probe.identity_exact ? "true" : "false", r->probe.outer_exact ? "true" : "false");
        tool_json_num(stdout, r->probe.random_bits);
        printf(", \"unit_roundoff\": ");
        tool_json_num(stdout, r->probe.unit_roundoff);
        printf("}");
    }
    printf(", \"runs\": [");
    for (size_t b = 0; b < c->nb; ++b) {
        printf("%s{\"batch\": %zu", b ? ", " : "", c->batches[b] * c->R);
        if (r->status[b] != CLNODE_OK) {
            printf(", \"error\": ");
            tool_json_str(stdout, r->error[b]);
            printf("}");
            continue;
        }
        printf(", \"num_steps\": [");
        const size_t B = clnode_solution_batch(r->sol[b]);
        for (size_t i = 0; i < B; ++i) {
            clnode_trajectory_stats st;
            clnode_solution_stats(r->sol[b], i, &st);
            printf("%s%ld", i ? ", " : "", st.num_steps);
        }
        printf("], \"results\": [");
        for (size_t i = 0; i < B; ++i) {
            clnode_trajectory_stats st;
            clnode_solution_stats(r->sol[b], i, &st);
            printf("%s\"%s\"", i ? ", " : "", clnode_result_name(st.result));
        }
        printf("]}");
    }
    printf("], \"batch_invariant\": %s, \"max_rel_dev\": ", r->batch_invariant ? "true" : "false");
    tool_json_num(stdout, r->max_dev);
    printf(", \"tolerance\": ");
    tool_json_num(stdout, compare_row_tolerance(c, r->prec));
    printf(", \"bit_identical_to_host\": %s, \"verdict\": ", r->bit_identical < 0 ? "null"
                                                             : r->bit_identical   ? "true"
                                                                                  : "false");
    tool_json_str(stdout, r->verdict);
    printf(", \"sensitivity\": ");
    if (r->judged) {
        printf("{\"deviation\": ");
        tool_json_num(stdout, r->base_dev);
        printf(", \"certified\": %s, \"judgement\": ", r->certified ? "true" : "false");
        tool_json_judgement(stdout, &r->sj);
        printf("}");
    } else {
        printf("null");
    }
    printf(", \"fails\": %s, \"messages\": [", r->fails ? "true" : "false");
    for (size_t i = 0; i < r->nlog; ++i) {
        printf("%s{\"level\": \"%s\", \"text\": ", i ? ", " : "",
               r->log[i].level == CLNODE_LOG_ERROR ? "error" : "warning");
        tool_json_str(stdout, r->log[i].text);
        printf(", \"count\": %ld}", r->log[i].count);
    }
    printf("]}");
}

void compare_print_json(const compare *c, int rc)
{
    const clnode_solve_options *o = &c->pb.opts;
    printf("{\"format_version\": %d, \"clnode_version\": ", TOOL_JSON_FORMAT_VERSION);
    tool_json_str(stdout, clnode_version_string());
    printf(", \"model\": ");
    tool_json_str(stdout, c->model_desc);
    printf(", \"method\": \"%s\", \"rtol\": ", o->method->name);
    tool_json_num(stdout, o->rtol);
    printf(", \"atol\": ");
    tool_json_num(stdout, o->atol);
    printf(", \"t0\": ");
    tool_json_num(stdout, o->t0);
    printf(", \"t1\": ");
    tool_json_num(stdout, o->t1);
    printf(", \"batches\": [");
    for (size_t b = 0; b < c->nb; ++b)
        printf("%s%zu", b ? ", " : "", c->batches[b] * c->R);
    printf("], \"saved_times\": [");
    for (size_t k = 0; k < c->n_ts; ++k) {
        printf("%s", k ? ", " : "");
        tool_json_num(stdout, c->ts[k]);
    }
    printf("], \"reference\": {\"device\": \"host\", \"device_name\": ");
    tool_json_str(stdout, c->ref_device);
    printf(", \"precision\": \"fp64\", \"gemm_precision\": \"strict\", \"num_steps\": [");
    for (size_t i = 0; i < c->R; ++i) {
        clnode_trajectory_stats st;
        clnode_solution_stats(c->ref, i, &st);
        printf("%s%ld", i ? ", " : "", st.num_steps);
    }
    printf("]}, \"tolerance\": {\"fp32\": ");
    tool_json_num(stdout, compare_row_tolerance(c, CLNODE_FP32));
    printf(", \"fp64\": ");
    tool_json_num(stdout, compare_row_tolerance(c, CLNODE_FP64));
    printf(", \"rule\": \"%s\"}, \"sensitivity\": ",
           c->tolerance > 0 ? "--tolerance" : "100 * max(rtol, 16 u)");
    if (c->base[0] || c->base[1]) {
        printf("{\"perturbations\": %d, \"perturbation_ulps\": ", c->sopts.num_perturbations);
        tool_json_num(stdout, c->sopts.perturbation_ulps);
        printf(", \"seed\": %llu, \"slack\": ", (unsigned long long)c->sopts.seed);
        tool_json_num(stdout, c->sopts.slack);
        for (int pi = 0; pi < 2; ++pi) {
            clnode_sensitivity_stats s;
            if (!c->base[pi] ||
                clnode_sensitivity_get(c->base[pi], CLNODE_SENSITIVITY_ALL, &s) != CLNODE_OK)
                continue;
            printf(", \"%s\": ", pi ? "fp64" : "fp32");
            tool_json_baseline(stdout, &s);
        }
        printf("}");
    } else {
        printf("null");
    }
    printf(", \"rows\": [");
    for (size_t i = 0; i < c->nrows; ++i)
        json_row(c, &c->rows[i], i == 0);
    printf("\n], \"not_run\": ");
    tool_json_str(stdout, c->skipped);
    printf(", \"exit_status\": %d}\n", rc);
}
