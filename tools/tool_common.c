/* tool_common.c - option parsing, loading and output shared by the command-line tools. */
#include "tool_common.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double tool_now(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void tool_log(void *user, clnode_log_level level, const char *msg)
{
    const char *prog = user ? (const char *)user : "clnode";
    fprintf(stderr, "%s: %s: %s\n", prog, level == CLNODE_LOG_ERROR ? "error" : "warning", msg);
}

void tool_problem_defaults(tool_problem *pb)
{
    memset(pb, 0, sizeof *pb);
    clnode_solve_seed_options(&pb->opts);
}

void tool_problem_free(tool_problem *pb)
{
    free(pb->y0);
    free(pb->ts);
    pb->y0 = NULL;
    pb->ts = NULL;
}

const char *tool_need(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "%s: option %s needs a value\n", argv[0], argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

static int parse_double(const char *prog, const char *opt, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v)) {
        fprintf(stderr, "%s: %s expects a finite number, not \"%s\"\n", prog, opt, s);
        return 2;
    }
    *out = v;
    return 0;
}

static int parse_long(const char *prog, const char *opt, const char *s, long lo, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE || v < lo) {
        fprintf(stderr, "%s: %s expects an integer >= %ld, not \"%s\"\n", prog, opt, lo, s);
        return 2;
    }
    *out = v;
    return 0;
}

/* Parses "v1,v2,..." into a new array. */
static int parse_list(const char *prog, const char *opt, const char *s, double **out, size_t *n)
{
    size_t cap = 1;
    for (const char *p = s; *p; ++p)
        cap += *p == ',';
    double *v = malloc(cap * sizeof(double));
    char *copy = strdup(s);
    if (!v || !copy) {
        free(v);
        free(copy);
        fprintf(stderr, "%s: out of memory\n", prog);
        return 2;
    }
    size_t k = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (parse_double(prog, opt, tok, &v[k]) != 0) {
            free(v);
            free(copy);
            return 2;
        }
        ++k;
    }
    free(copy);
    if (k == 0) {
        free(v);
        fprintf(stderr, "%s: %s expects a comma-separated list of numbers\n", prog, opt);
        return 2;
    }
    free(*out);
    *out = v;
    *n = k;
    return 0;
}

void tool_print_methods(FILE *f)
{
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    for (size_t i = 0; clnode_method_at(i); ++i)
        fprintf(f, "%s%s%s", i ? ", " : "", clnode_method_at(i)->name,
                clnode_method_at(i) == o.method ? " (default)" : "");
}

int tool_problem_arg(tool_problem *pb, int argc, char **argv, int *i, int *used)
{
    const char *a = argv[*i];
    const char *prog = argv[0];
    clnode_solve_options *o = &pb->opts;
    static const struct {
        const char *name;
        size_t offset;
    } dbl[] = {
        {"--rtol", offsetof(clnode_solve_options, rtol)},
        {"--atol", offsetof(clnode_solve_options, atol)},
        {"--pcoeff", offsetof(clnode_solve_options, pcoeff)},
        {"--icoeff", offsetof(clnode_solve_options, icoeff)},
        {"--dcoeff", offsetof(clnode_solve_options, dcoeff)},
        {"--dtmin", offsetof(clnode_solve_options, dtmin)},
        {"--dtmax", offsetof(clnode_solve_options, dtmax)},
        {"--factormin", offsetof(clnode_solve_options, factormin)},
        {"--factormax", offsetof(clnode_solve_options, factormax)},
        {"--safety", offsetof(clnode_solve_options, safety)},
        {"--t0", offsetof(clnode_solve_options, t0)},
        {"--t1", offsetof(clnode_solve_options, t1)},
        {"--dt0", offsetof(clnode_solve_options, dt0)},
    };
    *used = 1;
    for (size_t k = 0; k < sizeof dbl / sizeof dbl[0]; ++k) {
        if (strcmp(a, dbl[k].name) == 0) {
            const char *v = tool_need(argc, argv, i);
            if (!v)
                return 2;
            return parse_double(prog, a, v, (double *)(void *)((char *)o + dbl[k].offset));
        }
    }
    if (strcmp(a, "--model") == 0) {
        if (!(pb->model_path = tool_need(argc, argv, i)))
            return 2;
    } else if (strcmp(a, "--method") == 0) {
        const char *v = tool_need(argc, argv, i);
        if (!v)
            return 2;
        o->method = clnode_method_by_name(v);
        if (!o->method) {
            fprintf(stderr, "%s: unknown method \"%s\" (", prog, v);
            tool_print_methods(stderr);
            fputs(")\n", stderr);
            return 2;
        }
    } else if (strcmp(a, "--constant-step") == 0) {
        o->constant_step = 1;
    } else if (strcmp(a, "--no-force-dtmin") == 0) {
        o->force_dtmin = 0;
    } else if (strcmp(a, "--max-steps") == 0) {
        const char *v = tool_need(argc, argv, i);
        if (!v)
            return 2;
        return parse_long(prog, a, v, 1, &o->max_steps);
    } else if (strcmp(a, "--precision") == 0) {
        const char *v = tool_need(argc, argv, i);
        if (!v)
            return 2;
        if (strcmp(v, "fp32") == 0)
            o->precision = CLNODE_FP32;
        else if (strcmp(v, "fp64") == 0)
            o->precision = CLNODE_FP64;
        else {
            fprintf(stderr, "%s: --precision expects fp32 or fp64, not \"%s\"\n", prog, v);
            return 2;
        }
    } else if (strcmp(a, "--gemm-precision") == 0) {
        const char *v = tool_need(argc, argv, i);
        if (!v)
            return 2;
        if (strcmp(v, "strict") == 0)
            o->gemm_mode = CLNODE_GEMM_STRICT;
        else if (strcmp(v, "tf32") == 0)
            o->gemm_mode = CLNODE_GEMM_TF32;
        else {
            fprintf(stderr, "%s: --gemm-precision expects strict or tf32, not \"%s\"\n", prog, v);
            return 2;
        }
    } else if (strcmp(a, "--precision-guard") == 0) {
        const char *v = tool_need(argc, argv, i);
        if (!v)
            return 2;
        if (strcmp(v, "warn") == 0)
            o->precision_guard = CLNODE_GUARD_WARN;
        else if (strcmp(v, "refuse") == 0)
            o->precision_guard = CLNODE_GUARD_REFUSE;
        else if (strcmp(v, "off") == 0)
            o->precision_guard = CLNODE_GUARD_OFF;
        else {
            fprintf(stderr, "%s: --precision-guard expects warn, refuse or off, not \"%s\"\n", prog,
                    v);
            return 2;
        }
    } else if (strcmp(a, "--batch") == 0) {
        const char *v = tool_need(argc, argv, i);
        if (!v)
            return 2;
        return parse_long(prog, a, v, 1, &pb->batch);
    } else if (strcmp(a, "--y0") == 0) {
        const char *v = tool_need(argc, argv, i);
        if (!v)
            return 2;
        return parse_list(prog, a, v, &pb->y0, &pb->y0_len);
    } else if (strcmp(a, "--y0-file") == 0) {
        if (!(pb->y0_file = tool_need(argc, argv, i)))
            return 2;
    } else if (strcmp(a, "--save") == 0) {
        const char *v = tool_need(argc, argv, i);
        if (!v)
            return 2;
        if (!pb->save_given) {
            pb->save_given = 1;
            o->save_t0 = o->save_t1 = o->save_steps = 0;
        }
        if (strcmp(v, "steps") == 0)
            o->save_steps = 1;
        else if (strcmp(v, "t0") == 0)
            o->save_t0 = 1;
        else if (strcmp(v, "t1") == 0)
            o->save_t1 = 1;
        else if (strncmp(v, "ts:", 3) == 0) {
            if (parse_list(prog, a, v + 3, &pb->ts, &pb->n_ts))
                return 2;
            o->save_ts = pb->ts;
            o->n_save_ts = pb->n_ts;
        } else {
            fprintf(stderr, "%s: --save expects steps, t0, t1 or ts:T1,T2,..., not \"%s\"\n", prog,
                    v);
            return 2;
        }
    } else if (strcmp(a, "--backend") == 0) {
        if (!(pb->backend = tool_need(argc, argv, i)))
            return 2;
    } else if (strcmp(a, "--device") == 0) {
        if (!(pb->device = tool_need(argc, argv, i)))
            return 2;
    } else {
        *used = 0;
    }
    return 0;
}

/* Reads a CSV of initial states: one trajectory per line, N numbers separated by commas; blank
 * lines and lines starting with '#' or a letter (a header) are skipped. */
static int read_y0_file(const char *prog, const char *path, size_t N, double **out, size_t *rows)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s: cannot open %s: %s\n", prog, path, strerror(errno));
        return 2;
    }
    size_t cap = 16, n = 0, line_no = 0;
    double *v = malloc(cap * N * sizeof(double));
    char line[65536];
    int rc = 0;
    while (v && fgets(line, sizeof line, f)) {
        ++line_no;
        if (!strchr(line, '\n') && !feof(f)) {
            fprintf(stderr, "%s: %s:%zu: line too long\n", prog, path, line_no);
            rc = 2;
            break;
        }
        char *p = line;
        while (*p == ' ' || *p == '\t')
            ++p;
        if (*p == '\n' || *p == '\r' || *p == '\0' || *p == '#' ||
            ((*p >= 'a' && *p <= 'z' && *p != 'e') || (*p >= 'A' && *p <= 'Z' && *p != 'E') ||
             *p == '"'))
            continue;
        if (n == cap) {
            cap *= 2;
            double *nv = realloc(v, cap * N * sizeof(double));
            if (!nv) {
                free(v);
                v = NULL;
                break;
            }
            v = nv;
        }
        size_t k = 0;
        char *end;
        for (;;) {
            errno = 0;
            double x = strtod(p, &end);
            if (end == p || errno == ERANGE || !isfinite(x)) {
                fprintf(stderr, "%s: %s:%zu: value %zu is not a finite number\n", prog, path,
                        line_no, k + 1);
                rc = 2;
                break;
            }
            if (k < N)
                v[n * N + k] = x;
            ++k;
            p = end;
            while (*p == ' ' || *p == '\t')
                ++p;
            if (*p == ',') {
                ++p;
                continue;
            }
            if (*p == '\n' || *p == '\r' || *p == '\0')
                break;
            fprintf(stderr, "%s: %s:%zu: unexpected character '%c'\n", prog, path, line_no, *p);
            rc = 2;
            break;
        }
        if (rc)
            break;
        if (k != N) {
            fprintf(stderr, "%s: %s:%zu: %zu values, but the model's state has %zu\n", prog, path,
                    line_no, k, N);
            rc = 2;
            break;
        }
        ++n;
    }
    fclose(f);
    if (!v) {
        fprintf(stderr, "%s: out of memory reading %s\n", prog, path);
        return 2;
    }
    if (!rc && n == 0) {
        fprintf(stderr, "%s: %s holds no initial state\n", prog, path);
        rc = 2;
    }
    if (rc) {
        free(v);
        return rc;
    }
    *out = v;
    *rows = n;
    return 0;
}

int tool_problem_open(tool_problem *pb, const char *prog, clnode_context **ctx,
                      clnode_model **model, double **y0, size_t *batch)
{
    *ctx = NULL;
    *model = NULL;
    *y0 = NULL;
    const char *spec = NULL;
    if (pb->device && !pb->backend &&
        (strchr(pb->device, ':') || strcmp(pb->device, "host") == 0 ||
         strcmp(pb->device, "opencl") == 0 || strcmp(pb->device, "cuda") == 0))
        spec = pb->device; /* a full device name */
    else if (pb->backend || pb->device) {
        const char *backend = pb->backend ? pb->backend : "opencl";
        if (pb->device && strcmp(backend, "host") != 0)
            snprintf(pb->device_spec, sizeof pb->device_spec, "%s:%s", backend, pb->device);
        else
            snprintf(pb->device_spec, sizeof pb->device_spec, "%s", backend);
        spec = pb->device_spec;
    }
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = spec;
    co.log = tool_log;
    co.log_user = (void *)prog;
    if (clnode_context_create(&co, ctx) != CLNODE_OK)
        return 2; /* the logger printed why */
    /* from here on, errors are printed from the context's message */
    clnode_context_options quiet = co;
    (void)quiet;
    clnode_status st = pb->model_path ? clnode_model_load_safetensors(*ctx, pb->model_path, model)
                                      : clnode_model_create_seed(*ctx, model);
    if (st != CLNODE_OK)
        goto fail;
    const size_t N = clnode_model_dim(*model);
    if (pb->y0_file) {
        if (pb->y0) {
            fprintf(stderr, "%s: give either --y0 or --y0-file, not both\n", prog);
            goto fail;
        }
        size_t rows = 0;
        if (read_y0_file(prog, pb->y0_file, N, y0, &rows))
            goto fail;
        if (pb->batch && (size_t)pb->batch != rows) {
            fprintf(stderr, "%s: --batch %ld disagrees with the %zu states of %s\n", prog,
                    pb->batch, rows, pb->y0_file);
            goto fail;
        }
        *batch = rows;
        return 0;
    }
    if (pb->y0 && pb->y0_len != N) {
        fprintf(stderr, "%s: --y0 has %zu values, but the model's state has %zu\n", prog,
                pb->y0_len, N);
        goto fail;
    }
    *batch = pb->batch ? (size_t)pb->batch : 1;
    *y0 = calloc(*batch * N, sizeof(double));
    if (!*y0) {
        fprintf(stderr, "%s: cannot allocate %zu initial states\n", prog, *batch);
        goto fail;
    }
    if (pb->y0)
        for (size_t b = 0; b < *batch; ++b)
            memcpy(*y0 + b * N, pb->y0, N * sizeof(double));
    return 0;
fail:
    free(*y0);
    *y0 = NULL;
    clnode_model_destroy(model);
    clnode_context_destroy(ctx);
    return 2;
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; ++s) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, double x)
{
    if (isfinite(x))
        fprintf(f, "%.17g", x);
    else
        fputs("null", f);
}

void tool_json_solution(FILE *f, const tool_problem *pb, const clnode_context *ctx,
                        const clnode_model *model, const clnode_solution *sol, size_t batch,
                        double wall)
{
    const clnode_solve_options *o = &pb->opts;
    const size_t N = clnode_model_dim(model);
    fputs("{\"clnode_version\": ", f);
    json_str(f, clnode_version_string());
    fputs(", \"backend\": ", f);
    json_str(f, clnode_context_backend(ctx));
    fputs(", \"device\": ", f);
    json_str(f, clnode_context_device(ctx));
    fputs(", \"model\": ", f);
    json_str(f, pb->model_path ? pb->model_path : "seed");
    fprintf(f, ", \"precision\": \"%s\", \"gemm_precision\": \"%s\", \"method\": \"%s\"",
            clnode_precision_name(o->precision), clnode_gemm_mode_name(o->gemm_mode),
            o->method->name);
    fprintf(f, ", \"controller\": \"%s\"", o->constant_step ? "constant" : "pid");
    fputs(", \"rtol\": ", f);
    json_num(f, o->rtol);
    fputs(", \"atol\": ", f);
    json_num(f, o->atol);
    fputs(", \"t0\": ", f);
    json_num(f, o->t0);
    fputs(", \"t1\": ", f);
    json_num(f, o->t1);
    fputs(", \"dt0\": ", f);
    json_num(f, o->dt0);
    fprintf(f,
            ", \"max_steps\": %ld, \"batch\": %zu, \"dim\": %zu, \"wall_seconds\": ", o->max_steps,
            batch, N);
    json_num(f, wall);
    fputs(", \"trajectories\": [", f);
    for (size_t b = 0; b < batch; ++b) {
        clnode_trajectory_stats s;
        clnode_solution_stats(sol, b, &s);
        fprintf(f,
                "%s\n  {\"result\": \"%s\", \"num_steps\": %ld, \"num_accepted\": %ld, "
                "\"num_rejected\": %ld, \"num_rhs_evals\": %ld, \"t_final\": ",
                b ? "," : "", clnode_result_name(s.result), s.num_steps, s.num_accepted,
                s.num_rejected, s.num_rhs_evals);
        json_num(f, s.t_final);
        fputs(", \"y_final\": [", f);
        const double *y = clnode_solution_y_final(sol, b);
        for (size_t j = 0; j < N; ++j) {
            if (j)
                fputs(", ", f);
            json_num(f, y[j]);
        }
        fputs("]}", f);
    }
    fputs("\n]}\n", f);
}

void tool_print_summary(FILE *f, const tool_problem *pb, const clnode_context *ctx,
                        const clnode_model *model, const clnode_solution *sol, size_t batch,
                        double wall)
{
    const clnode_solve_options *o = &pb->opts;
    const size_t N = clnode_model_dim(model);
    fprintf(f, "clnode %s on %s: %s\n", clnode_version_string(), clnode_context_backend(ctx),
            clnode_context_device(ctx));
    fprintf(f, "model    %s (%zu layers, dim %zu, %s)\n",
            pb->model_path ? pb->model_path : "built-in seed", clnode_model_num_layers(model), N,
            clnode_activation_name(clnode_model_activation(model)));
    if (o->constant_step)
        fprintf(f, "method   %s, constant steps of %g, %s\n", o->method->name, o->dt0,
                clnode_precision_name(o->precision));
    else
        fprintf(f, "method   %s, PID rtol %g atol %g, %s, GEMM %s\n", o->method->name, o->rtol,
                o->atol, clnode_precision_name(o->precision), clnode_gemm_mode_name(o->gemm_mode));
    fprintf(f, "interval [%g, %g], dt0 %g, batch %zu\n", o->t0, o->t1, o->dt0, batch);
    long min_steps = -1, max_steps = -1;
    size_t ok = 0;
    for (size_t b = 0; b < batch; ++b) {
        clnode_trajectory_stats s;
        clnode_solution_stats(sol, b, &s);
        ok += s.result == CLNODE_RESULT_SUCCESS;
        if (min_steps < 0 || s.num_steps < min_steps)
            min_steps = s.num_steps;
        if (s.num_steps > max_steps)
            max_steps = s.num_steps;
        if (b < 4 || b + 1 == batch) {
            fprintf(f,
                    "  traj %zu: %s, %ld steps (%ld accepted, %ld rejected), %ld RHS evals, "
                    "t = %g, y[0] = %.9g\n",
                    b, clnode_result_name(s.result), s.num_steps, s.num_accepted, s.num_rejected,
                    s.num_rhs_evals, s.t_final, clnode_solution_y_final(sol, b)[0]);
        } else if (b == 4) {
            fprintf(f, "  ...\n");
        }
    }
    fprintf(f, "%zu/%zu trajectories succeeded; steps per trajectory %ld..%ld; %.3f s\n", ok, batch,
            min_steps, max_steps, wall);
}

void tool_json_str(FILE *f, const char *s)
{
    json_str(f, s);
}

void tool_json_num(FILE *f, double x)
{
    json_num(f, x);
}
