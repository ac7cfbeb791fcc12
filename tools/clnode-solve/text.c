/* text.c - clnode-solve's outputs trajectory by trajectory (text.h). */
#include "text.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tool_precision.h"

void solve_csv_header(FILE *f, size_t dim)
{
    fputs("traj,kind,t", f);
    for (size_t j = 0; j < dim; ++j)
        fprintf(f, ",y%zu", j);
    fputs(",result\n", f);
}

/* Trajectory b's saved points in the library's layout (clnode_solution_rows_f64,
 * clnode_solution_kinds): n points, times t, states y (n x N), kinds. */
typedef struct text_points {
    size_t n;
    double *t, *y;
    clnode_save_kind *kind;
} text_points;

static void text_points_free(text_points *p)
{
    free(p->t);
    free(p->y);
    free(p->kind);
}

/* Returns 0, or TOOL_EXIT_RESOURCE after printing an error. */
static int text_points_get(const clnode_solution *sol, size_t b, text_points *p)
{
    const size_t N = clnode_solution_dim(sol);
    p->n = clnode_solution_points(sol, b);
    const size_t n = p->n ? p->n : 1;
    size_t ny;
    p->t = malloc(n * sizeof *p->t);
    p->y = tool_mul_size(n, N ? N : 1, &ny) ? malloc(ny * sizeof *p->y) : NULL;
    p->kind = malloc(n * sizeof *p->kind);
    if (!p->t || !p->y || !p->kind || clnode_solution_rows_f64(sol, b, 1, p->n, p->t, p->y) ||
        clnode_solution_kinds(sol, b, p->n, p->kind)) {
        text_points_free(p);
        tool_error("out of memory");
        return TOOL_EXIT_RESOURCE;
    }
    return 0;
}

int solve_csv_rows(FILE *f, const clnode_solution *sol, size_t b, size_t index,
                   const clnode_solve_options *o)
{
    const size_t N = clnode_solution_dim(sol);
    char buf[32];
    text_points p;
    if (text_points_get(sol, b, &p))
        return TOOL_EXIT_RESOURCE;
    clnode_trajectory_stats s;
    clnode_solution_stats(sol, b, &s);
    const char *result = clnode_result_name(s.result);
    for (size_t k = 0; k < p.n; ++k) {
        fprintf(f, "%zu,%s,%s", index, tool_kind_name(p.kind[k]),
                tool_fmt_num(buf, p.t[k], o->precision));
        for (size_t j = 0; j < N; ++j)
            fprintf(f, ",%s", tool_fmt_num(buf, p.y[k * N + j], o->precision));
        fprintf(f, ",%s\n", result);
    }
    text_points_free(&p);
    return 0;
}

void solve_json_head(FILE *f, const tool_problem *pb, const clnode_context *ctx,
                     const clnode_model *model, size_t batch, double wall)
{
    const clnode_solve_options *o = &pb->opts;
    const clnode_precision p = o->precision;
    const size_t N = clnode_model_dim(model);
    fprintf(f, "{\"format_version\": %d, \"clnode_version\": ", TOOL_JSON_FORMAT_VERSION);
    tool_json_str(f, clnode_version_string());
    fputs(", \"backend\": ", f);
    tool_json_str(f, clnode_context_backend(ctx));
    fputs(", \"device\": ", f);
    tool_json_str(f, clnode_context_device(ctx));
    fputs(", \"model\": ", f);
    tool_json_str(f, pb->model_path ? pb->model_path : "seed");
    fputs(", \"settings_from_model\": ", f); /* the options the model file set, or null */
    if (pb->settings_from) {
        fputc('[', f);
        const char *k = pb->settings_keys;
        for (int first = 1; *k; first = 0) {
            const size_t n = strcspn(k, " ");
            fprintf(f, "%s\"%.*s\"", first ? "" : ", ", (int)n, k);
            k += n + (k[n] == ' ');
        }
        fputc(']', f);
    } else {
        fputs("null", f);
    }
    fprintf(f, ", \"precision\": \"%s\", \"gemm_precision\": \"%s\", \"method\": \"%s\"",
            clnode_precision_name(p), clnode_gemm_mode_name(o->gemm_precision), o->method->name);
    fprintf(f, ", \"controller\": \"%s\"", o->constant_step ? "constant" : "pid");
    fputs(", \"rtol\": ", f);
    tool_json_num(f, o->rtol);
    fputs(", \"atol\": ", f);
    tool_json_num(f, o->atol);
    /* per-trajectory arrays: null here, each trajectory's value in its entry */
    fputs(", \"t0\": ", f);
    tool_json_num(f, pb->prob.t0s ? NAN : o->t0);
    fputs(", \"t1\": ", f);
    tool_json_num(f, pb->prob.t1s ? NAN : o->t1);
    fputs(", \"dt0\": ", f);
    tool_json_num(f, pb->prob.dt0s ? NAN : o->dt0);
    fprintf(f, ", \"dt0_auto\": %s", o->dt0_auto ? "true" : "false");
    fprintf(f,
            ", \"max_steps\": %ld, \"batch\": %zu, \"dim\": %zu, \"wall_seconds\": ", o->max_steps,
            batch, N);
    tool_json_num(f, wall);
    fputs(", \"trajectories\": [", f);
}

int solve_json_trajectory(FILE *f, const clnode_solution *sol, size_t b, size_t index,
                          const clnode_solve_options *o, const clnode_problem *pr, int points)
{
    const clnode_precision p = o->precision;
    const size_t N = clnode_solution_dim(sol);
    clnode_trajectory_stats s;
    clnode_solution_stats(sol, b, &s);
    fprintf(f,
            "%s\n  {\"result\": \"%s\", \"num_steps\": %ld, \"num_accepted\": %ld, "
            "\"num_rejected\": %ld, \"num_rhs_evals\": %ld, \"first_step\": ",
            index ? "," : "", clnode_result_name(s.result), s.num_steps, s.num_accepted,
            s.num_rejected, s.num_rhs_evals);
    tool_json_num_p(f, s.first_step, p);
    fputs(", \"t_final\": ", f);
    tool_json_num_p(f, s.t_final, p);
    const double *per[3] = {pr->t0s, pr->t1s, pr->dt0s};
    static const char *const per_name[3] = {"t0", "t1", "dt0"};
    for (int k = 0; k < 3; ++k)
        if (per[k]) {
            fprintf(f, ", \"%s\": ", per_name[k]);
            tool_json_num(f, per[k][index]);
        }
    fputs(", \"y_final\": [", f);
    const double *y = clnode_solution_y_final(sol, b);
    for (size_t j = 0; j < N; ++j) {
        fputs(j ? ", " : "", f);
        tool_json_num_p(f, y[j], p);
    }
    fputc(']', f);
    if (points) {
        text_points pt;
        if (text_points_get(sol, b, &pt))
            return TOOL_EXIT_RESOURCE;
        fputs(", \"points\": {\"kind\": [", f);
        for (size_t k = 0; k < pt.n; ++k)
            fprintf(f, "%s\"%s\"", k ? ", " : "", tool_kind_name(pt.kind[k]));
        fputs("], \"t\": [", f);
        for (size_t k = 0; k < pt.n; ++k) {
            fputs(k ? ", " : "", f);
            tool_json_num_p(f, pt.t[k], p);
        }
        fputs("], \"y\": [", f);
        for (size_t k = 0; k < pt.n; ++k) {
            fputs(k ? ", [" : "[", f);
            for (size_t j = 0; j < N; ++j) {
                fputs(j ? ", " : "", f);
                tool_json_num_p(f, pt.y[k * N + j], p);
            }
            fputc(']', f);
        }
        fputs("]}", f);
        text_points_free(&pt);
    }
    fputc('}', f);
    return 0;
}

void solve_json_tail(FILE *f, const clnode_certificate *cert, const clnode_certify_options *copts,
                     double wall)
{
    fputs("\n]", f);
    if (cert) {
        fputs(", \"certificate\": ", f);
        tool_json_certificate(f, cert, copts, wall);
    }
    fputs("}\n", f);
}

void solve_summary_head(FILE *f, const tool_problem *pb, const clnode_context *ctx,
                        const clnode_model *model, size_t batch)
{
    const clnode_solve_options *o = &pb->opts;
    const size_t N = clnode_model_dim(model);
    fprintf(f, "clnode %s on %s: %s\n", clnode_version_string(), clnode_context_backend(ctx),
            clnode_context_device(ctx));
    fprintf(f, "model    %s (%zu layers, dim %zu, %s)\n",
            pb->model_path ? pb->model_path : "built-in seed", clnode_model_num_layers(model), N,
            clnode_activation_name(clnode_model_activation(model)));
    if (pb->settings_from)
        fprintf(f, "settings from %s: %s (the rest: the command line's, else the library's)\n",
                pb->settings_from, pb->settings_keys[0] ? pb->settings_keys : "none");
    if (o->constant_step)
        fprintf(f, "method   %s, constant steps of %g, %s\n", o->method->name, o->dt0,
                clnode_precision_name(o->precision));
    else
        fprintf(f, "method   %s, PID rtol %g atol %g, %s, GEMM %s\n", o->method->name, o->rtol,
                o->atol, clnode_precision_name(o->precision), clnode_gemm_mode_name(o->gemm_precision));
    const clnode_problem *pr = &pb->prob;
    const int per = pr->t0s || pr->t1s || pr->dt0s;
    char dt0[48] = "auto"; /* --dt0 auto: each trajectory's line says its first step */
    if (!o->dt0_auto)
        snprintf(dt0, sizeof dt0, "%g%s", pr->dt0s ? pr->dt0s[0] : o->dt0,
                 per ? " of trajectory 0" : "");
    if (per)
        fprintf(f, "interval [%g, %g], dt0 %s (per trajectory:%s%s%s), batch %zu\n",
                pr->t0s ? pr->t0s[0] : o->t0, pr->t1s ? pr->t1s[0] : o->t1, dt0,
                pr->t0s ? " t0" : "", pr->t1s ? " t1" : "", pr->dt0s ? " dt0" : "", batch);
    else
        fprintf(f, "interval [%g, %g], dt0 %s, batch %zu\n", o->t0, o->t1, dt0, batch);
}

void solve_summary_trajectory(FILE *f, const clnode_solution *sol, size_t b, size_t index,
                              size_t batch, clnode_precision p)
{
    char b0[32], b1[32], b2[32];
    if (index < 4 || index + 1 == batch) {
        clnode_trajectory_stats s;
        clnode_solution_stats(sol, b, &s);
        fprintf(f,
                "  traj %zu: %s, %ld steps (%ld accepted, %ld rejected), %ld RHS evals, "
                "first step %s, t = %s, y[0] = %s\n",
                index, clnode_result_name(s.result), s.num_steps, s.num_accepted, s.num_rejected,
                s.num_rhs_evals, tool_fmt_num(b0, s.first_step, p), tool_fmt_num(b1, s.t_final, p),
                tool_fmt_num(b2, clnode_solution_y_final(sol, b)[0], p));
    } else if (index == 4) {
        fprintf(f, "  ...\n");
    }
}

void solve_summary_tail(FILE *f, size_t ok, size_t batch, long min_steps, long max_steps,
                        double wall)
{
    fprintf(f, "%zu/%zu trajectories succeeded; steps per trajectory %ld..%ld; %.3f s\n", ok, batch,
            min_steps, max_steps, wall);
}
