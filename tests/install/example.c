/* example.c - a program outside the tree, built against the installed library with
 * `pkg-config --cflags --libs clnode` (tests/install/check.sh): exponential decay y' = -y from
 * y(0) = 1 to t = 2, compared with e^-2. */
#include <math.h>
#include <stdio.h>

#include <clnode.h>

int main(void)
{
    clnode_context *ctx = NULL;
    clnode_model *model = NULL;
    clnode_solution *sol = NULL;
    if (clnode_context_create(NULL, &ctx) != CLNODE_OK)
        return 1;
    const size_t sizes[2] = {1, 1};
    const double w[1] = {-1.0};
    const double *weights[1] = {w};
    clnode_model_desc d = {CLNODE_MODEL_DESC_DEFAULTS, .num_layers = 1, .sizes = sizes,
                           .weights = weights};
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    o.precision = CLNODE_FP64;
    o.t1 = 2.0;
    o.rtol = 1e-10;
    o.atol = 1e-12;
    const double y0[1] = {1.0};
    clnode_problem p; /* one trajectory from y0 */
    clnode_problem_default(&p);
    p.batch = 1;
    p.y0 = y0;
    int rc = 1;
    if (clnode_model_create(ctx, &d, &model) == CLNODE_OK &&
        clnode_solve(ctx, model, &o, &p, &sol) == CLNODE_OK) {
        const double y = clnode_solution_y_final(sol, 0)[0];
        printf("clnode %s: y(2) = %.12f, exact %.12f\n", clnode_version_string(), y, exp(-2.0));
        rc = fabs(y - exp(-2.0)) < 1e-8 ? 0 : 1;
    } else {
        fprintf(stderr, "example: %s\n", clnode_context_last_error(ctx));
    }
    clnode_solution_destroy(&sol);
    clnode_model_destroy(&model);
    clnode_context_destroy(&ctx);
    return rc;
}
