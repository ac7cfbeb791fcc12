/* options.c - the solver's options as programs built against any release of this major version
 * pass them: defaults written up to the program's struct_size, and read back (clnode/common.h). */
#include "core/internal.h"

void clnode_solve_default_options_sized(clnode_solve_options *opts, size_t size)
{
    clnode_solve_options d;
    cln_solve_defaults(&d);
    d.struct_size = size;
    cln_struct_copy(opts, size, &d, sizeof d);
}

void clnode_solve_seed_options_sized(clnode_solve_options *opts, size_t size)
{
    clnode_solve_options d;
    cln_solve_seed_defaults(&d);
    d.struct_size = size;
    cln_struct_copy(opts, size, &d, sizeof d);
}

clnode_status cln_solve_options_import(clnode_context *ctx, const clnode_solve_options *in,
                                       clnode_solve_options *full)
{
    cln_solve_defaults(full);
    if (!in)
        return CLNODE_OK;
    const clnode_status st = cln_check_struct_size(ctx, "clnode_solve_options", in->struct_size,
                                                   CLN_SOLVE_OPTIONS_MIN, sizeof *full);
    if (st != CLNODE_OK)
        return st;
    cln_struct_copy(full, sizeof *full, in, in->struct_size);
    full->struct_size = sizeof *full;
    return CLNODE_OK;
}
