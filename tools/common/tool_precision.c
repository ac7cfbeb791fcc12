/* tool_precision.c - the sensitivity baseline and the precision certificate in the tools' table
 * and JSON outputs (see tool_precision.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tool_common.h"
#include "tool_precision.h"

static const char *jbool(int b)
{
    return b ? "true" : "false";
}

void tool_json_baseline(FILE *f, const clnode_sensitivity_stats *s)
{
    fprintf(f,
            "{\"precision\": \"%s\", \"reference_steps\": [%ld, %ld], \"steps\": [%ld, %ld], "
            "\"spread\": ",
            clnode_precision_name(s->precision), s->ref_steps_min, s->ref_steps_max, s->steps_min,
            s->steps_max);
    tool_json_num(f, s->spread);
    fprintf(f, ", \"floor\": ");
    tool_json_num(f, s->floor);
    fprintf(f, ", \"tolerance\": ");
    tool_json_num(f, s->tolerance);
    fprintf(f, ", \"ill_conditioned\": %s, \"reference_success\": %s", jbool(s->ill_conditioned),
            jbool(s->reference_success));
    if (s->has_fp64 && s->precision != CLNODE_FP64) {
        fprintf(f, ", \"fp64\": {\"steps\": [%ld, %ld], \"spread\": ", s->fp64_steps_min,
                s->fp64_steps_max);
        tool_json_num(f, s->fp64_spread);
        fprintf(f, ", \"tolerance\": ");
        tool_json_num(f, s->fp64_tolerance);
        fprintf(f, ", \"ill_conditioned\": %s}", jbool(s->fp64_ill_conditioned));
    }
    fputc('}', f);
}

void tool_json_judgement(FILE *f, const clnode_judgement *j)
{
    fprintf(f, "{\"verdict\": \"%s\", \"ratio\": ", clnode_verdict_name(j->verdict));
    tool_json_num(f, j->ratio);
    fprintf(f, ", \"steps_beyond\": %s, \"text\": ", jbool(j->steps_beyond));
    tool_json_str(f, j->text);
    fputc('}', f);
}

void tool_verdict_cell(char *out, size_t cap, const clnode_judgement *j, const char *gemm_class)
{
    switch (j->verdict) {
    case CLNODE_VERDICT_AGREES:
        snprintf(out, cap, "agrees (%.2gx)", j->ratio);
        break;
    case CLNODE_VERDICT_ILL_CONDITIONED:
        snprintf(out, cap, "problem ill-conditioned (%.2gx)", j->ratio);
        break;
    case CLNODE_VERDICT_BEYOND:
        if (isfinite(j->ratio))
            snprintf(out, cap, "BEYOND: %.3gx spread%s%s%s%s", j->ratio,
                     j->success ? "" : ", ended early", gemm_class ? " (" : "",
                     gemm_class ? gemm_class : "", gemm_class ? " GEMM)" : "");
        else
            snprintf(out, cap, "BEYOND: ended early%s%s%s", gemm_class ? " (" : "",
                     gemm_class ? gemm_class : "", gemm_class ? " GEMM)" : "");
        break;
    }
}

void tool_print_baseline(FILE *f, const char *indent, const clnode_sensitivity_stats *s)
{
    fprintf(f, "%s%s: %ld-%ld steps, spread %.2e (tolerance %.2e)%s\n", indent,
            clnode_precision_name(s->precision), s->steps_min, s->steps_max, s->spread,
            s->tolerance, s->ill_conditioned ? ": ILL-CONDITIONED" : "");
    if (s->has_fp64 && s->precision != CLNODE_FP64)
        fprintf(f, "%sfp64: %ld-%ld steps, spread %.2e (tolerance %.2e)%s\n", indent,
                s->fp64_steps_min, s->fp64_steps_max, s->fp64_spread, s->fp64_tolerance,
                s->fp64_ill_conditioned ? ": ILL-CONDITIONED" : "");
}

/* The sensitivity options of a certificate's baseline: the options' own, else the library's
 * defaults (clnode_certify_options.sensitivity NULL). */
static clnode_sensitivity_options cert_sensitivity(const clnode_certify_options *o)
{
    clnode_sensitivity_options so;
    clnode_sensitivity_default_options(&so);
    return o->sensitivity ? *o->sensitivity : so;
}

void tool_json_certificate(FILE *f, const clnode_certificate *c, const clnode_certify_options *o,
                           double solve_seconds)
{
    clnode_certificate_summary s;
    clnode_certificate_get(c, &s);
    const clnode_sensitivity_options so = cert_sensitivity(o);
    fprintf(f, "{\"certified\": %s, \"fraction\": ", jbool(s.certified));
    tool_json_num(f, o->fraction);
    fprintf(f,
            ", \"seed\": %llu, \"batch\": %zu, \"num_sampled\": %zu, \"num_failed\": %zu, "
            "\"num_ill_conditioned\": %zu, \"perturbations\": %d, \"perturbation_ulps\": ",
            (unsigned long long)o->seed, s.batch, s.num_sampled, s.num_failed,
            s.num_ill_conditioned, so.num_perturbations);
    tool_json_num(f, so.perturbation_ulps);
    fprintf(f, ", \"slack\": ");
    tool_json_num(f, so.slack);
    fprintf(f, ", \"rtol\": ");
    tool_json_num(f, s.rtol);
    fprintf(f, ", \"max_deviation_rtol\": ");
    tool_json_num(f, s.max_deviation_rtol);
    fprintf(f, ", \"worst_trajectory\": %zu, \"max_spread_rtol\": ", s.worst_traj);
    tool_json_num(f, s.max_spread_rtol);
    fprintf(f, ", \"tolerance_rtol\": ");
    tool_json_num(f, s.tolerance_rtol);
    fprintf(f, ", \"seconds\": ");
    tool_json_num(f, s.seconds);
    fprintf(f, ", \"added_fraction_of_solve\": ");
    tool_json_num(f, solve_seconds > 0 ? s.seconds / solve_seconds : NAN);
    fprintf(f, ", \"samples\": [");
    for (size_t k = 0; k < s.num_sampled; ++k) {
        clnode_certificate_sample p;
        clnode_certificate_sample_get(c, k, &p);
        fprintf(f, "%s{\"trajectory\": %zu, \"deviation_rtol\": ", k ? ", " : "", p.traj);
        tool_json_num(f, p.deviation_rtol);
        fprintf(f, ", \"spread_rtol\": ");
        tool_json_num(f, p.spread_rtol);
        fprintf(f,
                ", \"num_steps\": %ld, \"baseline_steps\": [%ld, %ld], \"complete\": %s, "
                "\"within\": %s}",
                p.steps, p.steps_min, p.steps_max, jbool(p.complete), jbool(p.within));
    }
    fprintf(f, "]}");
}

void tool_print_certificate(FILE *f, const clnode_certificate *c, const clnode_certify_options *o,
                            double solve_seconds)
{
    clnode_certificate_summary s;
    clnode_certificate_get(c, &s);
    fprintf(f,
            "certificate: %s: %zu of %zu trajectories re-solved on the host in fp64 (fraction %g, "
            "seed %llu)\n"
            "  largest deviation %.3g rtol (trajectory %zu); their own rounding spread up to "
            "%.3g rtol;\n  within: %g x spread or %g rtol",
            s.certified ? "CERTIFIED" : "NOT CERTIFIED", s.num_sampled, s.batch, o->fraction,
            (unsigned long long)o->seed, s.max_deviation_rtol, s.worst_traj, s.max_spread_rtol,
            cert_sensitivity(o).slack, s.tolerance_rtol);
    if (s.num_failed)
        fprintf(f, "; %zu beyond both", s.num_failed);
    if (s.num_ill_conditioned)
        fprintf(f, "; %zu ill-conditioned at this precision (the problem, not the device)",
                s.num_ill_conditioned);
    fprintf(f, "\n  cost: %.3f s", s.seconds);
    if (solve_seconds > 0)
        fprintf(f, " (%.1f%% of the solve's %.3f s)", 100.0 * s.seconds / solve_seconds,
                solve_seconds);
    fputc('\n', f);
}
