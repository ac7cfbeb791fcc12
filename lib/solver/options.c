/* options.c - the solver's options: their documented defaults, written up to the program's
 * struct_size, and read back as this library's struct (the sizes policy of clnode/common.h).
 * A field appended to clnode_solve_options gets its default in cln_solve_defaults, here, and is
 * read only from programs whose struct_size covers it; nothing else changes. */
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
    o->save_ts = NULL;
    o->n_save_ts = 0;
    o->progress = NULL;
    o->progress_user = NULL;
    o->cancel = NULL;
    o->cancel_user = NULL;
    o->t0s = NULL; /* ensembles: the scalars t0, t1, dt0 apply to every trajectory */
    o->t1s = NULL;
    o->dt0s = NULL;
    o->inputs = NULL;
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
