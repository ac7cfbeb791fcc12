/* test_expect.h - what the tests of the gradient and tangent passes share: a solve that must
 * succeed (test_solve_or_fail) and a refusal that must name what is wrong (test_expect_error).
 * Header-only; include it after <cmocka.h>'s prerequisites. */
#ifndef CLNODE_TEST_EXPECT_H
#define CLNODE_TEST_EXPECT_H

#include <stdio.h>
#include <string.h>

#include "clnode.h"

/* The solution of problem p, or the running test fails with the status and message. */
static inline clnode_solution *test_solve_or_fail(clnode_context *ctx, const clnode_model *m,
                                                  const clnode_solve_options *o,
                                                  const clnode_problem *p)
{
    clnode_solution *s = NULL;
    clnode_status st = clnode_solve(ctx, m, o, p, &s);
    if (st != CLNODE_OK)
        fail_msg("clnode_solve: %s: %s", clnode_status_name(st), clnode_context_last_error(ctx));
    return s;
}

/* A call that returned `got` on ctx must have refused with `want`, its message saying `text`;
 * `what` names the case (printed with the message). */
static inline void test_expect_error(clnode_context *ctx, clnode_status got, clnode_status want,
                                     const char *text, const char *what)
{
    const char *msg = clnode_context_last_error(ctx);
    printf("%s: %s: %s\n", what, clnode_status_name(got), msg);
    if (got != want)
        fail_msg("%s: %s, expected %s (%s)", what, clnode_status_name(got),
                 clnode_status_name(want), msg);
    if (!strstr(msg, text))
        fail_msg("%s: the message \"%s\" does not say \"%s\"", what, msg, text);
}

#endif /* CLNODE_TEST_EXPECT_H */
