/* options.h - the solver's options and problem as the library reads them (options.c): their
 * defaults, the import of a program's struct of any known size, and their validation. Not
 * installed. */
#ifndef CLN_OPTIONS_H
#define CLN_OPTIONS_H

#include "core/internal.h"

/* The documented defaults (clnode_solve_default_options), and the seed experiment's. */
void cln_solve_defaults(clnode_solve_options *o);
void cln_solve_seed_defaults(clnode_solve_options *o);

/* The program's options (NULL: the defaults) as this library's full struct: the fields the
 * program's struct_size covers, the defaults for the rest. Errors: a struct_size this library
 * does not know. */
clnode_status cln_solve_options_import(clnode_context *ctx, const clnode_solve_options *in,
                                       clnode_solve_options *full);

/* The options of the table against their type and range: the CLNODE_OPTION_CONTROLLER ones
 * (which adaptive solves read) when `controller`, else the others. Not checked here: the
 * CLNODE_OPTION_PROBLEM ones (with each trajectory's interval) and the method (any descriptor
 * that fits the kernels, cln_validate_method). CLNODE_OK, or CLNODE_ERR_INVALID_ARGUMENT with the
 * message of clnode_solve_option_set. */
clnode_status cln_validate_options(clnode_context *ctx, const clnode_solve_options *o,
                                   int controller);

/* The program's problem as this library's full struct, as cln_solve_options_import. Errors: a
 * NULL problem, a struct_size this library does not know. */
clnode_status cln_problem_import(clnode_context *ctx, const clnode_problem *in,
                                 clnode_problem *full);

#endif /* CLN_OPTIONS_H */
