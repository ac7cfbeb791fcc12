/* grad_ref.c - the library's gradient of a solve, printed for test_cli_grad.py to compare with
 * clnode-solve --grad-out bit for bit.
 *
 *   grad_ref MODEL|seed Y0.npy COT.npy [ARGS.npy|-] [ts=T1,T2,...] [NAME=VALUE ...]
 *
 * Solves the batch of initial states Y0.npy (B, N) of the model (the seed problem's options for
 * seed, the library's defaults for a model file without settings, as clnode-solve --model; then
 * each NAME=VALUE of the option table; conditioning inputs from ARGS.npy (B, k)) on the host with
 * keep_tape = 1, then clnode_gradient_compute with the cotangents COT.npy (B, T, N), and prints
 * every value of clnode_gradient_y0, then of clnode_gradient_inputs and clnode_gradient_params,
 * one "%a" per line after a line naming the array ("y0", "args", "params"). Exit status 0, or 1
 * with a message on standard error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clnode.h"
#include "clnode/gradient.h"
#include "npy.h"

static void print_array(const char *name, const double *v, size_t n)
{
    printf("%s\n", name);
    for (size_t i = 0; i < n; ++i)
        printf("%a\n", v[i]);
}

/* ts=T1,T2,...: the shared save times (at most 64). Returns their count. */
static size_t parse_ts(const char *s, double *ts)
{
    size_t n = 0;
    for (char *end; *s && n < 64; s = *end ? end + 1 : end)
        ts[n++] = strtod(s, &end);
    return n;
}

static int fail(const char *what, const char *why)
{
    fprintf(stderr, "grad_ref: %s: %s\n", what, why);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return fail("usage", "grad_ref MODEL|seed Y0.npy COT.npy [ARGS.npy|-] [NAME=VALUE ...]");
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = "host";
    clnode_context *ctx = NULL;
    clnode_model *model = NULL;
    if (clnode_context_create(&co, &ctx) != CLNODE_OK)
        return fail("context", "cannot create the host context");
    const clnode_status ms = strcmp(argv[1], "seed") == 0
                                 ? clnode_model_create_seed(ctx, &model)
                                 : clnode_model_load_safetensors(ctx, argv[1], &model);
    if (ms != CLNODE_OK)
        return fail(argv[1], clnode_context_last_error(ctx));
    cln_npy_header hy, hc, ha;
    double *y0 = NULL, *cot = NULL, *args = NULL, ts[64];
    char err[256];
    if (cln_npy_read(argv[2], &hy, &y0, err, sizeof err) || hy.ndim != 2)
        return fail(argv[2], "y0 (B, N) expected");
    if (cln_npy_read(argv[3], &hc, &cot, err, sizeof err) || hc.ndim != 3)
        return fail(argv[3], "cotangents (B, T, N) expected");
    int a = 4;
    if (argc > 4 && strchr(argv[4], '=') == NULL) {
        if (strcmp(argv[4], "-") != 0 && cln_npy_read(argv[4], &ha, &args, err, sizeof err))
            return fail(argv[4], err);
        a = 5;
    }
    clnode_solve_options o; /* the defaults clnode-solve takes: a model file's are the library's */
    if (strcmp(argv[1], "seed") == 0)
        clnode_solve_seed_options(&o);
    else
        clnode_solve_default_options(&o);
    clnode_problem p;
    clnode_problem_default(&p);
    for (; a < argc; ++a) {
        char name[64];
        const char *eq = strchr(argv[a], '=');
        if (!eq || (size_t)(eq - argv[a]) >= sizeof name)
            return fail(argv[a], "NAME=VALUE expected");
        memcpy(name, argv[a], (size_t)(eq - argv[a]));
        name[eq - argv[a]] = 0;
        if (strcmp(name, "ts") == 0) {
            p.n_save_ts = parse_ts(eq + 1, ts);
            p.save_ts = ts;
        } else if (clnode_solve_option_parse(&o, name, eq + 1, err, sizeof err) != CLNODE_OK) {
            return fail(argv[a], err);
        }
    }
    o.keep_tape = 1;
    p.batch = hy.shape[0];
    p.y0 = y0;
    p.inputs = args;
    clnode_solution *sol = NULL;
    clnode_gradient *g = NULL;
    if (clnode_solve(ctx, model, &o, &p, &sol) != CLNODE_OK ||
        clnode_gradient_compute(ctx, model, NULL, sol, hc.shape[1], cot, &g) != CLNODE_OK)
        return fail("solve and gradient", clnode_context_last_error(ctx));
    const size_t B = hy.shape[0], k = clnode_model_num_inputs(model);
    size_t np = 0;
    const double *params = clnode_gradient_params(g, &np);
    print_array("y0", clnode_gradient_y0(g), B * clnode_model_dim(model));
    if (k)
        print_array("args", clnode_gradient_inputs(g), B * k);
    print_array("params", params, np);
    clnode_gradient_destroy(&g);
    clnode_solution_destroy(&sol);
    clnode_model_destroy(&model);
    clnode_context_destroy(&ctx);
    free(y0);
    free(cot);
    free(args);
    return 0;
}
