/* options.c - the solver's options: their documented defaults, written up to the program's
 * struct_size, and read back as this library's struct (the sizes policy of clnode/common.h).
 * A field appended to clnode_solve_options gets its default in cln_solve_defaults, here, and is
 * read only from programs whose struct_size covers it; nothing else changes. The problem
 * (clnode_problem) is read the same way. */
#include "core/internal.h"

void cln_solve_defaults(clnode_solve_options *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->method = clnode_method_tsit5;
    o->precision = CLNODE_FP32;
    o->gemm_mode = CLNODE_GEMM_STRICT;
    o->t0 = 0.0;
    o->t1 = 1.0;
    o->dt0 = 0.0;
    o->constant_step = 0;
    o->rtol = 1e-3;
    o->atol = 1e-6;
    o->pcoeff = 0.0;
    o->icoeff = 1.0;
    o->dcoeff = 0.0;
    o->dtmin = 0.0;
    o->dtmax = 0.0;
    o->force_dtmin = 1;
    o->factormin = 0.2;
    o->factormax = 10.0;
    o->safety = 0.9;
    o->max_steps = 4096;
    o->save_t0 = 0;
    o->save_t1 = 1;
    o->save_steps = 0;
    o->progress = NULL;
    o->progress_user = NULL;
    o->cancel = NULL;
    o->cancel_user = NULL;
    o->compact = 1;
    o->precision_guard = CLNODE_GUARD_WARN;
}

void cln_solve_seed_defaults(clnode_solve_options *o)
{
    cln_solve_defaults(o);
    o->t0 = 0.0;
    o->t1 = 50.0;
    o->dt0 = 0.02;
    o->rtol = 1e-4;
    o->atol = 1e-6;
}

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

void clnode_problem_default_sized(clnode_problem *p, size_t size)
{
    clnode_problem d;
    memset(&d, 0, sizeof d); /* no trajectories; every array NULL */
    d.struct_size = size;
    cln_struct_copy(p, size, &d, sizeof d);
}

clnode_status cln_problem_import(clnode_context *ctx, const clnode_problem *in,
                                 clnode_problem *full)
{
    memset(full, 0, sizeof *full);
    full->struct_size = sizeof *full;
    CLN_CHECK(ctx, in, CLNODE_ERR_INVALID_ARGUMENT, "no problem (clnode_problem is NULL)");
    const clnode_status st = cln_check_struct_size(ctx, "clnode_problem", in->struct_size,
                                                   CLN_PROBLEM_MIN, sizeof *full);
    if (st != CLNODE_OK)
        return st;
    cln_struct_copy(full, sizeof *full, in, in->struct_size);
    full->struct_size = sizeof *full;
    return CLNODE_OK;
}
