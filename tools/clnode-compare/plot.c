/* plot.c - clnode-compare --plot: the plot's data file (tools/clnode-compare/schema.md) and the
 * plot script run on it (compare.h). */
#define _XOPEN_SOURCE 700 /* realpath */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compare.h"

extern char **environ;

/* The relative deviation of one state from the reference's, as in kind_dev. */
static double point_dev(const compare *c, const double *y, const double *ref)
{
    double num = 0, den = 0;
    for (size_t j = 0; j < c->N; ++j) {
        const double d = fabs(y[j] - ref[j]);
        if (!(d <= num))
            num = isnan(d) ? INFINITY : d;
        den = fmax(den, fabs(ref[j]));
    }
    return num / (den + c->pb.opts.atol / c->pb.opts.rtol);
}

static void json_array(FILE *f, const double *v, size_t n, size_t stride, clnode_precision p)
{
    fputc('[', f);
    for (size_t k = 0; k < n; ++k) {
        fputs(k ? ", " : "", f);
        tool_json_num_p(f, v[k * stride], p);
    }
    fputc(']', f);
}

/* The plot's data file (tools/clnode-compare/schema.md, "The plot's data file"). */
static void write_plot_json(const compare *c, FILE *f)
{
    const clnode_solve_options *o = &c->pb.opts;
    char title[768];
    snprintf(title, sizeof title, "%s, %s, rtol %g, atol %g, trajectory 0", c->model_desc,
             o->method->name, o->rtol, o->atol);
    fprintf(f, "{\"format_version\": %d, \"title\": ", TOOL_JSON_FORMAT_VERSION);
    tool_json_str(f, title);
    fprintf(f, ", \"dim\": %zu, \"t0\": ", c->N);
    tool_json_num(f, o->t0);
    fprintf(f, ", \"t1\": ");
    tool_json_num(f, o->t1);
    fprintf(f, ", \"batches\": [");
    for (size_t b = 0; b < c->nb; ++b)
        fprintf(f, "%s%zu", b ? ", " : "", c->batches[b] * c->R);
    clnode_trajectory_stats rs;
    clnode_solution_stats(c->ref, 0, &rs);
    fprintf(f, "], \"reference\": {\"label\": \"host fp64 strict\", \"num_steps\": %ld}",
            rs.num_steps);
    fprintf(f, ", \"rows\": [");
    size_t nref = 0;
    const double *tref, *yref;
    clnode_solution_saved(c->ref_dense, 0, CLNODE_SAVE_TS, &nref, &tref, &yref);
    for (size_t i = 0; i < c->nrows; ++i) {
        const row *r = &c->rows[i];
        char label[192];
        snprintf(label, sizeof label, "%s %s %s", r->spec, clnode_precision_name(r->prec),
                 clnode_gemm_mode_name(r->mode));
        fprintf(f, "%s\n {\"label\": ", i ? "," : "");
        tool_json_str(f, label);
        fprintf(f, ", \"device\": ");
        tool_json_str(f, r->spec);
        fprintf(f, ", \"precision\": \"%s\", \"gemm_precision\": \"%s\", \"probe_class\": ",
                clnode_precision_name(r->prec), clnode_gemm_mode_name(r->mode));
        tool_json_str(f, compare_probe_class(r));
        fprintf(f, ", \"verdict\": ");
        tool_json_str(f, r->verdict);
        fprintf(f, ", \"fails\": %s, \"is_reference\": %s, \"tolerance\": ",
                r->fails ? "true" : "false", r->is_reference ? "true" : "false");
        tool_json_num(f, compare_row_tolerance(c, r->prec));
        fprintf(f, ", \"spread\": "); /* the problem's own, at the row's precision */
        clnode_sensitivity_stats bs;
        if (c->base[r->prec == CLNODE_FP64] &&
            clnode_sensitivity_get(c->base[r->prec == CLNODE_FP64], CLNODE_SENSITIVITY_ALL, &bs) ==
                CLNODE_OK)
            tool_json_num(f, fmax(bs.spread, bs.floor));
        else
            fputs("null", f);
        fprintf(f, ", \"max_rel_dev\": ");
        tool_json_num(f, r->max_dev);
        fprintf(f, ", \"steps_per_batch\": [");
        for (size_t b = 0; b < c->nb; ++b) {
            if (r->status[b] == CLNODE_OK)
                fprintf(f, "%s%ld", b ? ", " : "", r->steps_max[b]);
            else
                fprintf(f, "%snull", b ? ", " : "");
        }
        fputc(']', f);
        if (r->plot_sol) {
            size_t n = 0;
            const double *ts, *ys;
            clnode_solution_saved(r->plot_sol, 0, CLNODE_SAVE_TS, &n, &ts, &ys);
            if (n > nref)
                n = nref;
            fprintf(f, ", \"dev_t\": ");
            json_array(f, tref, n, 1, CLNODE_FP64);
            fprintf(f, ", \"rel_dev\": [");
            for (size_t k = 0; k < n; ++k) {
                fputs(k ? ", " : "", f);
                tool_json_num(f, point_dev(c, ys + k * c->N, yref + k * c->N));
            }
            clnode_solution_saved(r->plot_sol, 0, CLNODE_SAVE_STEPS, &n, &ts, &ys);
            fprintf(f, "], \"step_t\": ");
            json_array(f, ts, n, 1, r->prec);
            fprintf(f, ", \"step_dt\": [");
            for (size_t k = 0; k < n; ++k) {
                fputs(k ? ", " : "", f);
                tool_json_num_p(f, fabs(ts[k] - (k ? ts[k - 1] : o->t0)), r->prec);
            }
            fputc(']', f);
        }
        fputc('}', f);
    }
    fprintf(f, "\n]}\n");
}

/* Runs python3 with the arguments; returns its exit status (127: not run). */
static int run_python(char *const args[])
{
    pid_t pid;
    const int err = posix_spawnp(&pid, "python3", NULL, NULL, args, environ);
    if (err != 0) {
        tool_error("cannot run python3: %s", strerror(err));
        return 127;
    }
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0)
        if (errno != EINTR)
            return 127;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 127;
}

/* The plot script: $CLNODE_PLOT_SCRIPT if set; the source tree's when this executable runs from
 * its build directory; else the installed one, found from the executable's prefix
 * (PREFIX/BINDIR/clnode-compare -> PREFIX/DATADIR/clnode/plot_compare.py, or PREFIX/clnode/
 * plot_compare.py where a wheel put it: meson-python installs DATADIR at the environment's root),
 * else the configured install path. */
const char *compare_plot_script(void)
{
    static char path[PATH_MAX + 64];
    const char *env = getenv("CLNODE_PLOT_SCRIPT");
    if (env && env[0])
        return env;
    char exe[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0'; /* exe: the executable's directory */
            char build[PATH_MAX];
            if (realpath(CLN_BUILD_DIR, build) && strcmp(build, exe) == 0)
                return CLN_SOURCE_PLOT_SCRIPT;
            const size_t el = strlen(exe), bl = strlen(CLN_BINDIR);
            if (CLN_DATADIR[0] != '/' && CLN_BINDIR[0] != '/' && el > bl &&
                exe[el - bl - 1] == '/' && strcmp(exe + el - bl, CLN_BINDIR) == 0) {
                snprintf(path, sizeof path, "%.*s%s/clnode/plot_compare.py", (int)(el - bl), exe,
                         CLN_DATADIR);
                if (access(path, F_OK) != 0)
                    snprintf(path, sizeof path, "%.*sclnode/plot_compare.py", (int)(el - bl), exe);
                return path;
            }
        }
    }
    return CLN_INSTALLED_PLOT_SCRIPT;
}

int compare_plot_check(void)
{
    char *args[] = {"python3", (char *)compare_plot_script(), "--check", NULL};
    const int rc = run_python(args);
    if (rc == 0)
        return 0;
    if (rc != 2)
        tool_error("cannot run %s (status %d); --plot needs python3 with matplotlib: "
                   "python3 -m pip install matplotlib",
                   compare_plot_script(), rc);
    return TOOL_EXIT_INPUT;
}

/* Refuses a --plot FILE (or its data file FILE.json) that is the same file as an input.
 * Returns 0, 2 or 3. */
int compare_check_outputs(const compare *c)
{
    if (!c->plot)
        return 0;
    const tool_input in[] = {{"--model", c->pb.model_path}, {"--y0-file", c->pb.y0_file}};
    const size_t len = strlen(c->plot) + 6;
    char *json_path = malloc(len);
    if (!json_path) {
        tool_error("out of memory");
        return TOOL_EXIT_RESOURCE;
    }
    snprintf(json_path, len, "%s.json", c->plot);
    int rc = tool_out_check_inputs("--plot", c->plot, in, 2);
    if (!rc)
        rc = tool_out_check_inputs("--plot (its data file)", json_path, in, 2);
    free(json_path);
    return rc;
}

int compare_make_plot(const compare *c)
{
    const size_t len = strlen(c->plot) + 6;
    char *json_path = malloc(len);
    if (!json_path) {
        tool_error("out of memory");
        return TOOL_EXIT_RESOURCE;
    }
    snprintf(json_path, len, "%s.json", c->plot);
    tool_out out;
    int rc = tool_out_open(&out, json_path);
    if (!rc) {
        write_plot_json(c, out.f);
        rc = tool_out_commit(&out);
    }
    if (!rc) {
        char *args[] = {"python3", (char *)compare_plot_script(), json_path, (char *)c->plot, NULL};
        const int prc = run_python(args);
        if (prc != 0) {
            tool_error("plotting failed (status %d)", prc);
            rc = TOOL_EXIT_RESOURCE;
        } else {
            fprintf(stderr, "%s: plot written to %s (data: %s)\n", COMPARE_PROG, c->plot,
                    json_path);
        }
    }
    free(json_path);
    return rc;
}
