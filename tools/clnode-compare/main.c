/* clnode-compare - the vendor cross-comparison: one problem on every device x GEMM mode x
 * precision present, against the host float64 strict reference.
 *
 * Default problem: the seed (clnode-solve's defaults) at batch sizes 1 and 2. For each row (device,
 * precision, GEMM mode) it probes the GEMM (clnode/probe.h), solves at every batch size, and
 * compares: step counts (per batch size, and whether every copy of a trajectory took the same
 * steps), the trajectories' results, and the largest relative deviation of the saved values from
 * the reference at the same times (11 equally spaced times over [t0, t1], and t1):
 *
 *     dev = max over times and trajectories of  max_j |y_j - ref_j| / (max_j |ref_j| + atol/rtol)
 *
 * i.e. relative to the state's magnitude, with the solver's own absolute floor atol/rtol where the
 * state is near zero. Exit statuses (tool_exit_help): 0 when every strict row agrees, 4 when a
 * strict row disagrees or the reference cannot be computed (tf32 rows never fail the run: they
 * exist to show the failure), 2 for bad input (a missing matplotlib with --plot included), 3 for
 * resources and devices. The JSON document and the plot's data file are described in
 * tools/clnode-compare/schema.md. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "compare.h"

int main(int argc, char **argv)
{
    tool_prog = COMPARE_PROG;
    static compare c;
    tool_problem_defaults(&c.pb);
    c.batches[0] = 1;
    c.batches[1] = 2;
    c.nb = 2;
    c.want_prec[0] = c.want_prec[1] = 1;
    c.want_mode[0] = c.want_mode[1] = 1;
    c.sensitivity = 1;
    clnode_sensitivity_default_options(&c.sopts);
    c.cur_row = -1;
    int rc = compare_parse_args(&c, argc, argv);
    if (rc >= 0) {
        if (c.help)
            compare_usage(stdout);
        if (c.version) {
            tool_print_version();
            printf("plot script: %s\n", compare_plot_script());
        }
        goto done;
    }
    rc = 0;
    c.sopts.tolerance = c.tolerance; /* 0: the same default rule as the rows' tolerance */
    if (c.pb.n_ts) {
        c.ts = c.pb.ts; /* --save ts:... chooses the comparison times */
        c.n_ts = c.pb.n_ts;
        c.pb.ts = NULL;
    }
    c.progress = isatty(STDERR_FILENO);
    if ((rc = compare_check_outputs(&c)) != 0)
        goto done;
    if (c.plot && (rc = compare_plot_check()) != 0)
        goto done;
    if (!c.ndev && (rc = compare_default_devices(&c)) != 0)
        goto done;
    if ((rc = compare_reference(&c)) != 0)
        goto done;
    for (size_t d = 0; d < c.ndev; ++d)
        if ((rc = compare_run_device(&c, c.devices[d])) != 0)
            goto done;
    if (c.progress)
        fprintf(stderr, "\r\033[K");
    int fails = 0;
    size_t warned = 0;
    for (size_t i = 0; i < c.nrows; ++i) {
        compare_judge(&c, &c.rows[i]);
        fails += c.rows[i].fails;
        warned += c.rows[i].nlog > 0;
    }
    rc = fails ? TOOL_EXIT_VERIFY : TOOL_EXIT_OK;
    if (warned)
        fprintf(stderr, "%s: the library logged messages on %zu of %zu rows (above)\n",
                COMPARE_PROG, warned, c.nrows);
    if (c.json) {
        compare_print_json(&c, rc);
    } else {
        compare_print_table(&c);
        printf("\n%s: %d strict row%s disagree%s with the reference\n", fails ? "FAIL" : "OK",
               fails, fails == 1 ? "" : "s", fails == 1 ? "s" : "");
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        tool_error("cannot write standard output");
        rc = TOOL_EXIT_RESOURCE;
    }
    if (c.plot) {
        const int prc = compare_make_plot(&c);
        if (prc && !rc)
            rc = prc;
    }
done:
    for (size_t i = 0; i < c.nrows; ++i) {
        for (size_t b = 0; b < MAX_BATCHES; ++b)
            clnode_solution_destroy(&c.rows[i].sol[b]);
        clnode_solution_destroy(&c.rows[i].plot_sol);
    }
    free(c.rows);
    clnode_solution_destroy(&c.ref);
    clnode_solution_destroy(&c.ref_dense);
    clnode_sensitivity_destroy(&c.base[0]);
    clnode_sensitivity_destroy(&c.base[1]);
    free(c.ts);
    free(c.dense_ts);
    free(c.y0base);
    compare_free_list(c.devices, c.ndev);
    tool_problem_free(&c.pb);
    return rc;
}
